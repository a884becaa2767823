//! `driftless agent --config FILE`: load the config, install logging, and run the GitOps loop
//! until SIGTERM or Ctrl-C (the step in flight finishes first).

use std::io::IsTerminal as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::ValueEnum;

use super::Outcome;

/// Arguments of `driftless agent`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The agent's configuration (`driftless.yaml`): sources, clusters, forge, drift schedule,
    /// server.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,

    /// This replica's name among the agents sharing the apps (default: `sharding.replicaId`,
    /// else `$POD_NAME`). Turns sharding on with its defaults when the config has no `sharding`.
    #[arg(long, value_name = "NAME")]
    pub replica_id: Option<String>,

    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

/// Log formats of the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, with the span fields (for log collectors).
    Json,
    /// Human-readable lines.
    Text,
}

/// Installs the agent's logging: `info` by default (one line per app state change), JSON or
/// text. `RUST_LOG` overrides the level.
pub fn init_tracing(verbose: u8, format: LogFormat) {
    let default_level = match verbose {
        0 | 1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

/// Runs the agent until SIGTERM or Ctrl-C.
///
/// # Errors
///
/// An invalid config (every problem named with its field), or a start-up failure (the listen
/// address taken, no cluster credentials).
pub fn run(args: &AgentArgs) -> anyhow::Result<Outcome> {
    let env = agent::config::Environment::from_process();
    let mut config = agent::config::Config::load(&args.config, &env)?;
    if let Some(replica_id) = &args.replica_id {
        match &mut config.sharding {
            Some(sharding) => sharding.replica_id.clone_from(replica_id),
            None => {
                config.sharding = Some(agent::config::ShardingConfig::with_defaults(
                    replica_id.clone(),
                ));
            }
        }
    }
    if let Some(sharding) = &config.sharding {
        let id = &sharding.replica_id;
        anyhow::ensure!(
            !id.is_empty()
                && id.len() <= 63
                && id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "sharding needs this replica's name, a DNS label (got {id:?}): set sharding.replicaId, pass --replica-id, or set $POD_NAME"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("driftless-agent")
        .build()
        .context("starting the async runtime")?;
    runtime
        .block_on(agent::agent_loop::run(config, shutdown_signal(), None))
        .context("running the agent")?;
    Ok(Outcome::Success)
}

/// Resolves on SIGTERM (Kubernetes stopping the pod) or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
