//! What the agent starts before its sources run and stops after: the cluster clients, the
//! shard members, the forge's outbox, the notification channels, each source's repository and
//! the HTTP server.

use std::sync::Arc;
use std::time::Duration;

use analyzer::Definitions;
use tokio::sync::{Notify, Semaphore, watch};

use super::{AgentError, Shared, SourceWorker};
use crate::cluster::{Cluster, ClusterOptions};
use crate::config::{Config, SourceConfig};
use crate::forge::Forge;
use crate::forge::outbox::{Outbox, OutboxConfig};
use crate::metrics::Metrics;
use crate::notify::Notifier;
use crate::notify::events::EventRecorder;
use crate::server::ui::record as ui_record;
use crate::server::{self, PlanStore, ServerState, SourceTrigger};
use crate::shard::Shards;
use crate::source::git::GitSource;

/// What runs beside the sources until shutdown, and what stops it.
pub(super) struct Background {
    /// Tells the shard members to stop renewing.
    shard_stop: watch::Sender<bool>,
    outbox: Option<Outbox>,
    outbox_task: Option<tokio::task::JoinHandle<()>>,
    notifier_tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The HTTP server, running.
pub(super) struct RunningServer {
    pub(super) listen: std::net::SocketAddr,
    task: tokio::task::JoinHandle<Result<(), server::ServerError>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

/// Connects what every source shares: the cluster, the shard members, the workflows' fleet,
/// the forge with its outbox, the notification channels.
pub(super) async fn start_shared(
    config: &Config,
    shutdown_rx: &watch::Receiver<bool>,
) -> Result<(Arc<Shared>, Background), AgentError> {
    let mut metrics = Metrics::new();
    let plans = PlanStore::default();
    let cluster = connect_cluster(config, &metrics).await?;
    let ui = server::ui::UiState::new(
        server::ui::FleetState::default(),
        Some(cluster.clone()),
        crate::tracker::DEFAULT_NAMESPACE,
        &config.server.external_url,
    );
    ui_record::sources(&ui.fleet, config);
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
    let fleet = crate::workflow::Fleet::from_config(config)
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
        metrics,
        plans,
        ui,
        outbox: outbox.clone(),
        forge,
        app_status_limit: (config.forge.as_ref())
            .map_or(crate::config::DEFAULT_APP_STATUS_LIMIT, |forge| {
                forge.app_status_limit
            }),
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
    let background = Background {
        shard_stop,
        outbox,
        outbox_task,
        notifier_tasks,
    };
    Ok((shared, background))
}

/// Opens each source's repository: one worker per source, with the trigger a webhook wakes
/// it by.
pub(super) async fn open_sources(
    config: &Config,
    shared: &Arc<Shared>,
) -> Result<(Vec<SourceWorker>, Vec<SourceTrigger>), AgentError> {
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
        let cluster = source_cluster(&shared.cluster, &source_config, config)?;
        workers.push(SourceWorker::new(
            git,
            source_config,
            shared.clone(),
            cluster,
            notify,
        ));
    }
    Ok((workers, triggers))
}

/// Binds the listen address and serves the HTTP endpoints until told to stop.
pub(super) async fn start_server(
    config: &Config,
    shared: &Shared,
    triggers: Vec<SourceTrigger>,
) -> Result<RunningServer, AgentError> {
    let listener = server::bind(config.server.listen).await?;
    let listen = listener
        .local_addr()
        .map_err(|source| server::ServerError::BindFailed {
            addr: config.server.listen,
            source,
        })?;
    let server_state = ServerState {
        metrics: shared.metrics.clone(),
        readiness: shared.readiness.clone(),
        webhook_secret: config.server.webhook_secret.clone(),
        triggers: Arc::new(triggers),
        plans: shared.plans.clone(),
        shards: shared.shards.clone(),
        auth: server::ApiAuth {
            token: config.server.api_token.clone(),
            trusted_header: config.server.trusted_header.clone(),
            operator_token: config.server.operator_token.clone(),
            groups_header: config.server.groups_header.clone(),
            operator_groups: config.server.operator_groups.clone(),
        },
        ui: shared.ui.clone(),
    };
    let (stop, server_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(listener, server_state, async move {
        let _ = server_stop_rx.await;
    }));
    Ok(RunningServer { listen, task, stop })
}

/// Every source stopped: leaves the shard members, gives queued statuses and notifications a
/// last chance, then stops the HTTP server.
pub(super) async fn stop(
    shared: &Shared,
    background: Background,
    server: RunningServer,
    mut server_shutdown: watch::Receiver<bool>,
) -> Result<(), AgentError> {
    // Every source stopped and gave up its claims: leave the members.
    let _ = background.shard_stop.send(true);
    if let Some(shards) = &shared.shards {
        shards.leave().await;
    }
    // Every source stopped: give queued statuses a last chance, then stop serving.
    let _ = server_shutdown.wait_for(|stop| *stop).await;
    drop(background.outbox);
    if let Some(task) = background.outbox_task
        && tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .is_err()
    {
        tracing::warn!("forge outbox did not drain within 10s at shutdown");
    }
    for task in background.notifier_tasks {
        if tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .is_err()
        {
            tracing::warn!("a notification channel did not drain within 10s at shutdown");
        }
    }
    let _ = server.stop.send(());
    match server.task.await {
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
