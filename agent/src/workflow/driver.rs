//! Running an app's workflow against a cluster: the effectful loop around the pure scheduler.
//! Read the stored state (a new revision restarts it), [`advance`], run each dispatched step's
//! effect, [`record`] its outcome, store the state, and repeat while something can still move
//! within the caller's wait budget. A manual `suspend` ends the pass (resumed later by
//! `driftless resume`); a step waiting for health is polled.
//!
//! Step effects go through the ordinary apply path (`observe` → `planner` → `apply`: tracker
//! write-ahead, server-side apply, conflicts): `apply-component` applies one component's
//! objects, `deploy` every object of the render, each without pruning, since the objects of
//! steps not reached yet must stay. Once the workflow has succeeded, one last apply of
//! everything the workflow deployed runs with pruning allowed: that is where the ownership and
//! garbage-collection policies act, as KubeVela collects garbage after a successful workflow.
//! A step succeeds when its objects are healthy and waits (until its `timeout`) otherwise.
//!
//! Beside this file: `driver/deploy.rs` runs a deploy step's placements in batches,
//! `driver/garbage.rs` the garbage collection after success, `driver/workload_rollout.rs` a
//! workload's rollout batches.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use analyzer::AppRef;
use serde_json::Value;

use super::engine::{Dispatch, StepOutcome, advance, record};
use super::fleet::{StepTargets, Target};
use super::spec::{StepType, WorkflowSpec};
use super::state::{StepPhase, Timestamp, WorkflowPhase, WorkflowState};
use super::store::{StoredWorkflow, WorkflowStore, WorkflowStoreError};
use crate::apply::{self, AppApplyReport, ApplyOptions, ApplyOutcome, FIELD_MANAGER};
use crate::cluster::{Cluster, describe_error};
use crate::health::{self, HealthStatus};
use crate::observe;
use crate::placement::Placement;
use crate::plan::ObjectRef;
use crate::planner::{self, DesiredApp, Observed, PlanOptions, Prune};
use crate::rollout::{
    BatchGate, BatchLimits, GateDecision, PlacementRollout, RolloutPlan, RolloutState,
    advance_rollout, split_placements,
};
use crate::tracker_store::TrackerStore;

mod apply_step;
mod deploy;
mod garbage;
mod workload_rollout;

use apply_step::apply_step;
use deploy::deploy_to_targets;
use garbage::collect_garbage;

/// Knobs of one workflow pass.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    pub plan: PlanOptions,
    pub apply: ApplyOptions,
    pub tracker_namespace: String,
    /// How long this pass keeps polling steps that wait (health, durations, other apps)
    /// before it returns with the workflow still executing; the next pass continues.
    pub wait: Duration,
    /// Pause between two polls.
    pub poll: Duration,
}

/// What one pass came to.
#[derive(Debug, Clone)]
pub struct WorkflowReport {
    pub app: AppRef,
    pub state: WorkflowState,
    /// Step names in the order their effects ran (a polled step appears once per poll).
    pub ran: Vec<String>,
    /// Every apply made, in order: per step, then the final garbage-collecting apply.
    pub applies: Vec<(String, AppApplyReport)>,
    /// What the caller should know but that failed nothing (placements skipped because their
    /// cluster is not registered: `fleet::unreachable_placements`).
    pub warnings: Vec<String>,
}

impl WorkflowReport {
    /// Whether the workflow stopped at a `suspend` step waiting for `driftless resume`.
    pub fn is_suspended(&self) -> bool {
        self.state.phase == WorkflowPhase::Suspending
    }
}

/// The current time as a workflow timestamp.
pub fn now() -> Timestamp {
    Timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs()),
    )
}

/// Runs one pass of the workflow of `desired` (an app's full render) at `revision`. Deploy
/// steps in `targets` deploy to their placements' clusters instead of `cluster`.
///
/// # Errors
/// The workflow state cannot be read or written. Step failures are not errors: they end in
/// the returned state.
pub async fn run_workflow(
    cluster: &Cluster,
    desired: &DesiredApp,
    spec: &WorkflowSpec,
    revision: &str,
    rollouts: &BTreeMap<String, RolloutPlan>,
    targets: &StepTargets<'_>,
    options: &DriverOptions,
) -> Result<WorkflowReport, WorkflowStoreError> {
    let store = WorkflowStore::new(cluster, &options.tracker_namespace);
    let deadline = std::time::Instant::now() + options.wait;
    let http = reqwest::Client::new();
    let mut report = WorkflowReport {
        app: desired.app.clone(),
        state: WorkflowState::new(spec, revision, now()),
        ran: Vec::new(),
        applies: Vec::new(),
        warnings: Vec::new(),
    };
    loop {
        // Re-read every round: `driftless resume` may have marked a step meanwhile.
        let stored = match store.read(&desired.app).await {
            Ok(stored) => stored,
            Err(error) if ride_out(&error, deadline) => {
                tokio::time::sleep(options.poll).await;
                continue;
            }
            Err(error) => return Err(error),
        };
        let resource_version = stored
            .as_ref()
            .and_then(|stored| stored.resource_version.clone());
        let mut state = WorkflowState::resume_or_restart(
            stored.map(|stored| stored.state),
            spec,
            revision,
            now(),
        );
        let before = state.clone();
        let dispatches = advance(spec, &mut state, now());
        let mut waiting = false;
        for dispatch in &dispatches {
            report.ran.push(dispatch.step.clone());
            let run = Run {
                cluster,
                desired,
                rollouts,
                options,
            };
            let outcome = match targets.get(&dispatch.step) {
                Some(step_targets) if dispatch.step_type == StepType::Deploy => {
                    deploy_to_targets(
                        &run,
                        step_targets,
                        dispatch,
                        &mut state.rollouts,
                        &mut report.applies,
                    )
                    .await
                }
                _ => {
                    run_step(
                        &run,
                        dispatch,
                        &http,
                        &mut state.rollouts,
                        &mut report.applies,
                    )
                    .await
                }
            };
            // A rollout held by batchPartition or paused does not move by waiting: the pass
            // ends there, like a suspension.
            waiting |= matches!(&outcome, StepOutcome::Waiting { message } if !is_held(message));
            record(spec, &mut state, &dispatch.step, outcome, now());
        }
        // Outcomes may finish the workflow or start the next steps: settle before storing.
        if !dispatches.is_empty() {
            let _ = advance(spec, &mut state, now());
        }
        if state.phase == WorkflowPhase::Succeeded {
            let run = Run {
                cluster,
                desired,
                rollouts,
                options,
            };
            collect_garbage(&run, spec, &state, targets, &mut report).await;
        }
        let mut stored = StoredWorkflow {
            state,
            resource_version,
        };
        if stored.state != before || stored.resource_version.is_none() {
            match store.write(&desired.app, &mut stored).await {
                // Someone (a resume) wrote meanwhile: effects are idempotent, go again.
                Err(WorkflowStoreError::WorkflowConflict { .. }) => continue,
                Err(error) if ride_out(&error, deadline) => {
                    tokio::time::sleep(options.poll).await;
                    continue;
                }
                other => other?,
            }
        }
        let progressed = stored.state != before;
        report.state = stored.state;
        if report.state.is_finished() {
            return Ok(report);
        }
        let may_move_alone = waiting || timed_wait_pending(spec, &report.state);
        if progressed && !waiting {
            continue;
        }
        if !may_move_alone || std::time::Instant::now() >= deadline {
            return Ok(report);
        }
        tokio::time::sleep(options.poll).await;
    }
}

/// Whether a failed state read or write is worth trying again in this pass: the failure passes
/// by itself (an apiserver outage or restart) and the pass still has time. The steps' effects
/// are idempotent, so a round run again after a lost write does no harm.
fn ride_out(error: &WorkflowStoreError, deadline: std::time::Instant) -> bool {
    crate::cluster::is_transient(&error.to_string()) && std::time::Instant::now() < deadline
}

/// Whether a waiting message says only that rollouts are held (see [`rollout_batch`]).
fn is_held(message: &str) -> bool {
    message.split("; ").all(|part| part.starts_with(HELD))
}

/// How [`rollout_batch`] starts the message of a held rollout.
const HELD: &str = "held after batch";

/// Whether a suspended step moves on by itself (a `duration`, or a `timeout` that expires).
fn timed_wait_pending(spec: &WorkflowSpec, state: &WorkflowState) -> bool {
    spec.all_steps().any(|step| {
        state
            .step(&step.name)
            .is_some_and(|step_state| step_state.phase == StepPhase::Suspending)
            && (step.timeout.is_some() || step.properties.get("duration").is_some())
    })
}

/// What every step of one pass works with.
struct Run<'a> {
    cluster: &'a Cluster,
    desired: &'a DesiredApp,
    /// Components with a rollout plan (the `rollout` trait), by name.
    rollouts: &'a BTreeMap<String, RolloutPlan>,
    options: &'a DriverOptions,
}

async fn run_step(
    run: &Run<'_>,
    dispatch: &Dispatch,
    http: &reqwest::Client,
    workloads: &mut BTreeMap<String, RolloutState>,
    applies: &mut Vec<(String, AppApplyReport)>,
) -> StepOutcome {
    match dispatch.step_type {
        StepType::ApplyComponent => {
            let component = dispatch
                .properties
                .get("component")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let components = BTreeSet::from([component]);
            apply_step(
                run,
                Some(&components),
                Prune::Disabled,
                &dispatch.step,
                workloads,
                applies,
            )
            .await
        }
        StepType::Deploy => {
            apply_step(
                run,
                None,
                Prune::Disabled,
                &dispatch.step,
                workloads,
                applies,
            )
            .await
        }
        StepType::ApplyObject => apply_object(run.cluster, run.desired, &dispatch.properties).await,
        StepType::DependsOnApp => {
            depends_on_app(run.cluster, run.desired, dispatch, run.options).await
        }
        StepType::Notification => {
            super::notify::send_notification(http, &dispatch.properties).await
        }
        // The scheduler runs these itself and never dispatches them.
        StepType::Suspend | StepType::StepGroup => StepOutcome::Succeeded {
            result: serde_json::json!({}),
        },
    }
}

/// The aggregate health of `desired`'s objects as they are live now (`None`: none has a
/// health rule).
pub(crate) async fn objects_health(
    cluster: &Cluster,
    desired: &DesiredApp,
) -> Option<health::Health> {
    let mut healths: Vec<(ObjectRef, health::Health)> = Vec::new();
    for object in &desired.objects {
        let object_ref = &object.object_ref;
        let observed = match cluster
            .resolve(&object_ref.api_version, &object_ref.kind)
            .await
        {
            Ok(Some(resolved)) => match observe::read(cluster, &resolved, object_ref).await {
                Ok(Some(live)) => Observed::Present {
                    live,
                    dry_run: None,
                },
                Ok(None) => Observed::Absent,
                Err(message) => Observed::Failed(message),
            },
            Ok(None) => Observed::Failed(observe::not_served(object_ref)),
            Err(error) => Observed::Failed(describe_error(&error)),
        };
        let health = match observed {
            Observed::Present { live, .. } => health::health_of(&live),
            Observed::Absent => Some(health::Health::progressing("not created yet")),
            Observed::Failed(message) => Some(health::Health::unknown(message)),
        };
        if let Some(health) = health {
            healths.push((object_ref.clone(), health));
        }
    }
    health::aggregate(healths.iter().map(|(object, health)| (object, health)))
}

/// The live object, `None` when absent (or its kind is not served).
///
/// # Errors
/// It could not be read: a rollout must not take an unreadable workload for a new one.
async fn read_live(cluster: &Cluster, object_ref: &ObjectRef) -> Result<Option<Value>, String> {
    let resolved = cluster
        .resolve(&object_ref.api_version, &object_ref.kind)
        .await
        .map_err(|error| describe_error(&error))?;
    let Some(resolved) = resolved else {
        return Ok(None);
    };
    observe::read(cluster, &resolved, object_ref).await
}

/// A step whose live reads or apply failed for a reason that passes by itself (the apiserver
/// unreachable, restarting or throttling; a concurrent write) waits and runs again, instead of
/// failing the workflow for good on an outage.
fn retry_later(message: String) -> StepOutcome {
    StepOutcome::Waiting {
        message: format!("retrying after a transient failure: {message}"),
    }
}

/// `apply-object`: server-side applies `properties.value` (namespaced objects default to the
/// app's namespace). Like KubeVela's step, the object is not tracked for garbage collection.
async fn apply_object(cluster: &Cluster, desired: &DesiredApp, properties: &Value) -> StepOutcome {
    let failed = |message: String| StepOutcome::Failed {
        reason: "ApplyFailed".to_owned(),
        message,
    };
    let Some(mut object) = properties.get("value").cloned() else {
        return failed("apply-object needs properties.value".to_owned());
    };
    let mut object_ref = match ObjectRef::from_object(&object) {
        Ok(object_ref) => object_ref,
        Err(error) => return failed(format!("apply-object value: {error}")),
    };
    let resolved = match cluster
        .resolve(&object_ref.api_version, &object_ref.kind)
        .await
    {
        Ok(Some(resolved)) => resolved,
        Ok(None) => return failed(observe::not_served(&object_ref)),
        Err(error) => return failed(describe_error(&error)),
    };
    if resolved.scope == crate::plan::Scope::Namespaced && object_ref.namespace.is_none() {
        object_ref.namespace = Some(desired.app.namespace.clone());
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert(
                "namespace".to_owned(),
                Value::String(desired.app.namespace.clone()),
            );
        }
    }
    let applied =
        crate::writer::server_side_apply(cluster, &resolved, &object_ref, &object, FIELD_MANAGER)
            .await;
    match applied {
        Ok(applied) => StepOutcome::Succeeded {
            result: serde_json::json!({ "output": serde_json::to_value(applied).unwrap_or(Value::Null) }),
        },
        Err(error) => failed(format!("{object_ref}: {}", describe_error(&error))),
    }
}

/// `depends-on-app`: waits until the named app has been deployed here (its resource tracker
/// exists) and its objects are healthy, as far as the tracker records them.
async fn depends_on_app(
    cluster: &Cluster,
    desired: &DesiredApp,
    dispatch: &Dispatch,
    options: &DriverOptions,
) -> StepOutcome {
    let Some(name) = dispatch.properties.get("name").and_then(Value::as_str) else {
        return StepOutcome::Failed {
            reason: "InvalidProperties".to_owned(),
            message: "depends-on-app needs properties.name".to_owned(),
        };
    };
    let other = AppRef {
        namespace: dispatch
            .properties
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or(&desired.app.namespace)
            .to_owned(),
        name: name.to_owned(),
    };
    let store = TrackerStore::new(cluster, &options.tracker_namespace);
    match store.read(&other).await {
        Ok(Some(_)) => StepOutcome::Succeeded {
            result: serde_json::json!({}),
        },
        Ok(None) => StepOutcome::Waiting {
            message: format!("app {other} is not deployed yet"),
        },
        Err(error) => StepOutcome::Waiting {
            message: error.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::deploy::placement_batches;
    use super::*;

    /// A connection that is never used: batching only reads cluster names.
    fn unused_connection(name: &str) -> Cluster {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let options = crate::cluster::ClusterOptions {
            name: name.to_owned(),
            ..crate::cluster::ClusterOptions::default()
        };
        Cluster::from_client(kube::Client::try_from(config).unwrap(), &options)
    }

    #[tokio::test]
    async fn placements_go_in_topology_groups_or_in_the_rollout_batches() {
        let clusters: Vec<Cluster> = ["a", "b", "canary", "c"]
            .into_iter()
            .map(unused_connection)
            .collect();
        let desired = DesiredApp {
            app: AppRef {
                namespace: "apps".to_owned(),
                name: "web".to_owned(),
            },
            revision: None,
            objects: Vec::new(),
            policies: Default::default(),
            diagnostics: Vec::new(),
        };
        // Topology 0 places on a and b, topology 1 on canary and c.
        let targets: Vec<Target<'_>> = clusters
            .iter()
            .enumerate()
            .map(|(index, cluster)| Target {
                group: index / 2,
                cluster,
                desired: desired.clone(),
            })
            .collect();
        let names = |batches: Vec<Vec<&Target<'_>>>| -> Vec<Vec<String>> {
            batches
                .into_iter()
                .map(|batch| {
                    batch
                        .into_iter()
                        .map(|target| target.cluster.name().to_owned())
                        .collect()
                })
                .collect()
        };
        assert_eq!(
            names(placement_batches(&targets, None)),
            vec![vec!["a", "b"], vec!["canary", "c"]]
        );
        let rollout = PlacementRollout::from_step_properties(&serde_json::json!({
            "rollout": {"batches": [{"clusters": ["canary"]}, {"percent": 50}]},
        }))
        .unwrap();
        assert_eq!(
            names(placement_batches(&targets, rollout.as_ref())),
            vec![vec!["canary"], vec!["a", "b"], vec!["c"]]
        );
    }
}
