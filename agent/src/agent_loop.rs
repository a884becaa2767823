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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use analyzer::{
    AnalysisCache, AnalysisOptions, AppRef, Definitions, PackedApp, Severity, SharedOutput,
    SourceMap,
};
use tokio::sync::{Notify, Semaphore, watch};
use tracing::Instrument;

use crate::cluster::{Cluster, ClusterOptions};
use crate::config::{Config, DriftMode, RepoSlug, SourceConfig};
use crate::forge::outbox::{ForgeOp, Outbox, OutboxConfig};
use crate::forge::{CommitStatus, Forge, ForgeError, PullRequest, StatusState};
use crate::metrics::{ApiTarget, ErrorKind, Metrics};
use crate::notify::Notifier;
use crate::notify::events::EventRecorder;
use crate::plan::{Action, Plan};
use crate::prune_guard::{self, Approval, Evidence, PassBudget};
use crate::report::{MarkdownOptions, plan_human, plan_markdown};
use crate::schedule::DriftTimer;
use crate::server::ui::record as ui_record;
use crate::server::{self, PageApp, PlanPage, PlanStore, ServerState, SourceTrigger};
use crate::shard::Shards;
use crate::shard::source::SourceShard;
use crate::source::git::{CommitId, GitSource, PollOutcome, SourceError};
use crate::sync::{self, LiveOptions, Orphans, SharedApps};
use pass::Pass;

mod pass;
mod sharing;
mod statuses;
use sharing::shard_changed;
use statuses::{
    app_results_from_sync, app_results_plan_only, change_counts, failed_apps, page_rows,
    plan_digest_note, summarize,
};

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

    let mut metrics = Metrics::new();
    let plans = PlanStore::default();
    let cluster = connect_cluster(&config, &metrics).await?;
    let ui = server::ui::UiState::new(
        server::ui::FleetState::default(),
        Some(cluster.clone()),
        crate::tracker::DEFAULT_NAMESPACE,
        &config.server.external_url,
    );
    ui_record::sources(&ui.fleet, &config);
    let (shard_stop, shard_stop_rx) = watch::channel(false);
    let shards = (config.sharding.clone()).map(|sharding| {
        Shards::start(
            sharding,
            cluster.clone(),
            metrics.registry_mut(),
            shard_stop_rx,
        )
    });
    let metrics = Arc::new(metrics);
    let fleet = crate::workflow::Fleet::from_config(&config)
        .await
        .map_err(|error| AgentError::ClusterConnectFailed {
            cluster: error.cluster,
            source: error.source,
        })?;
    let (forge, outbox, outbox_task) = match &config.forge {
        Some(forge_config) => {
            let forge: Arc<dyn Forge> = Arc::from(
                crate::forge::connect(forge_config).map_err(AgentError::ForgeConnectFailed)?,
            );
            let (outbox, task) = Outbox::start(
                forge.clone(),
                metrics.clone(),
                OutboxConfig::in_cache_dir(&config.cache_dir),
                shutdown_rx.clone(),
            );
            (Some(forge), Some(outbox), Some(task))
        }
        None => (None, None, None),
    };
    let (notifier, notifier_tasks) = Notifier::start(
        &config.notifications,
        metrics.clone(),
        crate::notify::RetryPolicy::default(),
        shutdown_rx.clone(),
    )
    .map_err(AgentError::NotifierStartFailed)?;
    let events = EventRecorder::new(
        cluster.clone(),
        shards.as_ref().map_or("driftless", |shards| shards.me()),
    );
    let shared = Arc::new(Shared {
        notifier,
        events,
        metrics: metrics.clone(),
        plans: plans.clone(),
        ui: ui.clone(),
        outbox: outbox.clone(),
        forge,
        cluster,
        fleet,
        definitions: Arc::new(Definitions::builtin()),
        external_url: config.server.external_url.clone(),
        drift: config.drift.clone(),
        analysis: config.analysis.clone(),
        readiness: Arc::new(server::SourceReadiness::new(
            config.sources.iter().map(|source| source.name.as_str()),
        )),
        work_permits: Semaphore::new(config.concurrency.max(1)),
        shards,
    });

    let mut workers = Vec::new();
    let mut triggers = Vec::new();
    for source_config in &config.sources {
        let source_config = Arc::new(source_config.clone());
        let git = GitSource::open(config.cache_dir.clone(), source_config.clone())
            .await
            .map_err(|source| AgentError::SourceOpenFailed {
                source_name: source_config.name.clone(),
                source,
            })?;
        let notify = Arc::new(Notify::new());
        triggers.push(SourceTrigger {
            source: source_config.name.clone(),
            url: source_config.url.clone(),
            forge_repo: source_config.forge_repo.clone(),
            notify: notify.clone(),
        });
        let cluster = source_cluster(&shared.cluster, &source_config, &config)?;
        workers.push(SourceWorker::new(
            git,
            source_config,
            shared.clone(),
            cluster,
            notify,
        ));
    }

    let listener = server::bind(config.server.listen).await?;
    let listen = listener
        .local_addr()
        .map_err(|source| server::ServerError::BindFailed {
            addr: config.server.listen,
            source,
        })?;
    let server_state = ServerState {
        metrics: metrics.clone(),
        readiness: shared.readiness.clone(),
        webhook_secret: config.server.webhook_secret.clone(),
        triggers: Arc::new(triggers),
        plans: plans.clone(),
        shards: shared.shards.clone(),
        auth: server::ApiAuth {
            token: config.server.api_token.clone(),
            trusted_header: config.server.trusted_header.clone(),
            operator_token: config.server.operator_token.clone(),
            groups_header: config.server.groups_header.clone(),
            operator_groups: config.server.operator_groups.clone(),
        },
        ui,
    };
    let mut server_shutdown = shutdown_rx.clone();
    let (server_stop_tx, server_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server_task = tokio::spawn(server::serve(listener, server_state, async move {
        let _ = server_stop_rx.await;
    }));
    tracing::info!(%listen, sources = config.sources.len(), "agent started");
    if let Some(started) = started {
        let _ = started.send(AgentHandles {
            metrics: metrics.clone(),
            plans: plans.clone(),
            listen,
        });
    }

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
    // Every source stopped and gave up its claims: leave the members.
    let _ = shard_stop.send(true);
    if let Some(shards) = &shared.shards {
        shards.leave().await;
    }
    // Every source stopped: give queued statuses a last chance, then stop serving.
    let _ = server_shutdown.wait_for(|stop| *stop).await;
    drop(outbox);
    if let Some(task) = outbox_task
        && tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .is_err()
    {
        tracing::warn!("forge outbox did not drain within 10s at shutdown");
    }
    for task in notifier_tasks {
        if tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .is_err()
        {
            tracing::warn!("a notification channel did not drain within 10s at shutdown");
        }
    }
    let _ = server_stop_tx.send(());
    match server_task.await {
        Ok(result) => result?,
        Err(error) => tracing::error!(error = %error, "the HTTP server task panicked"),
    }
    tracing::info!("agent stopped");
    Ok(())
}

async fn connect_cluster(config: &Config, metrics: &Metrics) -> Result<Arc<Cluster>, AgentError> {
    // FIXME(#7): one cluster per agent for now; placement across the registry comes with the
    // multi-cluster policies.
    let cluster_config = config.clusters.first();
    let options = ClusterOptions {
        name: cluster_config.map_or_else(|| "local".to_owned(), |cluster| cluster.name.clone()),
        qps: f64::from(config.qps),
        burst: config.burst,
        ..ClusterOptions::default()
    };
    let cluster = match cluster_config
        .and_then(|cluster| cluster.kubeconfig.as_ref().map(|path| (cluster, path)))
    {
        Some((cluster_config, path)) => {
            Cluster::connect(path, cluster_config.context.as_deref(), &options)
                .await
                .map_err(|source| AgentError::ClusterConnectFailed {
                    cluster: cluster_config.name.clone(),
                    source,
                })?
        }
        None => {
            // In-cluster service account (or $KUBECONFIG), as kube's `Client::try_default`;
            // the configuration is kept for sources that apply as a ServiceAccount.
            let kube_config = kube::Config::infer().await.map_err(|error| {
                AgentError::DefaultClientFailed(kube::Error::InferConfig(error))
            })?;
            Cluster::from_config(kube_config, &options).map_err(|source| {
                AgentError::ClusterConnectFailed {
                    cluster: options.name.clone(),
                    source,
                }
            })?
        }
    };
    let cluster = cluster
        .counting_requests(metrics.kube_requests())
        .map_err(|source| AgentError::ClusterConnectFailed {
            cluster: options.name.clone(),
            source,
        })?;
    // The agent plans every app on each drift check: it keeps the collections it reads
    // current through watches (`watch_cache` has the rules).
    Ok(Arc::new(cluster.with_watch_cache()))
}

/// The cluster a source's apps are planned and applied through: the agent's own, or, with a
/// `serviceAccount`, the same cluster with object reads and writes made as that ServiceAccount
/// (the apiserver's RBAC bounds the source).
fn source_cluster(
    cluster: &Arc<Cluster>,
    source: &SourceConfig,
    config: &Config,
) -> Result<Arc<Cluster>, AgentError> {
    let Some(account) = &source.service_account else {
        return Ok(cluster.clone());
    };
    let options = ClusterOptions {
        name: cluster.name().to_owned(),
        qps: f64::from(config.qps),
        burst: config.burst,
        ..ClusterOptions::default()
    };
    // No groups sent: the apiserver gives an impersonated ServiceAccount its own groups, so
    // the agent needs `impersonate` on that one account and nothing on groups (deploy/rbac.yaml).
    cluster
        .impersonating(&account.user_name(), Vec::new(), &options)
        .map(Arc::new)
        .map_err(|source| AgentError::ClusterConnectFailed {
            cluster: cluster.name().to_owned(),
            source,
        })
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

/// A render of one commit.
/// How long one deploy drives the workflows of its apps (steps waiting for health) before
/// moving on; a workflow still running continues on the next deploy.
const WORKFLOW_WAIT: Duration = Duration::from_secs(30);

struct Rendered {
    output: Arc<SharedOutput>,
    sources: Arc<SourceMap>,
}

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

/// What one deploy plans: the apps to plan (a subset of the render) and the orphans to look for.
struct Selection {
    output: Arc<SharedApps>,
    orphans: Orphans,
    /// Apps of the render left out: unchanged since their last successful deploy.
    n_unchanged: usize,
    /// Some app of the deployed revision is not in the render (removed from Git).
    removed: bool,
}

/// A source's analysis cache and the commit it last analysed.
#[derive(Default)]
struct SourceCache {
    analysis: AnalysisCache,
    commit: Option<CommitId>,
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

    /// The cluster registry with this commit's renders per placement, for the workflows of
    /// `workflows` (none needed without topology or replication policies). A commit that
    /// cannot be read again leaves the placements empty: such apps are refused, not misplaced.
    async fn render(&self, commit: &CommitId) -> Result<Rendered, String> {
        let definitions = self.shared.definitions.clone();
        // Templates see the cluster's own release as `context.clusterVersion`, as in `plan
        // --kubeconfig`; an unreadable /version keeps the target release (the plan reports it).
        let mut options = AnalysisOptions::with_config(self.shared.analysis.clone());
        if let Ok(version) = crate::observe::cluster_version(&self.shared.cluster).await {
            options.render.cluster_version = version;
        }
        // The source's boundary: violations block their app, visible in previews.
        options.config.boundary = Some(self.config.boundary.clone());
        let started = Instant::now();
        let cache = self.cache.clone();
        let repo = self.git.repo().clone();
        let commit = commit.clone();
        let rendered = tokio::task::spawn_blocking(move || {
            // A panic while holding the lock leaves the cache behind; it is reset below.
            let mut cache = cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let cache = &mut *cache;
            // The files changed since the cache's commit; a failed diff reads the whole commit.
            let changes = cache
                .commit
                .as_ref()
                .and_then(|previous| repo.changes(previous, &commit).ok());
            // A panic in the renderer must not take the agent down: it becomes this commit's
            // failure, with a request to report it.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // The analysis rules run with the render (issue 8): their errors block the app.
                if let Some(changes) = &changes
                    && let Some(patched) = analyzer::analyze_changes(
                        changes,
                        &definitions,
                        &options,
                        &mut cache.analysis,
                    )
                {
                    return Ok(patched);
                }
                // With the blob ids, unchanged files are recognised without reading their
                // texts.
                let (snapshot, blob_ids) = repo
                    .snapshot_with_ids(&commit)
                    .map_err(|error| format!("reading the commit: {error}"))?;
                Ok(analyzer::analyze_snapshot_shared_with_ids(
                    &snapshot,
                    &blob_ids,
                    &definitions,
                    &options,
                    &mut cache.analysis,
                ))
            }));
            match &result {
                Ok(Ok(_)) => cache.commit = Some(commit),
                // The commit could not be read: the cache is still the last commit's.
                Ok(Err(_)) => {}
                // Interrupted half-way: trust nothing of it.
                Err(_) => *cache = SourceCache::default(),
            }
            (result, cache.analysis.last_run())
        })
        .await;
        self.shared
            .metrics
            .observe_render(&self.config.name, started.elapsed());
        match rendered {
            Ok((Ok(Ok((output, sources))), stats)) => {
                self.shared.metrics.record_render_cache(
                    &self.config.name,
                    stats.reused,
                    stats.analyzed,
                );
                tracing::debug!(
                    reused = stats.reused,
                    analyzed = stats.analyzed,
                    evicted = stats.evicted,
                    "rendered"
                );
                Ok(Rendered {
                    output: Arc::new(output),
                    sources: Arc::new(sources),
                })
            }
            Ok((Ok(Err(message)), _)) => Err(message),
            Ok((Err(_), _)) | Err(_) => {
                self.shared.metrics.record_error(ErrorKind::Render);
                Err(
                    "internal error: the renderer panicked; please report this with the repository"
                        .to_owned(),
                )
            }
        }
    }

    /// Reviewed-plan mode: the held apps' new plan, posted on their pull request.
    fn post_merge_plan(&self, plan: &Plan, sources: &SourceMap) {
        let (Some(mode), Some(outbox), Some(repo)) = (
            &self.config.reviewed_plan,
            &self.shared.outbox,
            &self.config.forge_repo,
        ) else {
            return;
        };
        let limit = self
            .shared
            .forge
            .as_ref()
            .map_or(60_000, |forge| forge.comment_limit());
        if let Some((pull, marker, body)) =
            self.review
                .reviewed
                .comment(plan, sources, &mode.approvers, limit)
        {
            outbox.send(ForgeOp::Comment {
                repo: repo.clone(),
                pull,
                marker,
                body,
            });
        }
    }

    /// Reviewed-plan mode: the commit to deploy again once a held plan is approved.
    async fn plan_approved(&mut self) -> Option<CommitId> {
        let mode = self.config.reviewed_plan.as_ref()?;
        let forge = self.shared.forge.as_deref();
        let (repo, cluster) = (self.config.forge_repo.as_ref(), &self.shared.cluster);
        self.review
            .reviewed
            .approval(forge, repo, cluster, &mode.approvers)
            .await
    }

    /// The holds in force now (see [`crate::review::hold`]).
    async fn holds(&self) -> crate::review::hold::Holds {
        let now = chrono::Utc::now();
        crate::review::hold::read(&self.shared.cluster, crate::tracker::DEFAULT_NAMESPACE, now)
            .await
    }

    /// The deployed commit, when a hold that kept some of its apps has lifted since.
    async fn hold_lifted(&self) -> Option<CommitId> {
        let deployed = self.deployed.as_ref()?;
        if self.review.held.is_empty() {
            return None;
        }
        let holds = self.holds().await;
        let lifted = crate::review::hold::lifted(&self.review.held, &holds);
        (!lifted.is_empty()).then(|| deployed.commit.clone())
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

    /// Deploys a commit of the tracked branch: plans and applies the apps whose render changed
    /// (see [`SourceWorker::select`]); the others keep their last result.
    async fn deploy(&mut self, commit: CommitId) {
        let span = tracing::info_span!("deploy", source = %self.config.name, commit = %commit, revision = commit.short());
        let started = Instant::now();
        async {
            if self.shard.is_none() {
                self.status(&commit, SUMMARY_CONTEXT, StatusState::Pending, "rendering and planning");
            }
            let rendered = match self.render(&commit).await {
                Ok(rendered) => rendered,
                Err(message) => {
                    tracing::error!(error = %message, "render failed");
                    self.status(&commit, SUMMARY_CONTEXT, StatusState::Error, &message);
                    let page = self.page_url(&commit);
                    self.shared.notifier.deploy_refused(&self.config.name, commit.as_str(), &message, page);
                    return;
                }
            };
            note_memory("render");
            let n_apps = rendered.output.apps.len();
            self.shared.metrics.set_apps(&self.config.name, n_apps);
            if n_apps == 0 {
                let message = no_apps_message(&rendered.output);
                tracing::error!("{message}");
                self.status(&commit, SUMMARY_CONTEXT, StatusState::Failure, &message);
                self.store_page(&commit, "deploy (refused)", &[], &message);
                let page = self.page_url(&commit);
                self.shared.notifier.deploy_refused(&self.config.name, commit.as_str(), &message, page);
                return;
            }
            self.share(&rendered.output).await;
            let mut selection = self.select(&rendered.output, true);
            self.narrow(&mut selection).await;
            let scanned = !matches!(selection.orphans, Orphans::Skip);
            for app in &selection.output.apps {
                self.status(&commit, &app_context(&app.app), StatusState::Pending, "planning");
            }
            let selected = Selected {
                output: selection.output.clone(),
                sources: rendered.sources.clone(),
                source_objects: object_count(&rendered.output),
            };
            // Apps with a workflow are applied step by step by it (agent::workflow), the rest
            // as a whole (the plan already dropped what that apply does not read).
            let pass = self.sync_pass(&selected, &commit, &selection.orphans, Pass::Deploy).await;
            note_memory("apply");
            let (synced, workflows, holds, probe) = (pass.synced, pass.workflows, pass.holds, pass.probe);
            ui_record::workflows(&self.shared.ui.fleet, &self.config.name, synced.workflow_results());
            let warnings = sync::workflow_warnings(synced.workflow_results());
            let mut results = app_results_from_sync(&synced);
            let held = synced.held();
            let whole_plan = synced.plan;
            let metrics = &self.shared.metrics;
            self.review.held = crate::review::hold::mark_held(&mut results, &held, &holds, metrics, &self.config.name);
            self.review.reviewed.fail_held(&mut results, &mut self.review.held);
            ui_record::deploy(&self.shared.ui.fleet, &ui_record::Deploy {
                source: &self.config.name,
                cluster: self.cluster.name(),
                commit: &ui_record::commit_info(self.git.repo(), &commit),
                plan: &whole_plan,
                results: &results,
                held: &self.review.held,
                finished_at: SystemTime::now(),
                duration: started.elapsed(),
            });
            let mut failed = Vec::new();
            for (app, (state, description)) in &results {
                let span = tracing::info_span!("reconcile", app.namespace = %app.namespace, app.name = %app.name, revision = commit.short(), commit = %commit);
                let _entered = span.enter();
                match state {
                    StatusState::Success => tracing::info!(%description, "app reconciled"),
                    StatusState::Pending => tracing::info!(%description, "app held"),
                    _ => {
                        self.shared.metrics.record_error(ErrorKind::Apply);
                        tracing::warn!(%description, "app failed");
                        self.shared.events.deploy_failed(app, description);
                        failed.push(app.to_string());
                    }
                }
                self.status(&commit, &app_context(app), *state, description);
            }
            self.shared.notifier.deploy_failed(
                &self.config.name,
                commit.as_str(),
                n_apps,
                failed_apps(&results),
                self.page_url(&commit),
            );
            // Apps that left Git and whose deletion completed are forgotten; a deletion that
            // failed, or a tracker list that failed, makes the next deploy look again. The
            // render is sorted by app: a binary search, not a set of every app per commit.
            let apps_rendered = &rendered.output.apps;
            let in_render = |app: &AppRef| {
                apps_rendered
                    .binary_search_by(|rendered| rendered.app.cmp(app))
                    .is_ok()
            };
            let listing_failed = whole_plan
                .diagnostics
                .iter()
                .any(|diagnostic| diagnostic.rule == "cluster-error");
            let gc_failed = results
                .iter()
                .any(|(app, (state, _))| !in_render(app) && *state != StatusState::Success);
            if scanned {
                self.gc_pending = listing_failed || gc_failed;
            } else if gc_failed {
                self.gc_pending = true;
            }
            // Records are kept for rendered apps only: with no app removed, none to drop.
            if selection.removed {
                self.records.retain(|app, _| in_render(app));
                self.unsettled.retain(|app| in_render(app));
            }
            for (app, (state, _)) in &results {
                if in_render(app) {
                    let record = AppRecord {
                        state: *state,
                        uses_workflow: workflows.contains_key(app),
                    };
                    if record.state == StatusState::Success && !record.uses_workflow {
                        self.unsettled.remove(app);
                    } else {
                        self.unsettled.insert(app.clone());
                    }
                    self.records.insert(app.clone(), record);
                }
            }
            // A planned app without a result has no record: planned again next time.
            for app in &selection.output.apps {
                if !results.contains_key(&app.app) {
                    self.unsettled.insert(app.app.clone());
                }
            }
            let (mut summary_state, mut summary) = summarize(&results, &failed);
            // A pass held by its prune budget says so on the commit, with the count, and waits
            // for an approval (polled, see `poll_step`).
            self.awaiting_approval = None;
            if let Some(held) = whole_plan
                .diagnostics
                .iter()
                .find(|diagnostic| diagnostic.rule == prune_guard::RULE_PRUNE_BUDGET)
            {
                summary_state = StatusState::Failure;
                summary = held.message.clone();
                let page = self.page_url(&commit);
                self.shared.notifier.prune_held(&self.config.name, commit.as_str(), &held.message, page);
                self.shared.events.prunes_held(&whole_plan, &held.message);
                let seen = self.stored_approval().await;
                self.awaiting_approval = Some((commit.clone(), seen));
            }
            if selection.n_unchanged > 0 {
                summary = format!(
                    "{summary}; {} app(s) unchanged, not planned",
                    selection.n_unchanged
                );
            }
            summary.push_str(&crate::review::hold::summary_note(&self.review.held));
            if summary_state == StatusState::Success {
                let (metrics, source) = (&self.shared.metrics, &self.config.name);
                let note = (self.review).deployed(&self.cluster, self.git.repo(), &commit, probe, &summary, metrics, source).await;
                summary.push_str(&note);
                ui_record::commit_to_live(&self.shared.ui.fleet, self.review.live.take());
            }
            // Replicas sharing the apps summarise from all their results (`share_results`).
            if self.shard.is_none() {
                self.status(&commit, SUMMARY_CONTEXT, summary_state, &summary);
            }
            self.post_merge_plan(&whole_plan, &rendered.sources);
            let rows = page_rows(&results);
            let mut body = format!("{summary}\n\n{}", plan_human(&whole_plan));
            if !warnings.is_empty() {
                body = format!("{}\n\n{body}", warnings.join("\n"));
            }
            if selection.n_unchanged > 0 {
                body = format!(
                    "{} app(s) unchanged since their last deploy: not planned (the drift schedule checks them).\n\n{body}",
                    selection.n_unchanged
                );
            }
            drop(whole_plan);
            self.store_page(&commit, &format!("deploy of {}", self.config.branch), &rows, &body);
            note_memory("deploy");
            tracing::info!(
                apps = n_apps,
                planned = selection.output.apps.len(),
                failed = failed.len(),
                "deployed"
            );
            self.deployed = Some(Deployed {
                commit,
                output: rendered.output,
                sources: rendered.sources,
            });
            self.share_results().await;
        }
        .instrument(span)
        .await;
    }

    /// The apps of `output` to plan, and whether to look for apps removed from Git. Planned:
    /// apps never deployed by this process, apps whose last result was not a success, apps
    /// with a workflow, and apps whose render (objects, blocking diagnostics, input hash)
    /// differs from the deployed revision's. For a deploy, every app when nothing was deployed
    /// yet; for a preview (`deploy` false), every app that differs from the deployed revision.
    ///
    /// O(changed apps): when both renders hold the same apps, the chunks the render
    /// shares with the deployed one ([`analyzer::Chunked::same_chunk`]) are skipped whole, and
    /// only the apps of other chunks and the apps whose last deploy did not settle are
    /// looked at; otherwise one merge walk over both renders (both sorted by app; an app the
    /// analysis cache reused is the deployed one by pointer). The apps to plan are shared
    /// (`Arc`), not copied: a first deploy plans every app.
    fn select(&self, output: &SharedOutput, deploy: bool) -> Selection {
        let empty = analyzer::Chunked::default();
        let previous = self
            .deployed
            .as_ref()
            .map_or(&empty, |deployed| &deployed.output.apps);
        // Whether the app at `index` (in both renders) is left out: deployed as it is now.
        let unchanged = |previous: &PackedApp, app: &Arc<PackedApp>| {
            let kept = !deploy
                || self.records.get(&app.app).is_some_and(|record| {
                    record.state == StatusState::Success && !record.uses_workflow
                });
            kept && (std::ptr::eq(previous, Arc::as_ptr(app)) || !render_changed(previous, app))
        };
        let mut wanted: Vec<Arc<PackedApp>> = Vec::new();
        let mut n_unchanged = 0;
        let mut removed = false;
        let candidates = self.candidates(previous, output, deploy);
        if let Some(candidates) = candidates {
            for index in candidates {
                let (Some(previous), Some(app)) = (previous.get(index), output.apps.get(index))
                else {
                    continue;
                };
                if !unchanged(previous, app) {
                    wanted.push(Arc::clone(app));
                }
            }
            n_unchanged = output.apps.len() - wanted.len();
        } else {
            // Merge walk: `next_previous` is the first deployed app not yet passed.
            let mut next_previous = 0;
            for app in output.apps.iter() {
                while let Some(passed) = previous
                    .get(next_previous)
                    .filter(|passed| passed.app < app.app)
                {
                    tracing::trace!(app = %passed.app, "app left the render");
                    removed = true;
                    next_previous += 1;
                }
                let same_app = previous
                    .get(next_previous)
                    .filter(|previous| previous.app == app.app);
                if same_app.is_some() {
                    next_previous += 1;
                }
                if same_app.is_some_and(|previous| unchanged(previous, app)) {
                    n_unchanged += 1;
                } else {
                    wanted.push(Arc::clone(app));
                }
            }
            removed |= next_previous < previous.len();
        }
        let look_for_orphans = removed || (deploy && (self.gc_pending || self.deployed.is_none()));
        let orphans = if look_for_orphans {
            Orphans::NotIn(output.apps.iter().map(|app| app.app.clone()).collect())
        } else {
            Orphans::Skip
        };
        Selection {
            output: Arc::new(SharedApps {
                apps: wanted,
                diagnostics: output.diagnostics.clone(),
            }),
            orphans,
            n_unchanged,
            removed,
        }
    }

    /// When `output` holds the apps of `previous` at the same indices: the indices of the
    /// apps [`SourceWorker::select`] must look at (sorted), those of chunks the two do not
    /// share and, for a deploy, those whose last deploy did not settle. `None` when the apps
    /// differ (or nothing was deployed).
    fn candidates(
        &self,
        previous: &analyzer::Chunked<Arc<PackedApp>>,
        output: &SharedOutput,
        deploy: bool,
    ) -> Option<Vec<usize>> {
        let len = output.apps.len();
        if previous.len() != len || len == 0 {
            return None;
        }
        let chunk = analyzer::Chunked::<Arc<PackedApp>>::CHUNK;
        let mut candidates = Vec::new();
        for first in (0..len).step_by(chunk) {
            if output.apps.same_chunk(previous, first / chunk) {
                continue;
            }
            for index in first..(first + chunk).min(len) {
                if previous.get(index)?.app != output.apps.get(index)?.app {
                    return None;
                }
                candidates.push(index);
            }
        }
        if deploy {
            for app in &self.unsettled {
                // Not in the render: then it left it, and the apps differ.
                let index = output
                    .apps
                    .binary_search_by(|rendered| rendered.app.cmp(app))
                    .ok()?;
                candidates.push(index);
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        Some(candidates)
    }

    /// Plan-only previews of open pull requests into the tracked branch (by the leader when
    /// replicas share the apps).
    async fn preview_pulls(&mut self) {
        if self.shard.as_ref().is_some_and(|shard| !shard.is_leader()) {
            return;
        }
        let (Some(forge), Some(repo)) = (self.shared.forge.clone(), self.config.forge_repo.clone())
        else {
            return;
        };
        let pulls = match forge.open_pulls(&repo).await {
            Ok(pulls) => {
                self.shared.metrics.record_api_call(ApiTarget::Forge, true);
                pulls
            }
            Err(error) => {
                self.shared.metrics.record_api_call(ApiTarget::Forge, false);
                self.shared.metrics.record_error(ErrorKind::Forge);
                tracing::warn!(error = %error, "listing pull requests failed; previews wait for the next poll");
                return;
            }
        };
        self.previewed
            .retain(|number, _| pulls.iter().any(|pull| pull.number == *number));
        for pull in pulls {
            if pull.base_branch != self.config.branch
                || self.previewed.get(&pull.number) == Some(&pull.head_commit)
            {
                continue;
            }
            if let Err(refusal) = self.config.previews.admits(&pull.author, pull.from_fork) {
                // Nothing of an untrusted pull request is rendered or planned.
                tracing::info!(pull = pull.number, author = %pull.author, %refusal, "pull request not previewed");
                self.previewed.insert(pull.number, pull.head_commit.clone());
                continue;
            }
            let has_head =
                |git: &GitSource| git.repo().has_commit(&pull.head_commit).unwrap_or(false);
            if !has_head(&self.git) {
                // Only open pull requests' heads are fetched, when they are to be previewed.
                if let Err(error) = self.git.fetch_pull(pull.number).await {
                    tracing::warn!(pull = pull.number, error = %error, "fetching the pull request head failed");
                }
            }
            if !has_head(&self.git) {
                // Pushed after our fetch (or from a fork we cannot fetch): the next poll tries
                // again.
                tracing::debug!(pull = pull.number, "pull request head not fetched yet");
                continue;
            }
            self.preview(&repo, &pull).await;
            self.previewed.insert(pull.number, pull.head_commit.clone());
        }
    }

    async fn preview(&mut self, repo: &RepoSlug, pull: &PullRequest) {
        let commit = &pull.head_commit;
        let span = tracing::info_span!("preview", source = %self.config.name, pull = pull.number, commit = %commit, revision = commit.short());
        async {
            self.status(
                commit,
                SUMMARY_CONTEXT,
                StatusState::Pending,
                "planning (preview, nothing is applied)",
            );
            let rendered = match self.render(commit).await {
                Ok(rendered) => rendered,
                Err(message) => {
                    self.status(commit, SUMMARY_CONTEXT, StatusState::Error, &message);
                    return;
                }
            };
            // Only what differs from the deployed revision: that is what the pull request changes.
            let selection = self.select(&rendered.output, false);
            let selected = Selected {
                output: selection.output,
                sources: rendered.sources.clone(),
                source_objects: object_count(&rendered.output),
            };
            let pass = self
                .sync_pass(&selected, commit, &selection.orphans, Pass::Preview)
                .await;
            let plan = &pass.synced.plan;
            self.review
                .reviewed
                .record_preview(pull.number, commit, plan);
            let limit = self
                .shared
                .forge
                .as_ref()
                .map_or(60_000, |forge| forge.comment_limit())
                .saturating_sub(200);
            let markdown =
                plan_markdown(plan, &rendered.sources, MarkdownOptions { max_len: limit });
            if let Some(outbox) = &self.shared.outbox {
                outbox.send(ForgeOp::Comment {
                    repo: repo.clone(),
                    pull: pull.number,
                    marker: crate::forge::plan_comment_marker(&self.config.name),
                    body: markdown,
                });
            }
            let results = app_results_plan_only(plan, "preview");
            ui_record::preview(&self.shared.ui.fleet, &self.config.name, pull, plan);
            let (state, description) = if plan.has_errors() {
                let n_blocked = results
                    .values()
                    .filter(|(state, _)| *state != StatusState::Success)
                    .count();
                (
                    StatusState::Failure,
                    format!("plan has errors: {n_blocked} app(s) blocked"),
                )
            } else {
                (
                    StatusState::Success,
                    format!("plan: {}{}", change_counts(plan), plan_digest_note(plan)),
                )
            };
            self.status(commit, SUMMARY_CONTEXT, state, &description);
            self.store_page(
                commit,
                &format!("preview of pull request #{}", pull.number),
                &page_rows(&results),
                &plan_human(plan),
            );
            tracing::info!(pull = pull.number, %description, "previewed");
        }
        .instrument(span)
        .await;
    }

    /// Re-plans the deployed revision against the cluster; reports or corrects drift.
    async fn drift_check(&mut self) {
        let (Some(deployed), Some(drift)) = (&self.deployed, self.shared.drift.clone()) else {
            return;
        };
        let commit = deployed.commit.clone();
        // Drift checks plan every app, shared with the deployed render (no copy).
        let mut rendered = Selected {
            output: Arc::new(SharedApps {
                apps: deployed.output.apps.iter().cloned().collect(),
                diagnostics: deployed.output.diagnostics.clone(),
            }),
            sources: deployed.sources.clone(),
            source_objects: object_count(&deployed.output),
        };
        let mut orphans = Orphans::NotRendered;
        if let Some(shard) = &mut self.shard {
            // Only the apps this replica owns and has claimed; orphans are the leader's.
            let (claimed, _) = shard.claim(&rendered.output.apps).await;
            rendered.output = Arc::new(SharedApps {
                apps: claimed,
                diagnostics: rendered.output.diagnostics.clone(),
            });
            if !shard.is_leader() {
                orphans = Orphans::Skip;
            }
        }
        let span = tracing::info_span!("drift", source = %self.config.name, commit = %commit, revision = commit.short());
        async {
            // Every app, and every orphan: drift checks are what covers the unchanged apps.
            // Only a correction applies: a report keeps nothing of the observations.
            let pass = match drift.mode {
                DriftMode::Correct => Pass::DriftCorrect,
                DriftMode::Report => Pass::DriftReport,
            };
            let outcome = self.sync_pass(&rendered, &commit, &orphans, pass).await;
            let synced = &outcome.synced;
            let source = &self.config.name;
            ui_record::drift(&self.shared.ui.fleet, source, commit.as_str(), &synced.plan);
            self.shared
                .events
                .drift_checked(&synced.plan, commit.short());
            let mut drifted = Vec::new();
            for app_plan in &synced.plan.apps {
                let has_drift = app_plan
                    .changes
                    .iter()
                    .any(|change| change.action != Action::Unchanged);
                let app = &app_plan.app;
                (self.shared.metrics).set_drifted(source, &app.namespace, &app.name, has_drift);
                if has_drift {
                    drifted.push(app_plan.app.to_string());
                }
            }
            if let (DriftMode::Report, Some(outbox), Some(repo)) =
                (drift.mode, &self.shared.outbox, &self.config.forge_repo)
            {
                (self.review.drift_issues).sync(
                    outbox,
                    repo,
                    source,
                    &commit,
                    &synced.plan,
                    &rendered.sources,
                );
            }
            if drifted.is_empty() {
                self.shared.notifier.drift_cleared(source);
                tracing::info!("no drift");
                self.status(&commit, DRIFT_CONTEXT, StatusState::Success, "no drift");
                return;
            }
            tracing::warn!(apps = ?drifted, mode = ?drift.mode, "drift found");
            let page = self.page_url(&commit);
            self.shared
                .notifier
                .drift_found(source, commit.as_str(), &drifted, page);
            let (state, description) = match drift.mode {
                DriftMode::Report => (
                    StatusState::Failure,
                    format!("drift in {} app(s): {}", drifted.len(), drifted.join(", ")),
                ),
                DriftMode::Correct => {
                    let mut results = app_results_from_sync(synced);
                    let metrics = &self.shared.metrics;
                    let held = crate::review::hold::mark_held(
                        &mut results,
                        &synced.held(),
                        &outcome.holds,
                        metrics,
                        source,
                    );
                    ui_record::corrected(&self.shared.ui.fleet, source, &results);
                    let corrected = crate::review::hold::drift_corrected(&results, &held, &drifted);
                    if corrected.0 == StatusState::Success {
                        for app_plan in &synced.plan.apps {
                            let app = &app_plan.app;
                            metrics.set_drifted(source, &app.namespace, &app.name, false);
                        }
                    }
                    corrected
                }
            };
            self.status(&commit, DRIFT_CONTEXT, state, &description);
        }
        .instrument(span)
        .await;
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

/// The fleet the workflows of `workflows` deploy to at `commit`, with their renders per
/// placement when some place the app on several clusters.
async fn fleet_for(
    git: &GitSource,
    shared: &Shared,
    commit: &CommitId,
    workflows: &BTreeMap<AppRef, analyzer::model::Application>,
) -> crate::workflow::Fleet {
    if !crate::workflow::needs_placements(workflows.values()) {
        return shared.fleet.with_placements(BTreeMap::new());
    }
    let snapshot = match git.snapshot(commit.clone()).await {
        Ok(snapshot) => snapshot,
        Err(error) => {
            tracing::warn!(error = %error, "reading the commit for per-placement renders failed");
            return shared.fleet.with_placements(BTreeMap::new());
        }
    };
    let mut options = AnalysisOptions::default().render;
    if let Ok(version) = crate::observe::cluster_version(&shared.cluster).await {
        options.cluster_version = version;
    }
    let definitions = shared.definitions.clone();
    let apps = workflows.clone();
    let placements = tokio::task::spawn_blocking(move || {
        crate::workflow::placements_of(&snapshot, &definitions, &options, &apps)
    })
    .await
    .unwrap_or_default();
    shared.fleet.with_placements(placements)
}

/// Drops every `take-over` policy.
fn without_take_over(policies: &mut BTreeMap<AppRef, Vec<analyzer::model::Policy>>) {
    for app_policies in policies.values_mut() {
        app_policies.retain(|policy| policy.policy_type != "take-over");
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

/// True when an app's render differs from an earlier one in anything a deploy acts on.
fn render_changed(previous: &PackedApp, new: &PackedApp) -> bool {
    previous.input_hash != new.input_hash
        || previous.is_blocked() != new.is_blocked()
        || previous.objects != new.objects
}

/// `driftless/<namespace>/<app>`.
pub fn app_context(app: &AppRef) -> String {
    format!("{SUMMARY_CONTEXT}/{}/{}", app.namespace, app.name)
}

type AppResults = BTreeMap<AppRef, (StatusState, String)>;

/// The apps of `results` that did not succeed, with why, for notifications.
/// The number of objects a render holds, every app's.
fn object_count(output: &SharedOutput) -> usize {
    output
        .apps
        .iter()
        .map(|app| analyzer::ObjectsForm::len(&app.objects))
        .sum()
}

/// Whether a render loaded well enough to prune: the files that did not load, named.
fn evidence_of(rendered: &Selected) -> Evidence {
    let app_diagnostics = rendered.output.apps.iter().flat_map(|app| &app.diagnostics);
    Evidence::of_render(&rendered.output.diagnostics, app_diagnostics, &|file| {
        Some(rendered.sources.path(file).to_owned())
    })
}

fn no_apps_message(output: &SharedOutput) -> String {
    let first_problem = output
        .diagnostics
        .iter()
        .find(|diagnostic| diagnostic.severity == Severity::Error)
        .map(|diagnostic| format!(" (first problem: {})", diagnostic.message))
        .unwrap_or_default();
    format!(
        "no Applications found under the source's paths; refusing to apply (it would prune every app){first_problem}"
    )
}

#[cfg(test)]
mod tests {

    use super::statuses::counts;
    use super::*;

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
