//! Plan and apply against a live cluster, end to end: the glue the CLI (and the agent loop)
//! call. Observe every rendered app and every orphaned app of the source, plan them with the
//! pure planner, then apply app by app — an app that fails stops alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use analyzer::model::{Application, Policy};
use analyzer::{AppRef, AppRender, Diagnostic, PackedApp, RenderOutput, RenderedApp, SourceMap};
use rayon::prelude::*;
use serde_json::Value;

use crate::apply::{self, AppApplyReport, ApplyOptions, ApplyOutcome, FIELD_MANAGER};
use crate::cluster::Cluster;
use crate::health::status::ComponentStatus;
use crate::health::{self, AppHealth};
use crate::observe::{self, AppObservation, OrphanObservation};
use crate::plan::{AppPlan, Plan, PlanTarget};
use crate::planner::{self, LiveObjects, Observed, PlanOptions, Prune};
use crate::prune_guard::{self, Evidence, PassBudget};
use crate::rollout::RolloutPlan;
use crate::tracker_store::TrackerStore;
use crate::workflow::{
    DriverOptions, Issue, WorkflowContext, WorkflowPhase, WorkflowReport, WorkflowSpec,
    build_workflow, run_workflow,
};

/// Knobs of a live plan and apply.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveOptions {
    pub plan: PlanOptions,
    pub apply: ApplyOptions,
    /// The namespace of the tracker ConfigMaps.
    pub tracker_namespace: String,
    /// Per app, its components' status CUE (`health::status::from_application`); apps missing
    /// here are rated by their objects' kinds only.
    pub statuses: BTreeMap<AppRef, Vec<ComponentStatus>>,
    /// What the caller knows of the source beyond the render handed to the plan (the files
    /// that did not load, by name). The plan also finds the render's own errors outside apps
    /// itself: either being incomplete holds every prune of the pass ([`prune_guard`]).
    pub evidence: Evidence,
    /// How much the pass may prune before it waits for approval.
    pub budget: PassBudget,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            plan: PlanOptions::default(),
            apply: ApplyOptions::default(),
            tracker_namespace: crate::tracker::DEFAULT_NAMESPACE.to_owned(),
            statuses: BTreeMap::new(),
            evidence: Evidence::Complete,
            budget: PassBudget::default(),
        }
    }
}

/// The rendered apps a live plan reads: owned (the CLI's [`RenderOutput`]) or shared with the
/// agent's analysis cache ([`SharedApps`]). The agent's first deploy and every drift check plan
/// every app; sharing them keeps one copy of the render instead of two.
pub trait RenderedApps: Sync {
    type App: AppRender;
    /// Sorted by [`AppRef`].
    fn apps(&self) -> &[Self::App];
    /// Diagnostics not tied to one app.
    fn diagnostics(&self) -> &[Diagnostic];
}

impl RenderedApps for RenderOutput {
    type App = RenderedApp;
    fn apps(&self) -> &[RenderedApp] {
        &self.apps
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
}

/// Apps of a render shared with the analysis cache that made them (the agent's selection):
/// their objects are packed (compact JSON), parsed one namespace group at a time as planned.
#[derive(Debug, Clone, Default)]
pub struct SharedApps {
    /// Sorted by [`AppRef`].
    pub apps: Vec<Arc<PackedApp>>,
    pub diagnostics: Vec<Diagnostic>,
}

impl RenderedApps for SharedApps {
    type App = Arc<PackedApp>;
    fn apps(&self) -> &[Arc<PackedApp>] {
        &self.apps
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
}

/// A plan with what it was computed from, ready to apply.
#[derive(Debug, Clone)]
pub struct LivePlan {
    pub plan: Plan,
    pub observations: Vec<AppObservation>,
    pub orphans: Vec<OrphanObservation>,
    /// Per app, the health of the live objects it renders (apps nothing rates are absent).
    pub health: BTreeMap<AppRef, AppHealth>,
    /// The status CUE health was rated with, for [`read_health`].
    pub statuses: BTreeMap<AppRef, Vec<ComponentStatus>>,
}

/// Observes the cluster and plans every app of a render, plus the deletion of the apps of this
/// source that are no longer rendered.
pub async fn plan_live(
    cluster: &Cluster,
    output: &RenderOutput,
    policies: &BTreeMap<AppRef, Vec<Policy>>,
    revision: Option<&str>,
    options: &LiveOptions,
) -> LivePlan {
    let builder = observe::DesiredBuilder::new(cluster, &output.apps, policies, revision).await;
    let mut live_plan = plan_desired(
        cluster,
        Desired::Shared(&output.apps, builder),
        output.diagnostics.clone(),
        options,
        &Orphans::NotRendered,
        Keep::Observations,
    )
    .await;
    live_plan.statuses = options.statuses.clone();
    live_plan
}

/// Which tracked apps of the source a plan deletes as removed from Git.
#[derive(Debug, Clone, PartialEq)]
pub enum Orphans {
    /// Every app of the source the cluster tracks and the render does not hold: right when the
    /// render holds every app of the source (the CLI, a full deploy).
    NotRendered,
    /// Every tracked app of the source not in this set, which must hold every app still in
    /// Git: for a plan of only some of them (the agent plans the apps that changed).
    NotIn(BTreeSet<AppRef>),
    /// None, without listing the trackers: for a caller that knows no app left Git since its
    /// last complete look.
    Skip,
}

/// [`plan_live`] with the orphans to look for given, and what to keep of the observations
/// (`keep`): the agent plans only the apps of a commit that changed, so the render it passes
/// holds only those. The desired objects are built from `output` one namespace group at a
/// time when the plan goes by groups (see [`Keep`]). `options` is taken: its status CUE moves
/// into the plan (one per app; not copied), unless the plan is only reported.
pub async fn plan_live_apps<R: RenderedApps>(
    cluster: &Cluster,
    output: &R,
    policies: &BTreeMap<AppRef, Vec<Policy>>,
    revision: Option<&str>,
    options: LiveOptions,
    orphans: &Orphans,
    keep: Keep<'_>,
) -> LivePlan {
    let builder = observe::DesiredBuilder::new(cluster, output.apps(), policies, revision).await;
    let mut live_plan = plan_desired(
        cluster,
        Desired::Shared(output.apps(), builder),
        output.diagnostics().to_vec(),
        &options,
        orphans,
        keep,
    )
    .await;
    // Only `read_health` reads them, after an apply: a plan that only reports has none.
    if !matches!(keep, Keep::PlanOnly) {
        live_plan.statuses = options.statuses;
    }
    live_plan
}

/// [`plan_live`] that moves the rendered objects out of `output` into the plan instead of
/// copying them, for a caller done with them (the CLI): `output` keeps its apps, diagnostics
/// and hashes, with no objects. At 10,000 apps the copy is hundreds of MiB. The observations
/// keep only what an apply reads ([`Keep::ForApply`]).
pub async fn plan_live_taking(
    cluster: &Cluster,
    output: &mut RenderOutput,
    policies: &BTreeMap<AppRef, Vec<Policy>>,
    revision: Option<&str>,
    options: &LiveOptions,
) -> LivePlan {
    plan_taking(cluster, output, policies, revision, options, Keep::ForApply).await
}

/// [`plan_live_taking`] for a caller that only reports the plan (`driftless plan`): the live
/// objects are observed, planned and dropped one namespace of apps at a time, so memory holds
/// one namespace's live objects rather than every app's (at 10,000 apps, ~35,000 objects).
/// The result has no observations: it cannot be applied.
pub async fn plan_live_report(
    cluster: &Cluster,
    output: &mut RenderOutput,
    policies: &BTreeMap<AppRef, Vec<Policy>>,
    revision: Option<&str>,
    options: &LiveOptions,
) -> LivePlan {
    plan_taking(cluster, output, policies, revision, options, Keep::PlanOnly).await
}

/// The rendered objects moved out of `output` into a plan that keeps `keep` of what it observed.
async fn plan_taking(
    cluster: &Cluster,
    output: &mut RenderOutput,
    policies: &BTreeMap<AppRef, Vec<Policy>>,
    revision: Option<&str>,
    options: &LiveOptions,
    keep: Keep<'_>,
) -> LivePlan {
    let desired_apps =
        observe::desired_apps_taking(cluster, &mut output.apps, policies, revision).await;
    let mut live_plan = plan_desired::<RenderedApp>(
        cluster,
        Desired::Built(desired_apps),
        output.diagnostics.clone(),
        options,
        &Orphans::NotRendered,
        keep,
    )
    .await;
    // Only `read_health` reads them, after an apply: a plan that only reports has none.
    if !matches!(keep, Keep::PlanOnly) {
        live_plan.statuses = options.statuses.clone();
    }
    live_plan
}

/// What a plan keeps of what it observed. A plan that keeps less than every observation goes
/// one namespace of apps at a time (unless the trackers must be read in bulk with the live
/// objects): each group's desired objects are built, observed, planned and trimmed before the
/// next group's are built.
#[derive(Debug, Clone, Copy)]
pub enum Keep<'a> {
    /// Every observation as observed.
    Observations,
    /// What an apply reads: the live objects of objects planned unchanged and recorded as
    /// applied are dropped ([`drop_settled`]).
    ForApply,
    /// [`Keep::ForApply`] for a plan applied as a whole but for the apps in `workflows` (which
    /// their workflows apply, from their desired objects): as soon as their namespace group is
    /// planned, the other apps the apply would not touch at all keep only their identity
    /// ([`apply::nothing_to_apply`], [`AppObservation::nothing_to_apply`]), and those it will
    /// not write drop their desired objects' JSON ([`drop_settled_json`]), so a plan of every
    /// app never holds every app's.
    ForWholeApply {
        workflows: &'a BTreeMap<AppRef, Application>,
    },
    /// Only the plan: observations are dropped as soon as their apps are planned.
    PlanOnly,
}

/// Where a plan's desired apps come from.
enum Desired<'a, A> {
    /// Built already (the CLI moves its render into them).
    Built(Vec<planner::DesiredApp>),
    /// Built from a render the caller keeps, one group at a time.
    Shared(&'a [A], observe::DesiredBuilder<'a>),
}

impl<'a, A: AppRender> Desired<'a, A> {
    /// Every app planned, for the orphans' look.
    fn apps(&self) -> BTreeSet<AppRef> {
        match self {
            Desired::Built(apps) => apps.iter().map(|app| app.app.clone()).collect(),
            Desired::Shared(apps, _) => apps
                .iter()
                .map(|app| rendered_app(app).app.clone())
                .collect(),
        }
    }

    /// The groups planned one after the other: one per namespace (the apps come sorted by
    /// [`AppRef`]) when `by_namespace`, else one. A shared render's groups are built when
    /// taken, not before.
    fn into_groups(self, by_namespace: bool) -> Groups<'a, A> {
        match self {
            Desired::Built(apps) => Groups::Built(
                if by_namespace {
                    self::by_namespace(apps)
                } else {
                    vec![apps]
                }
                .into_iter(),
            ),
            Desired::Shared(apps, builder) => Groups::Shared {
                rest: apps,
                builder,
                by_namespace,
            },
        }
    }
}

/// The groups of [`Desired::into_groups`].
enum Groups<'a, A> {
    Built(std::vec::IntoIter<Vec<planner::DesiredApp>>),
    Shared {
        rest: &'a [A],
        builder: observe::DesiredBuilder<'a>,
        by_namespace: bool,
    },
}

impl<A: AppRender> Groups<'_, A> {
    fn next_group(&mut self) -> Option<Vec<planner::DesiredApp>> {
        match self {
            Groups::Built(groups) => groups.next(),
            Groups::Shared {
                rest,
                builder,
                by_namespace,
            } => {
                let first = rest.first()?;
                let namespace = &rendered_app(first).app.namespace;
                let len = if *by_namespace {
                    rest.iter()
                        .take_while(|app| rendered_app(*app).app.namespace == *namespace)
                        .count()
                } else {
                    rest.len()
                };
                let (group, after) = rest.split_at(len);
                *rest = after;
                Some(builder.build(group))
            }
        }
    }
}

fn rendered_app<A: AppRender>(app: &A) -> &RenderedApp<A::Objects> {
    app.render()
}

async fn plan_desired<A: AppRender>(
    cluster: &Cluster,
    desired: Desired<'_, A>,
    mut diagnostics: Vec<analyzer::Diagnostic>,
    options: &LiveOptions,
    orphans: &Orphans,
    keep: Keep<'_>,
) -> LivePlan {
    let started = (
        std::time::Instant::now(),
        cluster.requests(),
        process_cpu_seconds(),
    );
    let evidence = pass_evidence(&diagnostics, &options.evidence);
    let mut store = TrackerStore::new(cluster, &options.tracker_namespace);
    let rendered: Option<BTreeSet<AppRef>> =
        matches!(orphans, Orphans::NotRendered).then(|| desired.apps());
    let in_git = match orphans {
        Orphans::NotRendered => rendered.as_ref(),
        Orphans::NotIn(in_git) => Some(in_git),
        Orphans::Skip => None,
    };
    // Looking for removed apps lists every tracker: that one LIST also answers each app's
    // tracker read (before, the trackers were read a second time by the prefetch).
    let trackers = match in_git {
        Some(_) => match store.list_and_keep().await {
            Ok(trackers) => Some(trackers),
            Err(error) => {
                diagnostics.push(analyzer::Diagnostic::error(
                    "cluster-error",
                    error.to_string(),
                    None,
                ));
                None
            }
        },
        None => None,
    };
    // Only the trackers of apps missing from Git are orphan candidates (`observe_orphans`
    // skips the others): the rest are dropped now rather than held through every group's
    // observation, which reads each app's tracker from the store's list (at 10,000 apps a
    // parsed copy of every tracker, ~20 MB).
    let trackers = trackers.map(|mut trackers| {
        if let Some(in_git) = in_git {
            trackers.retain(|app, _| !in_git.contains(app));
        }
        trackers
    });
    // One LIST per (kind, namespace) instead of a GET per object and tracker.
    let tracker_namespace = (!store.has_listed()).then_some(options.tracker_namespace.as_str());
    // A plan that keeps only the plan (or what an apply reads) observes one namespace of apps at
    // a time: the LISTs are per namespace anyway, so the requests stay the same while memory
    // holds one namespace's desired and live objects. Not when the trackers must be read in
    // bulk too: that LIST would repeat per group.
    let by_namespace = !matches!(keep, Keep::Observations) && tracker_namespace.is_none();
    let mut groups = desired.into_groups(by_namespace);
    let mut observations = Vec::new();
    let mut app_plans = Vec::new();
    let mut from_cache = 0;
    // The objects that stay, for the prune budget's share.
    let mut planned_objects = 0;
    while let Some(mut group) = groups.next_group() {
        planned_objects += group.iter().map(|app| app.objects.len()).sum::<usize>();
        for desired in &mut group {
            desired.refuse_reserved_namespace(&options.tracker_namespace);
        }
        let stats = observe::prefetch(cluster, &group, tracker_namespace).await;
        from_cache += stats.cached;
        // Observed and planned a chunk at a time: each chunk's live objects (parsed from the
        // prefetched text as they are taken) and desired JSON are trimmed to what is kept
        // before the next chunk is observed, rather than a whole namespace's at once.
        let mut group = group.into_iter().peekable();
        while group.peek().is_some() {
            let mut observed: Vec<AppObservation> = Vec::with_capacity(OBSERVE_CHUNK);
            for desired in group.by_ref().take(OBSERVE_CHUNK) {
                observed.push(observe::observe_app(cluster, &store, desired, FIELD_MANAGER).await);
            }
            let planned = plan_observed(&observed, options);
            match keep {
                Keep::Observations => observations.extend(observed),
                Keep::ForApply | Keep::ForWholeApply { .. } => {
                    for (mut observation, app_plan) in observed.into_iter().zip(&planned) {
                        drop_settled(&mut observation, app_plan);
                        if let Keep::ForWholeApply { workflows } = keep
                            && !workflows.contains_key(&observation.desired.app)
                        {
                            // An app the whole apply will not touch keeps only its identity;
                            // one it may write keeps what the apply reads, less its settled
                            // JSON.
                            if apply::nothing_to_apply(&observation, app_plan, &options.apply) {
                                observation = AppObservation::nothing_to_apply(observation);
                            } else {
                                drop_settled_json(&mut observation, app_plan);
                            }
                        }
                        observations.push(observation);
                    }
                }
                Keep::PlanOnly => {}
            }
            app_plans.extend(planned);
        }
        cluster.clear_prefetched();
    }
    drop(groups);
    let orphans = match (in_git, trackers) {
        (Some(in_git), Some(trackers)) => {
            observe::observe_orphans(cluster, trackers, in_git, options.apply.source.as_deref())
                .await
        }
        _ => Vec::new(),
    };
    cluster.clear_prefetched();
    let health = app_plans
        .iter()
        .filter_map(|app_plan| {
            app_plan
                .health
                .as_ref()
                .map(|health| (app_plan.app.clone(), health.clone()))
        })
        .collect();
    for orphan in &orphans {
        app_plans.push(planner::plan_app_deletion(
            &orphan.app,
            &orphan.live,
            &orphan.tracker,
            &options.plan,
        ));
    }
    let removed: BTreeSet<AppRef> = orphans.iter().map(|orphan| orphan.app.clone()).collect();
    if let Evidence::Incomplete(reason) = &evidence {
        prune_guard::hold_prunes(&mut app_plans, &removed, reason);
    }
    let prunes = prune_guard::count_prunes(&app_plans);
    let kept = options.budget.source_objects.unwrap_or(planned_objects);
    if let Some(reason) = options.budget.exceeded(prunes, kept) {
        prune_guard::hold_prunes(&mut app_plans, &removed, &reason);
        diagnostics.push(analyzer::Diagnostic::error(
            prune_guard::RULE_PRUNE_BUDGET,
            reason,
            None,
        ));
    }
    let mut plan = planner::plan_all(
        app_plans,
        PlanTarget::Clusters(vec![cluster.name().to_owned()]),
        diagnostics,
    );
    crate::namespaces::plan_creations(cluster, &mut plan.apps, options.plan.create_namespaces)
        .await;
    // One line per plan, so a benchmark of the agent (hack/scale.sh --only drift) can tell what
    // a plan of every app costs with and without the watch cache.
    let (wall, requests, cpu) = started;
    tracing::info!(
        apps = plan.apps.len(),
        requests = cluster.requests() - requests,
        from_cache,
        wall_s = wall.elapsed().as_secs_f64(),
        cpu_s = process_cpu_seconds().zip(cpu).map(|(end, start)| end - start),
        watched = ?cluster.watch_stats(),
        "live plan done"
    );
    LivePlan {
        plan,
        observations,
        orphans,
        health,
        // Set by the caller: the agent moves its own in rather than copying them.
        statuses: BTreeMap::new(),
    }
}

/// The evidence of a pass: the caller's, unless the render's own diagnostics show it
/// incomplete (a caller can only add doubt, never remove it).
fn pass_evidence(diagnostics: &[analyzer::Diagnostic], given: &Evidence) -> Evidence {
    match (given, Evidence::of_render(diagnostics, [], &|_| None)) {
        (Evidence::Incomplete(reason), _) => Evidence::Incomplete(reason.clone()),
        (Evidence::Complete, found) => found,
    }
}

/// Apps of a group observed, then planned (in parallel) and trimmed, before the next ones are
/// observed: enough to keep both cores busy planning, few enough that one chunk's live objects
/// are a small share of a 1,000-app namespace's.
const OBSERVE_CHUNK: usize = 128;

/// User + system CPU time of this process so far (every thread), from `/proc/self/stat`;
/// `None` where there is no procfs. Assumes the usual 100 clock ticks per second.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name (in parentheses, which may hold spaces), utime and stime are the
    // 12th and 13th fields.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let user = fields.next()?.parse::<u64>().ok()?;
    let system = fields.next()?.parse::<u64>().ok()?;
    Some((user + system) as f64 / 100.0)
}

/// Drops from an observation the live objects its apply will not read: objects planned
/// unchanged whose tracker entry already records the desired state, which apply neither writes
/// nor adopts (health is rated before). At 10,000 unchanged apps these are nearly all of the
/// ~35,000 live objects a plan would otherwise hold until the apply is done.
fn drop_settled(observation: &mut AppObservation, app_plan: &AppPlan) {
    let Some(tracker) = &observation.tracker else {
        return;
    };
    for change in &app_plan.changes {
        if change.action != crate::plan::Action::Unchanged {
            continue;
        }
        let settled = observation
            .desired
            .objects
            .iter()
            .find(|object| object.object_ref == change.object)
            .is_some_and(|object| {
                tracker
                    .applied(&change.object)
                    .is_some_and(|entry| entry.hash == object.hash)
            });
        if settled {
            observation.live.objects.remove(&change.object);
        }
    }
}

/// Drops the rendered JSON of an app an apply will not write: every change planned unchanged
/// and every desired object settled (its live object dropped by the plan, [`drop_settled`]: its
/// tracker entry records the desired hash). An apply of such an app reads only its objects'
/// identities and hashes (no write, no adoption), and health after it only their identities;
/// at a first deploy of 10,000 unchanged apps this is a copy of the whole render held through
/// the apply. Only for apps applied as a whole ([`Keep::ForWholeApply`]): workflows
/// apply from the desired objects.
fn drop_settled_json(observation: &mut AppObservation, app_plan: &AppPlan) {
    let Some(tracker) = &observation.tracker else {
        return;
    };
    let all_unchanged = app_plan
        .changes
        .iter()
        .all(|change| change.action == crate::plan::Action::Unchanged);
    let all_settled = observation.desired.objects.iter().all(|object| {
        !observation.live.objects.contains_key(&object.object_ref)
            && tracker
                .applied(&object.object_ref)
                .is_some_and(|entry| entry.hash == object.hash)
    });
    if all_unchanged && all_settled {
        for object in &mut observation.desired.objects {
            object.object = Value::Null;
        }
    }
}

/// The desired apps split by their namespace, in order (the apps come sorted by [`AppRef`]).
fn by_namespace(desired_apps: Vec<planner::DesiredApp>) -> Vec<Vec<planner::DesiredApp>> {
    let mut groups: Vec<Vec<planner::DesiredApp>> = Vec::new();
    for desired in desired_apps {
        match groups.last_mut() {
            Some(group)
                if group
                    .last()
                    .is_some_and(|last| last.app.namespace == desired.app.namespace) =>
            {
                group.push(desired);
            }
            _ => groups.push(vec![desired]),
        }
    }
    groups
}

/// Plans observed apps and rates their health: pure and per app (diffs, health CUE), so in
/// parallel.
fn plan_observed(observations: &[AppObservation], options: &LiveOptions) -> Vec<AppPlan> {
    observations
        .par_iter()
        .map(|observation| {
            let mut app_plan = planner::plan_app(
                &observation.desired,
                &observation.live,
                observation.tracker.as_ref(),
                &options.plan,
            );
            if let Some(error) = &observation.tracker_error {
                app_plan.diagnostics.push(
                    analyzer::Diagnostic::error("cluster-error", error.clone(), None)
                        .for_app(&observation.desired.app),
                );
            }
            if let Some(conflict) = source_conflict(observation, options) {
                app_plan.diagnostics.push(conflict);
                app_plan.changes.clear();
            }
            app_plan.health = live_health(&observation.live, &observation.desired, options);
            app_plan
        })
        .collect()
}

/// An app another source deployed: its tracker records that source, and a second source with
/// an app of the same namespace and name never adopts it (nor prunes it). A conflict in the
/// plan, naming both sources; the app's objects are left alone.
fn source_conflict(
    observation: &AppObservation,
    options: &LiveOptions,
) -> Option<analyzer::Diagnostic> {
    let recorded = observation.tracker.as_ref()?.source.as_deref()?;
    let ours = options.apply.source.as_deref()?;
    (recorded != ours).then(|| {
        analyzer::Diagnostic::error(
            RULE_SOURCE_CONFLICT,
            format!(
                "app {} is deployed from source {recorded:?}; source {ours:?} has an app of the same namespace and name and does not take it over (rename one of them, or remove it from {recorded:?} first)",
                observation.desired.app
            ),
            None,
        )
        .for_app(&observation.desired.app)
    })
}

/// The rule of the error for an app of the same namespace and name in two sources.
pub const RULE_SOURCE_CONFLICT: &str = "source-conflict";

/// [`apply_live`] for every app but those in `skip` (the apps whose workflow applies them, see
/// [`run_workflows`]).
pub async fn apply_live_except(
    cluster: &Cluster,
    live_plan: &LivePlan,
    options: &LiveOptions,
    skip: &BTreeSet<AppRef>,
) -> Vec<AppApplyReport> {
    // No copy of the plan: at 10,000 apps it holds every live object twice (live and dry run).
    apply_filtered(cluster, live_plan, options, &|app| !skip.contains(app)).await
}

/// Applies a live plan app by app. Each app stops at its first error; the others go on.
pub async fn apply_live(
    cluster: &Cluster,
    live_plan: &LivePlan,
    options: &LiveOptions,
) -> Vec<AppApplyReport> {
    apply_filtered(cluster, live_plan, options, &|_| true).await
}

/// Apps applied at once by [`apply_live`] (each still one request at a time, all within the
/// cluster's QPS budget): on a local or fast apiserver the budget is not the limit, the round
/// trips of 10,000 apps one after the other are.
const APPLY_CONCURRENCY: usize = 8;

async fn apply_filtered(
    cluster: &Cluster,
    live_plan: &LivePlan,
    options: &LiveOptions,
    wanted: &(dyn Fn(&AppRef) -> bool + Sync),
) -> Vec<AppApplyReport> {
    use futures::StreamExt as _;

    let store = TrackerStore::new(cluster, &options.tracker_namespace);
    // Indexed once: a scan of the observations per app is quadratic in the apps.
    let observations: BTreeMap<&AppRef, &AppObservation> = live_plan
        .observations
        .iter()
        .map(|observation| (&observation.desired.app, observation))
        .collect();
    let orphans: BTreeMap<&AppRef, &OrphanObservation> = live_plan
        .orphans
        .iter()
        .map(|orphan| (&orphan.app, orphan))
        .collect();
    // Apps that write or delete cluster-scoped objects (Namespaces, CRDs, ...) go first, one
    // at a time in plan order: other apps' objects may live in them. The rest, whose changes
    // are all inside namespaces, are independent of each other and go several at a time.
    let (ordered, independent): (Vec<(usize, &AppPlan)>, Vec<_>) = live_plan
        .plan
        .apps
        .iter()
        .enumerate()
        .filter(|(_, app_plan)| wanted(&app_plan.app))
        .partition(|(_, app_plan)| {
            app_plan.changes.iter().any(|change| {
                change.object.namespace.is_none() && change.action != crate::plan::Action::Unchanged
            })
        });
    let mut reports: Vec<(usize, AppApplyReport)> = Vec::new();
    let store = &store;
    let observations = &observations;
    let orphans = &orphans;
    for (index, app_plan) in ordered {
        let observation = observations.get(&app_plan.app).copied();
        let orphan = orphans.get(&app_plan.app).copied();
        if let Some(report) =
            apply_one(cluster, store, options, observation, orphan, app_plan).await
        {
            reports.push((index, report));
        }
    }
    // The futures are built in a loop, not by a closure in the stream: closures there make the
    // agent's tasks fail to be provably `Send` (rust-lang/rust#110338).
    let mut pending = Vec::with_capacity(independent.len());
    for (index, app_plan) in independent {
        let observation = observations.get(&app_plan.app).copied();
        let orphan = orphans.get(&app_plan.app).copied();
        pending.push(apply_indexed(
            index,
            apply_one(cluster, store, options, observation, orphan, app_plan),
        ));
    }
    let concurrent: Vec<(usize, Option<AppApplyReport>)> = futures::stream::iter(pending)
        .buffer_unordered(APPLY_CONCURRENCY)
        .collect()
        .await;
    reports.extend(
        concurrent
            .into_iter()
            .filter_map(|(index, report)| report.map(|report| (index, report))),
    );
    // Reports in plan order, whatever order the apps finished in.
    reports.sort_by_key(|(index, _)| *index);
    reports.into_iter().map(|(_, report)| report).collect()
}

async fn apply_indexed(
    index: usize,
    applied: impl std::future::Future<Output = Option<AppApplyReport>>,
) -> (usize, Option<AppApplyReport>) {
    (index, applied.await)
}

/// Applies one app of a plan (or deletes an orphan); `None` when the plan's app was neither
/// observed nor an orphan.
async fn apply_one(
    cluster: &Cluster,
    store: &TrackerStore<'_>,
    options: &LiveOptions,
    observation: Option<&AppObservation>,
    orphan: Option<&OrphanObservation>,
    app_plan: &AppPlan,
) -> Option<AppApplyReport> {
    match (observation, orphan) {
        (Some(observation), _) => {
            Some(apply::apply_app(cluster, store, observation, app_plan, &options.apply).await)
        }
        (None, Some(orphan)) => Some(apply::delete_app(cluster, store, orphan, app_plan).await),
        (None, None) => None,
    }
}

/// The health of each app's rendered objects as they are live now (re-read after an apply).
pub async fn read_health(cluster: &Cluster, live_plan: &LivePlan) -> BTreeMap<AppRef, AppHealth> {
    // In bulk, as for the plan: after applying 10,000 apps, one GET per object is ~35,000 requests.
    let wanted: Vec<crate::plan::ObjectRef> = live_plan
        .observations
        .iter()
        .flat_map(|observation| &observation.desired.objects)
        .map(|object| object.object_ref.clone())
        .collect();
    cluster.prefetch(wanted).await;
    let mut healths = BTreeMap::new();
    for observation in &live_plan.observations {
        let mut live = LiveObjects::default();
        for object in &observation.desired.objects {
            let object_ref = &object.object_ref;
            let Ok(Some(resolved)) = cluster
                .resolve(&object_ref.api_version, &object_ref.kind)
                .await
            else {
                continue;
            };
            let observed = match observe::read(cluster, &resolved, object_ref).await {
                Ok(Some(live)) => Observed::Present {
                    live,
                    dry_run: None,
                },
                Ok(None) => Observed::Absent,
                Err(message) => Observed::Failed(message),
            };
            live.objects.insert(object_ref.clone(), observed);
        }
        let statuses = live_plan
            .statuses
            .get(&observation.desired.app)
            .map_or(&[][..], Vec::as_slice);
        if let Some(health) = health::of_app(&observation.desired, &live, statuses) {
            healths.insert(observation.desired.app.clone(), health);
        }
    }
    cluster.clear_prefetched();
    healths
}

/// The Application manifests of every rendered app, parsed from the sources (the render output
/// carries only objects). Apps whose manifest does not parse here are absent: the render has
/// reported them already. Each manifest file is parsed once (an app is matched by name among
/// the apps rendered from it: its namespace may come from the render's rules), files in
/// parallel: at 10,000 apps this is seconds of YAML.
pub fn applications_from_sources<R: RenderedApps>(
    output: &R,
    sources: &SourceMap,
) -> BTreeMap<AppRef, Application> {
    let mut by_file: BTreeMap<cue::FileId, Vec<&AppRef>> = BTreeMap::new();
    for app in output.apps() {
        let app = app.render();
        by_file.entry(app.file).or_default().push(&app.app);
    }
    let files: Vec<(cue::FileId, Vec<&AppRef>)> = by_file.into_iter().collect();
    let parsed: Vec<Vec<(AppRef, Application)>> = files
        .par_iter()
        .map(|(file, apps)| applications_in(sources.text(*file), apps))
        .collect();
    parsed.into_iter().flatten().collect()
}

/// What a plan reads of the apps' manifests besides their render ([`plan_inputs`]).
#[derive(Debug, Default)]
pub struct PlanInputs {
    /// Each app's resource policies ([`policies_of`]).
    pub policies: BTreeMap<AppRef, Vec<Policy>>,
    /// Each app's status CUE inputs ([`health::status::of_applications`]).
    pub statuses: BTreeMap<AppRef, Vec<ComponentStatus>>,
    /// The apps that run a workflow ([`uses_workflow`]), with their manifests.
    pub workflows: BTreeMap<AppRef, Application>,
}

/// The policies, status inputs and workflow apps of every rendered app: what
/// [`policies_of`], [`health::status::of_applications`] and [`uses_workflow`] give over
/// [`applications_from_sources`], without holding every app's manifest at once. Each file's
/// Applications are reduced to those as soon as the file is parsed (files in parallel), and
/// only workflow apps keep their manifest: at 10,000 apps the parsed manifests of every app
/// were ~100 MiB on top of the plan.
pub fn plan_inputs<R: RenderedApps>(
    output: &R,
    sources: &SourceMap,
    definitions: &analyzer::Definitions,
) -> PlanInputs {
    let mut by_file: BTreeMap<cue::FileId, Vec<&AppRef>> = BTreeMap::new();
    for app in output.apps() {
        let app = app.render();
        by_file.entry(app.file).or_default().push(&app.app);
    }
    let files: Vec<(cue::FileId, Vec<&AppRef>)> = by_file.into_iter().collect();
    let catalog = health::status::StatusCatalog::new(definitions);
    type Reduced = (
        AppRef,
        Vec<Policy>,
        Vec<ComponentStatus>,
        Option<Application>,
    );
    let reduced: Vec<Vec<Reduced>> = files
        .par_iter()
        .map(|(file, apps)| {
            applications_in(sources.text(*file), apps)
                .into_iter()
                .map(|(app, application)| {
                    let statuses = health::status::from_model(&application, &catalog);
                    let policies = application.spec.policies.clone();
                    let workflow = uses_workflow(&application).then_some(application);
                    (app, policies, statuses, workflow)
                })
                .collect()
        })
        .collect();
    let mut inputs = PlanInputs::default();
    for (app, policies, statuses, workflow) in reduced.into_iter().flatten() {
        if let Some(application) = workflow {
            inputs.workflows.insert(app.clone(), application);
        }
        inputs.policies.insert(app.clone(), policies);
        inputs.statuses.insert(app, statuses);
    }
    inputs
}

/// The Applications of `apps` found among the YAML documents of one manifest file.
fn applications_in(text: &str, apps: &[&AppRef]) -> Vec<(AppRef, Application)> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_default();
    let mut found = Vec::new();
    for document in documents {
        if document.get("kind").and_then(Value::as_str) != Some("Application") {
            continue;
        }
        let name = document
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let matching: Vec<&&AppRef> = apps
            .iter()
            .filter(|app| Some(app.name.as_str()) == name.as_deref())
            .collect();
        if matching.is_empty() {
            continue;
        }
        if let Ok(parsed) = serde_json::from_value::<Application>(document) {
            for app in matching {
                found.push(((*app).clone(), parsed.clone()));
            }
        }
    }
    found
}

/// Whether an app is deployed through its workflow rather than applied as a whole: it
/// declares workflow steps, or topology or override policies (whose generated workflow is one
/// deploy per topology). Apps with neither get KubeVela's default workflow, one
/// apply-component per component in order, which is what a whole apply does already.
pub fn uses_workflow(app: &Application) -> bool {
    let declared = app
        .spec
        .workflow
        .as_ref()
        .is_some_and(|workflow| !workflow.steps.is_empty());
    declared
        || app
            .spec
            .policies
            .iter()
            .any(|policy| matches!(policy.policy_type.as_str(), "topology" | "override"))
        || !rollout_plans(app).0.is_empty()
}

/// The rollout plans of an app's components (their `rollout` trait), and the problems of the
/// plans that cannot be used.
pub fn rollout_plans(app: &Application) -> (BTreeMap<String, RolloutPlan>, Vec<Issue>) {
    let mut plans = BTreeMap::new();
    let mut issues = Vec::new();
    for component in &app.spec.components {
        for rollout in component
            .traits
            .iter()
            .filter(|app_trait| app_trait.trait_type == "rollout")
        {
            let properties = rollout.properties.clone().unwrap_or(Value::Null);
            match RolloutPlan::from_properties(&properties) {
                Ok(plan) => {
                    plans.insert(component.name.clone(), plan);
                }
                Err(error) => issues.push(Issue {
                    rule: "invalid-rollout",
                    step: None,
                    message: format!("component {:?}: {error}", component.name),
                }),
            }
        }
    }
    (plans, issues)
}

/// One app's workflow outcome: checked and run, or refused before anything was applied.
#[derive(Debug, Clone)]
pub enum WorkflowResult {
    Ran(Box<WorkflowReport>),
    /// The workflow is not valid (unknown step types, cycles, unknown names, bad `if`):
    /// nothing of the app was applied.
    Invalid {
        app: AppRef,
        issues: Vec<Issue>,
    },
    /// The workflow state could not be read or written.
    Failed {
        app: AppRef,
        message: String,
    },
}

/// Checks every workflow first, then runs each valid one (one pass each, see
/// [`run_workflow`]). With a `fleet`, deploy steps whose topology policies name or select
/// registered clusters deploy each placement's render to its cluster (a tracker per app in
/// each); without one, only the cluster given is known and other placements are refused.
///
/// Boxed as `Send` with concrete lifetimes, so the agent's source tasks stay provably `Send`
/// (rust-lang/rust#110338, as `agent_loop` notes).
pub fn run_workflows<'a, R: RenderedApps>(
    cluster: &'a Cluster,
    live_plan: &'a LivePlan,
    output: &'a R,
    apps: &'a BTreeMap<AppRef, Application>,
    fleet: Option<&'a crate::workflow::Fleet>,
    options: &'a DriverOptions,
) -> futures::future::BoxFuture<'a, Vec<WorkflowResult>> {
    Box::pin(run_workflows_inner(
        cluster, live_plan, output, apps, fleet, options,
    ))
}

async fn run_workflows_inner<R: RenderedApps>(
    cluster: &Cluster,
    live_plan: &LivePlan,
    output: &R,
    apps: &BTreeMap<AppRef, Application>,
    fleet: Option<&crate::workflow::Fleet>,
    options: &DriverOptions,
) -> Vec<WorkflowResult> {
    let observations: BTreeMap<&AppRef, &AppObservation> = live_plan
        .observations
        .iter()
        .map(|observation| (&observation.desired.app, observation))
        .collect();
    let input_hashes: BTreeMap<&AppRef, &str> = output
        .apps()
        .iter()
        .map(AppRender::render)
        .map(|rendered| (&rendered.app, rendered.input_hash.as_str()))
        .collect();
    let mut checked = Vec::new();
    for (app_ref, app) in apps {
        let Some(observation) = observations.get(app_ref).copied() else {
            continue;
        };
        let ctx = WorkflowContext {
            policies: app.spec.policies.iter().collect(),
            clusters: fleet.map(crate::workflow::Fleet::names),
        };
        // A blocked app (render errors) is never applied; its workflow's own problems are
        // still reported.
        let (rollouts, mut rollout_issues) = rollout_plans(app);
        if fleet.is_none() {
            rollout_issues.extend(remote_placements(app, &options.plan.cluster));
        }
        let (spec, mut issues) = build_workflow(app, &ctx);
        let planned = match (&spec, fleet) {
            (Some(spec), Some(fleet)) if issues.is_empty() => {
                match crate::workflow::step_targets(app, app_ref, spec, fleet) {
                    Ok(planned) => planned,
                    Err(mut placement_issues) => {
                        issues.append(&mut placement_issues);
                        BTreeMap::new()
                    }
                }
            }
            _ => BTreeMap::new(),
        };
        match spec {
            _ if !issues.is_empty() || !rollout_issues.is_empty() => {
                issues.append(&mut rollout_issues);
                checked.push(Checked::Invalid(app_ref.clone(), issues));
            }
            Some(spec) if !observation.desired.is_blocked() => {
                checked.push(Checked::Valid(observation, spec, rollouts, planned));
            }
            _ => {}
        }
    }
    let mut results: Vec<WorkflowResult> = Vec::new();
    for entry in checked {
        let (observation, spec, rollouts, planned) = match entry {
            Checked::Valid(observation, spec, rollouts, planned) => {
                (observation, spec, rollouts, planned)
            }
            Checked::Invalid(app, issues) => {
                results.push(WorkflowResult::Invalid { app, issues });
                continue;
            }
        };
        let revision = input_hashes
            .get(&observation.desired.app)
            .map(|hash| (*hash).to_owned())
            .unwrap_or_default();
        let targets = match fleet {
            Some(fleet) => {
                resolve_targets(cluster, fleet, apps, &observation.desired, planned).await
            }
            None => BTreeMap::new(),
        };
        // Placements on clusters the registry lacks are skipped, not refused; the app keeps
        // whatever it has there (those clusters are never collected as departed).
        let unreachable = match (fleet, apps.get(&observation.desired.app)) {
            (Some(fleet), Some(app)) => crate::workflow::unreachable_placements(app, &spec, fleet),
            _ => Vec::new(),
        };
        for skipped in &unreachable {
            tracing::warn!(
                app.namespace = %observation.desired.app.namespace,
                app.name = %observation.desired.app.name,
                cluster = %skipped.cluster,
                "{}",
                skipped.message()
            );
        }
        // Where the app may now be deployed is recorded first, so clusters it leaves later
        // are known (`workflow::collect_departed`).
        let placed = crate::workflow::placed_clusters(&spec, &targets, cluster.name());
        if fleet.is_some()
            && let Err(message) = crate::workflow::record_placements(
                cluster,
                &options.tracker_namespace,
                &observation.desired.app,
                &placed,
            )
            .await
        {
            results.push(WorkflowResult::Failed {
                app: observation.desired.app.clone(),
                message: format!("recording where the app is deployed: {message}"),
            });
            continue;
        }
        match run_workflow(
            cluster,
            &observation.desired,
            &spec,
            &revision,
            &rollouts,
            &targets,
            options,
        )
        .await
        {
            Ok(mut report) => {
                report.warnings = unreachable
                    .iter()
                    .map(|skipped| skipped.message())
                    .collect();
                // A pass that may prune nothing leaves the departed clusters for the next one.
                if let Some(fleet) = fleet
                    && report.state.phase == WorkflowPhase::Succeeded
                    && options.plan.prune == Prune::Allowed
                {
                    let mut kept = placed.clone();
                    kept.extend(unreachable.iter().map(|skipped| skipped.cluster.clone()));
                    let collected = crate::workflow::collect_departed(
                        fleet,
                        cluster,
                        &observation.desired,
                        &kept,
                        &options.tracker_namespace,
                        &options.apply,
                    )
                    .await;
                    report.applies.extend(collected);
                }
                results.push(WorkflowResult::Ran(Box::new(report)));
            }
            Err(error) => results.push(WorkflowResult::Failed {
                app: observation.desired.app.clone(),
                message: error.to_string(),
            }),
        }
    }
    results
}

/// Driver options matching a live apply's, driving each workflow for at most `wait`.
pub fn driver_options(options: &LiveOptions, wait: std::time::Duration) -> DriverOptions {
    let mut plan = options.plan.clone();
    // A pass that may prune nothing garbage-collects nothing after its workflows either.
    if matches!(options.evidence, Evidence::Incomplete(_)) {
        plan.prune = Prune::Disabled;
    }
    DriverOptions {
        plan,
        apply: options.apply.clone(),
        tracker_namespace: options.tracker_namespace.clone(),
        wait,
        poll: std::time::Duration::from_secs(1),
    }
}

/// The apps of a render that run a workflow ([`uses_workflow`]), with their manifests.
pub fn workflow_apps<R: RenderedApps>(
    output: &R,
    sources: &SourceMap,
) -> BTreeMap<AppRef, Application> {
    applications_from_sources(output, sources)
        .into_iter()
        .filter(|(_, app)| uses_workflow(app))
        .collect()
}

impl LivePlan {
    /// This plan without the apps in `apps` (those a workflow applies), for a whole apply of
    /// the rest.
    pub fn without(&self, apps: &BTreeMap<AppRef, Application>) -> LivePlan {
        let mut rest = self.clone();
        rest.plan
            .apps
            .retain(|app_plan| !apps.contains_key(&app_plan.app));
        rest.observations
            .retain(|observation| !apps.contains_key(&observation.desired.app));
        rest
    }
}

/// The warnings of workflows that ran (placements skipped because their cluster is not
/// registered), one line per warning naming its app.
pub fn workflow_warnings(results: &[WorkflowResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|result| match result {
            WorkflowResult::Ran(report) => Some(report),
            _ => None,
        })
        .flat_map(|report| {
            report
                .warnings
                .iter()
                .map(|warning| format!("app {}: warning: {warning}", report.app))
        })
        .collect()
}

/// Workflow outcomes as apply reports, for callers that report per app (the agent's commit
/// statuses): the step applies' objects, and an outcome that fails on a failed or invalid
/// workflow. A suspended or still running workflow counts as applied so far; its state says
/// the rest.
pub fn workflow_reports(results: &[WorkflowResult]) -> Vec<AppApplyReport> {
    results
        .iter()
        .map(|result| match result {
            WorkflowResult::Ran(report) => {
                let objects = report
                    .applies
                    .iter()
                    .flat_map(|(_, applied)| applied.objects.iter().cloned())
                    .collect();
                // A cluster the app left but that could not be collected fails the app.
                let collection_failed = crate::workflow::collection_failure(&report.applies);
                let outcome = match &report.state.failure {
                    _ if collection_failed.is_some() => ApplyOutcome::Failed(format!(
                        "garbage collection: {}",
                        collection_failed.unwrap_or_default()
                    )),
                    Some(failure) if report.state.phase == WorkflowPhase::Failed => {
                        ApplyOutcome::Failed(format!(
                            "workflow failed at step {}: {}: {}",
                            failure.step, failure.reason, failure.message
                        ))
                    }
                    _ if report.state.phase == WorkflowPhase::Failed => {
                        ApplyOutcome::Failed("workflow failed".to_owned())
                    }
                    _ => ApplyOutcome::Applied,
                };
                AppApplyReport {
                    app: report.app.clone(),
                    outcome,
                    objects,
                }
            }
            WorkflowResult::Invalid { app, issues } => AppApplyReport {
                app: app.clone(),
                outcome: ApplyOutcome::Skipped(format!(
                    "workflow not valid: {}",
                    issues
                        .iter()
                        .map(|issue| issue.message.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
                objects: Vec::new(),
            },
            WorkflowResult::Failed { app, message } => AppApplyReport {
                app: app.clone(),
                outcome: ApplyOutcome::Failed(message.clone()),
                objects: Vec::new(),
            },
        })
        .collect()
}

/// Topology policies that place the app anywhere but the cluster being applied to: the
/// driver deploys to that one cluster only (FIXME(#6): deploy to every placement with
/// `analyzer::render_placements`), so such an app is refused rather than deployed to the
/// wrong place.
fn remote_placements(app: &Application, local: &str) -> Vec<Issue> {
    let mut issues = Vec::new();
    for policy in app
        .spec
        .policies
        .iter()
        .filter(|policy| policy.policy_type == "topology")
    {
        let properties = policy.properties.clone().unwrap_or(Value::Null);
        let remote: Vec<&str> = properties
            .get("clusters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|cluster| *cluster != local && *cluster != crate::placement::LOCAL_CLUSTER)
            .collect();
        let selects = properties.get("clusterLabelSelector").is_some()
            || properties.get("clusterSelector").is_some();
        if !remote.is_empty() || selects {
            issues.push(Issue {
                rule: "remote-placement-unsupported",
                step: None,
                message: format!(
                    "topology policy {:?} places the app on other clusters than {local:?}; deploying to several clusters is not supported yet",
                    policy.name
                ),
            });
        }
    }
    issues
}

/// Each planned placement's objects, scoped by its own cluster's discovery.
async fn resolve_targets<'a>(
    local: &'a Cluster,
    fleet: &'a crate::workflow::Fleet,
    apps: &BTreeMap<AppRef, Application>,
    desired: &planner::DesiredApp,
    planned: BTreeMap<String, Vec<crate::workflow::PlannedTarget<'_>>>,
) -> crate::workflow::StepTargets<'a> {
    let policies: BTreeMap<AppRef, Vec<Policy>> = apps
        .get(&desired.app)
        .map(|app| BTreeMap::from([(desired.app.clone(), app.spec.policies.clone())]))
        .unwrap_or_default();
    let mut targets = BTreeMap::new();
    for (step, planned) in planned {
        let mut step_targets = Vec::new();
        for target in planned {
            // Checked by `step_targets`: every placement's cluster is connected.
            let Some(cluster) = fleet.connection(&target.placement.cluster, local) else {
                continue;
            };
            let rendered =
                crate::workflow::in_namespace(target.rendered, &target.placement.namespace);
            let resolved =
                observe::desired_apps(cluster, &[rendered], &policies, desired.revision.as_deref())
                    .await;
            for placed in resolved {
                step_targets.push(crate::workflow::Target {
                    group: target.group,
                    cluster,
                    desired: placed,
                });
            }
        }
        targets.insert(step, step_targets);
    }
    targets
}

/// A workflow after the checks, before it runs.
enum Checked<'a> {
    Valid(
        &'a AppObservation,
        WorkflowSpec,
        BTreeMap<String, RolloutPlan>,
        BTreeMap<String, Vec<crate::workflow::PlannedTarget<'a>>>,
    ),
    Invalid(AppRef, Vec<Issue>),
}

/// The resource policies of every rendered app, read from the Application manifests in the
/// sources (the render output does not carry them). A manifest that does not parse here has
/// already been reported by the render, so it simply contributes no policies.
pub fn policies_from_sources(
    output: &RenderOutput,
    sources: &SourceMap,
) -> BTreeMap<AppRef, Vec<Policy>> {
    policies_of(&applications_from_sources(output, sources))
}

/// The resource policies of each app of `applications`.
pub fn policies_of(applications: &BTreeMap<AppRef, Application>) -> BTreeMap<AppRef, Vec<Policy>> {
    applications
        .iter()
        .map(|(app, application)| (app.clone(), application.spec.policies.clone()))
        .collect()
}

fn live_health(
    live: &LiveObjects,
    desired: &planner::DesiredApp,
    options: &LiveOptions,
) -> Option<AppHealth> {
    let statuses = options
        .statuses
        .get(&desired.app)
        .map_or(&[][..], Vec::as_slice);
    health::of_app(desired, live, statuses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Action, Change};
    use crate::planner::{DesiredApp, Observed, builtin_scope};
    use crate::tracker::{EntryState, TrackedEntry, TrackerRecord};
    use analyzer::{RenderedApp, RenderedObject};
    use serde_json::json;

    fn desired(namespace: &str, name: &str, objects: &[&str]) -> DesiredApp {
        let rendered: RenderedApp = RenderedApp {
            app: AppRef {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
            file: cue::FileId(0),
            objects: objects
                .iter()
                .map(|object| RenderedObject {
                    component: "settings".to_owned(),
                    trait_type: None,
                    output_name: None,
                    object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": object, "namespace": namespace},
                                   "data": {"k": "v"}}),
                })
                .collect(),
            diagnostics: Vec::new(),
            input_hash: String::new(),
        };
        DesiredApp::from_rendered(&rendered, &[], None, &builtin_scope)
    }

    fn unchanged(object: &crate::plan::ObjectRef) -> Change {
        Change {
            action: Action::Unchanged,
            cluster: "local".to_owned(),
            object: object.clone(),
            diff: String::new(),
            changed_fields: Vec::new(),
            reason: None,
        }
    }

    #[test]
    fn an_apply_keeps_only_the_live_objects_it_may_write_or_adopt() {
        let (mut observation, app_plan) = planned(
            desired("team", "shop", &["recorded", "stale-hash", "changed"]),
            &[None, Some("an older render"), None],
            &[Action::Unchanged, Action::Unchanged, Action::Update],
        );
        let kept: Vec<&str> = observation
            .live
            .objects
            .keys()
            .map(|object| object.name.as_str())
            .collect();
        // Unchanged and recorded with the desired hash: nothing to write or adopt. An older
        // hash is adopted by the apply, a change is written: both keep their live object.
        assert_eq!(kept, vec!["changed", "stale-hash"]);

        // Without a tracker everything may be adopted: nothing is dropped.
        observation.tracker = None;
        let before = observation.live.objects.len();
        drop_settled(&mut observation, &app_plan);
        assert_eq!(observation.live.objects.len(), before);
    }

    /// An observation of `desired` with every object live and recorded in the tracker with
    /// `hashes` (the desired hash when `None`), planned with `actions`, after [`drop_settled`].
    fn planned(
        desired: DesiredApp,
        hashes: &[Option<&str>],
        actions: &[Action],
    ) -> (AppObservation, AppPlan) {
        let mut tracker = TrackerRecord::new(&desired.app);
        let mut live = LiveObjects::default();
        for (object, hash) in desired.objects.iter().zip(hashes) {
            tracker.entries.insert(
                object.object_ref.clone(),
                TrackedEntry {
                    state: EntryState::Applied,
                    hash: hash.map_or_else(|| object.hash.clone(), str::to_owned),
                    resource_version: Some("1".to_owned()),
                    component: "settings".to_owned(),
                    component_type: None,
                    trait_type: None,
                    gc: Default::default(),
                    propagation: Default::default(),
                },
            );
            live.objects.insert(
                object.object_ref.clone(),
                Observed::Present {
                    live: object.object.clone(),
                    dry_run: None,
                },
            );
        }
        let app_plan = AppPlan {
            app: desired.app.clone(),
            revision: None,
            changes: desired
                .objects
                .iter()
                .zip(actions)
                .map(|(object, action)| Change {
                    action: *action,
                    ..unchanged(&object.object_ref)
                })
                .collect(),
            diagnostics: Vec::new(),
            health: None,
            digest: None,
        };
        let mut observation = AppObservation {
            desired,
            live,
            tracker: Some(tracker),
            tracker_error: None,
            apply: observe::ApplyNeeds::Observation,
        };
        drop_settled(&mut observation, &app_plan);
        (observation, app_plan)
    }

    #[test]
    fn only_apps_an_apply_does_not_write_lose_their_rendered_json() {
        let unchanged_app = planned(
            desired("team", "settled", &["a", "b"]),
            &[None, None],
            &[Action::Unchanged, Action::Unchanged],
        );
        let updated_app = planned(
            desired("team", "updated", &["a", "b"]),
            &[None, None],
            &[Action::Unchanged, Action::Update],
        );
        // Unchanged, but recorded with an older hash: the apply adopts it (reads the object).
        let adopted_app = planned(
            desired("team", "adopted", &["a"]),
            &[Some("an older render")],
            &[Action::Unchanged],
        );
        let mut observations = Vec::new();
        for (mut observation, app_plan) in [unchanged_app, updated_app, adopted_app] {
            drop_settled_json(&mut observation, &app_plan);
            observations.push(observation);
        }
        let emptied: Vec<(String, bool)> = observations
            .iter()
            .map(|observation| {
                let nulls = observation
                    .desired
                    .objects
                    .iter()
                    .all(|object| object.object.is_null());
                (observation.desired.app.name.clone(), nulls)
            })
            .collect();
        assert_eq!(
            emptied,
            vec![
                ("settled".to_owned(), true),
                ("updated".to_owned(), false),
                ("adopted".to_owned(), false),
            ]
        );
        // Identities and hashes stay: the apply and health after it read them.
        let settled = &observations[0].desired.objects;
        assert_eq!(settled.len(), 2);
        assert!(settled.iter().all(|object| !object.hash.is_empty()));
    }

    /// Whether [`apply::apply_app`] of this observation made no request and reported the app
    /// applied with no object acted on.
    async fn apply_is_a_no_op(
        observation: &AppObservation,
        app_plan: &AppPlan,
        options: &ApplyOptions,
    ) -> bool {
        let cluster = Cluster::offline();
        let store = TrackerStore::new(&cluster, crate::tracker::DEFAULT_NAMESPACE);
        let report = apply::apply_app(&cluster, &store, observation, app_plan, options).await;
        report.outcome == ApplyOutcome::Applied
            && report.objects.is_empty()
            && cluster.requests() == 0
    }

    #[tokio::test]
    async fn an_app_the_apply_would_not_touch_keeps_only_its_identity() {
        let options = ApplyOptions::default();
        let settled = || {
            planned(
                desired("team", "settled", &["a", "b"]),
                &[None, None],
                &[Action::Unchanged, Action::Unchanged],
            )
        };
        let mut cases: Vec<(&str, AppObservation, AppPlan, ApplyOptions)> = Vec::new();
        let (observation, app_plan) = settled();
        cases.push(("settled", observation, app_plan, options.clone()));
        let (observation, app_plan) = planned(
            desired("team", "adopted", &["a"]),
            &[Some("an older render")],
            &[Action::Unchanged],
        );
        cases.push(("adopted", observation, app_plan, options.clone()));
        let (observation, app_plan) = planned(
            desired("team", "updated", &["a", "b"]),
            &[None, None],
            &[Action::Unchanged, Action::Update],
        );
        cases.push(("updated", observation, app_plan, options.clone()));
        // The tracker was written by another source: the apply records this one.
        let (observation, app_plan) = settled();
        let other_source = ApplyOptions {
            source: Some("another".to_owned()),
            ..options.clone()
        };
        cases.push(("other source", observation, app_plan, other_source));
        // A tracked object the app no longer renders and that is gone: the apply drops its entry.
        let (mut observation, app_plan) = settled();
        let tracker = observation.tracker.as_mut().unwrap();
        let mut gone = tracker.entries.keys().next().unwrap().clone();
        gone.name = "gone".to_owned();
        let entry = tracker.entries.values().next().unwrap().clone();
        tracker.entries.insert(gone, entry);
        cases.push(("stale entry", observation, app_plan, options.clone()));
        // Listed before its apply (write-ahead) but never recorded as applied: adopted.
        let (mut observation, app_plan) = settled();
        for entry in observation.tracker.as_mut().unwrap().entries.values_mut() {
            entry.state = EntryState::Pending;
        }
        let rendered = observation.desired.objects.clone();
        for object in &rendered {
            observation.live.objects.insert(
                object.object_ref.clone(),
                Observed::Present {
                    live: object.object.clone(),
                    dry_run: None,
                },
            );
        }
        cases.push(("pending entries", observation, app_plan, options.clone()));
        let (mut observation, app_plan) = settled();
        observation.tracker_error = Some("forbidden".to_owned());
        cases.push(("unreadable tracker", observation, app_plan, options.clone()));
        let (observation, mut app_plan) = settled();
        app_plan.diagnostics.push(analyzer::Diagnostic::error(
            "cluster-error",
            "an object could not be read".to_owned(),
            None,
        ));
        cases.push(("plan error", observation, app_plan, options.clone()));

        let mut judged = Vec::new();
        for (name, observation, app_plan, options) in &cases {
            let nothing = apply::nothing_to_apply(observation, app_plan, options);
            // The judgement is exactly what the apply does with the whole observation.
            assert_eq!(
                nothing,
                apply_is_a_no_op(observation, app_plan, options).await,
                "{name}"
            );
            judged.push((*name, nothing));
        }
        assert_eq!(
            judged,
            vec![
                ("settled", true),
                ("adopted", false),
                ("updated", false),
                ("other source", false),
                ("stale entry", false),
                ("pending entries", false),
                ("unreadable tracker", false),
                ("plan error", false),
            ]
        );

        // What the plan keeps of the settled app: its identity, and an apply that does nothing.
        let (observation, app_plan) = settled();
        let kept = AppObservation::nothing_to_apply(observation);
        assert_eq!(kept.desired.app.name, "settled");
        assert!(kept.desired.objects.is_empty() && kept.tracker.is_none());
        assert!(kept.live.objects.is_empty());
        assert!(apply_is_a_no_op(&kept, &app_plan, &options).await);
    }

    #[test]
    fn a_shared_render_is_built_one_namespace_group_at_a_time() {
        let rendered: Vec<Arc<RenderedApp>> =
            [("a", "one"), ("a", "two"), ("b", "one"), ("c", "x")]
                .iter()
                .map(|(namespace, name)| {
                    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": name}, "data": {"k": "v"}});
                    Arc::new(RenderedApp {
                        app: AppRef {
                            namespace: (*namespace).to_owned(),
                            name: (*name).to_owned(),
                        },
                        file: cue::FileId(0),
                        objects: vec![RenderedObject {
                            component: "settings".to_owned(),
                            trait_type: None,
                            output_name: None,
                            object,
                        }],
                        diagnostics: Vec::new(),
                        input_hash: String::new(),
                    })
                })
                .collect();
        let policies = BTreeMap::new();
        let scopes = BTreeMap::from([(
            ("v1".to_owned(), "ConfigMap".to_owned()),
            crate::plan::Scope::Namespaced,
        )]);
        let groups = |by_namespace: bool| {
            let builder =
                observe::DesiredBuilder::from_scopes(scopes.clone(), &policies, Some("abc"));
            let mut groups = Desired::Shared(&rendered[..], builder).into_groups(by_namespace);
            let mut names: Vec<Vec<String>> = Vec::new();
            while let Some(group) = groups.next_group() {
                // Built as `desired_apps` builds them: marked, in the app's namespace.
                for app in &group {
                    let object = &app.objects[0];
                    assert_eq!(
                        object.object_ref.namespace.as_deref(),
                        Some(app.app.namespace.as_str())
                    );
                    assert_eq!(app.revision.as_deref(), Some("abc"));
                    assert!(crate::ownership::carries_marks_of(&object.object, &app.app));
                }
                names.push(group.iter().map(|app| app.app.to_string()).collect());
            }
            names
        };
        assert_eq!(
            groups(true),
            vec![
                vec!["a/one".to_owned(), "a/two".to_owned()],
                vec!["b/one".to_owned()],
                vec!["c/x".to_owned()],
            ]
        );
        assert_eq!(
            groups(false),
            vec![vec![
                "a/one".to_owned(),
                "a/two".to_owned(),
                "b/one".to_owned(),
                "c/x".to_owned()
            ]]
        );
    }

    #[test]
    fn plan_inputs_are_what_the_parsed_manifests_give() {
        // Two files, three apps: a plain one with a resource policy, one with a workflow step
        // and one with a topology policy (both run a workflow), across namespaces.
        let file = |path: &str, contents: &str| analyzer::SourceFile {
            path: path.to_owned(),
            contents: contents.to_owned(),
        };
        let snapshot = analyzer::Snapshot {
            commit: None,
            files: vec![
                file(
                    "apps/a.yaml",
                    "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: web, namespace: a}\nspec:\n  components:\n    - name: web\n      type: webservice\n      properties: {image: nginx}\n      traits:\n        - type: gateway\n          properties: {domain: x.example, http: {\"/\": 80}}\n  policies:\n    - name: keep\n      type: garbage-collect\n      properties: {keepLegacyResource: true}\n---\napiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: flow, namespace: b}\nspec:\n  components:\n    - name: cm\n      type: k8s-objects\n      properties:\n        objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}]\n  workflow:\n    steps:\n      - {name: one, type: apply-component, properties: {component: cm}}\n",
                ),
                file(
                    "apps/b.yaml",
                    "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: spread, namespace: a}\nspec:\n  components:\n    - name: cm\n      type: k8s-objects\n      properties:\n        objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: spread}}]\n  policies:\n    - name: where\n      type: topology\n      properties: {clusters: [local]}\n",
                ),
            ],
        };
        let definitions = analyzer::Definitions::builtin();
        let (output, sources) =
            analyzer::render_snapshot(&snapshot, &definitions, &analyzer::RenderOptions::default());
        assert_eq!(output.apps.len(), 3, "{:?}", output.diagnostics);
        let inputs = plan_inputs(&output, &sources, &definitions);
        let applications = applications_from_sources(&output, &sources);
        assert_eq!(applications.len(), 3);
        assert_eq!(inputs.policies, policies_of(&applications));
        assert_eq!(
            inputs.statuses,
            health::status::of_applications(&applications, &definitions)
        );
        let workflows: Vec<String> = inputs.workflows.keys().map(ToString::to_string).collect();
        assert_eq!(workflows, ["a/spread", "b/flow"]);
        assert_eq!(
            inputs.workflows[&app_ref_of("b", "flow")],
            applications[&app_ref_of("b", "flow")]
        );
        assert_eq!(inputs.policies[&app_ref_of("a", "web")].len(), 1);
    }

    fn app_ref_of(namespace: &str, name: &str) -> AppRef {
        AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    #[test]
    fn apps_are_grouped_by_namespace_in_order() {
        let apps = vec![
            desired("a", "one", &[]),
            desired("a", "two", &[]),
            desired("b", "one", &[]),
            desired("c", "one", &[]),
            desired("c", "two", &[]),
        ];
        let groups: Vec<Vec<String>> = by_namespace(apps)
            .iter()
            .map(|group| group.iter().map(|app| app.app.to_string()).collect())
            .collect();
        assert_eq!(
            groups,
            vec![
                vec!["a/one".to_owned(), "a/two".to_owned()],
                vec!["b/one".to_owned()],
                vec!["c/one".to_owned(), "c/two".to_owned()],
            ]
        );
    }
}
