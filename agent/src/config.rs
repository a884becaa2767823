//! The agent's configuration file (`driftless.yaml`): the raw serde shape ([`ConfigFile`]) and
//! the checked [`Config`] built from it, the way ripgrep goes from low-level to high-level args.
//!
//! Parsing is done by `serde-saphyr`, whose errors carry line and column. Everything serde cannot
//! check (durations, globs, cron expressions, URLs, secret references) is checked in
//! [`ConfigFile::check`], which collects every problem, each naming its field path
//! (`sources[0].pollInterval`) and line. Secrets (tokens, SSH keys, webhook secrets) are read
//! from the environment or a file once, at load time, into [`Secret`], whose `Debug` and
//! `Display` print `***` so they never reach a log line.
//!
//! ```yaml
//! sources:
//!   - name: platform
//!     url: https://git.example.com/platform/apps.git
//!     branch: main
//!     paths: { include: ["apps/**", "definitions/**"], exclude: ["**/README.md"] }
//!     pollInterval: 30s
//!     credentials: { token: { env: GIT_TOKEN } }
//! clusters:
//!   - { name: local, kubeconfig: /etc/driftless/kubeconfig, context: prod, labels: { env: prod } }
//! forge: { kind: gitea, baseUrl: https://git.example.com, token: { file: /run/secrets/forge } }
//! drift: { schedule: "*/10 * * * *", mode: report }
//! server: { listen: "0.0.0.0:8080", externalUrl: https://driftless.example.com, webhookSecret: { env: HOOK_SECRET } }
//! qps: 20
//! burst: 40
//! concurrency: 4
//! cacheDir: /var/cache/driftless
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_saphyr::Spanned;

/// A secret value (token, key, webhook secret). Its `Debug` and `Display` print `***`; the only
/// way to read it is [`Secret::expose`], so a secret cannot reach a log line by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, for the one place that sends it (an HTTP header, a git credential).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The process environment, captured once by the binary and passed in, so the config loader
/// never reads the environment behind the caller's back (and tests pass their own).
#[derive(Debug, Clone, Default)]
pub struct Environment {
    vars: BTreeMap<String, Secret>,
}

impl Environment {
    /// Captures the current process environment.
    pub fn from_process() -> Environment {
        Environment {
            vars: std::env::vars()
                .map(|(name, value)| (name, Secret::new(value)))
                .collect(),
        }
    }

    /// An environment with exactly these variables.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Environment {
        Environment {
            vars: pairs
                .into_iter()
                .map(|(name, value)| (name.to_owned(), Secret::new(value)))
                .collect(),
        }
    }

    fn var(&self, name: &str) -> Option<&Secret> {
        self.vars.get(name)
    }
}

// ---- the raw file ----------------------------------------------------------------------------

/// `driftless.yaml` as written. Convert with [`ConfigFile::check`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigFile {
    #[serde(default)]
    pub sources: Vec<SourceFile>,
    #[serde(default)]
    pub clusters: Vec<ClusterFile>,
    pub forge: Option<ForgeFile>,
    pub drift: Option<DriftFile>,
    pub server: Option<ServerFile>,
    pub qps: Option<Spanned<f32>>,
    pub burst: Option<Spanned<u32>>,
    pub concurrency: Option<Spanned<usize>>,
    pub cache_dir: Option<PathBuf>,
    /// Analysis settings (severity per rule, suppressions); read by `driftless analyze` and
    /// `plan` through [`analyzer::AnalysisConfig::from_agent_config`].
    #[serde(default)]
    pub analysis: Option<analyzer::AnalysisConfig>,
}

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

/// Git credentials: a token (HTTP basic auth) or an SSH private key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialsFile {
    pub username: Option<String>,
    pub token: Option<SecretRef>,
    pub ssh_key: Option<SecretRef>,
    pub ssh_key_passphrase: Option<SecretRef>,
}

/// Where a secret comes from: exactly one of an environment variable or a file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretRef {
    pub env: Option<String>,
    pub file: Option<PathBuf>,
}

/// One cluster of the registry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterFile {
    pub name: Spanned<String>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// The forge that receives commit statuses and PR comments, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForgeFile {
    pub kind: Spanned<ForgeKind>,
    pub base_url: Option<Spanned<String>>,
    pub token: Spanned<SecretRef>,
}

/// The drift schedule as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DriftFile {
    pub schedule: Spanned<String>,
    #[serde(default)]
    pub mode: DriftMode,
}

/// The HTTP server as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerFile {
    pub listen: Option<Spanned<String>>,
    /// The URL the agent is reachable at, for commit status links to plan pages.
    pub external_url: Option<Spanned<String>>,
    pub webhook_secret: Option<Spanned<SecretRef>>,
}

// ---- the checked config ----------------------------------------------------------------------

/// The checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub sources: Vec<SourceConfig>,
    pub clusters: Vec<ClusterConfig>,
    pub forge: Option<ForgeConfig>,
    pub drift: Option<DriftConfig>,
    pub server: ServerConfig,
    /// Kubernetes API requests per second, per cluster.
    pub qps: f32,
    pub burst: u32,
    /// How many apps are planned or applied at once.
    pub concurrency: usize,
    /// Where git clones live.
    pub cache_dir: PathBuf,
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
}

/// One cluster of the registry.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub name: String,
    /// `None`: the in-cluster config or `$KUBECONFIG`, as kube's `Config::infer` does.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub labels: BTreeMap<String, String>,
}

/// The forge kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    Github,
    Gitea,
    Gitlab,
}

/// The checked forge settings.
#[derive(Debug, Clone)]
pub struct ForgeConfig {
    pub kind: ForgeKind,
    /// The forge's web root (`https://gitea.example.com`); for GitHub, the API root.
    pub base_url: String,
    pub token: Secret,
}

/// What the drift schedule does about drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftMode {
    /// Report drift as a commit status and a metric.
    #[default]
    Report,
    /// Re-apply the deployed revision.
    Correct,
}

/// The checked drift schedule.
#[derive(Debug, Clone)]
pub struct DriftConfig {
    pub schedule: cron::Schedule,
    pub mode: DriftMode,
}

/// The checked HTTP server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// The agent's public URL, without a trailing `/`.
    pub external_url: String,
    /// `None` disables the webhook endpoints.
    pub webhook_secret: Option<Secret>,
}

// ---- errors ----------------------------------------------------------------------------------

/// Loading the config failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}")]
    ReadFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing config {path}: {message}")]
    ParseFailed { path: PathBuf, message: String },
    #[error("invalid config {}:\n{}", path.display(), format_problems(problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<FieldProblem>,
    },
}

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// The field path, `sources[0].pollInterval`.
    pub field: String,
    /// 1-based line, 0 when unknown.
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "line {}, column {}: {}: {}",
                self.line, self.column, self.field, self.message
            )
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

fn format_problems(problems: &[FieldProblem]) -> String {
    problems
        .iter()
        .map(|problem| format!("  {problem}"))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---- loading ---------------------------------------------------------------------------------

const DEFAULT_BRANCH: &str = "main";
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
const DEFAULT_QPS: f32 = 20.0;
const DEFAULT_BURST: u32 = 40;
const DEFAULT_CONCURRENCY: usize = 4;
const GITHUB_API: &str = "https://api.github.com";

impl Config {
    /// Reads, parses and checks a config file. Relative paths in it (secret files, kubeconfigs,
    /// the cache directory) are resolved against the file's directory.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the file cannot be read, is not valid YAML for the schema (the
    /// message gives line and column), or has invalid fields (each named with its path).
    pub fn load(path: &Path, env: &Environment) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFailed {
            path: path.to_owned(),
            source,
        })?;
        let base_dir = path.parent().unwrap_or(Path::new("."));
        Config::parse(&text, path, base_dir, env)
    }

    /// Parses and checks config text; `path` is only used in messages.
    ///
    /// # Errors
    ///
    /// See [`Config::load`].
    pub fn parse(
        text: &str,
        path: &Path,
        base_dir: &Path,
        env: &Environment,
    ) -> Result<Config, ConfigError> {
        let file: ConfigFile =
            serde_saphyr::from_str(text).map_err(|error| ConfigError::ParseFailed {
                path: path.to_owned(),
                message: error.to_string(),
            })?;
        file.check(base_dir, env)
            .map_err(|problems| ConfigError::Invalid {
                path: path.to_owned(),
                problems,
            })
    }
}

/// Collects problems while checking.
struct Checker<'a> {
    base_dir: &'a Path,
    env: &'a Environment,
    problems: Vec<FieldProblem>,
}

impl Checker<'_> {
    fn problem<T>(
        &mut self,
        field: impl Into<String>,
        at: &Spanned<T>,
        message: impl Into<String>,
    ) {
        self.problems.push(FieldProblem {
            field: field.into(),
            line: at.referenced.line(),
            column: at.referenced.column(),
            message: message.into(),
        });
    }

    fn problem_unplaced(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.problems.push(FieldProblem {
            field: field.into(),
            line: 0,
            column: 0,
            message: message.into(),
        });
    }

    fn resolve_path(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.base_dir.join(path)
        }
    }

    /// Reads a secret; `None` (with a problem recorded) when it cannot be.
    fn secret(
        &mut self,
        field: &str,
        secret_ref: &SecretRef,
        line: u64,
        column: u64,
    ) -> Option<Secret> {
        let read = match (&secret_ref.env, &secret_ref.file) {
            (Some(name), None) => match self.env.var(name) {
                Some(value) if !value.expose().trim().is_empty() => {
                    Ok(Secret::new(value.expose().trim()))
                }
                Some(_) => Err(format!("environment variable {name} is empty")),
                None => Err(format!("environment variable {name} is not set")),
            },
            (None, Some(file)) => {
                let resolved = self.resolve_path(file);
                match std::fs::read_to_string(&resolved) {
                    // Keys keep their trailing newline (OpenSSH wants it); tokens are trimmed
                    // where they are used.
                    Ok(value) if !value.trim().is_empty() => Ok(Secret::new(value)),
                    Ok(_) => Err(format!("secret file {} is empty", resolved.display())),
                    Err(error) => Err(format!(
                        "cannot read secret file {}: {error}",
                        resolved.display()
                    )),
                }
            }
            (Some(_), Some(_)) => Err("give either `env` or `file`, not both".to_owned()),
            (None, None) => Err("give `env` (a variable name) or `file` (a path)".to_owned()),
        };
        match read {
            Ok(secret) => Some(secret),
            Err(message) => {
                self.problems.push(FieldProblem {
                    field: field.to_owned(),
                    line,
                    column,
                    message,
                });
                None
            }
        }
    }

    fn spanned_secret(&mut self, field: &str, secret_ref: &Spanned<SecretRef>) -> Option<Secret> {
        let (line, column) = (secret_ref.referenced.line(), secret_ref.referenced.column());
        self.secret(field, &secret_ref.value, line, column)
    }
}

impl ConfigFile {
    /// Checks every field and builds the [`Config`], resolving relative paths against
    /// `base_dir` and secrets from `env` or files.
    ///
    /// # Errors
    ///
    /// Every problem found, each naming its field.
    pub fn check(self, base_dir: &Path, env: &Environment) -> Result<Config, Vec<FieldProblem>> {
        let mut checker = Checker {
            base_dir,
            env,
            problems: Vec::new(),
        };
        let mut sources = Vec::new();
        let mut source_names = BTreeMap::new();
        for (idx, source) in self.sources.into_iter().enumerate() {
            let field = format!("sources[{idx}]");
            if let Some(previous) = source_names.insert(source.name.value.clone(), idx) {
                checker.problem(
                    format!("{field}.name"),
                    &source.name,
                    format!(
                        "duplicate source name {:?} (also sources[{previous}])",
                        source.name.value
                    ),
                );
            }
            if let Some(checked) = check_source(&mut checker, &field, source) {
                sources.push(checked);
            }
        }
        let mut clusters = Vec::new();
        let mut cluster_names = BTreeMap::new();
        for (idx, cluster) in self.clusters.into_iter().enumerate() {
            let field = format!("clusters[{idx}].name");
            if !is_dns_label(&cluster.name.value) {
                checker.problem(
                    &field,
                    &cluster.name,
                    "must be lowercase letters, digits and '-', at most 63 characters",
                );
            }
            if let Some(previous) = cluster_names.insert(cluster.name.value.clone(), idx) {
                checker.problem(
                    &field,
                    &cluster.name,
                    format!("duplicate cluster name (also clusters[{previous}])"),
                );
            }
            clusters.push(ClusterConfig {
                name: cluster.name.value,
                kubeconfig: cluster.kubeconfig.map(|path| checker.resolve_path(&path)),
                context: cluster.context,
                labels: cluster.labels,
            });
        }
        let forge = self
            .forge
            .and_then(|forge| check_forge(&mut checker, forge));
        let drift = self
            .drift
            .and_then(|drift| match parse_cron(&drift.schedule.value) {
                Ok(schedule) => Some(DriftConfig {
                    schedule,
                    mode: drift.mode,
                }),
                Err(message) => {
                    checker.problem("drift.schedule", &drift.schedule, message);
                    None
                }
            });
        let server = check_server(&mut checker, self.server);
        let qps = match self.qps {
            Some(qps) if !(qps.value.is_finite() && qps.value > 0.0) => {
                checker.problem("qps", &qps, "must be a positive number");
                DEFAULT_QPS
            }
            Some(qps) => qps.value,
            None => DEFAULT_QPS,
        };
        let burst = match self.burst {
            Some(burst) if burst.value == 0 => {
                checker.problem("burst", &burst, "must be at least 1");
                DEFAULT_BURST
            }
            Some(burst) => burst.value,
            None => DEFAULT_BURST,
        };
        let concurrency = match self.concurrency {
            Some(concurrency) if concurrency.value == 0 => {
                checker.problem("concurrency", &concurrency, "must be at least 1");
                DEFAULT_CONCURRENCY
            }
            Some(concurrency) => concurrency.value,
            None => DEFAULT_CONCURRENCY,
        };
        let cache_dir = match self.cache_dir {
            Some(dir) => checker.resolve_path(&dir),
            None => checker.resolve_path(Path::new(".driftless-cache")),
        };
        if sources.is_empty() && checker.problems.is_empty() {
            checker.problem_unplaced("sources", "at least one source is required");
        }
        if !checker.problems.is_empty() {
            return Err(checker.problems);
        }
        Ok(Config {
            sources,
            clusters,
            forge,
            drift,
            server,
            qps,
            burst,
            concurrency,
            cache_dir,
        })
    }
}

fn check_source(
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
    let url = source.url.value.trim().to_owned();
    let scheme_ok = ["https://", "http://", "ssh://", "file://"]
        .iter()
        .any(|scheme| url.starts_with(scheme))
        || is_scp_like(&url);
    if !scheme_ok {
        checker.problem(
            format!("{field}.url"),
            &source.url,
            "must be an https://, http://, ssh://, file:// or user@host:path URL",
        );
    }
    if url_has_password(&url) {
        checker.problem(
            format!("{field}.url"),
            &source.url,
            "must not embed a password or token; use `credentials`",
        );
    }
    let branch = match source.branch {
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
    };
    let paths = match source.paths {
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
    };
    let poll_interval = match source.poll_interval {
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
    };
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
    (checker.problems.len() == n_problems).then(|| SourceConfig {
        name: source.name.value,
        url,
        branch,
        paths,
        poll_interval,
        credentials,
        forge_repo,
    })
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
    match (&value.token, &value.ssh_key) {
        (Some(token), None) => {
            let token = checker.secret(&format!("{field}.token"), token, line, column)?;
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
                "give either `token` or `sshKey`, not both",
            );
            None
        }
        (None, None) => {
            checker.problem(field, credentials, "give `token` or `sshKey`");
            None
        }
    }
}

fn check_forge(checker: &mut Checker<'_>, forge: ForgeFile) -> Option<ForgeConfig> {
    let token = checker.spanned_secret("forge.token", &forge.token);
    let kind = forge.kind.value;
    let base_url = match (kind, &forge.base_url) {
        (ForgeKind::Gitlab, _) => {
            // FIXME(#7): GitLab's commit status and note APIs differ in shape; not built yet.
            checker.problem(
                "forge.kind",
                &forge.kind,
                "gitlab is not supported yet (use github or gitea)",
            );
            return None;
        }
        (ForgeKind::Github, None) => GITHUB_API.to_owned(),
        (ForgeKind::Gitea, None) => {
            checker.problem("forge.baseUrl", &forge.kind, "is required for gitea");
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
    })
}

fn check_server(checker: &mut Checker<'_>, server: Option<ServerFile>) -> ServerConfig {
    let default_listen: SocketAddr = DEFAULT_LISTEN
        .parse()
        .expect("the default listen address is a valid socket address");
    let Some(server) = server else {
        return ServerConfig {
            listen: default_listen,
            external_url: format!("http://{default_listen}"),
            webhook_secret: None,
        };
    };
    let listen = match &server.listen {
        None => default_listen,
        Some(listen) => match SocketAddr::from_str(listen.value.trim()) {
            Ok(addr) => addr,
            Err(_) => {
                checker.problem(
                    "server.listen",
                    listen,
                    format!(
                        "invalid address {:?} (use host:port, e.g. 0.0.0.0:8080)",
                        listen.value
                    ),
                );
                default_listen
            }
        },
    };
    let external_url = match &server.external_url {
        None => format!("http://{listen}"),
        Some(url) => {
            let trimmed = url.value.trim().trim_end_matches('/');
            if !(trimmed.starts_with("https://") || trimmed.starts_with("http://")) {
                checker.problem(
                    "server.externalUrl",
                    url,
                    "must be an http:// or https:// URL",
                );
            }
            trimmed.to_owned()
        }
    };
    let webhook_secret = server
        .webhook_secret
        .as_ref()
        .and_then(|secret| checker.spanned_secret("server.webhookSecret", secret))
        .map(|secret| Secret::new(secret.expose().trim()));
    ServerConfig {
        listen,
        external_url,
        webhook_secret,
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

/// Parses a cron expression. Standard five-field expressions (minute hour day month weekday)
/// get a leading `0` seconds field, because the `cron` crate wants six or seven fields.
///
/// # Errors
///
/// A message saying why the expression is invalid.
pub fn parse_cron(text: &str) -> Result<cron::Schedule, String> {
    let text = text.trim();
    let n_fields = text.split_whitespace().count();
    let full = if n_fields == 5 {
        format!("0 {text}")
    } else {
        text.to_owned()
    };
    cron::Schedule::from_str(&full).map_err(|error| {
        format!("invalid cron expression {text:?}: {error} (use 5 fields: minute hour day month weekday)")
    })
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn is_scp_like(url: &str) -> bool {
    // `user@host:path`, with no scheme.
    !url.contains("://")
        && url
            .split_once(':')
            .is_some_and(|(host, path)| !host.is_empty() && !host.contains('/') && !path.is_empty())
}

fn url_has_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

#[cfg(test)]
mod tests;
