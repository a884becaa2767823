//! A workload's batches under a rollout plan: how many replicas (or which partition) it gets
//! now, and whether its current batch passes its gate. A Deployment's new pod template runs as
//! its own Deployment `<name>-<revision>` beside the previous one until it is promoted; a
//! StatefulSet rolls by `rollingUpdate.partition`.

use super::*;

/// What a workload under a rollout plan gets now.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum BatchStep {
    /// Apply with `replicas`; `waiting` says why the step is not done yet (none: every batch
    /// is done and healthy).
    Apply {
        replicas: u32,
        waiting: Option<String>,
    },
    /// The batch's health gate failed: the rollout stops here.
    Failed(String),
}

/// The batch a Deployment is at, read from the live object so a restarted agent continues
/// where the cluster is: the batch whose cumulative target equals the live `spec.replicas`.
/// A batch whose updated replicas are all ready opens the next one unless `batchPartition`
/// or `paused` holds it; a degraded one fails the gate.
pub(super) fn rollout_batch(plan: &RolloutPlan, live: Option<&Value>) -> BatchStep {
    let targets = plan.cumulative_targets();
    let Some(&first) = targets.first() else {
        return BatchStep::Failed("the rollout plan has no batches".to_owned());
    };
    let Some(live) = live else {
        return BatchStep::Apply {
            replicas: first,
            waiting: Some(format!("batch 0: {first} replicas being created")),
        };
    };
    let number = |pointer: &str| live.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    let replicas = number("/spec/replicas");
    let Some(batch) = targets
        .iter()
        .position(|target| u64::from(*target) == replicas)
    else {
        return BatchStep::Apply {
            replicas: first,
            waiting: Some(format!("batch 0: starting at {first} replicas")),
        };
    };
    let target = targets[batch];
    if let Some(health) = health::health_of(live)
        && health.status == HealthStatus::Degraded
    {
        return BatchStep::Failed(format!("batch {batch}: {}", health.message));
    }
    let observed = number("/status/observedGeneration") >= number("/metadata/generation");
    let updated = number("/status/updatedReplicas");
    let ready = number("/status/readyReplicas");
    let done = observed && updated == u64::from(target) && ready >= u64::from(target);
    if !done {
        return BatchStep::Apply {
            replicas: target,
            waiting: Some(format!(
                "batch {batch}: {ready}/{target} ready, {updated} updated"
            )),
        };
    }
    if batch + 1 >= targets.len() {
        return BatchStep::Apply {
            replicas: target,
            waiting: None,
        };
    }
    if plan
        .batch_partition
        .is_some_and(|partition| batch >= partition)
    {
        return BatchStep::Apply {
            replicas: target,
            waiting: Some(format!("{HELD} {batch} by batchPartition")),
        };
    }
    if plan.paused {
        return BatchStep::Apply {
            replicas: target,
            waiting: Some(format!("{HELD} {batch}: the rollout is paused")),
        };
    }
    let next = targets[batch + 1];
    BatchStep::Apply {
        replicas: next,
        waiting: Some(format!("batch {}: scaling to {next} replicas", batch + 1)),
    }
}

/// Where a StatefulSet under a rollout plan stands, with its progress kept in the workflow
/// state (`state`, one per workload and cluster; a new revision starts at batch 0). Batch `b`
/// applies `spec.updateStrategy.rollingUpdate.partition = targetSize - target(b)`: the
/// StatefulSet controller moves the pods at or above that ordinal to the new revision and
/// keeps the others on the previous one, so both revisions run side by side until the last
/// batch. A batch's gate passes once the controller has seen that partition and reports
/// `target(b)` updated pods with every pod ready; `batchPartition` and `paused` hold a
/// healthy batch. `BatchStep::Apply.replicas` carries the partition to apply.
pub(super) fn statefulset_batch(
    plan: &RolloutPlan,
    state: &mut RolloutState,
    live: Option<&Value>,
    now: Timestamp,
) -> BatchStep {
    let targets = plan.cumulative_targets();
    let limits = BatchLimits {
        n_batches: targets.len(),
        partition: plan.batch_partition,
        paused: plan.paused,
        pause_between_batches: false,
        gate_timeout_secs: plan.gate_timeout_secs,
        rollback_on_failure: plan.rollback_on_failure,
    };
    let partition_of = |batch: usize| {
        plan.statefulset_partition(targets.get(batch).copied().unwrap_or(plan.target_size))
    };
    let gate = match live {
        None => BatchGate::Progressing {
            message: "being created".to_owned(),
        },
        Some(live) => statefulset_gate(live, partition_of(state.batch), targets.get(state.batch)),
    };
    match advance_rollout(state, &limits, gate, now) {
        GateDecision::Apply { batch } => BatchStep::Apply {
            replicas: partition_of(batch),
            waiting: Some(format!(
                "batch {batch}: updating pods from ordinal {}",
                partition_of(batch)
            )),
        },
        GateDecision::Wait { batch, message } => BatchStep::Apply {
            replicas: partition_of(batch),
            waiting: Some(format!("batch {batch}: {message}")),
        },
        GateDecision::Hold { batch, reason } => BatchStep::Apply {
            replicas: partition_of(batch),
            waiting: Some(format!("{HELD} {batch}: {reason}")),
        },
        GateDecision::Done => BatchStep::Apply {
            replicas: 0,
            waiting: None,
        },
        GateDecision::Stop { batch, reason, .. } => {
            BatchStep::Failed(format!("batch {batch}: {reason}"))
        }
    }
}

/// The gate of a StatefulSet batch from its live object (see [`statefulset_batch`]).
fn statefulset_gate(live: &Value, partition: u32, target: Option<&u32>) -> BatchGate {
    let number = |pointer: &str| live.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    let applied = number("/spec/updateStrategy/rollingUpdate/partition") == u64::from(partition);
    let observed = number("/status/observedGeneration") >= number("/metadata/generation");
    if !applied || !observed {
        return BatchGate::Progressing {
            message: format!("partition {partition} not rolled out yet"),
        };
    }
    let target = target.copied().map_or(0, u64::from);
    let replicas = number("/spec/replicas");
    let updated = number("/status/updatedReplicas");
    let ready = number("/status/readyReplicas");
    if updated >= target && ready >= replicas {
        BatchGate::Healthy
    } else {
        BatchGate::Progressing {
            message: format!("{updated}/{target} updated, {ready}/{replicas} ready"),
        }
    }
}

/// Where a Deployment's pod template is recorded (`driftless.dev/revision`): a rollout plan
/// rolls a changed template out as a new revision.
const REVISION_ANNOTATION: &str = "driftless.dev/revision";
pub(super) const REVISION_POINTER: &str = "/metadata/annotations/driftless.dev~1revision";
/// The label telling a new revision's pods from the previous Deployment's.
const REVISION_LABEL: &str = "driftless.dev/revision";

/// What a Deployment whose template changed gets now (see [`revision_batch`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RevisionStep {
    /// The new revision's Deployment at `new` replicas, the previous one at `old`.
    Batch { new: u32, old: u32, waiting: String },
    /// Every batch passed: the Deployment takes the new template.
    Promote,
    /// The gate failed; `rollback`: restore the previous revision.
    Failed { message: String, rollback: bool },
}

/// The batch of a Deployment rolling out a new template, with its progress in the workflow
/// state (one per workload and cluster). Batch `b` runs the new revision as its own Deployment
/// (`<name>-<revision>`) with `target(b)` replicas and keeps the previous Deployment, on its
/// previous template, at `targetSize - target(b)`, so both serve side by side. The gate passes
/// when the new one has that many updated, ready replicas and the previous one is down to its
/// share; `batchPartition` and `paused` hold a healthy batch, `gateTimeout` fails it.
pub(super) fn revision_batch(
    plan: &RolloutPlan,
    state: &mut RolloutState,
    new_live: Option<&Value>,
    old_live: &Value,
    now: Timestamp,
) -> RevisionStep {
    let targets = plan.cumulative_targets();
    let limits = BatchLimits {
        n_batches: targets.len(),
        partition: plan.batch_partition,
        paused: plan.paused,
        pause_between_batches: false,
        gate_timeout_secs: plan.gate_timeout_secs,
        rollback_on_failure: plan.rollback_on_failure,
    };
    let target_of = |batch: usize| targets.get(batch).copied().unwrap_or(plan.target_size);
    let target = target_of(state.batch);
    let gate = revision_gate(
        new_live,
        old_live,
        target,
        plan.target_size.saturating_sub(target),
    );
    let batch_step = |batch: usize, waiting: String| RevisionStep::Batch {
        new: target_of(batch),
        old: plan.target_size.saturating_sub(target_of(batch)),
        waiting,
    };
    match advance_rollout(state, &limits, gate, now) {
        GateDecision::Apply { batch } => batch_step(
            batch,
            format!(
                "batch {batch}: scaling the new revision to {}",
                target_of(batch)
            ),
        ),
        GateDecision::Wait { batch, message } => {
            batch_step(batch, format!("batch {batch}: {message}"))
        }
        GateDecision::Hold { batch, reason } => {
            batch_step(batch, format!("{HELD} {batch}: {reason}"))
        }
        GateDecision::Done => RevisionStep::Promote,
        GateDecision::Stop {
            batch,
            reason,
            rollback,
        } => RevisionStep::Failed {
            message: format!("batch {batch}: {reason}"),
            rollback,
        },
    }
}

/// The gate of a revision batch (see [`revision_batch`]).
fn revision_gate(
    new_live: Option<&Value>,
    old_live: &Value,
    new_target: u32,
    old_target: u32,
) -> BatchGate {
    let Some(new_live) = new_live else {
        return BatchGate::Progressing {
            message: "the new revision is being created".to_owned(),
        };
    };
    let number =
        |live: &Value, pointer: &str| live.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    let observed = |live: &Value| {
        number(live, "/status/observedGeneration") >= number(live, "/metadata/generation")
    };
    let new_ready = number(new_live, "/status/readyReplicas");
    let new_done = observed(new_live)
        && number(new_live, "/spec/replicas") == u64::from(new_target)
        && number(new_live, "/status/updatedReplicas") == u64::from(new_target)
        && new_ready >= u64::from(new_target);
    let old_pods = number(old_live, "/status/replicas");
    let old_done = observed(old_live)
        && number(old_live, "/spec/replicas") == u64::from(old_target)
        && old_pods <= u64::from(old_target);
    if new_done && old_done {
        BatchGate::Healthy
    } else {
        BatchGate::Progressing {
            message: format!(
                "new revision {new_ready}/{new_target} ready, previous revision {old_pods} pods (to {old_target})"
            ),
        }
    }
}

/// A short hash of a workload's pod template: its revision.
pub(super) fn template_revision(object: &Value) -> String {
    let template = object.pointer("/spec/template").unwrap_or(&Value::Null);
    let hash = planner::hash_object(template);
    hash.get(..10).unwrap_or(&hash).to_owned()
}

/// `<name>-<revision>`: the new revision's Deployment.
pub(super) fn revision_name(name: &str, revision: &str) -> String {
    format!("{name}-{revision}")
}

/// Records `revision` on the object's annotations.
pub(super) fn stamp_revision(object: &mut Value, revision: &str) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(
                REVISION_ANNOTATION.to_owned(),
                Value::String(revision.to_owned()),
            );
        }
    }
}

pub(super) fn set_replicas(object: &mut Value, replicas: u32) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("replicas".to_owned(), Value::from(replicas));
    }
}

/// Turns a copy of the desired Deployment into the new revision's own Deployment: renamed,
/// its selector and pods labelled with the revision so they are told from the previous
/// Deployment's, at `replicas`.
pub(super) fn as_revision(
    object: &mut planner::DesiredObject,
    name: &str,
    revision: &str,
    replicas: u32,
) {
    object.object_ref.name = name.to_owned();
    if let Some(metadata) = object
        .object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    {
        metadata.insert("name".to_owned(), Value::String(name.to_owned()));
    }
    for pointer in [
        "/spec/selector/matchLabels",
        "/spec/template/metadata/labels",
    ] {
        if let Some(labels) = object
            .object
            .pointer_mut(pointer)
            .and_then(Value::as_object_mut)
        {
            labels.insert(
                REVISION_LABEL.to_owned(),
                Value::String(revision.to_owned()),
            );
        }
    }
    set_replicas(&mut object.object, replicas);
    object.hash = planner::hash_object(&object.object);
}

/// Keeps the previous Deployment on its live pod template and revision, at `replicas`.
pub(super) fn keep_previous(object: &mut Value, live: &Value, revision: &str, replicas: u32) {
    if let (Some(spec), Some(template)) = (
        object.get_mut("spec").and_then(Value::as_object_mut),
        live.pointer("/spec/template"),
    ) {
        spec.insert("template".to_owned(), template.clone());
    }
    set_replicas(object, replicas);
    stamp_revision(object, revision);
}

/// The previous revision of a StatefulSet: the name and pod template of the ControllerRevision
/// its `status.currentRevision` names (the revision the pods below the partition still run).
/// `None` when there is none to go back to (a first rollout) or it cannot be read.
pub(super) async fn previous_template(cluster: &Cluster, live: &Value) -> Option<(String, Value)> {
    let current = live.pointer("/status/currentRevision")?.as_str()?;
    let update = live
        .pointer("/status/updateRevision")
        .and_then(Value::as_str);
    if update == Some(current) {
        return None;
    }
    let namespace = live.pointer("/metadata/namespace")?.as_str()?;
    let object_ref = ObjectRef {
        api_version: "apps/v1".to_owned(),
        kind: "ControllerRevision".to_owned(),
        namespace: Some(namespace.to_owned()),
        name: current.to_owned(),
    };
    let revision = read_live(cluster, &object_ref).await.ok()??;
    // The revision's data is the strategic-merge patch of the template, marked to replace.
    let mut template = revision.pointer("/data/spec/template")?.clone();
    if let Some(fields) = template.as_object_mut() {
        fields.remove("$patch");
    }
    Some((current.to_owned(), template))
}

/// Sets a StatefulSet's rolling-update partition.
pub(super) fn set_partition(object: &mut Value, partition: u32) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert(
            "updateStrategy".to_owned(),
            serde_json::json!({
                "type": "RollingUpdate",
                "rollingUpdate": {"partition": partition},
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(partition: Option<usize>, paused: bool) -> RolloutPlan {
        let mut plan = RolloutPlan::from_properties(&serde_json::json!({
            "targetSize": 10,
            "rolloutBatches": [{"replicas": 2}, {"replicas": 3}, {"replicas": 5}],
        }))
        .unwrap();
        plan.batch_partition = partition;
        plan.paused = paused;
        plan
    }

    fn deployment(replicas: u64, updated: u64, ready: u64) -> Value {
        serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "generation": 3},
            "spec": {"replicas": replicas},
            "status": {
                "observedGeneration": 3,
                "replicas": replicas,
                "updatedReplicas": updated,
                "readyReplicas": ready,
                "availableReplicas": ready,
            },
        })
    }

    fn replicas(step: &BatchStep) -> Option<u32> {
        match step {
            BatchStep::Apply { replicas, .. } => Some(*replicas),
            BatchStep::Failed(_) => None,
        }
    }

    #[test]
    fn a_new_workload_starts_at_the_first_batch() {
        let step = rollout_batch(&plan(None, false), None);
        assert_eq!(replicas(&step), Some(2));
    }

    #[test]
    fn a_batch_waits_until_its_replicas_are_updated_and_ready() {
        let step = rollout_batch(&plan(None, false), Some(&deployment(5, 5, 4)));
        assert_eq!(
            step,
            BatchStep::Apply {
                replicas: 5,
                waiting: Some("batch 1: 4/5 ready, 5 updated".to_owned()),
            }
        );
    }

    #[test]
    fn a_healthy_batch_opens_the_next_and_the_last_one_finishes() {
        assert_eq!(
            replicas(&rollout_batch(
                &plan(None, false),
                Some(&deployment(2, 2, 2))
            )),
            Some(5)
        );
        assert_eq!(
            replicas(&rollout_batch(
                &plan(None, false),
                Some(&deployment(5, 5, 5))
            )),
            Some(10)
        );
        assert_eq!(
            rollout_batch(&plan(None, false), Some(&deployment(10, 10, 10))),
            BatchStep::Apply {
                replicas: 10,
                waiting: None,
            }
        );
    }

    #[test]
    fn partition_and_pause_hold_a_healthy_batch() {
        let held = rollout_batch(&plan(Some(1), false), Some(&deployment(5, 5, 5)));
        assert_eq!(replicas(&held), Some(5));
        assert!(
            matches!(held, BatchStep::Apply { waiting: Some(ref why), .. } if why.contains("batchPartition"))
        );
        let paused = rollout_batch(&plan(None, true), Some(&deployment(2, 2, 2)));
        assert_eq!(replicas(&paused), Some(2));
        assert!(
            matches!(paused, BatchStep::Apply { waiting: Some(ref why), .. } if why.contains("paused"))
        );
    }

    #[test]
    fn a_degraded_batch_fails_the_gate_with_its_batch() {
        let mut live = deployment(5, 5, 1);
        live["status"]["conditions"] = serde_json::json!([{
            "type": "Progressing",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": "ReplicaSet web-1 has timed out progressing.",
        }]);
        match rollout_batch(&plan(None, false), Some(&live)) {
            BatchStep::Failed(message) => assert!(message.starts_with("batch 1:"), "{message}"),
            other => panic!("not failed: {other:?}"),
        }
    }

    fn statefulset(partition: Option<u64>, generation: u64, updated: u64, ready: u64) -> Value {
        let mut live = serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "generation": generation},
            "spec": {"replicas": 10},
            "status": {
                "observedGeneration": 4,
                "replicas": 10,
                "updatedReplicas": updated,
                "readyReplicas": ready,
            },
        });
        if let Some(partition) = partition {
            live["spec"]["updateStrategy"] = serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"partition": partition}});
        }
        live
    }

    fn partition_and_waiting(step: BatchStep) -> (u32, Option<String>) {
        match step {
            BatchStep::Apply { replicas, waiting } => (replicas, waiting),
            BatchStep::Failed(message) => panic!("failed: {message}"),
        }
    }

    #[test]
    fn a_statefulset_rolls_by_partition_batch_after_batch_each_gated() {
        let plan = plan(None, false);
        let mut state = RolloutState::new(Timestamp(0));
        // The previous revision fully rolled out (no partition): batch 0 starts at ordinal 8.
        let (partition, waiting) = partition_and_waiting(statefulset_batch(
            &plan,
            &mut state,
            Some(&statefulset(None, 4, 10, 10)),
            Timestamp(1),
        ));
        assert_eq!(partition, 8);
        assert!(waiting.is_some_and(|why| why.starts_with("batch 0:")));
        // Applied and observed, but only 1 of 2 pods updated: still batch 0.
        let (partition, waiting) = partition_and_waiting(statefulset_batch(
            &plan,
            &mut state,
            Some(&statefulset(Some(8), 4, 1, 10)),
            Timestamp(2),
        ));
        assert_eq!(partition, 8);
        assert_eq!(
            waiting.as_deref(),
            Some("batch 0: 1/2 updated, 10/10 ready")
        );
        // Not observed by the controller yet: waits.
        let (partition, _) = partition_and_waiting(statefulset_batch(
            &plan,
            &mut state,
            Some(&statefulset(Some(8), 5, 2, 10)),
            Timestamp(3),
        ));
        assert_eq!((partition, state.batch), (8, 0));
        // Two updated and every pod ready: batch 1 lowers the partition to 5.
        let (partition, _) = partition_and_waiting(statefulset_batch(
            &plan,
            &mut state,
            Some(&statefulset(Some(8), 4, 2, 10)),
            Timestamp(4),
        ));
        assert_eq!((partition, state.batch), (5, 1));
        let (partition, _) = partition_and_waiting(statefulset_batch(
            &plan,
            &mut state,
            Some(&statefulset(Some(5), 4, 5, 10)),
            Timestamp(5),
        ));
        assert_eq!((partition, state.batch), (0, 2));
        assert_eq!(
            statefulset_batch(
                &plan,
                &mut state,
                Some(&statefulset(Some(0), 4, 10, 10)),
                Timestamp(6)
            ),
            BatchStep::Apply {
                replicas: 0,
                waiting: None
            }
        );
    }

    #[test]
    fn a_statefulset_batch_partition_holds_with_both_revisions() {
        let plan = plan(Some(0), false);
        let mut state = RolloutState::new(Timestamp(0));
        let _ = statefulset_batch(&plan, &mut state, None, Timestamp(1));
        let (partition, waiting) = partition_and_waiting(statefulset_batch(
            &plan,
            &mut state,
            Some(&statefulset(Some(8), 4, 2, 10)),
            Timestamp(2),
        ));
        assert_eq!(partition, 8);
        assert!(waiting.is_some_and(|why| why.starts_with(HELD)));
    }

    #[test]
    fn a_new_revision_runs_beside_the_previous_one_batch_by_batch_then_is_promoted() {
        let plan = plan(None, false);
        let mut state = RolloutState::new(Timestamp(0));
        // (the new revision's Deployment as observed (replicas = updated = ready), the previous
        // one's, the step expected as `(new, old)` replicas, `None` for promote).
        let sequence = [
            // The previous Deployment at full size, no new revision yet: batch 0 creates it.
            (None, 10, Some((2, 8))),
            // The new revision ready but the previous one not scaled down yet: still batch 0.
            (Some(2), 10, Some((2, 8))),
            (Some(2), 8, Some((5, 5))),
            (Some(5), 5, Some((10, 0))),
            (Some(10), 0, None),
        ];
        for (time, (new, old, expected)) in (1..).zip(sequence) {
            let new = new.map(|replicas| deployment(replicas, replicas, replicas));
            let step = revision_batch(
                &plan,
                &mut state,
                new.as_ref(),
                &deployment(old, old, old),
                Timestamp(time),
            );
            match (expected, &step) {
                (
                    Some((new, old)),
                    RevisionStep::Batch {
                        new: n,
                        old: o,
                        waiting,
                    },
                ) => {
                    assert_eq!((*n, *o), (new, old), "at {time}: {step:?}");
                    if time == 1 {
                        assert!(waiting.starts_with("batch 0:"), "{waiting}");
                    }
                }
                (None, RevisionStep::Promote) => {}
                _ => panic!("at {time}: expected {expected:?}, got {step:?}"),
            }
        }
    }

    #[test]
    fn a_revision_gate_that_times_out_fails_with_rollback_when_asked() {
        let mut plan = plan(None, false);
        plan.gate_timeout_secs = Some(3);
        plan.rollback_on_failure = true;
        let mut state = RolloutState::new(Timestamp(0));
        let _ = revision_batch(
            &plan,
            &mut state,
            None,
            &deployment(10, 10, 10),
            Timestamp(1),
        );
        let step = revision_batch(
            &plan,
            &mut state,
            Some(&deployment(2, 2, 0)),
            &deployment(8, 8, 8),
            Timestamp(5),
        );
        match step {
            RevisionStep::Failed { message, rollback } => {
                assert!(rollback);
                assert!(
                    message.starts_with("batch 0: batch 0 not healthy after 3s"),
                    "{message}"
                );
            }
            other => panic!("not failed: {other:?}"),
        }
    }

    #[test]
    fn a_new_revision_is_its_own_deployment_with_its_own_pods() {
        let rendered = serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "main", "image": "v2"}]}},
            },
        });
        let revision = template_revision(&rendered);
        assert_eq!(revision.len(), 10);
        let mut other = rendered.clone();
        other["spec"]["replicas"] = serde_json::json!(1);
        assert_eq!(
            template_revision(&other),
            revision,
            "replicas are not the template"
        );
        other["spec"]["template"]["spec"]["containers"][0]["image"] = serde_json::json!("v3");
        assert_ne!(template_revision(&other), revision);

        let mut object = planner::DesiredObject {
            object_ref: ObjectRef::from_object(&rendered).unwrap(),
            component: "web".to_owned(),
            component_type: None,
            trait_type: None,
            output_name: None,
            object: rendered.clone(),
            hash: String::new(),
        };
        as_revision(&mut object, &revision_name("web", &revision), &revision, 1);
        assert_eq!(object.object_ref.name, format!("web-{revision}"));
        assert_eq!(
            object.object["metadata"]["name"],
            object.object_ref.name.as_str()
        );
        assert_eq!(object.object["spec"]["replicas"], 1);
        for pointer in [
            "/spec/selector/matchLabels",
            "/spec/template/metadata/labels",
        ] {
            assert_eq!(
                object.object.pointer(pointer).unwrap()["driftless.dev/revision"],
                revision.as_str()
            );
        }

        let live =
            serde_json::json!({"spec": {"template": {"spec": {"containers": [{"image": "v1"}]}}}});
        let mut previous = rendered;
        keep_previous(&mut previous, &live, "old", 3);
        assert_eq!(
            previous["spec"]["template"]["spec"]["containers"][0]["image"],
            "v1"
        );
        assert_eq!(previous["spec"]["replicas"], 3);
        assert_eq!(previous.pointer(REVISION_POINTER).unwrap(), "old");
    }
}
