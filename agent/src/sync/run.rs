//! [`run`]: one sync of a source's apps against one cluster, in the mode its caller needs.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use analyzer::model::{Application, Policy};
use analyzer::{AppRef, AppRender, RenderOutput};
use futures::future::BoxFuture;

use super::plan_live::{self, Keep, Orphans};
use super::{LiveOptions, LivePlan, RenderedApps, apply_live, workflows};
use crate::apply::AppApplyReport;
use crate::cluster::Cluster;
use crate::health::AppHealth;
use crate::plan::Plan;
use crate::workflow::Fleet;

/// What a sync plans against besides the cluster: the options of the plan and apply, the
/// revision the objects are marked with, the apps' resource policies, and which tracked apps
/// of the source it looks for as removed from Git.
pub struct Target<'a> {
    pub options: LiveOptions,
    pub revision: Option<&'a str>,
    pub policies: &'a BTreeMap<AppRef, Vec<Policy>>,
    pub orphans: &'a Orphans,
    /// Permits shared with the caller's other work (the agent's, one per app being planned or
    /// applied across its sources): the plan holds one while it observes, an apply one per
    /// app, each app then applied on its own. Without, apps are applied several at a time,
    /// those that write cluster-scoped objects first.
    pub permits: Option<&'a tokio::sync::Semaphore>,
}

/// The rendered apps a sync plans.
pub enum Apps<'a, R> {
    /// A render the caller is done with: its objects move into the plan instead of being
    /// copied (at 10,000 apps the copy is hundreds of MiB); it keeps its apps, diagnostics and
    /// hashes.
    Taken(&'a mut RenderOutput),
    /// A render the caller keeps (the agent's, shared with its analysis cache): each
    /// namespace group's desired objects are built from it as the group is planned.
    Shared(&'a R),
}

/// A cluster seen only to be read: what a sync that only plans holds. It has no path to a
/// write: the apply and workflow stages of [`run`] take an [`Apply`], which it is not.
#[derive(Clone, Copy)]
pub struct ReadOnly<'a> {
    cluster: &'a Cluster,
}

impl<'a> ReadOnly<'a> {
    pub fn new(cluster: &'a Cluster) -> Self {
        ReadOnly { cluster }
    }

    /// The cluster, for the observe and plan stage only.
    pub(super) fn reads(self) -> &'a Cluster {
        self.cluster
    }
}

/// What a sync does once it has planned.
pub enum Mode<'a> {
    /// Only the plan: `driftless plan`, the agent's pull request previews and drift reports.
    /// The observations are dropped as each namespace of apps is planned.
    Plan(ReadOnly<'a>),
    /// Apply what the gate lets through: apps without a workflow as a whole, the others
    /// through their workflow.
    Apply(Apply<'a>),
}

/// An apply: the cluster written to, and the caller's part in it.
pub struct Apply<'a> {
    pub cluster: &'a Cluster,
    /// The apps deployed through their workflow ([`workflows::uses_workflow`]), with their
    /// manifests; the other apps are applied as a whole.
    pub workflows: &'a BTreeMap<AppRef, Application>,
    /// How long one pass drives each workflow.
    pub workflow_wait: Duration,
    pub hooks: &'a mut (dyn ApplyHooks + Send),
    pub health: HealthAfter,
}

/// Where an apply's health comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthAfter {
    /// As planned (no request after the apply); an apply that keeps only what it writes.
    Plan,
    /// Read again after the apply, for every app.
    Read,
}

/// The caller's part in an apply, between the plan and the writes.
pub trait ApplyHooks {
    /// Sees the plan before anything is written, and says what to apply.
    /// `workflows` are the apps deployed through their workflow.
    fn gate(&mut self, plan: &LivePlan, workflows: &BTreeMap<AppRef, Application>) -> Gate;
    /// The clusters the workflows of `apps` deploy to, with their renders per placement;
    /// asked only when some workflow runs.
    fn fleet<'a>(&'a mut self, apps: &'a BTreeMap<AppRef, Application>) -> FleetFuture<'a>;
}

/// What [`ApplyHooks::fleet`] returns.
pub type FleetFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Fleet> + Send + 'a>>;

/// A gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Write nothing.
    Stop,
    /// Apply every app but the `held` ones; of the workflow apps, run only those in
    /// `workflows` when given.
    Apply {
        held: BTreeSet<AppRef>,
        workflows: Option<BTreeSet<AppRef>>,
    },
}

/// One sync's outcome: the plan, as planned (before any hold), and one record per planned
/// app, in the plan's order.
#[derive(Debug)]
pub struct Synced {
    pub plan: Plan,
    pub apps: Vec<AppSyncResult>,
    /// Whether the gate stopped the apply (nothing was written).
    pub stopped: bool,
}

/// What a sync did with one app.
#[derive(Debug)]
pub struct AppSyncResult {
    pub app: AppRef,
    pub outcome: AppOutcome,
    /// The health of its live objects: as planned, or read again after the apply.
    pub health: Option<AppHealth>,
}

/// What a sync did with one app, beyond planning it.
#[derive(Debug)]
pub enum AppOutcome {
    /// Planned only: a sync that only plans, a stopped apply, or a workflow not run.
    Planned,
    /// Held back by the gate.
    Held,
    /// Applied as a whole (or deleted, for an app removed from Git).
    Applied(AppApplyReport),
    /// Through its workflow: its outcome, and the same as an apply report.
    Workflow(workflows::WorkflowResult, AppApplyReport),
}

impl Synced {
    /// Every apply report, whole or from a workflow, in plan order.
    pub fn apply_reports(&self) -> impl Iterator<Item = &AppApplyReport> {
        self.apps.iter().filter_map(|app| match &app.outcome {
            AppOutcome::Applied(report) | AppOutcome::Workflow(_, report) => Some(report),
            AppOutcome::Planned | AppOutcome::Held => None,
        })
    }

    /// The workflows that were run or refused, in plan order.
    pub fn workflow_results(&self) -> impl Iterator<Item = &workflows::WorkflowResult> {
        self.apps.iter().filter_map(|app| match &app.outcome {
            AppOutcome::Workflow(result, _) => Some(result),
            _ => None,
        })
    }

    /// The apps the gate held back.
    pub fn held(&self) -> Vec<AppRef> {
        self.apps
            .iter()
            .filter(|app| matches!(app.outcome, AppOutcome::Held))
            .map(|app| app.app.clone())
            .collect()
    }
}

/// Syncs `apps` against a cluster: observes them (and the source's apps removed from Git, as
/// `target.orphans` says), plans them, and in [`Mode::Apply`] applies them (each app as a
/// whole, or through its workflow) and rates their health. Every caller goes through here: the
/// CLI's `plan --kubeconfig` and `apply`, the agent's deploys, previews and drift checks.
///
/// Boxed as `Send` with concrete lifetimes, so the agent's source tasks stay provably `Send`
/// (rust-lang/rust#110338).
pub fn run<'a, 't: 'a, 'm: 'a, R: RenderedApps + Send>(
    target: Target<'t>,
    apps: Apps<'t, R>,
    mode: Mode<'m>,
) -> BoxFuture<'a, Synced> {
    Box::pin(async move {
        match mode {
            Mode::Plan(view) => plan_only(view, target, apps).await,
            Mode::Apply(apply) => plan_and_apply(apply, target, apps).await,
        }
    })
}

async fn plan_only<R: RenderedApps>(
    view: ReadOnly<'_>,
    mut target: Target<'_>,
    mut apps: Apps<'_, R>,
) -> Synced {
    let live_plan = plan_live::plan_apps(view, &mut target, &mut apps, Keep::PlanOnly).await;
    plan_only_records(live_plan)
}

async fn plan_and_apply<R: RenderedApps>(
    apply: Apply<'_>,
    mut target: Target<'_>,
    mut apps: Apps<'_, R>,
) -> Synced {
    let Apply {
        cluster,
        workflows,
        workflow_wait,
        hooks,
        health: health_after,
    } = apply;
    // An apply that reads health again keeps every app's desired objects; one that rates it
    // as planned keeps only what the writes read.
    let keep = match health_after {
        HealthAfter::Read => Keep::ForApply,
        HealthAfter::Plan => Keep::ForWholeApply { workflows },
    };
    let mut live_plan =
        plan_live::plan_apps(ReadOnly::new(cluster), &mut target, &mut apps, keep).await;
    let (held, selected) = match hooks.gate(&live_plan, workflows) {
        Gate::Stop => {
            let mut synced = plan_only_records(live_plan);
            synced.stopped = true;
            return synced;
        }
        Gate::Apply { held, workflows } => (held, workflows),
    };
    let options = &target.options;
    let whole = |app: &AppRef| !held.contains(app) && !workflows.contains_key(app);
    let whole_reports = match target.permits {
        Some(permits) => {
            apply_live::apply_bounded(cluster, &live_plan, options, &whole, permits).await
        }
        None => apply_live::apply_filtered(cluster, &live_plan, options, &whole).await,
    };
    // The workflow apps to run: all of them unless some are held or the gate chose.
    let to_run: Cow<'_, BTreeMap<AppRef, Application>> = if held.is_empty() && selected.is_none() {
        Cow::Borrowed(workflows)
    } else {
        Cow::Owned(
            workflows
                .iter()
                .filter(|(app, _)| !held.contains(*app))
                .filter(|(app, _)| selected.as_ref().is_none_or(|only| only.contains(*app)))
                .map(|(app, manifest)| (app.clone(), manifest.clone()))
                .collect(),
        )
    };
    let workflow_results = if to_run.is_empty() {
        Vec::new()
    } else {
        let fleet = hooks.fleet(&to_run).await;
        let driver = workflows::driver_options(options, workflow_wait);
        let revisions = input_hashes(&apps, &to_run);
        workflows::run_workflows_with(
            cluster,
            &live_plan,
            &revisions,
            &to_run,
            Some(&fleet),
            &driver,
        )
        .await
    };
    let mut health = match health_after {
        HealthAfter::Plan => std::mem::take(&mut live_plan.health),
        HealthAfter::Read => {
            // The objects as planned are stale now, and the health read lists them all
            // again: without this, both copies of every live object would be held at once.
            for observation in &mut live_plan.observations {
                observation.live = crate::planner::LiveObjects::default();
            }
            super::read_health(cluster, &live_plan).await
        }
    };
    let LivePlan { plan, .. } = live_plan;
    let records = Records {
        held: &held,
        whole: whole_reports,
        workflows: workflow_results,
    };
    let apps = records.per_app(&plan, &mut health);
    Synced {
        plan,
        apps,
        stopped: false,
    }
}

/// The records of a plan nothing was applied from.
fn plan_only_records(live_plan: LivePlan) -> Synced {
    let LivePlan {
        plan, mut health, ..
    } = live_plan;
    let apps = plan
        .apps
        .iter()
        .map(|app_plan| AppSyncResult {
            app: app_plan.app.clone(),
            outcome: AppOutcome::Planned,
            health: health.remove(&app_plan.app),
        })
        .collect();
    Synced {
        plan,
        apps,
        stopped: false,
    }
}

/// What an apply did, gathered into one record per planned app.
struct Records<'a> {
    held: &'a BTreeSet<AppRef>,
    /// In plan order.
    whole: Vec<AppApplyReport>,
    workflows: Vec<workflows::WorkflowResult>,
}

impl Records<'_> {
    fn per_app(self, plan: &Plan, health: &mut BTreeMap<AppRef, AppHealth>) -> Vec<AppSyncResult> {
        let mut whole: BTreeMap<AppRef, AppApplyReport> = self
            .whole
            .into_iter()
            .map(|report| (report.app.clone(), report))
            .collect();
        let reports = workflows::workflow_reports(&self.workflows);
        let mut ran: BTreeMap<AppRef, (workflows::WorkflowResult, AppApplyReport)> = self
            .workflows
            .into_iter()
            .zip(reports)
            .map(|(result, report)| (report.app.clone(), (result, report)))
            .collect();
        plan.apps
            .iter()
            .map(|app_plan| {
                let app = &app_plan.app;
                let outcome = if self.held.contains(app) {
                    AppOutcome::Held
                } else if let Some(report) = whole.remove(app) {
                    AppOutcome::Applied(report)
                } else if let Some((result, report)) = ran.remove(app) {
                    AppOutcome::Workflow(result, report)
                } else {
                    AppOutcome::Planned
                };
                AppSyncResult {
                    app: app.clone(),
                    outcome,
                    health: health.remove(app),
                }
            })
            .collect()
    }
}

/// Each of `wanted`'s render input hash, the revision its workflow state records.
fn input_hashes<'a, R: RenderedApps>(
    apps: &'a Apps<'_, R>,
    wanted: &BTreeMap<AppRef, Application>,
) -> BTreeMap<&'a AppRef, &'a str> {
    fn hashes<'a, A: AppRender + 'a>(
        apps: impl Iterator<Item = &'a A>,
        wanted: &BTreeMap<AppRef, Application>,
    ) -> BTreeMap<&'a AppRef, &'a str> {
        apps.filter(|rendered| wanted.contains_key(rendered.app()))
            .map(|rendered| (rendered.app(), rendered.input_hash()))
            .collect()
    }
    match apps {
        Apps::Taken(output) => hashes(output.apps.iter(), wanted),
        Apps::Shared(output) => hashes(output.apps().iter(), wanted),
    }
}
