//! Forges: commit statuses and pull-request comments on Gitea, GitHub and GitLab.
//!
//! [`Forge`] is the small trait they all speak; [`gitea::GiteaForge`] and [`github::GitHubForge`]
//! implement it over the same REST shapes ([`rest`]), [`gitlab::GitLabForge`] over GitLab's
//! own (project ids, merge requests, notes). The agent never calls a forge inline: it
//! hands operations to the [`outbox::Outbox`], which retries with backoff while the forge is
//! down, so a forge outage never blocks deployment and no status is lost.
//!
//! Tokens live in [`crate::config::Secret`] and only reach the `Authorization` header; errors
//! carry the method, path and HTTP status, never a header.

pub mod gitea;
pub mod github;
pub mod gitlab;
pub mod issues;
pub mod outbox;
mod rest;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::config::{ForgeConfig, ForgeKind, RepoSlug};
use crate::source::git::CommitId;

/// GitHub truncates nothing but rejects a status description over 140 characters; Gitea
/// accepts more, but one limit keeps statuses identical on both.
pub const STATUS_DESCRIPTION_LIMIT: usize = 140;

/// The state of a commit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusState {
    Pending,
    Success,
    /// The change is wrong (a broken app, drift found).
    Failure,
    /// We could not finish (a cluster was unreachable).
    Error,
}

impl StatusState {
    /// The name both Gitea and GitHub use.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failure",
            StatusState::Error => "error",
        }
    }
}

/// One commit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    /// `driftless/<namespace>/<app>` or `driftless`.
    pub context: String,
    pub state: StatusState,
    /// Truncated to [`STATUS_DESCRIPTION_LIMIT`] characters by [`CommitStatus::new`].
    pub description: String,
    /// The agent's plan page for the commit.
    pub target_url: Option<String>,
}

impl CommitStatus {
    /// A status whose description is cut to the forge limit (on a character boundary, with `…`).
    pub fn new(
        context: impl Into<String>,
        state: StatusState,
        description: &str,
        target_url: Option<String>,
    ) -> CommitStatus {
        CommitStatus {
            context: context.into(),
            state,
            description: truncate_chars(description, STATUS_DESCRIPTION_LIMIT),
            target_url,
        }
    }
}

/// An open pull request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PullRequest {
    pub number: u64,
    pub title: String,
    pub head_commit: CommitId,
    /// The branch the PR merges into.
    pub base_branch: String,
    /// The login of who opened it (`""` when the forge did not say).
    pub author: String,
    /// Its head lives in another repository than its base (or the forge did not say where).
    pub from_fork: bool,
}

/// A comment on a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub id: CommentId,
    /// The login of who wrote it (`""` when the forge did not say).
    pub author: String,
    pub body: String,
}

/// The id of a comment on the forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommentId(pub u64);

/// A forge call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ForgeError {
    /// The forge answered with an error status.
    #[error("{method} {path}: HTTP {status}: {message}")]
    RequestFailed {
        method: &'static str,
        path: String,
        status: u16,
        message: String,
    },
    /// The forge asked us to slow down (429, or GitHub's 403 with rate-limit headers) and said
    /// when to come back.
    #[error("{method} {path}: HTTP {status}: rate limited; retry in {}s: {message}", retry_after.as_secs())]
    RateLimited {
        method: &'static str,
        path: String,
        status: u16,
        retry_after: Duration,
        message: String,
    },
    /// The forge could not be reached (connection refused, timeout).
    #[error("{method} {path}: {message}")]
    Unreachable {
        method: &'static str,
        path: String,
        message: String,
    },
    /// The forge answered with a body we could not read.
    #[error("{method} {path}: unexpected response: {message}")]
    BadResponse {
        method: &'static str,
        path: String,
        message: String,
    },
}

impl ForgeError {
    /// Whether retrying later can help: network errors, rate limits and server errors.
    pub fn is_retryable(&self) -> bool {
        match self {
            ForgeError::Unreachable { .. } | ForgeError::RateLimited { .. } => true,
            ForgeError::RequestFailed { status, .. } => *status == 429 || *status >= 500,
            ForgeError::BadResponse { .. } => false,
        }
    }
}

impl ForgeError {
    /// How long the forge asked us to wait before the next call, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ForgeError::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// Whether the failure is the forge's as a whole (down, or rate limiting this token), so
    /// that every other call would fail the same way now, rather than this one call's.
    pub fn affects_every_call(&self) -> bool {
        matches!(
            self,
            ForgeError::Unreachable { .. } | ForgeError::RateLimited { .. }
        )
    }
}

/// What the agent needs from a forge.
pub trait Forge: Send + Sync + fmt::Debug {
    /// Sets (or replaces) the status with `status.context` on a commit.
    fn set_status<'a>(
        &'a self,
        repo: &'a RepoSlug,
        commit: &'a CommitId,
        status: &'a CommitStatus,
    ) -> BoxFuture<'a, Result<(), ForgeError>>;

    /// Every open pull request, sorted by number.
    fn open_pulls<'a>(
        &'a self,
        repo: &'a RepoSlug,
    ) -> BoxFuture<'a, Result<Vec<PullRequest>, ForgeError>>;

    /// Creates the comment on `pull` carrying `marker`, or edits our previous one in place.
    /// `body` must already contain `marker`.
    fn upsert_comment<'a>(
        &'a self,
        repo: &'a RepoSlug,
        pull: u64,
        marker: &'a str,
        body: &'a str,
    ) -> BoxFuture<'a, Result<CommentId, ForgeError>>;

    /// The largest comment body the forge accepts, in characters.
    fn comment_limit(&self) -> usize;

    /// Brings the issue whose body opens with `marker` to `state`: creates or edits it
    /// (open), or closes it (closed; no open issue is fine).
    fn sync_issue<'a>(
        &'a self,
        repo: &'a RepoSlug,
        marker: &'a str,
        state: issues::IssueState<'a>,
    ) -> BoxFuture<'a, Result<(), ForgeError>>;

    /// Every comment on `pull` (open or merged), oldest first.
    fn comments<'a>(
        &'a self,
        repo: &'a RepoSlug,
        pull: u64,
    ) -> BoxFuture<'a, Result<Vec<Comment>, ForgeError>>;
}

/// Builds the forge client for the configured kind.
///
/// # Errors
///
/// [`ForgeError::Unreachable`] when the HTTP client cannot be built (no TLS backend).
pub fn connect(config: &ForgeConfig) -> Result<Box<dyn Forge>, ForgeError> {
    let app = config.github_app.clone();
    match config.kind {
        ForgeKind::Gitea => {
            let mut forge = gitea::GiteaForge::new(&config.base_url, config.token.clone())?;
            forge.rest.use_app_tokens(app);
            Ok(Box::new(forge))
        }
        ForgeKind::Github => {
            let mut forge = github::GitHubForge::new(&config.base_url, config.token.clone())?;
            forge.rest.use_app_tokens(app);
            Ok(Box::new(forge))
        }
        ForgeKind::Gitlab => {
            let mut forge = gitlab::GitLabForge::new(&config.base_url, config.token.clone())?;
            forge.rest.use_app_tokens(app);
            Ok(Box::new(forge))
        }
    }
}

/// The hidden marker that identifies the drift issue of one app of a source.
pub fn drift_issue_marker(source: &str, app: &analyzer::AppRef) -> String {
    format!("<!-- driftless:drift source={source} app={app} -->")
}

/// The hidden marker that identifies our plan comment on a pull request, one per source.
pub fn plan_comment_marker(source: &str) -> String {
    format!("<!-- driftless:plan source={source} -->")
}

/// `body` with `marker` on its first line, cut to `limit` characters with a note when longer.
/// The markdown report collapses large diffs first; this is the last guard.
pub fn fit_comment(marker: &str, body: &str, limit: usize) -> String {
    const NOTE: &str =
        "\n\n… (truncated: the plan is larger than the forge's comment limit; see the plan page)";
    let full = format!("{marker}\n{body}");
    if full.chars().count() <= limit {
        return full;
    }
    let keep = limit.saturating_sub(NOTE.chars().count());
    let mut cut: String = full.chars().take(keep).collect();
    cut.push_str(NOTE);
    cut
}

/// The first `limit` characters of `text`, ending with `…` when cut.
pub fn truncate_chars(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(limit.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_fit_140_characters() {
        let long = "é".repeat(300);
        let status = CommitStatus::new("driftless", StatusState::Failure, &long, None);
        assert_eq!(status.description.chars().count(), 140);
        assert!(status.description.ends_with('…'));
        let short = CommitStatus::new("driftless", StatusState::Success, "3 apps deployed", None);
        assert_eq!(short.description, "3 apps deployed");
    }

    #[test]
    fn comments_keep_the_marker_and_fit_the_limit() {
        let marker = plan_comment_marker("platform");
        let body = "x".repeat(1000);
        let fitted = fit_comment(&marker, &body, 200);
        assert!(fitted.starts_with(&marker));
        assert_eq!(fitted.chars().count(), 200);
        assert!(fitted.contains("truncated"));
        let small = fit_comment(&marker, "plan", 200);
        assert_eq!(small, format!("{marker}\nplan"));
    }

    #[test]
    fn retryable_errors() {
        let failed = |status| ForgeError::RequestFailed {
            method: "POST",
            path: "/x".into(),
            status,
            message: String::new(),
        };
        assert!(failed(503).is_retryable());
        assert!(failed(429).is_retryable());
        assert!(!failed(404).is_retryable());
        assert!(!failed(401).is_retryable());
    }
}
