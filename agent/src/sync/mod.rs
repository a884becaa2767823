//! The sync engine: [`run`] observes, plans, applies (a whole app, or through its workflow)
//! and rates health, against one cluster, and returns one record per app. It is the only path
//! from a render to a cluster: the CLI's `plan --kubeconfig` and `apply` call it from one place
//! (`src/cli/live.rs`), the agent's deploys, previews and drift checks from another
//! (`agent_loop/pass.rs`); a test counts the call sites.
//!
//! A sync's [`Mode`] says whether it may write, by type: [`Mode::Plan`] (`driftless plan`,
//! previews, drift reports) holds only a [`ReadOnly`] view of the cluster, while the apply and
//! workflow stages take an [`Apply`], which holds the cluster to write to and the caller's
//! [`ApplyHooks`] (a gate between plan and writes: confirmation, holds, reviewed plans).
//! Writes themselves go through [`crate::writer`] only.
//!
//! The stages, one module each:
//! - `plan_live`: observe every rendered app and every orphaned app of the source, plan them
//!   with the pure planner (one namespace of apps at a time when the observations need not be
//!   kept), hold prunes the evidence or the budget does not allow.
//! - `apply_live`: apply a plan app by app; an app that fails stops alone.
//! - `workflows`: check and run the workflows of the apps that have one.
//! - `read_health`: the apps' health as live after an apply.

use std::collections::BTreeMap;

use analyzer::model::Application;
use analyzer::{AppRef, AppRender, CachedApp, Diagnostic, RenderOutput, RenderedApp};

use crate::apply::ApplyOptions;
use crate::health::AppHealth;
use crate::health::status::ComponentStatus;
use crate::observe::{AppObservation, OrphanObservation};
use crate::plan::Plan;
use crate::planner::PlanOptions;
use crate::prune_guard::{Evidence, PassBudget};

mod apply_live;
#[cfg(test)]
mod call_sites;
mod plan_live;
mod read_health;
mod run;
mod workflows;

pub use apply_live::apply_live;
pub use plan_live::{Keep, Orphans, RULE_SOURCE_CONFLICT, plan_live};
pub use read_health::read_health;
pub use run::{
    AppOutcome, AppSyncResult, Apply, ApplyHooks, Apps, FleetFuture, Gate, HealthAfter, Mode,
    ReadOnly, Synced, Target, run,
};
pub use workflows::{
    WorkflowResult, driver_options, rollout_plans, uses_workflow, workflow_reports,
    workflow_warnings,
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
    pub apps: Vec<CachedApp>,
    pub diagnostics: Vec<Diagnostic>,
}

impl RenderedApps for SharedApps {
    type App = CachedApp;
    fn apps(&self) -> &[CachedApp] {
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
