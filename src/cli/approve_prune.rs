//! `driftless approve-prune`: approves the prunes of one commit of a source that its prune
//! budget held. The approval is stored in the cluster (`agent::prune_approval`), where the
//! agent reads it and deploys that commit again; it covers that commit only, and at most the
//! number of objects given. This command deletes nothing itself.

use std::time::Duration;

use anyhow::Context as _;

use agent::cluster::{Cluster, ClusterOptions};

use super::Outcome;

/// Arguments of `driftless approve-prune`.
#[derive(Debug, clap::Args)]
pub struct ApprovePruneArgs {
    /// The agent's source (its `name` in `driftless.yaml`).
    #[arg(long)]
    pub source: String,

    /// The commit whose prunes are approved (the full id the commit status names).
    #[arg(long)]
    pub revision: String,

    /// The most objects the commit's pass may prune (the count the commit status names).
    #[arg(long)]
    pub objects: usize,

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

/// Runs `driftless approve-prune`.
///
/// # Errors
/// The cluster is unreachable, or the approval could not be stored.
pub fn run(args: &ApprovePruneArgs) -> anyhow::Result<Outcome> {
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
        let cluster =
            Cluster::connect(&args.kubeconfig, args.context.as_deref(), &options).await?;
        agent::prune_approval::write(
            &cluster,
            &args.tracker_namespace,
            &args.source,
            &args.revision,
            args.objects,
        )
        .await
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("storing the prune approval of source {}", args.source))?;
        println!(
            "approved up to {} prune(s) of commit {} of source {}; the agent deploys it again at its next poll",
            args.objects, args.revision, args.source
        );
        anyhow::Ok(Outcome::Success)
    })
}
