//! After a workflow succeeds: one apply per cluster of everything the workflow deployed there,
//! with pruning allowed, where the garbage-collection policies act.

use super::*;

/// After success: apply what the workflow deployed once more with pruning allowed, so objects
/// the app no longer renders (or whose components no step deploys) are collected under the
/// app's garbage-collection policy. Each cluster gets one such apply of everything the
/// workflow put there (its tracker is that cluster's), so two steps placing on one cluster do
/// not prune each other's objects.
pub(super) async fn collect_garbage(
    run: &Run<'_>,
    spec: &WorkflowSpec,
    state: &WorkflowState,
    targets: &StepTargets<'_>,
    report: &mut WorkflowReport,
) {
    let succeeded = |name: &str| {
        state
            .step(name)
            .is_some_and(|step_state| step_state.phase == StepPhase::Succeeded)
    };
    // Deploy steps without placements deploy the whole render to the workflow's cluster.
    let deployed_all = spec.all_steps().any(|step| {
        step.step_type == StepType::Deploy
            && succeeded(&step.name)
            && !targets.contains_key(&step.name)
    });
    let components: BTreeSet<String> = spec
        .all_steps()
        .filter(|step| step.step_type == StepType::ApplyComponent && succeeded(&step.name))
        .filter_map(|step| step.properties.get("component").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    // The workloads' rollouts are done (the workflow succeeded): their states say so.
    let mut workloads = state.rollouts.clone();
    let mut silent = WorkflowReport {
        app: report.app.clone(),
        state: state.clone(),
        ran: Vec::new(),
        applies: Vec::new(),
        warnings: Vec::new(),
    };
    let mut placed: BTreeMap<String, (&Cluster, DesiredApp)> = BTreeMap::new();
    for (step, step_targets) in targets {
        if !succeeded(step) {
            continue;
        }
        for target in step_targets {
            let (_, desired) = placed
                .entry(target.cluster.name().to_owned())
                .or_insert_with(|| {
                    let mut empty = target.desired.clone();
                    empty.objects.clear();
                    (target.cluster, empty)
                });
            merge_objects(desired, &target.desired);
        }
    }
    let local = placed.remove(run.cluster.name());
    if targets.is_empty() || deployed_all || !components.is_empty() || local.is_some() {
        let mut desired = run.desired.clone();
        if !deployed_all {
            desired
                .objects
                .retain(|object| components.contains(&object.component));
        }
        if let Some((_, local)) = &local {
            merge_objects(&mut desired, local);
        }
        let whole = Run {
            desired: &desired,
            ..*run
        };
        let _ = apply_step(
            &whole,
            None,
            Prune::Allowed,
            "garbage-collect",
            &mut workloads,
            &mut silent.applies,
        )
        .await;
    }
    for (name, (cluster, desired)) in &placed {
        let remote = Run {
            cluster,
            desired,
            ..*run
        };
        let label = format!("garbage-collect@{name}");
        let _ = apply_step(
            &remote,
            None,
            Prune::Allowed,
            &label,
            &mut workloads,
            &mut silent.applies,
        )
        .await;
    }
    report.applies.extend(silent.applies);
}

/// Adds `from`'s objects that `into` does not have yet.
fn merge_objects(into: &mut DesiredApp, from: &DesiredApp) {
    for object in &from.objects {
        if !into
            .objects
            .iter()
            .any(|known| known.object_ref == object.object_ref)
        {
            into.objects.push(object.clone());
        }
    }
}
