//! The GitOps loop behind `driftless agent --config FILE`.
//!
//! One task per source: poll (or wake on a webhook) → snapshot → render (blocking pool) → plan
//! against the live cluster → apply, with commit statuses `driftless/<namespace>/<app>` per app
//! and one summary context `driftless` on the commit. Open pull requests whose base is the
//! tracked branch get a plan-only preview: a summary status on the head commit and one plan
//! comment, edited in place on new pushes. The drift schedule re-plans the deployed revision
//! against the cluster and reports drift (`driftless/drift` status and the
//! `driftless_app_drifted` metric) or re-applies it.
//!
//! Failure isolation: a failing source backs off alone (the other tasks never wait on it), a
//! broken app fails alone (its status carries the error; the others deploy), and forge writes
//! go through the [`Outbox`], so a forge outage delays statuses without blocking deployment.
//!
//! Safety: a revision with no Applications at all is never applied, because applying it would
//! prune every app of the source; it is reported as a failure instead.
//!
//! Concurrency: the config's `concurrency` is the number of permits of one agent-wide
//! semaphore. Applying an app holds a permit, and so does planning a revision (the live planner
//! observes its apps one at a time), so at most `concurrency` apps are planned or applied at
//! once across all sources. Apps of one revision are applied side by side under that bound;
//! their statuses still go out in app order.
//!
//! Work per commit grows with what changed, not with what exists: each source keeps
//! an [`AnalysisCache`], so only apps whose inputs changed are rendered and checked again; the
//! render shares the unchanged apps' results with the cache ([`SharedOutput`]), so an unchanged
//! app is recognised by pointer ([`Arc::ptr_eq`]) without comparing its objects, and the apps to
//! plan are handed to the planner shared, not copied. The deploy plans and applies only the apps whose render differs
//! from their last successful deploy (plus apps that failed, never deployed, or run a
//! workflow). The others keep their result; drift in them is the drift schedule's job, which
//! plans every app. Apps removed from Git are garbage-collected: the trackers are listed (one
//! LIST of every app's tracker) on the first deploy, when an app left the render, and after a
//! deletion that did not complete. The cache remembers the commit it last analysed: the next
//! commit's analysis is handed only the files changed since (a git tree-to-tree diff,
//! [`analyzer::analyze_changes`]), so neither the tree walk nor the analysis visits an
//! unchanged file or app; when the cache cannot patch the change in (a definition or a file
//! added, say), the whole snapshot is read, with its git blob ids, and analysed incrementally.
//!
//! Shutdown: when the shutdown future resolves, each source task finishes the step in flight
//! (a deploy is never cut in the middle of an apply), then the outbox gets a last chance to
//! deliver, then the HTTP server stops.
//!
//! This file holds the loop (`run`, a source's `SourceWorker::run` and its poll) and the
//! state the passes share. The submodules: `start` (what `run` starts and stops), `render`
//! (a commit through the analysis cache), `select` (which apps a pass plans), `pass` (the one
//! call of the sync engine), `deploy`, `preview` and `drift` (the three passes and what they
//! report), `sharing` (replicas sharing the apps) and `statuses` (the commit statuses' texts).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use analyzer::{AppRef, AppRender, Definitions, SharedOutput, SourceMap};
use tokio::sync::{Notify, Semaphore, watch};

use crate::cluster::Cluster;
use crate::config::{Config, SourceConfig};
use crate::forge::outbox::{ForgeOp, Outbox};
use crate::forge::{CommitStatus, Forge, ForgeError, StatusState};
use crate::metrics::{ApiTarget, ErrorKind, Metrics};
use crate::notify::Notifier;
use crate::notify::events::EventRecorder;
use crate::prune_guard::{Approval, Evidence, PassBudget};
use crate::schedule::DriftTimer;
use crate::server::ui::record as ui_record;
use crate::server::{self, PageApp, PlanPage, PlanStore};
use crate::shard::Shards;
use crate::shard::source::SourceShard;
use crate::source::git::{CommitId, GitSource, PollOutcome, SourceError};
use crate::sync::{LiveOptions, SharedApps};
use render::SourceCache;

mod deploy;
mod drift;
mod pass;
mod preview;
mod render;
mod select;
mod sharing;
mod start;
mod statuses;
use sharing::shard_changed;
use start::{open_sources, start_server, start_shared, stop};

/// The summary status context.
pub const SUMMARY_CONTEXT: &str = "driftless";
/// The drift status context.
pub const DRIFT_CONTEXT: &str = "driftless/drift";

/// The agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("connecting to cluster {cluster}")]
    ClusterConnectFailed {
        cluster: String,
        #[source]
        source: crate::cluster::ClusterError,
    },
    #[error(
        "building the default Kubernetes client (in-cluster or $KUBECONFIG; the cluster registry names no kubeconfig)"
    )]
    DefaultClientFailed(#[source] kube::Error),
    #[error("preparing source {source_name}")]
    SourceOpenFailed {
        source_name: String,
        #[source]
        source: SourceError,
    },
    #[error("connecting to the forge")]
    ForgeConnectFailed(#[source] ForgeError),
    #[error("starting the notification channels (HTTP client)")]
    NotifierStartFailed(#[source] reqwest::Error),
    #[error(transparent)]
    Server(#[from] server::ServerError),
}

/// A running agent's handles, for the binary and tests.
#[derive(Debug, Clone)]
pub struct AgentHandles {
    pub metrics: Arc<Metrics>,
    pub plans: PlanStore,
    /// The address the HTTP server listens on (useful with port 0).
    pub listen: std::net::SocketAddr,
}

/// Runs the agent until `shutdown` resolves. `started` receives the handles once the server
/// listens.
///
/// # Errors
///
/// [`AgentError`] when something needed at start-up is missing (a cluster, a source's cache,
/// the listen address). Failures after start-up are logged, counted and retried, never
/// returned.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
    started: Option<tokio::sync::oneshot::Sender<AgentHandles>>,
) -> Result<(), AgentError> {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: finishing the steps in flight");
        let _ = shutdown_tx.send(true);
    });
    let (shared, background) = start_shared(&config, &shutdown_rx).await?;
    let (workers, triggers) = open_sources(&config, &shared).await?;
    let server = start_server(&config, &shared, triggers).await?;
    tracing::info!(listen = %server.listen, sources = config.sources.len(), "agent started");
    if let Some(started) = started {
        let _ = started.send(AgentHandles {
            metrics: shared.metrics.clone(),
            plans: shared.plans.clone(),
            listen: server.listen,
        });
    }
    run_sources(workers, &shutdown_rx).await;
    stop(&shared, background, server, shutdown_rx).await
}

/// Runs one task per source until each has stopped.
async fn run_sources(workers: Vec<SourceWorker>, shutdown_rx: &watch::Receiver<bool>) {
    let worker_tasks: Vec<_> = workers
        .into_iter()
        .map(|worker| {
            let shutdown = shutdown_rx.clone();
            tokio::spawn(worker.run(shutdown))
        })
        .collect();
    for task in worker_tasks {
        if let Err(error) = task.await {
            tracing::error!(error = %error, "a source task panicked");
        }
    }
}

/// What every source task shares.
struct Shared {
    /// Slack, Teams and webhook channels.
    notifier: Notifier,
    /// Kubernetes Events about failing apps.
    events: EventRecorder,
    metrics: Arc<Metrics>,
    plans: PlanStore,
    /// What the web UI shows of each app, and its requests (a resumed workflow).
    ui: server::ui::UiState,
    outbox: Option<Outbox>,
    forge: Option<Arc<dyn Forge>>,
    /// `forge.appStatusLimit`: a larger deploy posts per-app statuses only for its failures.
    app_status_limit: usize,
    cluster: Arc<Cluster>,
    /// The cluster registry (its first is `cluster`): where workflows place apps.
    fleet: crate::workflow::Fleet,
    definitions: Arc<Definitions>,
    external_url: String,
    drift: Option<crate::config::DriftConfig>,
    /// `driftless.yaml`'s `analysis`: rule severities, suppressions, render limits.
    analysis: analyzer::AnalysisConfig,
    /// Which sources have fetched once (for `/readyz`) and which cannot fetch.
    readiness: Arc<server::SourceReadiness>,
    /// `concurrency` permits: one per app being planned or applied, agent-wide.
    work_permits: Semaphore,
    /// Replicas sharing the apps (`sharding` configured).
    shards: Option<Shards>,
}

/// The revision a source last deployed, kept for drift checks.
struct Deployed {
    commit: CommitId,
    output: Arc<SharedOutput>,
    sources: Arc<SourceMap>,
}

/// How long one deploy drives the workflows of its apps (steps waiting for health) before
/// moving on; a workflow still running continues on the next deploy.
const WORKFLOW_WAIT: Duration = Duration::from_secs(30);

/// The apps of a render to plan (shared with the analysis cache) with the render's source map.
struct Selected {
    output: Arc<SharedApps>,
    sources: Arc<SourceMap>,
    /// The objects of the whole render (every app, not only those selected): what a pass's
    /// prunes are a share of.
    source_objects: usize,
}

/// An app's result from the deploy that last planned it, kept while its render is unchanged.
struct AppRecord {
    state: StatusState,
    /// Workflows may still be running or suspended: such apps are planned on every deploy.
    uses_workflow: bool,
}

struct SourceWorker {
    git: GitSource,
    config: Arc<SourceConfig>,
    shared: Arc<Shared>,
    /// The cluster this source plans and applies through (see [`source_cluster`]).
    cluster: Arc<Cluster>,
    notify: Arc<Notify>,
    deployed: Option<Deployed>,
    /// The head commit last previewed, per pull request.
    previewed: BTreeMap<u64, CommitId>,
    drift_timer: Option<DriftTimer>,
    /// Per-app render and analysis results of the last snapshot rendered (deploy or preview).
    cache: Arc<std::sync::Mutex<SourceCache>>,
    /// Per app of the deployed revision, its last deploy's result.
    records: BTreeMap<AppRef, AppRecord>,
    /// The apps of `records` planned again by every deploy (last result not a success, or a
    /// workflow): [`SourceWorker::select`] looks at them without walking every record.
    unsettled: std::collections::BTreeSet<AppRef>,
    /// The next deploy must look for apps removed from Git (list every tracker): true until a
    /// deploy has looked and deleted all it found.
    gc_pending: bool,
    /// The commit whose deploy its prune budget held, with the approval stored then: a
    /// different approval deploys it again.
    awaiting_approval: Option<(CommitId, Approval)>,
    /// Holds, commit-to-live time and reviewed plans ([`crate::review`]).
    review: crate::review::SourceReview,
    /// This source's share of the apps when replicas share them.
    shard: Option<SourceShard>,
}

impl SourceWorker {
    fn new(
        git: GitSource,
        config: Arc<SourceConfig>,
        shared: Arc<Shared>,
        cluster: Arc<Cluster>,
        notify: Arc<Notify>,
    ) -> SourceWorker {
        let drift_timer = shared
            .drift
            .as_ref()
            .map(|drift| DriftTimer::new(drift.schedule.clone(), chrono::Utc::now()));
        SourceWorker {
            git,
            shard: (shared.shards.clone()).map(|shards| SourceShard::new(shards, &config.name)),
            config,
            shared,
            cluster,
            notify,
            deployed: None,
            previewed: BTreeMap::new(),
            drift_timer,
            cache: Arc::new(std::sync::Mutex::new(SourceCache::default())),
            records: BTreeMap::new(),
            unsettled: std::collections::BTreeSet::new(),
            gc_pending: true,
            awaiting_approval: None,
            review: crate::review::SourceReview::default(),
        }
    }

    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        // The first poll is immediate; after that, polls follow the interval (or the backoff),
        // webhooks poll at once, and drift checks follow their own schedule without polling.
        let mut next_poll = tokio::time::Instant::now();
        loop {
            let drift_wait = self
                .drift_timer
                .as_ref()
                .and_then(|timer| timer.until_next(chrono::Utc::now()));
            let drift_at = drift_wait.map(|wait| tokio::time::Instant::now() + wait);
            let wake_at = drift_at.map_or(next_poll, |drift_at| drift_at.min(next_poll));
            let mut poll_now = false;
            let mut members_changed = false;
            tokio::select! {
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = self.notify.notified() => {
                    tracing::debug!(source = %self.config.name, "woken by a webhook");
                    poll_now = true;
                    self.review.webhook_at = Some(chrono::Utc::now());
                }
                _ = shutdown.wait_for(|stop| *stop) => {}
                () = shard_changed(&mut self.shard) => members_changed = true,
            }
            if *shutdown.borrow() {
                break;
            }
            if members_changed {
                self.rebalance().await;
            }
            // Each step runs to completion even if shutdown is requested meanwhile.
            if poll_now || tokio::time::Instant::now() >= next_poll {
                let wait = self.poll_step().await;
                next_poll = tokio::time::Instant::now() + wait;
            }
            let drift_due = self
                .drift_timer
                .as_mut()
                .is_some_and(|timer| timer.take_due(chrono::Utc::now()));
            if drift_due {
                self.drift_check().await;
            }
        }
        if let Some(shard) = &mut self.shard {
            shard.leave().await;
        }
        tracing::info!(source = %self.config.name, "source stopped");
    }

    /// One poll and whatever it calls for. Returns how long to wait before the next poll.
    async fn poll_step(&mut self) -> Duration {
        let mut wait = self.config.poll_interval;
        self.shared.metrics.record_poll(&self.config.name);
        let outcome = self.git.poll().await;
        self.shared.metrics.record_api_call(
            ApiTarget::Git,
            !matches!(outcome, PollOutcome::Failed { .. }),
        );
        match &outcome {
            PollOutcome::Failed { error, .. } => {
                (self.shared.readiness).failed(&self.config.name, error.to_string());
                self.shared.metrics.set_fetch_ok(&self.config.name, false);
            }
            _ => {
                self.shared.readiness.fetched(&self.config.name);
                self.shared.metrics.set_fetch_ok(&self.config.name, true);
            }
        }
        match outcome {
            PollOutcome::Unchanged { .. } => {
                // A workflow resumed in the web UI continues with a deploy of the same revision.
                if self.shared.ui.take_redeploy(&self.config.name)
                    && let Some(deployed) = &self.deployed
                {
                    self.deploy(deployed.commit.clone()).await;
                }
                // A deploy held by its prune budget runs again once a new approval is stored.
                if let Some((commit, seen)) = self.awaiting_approval.clone() {
                    let stored = self.stored_approval().await;
                    if stored != seen {
                        tracing::info!(source = %self.config.name, commit = %commit, "prune approval changed; deploying again");
                        self.deploy(commit).await;
                    }
                }
                let (metrics, source) = (&self.shared.metrics, &self.config.name);
                if let Some((commit, summary)) =
                    self.review.poll_live(&self.cluster, metrics, source).await
                {
                    self.status(&commit, SUMMARY_CONTEXT, StatusState::Success, &summary);
                }
                ui_record::commit_to_live(&self.shared.ui.fleet, self.review.live.take());
                if let Some(commit) = self.plan_approved().await {
                    self.deploy(commit).await;
                }
                if let Some(commit) = self.hold_lifted().await {
                    tracing::info!(source = %self.config.name, commit = %commit, "a hold lifted; deploying again");
                    self.deploy(commit).await;
                }
            }
            PollOutcome::Changed(change) => {
                let needs_render = change.touches_source || self.deployed.is_none();
                tracing::info!(
                    source = %self.config.name,
                    commit = %change.commit,
                    update = ?change.update,
                    changed_paths = change.changed_paths.len(),
                    "branch moved"
                );
                if needs_render {
                    self.deploy(change.commit).await;
                } else {
                    self.status(
                        &change.commit,
                        SUMMARY_CONTEXT,
                        StatusState::Success,
                        "no change under the source's paths",
                    );
                }
            }
            PollOutcome::Failed {
                error,
                retry_in,
                last_good,
            } => {
                self.shared.metrics.record_error(ErrorKind::Fetch);
                tracing::warn!(
                    source = %self.config.name,
                    error = %error,
                    retry_in_s = retry_in.as_secs(),
                    last_good = last_good.as_ref().map(CommitId::short),
                    "polling the source failed; keeping the last good revision"
                );
                wait = retry_in;
            }
        }
        self.preview_pulls().await;
        wait
    }

    fn page_url(&self, commit: &CommitId) -> String {
        format!("{}/plans/{commit}", self.shared.external_url)
    }

    fn status(&self, commit: &CommitId, context: &str, state: StatusState, description: &str) {
        let (Some(outbox), Some(repo)) = (&self.shared.outbox, &self.config.forge_repo) else {
            return;
        };
        outbox.send(ForgeOp::Status {
            repo: repo.clone(),
            commit: commit.clone(),
            status: CommitStatus::new(context, state, description, Some(self.page_url(commit))),
        });
    }

    /// The holds in force now: of `apps` only, or every hold when `None` (see
    /// [`crate::review::hold::read_for`]).
    async fn holds(&self, apps: Option<&[&AppRef]>) -> crate::review::hold::Holds {
        let now = chrono::Utc::now();
        let namespace = crate::tracker::DEFAULT_NAMESPACE;
        crate::review::hold::read_for(&self.shared.cluster, namespace, apps, now).await
    }

    /// The prune approval stored for this source (none when it cannot be read).
    async fn stored_approval(&self) -> Approval {
        let cluster = &self.shared.cluster;
        match crate::prune_approval::read(
            cluster,
            crate::tracker::DEFAULT_NAMESPACE,
            &self.config.name,
        )
        .await
        {
            Ok(approval) => approval,
            Err(error) => {
                tracing::warn!(%error, "reading the prune approval failed; nothing is approved");
                Approval::None
            }
        }
    }

    /// The prune budget of a pass deploying `commit`, with the approval stored in the
    /// cluster (an approval that cannot be read approves nothing).
    async fn budget(&self, rendered: &Selected, commit: &CommitId) -> PassBudget {
        PassBudget {
            budget: self.config.prune,
            approval: self.stored_approval().await,
            source_objects: Some(rendered.source_objects),
            revision: Some(commit.to_string()),
            how_to_approve: format!(
                "approved with `driftless approve-prune --source {} --revision {commit} --objects {{objects}}`",
                self.config.name
            ),
        }
    }

    fn live_options(&self, cluster: &Cluster) -> LiveOptions {
        let mut options = LiveOptions::default();
        options.plan.cluster = cluster.name().to_owned();
        options.plan.create_namespaces = self.config.create_namespaces;
        options.apply.source = Some(self.config.name.clone());
        options.apply.boundary = Some(self.config.boundary.clone());
        options
    }

    fn store_page(&self, commit: &CommitId, title: &str, rows: &[PageApp], body: &str) {
        self.shared.plans.insert(PlanPage {
            source: self.config.name.clone(),
            commit: commit.clone(),
            title: title.to_owned(),
            apps: rows.to_vec(),
            body: body.to_owned(),
        });
    }
}

/// Logs (debug) the agent's resident memory and its peak so far at the end of a phase of a
/// deploy or drift check: the phase where the peak grows is the one that sets it (
/// `hack/scale.sh` runs the agent with these lines on). Nothing where there is no procfs.
fn note_memory(phase: &str) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    if let Some((rss_mib, peak_mib)) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| resident_mib(&status))
    {
        tracing::debug!(phase, rss_mib, peak_mib, "memory");
    }
}

/// `VmRSS` and `VmHWM` (the peak) of a `/proc/<pid>/status` text, in MiB.
fn resident_mib(status: &str) -> Option<(u64, u64)> {
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse::<u64>().ok())
    };
    Some((kib("VmRSS:")? / 1024, kib("VmHWM:")? / 1024))
}

/// `driftless/<namespace>/<app>`.
pub fn app_context(app: &AppRef) -> String {
    format!("{SUMMARY_CONTEXT}/{}/{}", app.namespace, app.name)
}

type AppResults = BTreeMap<AppRef, (StatusState, String)>;

/// Whether a render loaded well enough to prune: the files that did not load, named.
fn evidence_of(rendered: &Selected) -> Evidence {
    let app_diagnostics = rendered
        .output
        .apps
        .iter()
        .flat_map(|app| app.diagnostics());
    Evidence::of_render(&rendered.output.diagnostics, app_diagnostics, &|file| {
        Some(rendered.sources.path(file).to_owned())
    })
}

#[cfg(test)]
mod tests {

    use super::statuses::{apps_with_own_status, counts, own_status_note, summarize};
    use super::*;
    use crate::plan::Action;

    fn app(namespace: &str, name: &str) -> AppRef {
        AppRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn resident_memory_is_read_from_proc_status() {
        let status =
            "Name:\tdriftless\nVmPeak:\t 2000000 kB\nVmHWM:\t  876544 kB\nVmRSS:\t  614400 kB\n";
        assert_eq!(resident_mib(status), Some((600, 856)));
        assert_eq!(resident_mib("Name:\tdriftless\n"), None);
    }

    #[test]
    fn contexts_and_summaries() {
        assert_eq!(app_context(&app("team-a", "web")), "driftless/team-a/web");
        let mut results = AppResults::new();
        results.insert(app("a", "one"), (StatusState::Success, "ok".into()));
        results.insert(app("a", "two"), (StatusState::Failure, "bad".into()));
        let (state, description) = summarize(&results, &["a/two".to_owned()]);
        assert_eq!(state, StatusState::Failure);
        assert_eq!(description, "1 of 2 app(s) failed: a/two");
        let (state, description) = summarize(&results, &[]);
        assert_eq!(
            (state, description.as_str()),
            (StatusState::Success, "2 app(s) deployed")
        );
    }

    #[test]
    fn a_deploy_over_the_status_limit_posts_statuses_for_its_failures_only() {
        let mut results = AppResults::new();
        for i in 0..5 {
            results.insert(
                app("a", &format!("ok-{i}")),
                (StatusState::Success, "ok".into()),
            );
        }
        results.insert(app("a", "bad"), (StatusState::Failure, "bad".into()));
        results.insert(app("a", "held"), (StatusState::Pending, "held".into()));
        let names = |limit| -> Vec<String> {
            apps_with_own_status(&results, limit)
                .into_iter()
                .map(|app| app.name.clone())
                .collect()
        };
        // Within the limit: every app, and no note on the summary.
        assert_eq!(names(7).len(), 7);
        assert_eq!(own_status_note(&results, 7), None);
        // Over it: the apps that did not succeed, at most `limit` of them.
        assert_eq!(names(6), ["bad", "held"]);
        assert_eq!(names(1), ["bad"]);
        assert!(names(0).is_empty());
        assert_eq!(
            own_status_note(&results, 6).as_deref(),
            Some("; own statuses for 2 of 7 apps (appStatusLimit 6)")
        );
    }

    #[test]
    fn change_counts_are_in_contract_order() {
        let text = counts(
            [
                Action::Update,
                Action::Create,
                Action::Create,
                Action::Unchanged,
            ]
            .into_iter(),
        );
        assert_eq!(
            text,
            "2 create, 1 update, 0 delete, 0 conflict, 1 unchanged"
        );
    }
}
