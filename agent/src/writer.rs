//! The one cluster writer: every create, server-side apply, replace and delete the agent and the
//! CLI send to a cluster goes through this module, and nothing else may write. Clippy enforces it:
//! `disallowed-methods` in `clippy.toml` refuses kube's write calls (`Api::create`, `patch`,
//! `replace`, `delete`, their subresource forms, the raw `Client` requests) and
//! [`Cluster::wrote`] outside this file.
//!
//! The writer owns what every write must do, so no caller can forget it:
//! - **Watch-cache notes.** After each write, failed ones included, the watch cache is told what
//!   to expect ([`Cluster::wrote`]), so it never serves an object older than our own write.
//! - **Prune proofs** (the tracker's invariant 4). [`prune`] deletes an app's object only when
//!   the app's tracker lists it, the live object still carries the app's owner marks, and the
//!   delete carries the live object's uid and resourceVersion as a precondition, so an object
//!   replaced or changed since it was read is never deleted. There is no unguarded delete of an
//!   app's object: rollbacks that remove a revision's Deployment use [`prune_tracked`].
//!
//! Tracker and workflow-state records (JSON in ConfigMaps, `tracker_store`) are written with
//! [`write_record`] and [`delete_record`], always conditioned on the resourceVersion read.

use analyzer::AppRef;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use serde_json::Value;

use crate::cluster::{Cluster, Resolved, describe_error, has_status};
use crate::observe;
use crate::ownership;
use crate::plan::ObjectRef;
use crate::policy::Propagation;
use crate::tracker::TrackerRecord;
use crate::tracker_store::{TrackerError, TrackerStore};
use crate::watch_cache::Written;

/// Server-side applies `body` as `field_manager`, forcing our values over other managers' (the
/// caller decided the object is ours), and returns the object as stored.
///
/// # Errors
/// The apiserver refused the apply or could not be reached.
pub(crate) async fn server_side_apply(
    cluster: &Cluster,
    resolved: &Resolved,
    object_ref: &ObjectRef,
    body: &Value,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let api = cluster.api(resolved, object_ref).await;
    let params = PatchParams::apply(field_manager).force();
    #[allow(clippy::disallowed_methods, reason = "the writer")]
    let applied = api
        .patch(&object_ref.name, &params, &Patch::Apply(body))
        .await;
    note_write(cluster, object_ref, &applied, version_of);
    applied
}

/// The server-side-apply dry run of `body`: the object as it would be after our apply. Nothing
/// is written, so the watch cache is not told anything.
///
/// # Errors
/// The apiserver refused the apply (admission rejections show up here) or could not be reached.
pub(crate) async fn dry_run_apply(
    cluster: &Cluster,
    resolved: &Resolved,
    object_ref: &ObjectRef,
    body: &Value,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let api = cluster.api(resolved, object_ref).await;
    let params = PatchParams::apply(field_manager).force().dry_run();
    #[allow(
        clippy::disallowed_methods,
        reason = "the writer; a dry run writes nothing"
    )]
    let answer = api
        .patch(&object_ref.name, &params, &Patch::Apply(body))
        .await;
    answer
}

/// What [`prune`] did with one tracked object. Every variant means the object is no longer the
/// app's to keep track of: its tracker entry may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pruned {
    /// Deleted now (or its deletion started: finalizers, graceful deletion).
    Deleted,
    /// Already gone, or its kind is no longer served.
    Gone,
    /// Live but without the app's owner marks: not ours to delete, so left in place.
    NotOurs,
}

/// Deletes `object` of `app` under the three prune proofs: `tracker` (the app's tracker as last
/// read or written) lists it, the live object, read again now, still carries the app's owner
/// marks, and the delete is conditioned on that live object's uid and resourceVersion. A 404
/// counts as gone.
///
/// # Errors
/// A description of the refusal (the tracker is not the app's, or does not list the object; the
/// live object has no uid or resourceVersion) or of the failed request (a 409 when the object
/// changed since it was read).
pub async fn prune(
    cluster: &Cluster,
    app: &AppRef,
    tracker: &TrackerRecord,
    object: &ObjectRef,
    propagation: Propagation,
) -> Result<Pruned, String> {
    if tracker.app.as_ref() != Some(app) {
        return Err(format!(
            "not pruned: the resource tracker given is not app {}/{}'s",
            app.namespace, app.name
        ));
    }
    if !tracker.entries.contains_key(object) {
        return Err(format!(
            "not pruned: the resource tracker of app {}/{} does not list it",
            app.namespace, app.name
        ));
    }
    let resolved = match cluster.resolve(&object.api_version, &object.kind).await {
        Ok(Some(resolved)) => resolved,
        Ok(None) => return Ok(Pruned::Gone),
        Err(error) => return Err(describe_error(&error)),
    };
    // A controller may write the object between our read and the delete (a
    // PodDisruptionBudget's status moves each time one of its pods goes): the precondition then
    // fails with a 409, and the proofs are checked again on a fresh read after a pause that
    // doubles, a bounded number of times, so a controller still busy gets time to settle.
    let mut attempts = 0;
    let mut pause = PRUNE_FIRST_PAUSE;
    loop {
        attempts += 1;
        match delete_if_ours(cluster, app, &resolved, object, propagation).await {
            Err(Refused::Conflict(message)) if attempts < PRUNE_ATTEMPTS => {
                tracing::debug!(object = %object, "{message}; reading it again in {pause:?}");
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Err(Refused::Conflict(message) | Refused::Other(message)) => return Err(message),
            Ok(pruned) => return Ok(pruned),
        }
    }
}

/// How many times a prune reads the object and tries its conditioned delete, and the pause
/// before the second try (doubled before each further one: 3.1 s in all).
const PRUNE_ATTEMPTS: u32 = 6;
const PRUNE_FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Why one conditioned delete did not happen.
enum Refused {
    /// The object changed between the read and the delete (409).
    Conflict(String),
    Other(String),
}

/// One read of `object` and, when it still carries `app`'s owner marks, one delete conditioned
/// on the uid and resourceVersion just read.
async fn delete_if_ours(
    cluster: &Cluster,
    app: &AppRef,
    resolved: &Resolved,
    object: &ObjectRef,
    propagation: Propagation,
) -> Result<Pruned, Refused> {
    let Some(live) = observe::read(cluster, resolved, object)
        .await
        .map_err(Refused::Other)?
    else {
        return Ok(Pruned::Gone);
    };
    if !ownership::carries_marks_of(&live, app) {
        return Ok(Pruned::NotOurs);
    }
    let metadata_text = |key: &str| {
        live.pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (Some(uid), Some(resource_version)) =
        (metadata_text("uid"), metadata_text("resourceVersion"))
    else {
        return Err(Refused::Other(
            "not pruned: the live object has no uid or resourceVersion to condition the delete on"
                .to_owned(),
        ));
    };
    let params = DeleteParams {
        propagation_policy: Some(match propagation {
            Propagation::Orphan => PropagationPolicy::Orphan,
            Propagation::Cascading => PropagationPolicy::Background,
        }),
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: Some(resource_version),
        }),
        ..DeleteParams::default()
    };
    let api = cluster.api(resolved, object).await;
    #[allow(
        clippy::disallowed_methods,
        reason = "the writer; the delete carries the proofs"
    )]
    let deleted = api.delete(&object.name, &params).await;
    note_write(cluster, object, &deleted, |answer| {
        // Answered with the object: still there (finalizers, graceful deletion), and the watch
        // shows this version next; with a status: gone at once.
        answer.as_ref().left().map_or(Written::Gone, version_of)
    });
    match deleted {
        Ok(_) => Ok(Pruned::Deleted),
        Err(error) if has_status(&error, 404) => Ok(Pruned::Gone),
        Err(error) if has_status(&error, 409) => Err(Refused::Conflict(describe_error(&error))),
        Err(error) => Err(Refused::Other(describe_error(&error))),
    }
}

/// [`prune`] of one object outside an apply pass (a rolled-back revision's Deployment): reads
/// the app's tracker, prunes the object under the usual proofs, then drops its entry from the
/// tracker with a write conditioned on the version read.
///
/// # Errors
/// The tracker could not be read or written, the app has no tracker, or [`prune`] refused or
/// failed.
pub async fn prune_tracked(
    cluster: &Cluster,
    store: &TrackerStore<'_>,
    app: &AppRef,
    object: &ObjectRef,
    propagation: Propagation,
) -> Result<Pruned, String> {
    let Some(mut tracker) = store.read(app).await.map_err(|error| error.to_string())? else {
        return Err(format!(
            "not pruned: app {}/{} has no resource tracker",
            app.namespace, app.name
        ));
    };
    let pruned = prune(cluster, app, &tracker, object, propagation).await?;
    tracker.entries.remove(object);
    store
        .write(app, &mut tracker)
        .await
        .map_err(|error: TrackerError| error.to_string())?;
    Ok(pruned)
}

/// Stores a record ConfigMap: a create when `resource_version` is `None` (creating its
/// namespace first if that is missing), else a replace conditioned on it. Returns the
/// ConfigMap as stored.
///
/// # Errors
/// The request failed; a 409 means the record changed since it was read.
pub(crate) async fn write_record(
    cluster: &Cluster,
    namespace: &str,
    config_map: &ConfigMap,
    resource_version: Option<&str>,
) -> Result<ConfigMap, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client().clone(), namespace);
    let name = config_map.metadata.name.clone().unwrap_or_default();
    cluster.throttle().await;
    #[allow(clippy::disallowed_methods, reason = "the writer")]
    let written = match resource_version {
        None => match api.create(&PostParams::default(), config_map).await {
            // The namespace does not exist yet: create it and retry once. Trying the ConfigMap
            // first keeps the common case free of cluster-scoped writes, which a
            // namespace-scoped agent may not be allowed.
            Err(error) if has_status(&error, 404) => {
                ensure_namespace(cluster, namespace).await?;
                cluster.throttle().await;
                api.create(&PostParams::default(), config_map).await
            }
            other => other,
        },
        Some(_) => api.replace(&name, &PostParams::default(), config_map).await,
    };
    note_write(
        cluster,
        &record_ref(namespace, &name),
        &written,
        |written| {
            written
                .metadata
                .resource_version
                .clone()
                .map_or(Written::Unknown, Written::Version)
        },
    );
    written
}

/// Deletes a record ConfigMap, conditioned on `resource_version`; a record already gone is fine.
///
/// # Errors
/// The request failed for another reason than a 404; a 409 means the record changed since it
/// was read.
pub(crate) async fn delete_record(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    resource_version: Option<&str>,
) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client().clone(), namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: resource_version.map(str::to_owned),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    cluster.throttle().await;
    #[allow(clippy::disallowed_methods, reason = "the writer")]
    let deleted = api.delete(name, &params).await;
    note_write(cluster, &record_ref(namespace, name), &deleted, |answer| {
        answer.as_ref().left().map_or(Written::Gone, |config_map| {
            config_map
                .metadata
                .resource_version
                .clone()
                .map_or(Written::Unknown, Written::Version)
        })
    });
    match deleted {
        Ok(_) => Ok(()),
        Err(error) if has_status(&error, 404) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Stores a coordination Lease (a replica's membership, a per-app claim, the leader): a create
/// when it carries no resourceVersion, else a replace conditioned on the one it carries, so two
/// replicas never both win the same Lease. Leases skip the QPS budget: a renewal held behind a
/// deploy's requests would let the Lease expire under a replica that is alive. The watch cache
/// never serves Leases, so there is nothing to note.
///
/// # Errors
/// The request failed; a 409 means another replica wrote the Lease since it was read.
pub(crate) async fn write_lease(
    cluster: &Cluster,
    namespace: &str,
    lease: &Lease,
) -> Result<Lease, kube::Error> {
    let api: Api<Lease> = Api::namespaced(cluster.client().clone(), namespace);
    let name = lease.metadata.name.clone().unwrap_or_default();
    #[allow(clippy::disallowed_methods, reason = "the writer")]
    let written = match lease.metadata.resource_version {
        None => match api.create(&PostParams::default(), lease).await {
            Err(error) if has_status(&error, 404) => {
                ensure_namespace(cluster, namespace).await?;
                api.create(&PostParams::default(), lease).await
            }
            other => other,
        },
        Some(_) => api.replace(&name, &PostParams::default(), lease).await,
    };
    written
}

/// Deletes a Lease conditioned on `resource_version` (a replica leaving, a claim given up); a
/// Lease already gone is fine.
///
/// # Errors
/// The request failed for another reason than a 404; a 409 means another replica wrote it.
pub(crate) async fn delete_lease(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    resource_version: &str,
) -> Result<(), kube::Error> {
    let api: Api<Lease> = Api::namespaced(cluster.client().clone(), namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: Some(resource_version.to_owned()),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    #[allow(clippy::disallowed_methods, reason = "the writer")]
    let deleted = api.delete(name, &params).await;
    match deleted {
        Ok(_) => Ok(()),
        Err(error) if has_status(&error, 404) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Records a Kubernetes Event (`notify::events`): creates `event`, or, with `repeat` set to the
/// count and time of its latest occurrence, patches the existing Event of that name as
/// kubectl's event recorder does. An Event that expired meanwhile (the apiserver keeps them
/// an hour) is created again, with the count so far. Events are not in the watch cache.
///
/// # Errors
/// The apiserver refused the Event (its namespace is gone, RBAC) or could not be reached.
pub(crate) async fn event(
    cluster: &Cluster,
    event: &k8s_openapi::api::core::v1::Event,
    repeat: bool,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::Event;
    let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
    let name = event.metadata.name.as_deref().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(cluster.client().clone(), namespace);
    if repeat {
        let patch = serde_json::json!({
            "count": event.count,
            "lastTimestamp": event.last_timestamp,
            "message": event.message,
        });
        cluster.throttle().await;
        #[allow(clippy::disallowed_methods, reason = "the writer")]
        let patched = events
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        match patched {
            Err(error) if has_status(&error, 404) => {}
            other => return other.map(drop),
        }
    }
    cluster.throttle().await;
    #[allow(clippy::disallowed_methods, reason = "the writer")]
    let created = events.create(&PostParams::default(), event).await;
    created.map(drop)
}

/// Creates the namespace of the records when it does not exist (server-side apply, idempotent).
async fn ensure_namespace(cluster: &Cluster, namespace: &str) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(cluster.client().clone());
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace},
    });
    cluster.throttle().await;
    #[allow(clippy::disallowed_methods, reason = "the writer")]
    let applied = namespaces
        .patch(
            namespace,
            &PatchParams::apply(crate::apply::FIELD_MANAGER),
            &Patch::Apply(&body),
        )
        .await;
    let object_ref = ObjectRef {
        api_version: "v1".to_owned(),
        kind: "Namespace".to_owned(),
        namespace: None,
        name: namespace.to_owned(),
    };
    note_write(cluster, &object_ref, &applied, |namespace| {
        namespace
            .metadata
            .resource_version
            .clone()
            .map_or(Written::Unknown, Written::Version)
    });
    applied.map(drop)
}

/// Creates `namespace` (an app namespace, `crate::namespaces`); one that exists already is left
/// exactly as it is (a create, never an apply), and counts as done.
///
/// # Errors
/// The apiserver refused the create for another reason or could not be reached.
pub(crate) async fn create_namespace(
    cluster: &Cluster,
    namespace: &Namespace,
) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(cluster.client().clone());
    cluster.throttle().await;
    #[allow(clippy::disallowed_methods, reason = "the writer")]
    let created = namespaces.create(&PostParams::default(), namespace).await;
    let object_ref = ObjectRef {
        api_version: "v1".to_owned(),
        kind: "Namespace".to_owned(),
        namespace: None,
        name: namespace.metadata.name.clone().unwrap_or_default(),
    };
    note_write(cluster, &object_ref, &created, |created| {
        created
            .metadata
            .resource_version
            .clone()
            .map_or(Written::Unknown, Written::Version)
    });
    match created {
        Ok(_) => Ok(()),
        Err(error) if has_status(&error, 409) => Ok(()),
        Err(error) => Err(error),
    }
}

/// One LIST page of the collection at `url`, read straight into `T` (JSON values, not typed
/// objects). Raw requests are disallowed outside the writer because they could write; this one
/// is a GET by construction.
///
/// # Errors
/// The request could not be built, or it failed.
pub(crate) async fn list_page<T>(
    cluster: &Cluster,
    url: &str,
    params: &kube::api::ListParams,
) -> Result<T, kube::Error>
where
    T: serde::de::DeserializeOwned,
{
    let mut request = kube::core::Request::new(url)
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("list");
    #[allow(clippy::disallowed_methods, reason = "the writer; a LIST reads only")]
    let page = cluster.client().request::<T>(request).await;
    page
}

/// Tells the cluster's watch cache about a write of `object_ref` that answered `result`.
fn note_write<T>(
    cluster: &Cluster,
    object_ref: &ObjectRef,
    result: &Result<T, kube::Error>,
    expect: impl FnOnce(&T) -> Written,
) {
    if let Some(expect) = crate::cluster::written(result, expect) {
        #[allow(clippy::disallowed_methods, reason = "the writer notes its own writes")]
        cluster.wrote(object_ref, expect);
    }
}

/// The version a written object has (unknown without one).
fn version_of(object: &DynamicObject) -> Written {
    object
        .metadata
        .resource_version
        .clone()
        .map_or(Written::Unknown, Written::Version)
}

fn record_ref(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        namespace: Some(namespace.to_owned()),
        name: name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracker::{EntryState, TrackedEntry};

    fn app(name: &str) -> AppRef {
        AppRef {
            namespace: "team".to_owned(),
            name: name.to_owned(),
        }
    }

    fn config_map(name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            namespace: Some("team".to_owned()),
            name: name.to_owned(),
        }
    }

    fn tracking(app: &AppRef, objects: &[ObjectRef]) -> TrackerRecord {
        let mut record = TrackerRecord::new(app);
        for object in objects {
            record.entries.insert(
                object.clone(),
                TrackedEntry {
                    state: EntryState::Applied,
                    hash: String::new(),
                    resource_version: None,
                    component: "settings".to_owned(),
                    component_type: None,
                    trait_type: None,
                    gc: crate::policy::GcStrategy::OnAppUpdate,
                    propagation: Propagation::Cascading,
                },
            );
        }
        record
    }

    #[tokio::test]
    async fn a_prune_without_a_tracker_entry_is_refused_before_any_request() {
        let cluster = Cluster::offline();
        let shop = app("shop");
        let tracker = tracking(&shop, &[config_map("listed")]);
        let refused = prune(
            &cluster,
            &shop,
            &tracker,
            &config_map("not-listed"),
            Propagation::Cascading,
        )
        .await;
        assert_eq!(
            refused,
            Err("not pruned: the resource tracker of app team/shop does not list it".to_owned())
        );
        assert_eq!(cluster.requests(), 0);
    }

    #[tokio::test]
    async fn a_prune_with_another_apps_tracker_is_refused_before_any_request() {
        let cluster = Cluster::offline();
        let other = tracking(&app("other"), &[config_map("shared-name")]);
        let refused = prune(
            &cluster,
            &app("shop"),
            &other,
            &config_map("shared-name"),
            Propagation::Cascading,
        )
        .await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|message| message.contains("not app team/shop's")),
            "{refused:?}"
        );
        assert_eq!(cluster.requests(), 0);
    }

    #[tokio::test]
    async fn a_prune_that_cannot_read_the_live_object_fails() {
        // The marks are checked on the object as read now: no read, no delete.
        let cluster = Cluster::offline();
        let shop = app("shop");
        let tracker = tracking(&shop, &[config_map("listed")]);
        let result = prune(
            &cluster,
            &shop,
            &tracker,
            &config_map("listed"),
            Propagation::Cascading,
        )
        .await;
        assert!(result.is_err(), "{result:?}");
    }
}
