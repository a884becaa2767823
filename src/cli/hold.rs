//! `driftless hold` and `driftless release`: pause and resume one app's apply and drift
//! correction. The hold is stored in the cluster (`agent::review::hold`), where every agent
//! replica reads it at its next pass; it lifts itself when it expires. `driftless approve`
//! approves a plan that reviewed-plan mode held, by digest (`agent::review::approval`).

use std::time::Duration;

use anyhow::Context as _;

use agent::cluster::{Cluster, ClusterOptions};

use super::Outcome;

/// The cluster the hold is stored in.
#[derive(Debug, clap::Args)]
pub struct HoldCluster {
    /// The kubeconfig of the agent's cluster.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: std::path::PathBuf,

    /// The kubeconfig context (the current context otherwise).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// The namespace holding the trackers (the agent's).
    #[arg(long, default_value = "driftless-system")]
    pub tracker_namespace: String,
}

/// Arguments of `driftless hold`.
#[derive(Debug, clap::Args)]
pub struct HoldArgs {
    /// The app, as `namespace/name`.
    pub app: String,

    /// How long the hold lasts (`90s`, `30m`, `2h`); it lifts itself after.
    #[arg(long = "for", value_name = "DURATION")]
    pub duration: String,

    /// Why: shown in the app's status, the plan page and the agent's log.
    #[arg(long)]
    pub reason: String,

    #[command(flatten)]
    pub cluster: HoldCluster,
}

/// Arguments of `driftless release`.
#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// The app, as `namespace/name`.
    pub app: String,

    #[command(flatten)]
    pub cluster: HoldCluster,
}

/// Arguments of `driftless approve`.
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The app, as `namespace/name`.
    pub app: String,

    /// The digest of the plan approved (whole, or its first 12 characters).
    #[arg(long)]
    pub digest: String,

    #[command(flatten)]
    pub cluster: HoldCluster,
}

/// Runs `driftless approve`.
///
/// # Errors
/// A bad app or digest, an unreachable cluster, or a failed write.
pub fn approve(args: &ApproveArgs) -> anyhow::Result<Outcome> {
    let app = parse_app(&args.app)?;
    let digest = args.digest.trim();
    if digest.len() < agent::review::digest::SHORT_LEN
        || !digest.chars().all(|c| c.is_ascii_hexdigit())
    {
        anyhow::bail!(
            "--digest {digest:?} is not a plan digest: give the hex digest the app's status names ({} characters or more)",
            agent::review::digest::SHORT_LEN
        );
    }
    block_on(&args.cluster, async |cluster, namespace| {
        agent::review::approval::write(cluster, namespace, &app, digest)
            .await
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("storing the approval of {app}"))?;
        println!(
            "approved the plan {digest} of {app}: the agent applies it at its next poll if its plan is still that one"
        );
        anyhow::Ok(Outcome::Success)
    })
}

/// Runs `driftless hold`.
///
/// # Errors
/// A bad app or duration, an unreachable cluster, or a failed write.
pub fn hold(args: &HoldArgs) -> anyhow::Result<Outcome> {
    let app = parse_app(&args.app)?;
    let duration = agent::config::parse_duration(&args.duration).with_context(|| {
        format!(
            "--for {:?} is not a duration: write it as 90s, 30m or 2h",
            args.duration
        )
    })?;
    let hold = agent::review::hold::Hold::expiring_in(
        app.clone(),
        &args.reason,
        duration,
        "driftless hold",
    )
    .map_err(anyhow::Error::msg)?;
    let until = hold.until;
    block_on(&args.cluster, async |cluster, namespace| {
        agent::review::hold::write(cluster, namespace, &hold)
            .await
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("storing the hold of {app}"))?;
        println!(
            "{app} held until {}: the agent applies nothing to it and corrects no drift until then (`driftless release {app}` lifts it sooner)",
            until.format("%Y-%m-%dT%H:%M:%SZ")
        );
        anyhow::Ok(Outcome::Success)
    })
}

/// Runs `driftless release`.
///
/// # Errors
/// A bad app, an unreachable cluster, or a failed delete.
pub fn release(args: &ReleaseArgs) -> anyhow::Result<Outcome> {
    let app = parse_app(&args.app)?;
    block_on(&args.cluster, async |cluster, namespace| {
        let released = agent::review::hold::release(cluster, namespace, &app)
            .await
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("releasing the hold of {app}"))?;
        if released {
            println!("{app} released: the agent converges it at its next pass");
        } else {
            println!("{app} was not held");
        }
        anyhow::Ok(Outcome::Success)
    })
}

fn parse_app(text: &str) -> anyhow::Result<analyzer::AppRef> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
            Ok(analyzer::AppRef {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
        }
        _ => anyhow::bail!("app {text:?} is not namespace/name (for example team-a/web)"),
    }
}

fn block_on(
    args: &HoldCluster,
    run: impl AsyncFnOnce(&Cluster, &str) -> anyhow::Result<Outcome>,
) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let options = ClusterOptions {
            name: "local".to_owned(),
            qps: 20.0,
            burst: 40,
            timeout: Duration::from_secs(30),
        };
        let cluster = Cluster::connect(&args.kubeconfig, args.context.as_deref(), &options).await?;
        run(&cluster, &args.tracker_namespace).await
    })
}
