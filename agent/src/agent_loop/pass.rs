//! The worker's one call of the sync engine ([`crate::sync::run`]), shared by its deploys, pull
//! request previews and drift checks: what differs between them is the [`Pass`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use analyzer::model::Application;
use analyzer::{AppRef, AppRender};

use super::preview::without_take_over;
use super::{Selected, Shared, SourceWorker, WORKFLOW_WAIT, evidence_of, note_memory};
use crate::config::SourceConfig;
use crate::plan::Action;
use crate::review::SourceReview;
use crate::review::hold::Holds;
use crate::server::ui::record as ui_record;
use crate::source::git::{CommitId, GitSource};
use crate::sync::{
    self, Apply, ApplyHooks, Apps, FleetFuture, Gate, HealthAfter, LivePlan, Mode, Orphans,
    ReadOnly, Synced, Target,
};

/// What a pass of the worker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pass {
    /// A commit of the tracked branch: apply the apps, but those held.
    Deploy,
    /// A drift check that corrects: apply when some app drifted, running the workflows of the
    /// drifted workflow apps only.
    DriftCorrect,
    /// A drift check that reports: only the plan.
    DriftReport,
    /// A pull request's preview: only the plan, and without the pull request's `take-over`
    /// policies, so that a preview never adopts (nor shows the live values of) objects its
    /// app does not already own.
    Preview,
}

/// What a pass did, with what its caller reports from.
pub(super) struct PassOutcome {
    pub synced: Synced,
    /// The apps deployed through their workflow, with their manifests.
    pub workflows: BTreeMap<AppRef, Application>,
    /// The holds in force for an applying pass.
    pub holds: Holds,
    /// The desired objects of the apps a deploy applied as a whole, to time their going live.
    pub probe: Option<LivePlan>,
}

impl SourceWorker {
    /// Syncs the selected apps of `commit` as `pass` says; the plan looks for `orphans`.
    pub(super) async fn sync_pass(
        &mut self,
        rendered: &Selected,
        commit: &CommitId,
        orphans: &Orphans,
        pass: Pass,
    ) -> PassOutcome {
        let started = Instant::now();
        let applies = matches!(pass, Pass::Deploy | Pass::DriftCorrect);
        let holds = match (applies, orphans) {
            (false, _) => Holds::default(),
            // The plan holds only the selected apps: their holds, read by name, are enough.
            (true, Orphans::Skip) => {
                let apps: Vec<&AppRef> = rendered.output.apps.iter().map(|app| app.app()).collect();
                self.holds(Some(&apps)).await
            }
            // An app gone from Git may be pruned, and a hold keeps that too: every hold.
            (true, _) => self.holds(None).await,
        };
        // The policies, status CUE and workflows the render took from each manifest.
        let inputs = crate::live::plan_inputs(&*rendered.output);
        note_memory("plan inputs");
        let mut policies = inputs.policies;
        if pass == Pass::Preview {
            without_take_over(&mut policies);
        }
        let workflows = inputs.workflows;
        let mut options = self.live_options(&self.cluster);
        // Health also evaluates the definitions' healthPolicy/customStatus CUE.
        options.statuses = inputs.statuses;
        options.evidence = evidence_of(rendered);
        options.budget = self.budget(rendered, commit).await;
        let target = Target {
            options,
            revision: Some(commit.as_str()),
            policies: &policies,
            orphans,
            permits: Some(&self.shared.work_permits),
        };
        let apps = Apps::Shared(&*rendered.output);
        let mut hooks = WorkerHooks {
            pass,
            commit,
            git: &self.git,
            shared: &self.shared,
            config: &self.config,
            review: &mut self.review,
            cluster_name: self.cluster.name(),
            holds,
            probe: None,
            started,
            n_apps: rendered.output.apps.len(),
        };
        // Previews and drift reports hold only a read-only view of the cluster.
        let mode = if applies {
            Mode::Apply(Apply {
                cluster: &self.cluster,
                workflows: &workflows,
                workflow_wait: WORKFLOW_WAIT,
                hooks: &mut hooks,
                health: HealthAfter::Plan,
            })
        } else {
            Mode::Plan(ReadOnly::new(&self.cluster))
        };
        let synced = sync::run(target, apps, mode).await;
        if !applies {
            hooks.planned();
        }
        note_memory("sync");
        let WorkerHooks { holds, probe, .. } = hooks;
        PassOutcome {
            synced,
            workflows,
            holds,
            probe,
        }
    }
}

/// The worker's part in an applying pass: holds, the reviewed plan's check, the UI's view of
/// the objects, and the fleet of the workflows.
struct WorkerHooks<'a> {
    pass: Pass,
    commit: &'a CommitId,
    git: &'a GitSource,
    shared: &'a Shared,
    config: &'a SourceConfig,
    review: &'a mut SourceReview,
    cluster_name: &'a str,
    holds: Holds,
    probe: Option<LivePlan>,
    started: Instant,
    /// The apps selected to plan.
    n_apps: usize,
}

impl WorkerHooks<'_> {
    /// Notes a plan done: its duration and apps, for the metrics.
    fn planned(&self) {
        let metrics = &self.shared.metrics;
        metrics.observe_plan(&self.config.name, self.started.elapsed());
        metrics.record_planned(&self.config.name, self.n_apps);
    }

    fn held(&self, live_plan: &LivePlan) -> BTreeSet<AppRef> {
        live_plan
            .plan
            .apps
            .iter()
            .filter(|app_plan| self.holds.reason(&app_plan.app).is_some())
            .map(|app_plan| app_plan.app.clone())
            .collect()
    }
}

impl ApplyHooks for WorkerHooks<'_> {
    fn gate(&mut self, live_plan: &LivePlan, workflows: &BTreeMap<AppRef, Application>) -> Gate {
        self.planned();
        match self.pass {
            Pass::Deploy => {
                let (fleet, source) = (&self.shared.ui.fleet, &self.config.name);
                ui_record::objects(fleet, source, self.cluster_name, live_plan);
                if let Some(mode) = &self.config.reviewed_plan {
                    let plan = &live_plan.plan;
                    (self.review.reviewed).check(
                        mode,
                        self.git.repo(),
                        self.commit,
                        plan,
                        &mut self.holds,
                    );
                }
                let held = self.held(live_plan);
                let whole = |app: &AppRef| !held.contains(app) && !workflows.contains_key(app);
                self.probe = crate::review::live_time::probe(live_plan, &whole);
                Gate::Apply {
                    held,
                    workflows: None,
                }
            }
            Pass::DriftCorrect => {
                // Nothing drifted: nothing to correct, nothing written.
                let drifted: BTreeSet<AppRef> = live_plan
                    .plan
                    .apps
                    .iter()
                    .filter(|app_plan| {
                        app_plan
                            .changes
                            .iter()
                            .any(|change| change.action != Action::Unchanged)
                    })
                    .map(|app_plan| app_plan.app.clone())
                    .collect();
                if drifted.is_empty() {
                    return Gate::Stop;
                }
                self.review.reviewed.hold_awaiting(&mut self.holds);
                // Workflow apps are corrected by their workflow, never around a suspension:
                // one stopped by an outage (or waiting longer than a deploy drives it)
                // continues here, without waiting for a new commit.
                let drifted_workflows = workflows
                    .keys()
                    .filter(|app| drifted.contains(*app))
                    .cloned()
                    .collect();
                Gate::Apply {
                    held: self.held(live_plan),
                    workflows: Some(drifted_workflows),
                }
            }
            Pass::DriftReport | Pass::Preview => Gate::Stop,
        }
    }

    fn fleet<'a>(&'a mut self, apps: &'a BTreeMap<AppRef, Application>) -> FleetFuture<'a> {
        Box::pin(super::render::fleet_for(
            self.git,
            self.shared,
            self.commit,
            apps,
        ))
    }
}
