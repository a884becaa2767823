//! The apps deployed through their workflow: which apps (`uses_workflow`), their checks, and
//! each valid workflow run one pass against the cluster (and the fleet's other clusters).

use std::collections::BTreeMap;

use analyzer::AppRef;
use analyzer::model::{Application, Policy};
use serde_json::Value;

use super::{LiveOptions, LivePlan};
use crate::apply::{AppApplyReport, ApplyOutcome};
use crate::cluster::Cluster;
use crate::observe::{self, AppObservation};
use crate::planner::{self, Prune};
use crate::prune_guard::Evidence;
use crate::rollout::RolloutPlan;
use crate::workflow::{
    DriverOptions, Issue, WorkflowContext, WorkflowPhase, WorkflowReport, WorkflowSpec,
    build_workflow, run_workflow,
};

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

/// [`run_workflows`] with each app's render input hash given (its workflow state's revision).
pub(super) fn run_workflows_with<'a>(
    cluster: &'a Cluster,
    live_plan: &'a LivePlan,
    input_hashes: &'a BTreeMap<&AppRef, &str>,
    apps: &'a BTreeMap<AppRef, Application>,
    fleet: Option<&'a crate::workflow::Fleet>,
    options: &'a DriverOptions,
) -> futures::future::BoxFuture<'a, Vec<WorkflowResult>> {
    Box::pin(async move {
        let checked = check_workflows(live_plan, apps, fleet, options);
        let mut results: Vec<WorkflowResult> = Vec::new();
        for entry in checked {
            match entry {
                Checked::Valid(observation, spec, rollouts, planned) => {
                    let revision = input_hashes
                        .get(&observation.desired.app)
                        .map(|hash| (*hash).to_owned())
                        .unwrap_or_default();
                    let workflow = CheckedWorkflow {
                        desired: &observation.desired,
                        spec,
                        rollouts,
                        planned,
                        revision,
                    };
                    results.push(run_checked(cluster, workflow, apps, fleet, options).await);
                }
                Checked::Invalid(app, issues) => {
                    results.push(WorkflowResult::Invalid { app, issues });
                }
            }
        }
        results
    })
}

/// Every workflow of `apps` checked before any runs: its spec, rollouts and placements.
fn check_workflows<'a>(
    live_plan: &'a LivePlan,
    apps: &'a BTreeMap<AppRef, Application>,
    fleet: Option<&'a crate::workflow::Fleet>,
    options: &DriverOptions,
) -> Vec<Checked<'a>> {
    let observations: BTreeMap<&AppRef, &AppObservation> = live_plan
        .observations
        .iter()
        .map(|observation| (&observation.desired.app, observation))
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
    checked
}

/// A valid workflow, ready to run.
struct CheckedWorkflow<'a> {
    desired: &'a planner::DesiredApp,
    spec: WorkflowSpec,
    rollouts: BTreeMap<String, RolloutPlan>,
    planned: BTreeMap<String, Vec<crate::workflow::PlannedTarget<'a>>>,
    /// The app's render input hash: the workflow state's revision.
    revision: String,
}

/// Runs one checked workflow one pass: its placements recorded first, then its steps, then
/// (once it succeeded, on a pass that may prune) the clusters it left collected.
async fn run_checked(
    cluster: &Cluster,
    workflow: CheckedWorkflow<'_>,
    apps: &BTreeMap<AppRef, Application>,
    fleet: Option<&crate::workflow::Fleet>,
    options: &DriverOptions,
) -> WorkflowResult {
    let CheckedWorkflow {
        desired,
        spec,
        rollouts,
        planned,
        revision,
    } = workflow;
    let targets = match fleet {
        Some(fleet) => resolve_targets(cluster, fleet, apps, desired, planned).await,
        None => BTreeMap::new(),
    };
    // Placements on clusters the registry lacks are skipped, not refused; the app keeps
    // whatever it has there (those clusters are never collected as departed).
    let unreachable = match (fleet, apps.get(&desired.app)) {
        (Some(fleet), Some(app)) => crate::workflow::unreachable_placements(app, &spec, fleet),
        _ => Vec::new(),
    };
    for skipped in &unreachable {
        tracing::warn!(
            app.namespace = %desired.app.namespace,
            app.name = %desired.app.name,
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
            &desired.app,
            &placed,
        )
        .await
    {
        return WorkflowResult::Failed {
            app: desired.app.clone(),
            message: format!("recording where the app is deployed: {message}"),
        };
    }
    match run_workflow(
        cluster, desired, &spec, &revision, &rollouts, &targets, options,
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
                    desired,
                    &kept,
                    &options.tracker_namespace,
                    &options.apply,
                )
                .await;
                report.applies.extend(collected);
            }
            WorkflowResult::Ran(Box::new(report))
        }
        Err(error) => WorkflowResult::Failed {
            app: desired.app.clone(),
            message: error.to_string(),
        },
    }
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

/// The warnings of workflows that ran (placements skipped because their cluster is not
/// registered), one line per warning naming its app.
pub fn workflow_warnings<'a>(results: impl IntoIterator<Item = &'a WorkflowResult>) -> Vec<String> {
    results
        .into_iter()
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
