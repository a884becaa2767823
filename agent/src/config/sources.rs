//! Git sources: `sources[]` as written ([`SourceFile`]) and checked ([`SourceConfig`]): URL,
//! branch, include/exclude globs ([`PathFilter`]), poll interval and credentials; what it may
//! touch, preview and apply as is in `boundary.rs`.

use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_saphyr::Spanned;

use analyzer::boundary::SourceBoundary;

use super::boundary::{
    BoundaryFile, PreviewPolicy, PreviewsFile, ServiceAccountFile, ServiceAccountRef,
    check_boundary, check_previews, check_service_account,
};
use super::transport::{FetchFile, check_transport};
use super::{Checker, RepoSlug, Secret, SecretRef, is_dns_label};
use crate::prune_guard::PruneBudget;
use crate::source::fetch::CaBundle;
use crate::source::known_hosts::KnownHosts;
use crate::source::relay::FetchBudget;

const DEFAULT_BRANCH: &str = "main";
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// One git source as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SourceFile {
    pub name: Spanned<String>,
    pub url: Spanned<String>,
    #[serde(default)]
    pub branch: Option<Spanned<String>>,
    #[serde(default)]
    pub paths: Option<PathsFile>,
    pub poll_interval: Option<Spanned<String>>,
    pub credentials: Option<Spanned<CredentialsFile>>,
    /// `owner/name` on the forge, when it cannot be read off the URL.
    pub forge_repo: Option<Spanned<String>>,
    pub boundary: Option<BoundaryFile>,
    pub previews: Option<PreviewsFile>,
    pub service_account: Option<ServiceAccountFile>,
    /// Whether the apps' missing namespaces are created (default true).
    pub create_namespaces: Option<bool>,
    /// How much one pass may prune before it waits for approval.
    pub prune: Option<PruneFile>,
    /// SSH host keys trusted for this source, as `known_hosts` lines (required for SSH).
    pub known_hosts: Option<Spanned<String>>,
    /// PEM certificate authorities trusted for this HTTPS source, beside the system's.
    pub ca_file: Option<Spanned<std::path::PathBuf>>,
    /// The fetch's depth and network budget.
    pub fetch: Option<Spanned<FetchFile>>,
    /// Apply a merged pull request's apps only when their plan is the one reviewed.
    pub apply_reviewed_plan: Option<bool>,
    pub reviewed_plan: Option<super::reviewed::ReviewedPlanFile>,
}

/// A source's prune budget as written (`prune: {maxObjects, maxPercent}`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PruneFile {
    pub max_objects: Option<usize>,
    pub max_percent: Option<Spanned<usize>>,
}

/// Include and exclude globs, relative to the repository root.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PathsFile {
    #[serde(default)]
    pub include: Vec<Spanned<String>>,
    #[serde(default)]
    pub exclude: Vec<Spanned<String>>,
}

/// Git credentials: a token or a password (HTTP basic auth), an SSH private key, or a GitHub
/// App installation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialsFile {
    pub username: Option<String>,
    pub token: Option<SecretRef>,
    /// A password for HTTP basic auth (with `username`); the same as `token` on the wire.
    pub password: Option<SecretRef>,
    pub ssh_key: Option<SecretRef>,
    pub ssh_key_passphrase: Option<SecretRef>,
    pub github_app: Option<GithubAppFile>,
}

/// A GitHub App installation whose tokens authenticate git over HTTPS.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GithubAppFile {
    pub app_id: u64,
    pub installation_id: u64,
    pub private_key: SecretRef,
    pub api_url: Option<String>,
}

/// A checked git source.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    pub name: String,
    pub url: String,
    pub branch: String,
    pub paths: PathFilter,
    pub poll_interval: Duration,
    pub credentials: Option<GitCredentials>,
    /// The repository on the forge (`owner`, `name`), when it could be worked out.
    pub forge_repo: Option<RepoSlug>,
    /// What its apps may touch; always reserves the tracker namespace.
    pub boundary: std::sync::Arc<SourceBoundary>,
    /// Which pull requests are previewed.
    pub previews: PreviewPolicy,
    /// The ServiceAccount its apps are applied as; `None`: the agent's own identity.
    pub service_account: Option<ServiceAccountRef>,
    /// Whether the apps' missing namespaces are created (`createNamespaces`, on by default).
    pub create_namespaces: crate::namespaces::CreateNamespaces,
    pub prune: PruneBudget,
    /// Trusted SSH host keys; `None` only for non-SSH URLs.
    pub known_hosts: Option<KnownHosts>,
    /// Extra certificate authorities for HTTPS.
    pub ca: Option<CaBundle>,
    /// The network budget of each fetch.
    pub fetch: FetchBudget,
    /// Commits of history per fetch; 0 for all.
    pub depth: u32,
    /// Reviewed-plan mode (`applyReviewedPlan`); `None` when off.
    pub reviewed_plan: Option<super::reviewed::ReviewedPlan>,
}

/// Include and exclude globs over repository paths.
#[derive(Debug, Clone)]
pub struct PathFilter {
    include: Option<GlobSet>,
    exclude: GlobSet,
}

/// Whether a path is part of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathMatch {
    Included,
    /// Matched no include glob.
    NotIncluded,
    /// Matched an exclude glob.
    Excluded,
}

impl PathFilter {
    /// A filter that keeps every path.
    pub fn everything() -> PathFilter {
        PathFilter {
            include: None,
            exclude: GlobSet::empty(),
        }
    }

    /// Builds a filter from glob patterns. An empty include list includes every path.
    ///
    /// # Errors
    ///
    /// The index and message of the first pattern that is not a valid glob, with `true` when it
    /// is an include pattern.
    pub fn new(include: &[&str], exclude: &[&str]) -> Result<PathFilter, (bool, usize, String)> {
        let build = |patterns: &[&str], is_include: bool| {
            let mut builder = GlobSetBuilder::new();
            for (idx, pattern) in patterns.iter().enumerate() {
                let glob = Glob::new(pattern)
                    .map_err(|error| (is_include, idx, error.kind().to_string()))?;
                builder.add(glob);
            }
            builder
                .build()
                .map_err(|error| (is_include, 0, error.to_string()))
        };
        Ok(PathFilter {
            include: if include.is_empty() {
                None
            } else {
                Some(build(include, true)?)
            },
            exclude: build(exclude, false)?,
        })
    }

    /// Whether `path` (relative, `/`-separated) belongs to the source.
    pub fn check(&self, path: &str) -> PathMatch {
        if self.exclude.is_match(path) {
            PathMatch::Excluded
        } else if self.include.as_ref().is_some_and(|set| !set.is_match(path)) {
            PathMatch::NotIncluded
        } else {
            PathMatch::Included
        }
    }
}

/// Credentials for a git remote.
#[derive(Debug, Clone)]
pub enum GitCredentials {
    /// HTTP(S) basic auth with a token as the password.
    Token { username: String, token: Secret },
    /// An SSH private key (PEM or OpenSSH format), held in memory.
    SshKey {
        username: String,
        private_key: Secret,
        passphrase: Option<Secret>,
    },
    /// A GitHub App installation's tokens, as the password of `x-access-token`.
    GithubApp(std::sync::Arc<crate::source::github_app::InstallationTokens>),
}

pub(super) fn check_source(
    checker: &mut Checker<'_>,
    field: &str,
    source: SourceFile,
) -> Option<SourceConfig> {
    let n_problems = checker.problems.len();
    if !is_dns_label(&source.name.value) {
        checker.problem(
            format!("{field}.name"),
            &source.name,
            "must be lowercase letters, digits and '-', at most 63 characters",
        );
    }
    let url = check_url(checker, field, &source.url);
    let branch = check_branch(checker, field, source.branch);
    let paths = check_paths(checker, field, source.paths);
    let poll_interval = check_poll_interval(checker, field, source.poll_interval);
    let credentials = source.credentials.and_then(|credentials| {
        check_credentials(checker, &format!("{field}.credentials"), &credentials, &url)
    });
    let forge_repo = match source.forge_repo {
        Some(repo) => match RepoSlug::parse(&repo.value) {
            Some(slug) => Some(slug),
            None => {
                checker.problem(format!("{field}.forgeRepo"), &repo, "must be `owner/name`");
                None
            }
        },
        None => RepoSlug::from_url(&url),
    };
    let mut boundary = check_boundary(checker, field, &source.name.value, source.boundary);
    boundary.reserved_namespaces = vec![crate::tracker::DEFAULT_NAMESPACE.to_owned()];
    let previews = check_previews(source.previews);
    let service_account = check_service_account(checker, field, source.service_account);
    let prune = check_prune(checker, field, source.prune);
    let transport = check_transport(
        checker,
        field,
        &url,
        source.known_hosts,
        source.ca_file,
        source.fetch,
    );
    (checker.problems.len() == n_problems).then(|| SourceConfig {
        name: source.name.value,
        url,
        branch,
        paths,
        poll_interval,
        credentials,
        forge_repo,
        boundary: std::sync::Arc::new(boundary),
        previews,
        service_account,
        create_namespaces: match source.create_namespaces {
            Some(false) => crate::namespaces::CreateNamespaces::Never,
            Some(true) | None => crate::namespaces::CreateNamespaces::WhenMissing,
        },
        prune,
        known_hosts: transport.known_hosts,
        ca: transport.ca,
        fetch: transport.fetch,
        depth: transport.depth,
        reviewed_plan: super::reviewed::check(source.apply_reviewed_plan, source.reviewed_plan),
    })
}

/// The source's URL, trimmed: a scheme git fetches, and no password in it.
fn check_url(checker: &mut Checker<'_>, field: &str, url: &Spanned<String>) -> String {
    let text = url.value.trim().to_owned();
    let scheme_ok = ["https://", "http://", "ssh://", "file://"]
        .iter()
        .any(|scheme| text.starts_with(scheme))
        || is_scp_like(&text);
    if !scheme_ok {
        checker.problem(
            format!("{field}.url"),
            url,
            "must be an https://, http://, ssh://, file:// or user@host:path URL",
        );
    }
    if url_has_password(&text) {
        checker.problem(
            format!("{field}.url"),
            url,
            "must not embed a password or token; use `credentials`",
        );
    }
    text
}

/// The branch to track ([`DEFAULT_BRANCH`] when none is given).
fn check_branch(checker: &mut Checker<'_>, field: &str, branch: Option<Spanned<String>>) -> String {
    match branch {
        Some(branch) if git2::Branch::name_is_valid(&branch.value).unwrap_or(false) => branch.value,
        Some(branch) => {
            checker.problem(
                format!("{field}.branch"),
                &branch,
                "is not a valid branch name",
            );
            String::new()
        }
        None => DEFAULT_BRANCH.to_owned(),
    }
}

/// The paths whose files are read (every path when none is given).
fn check_paths(checker: &mut Checker<'_>, field: &str, paths: Option<PathsFile>) -> PathFilter {
    match paths {
        None => PathFilter::everything(),
        Some(paths) => {
            let include: Vec<&str> = paths.include.iter().map(|p| p.value.as_str()).collect();
            let exclude: Vec<&str> = paths.exclude.iter().map(|p| p.value.as_str()).collect();
            match PathFilter::new(&include, &exclude) {
                Ok(filter) => filter,
                Err((is_include, idx, message)) => {
                    let (list, globs) = if is_include {
                        ("include", &paths.include)
                    } else {
                        ("exclude", &paths.exclude)
                    };
                    let field = format!("{field}.paths.{list}[{idx}]");
                    match globs.get(idx) {
                        Some(glob) => {
                            checker.problem(field, glob, format!("invalid glob: {message}"))
                        }
                        None => checker.problem_unplaced(field, format!("invalid glob: {message}")),
                    }
                    PathFilter::everything()
                }
            }
        }
    }
}

/// How often the source is polled (at least a second).
fn check_poll_interval(
    checker: &mut Checker<'_>,
    field: &str,
    interval: Option<Spanned<String>>,
) -> Duration {
    match interval {
        None => DEFAULT_POLL_INTERVAL,
        Some(interval) => match parse_duration(&interval.value) {
            Some(duration) if duration >= Duration::from_secs(1) => duration,
            Some(_) => {
                checker.problem(
                    format!("{field}.pollInterval"),
                    &interval,
                    "must be at least 1s",
                );
                DEFAULT_POLL_INTERVAL
            }
            None => {
                checker.problem(
                    format!("{field}.pollInterval"),
                    &interval,
                    format!(
                        "invalid duration {:?} (use a number with a unit: 500ms, 30s, 5m, 1h)",
                        interval.value
                    ),
                );
                DEFAULT_POLL_INTERVAL
            }
        },
    }
}

/// The prune budget: the defaults, with what the source sets.
fn check_prune(checker: &mut Checker<'_>, field: &str, written: Option<PruneFile>) -> PruneBudget {
    let mut prune = PruneBudget::default();
    if let Some(written) = written {
        prune.max_objects = written.max_objects.unwrap_or(prune.max_objects);
        if let Some(percent) = written.max_percent {
            if (1..=100).contains(&percent.value) {
                prune.max_percent = percent.value;
            } else {
                checker.problem(
                    format!("{field}.prune.maxPercent"),
                    &percent,
                    "must be between 1 and 100",
                );
            }
        }
    }
    prune
}

fn check_credentials(
    checker: &mut Checker<'_>,
    field: &str,
    credentials: &Spanned<CredentialsFile>,
    url: &str,
) -> Option<GitCredentials> {
    let (line, column) = (
        credentials.referenced.line(),
        credentials.referenced.column(),
    );
    let value = &credentials.value;
    if let Some(app) = &value.github_app {
        return check_github_app(checker, field, credentials, app, url);
    }
    let (token, token_field) = match (&value.token, &value.password) {
        (Some(_), Some(_)) => {
            checker.problem(field, credentials, "give `token` or `password`, not both");
            return None;
        }
        (Some(token), None) => (Some(token), "token"),
        (None, password) => (password.as_ref(), "password"),
    };
    match (token, &value.ssh_key) {
        (Some(token), None) => {
            let token = checker.secret(&format!("{field}.{token_field}"), token, line, column)?;
            Some(GitCredentials::Token {
                // Gitea, GitHub and GitLab all accept any user name with a token as password.
                username: value
                    .username
                    .clone()
                    .unwrap_or_else(|| "driftless".to_owned()),
                token: Secret::new(token.expose().trim()),
            })
        }
        (None, Some(key)) => {
            let private_key = checker.secret(&format!("{field}.sshKey"), key, line, column)?;
            let passphrase = match &value.ssh_key_passphrase {
                Some(passphrase) => Some(checker.secret(
                    &format!("{field}.sshKeyPassphrase"),
                    passphrase,
                    line,
                    column,
                )?),
                None => None,
            };
            if url.starts_with("http") {
                checker.problem(
                    format!("{field}.sshKey"),
                    credentials,
                    "an SSH key needs an ssh:// or user@host:path URL",
                );
                return None;
            }
            Some(GitCredentials::SshKey {
                username: value.username.clone().unwrap_or_else(|| "git".to_owned()),
                private_key,
                passphrase,
            })
        }
        (Some(_), Some(_)) => {
            checker.problem(
                field,
                credentials,
                "give either `token` (or `password`) or `sshKey`, not both",
            );
            None
        }
        (None, None) => {
            checker.problem(field, credentials, "give `token`, `password` or `sshKey`");
            None
        }
    }
}

fn check_github_app(
    checker: &mut Checker<'_>,
    field: &str,
    credentials: &Spanned<CredentialsFile>,
    app: &GithubAppFile,
    url: &str,
) -> Option<GitCredentials> {
    let value = &credentials.value;
    if value.token.is_some() || value.password.is_some() || value.ssh_key.is_some() {
        checker.problem(
            field,
            credentials,
            "give `githubApp` alone, without `token`, `password` or `sshKey`",
        );
        return None;
    }
    if !url.starts_with("http") {
        checker.problem(
            format!("{field}.githubApp"),
            credentials,
            "GitHub App tokens authenticate git over HTTPS: use an https:// URL",
        );
        return None;
    }
    github_app_tokens(checker, &format!("{field}.githubApp"), credentials, app)
        .map(GitCredentials::GithubApp)
}

/// The installation tokens of `app` (written at `field`, within `span`), or `None` with the
/// problem recorded.
pub(super) fn github_app_tokens<T>(
    checker: &mut Checker<'_>,
    field: &str,
    span: &Spanned<T>,
    app: &GithubAppFile,
) -> Option<std::sync::Arc<crate::source::github_app::InstallationTokens>> {
    let (line, column) = (span.referenced.line(), span.referenced.column());
    let private_key = checker.secret(
        &format!("{field}.privateKey"),
        &app.private_key,
        line,
        column,
    )?;
    let api_url = app
        .api_url
        .clone()
        .unwrap_or_else(|| "https://api.github.com".to_owned());
    let github_app = crate::source::github_app::GithubApp {
        app_id: app.app_id,
        installation_id: app.installation_id,
        private_key,
        api_url,
    };
    match crate::source::github_app::InstallationTokens::new(github_app) {
        Ok(tokens) => Some(std::sync::Arc::new(tokens)),
        Err(error) => {
            checker.problem(format!("{field}.privateKey"), span, error.to_string());
            None
        }
    }
}

/// Parses `500ms`, `30s`, `5m`, `1h`, `1h30m`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_end == 0 {
            return None;
        }
        let number: u64 = rest[..digits_end].parse().ok()?;
        rest = &rest[digits_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_end] {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.checked_mul(60)?),
            "h" => Duration::from_secs(number.checked_mul(3600)?),
            _ => return None,
        };
        total = total.checked_add(part)?;
        rest = &rest[unit_end..];
    }
    Some(total)
}

fn is_scp_like(url: &str) -> bool {
    // `user@host:path`, with no scheme.
    !url.contains("://")
        && url
            .split_once(':')
            .is_some_and(|(host, path)| !host.is_empty() && !host.contains('/') && !path.is_empty())
}

pub(super) fn url_has_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}
