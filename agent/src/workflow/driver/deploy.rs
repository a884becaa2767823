//! A deploy step's placements: applied in batches with a health gate between them (topology
//! groups, or the batches of a `rollout`), up to the step's `parallelism` at once, and a
//! failed batch's Deployments undone to their previous ReplicaSet template.

use super::*;

/// KubeVela's default `parallelism` of a deploy step: placements applied at once.
const DEFAULT_PARALLELISM: usize = 5;

/// A deploy step with placements, in batches with a health gate between them: the next batch
/// is not touched until every cluster of the ones before is healthy. Without a `rollout`
/// property the batches are the step's topologies in order (the first is the canary); with
/// one, its `batches` split the placements (`crate::rollout::split_placements`), the batch
/// reached is kept in the workflow state (`rollouts`, by step), a gate not passed within
/// `gateTimeout` stops the step with the batch and the reason, and `pauseBetweenBatches`
/// holds after each batch until `driftless resume` approves the next. Every poll re-applies
/// the batches already through, which is a no-op when nothing changed. Within a batch, up to
/// the step's `parallelism` placements are applied at once.
pub(super) async fn deploy_to_targets(
    run: &Run<'_>,
    targets: &[Target<'_>],
    dispatch: &Dispatch,
    rollouts: &mut BTreeMap<String, RolloutState>,
    applies: &mut Vec<(String, AppApplyReport)>,
) -> StepOutcome {
    let step = dispatch.step.as_str();
    let parallelism = dispatch
        .properties
        .get("parallelism")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_PARALLELISM, |count| {
            usize::try_from(count).unwrap_or(usize::MAX).max(1)
        });
    // Checked before anything was applied (`invalid-rollout`), so an error cannot occur here.
    let rollout = PlacementRollout::from_step_properties(&dispatch.properties)
        .ok()
        .flatten();
    let batches = placement_batches(targets, rollout.as_ref());
    let Some(rollout) = rollout else {
        for batch in &batches {
            match apply_targets(run, batch, step, parallelism, rollouts, applies).await {
                StepOutcome::Succeeded { .. } => {}
                other => return other,
            }
        }
        return StepOutcome::Succeeded {
            result: serde_json::json!({}),
        };
    };
    let limits = BatchLimits {
        n_batches: batches.len(),
        partition: None,
        paused: false,
        pause_between_batches: rollout.pause_between_batches,
        gate_timeout_secs: rollout.gate_timeout_secs,
        rollback_on_failure: rollout.rollback_on_failure,
    };
    let mut state = rollouts
        .get(step)
        .cloned()
        .unwrap_or_else(|| RolloutState::new(now()));
    loop {
        let current = state.batch.min(batches.len().saturating_sub(1));
        let through = &batches[..(current + 1).min(batches.len())];
        let gate = apply_batches(run, through, step, parallelism, rollouts, applies).await;
        let clusters = |batch: usize| {
            batches
                .get(batch)
                .map(|targets| {
                    targets
                        .iter()
                        .map(|target| target.cluster.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        let was_failed = matches!(state.phase, crate::rollout::RolloutPhase::Failed { .. });
        let decision = advance_rollout(&mut state, &limits, gate, now());
        rollouts.insert(step.to_owned(), state.clone());
        match decision {
            // The next batch starts now: apply it in this same call.
            GateDecision::Apply { .. } => {}
            GateDecision::Wait { batch, message } => {
                return StepOutcome::Waiting {
                    message: format!("batch {batch} (cluster {}): {message}", clusters(batch)),
                };
            }
            GateDecision::Hold { batch, reason } => {
                let app = &run.desired.app;
                return StepOutcome::Waiting {
                    message: format!(
                        "{HELD} {batch} (cluster {}): {reason}, approve with `driftless resume {} -n {}`",
                        clusters(batch),
                        app.name,
                        app.namespace
                    ),
                };
            }
            GateDecision::Done => {
                return StepOutcome::Succeeded {
                    result: serde_json::json!({}),
                };
            }
            GateDecision::Stop {
                batch,
                reason,
                rollback,
            } => {
                let mut message = format!("batch {batch} (cluster {}): {reason}", clusters(batch));
                // Once, when the gate fails (later passes see the failed workflow anyway).
                if rollback && !was_failed {
                    for target in batches.iter().take(batch + 1).flatten() {
                        for restored in undo_deployments(run, target, step, applies).await {
                            message.push_str("; rolled back ");
                            message.push_str(&restored);
                        }
                    }
                }
                return StepOutcome::Failed {
                    reason: "RolloutGateFailed".to_owned(),
                    message,
                };
            }
        }
    }
}

/// Applies the batches a rollout has reached, in order: the gate of the first that is not
/// healthy yet (still progressing, or failed), or healthy when every one is.
async fn apply_batches(
    run: &Run<'_>,
    batches: &[Vec<&Target<'_>>],
    step: &str,
    parallelism: usize,
    rollouts: &mut BTreeMap<String, RolloutState>,
    applies: &mut Vec<(String, AppApplyReport)>,
) -> BatchGate {
    for batch in batches {
        match apply_targets(run, batch, step, parallelism, rollouts, applies).await {
            StepOutcome::Succeeded { .. } => {}
            StepOutcome::Waiting { message } => return BatchGate::Progressing { message },
            StepOutcome::Failed { reason, message } => {
                return BatchGate::Unhealthy {
                    reason: format!("{reason}: {message}"),
                };
            }
        }
    }
    BatchGate::Healthy
}

/// Puts the Deployments of one placement back on their previous revision, as `kubectl
/// rollout undo` does: the template of the Deployment's ReplicaSet with the highest
/// `deployment.kubernetes.io/revision` below its current one. Returns what was restored (or
/// why not), one entry per Deployment that had a previous revision.
async fn undo_deployments(
    run: &Run<'_>,
    target: &Target<'_>,
    step: &str,
    applies: &mut Vec<(String, AppApplyReport)>,
) -> Vec<String> {
    let cluster = target.cluster;
    let mut desired = target.desired.clone();
    desired
        .objects
        .retain(|object| object.object_ref.kind == "Deployment");
    let mut restored = Vec::new();
    let mut kept = Vec::new();
    for mut object in std::mem::take(&mut desired.objects) {
        let Ok(Some(live)) = read_live(cluster, &object.object_ref).await else {
            continue;
        };
        let Some((revision, template)) = previous_replicaset_template(cluster, &live).await else {
            continue;
        };
        if let Some(spec) = object.object.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("template".to_owned(), template);
        }
        object.hash = planner::hash_object(&object.object);
        restored.push(format!(
            "Deployment {} in cluster {} to revision {revision}",
            object.object_ref.name,
            cluster.name()
        ));
        kept.push(object);
    }
    if kept.is_empty() {
        return restored;
    }
    desired.objects = kept;
    // No rollout plans here: the restored template is applied as it is.
    let no_plans = BTreeMap::new();
    let undo = Run {
        cluster,
        desired: &desired,
        rollouts: &no_plans,
        options: run.options,
    };
    let label = format!("{step}@{}:rollback", cluster.name());
    if let StepOutcome::Failed { message, .. } = apply_step(
        &undo,
        None,
        Prune::Disabled,
        &label,
        &mut BTreeMap::new(),
        applies,
    )
    .await
    {
        return vec![format!("failed in cluster {}: {message}", cluster.name())];
    }
    restored
}

/// The previous revision of a Deployment: its owned ReplicaSet with the highest
/// `deployment.kubernetes.io/revision` below the Deployment's own, and that ReplicaSet's pod
/// template without the controller's `pod-template-hash` label.
async fn previous_replicaset_template(cluster: &Cluster, live: &Value) -> Option<(u64, Value)> {
    const REVISION: &str = "/metadata/annotations/deployment.kubernetes.io~1revision";
    let revision_of = |object: &Value| {
        object
            .pointer(REVISION)
            .and_then(Value::as_str)
            .and_then(|text| text.parse::<u64>().ok())
    };
    let uid = live.pointer("/metadata/uid")?.as_str()?;
    let current = revision_of(live)?;
    let namespace = live.pointer("/metadata/namespace")?.as_str()?;
    let list_ref = ObjectRef {
        api_version: "apps/v1".to_owned(),
        kind: "ReplicaSet".to_owned(),
        namespace: Some(namespace.to_owned()),
        name: String::new(),
    };
    let resolved = cluster.resolve("apps/v1", "ReplicaSet").await.ok()??;
    let api = cluster.api(&resolved, &list_ref).await;
    let replica_sets = api.list(&kube::api::ListParams::default()).await.ok()?;
    let (revision, mut template) = replica_sets
        .items
        .into_iter()
        .filter_map(|replica_set| serde_json::to_value(replica_set).ok())
        .filter(|replica_set| {
            replica_set
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|owners| {
                    owners
                        .iter()
                        .any(|owner| owner.get("uid").and_then(Value::as_str) == Some(uid))
                })
        })
        .filter_map(|replica_set| {
            let revision = revision_of(&replica_set)?;
            let template = replica_set.pointer("/spec/template")?.clone();
            (revision < current).then_some((revision, template))
        })
        .max_by_key(|(revision, _)| *revision)?;
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove("pod-template-hash");
    }
    Some((revision, template))
}

/// The batches a deploy step rolls out in (see [`deploy_to_targets`]).
pub(super) fn placement_batches<'t, 'c>(
    targets: &'t [Target<'c>],
    rollout: Option<&PlacementRollout>,
) -> Vec<Vec<&'t Target<'c>>> {
    let Some(rollout) = rollout else {
        let mut groups: Vec<usize> = targets.iter().map(|target| target.group).collect();
        groups.dedup();
        return groups
            .into_iter()
            .map(|group| {
                targets
                    .iter()
                    .filter(|target| target.group == group)
                    .collect()
            })
            .collect();
    };
    // One placement per cluster, in target order: a batch takes every target on its clusters.
    let mut placements: Vec<Placement> = Vec::new();
    for target in targets {
        if !placements
            .iter()
            .any(|placement| placement.cluster == target.cluster.name())
        {
            placements.push(Placement {
                cluster: target.cluster.name().to_owned(),
                namespace: target.desired.app.namespace.clone(),
            });
        }
    }
    split_placements(&placements, &rollout.batches)
        .into_iter()
        .map(|batch| {
            targets
                .iter()
                .filter(|target| {
                    batch
                        .iter()
                        .any(|placement| placement.cluster == target.cluster.name())
                })
                .collect()
        })
        .collect()
}

/// One placement of a deploy step through the apply path, with its own list of applies.
async fn apply_target(
    run: &Run<'_>,
    target: &Target<'_>,
    step: &str,
    mut workloads: BTreeMap<String, RolloutState>,
) -> (
    StepOutcome,
    Vec<(String, AppApplyReport)>,
    BTreeMap<String, RolloutState>,
) {
    let placed = Run {
        cluster: target.cluster,
        desired: &target.desired,
        rollouts: run.rollouts,
        options: run.options,
    };
    let label = format!("{step}@{}", target.cluster.name());
    let mut own = Vec::new();
    let outcome = apply_step(
        &placed,
        None,
        Prune::Disabled,
        &label,
        &mut workloads,
        &mut own,
    )
    .await;
    (outcome, own, workloads)
}

/// Applies `targets` (up to `parallelism` at once) and combines their outcomes: the first
/// failure, else every cluster still waiting, else success. Applies are reported in target
/// order whatever order they finished in.
async fn apply_targets(
    run: &Run<'_>,
    targets: &[&Target<'_>],
    step: &str,
    parallelism: usize,
    workloads: &mut BTreeMap<String, RolloutState>,
    applies: &mut Vec<(String, AppApplyReport)>,
) -> StepOutcome {
    // In chunks of `parallelism`, each chunk joined: futures of a plain `async fn` (no async
    // closure in a stream) keep the agent's tasks provably `Send` (rust-lang/rust#110338).
    // Each placement works on its own copy of the workloads' rollout states; their keys
    // name the cluster, so merging the copies back loses nothing.
    let mut results = Vec::new();
    for chunk in targets.chunks(parallelism) {
        let running: Vec<_> = chunk
            .iter()
            .map(|target| apply_target(run, target, step, workloads.clone()))
            .collect();
        for (outcome, own, states) in futures::future::join_all(running).await {
            workloads.extend(states);
            results.push((outcome, own));
        }
    }
    let mut waiting = Vec::new();
    let mut failed = None;
    for ((outcome, own), target) in results.into_iter().zip(targets) {
        applies.extend(own);
        let cluster = target.cluster.name();
        match outcome {
            StepOutcome::Succeeded { .. } => {}
            // The cluster goes last: a held rollout's message keeps its prefix.
            StepOutcome::Waiting { message } => {
                waiting.push(format!("{message} (cluster {cluster})"))
            }
            StepOutcome::Failed { reason, message } => {
                failed.get_or_insert(StepOutcome::Failed {
                    reason,
                    message: format!("cluster {cluster}: {message}"),
                });
            }
        }
    }
    if let Some(failed) = failed {
        return failed;
    }
    if waiting.is_empty() {
        StepOutcome::Succeeded {
            result: serde_json::json!({}),
        }
    } else {
        StepOutcome::Waiting {
            message: waiting.join("; "),
        }
    }
}
