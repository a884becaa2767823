//! Where each `deploy` step of a workflow puts the app when it names topology policies: the
//! clusters of the registry (`crate::placement`), each connected, and per topology the render
//! with that step's override and replication policies (`analyzer::render_placements`); and the
//! garbage collection of the clusters an app has left ([`collect_departed`]).
//!
//! The analyzer renders one placement per topology of each top-level deploy step, in step
//! order (kubevela-render-semantics.md §4.2), then those of the deploy sub-steps of step
//! groups; [`step_targets`] walks the checked workflow's deploy steps in the same order and
//! takes, for the n-th use of a topology, the n-th render made for it, so two steps that reuse
//! a topology with different overrides each get their own render.
//!
//! The registry comes from `--cluster` (`driftless apply`) or from `clusters:` of the agent's
//! `driftless.yaml` ([`Fleet::connect`]); its first cluster is the one the workflow runs
//! against (KubeVela's `local`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use analyzer::AppRef;
use analyzer::model::{Application, Policy};
use serde_json::Value;

use super::spec::{Issue, StepSpec, StepType, WorkflowSpec};
use crate::apply::{self, AppApplyReport, ApplyOutcome, FIELD_MANAGER};
use crate::cluster::{Cluster, ClusterError, ClusterOptions};
use crate::config::ClusterConfig;
use crate::observe;
use crate::placement::{self, Placement};
use crate::planner::{self, DesiredApp, PlanOptions, Prune};
use crate::tracker_store::{ConfigMapStore, RecordError, TrackerStore};

/// The clusters a workflow may deploy to and each app's render per placement.
pub struct Fleet {
    /// The cluster registry; the first entry is the cluster the workflow runs against (KubeVela's
    /// `local`), whose connection the caller passes separately.
    pub registry: Vec<ClusterConfig>,
    /// Connections to the registry's other clusters, by name.
    pub clusters: BTreeMap<String, Arc<Cluster>>,
    /// Per app, `analyzer::render_placements`' renders.
    pub placements: BTreeMap<AppRef, Vec<analyzer::Placement>>,
}

/// A registry cluster that could not be connected.
#[derive(Debug, thiserror::Error)]
#[error("connecting to cluster {cluster:?}")]
pub struct FleetConnectError {
    pub cluster: String,
    #[source]
    pub source: ClusterError,
}

impl Fleet {
    /// Connects every cluster of `registry` but the first (the caller's own connection), with
    /// `options`' limits and each cluster's name. Connecting reads the kubeconfig only: an
    /// unreachable cluster shows up when it is used.
    ///
    /// # Errors
    /// A cluster's kubeconfig cannot be read or loaded.
    pub async fn connect(
        registry: Vec<ClusterConfig>,
        options: &ClusterOptions,
    ) -> Result<Fleet, FleetConnectError> {
        let mut clusters = BTreeMap::new();
        for config in registry.iter().skip(1) {
            let options = ClusterOptions {
                name: config.name.clone(),
                ..options.clone()
            };
            let connected = match &config.kubeconfig {
                Some(path) => Cluster::connect(path, config.context.as_deref(), &options).await,
                // Like the first cluster: the in-cluster service account or $KUBECONFIG.
                None => kube::Client::try_default()
                    .await
                    .map(|client| Cluster::from_client(client, &options))
                    .map_err(|source| ClusterError::ClientBuildFailed {
                        cluster: config.name.clone(),
                        source,
                    }),
            };
            let cluster = connected.map_err(|source| FleetConnectError {
                cluster: config.name.clone(),
                source,
            })?;
            clusters.insert(config.name.clone(), Arc::new(cluster));
        }
        Ok(Fleet {
            registry,
            clusters,
            placements: BTreeMap::new(),
        })
    }

    /// The agent's cluster registry (`clusters:` of `driftless.yaml`), connected with the
    /// agent's request limits. With no cluster configured the registry is the agent's own
    /// cluster alone, named `local`, as the agent names it then.
    ///
    /// # Errors
    /// A cluster's kubeconfig cannot be read or loaded.
    pub async fn from_config(config: &crate::config::Config) -> Result<Fleet, FleetConnectError> {
        let options = ClusterOptions {
            qps: f64::from(config.qps),
            burst: config.burst,
            ..ClusterOptions::default()
        };
        let registry = if config.clusters.is_empty() {
            vec![ClusterConfig {
                name: placement::LOCAL_CLUSTER.to_owned(),
                kubeconfig: None,
                context: None,
                labels: BTreeMap::new(),
            }]
        } else {
            config.clusters.clone()
        };
        Fleet::connect(registry, &options).await
    }

    /// This fleet's clusters with `placements` (one commit's renders per placement).
    pub fn with_placements(&self, placements: BTreeMap<AppRef, Vec<analyzer::Placement>>) -> Fleet {
        Fleet {
            registry: self.registry.clone(),
            clusters: self.clusters.clone(),
            placements,
        }
    }

    /// The registry's cluster names and `local` (its first), for the workflow's
    /// `unknown-cluster` check.
    pub fn names(&self) -> BTreeSet<String> {
        self.registry
            .iter()
            .map(|cluster| cluster.name.clone())
            .chain([placement::LOCAL_CLUSTER.to_owned()])
            .collect()
    }

    /// Whether cluster `name` can be deployed to.
    pub fn is_connected(&self, name: &str) -> bool {
        self.registry
            .first()
            .is_some_and(|first| first.name == name)
            || self.clusters.contains_key(name)
    }

    /// The connection to cluster `name`: `local` for the registry's first cluster.
    pub fn connection<'a>(&'a self, name: &str, local: &'a Cluster) -> Option<&'a Cluster> {
        if self
            .registry
            .first()
            .is_some_and(|first| first.name == name)
        {
            return Some(local);
        }
        self.clusters.get(name).map(|cluster| &**cluster)
    }
}

/// Whether any of `apps` needs per-placement renders: a topology or replication policy.
pub fn needs_placements<'a>(apps: impl IntoIterator<Item = &'a Application>) -> bool {
    apps.into_iter().any(|app| {
        app.spec
            .policies
            .iter()
            .any(|policy| matches!(policy.policy_type.as_str(), "topology" | "replication"))
    })
}

/// The renders per placement of the apps in `apps` (`analyzer::render_placements` over the
/// whole snapshot, kept for those apps only).
pub fn placements_of(
    snapshot: &analyzer::Snapshot,
    definitions: &analyzer::Definitions,
    options: &analyzer::RenderOptions,
    apps: &BTreeMap<AppRef, Application>,
) -> BTreeMap<AppRef, Vec<analyzer::Placement>> {
    let (rendered, _) = analyzer::render_placements(snapshot, definitions, options);
    rendered
        .into_iter()
        .filter(|app| apps.contains_key(&app.app))
        .map(|app| (app.app, app.placements))
        .collect()
}

/// One placement of a deploy step, before its objects are resolved against its cluster.
#[derive(Debug, Clone)]
pub struct PlannedTarget<'a> {
    /// The topology's position among the step's topologies: the step rolls out one group
    /// after another, each gated on health.
    pub group: usize,
    pub placement: Placement,
    pub rendered: &'a analyzer::RenderedApp,
}

/// One cluster a deploy step places the app on, with that placement's objects.
pub struct Target<'a> {
    pub group: usize,
    pub cluster: &'a Cluster,
    pub desired: DesiredApp,
}

/// Per deploy step name, where it places the app. Steps absent here (no topology) deploy the
/// whole render to the cluster the workflow runs against.
pub type StepTargets<'a> = BTreeMap<String, Vec<Target<'a>>>;

/// The deploy steps of `spec` in the analyzer's placement order: the top-level ones, then the
/// sub-steps of step groups.
fn deploy_steps(spec: &WorkflowSpec) -> impl Iterator<Item = &StepSpec> {
    let top_level = spec.steps.iter();
    let nested = spec.steps.iter().flat_map(|step| step.sub_steps.iter());
    top_level
        .chain(nested)
        .filter(|step| step.step_type == StepType::Deploy)
}

/// The placements of every deploy step of `spec` (top-level or in a step group) that names a
/// topology policy.
///
/// # Errors
/// Issues (nothing may be applied then): a topology naming an unregistered cluster or
/// selecting none, a cluster without connection, or a placement the render did not produce.
pub fn step_targets<'a>(
    app: &Application,
    app_ref: &AppRef,
    spec: &WorkflowSpec,
    fleet: &'a Fleet,
) -> Result<BTreeMap<String, Vec<PlannedTarget<'a>>>, Vec<Issue>> {
    let renders: &[analyzer::Placement] =
        fleet.placements.get(app_ref).map_or(&[][..], Vec::as_slice);
    let mut used: BTreeMap<&str, usize> = BTreeMap::new();
    let mut issues = Vec::new();
    let mut targets = BTreeMap::new();
    for step in deploy_steps(spec) {
        let named: Vec<&Policy> = step
            .properties
            .get("policies")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|name| app.spec.policies.iter().find(|policy| policy.name == name))
            .collect();
        let topologies: Vec<Option<&Policy>> = named
            .iter()
            .filter(|policy| policy.policy_type == "topology")
            .map(|policy| Some(*policy))
            .collect();
        let topologies = if topologies.is_empty() {
            // A deploy step without topology deploys to the workflow's own cluster. It still
            // uses up the next render made without topology; that render differs from the
            // whole app's only with a replication policy, so only then is it a target.
            let occurrence = used.entry("").or_insert(0);
            *occurrence += 1;
            let replicates = named
                .iter()
                .any(|policy| policy.policy_type == "replication");
            if !replicates {
                continue;
            }
            *occurrence -= 1;
            vec![None]
        } else {
            topologies
        };
        let mut step_targets = Vec::new();
        for (group, topology) in topologies.into_iter().enumerate() {
            let topology_name = topology.map_or("", |topology| topology.name.as_str());
            let occurrence = used.entry(topology_name).or_insert(0);
            let render = renders
                .iter()
                .filter(|render| render.topology.as_deref().unwrap_or("") == topology_name)
                .nth(*occurrence);
            *occurrence += 1;
            let issue = |rule: &'static str, message: String| Issue {
                rule,
                step: Some(step.name.clone()),
                message,
            };
            let Some(render) = render else {
                issues.push(issue(
                    "placement-not-rendered",
                    format!(
                        "deploy step {:?}: topology policy {topology_name:?} has no render",
                        step.name
                    ),
                ));
                continue;
            };
            let (targets, problems) =
                placement_targets(&step.name, render, topology, group, app_ref, fleet, &issue);
            step_targets.extend(targets);
            issues.extend(problems);
        }
        // Even with no target left (every cluster unreachable): a deploy step absent here
        // would deploy the whole app to the workflow's own cluster.
        targets.insert(step.name.clone(), step_targets);
    }
    if issues.is_empty() {
        Ok(targets)
    } else {
        Err(issues)
    }
}

/// The targets of one placement of a deploy step: one per reachable, connected cluster its
/// topology selects (the workflow's own cluster without topology); a placement whose render
/// has errors, or whose topology names an unknown cluster, is an issue instead.
fn placement_targets<'a>(
    step_name: &str,
    render: &'a analyzer::Placement,
    topology: Option<&Policy>,
    group: usize,
    app_ref: &AppRef,
    fleet: &Fleet,
    issue: &dyn Fn(&'static str, String) -> Issue,
) -> (Vec<PlannedTarget<'a>>, Vec<Issue>) {
    let topology_name = topology.map_or("", |topology| topology.name.as_str());
    let mut step_targets = Vec::new();
    let mut issues = Vec::new();
    // Problems only this placement has (its overrides or replication) stop the whole
    // workflow before anything is applied, like any other bad input.
    let errors: Vec<&str> = render
        .rendered
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.severity == analyzer::Severity::Error)
        .map(|diagnostic| diagnostic.message.as_str())
        .collect();
    if !errors.is_empty() {
        issues.push(issue(
            "invalid-placement",
            format!("deploy step {:?}: {}", step_name, errors.join("; ")),
        ));
        return (step_targets, issues);
    }
    // Clusters the registry does not have are skipped (reported by
    // `unreachable_placements`): the step places on the others, if any.
    let reachable = topology.map(|topology| reachable_only(topology, &fleet.registry));
    if reachable.as_ref().is_some_and(Option::is_none) {
        return (step_targets, issues);
    }
    let reachable = reachable.flatten();
    let registry: Vec<_> = fleet
        .registry
        .iter()
        .map(ClusterConfig::registered)
        .collect();
    let placements = match placement::placements(
        &reachable.as_deref().into_iter().collect::<Vec<_>>(),
        &registry,
        &app_ref.namespace,
    ) {
        Ok(placements) => placements,
        Err(error) => {
            issues.push(issue("unknown-cluster", error.to_string()));
            return (step_targets, issues);
        }
    };
    for placement in placements {
        if !fleet.is_connected(&placement.cluster) {
            issues.push(issue(
                "remote-placement-unsupported",
                format!(
                    "topology policy {topology_name:?} places the app on cluster {:?}, which has no connection",
                    placement.cluster
                ),
            ));
            continue;
        }
        step_targets.push(PlannedTarget {
            group,
            placement,
            rendered: &render.rendered,
        });
    }
    (step_targets, issues)
}

/// A placement a deploy step cannot make: its topology names a cluster the registry does not
/// have (a cluster not given with `--cluster`, or not in `clusters:` of `driftless.yaml`). The
/// step deploys to its other placements; the app's objects already on that cluster are left
/// as they are (never collected while the topology still names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    pub step: String,
    pub topology: String,
    pub cluster: String,
}

impl Unreachable {
    /// The warning shown for it, saying what to do.
    pub fn message(&self) -> String {
        format!(
            "deploy step {:?}: topology policy {:?} places the app on cluster {:?}, which is not registered, so that placement is skipped (register it with `--cluster {}=KUBECONFIG` or in `clusters:` of driftless.yaml)",
            self.step, self.topology, self.cluster, self.cluster
        )
    }
}

/// The placements of `spec`'s deploy steps whose cluster the registry does not have, in step
/// order ([`step_targets`] skips them).
pub fn unreachable_placements(
    app: &Application,
    spec: &WorkflowSpec,
    fleet: &Fleet,
) -> Vec<Unreachable> {
    let mut unreachable = Vec::new();
    for step in deploy_steps(spec) {
        let topologies = step
            .properties
            .get("policies")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|name| app.spec.policies.iter().find(|policy| policy.name == name))
            .filter(|policy| policy.policy_type == "topology");
        for topology in topologies {
            for cluster in unregistered_clusters(topology, &fleet.registry) {
                unreachable.push(Unreachable {
                    step: step.name.clone(),
                    topology: topology.name.clone(),
                    cluster: cluster.to_owned(),
                });
            }
        }
    }
    unreachable
}

/// The clusters `topology` names that `registry` does not have (`local` always exists: it is
/// the registry's first cluster).
fn unregistered_clusters<'p>(topology: &'p Policy, registry: &[ClusterConfig]) -> Vec<&'p str> {
    topology
        .properties
        .as_ref()
        .and_then(|properties| properties.get("clusters"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|cluster| {
            *cluster != placement::LOCAL_CLUSTER
                && !registry.iter().any(|known| known.name == *cluster)
        })
        .collect()
}

/// `topology` without the clusters the registry does not have: `Some` of the topology itself
/// when it names none such, `Some` of a copy naming only the registered ones, `None` when it
/// names no registered cluster at all.
fn reachable_only<'p>(
    topology: &'p Policy,
    registry: &[ClusterConfig],
) -> Option<std::borrow::Cow<'p, Policy>> {
    let unregistered = unregistered_clusters(topology, registry);
    if unregistered.is_empty() {
        return Some(std::borrow::Cow::Borrowed(topology));
    }
    let mut reduced = topology.clone();
    let clusters = reduced
        .properties
        .as_mut()
        .and_then(|properties| properties.get_mut("clusters"))
        .and_then(Value::as_array_mut)?;
    clusters.retain(|cluster| {
        cluster
            .as_str()
            .is_none_or(|cluster| !unregistered.contains(&cluster))
    });
    (!clusters.is_empty()).then_some(std::borrow::Cow::Owned(reduced))
}

/// `rendered` moved into `namespace` (a topology's `namespace`): objects in the app's
/// namespace, or in none, go to the placement's.
pub fn in_namespace(rendered: &analyzer::RenderedApp, namespace: &str) -> analyzer::RenderedApp {
    let mut moved = rendered.clone();
    if namespace == rendered.app.namespace {
        return moved;
    }
    for object in &mut moved.objects {
        // Namespace-less objects would default to the app's namespace; cluster-scoped ones
        // lose the namespace again when scoped by discovery.
        let in_app_namespace = object
            .object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .is_none_or(|current| current == rendered.app.namespace);
        if in_app_namespace
            && let Some(metadata) = object
                .object
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
        {
            metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
        }
    }
    moved
}

/// The clusters a workflow that succeeded left the app on: every placement's cluster, and
/// the workflow's own (`local`) when a step deploys there (an `apply-component`, or a deploy
/// without topology).
pub fn placed_clusters(
    spec: &WorkflowSpec,
    targets: &StepTargets<'_>,
    local: &str,
) -> BTreeSet<String> {
    let mut placed: BTreeSet<String> = targets
        .values()
        .flatten()
        .map(|target| target.cluster.name().to_owned())
        .collect();
    let deploys_locally = targets.is_empty()
        || spec.all_steps().any(|step| match step.step_type {
            StepType::ApplyComponent => true,
            StepType::Deploy => !targets.contains_key(&step.name),
            _ => false,
        });
    if deploys_locally {
        placed.insert(local.to_owned());
    }
    placed
}

/// Label of the placement records (one ConfigMap per app in the tracker namespace of the
/// workflow's cluster), for listing them.
const PLACEMENTS_LABEL: &str = "driftless.dev/placements";
/// Key of the JSON list of cluster names in a placement record.
const PLACEMENTS_KEY: &str = "clusters.json";

/// The name of an app's placement record; names that would pass 253 characters become the
/// prefix and a hash, so distinct apps keep distinct names.
fn placements_record_name(app: &AppRef) -> String {
    let full = format!("driftless-placements.{}", crate::tracker::tracker_name(app));
    if full.len() <= 253 {
        return full;
    }
    use sha2::Digest;
    format!(
        "driftless-placements.{}",
        hex::encode(sha2::Sha256::digest(full.as_bytes()))
    )
}

/// The clusters recorded for `app` and the record's resourceVersion (`None`: no record).
async fn read_placements(
    store: &ConfigMapStore<'_>,
    app: &AppRef,
) -> Result<(BTreeSet<String>, Option<String>), String> {
    let Some(stored) = store.read(&placements_record_name(app)).await? else {
        return Ok((BTreeSet::new(), None));
    };
    let clusters = serde_json::from_str(&stored.text).map_err(|error| {
        format!(
            "placement record {} is not valid: {error}",
            placements_record_name(app)
        )
    })?;
    Ok((clusters, stored.resource_version))
}

async fn write_placements(
    store: &ConfigMapStore<'_>,
    app: &AppRef,
    clusters: &BTreeSet<String>,
    resource_version: Option<&str>,
) -> Result<(), String> {
    let text = serde_json::to_string(clusters).map_err(|error| error.to_string())?;
    let annotations = BTreeMap::from([
        (
            "driftless.dev/app-namespace".to_owned(),
            app.namespace.clone(),
        ),
        ("driftless.dev/app-name".to_owned(), app.name.clone()),
    ]);
    match store
        .write(
            &placements_record_name(app),
            text,
            annotations,
            resource_version,
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(RecordError::Conflict) => Err(format!(
            "placement record {} was changed by someone else meanwhile",
            placements_record_name(app)
        )),
        Err(RecordError::Failed(message)) => Err(message),
    }
}

/// Intent before effect, as for the trackers: before a workflow pass may deploy the app to
/// `placed`, those clusters are added to the app's placement record on `local`, so a crash
/// right after a first deploy somewhere still leaves a record saying where to collect.
///
/// # Errors
/// The record cannot be read or written (nothing may be deployed then).
pub async fn record_placements(
    local: &Cluster,
    tracker_namespace: &str,
    app: &AppRef,
    placed: &BTreeSet<String>,
) -> Result<(), String> {
    let store = ConfigMapStore::new(local, tracker_namespace, PLACEMENTS_LABEL, PLACEMENTS_KEY);
    let (recorded, resource_version) = read_placements(&store, app).await?;
    if placed.is_subset(&recorded) && resource_version.is_some() {
        return Ok(());
    }
    let union = recorded.union(placed).cloned().collect();
    write_placements(&store, app, &union, resource_version.as_deref()).await
}

/// Garbage collection of the clusters an app has left: the app's placement record (on
/// `local`) lists every cluster it was deployed to; on each one no longer in `placed`,
/// everything the app's tracker there lists is pruned under the usual proofs (listed *and*
/// still marked ours, uid and resourceVersion preconditions), so nothing the app does not own
/// is touched. Called after the workflow succeeded, as KubeVela collects garbage.
///
/// A cluster whose tracker cannot be read (unreachable, forbidden) is not pruned: its report
/// fails and names the cluster, and it stays in the record for the next successful pass. A
/// cluster no longer in the registry cannot be reached at all: its report fails the same way.
pub async fn collect_departed(
    fleet: &Fleet,
    local: &Cluster,
    desired: &DesiredApp,
    placed: &BTreeSet<String>,
    tracker_namespace: &str,
    apply_options: &apply::ApplyOptions,
) -> Vec<(String, AppApplyReport)> {
    let app = &desired.app;
    let failed = |label: String, message: String| {
        (
            label,
            AppApplyReport {
                app: app.clone(),
                outcome: ApplyOutcome::Failed(message),
                objects: Vec::new(),
            },
        )
    };
    let store = ConfigMapStore::new(local, tracker_namespace, PLACEMENTS_LABEL, PLACEMENTS_KEY);
    let (recorded, resource_version) = match read_placements(&store, app).await {
        Ok(read) => read,
        Err(message) => {
            return vec![failed(
                "garbage-collect".to_owned(),
                format!(
                    "reading where the app was deployed failed, so no cluster it left was collected: {message}"
                ),
            )];
        }
    };
    let mut reports = Vec::new();
    let mut kept: BTreeSet<String> = placed.clone();
    for name in recorded.difference(placed) {
        let label = format!("garbage-collect@{name}");
        let Some(cluster) = fleet.connection(name, local) else {
            kept.insert(name.clone());
            reports.push(failed(
                label,
                format!("cluster {name:?} is not in the cluster registry (or has no connection), so the app's objects there were not collected"),
            ));
            continue;
        };
        match prune_everything(cluster, desired, tracker_namespace, apply_options).await {
            Ok(None) => {}
            Ok(Some(applied)) => reports.push((label, applied)),
            Err(message) => {
                kept.insert(name.clone());
                reports.push(failed(label, format!("cluster {name:?}: {message}")));
            }
        }
    }
    if (kept != recorded || resource_version.is_none())
        && let Err(message) =
            write_placements(&store, app, &kept, resource_version.as_deref()).await
    {
        reports.push(failed(
            "garbage-collect".to_owned(),
            format!("recording where the app is deployed failed: {message}"),
        ));
    }
    reports
}

/// The first failure among a workflow pass's garbage collections (labels `garbage-collect` and
/// `garbage-collect@<cluster>`; the message names the cluster), if any.
pub fn collection_failure(applies: &[(String, AppApplyReport)]) -> Option<&str> {
    applies
        .iter()
        .filter(|(label, _)| label.starts_with("garbage-collect"))
        .find_map(|(_, applied)| match &applied.outcome {
            ApplyOutcome::Failed(message) => Some(message.as_str()),
            _ => None,
        })
}

/// Prunes everything `desired.app`'s tracker on `cluster` lists. `Ok(None)`: the app has no
/// tracker there (nothing of it to collect).
///
/// # Errors
/// The tracker cannot be read (nothing was pruned), or the prune failed (the tracker keeps
/// what is left).
async fn prune_everything(
    cluster: &Cluster,
    desired: &DesiredApp,
    tracker_namespace: &str,
    apply_options: &apply::ApplyOptions,
) -> Result<Option<AppApplyReport>, String> {
    let store = TrackerStore::new(cluster, tracker_namespace);
    let mut nothing = desired.clone();
    nothing.objects.clear();
    let observation = observe::observe_app(cluster, &store, nothing, FIELD_MANAGER).await;
    if let Some(error) = &observation.tracker_error {
        return Err(format!(
            "reading the app's tracker failed, so nothing was pruned there: {error}"
        ));
    }
    if observation
        .tracker
        .as_ref()
        .is_none_or(|tracker| tracker.entries.is_empty())
    {
        return Ok(None);
    }
    let plan_options = PlanOptions {
        cluster: cluster.name().to_owned(),
        prune: Prune::Allowed,
        ..PlanOptions::default()
    };
    let plan = planner::plan_app(
        &observation.desired,
        &observation.live,
        observation.tracker.as_ref(),
        &plan_options,
    );
    let applied = apply::apply_app(cluster, &store, &observation, &plan, apply_options).await;
    match &applied.outcome {
        ApplyOutcome::Applied => Ok(Some(applied)),
        ApplyOutcome::Failed(message) | ApplyOutcome::Skipped(message) => Err(message.clone()),
    }
}

#[cfg(test)]
mod tests;
