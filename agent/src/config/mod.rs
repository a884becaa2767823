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
//! One module per section (`sources`, `clusters`, `forge`, `drift`, `server`), each with its
//! raw and checked types and its check; `secret` reads secrets. This module loads the file and
//! checks the top-level fields. The forge `kind` is `github`, `gitea` or `gitlab`.
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
//! notifications: [{ name: ops, kind: slack, url: { env: SLACK_WEBHOOK_URL } }]
//! qps: 20
//! burst: 40
//! concurrency: 4
//! cacheDir: /var/cache/driftless
//! ```

mod boundary;
mod clusters;
mod drift;
mod forge;
mod notifications;
pub mod reference;
pub mod reviewed;
mod secret;
mod server;
mod sharding;
mod sources;
mod transport;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

pub use boundary::{PreviewPolicy, PreviewRefusal, ServiceAccountRef};
pub use clusters::{ClusterConfig, ClusterFile};
pub use drift::{DriftConfig, DriftFile, DriftMode, parse_cron};
pub use forge::{DEFAULT_APP_STATUS_LIMIT, ForgeConfig, ForgeFile, ForgeKind, RepoSlug};
pub use notifications::{
    NotificationChannel, NotificationEvent, NotificationFile, NotificationKind,
};
pub use secret::{Environment, Secret, SecretRef};
pub use server::{ServerConfig, ServerFile};
pub use sharding::{ShardingConfig, ShardingFile};
pub use sources::{
    CredentialsFile, GitCredentials, PathFilter, PathMatch, PathsFile, SourceConfig, SourceFile,
    parse_duration,
};
pub use transport::{FetchFile, parse_size};

use clusters::check_clusters;
use drift::check_drift;
use forge::check_forge;
use notifications::check_notifications;
use server::check_server;
use sharding::check_sharding;
use sources::check_source;

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
    /// Replicas sharing the apps; absent: one agent deploys every app.
    pub sharding: Option<ShardingFile>,
    #[serde(default)]
    pub notifications: Vec<NotificationFile>,
    pub qps: Option<Spanned<f32>>,
    pub burst: Option<Spanned<u32>>,
    pub concurrency: Option<Spanned<usize>>,
    pub cache_dir: Option<PathBuf>,
    /// Analysis settings (severity per rule, suppressions); read by `driftless analyze` and
    /// `plan` through [`analyzer::AnalysisConfig::from_agent_config`].
    #[serde(default)]
    pub analysis: Option<analyzer::AnalysisConfig>,
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
    /// Replicas sharing the apps through Leases (`agent::shard`); `None`: this agent deploys
    /// every app.
    pub sharding: Option<ShardingConfig>,
    /// Chat channels and webhooks told about failures, drift and held prunes.
    pub notifications: Vec<NotificationChannel>,
    /// Kubernetes API requests per second, per cluster.
    pub qps: f32,
    pub burst: u32,
    /// How many apps are planned or applied at once.
    pub concurrency: usize,
    /// Where git clones live.
    pub cache_dir: PathBuf,
    /// Rule severities, suppressions and render limits: the same settings `driftless plan` and
    /// `analyze` read from this file, so the agent blocks exactly what the CLI reports.
    pub analysis: analyzer::AnalysisConfig,
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
const DEFAULT_QPS: f32 = 20.0;
const DEFAULT_BURST: u32 = 40;
const DEFAULT_CONCURRENCY: usize = 4;

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
            serde_saphyr::from_str_with_options(text, analyzer::yaml_options(text)).map_err(
                |error| ConfigError::ParseFailed {
                    path: path.to_owned(),
                    message: error.to_string(),
                },
            )?;
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
        let clusters = check_clusters(&mut checker, self.clusters);
        let forge = self
            .forge
            .and_then(|forge| check_forge(&mut checker, forge));
        let drift = self
            .drift
            .and_then(|drift| check_drift(&mut checker, drift));
        let server = check_server(&mut checker, self.server);
        let sharding = self
            .sharding
            .and_then(|sharding| check_sharding(&mut checker, sharding));
        let notifications = check_notifications(&mut checker, self.notifications);
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
        let mut analysis = self.analysis.unwrap_or_default();
        if !clusters.is_empty() {
            analysis.known_clusters = Some(
                clusters
                    .iter()
                    .map(|cluster| cluster.name.clone())
                    .collect(),
            );
        }
        if let Err(error) = analysis.check() {
            checker.problem_unplaced("analysis", error.to_string());
        }
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
            sharding,
            notifications,
            qps,
            burst,
            concurrency,
            cache_dir,
            analysis,
        })
    }
}

pub(super) fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests;
