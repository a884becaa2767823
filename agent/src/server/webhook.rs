//! Webhook verification and parsing for Gitea, GitHub and GitLab push and pull (merge) request
//! events.
//!
//! Gitea and GitHub sign the raw body with HMAC-SHA256 under the shared secret: Gitea sends the
//! hex digest in `X-Gitea-Signature`, GitHub sends `sha256=<hex>` in `X-Hub-Signature-256`.
//! GitLab sends the secret itself as `X-Gitlab-Token`. Every comparison is constant-time
//! (`Mac::verify_slice`, or a full-length XOR fold for GitLab's token). Only the repository identity is read from the body:
//! the event only tells the agent *which* source to poll now; what changed comes from git.

use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::config::{RepoSlug, Secret};

/// Which forge sent a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFlavor {
    Gitea,
    GitHub,
    GitLab,
}

impl WebhookFlavor {
    /// The header carrying the signature.
    pub fn signature_header(self) -> &'static str {
        match self {
            WebhookFlavor::Gitea => "x-gitea-signature",
            WebhookFlavor::GitHub => "x-hub-signature-256",
            WebhookFlavor::GitLab => "x-gitlab-token",
        }
    }

    /// The header naming the event.
    pub fn event_header(self) -> &'static str {
        match self {
            WebhookFlavor::Gitea => "x-gitea-event",
            WebhookFlavor::GitHub => "x-github-event",
            WebhookFlavor::GitLab => "x-gitlab-event",
        }
    }
}

/// Why a webhook was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    #[error("missing signature header")]
    MissingSignature,
    #[error("signature does not match")]
    BadSignature,
    #[error("payload is not a repository event: {0}")]
    BadPayload(String),
}

/// Checks `signature` (as sent in the flavor's header) against the body.
///
/// # Errors
///
/// [`WebhookError::MissingSignature`] or [`WebhookError::BadSignature`].
pub fn verify_signature(
    flavor: WebhookFlavor,
    secret: &Secret,
    signature: Option<&str>,
    body: &[u8],
) -> Result<(), WebhookError> {
    let signature = signature.ok_or(WebhookError::MissingSignature)?.trim();
    let hex_digest = match flavor {
        WebhookFlavor::Gitea => signature,
        WebhookFlavor::GitHub => signature
            .strip_prefix("sha256=")
            .ok_or(WebhookError::BadSignature)?,
        WebhookFlavor::GitLab => {
            return constant_time_eq(signature.as_bytes(), secret.expose().as_bytes())
                .then_some(())
                .ok_or(WebhookError::BadSignature);
        }
    };
    let expected = hex::decode(hex_digest).map_err(|_| WebhookError::BadSignature)?;
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.expose().as_bytes())
        .map_err(|_| WebhookError::BadSignature)?;
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| WebhookError::BadSignature)
}

/// Whether two byte strings are equal, in time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The hex HMAC-SHA256 of `body` under `secret`, as Gitea sends it (tests and tools).
pub fn sign(secret: &Secret, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// The repository an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRepository {
    pub slug: Option<RepoSlug>,
    /// Clone URLs the forge reports (HTTP and SSH).
    pub urls: Vec<String>,
}

#[derive(Deserialize)]
struct Payload {
    repository: Option<RepositoryPayload>,
    /// GitLab names the repository in `project`.
    project: Option<ProjectPayload>,
}

#[derive(Deserialize)]
struct RepositoryPayload {
    full_name: Option<String>,
    clone_url: Option<String>,
    ssh_url: Option<String>,
    html_url: Option<String>,
}

#[derive(Deserialize)]
struct ProjectPayload {
    path_with_namespace: Option<String>,
    git_http_url: Option<String>,
    git_ssh_url: Option<String>,
    web_url: Option<String>,
}

/// Reads the repository out of a push or pull-request payload.
///
/// # Errors
///
/// [`WebhookError::BadPayload`] when the body is not JSON with a `repository` object.
pub fn parse_repository(body: &[u8]) -> Result<EventRepository, WebhookError> {
    let payload: Payload = serde_json::from_slice(body)
        .map_err(|error| WebhookError::BadPayload(error.to_string()))?;
    if let Some(project) = payload.project {
        return Ok(EventRepository {
            slug: project
                .path_with_namespace
                .as_deref()
                .and_then(RepoSlug::parse),
            urls: [project.git_http_url, project.git_ssh_url, project.web_url]
                .into_iter()
                .flatten()
                .collect(),
        });
    }
    let repository = payload
        .repository
        .ok_or_else(|| WebhookError::BadPayload("no `repository`".to_owned()))?;
    Ok(EventRepository {
        slug: repository.full_name.as_deref().and_then(RepoSlug::parse),
        urls: [
            repository.clone_url,
            repository.ssh_url,
            repository.html_url,
        ]
        .into_iter()
        .flatten()
        .collect(),
    })
}

/// Whether a source (by its URL and forge repository) is the event's repository.
pub fn matches_source(
    event: &EventRepository,
    source_url: &str,
    source_repo: Option<&RepoSlug>,
) -> bool {
    let same_slug = |a: &RepoSlug, b: &RepoSlug| {
        a.owner.eq_ignore_ascii_case(&b.owner) && a.name.eq_ignore_ascii_case(&b.name)
    };
    if let (Some(event_slug), Some(source_slug)) = (&event.slug, source_repo)
        && same_slug(event_slug, source_slug)
    {
        return true;
    }
    let normalize = |url: &str| {
        url.trim_end_matches('/')
            .trim_end_matches(".git")
            .to_ascii_lowercase()
    };
    event
        .urls
        .iter()
        .any(|url| normalize(url) == normalize(source_url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitea_and_github_signatures() {
        let secret = Secret::new("s3cr3t");
        let body = br#"{"repository":{"full_name":"o/r"}}"#;
        let hex_sig = sign(&secret, body);
        assert_eq!(hex_sig.len(), 64);
        assert_eq!(
            verify_signature(WebhookFlavor::Gitea, &secret, Some(&hex_sig), body),
            Ok(())
        );
        let github = format!("sha256={hex_sig}");
        assert_eq!(
            verify_signature(WebhookFlavor::GitHub, &secret, Some(&github), body),
            Ok(())
        );
        // GitHub's header without its prefix, a tampered body, a wrong secret, no header.
        assert_eq!(
            verify_signature(WebhookFlavor::GitHub, &secret, Some(&hex_sig), body),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify_signature(WebhookFlavor::Gitea, &secret, Some(&hex_sig), b"{}"),
            Err(WebhookError::BadSignature)
        );
        let other = sign(&Secret::new("other"), body);
        assert_eq!(
            verify_signature(WebhookFlavor::Gitea, &secret, Some(&other), body),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify_signature(WebhookFlavor::Gitea, &secret, Some("zz"), body),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify_signature(WebhookFlavor::Gitea, &secret, None, body),
            Err(WebhookError::MissingSignature)
        );
    }

    #[test]
    fn gitlab_tokens_and_projects() {
        let secret = Secret::new("s3cr3t");
        let body = br#"{"object_kind":"push","project":{"path_with_namespace":"team/apps","git_http_url":"https://gitlab.example/team/apps.git","git_ssh_url":"git@gitlab.example:team/apps.git"}}"#;
        assert_eq!(
            verify_signature(WebhookFlavor::GitLab, &secret, Some("s3cr3t"), body),
            Ok(())
        );
        for wrong in ["s3cr3u", "s3cr3", "", "s3cr3t-and-more"] {
            assert_eq!(
                verify_signature(WebhookFlavor::GitLab, &secret, Some(wrong), body),
                Err(WebhookError::BadSignature),
                "{wrong:?}"
            );
        }
        assert_eq!(
            verify_signature(WebhookFlavor::GitLab, &secret, None, body),
            Err(WebhookError::MissingSignature)
        );
        let event = parse_repository(body).unwrap();
        assert!(matches_source(
            &event,
            "git@gitlab.example:team/apps.git",
            None
        ));
        assert!(matches_source(
            &event,
            "https://elsewhere/x",
            RepoSlug::parse("team/apps").as_ref()
        ));
    }

    #[test]
    fn repository_matching() {
        let event = parse_repository(
            br#"{"ref":"refs/heads/main","repository":{"full_name":"Team/Apps","clone_url":"http://127.0.0.1:3000/Team/Apps.git"}}"#,
        )
        .unwrap();
        assert!(matches_source(
            &event,
            "https://elsewhere/x/y",
            RepoSlug::parse("team/apps").as_ref()
        ));
        assert!(matches_source(
            &event,
            "http://127.0.0.1:3000/team/apps",
            None
        ));
        assert!(!matches_source(
            &event,
            "http://127.0.0.1:3000/team/other.git",
            RepoSlug::parse("team/other").as_ref()
        ));
        assert!(matches!(
            parse_repository(b"{}"),
            Err(WebhookError::BadPayload(_))
        ));
        assert!(matches!(
            parse_repository(b"not json"),
            Err(WebhookError::BadPayload(_))
        ));
    }
}
