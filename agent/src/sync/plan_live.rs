//! Observe and plan: the desired objects built from the render (one namespace group at a time
//! when the observations need not all be kept), the live objects and trackers read in bulk,
//! each app planned and its health rated, then the orphans, the prune guard and the
//! namespaces to create.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::model::{Application, Policy};
use analyzer::{AppRef, AppRender, RenderOutput, RenderedApp};
use rayon::prelude::*;
use serde_json::Value;

use super::{LiveOptions, LivePlan, RenderedApps};
use crate::apply::{self, FIELD_MANAGER};
use crate::cluster::Cluster;
use crate::health::{self, AppHealth};
use crate::observe::{self, AppObservation};
use crate::plan::{AppPlan, PlanTarget};
use crate::planner::{self, LiveObjects};
use crate::prune_guard::{self, Evidence, PassBudget};
use crate::tracker::TrackerRecord;
use crate::tracker_store::TrackerStore;

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

/// The plan of a [`super::run`]: `apps` observed through `view` and planned, keeping `keep`
/// of the observations. The target's status CUE moves into the plan unless only the plan is
/// kept (only `read_health` reads it, after an apply).
pub(super) async fn plan_apps<R: RenderedApps>(
    view: super::ReadOnly<'_>,
    target: &mut super::Target<'_>,
    apps: &mut super::Apps<'_, R>,
    keep: Keep<'_>,
) -> LivePlan {
    let cluster = view.reads();
    let (policies, revision) = (target.policies, target.revision);
    // The plan observes one app at a time: one permit covers it.
    let _permit = match target.permits {
        Some(permits) => permits.acquire().await.ok(),
        None => None,
    };
    let mut live_plan = match apps {
        super::Apps::Taken(output) => {
            let desired_apps =
                observe::desired_apps_taking(cluster, &mut output.apps, policies, revision).await;
            let diagnostics = output.diagnostics.clone();
            let desired = Desired::<RenderedApp>::Built(desired_apps);
            plan_desired(
                cluster,
                desired,
                diagnostics,
                &target.options,
                target.orphans,
                keep,
            )
            .await
        }
        super::Apps::Shared(output) => {
            let builder =
                observe::DesiredBuilder::new(cluster, output.apps(), policies, revision).await;
            let desired = Desired::Shared(output.apps(), builder);
            let diagnostics = output.diagnostics().to_vec();
            plan_desired(
                cluster,
                desired,
                diagnostics,
                &target.options,
                target.orphans,
                keep,
            )
            .await
        }
    };
    if !matches!(keep, Keep::PlanOnly) {
        live_plan.statuses = std::mem::take(&mut target.options.statuses);
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
            Desired::Shared(apps, _) => apps.iter().map(|app| app.app().clone()).collect(),
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
                let namespace = &first.app().namespace;
                let len = if *by_namespace {
                    rest.iter()
                        .take_while(|app| app.app().namespace == *namespace)
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
    let trackers = removed_apps_trackers(&mut store, in_git, &mut diagnostics).await;
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
            keep_observed(keep, observed, &planned, options, &mut observations);
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
    let guard = PruneGuard {
        evidence: &evidence,
        budget: &options.budget,
        planned_objects,
    };
    guard.hold(&mut app_plans, &removed, &mut diagnostics);
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

/// The trackers of the apps of the source missing from `in_git` (the orphan candidates), from
/// one LIST of every tracker, which the store keeps to answer each app's tracker read; `None`
/// when not looking for removed apps, or when the LIST failed (a diagnostic then says so).
async fn removed_apps_trackers(
    store: &mut TrackerStore<'_>,
    in_git: Option<&BTreeSet<AppRef>>,
    diagnostics: &mut Vec<analyzer::Diagnostic>,
) -> Option<BTreeMap<AppRef, TrackerRecord>> {
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
    trackers.map(|mut trackers| {
        if let Some(in_git) = in_git {
            trackers.retain(|app, _| !in_git.contains(app));
        }
        trackers
    })
}

/// Keeps of a chunk's observations what `keep` says, once they are planned (`planned`, in
/// the same order).
fn keep_observed(
    keep: Keep<'_>,
    observed: Vec<AppObservation>,
    planned: &[AppPlan],
    options: &LiveOptions,
    observations: &mut Vec<AppObservation>,
) {
    match keep {
        Keep::Observations => observations.extend(observed),
        Keep::ForApply | Keep::ForWholeApply { .. } => {
            for (mut observation, app_plan) in observed.into_iter().zip(planned) {
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
}

/// What a pass may prune: nothing on incomplete evidence, and no more than its budget.
struct PruneGuard<'a> {
    evidence: &'a Evidence,
    budget: &'a PassBudget,
    /// The objects planned to stay, for the budget's share when the source's count is unknown.
    planned_objects: usize,
}

impl PruneGuard<'_> {
    /// Holds the prunes of `app_plans` (and the deletion of the `removed` apps) the pass may
    /// not make; a budget exceeded is also an error of the plan.
    fn hold(
        &self,
        app_plans: &mut [AppPlan],
        removed: &BTreeSet<AppRef>,
        diagnostics: &mut Vec<analyzer::Diagnostic>,
    ) {
        if let Evidence::Incomplete(reason) = self.evidence {
            prune_guard::hold_prunes(app_plans, removed, reason);
        }
        let prunes = prune_guard::count_prunes(app_plans);
        let kept = self.budget.source_objects.unwrap_or(self.planned_objects);
        if let Some(reason) = self.budget.exceeded(prunes, kept) {
            prune_guard::hold_prunes(app_plans, removed, &reason);
            diagnostics.push(analyzer::Diagnostic::error(
                prune_guard::RULE_PRUNE_BUDGET,
                reason,
                None,
            ));
        }
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
mod tests;
