//! The forge that receives commit statuses and plan comments: `forge` as written
//! ([`ForgeFile`]) and checked ([`ForgeConfig`]), plus the repository slug ([`RepoSlug`]) a
//! source maps to on the forge.

use std::fmt;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::sources::url_has_password;
use super::{Checker, Secret, SecretRef};

const GITHUB_API: &str = "https://api.github.com";

/// The forge that receives commit statuses and PR comments, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForgeFile {
    pub kind: Spanned<ForgeKind>,
    pub base_url: Option<Spanned<String>>,
    pub token: Option<Spanned<SecretRef>>,
    pub github_app: Option<Spanned<super::sources::GithubAppFile>>,
    pub app_status_limit: Option<Spanned<u32>>,
}

/// Per-app commit statuses one deploy posts at most (`forge.appStatusLimit`): a forge's write
/// budget is small (GitHub's secondary limit is about 80 content writes a minute), and the
/// first deploy of a large repository plans every app.
pub const DEFAULT_APP_STATUS_LIMIT: usize = 100;

/// The forge kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    Github,
    Gitea,
    Gitlab,
}

impl ForgeKind {
    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::Github => "github",
            ForgeKind::Gitea => "gitea",
            ForgeKind::Gitlab => "gitlab",
        }
    }
}

/// The checked forge settings.
#[derive(Debug, Clone)]
pub struct ForgeConfig {
    pub kind: ForgeKind,
    /// The forge's web root (`https://gitea.example.com`); for GitHub, the API root.
    pub base_url: String,
    /// The API token; empty with `github_app`, whose installation tokens are used instead.
    pub token: Secret,
    pub github_app: Option<std::sync::Arc<crate::source::github_app::InstallationTokens>>,
    /// A deploy of more apps than this posts statuses only for the apps that did not succeed
    /// (at most this many); the summary status and the plan page cover every app.
    pub app_status_limit: usize,
}

/// A repository's `owner/name` on the forge.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoSlug {
    pub owner: String,
    pub name: String,
}

impl fmt::Display for RepoSlug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

impl RepoSlug {
    /// Parses `owner/name`.
    pub fn parse(text: &str) -> Option<RepoSlug> {
        let (owner, name) = text.split_once('/')?;
        let valid = |part: &str| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        (valid(owner) && valid(name)).then(|| RepoSlug {
            owner: owner.to_owned(),
            name: name.to_owned(),
        })
    }

    /// Reads `owner/name` off a clone URL (`https://host/owner/name.git`,
    /// `git@host:owner/name.git`, `ssh://git@host/owner/name`).
    pub fn from_url(url: &str) -> Option<RepoSlug> {
        let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
        // scp-like `git@host:owner/name`: the path follows the first ':'.
        let path = if url.contains("://") {
            without_scheme.split_once('/')?.1
        } else {
            without_scheme.split_once(':')?.1
        };
        let path = path.trim_end_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let mut parts = path.rsplit('/');
        let name = parts.next()?;
        let owner = parts.next()?;
        RepoSlug::parse(&format!("{owner}/{name}"))
    }
}

pub(super) fn check_forge(checker: &mut Checker<'_>, forge: ForgeFile) -> Option<ForgeConfig> {
    let (token, github_app) = match (&forge.token, &forge.github_app) {
        (Some(token), None) => (checker.spanned_secret("forge.token", token), None),
        (None, Some(app)) => {
            let tokens =
                super::sources::github_app_tokens(checker, "forge.githubApp", app, &app.value);
            (Some(Secret::new("")), Some(tokens?))
        }
        _ => {
            checker.problem(
                "forge",
                &forge.kind,
                "give exactly one of `token` and `githubApp`",
            );
            return None;
        }
    };
    let kind = forge.kind.value;
    let base_url = match (kind, &forge.base_url) {
        (ForgeKind::Github, None) => GITHUB_API.to_owned(),
        (ForgeKind::Gitea | ForgeKind::Gitlab, None) => {
            checker.problem(
                "forge.baseUrl",
                &forge.kind,
                format!("is required for {}", kind.as_str()),
            );
            return None;
        }
        (_, Some(url)) => {
            let trimmed = url.value.trim().trim_end_matches('/');
            if !(trimmed.starts_with("https://") || trimmed.starts_with("http://")) {
                checker.problem("forge.baseUrl", url, "must be an http:// or https:// URL");
                return None;
            }
            if url_has_password(trimmed) {
                checker.problem(
                    "forge.baseUrl",
                    url,
                    "must not embed credentials; use `token`",
                );
                return None;
            }
            trimmed.to_owned()
        }
    };
    Some(ForgeConfig {
        kind,
        base_url,
        token: token?,
        github_app,
        app_status_limit: forge
            .app_status_limit
            .map_or(DEFAULT_APP_STATUS_LIMIT, |limit| limit.value as usize),
    })
}
