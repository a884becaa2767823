//! Applying a plan to a cluster: server-side apply with field manager `driftless` in the plan's
//! order (Namespaces and CRDs first, kind order after; custom resources wait for their CRD to be
//! established), tracker updates around it, and the prune last.
//!
//! The crash-safety invariants this follows are documented in `tracker`. In short: the tracker
//! lists every object before it is applied (write-ahead), records it as applied only after the
//! apply succeeded, and a prune deletes only tracked objects that still carry our marks, with a
//! uid + resourceVersion precondition (`writer::prune` holds those proofs; every write goes
//! through `writer`). The first per-object error stops the app's apply, and no
//! prune runs for that app; other apps are applied independently.

use std::time::Duration;

use analyzer::AppRef;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use serde_json::Value;

use crate::cluster::{Cluster, describe_error};
use crate::observe::{AppObservation, ApplyNeeds, OrphanObservation, crd_kinds, not_served};
use crate::ownership;
use crate::plan::{Action, AppPlan, Change, ObjectRef};
use crate::planner::{DesiredObject, Observed, keep_live_paths};
use crate::policy::ApplyOnceMoment;
use crate::tracker::{EntryState, TrackedEntry, TrackerRecord};
use crate::tracker_store::TrackerStore;

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "driftless";

/// Knobs of an apply.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyOptions {
    /// Recorded in the tracker; only apps of the same source are garbage collected as a whole.
    pub source: Option<String>,
    /// How long a custom resource waits for its CRD to be established.
    pub crd_timeout: Duration,
    /// What the source may touch; an app with an object outside is refused whole.
    pub boundary: Option<std::sync::Arc<analyzer::boundary::SourceBoundary>>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            source: None,
            crd_timeout: Duration::from_secs(60),
            boundary: None,
        }
    }
}

/// What happened to one app.
#[derive(Debug, Clone, PartialEq)]
pub struct AppApplyReport {
    pub app: AppRef,
    pub outcome: ApplyOutcome,
    /// One entry per object acted on, in order.
    pub objects: Vec<ObjectResult>,
}

/// How an app's apply ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Every change applied and pruned.
    Applied,
    /// Nothing was done: the plan has conflicts or errors (the reason says which).
    Skipped(String),
    /// An error stopped the apply; no prune ran.
    Failed(String),
}

/// One object's result.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectResult {
    pub object: ObjectRef,
    pub action: Action,
    /// `None` when it succeeded.
    pub error: Option<String>,
}

/// Applies one app's plan.
pub async fn apply_app(
    cluster: &Cluster,
    store: &TrackerStore<'_>,
    observation: &AppObservation,
    plan: &AppPlan,
    options: &ApplyOptions,
) -> AppApplyReport {
    let app = &observation.desired.app;
    let mut report = AppApplyReport {
        app: app.clone(),
        outcome: ApplyOutcome::Applied,
        objects: Vec::new(),
    };
    // The plan proved there is nothing to do and kept nothing more (`nothing_to_apply`).
    if observation.apply == ApplyNeeds::Nothing {
        return report;
    }
    if let Some(refused) = reason_not_to_apply(cluster, observation, plan, options) {
        report.outcome = refused;
        return report;
    }

    // Missing namespaces first: nothing of the app can be written before they exist.
    if let Err(message) = crate::namespaces::create_planned(cluster, plan, &mut report).await {
        report.outcome = ApplyOutcome::Failed(message);
        return report;
    }

    let before = observation
        .tracker
        .clone()
        .unwrap_or_else(|| TrackerRecord::new(app));
    let mut record = before.clone();
    note_intent(&mut record, observation, plan, options);
    // With changes to make, the write-ahead write happens even when it adds nothing: it is
    // conditioned on the resourceVersion we planned from, so a tracker changed meanwhile (another
    // agent on the same app) stops the apply with a 409 before any object is written or pruned.
    let has_changes = plan.changes.iter().any(|change| {
        matches!(
            change.action,
            Action::Create | Action::Update | Action::Delete
        )
    });
    if (record != before || has_changes)
        && let Err(error) = store.write(app, &mut record).await
    {
        report.outcome = ApplyOutcome::Failed(error.to_string());
        return report;
    }
    // What the cluster holds now; the final write is skipped when nothing changed, so an apply
    // of an unchanged app costs no write.
    let stored = record.clone();

    apply_changes(
        cluster,
        observation,
        plan,
        options,
        &mut record,
        &mut report,
    )
    .await;
    if report.outcome == ApplyOutcome::Applied {
        let desired = &observation.desired;
        prune(cluster, app, plan, &mut record, &mut report, Some(desired)).await;
        // Tracked objects that are neither rendered nor live any more (pending entries never
        // created, objects deleted by someone else) leave the tracker.
        let stale: Vec<ObjectRef> = record
            .entries
            .keys()
            .filter(|object_ref| {
                find(desired, object_ref).is_none()
                    && matches!(
                        observation.live.objects.get(*object_ref),
                        None | Some(Observed::Absent)
                    )
            })
            .cloned()
            .collect();
        for object_ref in stale {
            record.entries.remove(&object_ref);
        }
    }
    if record != stored
        && let Err(error) = store.write(app, &mut record).await
        && report.outcome == ApplyOutcome::Applied
    {
        report.outcome = ApplyOutcome::Failed(error.to_string());
    }
    report
}

/// Why the app's plan is not applied at all, before anything is written: its tracker could
/// not be read, it has errors or a conflict, or it crosses the source's boundary.
fn reason_not_to_apply(
    cluster: &Cluster,
    observation: &AppObservation,
    plan: &AppPlan,
    options: &ApplyOptions,
) -> Option<ApplyOutcome> {
    if let Some(error) = &observation.tracker_error {
        return Some(ApplyOutcome::Skipped(error.clone()));
    }
    if plan
        .diagnostics
        .iter()
        .any(|diagnostic| diagnostic.severity == analyzer::Severity::Error)
    {
        return Some(ApplyOutcome::Skipped("the plan has errors".to_owned()));
    }
    if let Some(conflict) = plan
        .changes
        .iter()
        .find(|change| change.action == Action::Conflict)
    {
        return Some(ApplyOutcome::Skipped(format!(
            "conflict on {}: {}",
            conflict.object,
            conflict.reason.as_deref().unwrap_or("not ours")
        )));
    }
    let boundary = options.boundary.as_deref()?;
    crate::boundary::refusal(boundary, cluster.name(), &observation.desired)
        .map(ApplyOutcome::Failed)
}

/// Notes in `record` what the apply is about to do, before it does it: the app, source and
/// revision, objects of ours found unchanged but not recorded (adopted), and every object
/// about to be written, as pending.
fn note_intent(
    record: &mut TrackerRecord,
    observation: &AppObservation,
    plan: &AppPlan,
    options: &ApplyOptions,
) {
    let desired = &observation.desired;
    let app = &desired.app;
    record.app = Some(app.clone());
    // A pass that knows no source (one file given to `driftless apply`) keeps the recorded one.
    if options.source.is_some() {
        record.source = options.source.clone();
    }
    // The revision is that of the last pass that changed the app: recording every pass would
    // rewrite every tracker on every commit, 10,000 writes for one changed app among 10,000.
    if plan
        .changes
        .iter()
        .any(|change| change.action != Action::Unchanged)
    {
        record.revision = desired.revision.clone();
    }

    // Adopt what is ours and unchanged but not (yet) recorded as applied: an apply that crashed
    // after the object was written, or before the tracker write.
    for change in &plan.changes {
        if change.action != Action::Unchanged {
            continue;
        }
        let (Some(object), Some(Observed::Present { live, .. })) = (
            find(desired, &change.object),
            observation.live.objects.get(&change.object),
        ) else {
            continue;
        };
        let live_version = resource_version(live);
        // A moved resourceVersion alone (a controller writing `status`) is no reason to
        // rewrite the tracker: the planner found the object unchanged, and rewriting would
        // cost one write per app whose workload's status moved, on every apply.
        let stale = record
            .applied(&change.object)
            .is_none_or(|entry| entry.hash != object.hash);
        if ownership::carries_marks_of(live, app) && stale {
            let entry = entry_for(desired, object, EntryState::Applied, live_version);
            record.entries.insert(change.object.clone(), entry);
        }
    }
    // Write-ahead: every object about to be written is listed before it is touched.
    for change in &plan.changes {
        if !matches!(change.action, Action::Create | Action::Update) {
            continue;
        }
        if let Some(object) = find(desired, &change.object)
            && !record.entries.contains_key(&change.object)
        {
            let entry = entry_for(desired, object, EntryState::Pending, None);
            record.entries.insert(change.object.clone(), entry);
        }
    }
}

/// Creates and updates the plan's objects, in the plan's order, recording each applied one
/// in `record`; the first failure stops the apply (`report` says which object).
async fn apply_changes(
    cluster: &Cluster,
    observation: &AppObservation,
    plan: &AppPlan,
    options: &ApplyOptions,
    record: &mut TrackerRecord,
    report: &mut AppApplyReport,
) {
    let desired = &observation.desired;
    let created_kinds = crd_kinds(desired.objects.iter().map(|object| &object.object));
    for change in &plan.changes {
        if !matches!(change.action, Action::Create | Action::Update) {
            continue;
        }
        let Some(object) = find(desired, &change.object) else {
            continue;
        };
        // Planned absent: someone may have created it since. Never taken over silently.
        let result = match change.action {
            Action::Create => match created_meanwhile(cluster, &change.object).await {
                Some(message) => Err(message),
                None => apply_object(cluster, observation, object, &created_kinds, options)
                    .await
                    .and_then(|applied| created_by_us(&applied, &change.object).map(|()| applied)),
            },
            _ => apply_object(cluster, observation, object, &created_kinds, options).await,
        };
        match result {
            Ok(applied) => {
                let entry = entry_for(
                    desired,
                    object,
                    EntryState::Applied,
                    resource_version(&applied),
                );
                record.entries.insert(change.object.clone(), entry);
                report.objects.push(ObjectResult {
                    object: change.object.clone(),
                    action: change.action,
                    error: None,
                });
            }
            Err(message) => {
                report.objects.push(ObjectResult {
                    object: change.object.clone(),
                    action: change.action,
                    error: Some(message.clone()),
                });
                report.outcome = ApplyOutcome::Failed(format!("{}: {message}", change.object));
                break;
            }
        }
    }
}

/// True when [`apply_app`] of this observation and plan would make no request and report the
/// app [`ApplyOutcome::Applied`] with no object acted on, so a plan may keep nothing of the
/// observation but [`ApplyNeeds::Nothing`]. Each condition is one of `apply_app`'s paths not
/// taken: not skipped (tracker read, no error, no conflict); no write, apply or prune (every
/// change unchanged, none releasing an object from the tracker); no adoption (no live object
/// kept: the plan dropped those of settled objects); the tracker already records this app and
/// source, and only objects the app renders (no stale entry to drop), so it is not rewritten.
pub(crate) fn nothing_to_apply(
    observation: &AppObservation,
    plan: &AppPlan,
    options: &ApplyOptions,
) -> bool {
    if observation.apply == ApplyNeeds::Nothing {
        return true;
    }
    let desired = &observation.desired;
    let Some(tracker) = &observation.tracker else {
        return false;
    };
    observation.tracker_error.is_none()
        && !plan
            .diagnostics
            .iter()
            .any(|diagnostic| diagnostic.severity == analyzer::Severity::Error)
        && plan
            .changes
            .iter()
            .all(|change| change.action == Action::Unchanged && !leaves_tracker(change))
        && observation.live.objects.is_empty()
        && tracker.app.as_ref() == Some(&desired.app)
        && tracker.source == options.source
        && tracker
            .entries
            .keys()
            .all(|object_ref| find(desired, object_ref).is_some())
}

/// Deletes an app that disappeared from its source: prunes what its plan deletes, then deletes
/// the tracker once it lists nothing.
pub async fn delete_app(
    cluster: &Cluster,
    store: &TrackerStore<'_>,
    orphan: &OrphanObservation,
    plan: &AppPlan,
) -> AppApplyReport {
    let mut report = AppApplyReport {
        app: orphan.app.clone(),
        outcome: ApplyOutcome::Applied,
        objects: Vec::new(),
    };
    if !plan.diagnostics.is_empty() {
        report.outcome = ApplyOutcome::Skipped("the plan has errors".to_owned());
        return report;
    }
    let mut record = orphan.tracker.clone();
    prune(cluster, &orphan.app, plan, &mut record, &mut report, None).await;
    let absent: Vec<ObjectRef> = record
        .entries
        .keys()
        .filter(|object_ref| {
            matches!(
                orphan.live.objects.get(*object_ref),
                None | Some(Observed::Absent)
            )
        })
        .cloned()
        .collect();
    for object_ref in absent {
        record.entries.remove(&object_ref);
    }
    let written = if record.entries.is_empty() {
        store.delete(&orphan.app, &record).await
    } else {
        store.write(&orphan.app, &mut record).await
    };
    if let Err(error) = written
        && report.outcome == ApplyOutcome::Applied
    {
        report.outcome = ApplyOutcome::Failed(error.to_string());
    }
    report
}

async fn prune(
    cluster: &Cluster,
    app: &AppRef,
    plan: &AppPlan,
    record: &mut TrackerRecord,
    report: &mut AppApplyReport,
    desired: Option<&crate::planner::DesiredApp>,
) {
    for change in &plan.changes {
        if change.action != Action::Delete {
            continue;
        }
        let Some(entry) = record.entries.get(&change.object).cloned() else {
            continue;
        };
        let propagation = match desired {
            Some(desired) => desired.policies.gc_for(&entry.facts(&change.object)).1,
            None => entry.propagation,
        };
        // A Namespace goes last (reverse apply order), and never with anything in it that the
        // app does not own.
        if change.object.kind == "Namespace" && change.object.group().is_empty() {
            let refusal = match crate::namespace_contents::foreign_objects(
                cluster,
                &change.object.name,
                app,
            )
            .await
            {
                Ok(foreign) if foreign.is_empty() => None,
                Ok(foreign) => Some(format!(
                    "not deleted: it holds objects app {app} does not own ({}); move or delete them, and the next pass deletes it",
                    foreign.join(", ")
                )),
                Err(message) => Some(format!(
                    "not deleted: what it holds could not be read: {message}"
                )),
            };
            if let Some(message) = refusal {
                report.objects.push(ObjectResult {
                    object: change.object.clone(),
                    action: Action::Delete,
                    error: Some(message.clone()),
                });
                report.outcome = ApplyOutcome::Failed(format!("{}: {message}", change.object));
                return;
            }
        }
        match crate::writer::prune(cluster, app, record, &change.object, propagation).await {
            Ok(_) => {
                record.entries.remove(&change.object);
                report.objects.push(ObjectResult {
                    object: change.object.clone(),
                    action: Action::Delete,
                    error: None,
                });
            }
            Err(message) => {
                report.objects.push(ObjectResult {
                    object: change.object.clone(),
                    action: Action::Delete,
                    error: Some(message.clone()),
                });
                report.outcome = ApplyOutcome::Failed(format!("{}: {message}", change.object));
                return;
            }
        }
    }
    // The entries of objects kept by a policy stay; those whose objects no longer carry our
    // marks leave the tracker without being deleted (invariant 4).
    for change in &plan.changes {
        if change.action == Action::Unchanged && leaves_tracker(change) {
            record.entries.remove(&change.object);
        }
    }
}

/// Why an object planned as a create must not be written now: it exists (created by someone
/// else since the plan read it as absent, or unreadable). Read from the apiserver, not from a
/// prefetch or the watch cache.
async fn created_meanwhile(cluster: &Cluster, object_ref: &ObjectRef) -> Option<String> {
    let resolved = match cluster
        .resolve(&object_ref.api_version, &object_ref.kind)
        .await
    {
        Ok(Some(resolved)) => resolved,
        // Not served yet (its CRD comes with the app): nobody can have created it.
        Ok(None) => return None,
        Err(error) => return Some(describe_error(&error)),
    };
    let api = cluster.api(&resolved, object_ref).await;
    cluster.throttle().await;
    match api.get_opt(&object_ref.name).await {
        Ok(None) => None,
        Ok(Some(_)) => Some(
            "conflict: created by someone else after the plan saw it absent; not taken over (plan again: it shows who owns it)"
                .to_owned(),
        ),
        Err(error) => Some(format!(
            "could not check that it is still absent: {}",
            describe_error(&error)
        )),
    }
}

/// After creating `object_ref`, whether it is ours alone: an object created by someone else
/// between our check and our apply holds fields of another manager (status subresources
/// aside). Reported as a conflict, never passed over.
fn created_by_us(applied: &Value, object_ref: &ObjectRef) -> Result<(), String> {
    let others: Vec<&str> = applied
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|entry| entry.get("subresource").is_none())
        .filter_map(|entry| entry.get("manager").and_then(Value::as_str))
        .filter(|manager| *manager != FIELD_MANAGER)
        .collect();
    if others.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "conflict: {object_ref} was created by someone else ({}) just before our apply; our fields were written, check it",
            others.join(", ")
        ))
    }
}

/// A change the planner left unchanged because the object no longer carries this app's marks
/// (`planner.rs`: "not pruned: ..."): its entry leaves the tracker, the object stays.
fn leaves_tracker(change: &Change) -> bool {
    change
        .reason
        .as_deref()
        .is_some_and(|reason| reason.starts_with("not pruned"))
}

/// Server-side applies one object; returns the object as stored.
async fn apply_object(
    cluster: &Cluster,
    observation: &AppObservation,
    object: &DesiredObject,
    created_kinds: &std::collections::BTreeMap<(String, String), crate::plan::Scope>,
    options: &ApplyOptions,
) -> Result<Value, String> {
    let object_ref = &object.object_ref;
    let key = (object_ref.api_version.clone(), object_ref.kind.clone());
    let mut resolved = cluster
        .resolve(&object_ref.api_version, &object_ref.kind)
        .await
        .map_err(|error| describe_error(&error))?;
    if resolved.is_none() && created_kinds.contains_key(&key) {
        wait_for_crd(
            cluster,
            &observation.desired.objects,
            object_ref,
            options.crd_timeout,
        )
        .await?;
        cluster.forget(&object_ref.api_version).await;
        resolved = cluster
            .resolve(&object_ref.api_version, &object_ref.kind)
            .await
            .map_err(|error| describe_error(&error))?;
    }
    let resolved = resolved.ok_or_else(|| not_served(object_ref))?;

    let mut body = object.object.clone();
    if let Some(Observed::Present { live, .. }) = observation.live.objects.get(object_ref) {
        let recorded = observation
            .tracker
            .as_ref()
            .and_then(|tracker| tracker.applied(object_ref));
        let moment = if recorded.is_some_and(|entry| entry.hash == object.hash) {
            ApplyOnceMoment::StateKeep
        } else {
            ApplyOnceMoment::Update
        };
        let paths = observation
            .desired
            .policies
            .drift_allowed(&object.facts(), moment);
        keep_live_paths(&mut body, live, &paths);
    }
    // Forced: the object is ours (admission said so), so our values win over other managers'.
    let applied =
        crate::writer::server_side_apply(cluster, &resolved, object_ref, &body, FIELD_MANAGER)
            .await
            .map_err(|error| describe_error(&error))?;
    if object_ref.kind == "CustomResourceDefinition" {
        for ((api_version, _), _) in crd_kinds(std::iter::once(&object.object)) {
            cluster.forget(&api_version).await;
        }
    }
    serde_json::to_value(applied).map_err(|error| error.to_string())
}

/// Waits until the CRD (rendered by the same app) serving a custom resource is established.
async fn wait_for_crd(
    cluster: &Cluster,
    objects: &[DesiredObject],
    custom_resource: &ObjectRef,
    timeout: Duration,
) -> Result<(), String> {
    let crd_name = objects
        .iter()
        .filter(|object| object.object_ref.kind == "CustomResourceDefinition")
        .find(|object| {
            crd_kinds(std::iter::once(&object.object)).contains_key(&(
                custom_resource.api_version.clone(),
                custom_resource.kind.clone(),
            ))
        })
        .map(|object| object.object_ref.name.clone())
        .ok_or_else(|| not_served(custom_resource))?;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client().clone());
    cluster.throttle().await;
    let established = await_condition(crds, &crd_name, |crd: Option<&CustomResourceDefinition>| {
        crd.and_then(|crd| serde_json::to_value(crd).ok())
            .is_some_and(|crd| crate::health::crd_established(&crd))
    });
    match tokio::time::timeout(timeout, established).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(format!("waiting for CRD {crd_name}: {error}")),
        Err(_) => Err(format!(
            "CRD {crd_name} was not established within {}s",
            timeout.as_secs()
        )),
    }
}

fn find<'a>(
    desired: &'a crate::planner::DesiredApp,
    object_ref: &ObjectRef,
) -> Option<&'a DesiredObject> {
    desired
        .objects
        .iter()
        .find(|object| &object.object_ref == object_ref)
}

fn entry_for(
    desired: &crate::planner::DesiredApp,
    object: &DesiredObject,
    state: EntryState,
    resource_version: Option<String>,
) -> TrackedEntry {
    let (gc, propagation) = desired.policies.gc_for(&object.facts());
    TrackedEntry {
        state,
        hash: object.hash.clone(),
        resource_version,
        component: object.component.clone(),
        component_type: object.component_type.clone(),
        trait_type: object.trait_type.clone(),
        gc,
        propagation,
    }
}

fn resource_version(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_owned)
}
