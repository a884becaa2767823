//! A workflow step that applies objects (`apply-component`, `deploy`, garbage collection's
//! re-applies): the rollouts' batches of its workloads first, then observe, plan and apply
//! through the tracker, then the objects' health.

use super::workload_rollout::{
    BatchStep, REVISION_POINTER, RevisionStep, as_revision, keep_previous, previous_template,
    revision_batch, revision_name, rollout_batch, set_partition, set_replicas, stamp_revision,
    statefulset_batch, template_revision,
};
use super::*;
use crate::planner::DesiredObject;

/// Applies the objects of `components` (every object when `None`) through the apply path,
/// then reports their health: healthy succeeds, anything else waits.
pub(super) async fn apply_step(
    run: &Run<'_>,
    components: Option<&BTreeSet<String>>,
    prune: Prune,
    label: &str,
    workloads: &mut BTreeMap<String, RolloutState>,
    applies: &mut Vec<(String, AppApplyReport)>,
) -> StepOutcome {
    let Run {
        cluster,
        desired,
        rollouts,
        options,
    } = *run;
    let mut subset = desired.clone();
    if let Some(components) = components {
        subset
            .objects
            .retain(|object| components.contains(&object.component));
    }
    // Workloads under a rollout plan get this batch's replicas instead of the full count.
    let mut batches = Batches::default();
    for object in &mut subset.objects {
        let Some(plan) = rollouts.get(&object.component) else {
            continue;
        };
        if object.trait_type.is_some() {
            continue;
        }
        let batched = match object.object_ref.kind.as_str() {
            "StatefulSet" => statefulset_step(cluster, plan, object, workloads, &mut batches).await,
            "Deployment" => deployment_step(cluster, plan, object, workloads, &mut batches).await,
            _ => Ok(()),
        };
        if let Err(outcome) = batched {
            return outcome;
        }
    }
    subset.objects.append(&mut batches.extras);
    let store = TrackerStore::new(cluster, &options.tracker_namespace);
    let observation =
        match plan_and_apply(cluster, options, &store, subset, prune, label, applies).await {
            Ok(observation) => observation,
            Err(outcome) => return outcome,
        };
    let Batches {
        holding,
        mut rolled_back,
        removals,
        ..
    } = batches;
    for object_ref in &removals {
        // Under the prune proofs: the revision's Deployment was applied through the tracker.
        let pruned = crate::writer::prune_tracked(
            cluster,
            &store,
            &desired.app,
            object_ref,
            crate::policy::Propagation::Cascading,
        )
        .await;
        if let Err(message) = pruned {
            rolled_back.push(format!("removing {object_ref} failed: {message}"));
        }
    }
    if !rolled_back.is_empty() {
        return StepOutcome::Failed {
            reason: "RolloutGateFailed".to_owned(),
            message: rolled_back.join("; "),
        };
    }
    if !holding.is_empty() {
        return StepOutcome::Waiting {
            message: holding.join("; "),
        };
    }
    match objects_health(cluster, &observation.desired).await {
        Some(health) if health.status != HealthStatus::Healthy => StepOutcome::Waiting {
            message: format!("waiting for health: {}", health.message),
        },
        _ => StepOutcome::Succeeded {
            result: serde_json::json!({}),
        },
    }
}

/// What the rollouts of a step's workloads make of its objects besides their batch sizes.
#[derive(Default)]
struct Batches {
    /// Why the step is not done yet (a batch waiting for its gate, a promotion).
    holding: Vec<String>,
    /// Rollouts whose gate failed and that were rolled back, with why: the step fails.
    rolled_back: Vec<String>,
    /// New revisions' Deployments to apply next to their previous one.
    extras: Vec<DesiredObject>,
    /// New revisions' Deployments to remove (rolled back).
    removals: Vec<ObjectRef>,
}

/// The key of a workload's rollout state.
fn rollout_key(object: &DesiredObject, cluster: &Cluster) -> String {
    format!(
        "{}/{}@{}",
        object.component,
        object.object_ref.name,
        cluster.name()
    )
}

/// A StatefulSet under a rollout plan: the partition of its batch now, or, when its gate
/// failed just now, the previous revision's template once (when the plan asks for it).
async fn statefulset_step(
    cluster: &Cluster,
    plan: &RolloutPlan,
    object: &mut DesiredObject,
    workloads: &mut BTreeMap<String, RolloutState>,
    batches: &mut Batches,
) -> Result<(), StepOutcome> {
    let key = rollout_key(object, cluster);
    let previous = workloads.get(&key).cloned();
    let state = workloads
        .entry(key)
        .or_insert_with(|| RolloutState::new(now()));
    let live = match read_live(cluster, &object.object_ref).await {
        Ok(live) => live,
        Err(message) => return Err(retry_later(format!("{}: {message}", object.object_ref))),
    };
    match statefulset_batch(plan, state, live.as_ref(), now()) {
        BatchStep::Apply { replicas, waiting } => {
            set_partition(&mut object.object, replicas);
            object.hash = planner::hash_object(&object.object);
            batches.holding.extend(waiting);
        }
        BatchStep::Failed(message) => {
            let message = format!("{}: {message}", object.object_ref);
            // The gate failed just now (the stored state said rolling): restore the
            // previous revision once, if the plan asks for it. Later passes see a
            // failed workflow and apply nothing.
            let rollback = plan.rollback_on_failure
                && previous.as_ref().is_some_and(|previous| {
                    !matches!(previous.phase, crate::rollout::RolloutPhase::Failed { .. })
                });
            let template = match (rollback, live.as_ref()) {
                (true, Some(live)) => previous_template(cluster, live).await,
                _ => None,
            };
            let Some((revision, template)) = template else {
                return Err(StepOutcome::Failed {
                    reason: "RolloutGateFailed".to_owned(),
                    message,
                });
            };
            if let Some(spec) = object.object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("template".to_owned(), template);
            }
            set_partition(&mut object.object, 0);
            object.hash = planner::hash_object(&object.object);
            (batches.rolled_back).push(format!("{message}; rolled back to revision {revision}"));
        }
    }
    Ok(())
}

/// A Deployment under a rollout plan: a new pod template runs as its own Deployment next to
/// the previous one, batch by batch (see the module doc of `rollout`); otherwise the replicas
/// of its batch now.
async fn deployment_step(
    cluster: &Cluster,
    plan: &RolloutPlan,
    object: &mut DesiredObject,
    workloads: &mut BTreeMap<String, RolloutState>,
    batches: &mut Batches,
) -> Result<(), StepOutcome> {
    let live = match read_live(cluster, &object.object_ref).await {
        Ok(live) => live,
        Err(message) => return Err(retry_later(format!("{}: {message}", object.object_ref))),
    };
    let revision = template_revision(&object.object);
    stamp_revision(&mut object.object, &revision);
    let live_revision = live
        .as_ref()
        .and_then(|live| live.pointer(REVISION_POINTER))
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let (Some(live), Some(previous_revision)) = (live.as_ref(), live_revision)
        && previous_revision != revision
    {
        let revisions = Revisions {
            live,
            previous: &previous_revision,
            new: &revision,
        };
        return revision_step(cluster, plan, object, revisions, workloads, batches).await;
    }
    match rollout_batch(plan, live.as_ref()) {
        BatchStep::Apply { replicas, waiting } => {
            if let Some(spec) = object.object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("replicas".to_owned(), Value::from(replicas));
            }
            object.hash = planner::hash_object(&object.object);
            batches.holding.extend(waiting);
            Ok(())
        }
        BatchStep::Failed(message) => Err(StepOutcome::Failed {
            reason: "RolloutGateFailed".to_owned(),
            message: format!("{}: {message}", object.object_ref),
        }),
    }
}

/// A Deployment whose pod template changed: its live object and both revisions.
struct Revisions<'a> {
    live: &'a Value,
    previous: &'a str,
    new: &'a str,
}

/// A new pod template's batch: the new revision's Deployment and the previous one's share
/// of the replicas, the promotion of the new template, or, when the gate failed, the
/// previous revision restored and the new revision's Deployment removed.
async fn revision_step(
    cluster: &Cluster,
    plan: &RolloutPlan,
    object: &mut DesiredObject,
    revisions: Revisions<'_>,
    workloads: &mut BTreeMap<String, RolloutState>,
    batches: &mut Batches,
) -> Result<(), StepOutcome> {
    let Revisions {
        live,
        previous: previous_revision,
        new: revision,
    } = revisions;
    let key = rollout_key(object, cluster);
    let previous_state = workloads.get(&key).cloned();
    let state = workloads
        .entry(key)
        .or_insert_with(|| RolloutState::new(now()));
    let new_ref = ObjectRef {
        name: revision_name(&object.object_ref.name, revision),
        ..object.object_ref.clone()
    };
    let new_live = match read_live(cluster, &new_ref).await {
        Ok(new_live) => new_live,
        Err(message) => return Err(retry_later(format!("{new_ref}: {message}"))),
    };
    match revision_batch(plan, state, new_live.as_ref(), live, now()) {
        RevisionStep::Batch { new, old, waiting } => {
            let mut next = object.clone();
            as_revision(&mut next, &new_ref.name, revision, new);
            keep_previous(&mut object.object, live, previous_revision, old);
            object.hash = planner::hash_object(&object.object);
            batches.extras.push(next);
            batches.holding.push(waiting);
        }
        RevisionStep::Promote => {
            // The previous Deployment takes the new template at full size; the new
            // revision's Deployment serves until then, and the garbage collection
            // after the workflow removes it.
            set_replicas(&mut object.object, plan.target_size);
            object.hash = planner::hash_object(&object.object);
            batches.holding.push(format!(
                "promoting revision {revision} to {}",
                object.object_ref.name
            ));
        }
        RevisionStep::Failed { message, rollback } => {
            let message = format!("{}: {message}", object.object_ref);
            let first = previous_state.is_some_and(|previous| {
                !matches!(previous.phase, crate::rollout::RolloutPhase::Failed { .. })
            });
            if !(rollback && first) {
                return Err(StepOutcome::Failed {
                    reason: "RolloutGateFailed".to_owned(),
                    message,
                });
            }
            keep_previous(
                &mut object.object,
                live,
                previous_revision,
                plan.target_size,
            );
            object.hash = planner::hash_object(&object.object);
            batches.rolled_back.push(format!(
                "{message}; rolled back to revision {previous_revision}, Deployment {} removed",
                new_ref.name
            ));
            batches.removals.push(new_ref);
        }
    }
    Ok(())
}

/// Observes, plans and applies `subset` (pruning as `prune` says, unless the pass may not
/// prune), recording the apply under `label`; a failure is the step's outcome (a passing one
/// waits and retries).
async fn plan_and_apply(
    cluster: &Cluster,
    options: &DriverOptions,
    store: &TrackerStore<'_>,
    subset: DesiredApp,
    prune: Prune,
    label: &str,
    applies: &mut Vec<(String, AppApplyReport)>,
) -> Result<observe::AppObservation, StepOutcome> {
    let observation = observe::observe_app(cluster, store, subset, FIELD_MANAGER).await;
    // A pass whose options disable pruning (its evidence is incomplete) never prunes, whatever
    // the step asks.
    let plan_options = PlanOptions {
        prune: if options.plan.prune == Prune::Disabled {
            Prune::Disabled
        } else {
            prune
        },
        ..options.plan.clone()
    };
    let mut plan = planner::plan_app(
        &observation.desired,
        &observation.live,
        observation.tracker.as_ref(),
        &plan_options,
    );
    crate::namespaces::plan_creations(
        cluster,
        std::slice::from_mut(&mut plan),
        plan_options.create_namespaces,
    )
    .await;
    // Objects that could not be read for a passing reason block the plan: wait for them.
    if let Some(unread) = plan.diagnostics.iter().find(|diagnostic| {
        diagnostic.rule == "cluster-error" && crate::cluster::is_transient(&diagnostic.message)
    }) {
        return Err(retry_later(unread.message.clone()));
    }
    let applied = apply::apply_app(cluster, store, &observation, &plan, &options.apply).await;
    let outcome = applied.outcome.clone();
    applies.push((label.to_owned(), applied));
    match outcome {
        ApplyOutcome::Applied => {}
        ApplyOutcome::Skipped(message) | ApplyOutcome::Failed(message)
            if crate::cluster::is_transient(&message) =>
        {
            return Err(retry_later(message));
        }
        ApplyOutcome::Skipped(message) => {
            return Err(StepOutcome::Failed {
                reason: "ApplyBlocked".to_owned(),
                message,
            });
        }
        ApplyOutcome::Failed(message) => {
            return Err(StepOutcome::Failed {
                reason: "ApplyFailed".to_owned(),
                message,
            });
        }
    }
    Ok(observation)
}
