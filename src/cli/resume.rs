//! `driftless resume APP`: marks the suspended steps of an app's workflow resumed in the
//! workflow state stored in the cluster. The agent (or the next `driftless apply`) continues
//! the workflow from there; this command applies nothing itself.

use std::time::Duration;

use analyzer::AppRef;
use anyhow::Context as _;

use agent::cluster::ClusterOptions;
use agent::workflow::{WorkflowStore, resume};

use super::Outcome;

/// Arguments of `driftless resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The Application's name.
    pub app: String,

    /// The Application's namespace.
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,

    /// Resume only this suspended step (every suspended step otherwise).
    #[arg(long)]
    pub step: Option<String>,

    /// The kubeconfig of the cluster holding the workflow state; otherwise `$KUBECONFIG`, then
    /// `~/.kube/config`, as kubectl reads them.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<std::path::PathBuf>,

    /// The kubeconfig context (the current context otherwise).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// The namespace holding the trackers and workflow states.
    #[arg(long, default_value = "driftless-system")]
    pub tracker_namespace: String,
}

/// Runs `driftless resume`.
///
/// # Errors
/// The cluster is unreachable, the app has no stored workflow, nothing is suspended, or the
/// state changed meanwhile (retry).
pub fn run(args: &ResumeArgs) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: &ResumeArgs) -> anyhow::Result<Outcome> {
    let options = ClusterOptions {
        name: "local".to_owned(),
        qps: 20.0,
        burst: 40,
        timeout: Duration::from_secs(30),
    };
    let cluster = super::kubeconfig::connect(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        &options,
        "resume",
    )
    .await?;
    let app = AppRef {
        namespace: args.namespace.clone(),
        name: args.app.clone(),
    };
    let store = WorkflowStore::new(&cluster, &args.tracker_namespace);
    let mut stored = store
        .read(&app)
        .await?
        .with_context(|| format!("app {}/{} has no workflow state", app.namespace, app.name))?;
    let resumed = resume(&mut stored.state, args.step.as_deref())
        .with_context(|| format!("resuming app {}/{}", app.namespace, app.name))?;
    store.write(&app, &mut stored).await?;
    for step in resumed {
        println!("resumed step {step} of {}/{}", app.namespace, app.name);
    }
    Ok(Outcome::Success)
}
