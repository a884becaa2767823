//! Observing a cluster for a plan: resolve every rendered kind by discovery, read the live
//! objects of each app (rendered and tracked) and its tracker, and normalise the desired state
//! with a server-side-apply dry run — skipped when the tracker proves nothing changed (same
//! desired hash, and the live object at the resourceVersion we left it or still holding every
//! rendered field as rendered).
//!
//! Failures are per object ([`Observed::Failed`]): a kind the cluster does not serve, RBAC, an
//! admission rejection of the dry run, an unreachable apiserver. The planner turns them into
//! diagnostics of that app only.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::model::Policy;
use analyzer::{AppRef, AppRender, RenderedApp};
use rayon::prelude::*;
use serde_json::Value;

use crate::cluster::{Cluster, Resolved, describe_error};
use crate::ownership::{self, Admission};
use crate::plan::{ObjectRef, Scope};
use crate::planner::{DesiredApp, LiveObjects, Observed};
use crate::tracker::TrackerRecord;
use crate::tracker_store::TrackerStore;

/// The cluster's Kubernetes version from its `/version`, as KubeVela puts it into
/// `context.clusterVersion`, so live renders take the template branches of the real cluster.
///
/// # Errors
///
/// The apiserver could not be asked (a message saying why).
pub async fn cluster_version(cluster: &Cluster) -> Result<analyzer::ClusterVersion, String> {
    cluster.throttle().await;
    let info = cluster
        .client()
        .apiserver_version()
        .await
        .map_err(|error| format!("reading the cluster's /version: {}", describe_error(&error)))?;
    Ok(cluster_version_of(
        &info.major,
        &info.minor,
        &info.git_version,
        &info.platform,
    ))
}

/// `/version` fields to `context.clusterVersion`: KubeVela keeps the leading digits of the
/// minor version (`"29+"` on managed clusters is 29) and uses 0 when there are none.
pub fn cluster_version_of(
    major: &str,
    minor: &str,
    git_version: &str,
    platform: &str,
) -> analyzer::ClusterVersion {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    analyzer::ClusterVersion {
        major: major.to_owned(),
        minor: digits.parse().unwrap_or(0),
        git_version: git_version.to_owned(),
        platform: platform.to_owned(),
    }
}

/// What one app looks like in the cluster.
#[derive(Debug, Clone)]
pub struct AppObservation {
    pub desired: DesiredApp,
    pub live: LiveObjects,
    pub tracker: Option<TrackerRecord>,
    /// The tracker could not be read: the app must be neither planned for prune nor applied.
    pub tracker_error: Option<String>,
    /// What the apply still needs of this observation.
    pub apply: ApplyNeeds,
}

/// What an apply needs of an observation once the app is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyNeeds {
    /// The observation as kept by the plan (see `live::Keep`).
    Observation,
    /// Nothing: the plan proved the apply would make no request and report the app applied
    /// with no object acted on (`apply::nothing_to_apply`), so the plan kept only the app's
    /// identity ([`AppObservation::nothing_to_apply`]). At a deploy of 10,000 unchanged apps
    /// this is nearly every app, whose desired identities, hashes and parsed trackers were held
    /// through the whole apply.
    Nothing,
}

impl AppObservation {
    /// What a plan keeps of an app whose apply has nothing to do ([`ApplyNeeds::Nothing`]): its
    /// identity and revision, no objects, no tracker.
    pub fn nothing_to_apply(observation: AppObservation) -> AppObservation {
        let DesiredApp { app, revision, .. } = observation.desired;
        AppObservation {
            desired: DesiredApp {
                app,
                revision,
                objects: Vec::new(),
                policies: crate::policy::ResourcePolicies::default(),
                diagnostics: Vec::new(),
            },
            live: LiveObjects::default(),
            tracker: None,
            tracker_error: None,
            apply: ApplyNeeds::Nothing,
        }
    }
}

/// An app that has a tracker in the cluster but is no longer rendered by the source.
#[derive(Debug, Clone)]
pub struct OrphanObservation {
    pub app: AppRef,
    pub live: LiveObjects,
    pub tracker: TrackerRecord,
}

/// Builds the desired apps with scopes from discovery. Kinds the cluster does not serve keep
/// their rendered namespace (they fail per object when observed), unless a CRD rendered by the
/// same app defines them, in which case that CRD's scope is used.
pub async fn desired_apps<A: AppRender>(
    cluster: &Cluster,
    rendered: &[A],
    policies: &BTreeMap<AppRef, Vec<Policy>>,
    revision: Option<&str>,
) -> Vec<DesiredApp> {
    DesiredBuilder::new(cluster, rendered, policies, revision)
        .await
        .build(rendered)
}

/// Builds desired apps (as [`desired_apps`]) a slice of a render at a time, with the scopes
/// discovery found for every kind of the whole render: a live plan of every app builds one
/// namespace group's desired objects at a time and drops what it will not apply before the
/// next, instead of holding a marked copy of every rendered object at once.
pub struct DesiredBuilder<'a> {
    scopes: BTreeMap<(String, String), Scope>,
    policies: &'a BTreeMap<AppRef, Vec<Policy>>,
    revision: Option<&'a str>,
}

impl<'a> DesiredBuilder<'a> {
    /// Resolves the scope of every kind `rendered` holds (one discovery look-up per kind).
    pub async fn new<A: AppRender>(
        cluster: &Cluster,
        rendered: &[A],
        policies: &'a BTreeMap<AppRef, Vec<Policy>>,
        revision: Option<&'a str>,
    ) -> DesiredBuilder<'a> {
        DesiredBuilder::from_scopes(scopes(cluster, rendered).await, policies, revision)
    }

    /// A builder with the scopes given (by `(apiVersion, kind)`).
    pub(crate) fn from_scopes(
        scopes: BTreeMap<(String, String), Scope>,
        policies: &'a BTreeMap<AppRef, Vec<Policy>>,
        revision: Option<&'a str>,
    ) -> DesiredBuilder<'a> {
        DesiredBuilder {
            scopes,
            policies,
            revision,
        }
    }

    /// The desired apps of `rendered` (apps of the render given to [`DesiredBuilder::new`]).
    pub fn build<A: AppRender>(&self, rendered: &[A]) -> Vec<DesiredApp> {
        let scope_of = |api_version: &str, kind: &str| scope_in(&self.scopes, api_version, kind);
        let no_policies = Vec::new();
        // Per app and pure (ownership marks, hashes of every object): in parallel.
        rendered
            .par_iter()
            .map(|app| {
                DesiredApp::from_rendered(
                    app,
                    self.policies.get(app.app()).unwrap_or(&no_policies),
                    self.revision.map(str::to_owned),
                    &scope_of,
                )
            })
            .collect()
    }
}

/// [`desired_apps`] that moves each app's rendered objects into its desired app, leaving
/// `rendered` without objects (its apps, diagnostics and hashes stay): at 10,000 apps a copy
/// is hundreds of MiB the caller would hold for nothing.
pub async fn desired_apps_taking(
    cluster: &Cluster,
    rendered: &mut [RenderedApp],
    policies: &BTreeMap<AppRef, Vec<Policy>>,
    revision: Option<&str>,
) -> Vec<DesiredApp> {
    let scopes = scopes(cluster, rendered).await;
    let scope_of = |api_version: &str, kind: &str| scope_in(&scopes, api_version, kind);
    let no_policies = Vec::new();
    rendered
        .par_iter_mut()
        .map(|app| {
            let objects = std::mem::take(&mut app.objects);
            DesiredApp::from_rendered_objects(
                app,
                objects,
                policies.get(&app.app).unwrap_or(&no_policies),
                revision.map(str::to_owned),
                &scope_of,
            )
        })
        .collect()
}

/// The scope [`scopes`] found for `api_version` and `kind`.
fn scope_in(
    scopes: &BTreeMap<(String, String), Scope>,
    api_version: &str,
    kind: &str,
) -> Option<Scope> {
    scopes
        .get(&(api_version.to_owned(), kind.to_owned()))
        .copied()
}

/// The scope of every kind the apps render, by discovery; a kind the cluster does not serve
/// has none, unless a CRD rendered by the same app defines it.
async fn scopes<A: AppRender>(
    cluster: &Cluster,
    rendered: &[A],
) -> BTreeMap<(String, String), Scope> {
    let mut kinds = BTreeSet::new();
    // The scopes CRDs rendered by the apps give, in app order: only apps that render a CRD are
    // read whole (packed objects are parsed; their kinds are read without building them).
    let mut defined = Vec::new();
    for app in rendered {
        let mut renders_crd = false;
        for (api_version, kind) in app.object_kinds() {
            renders_crd |= kind == "CustomResourceDefinition";
            if !api_version.is_empty() && !kind.is_empty() {
                kinds.insert((api_version, kind));
            }
        }
        if renders_crd {
            let objects = app.objects();
            defined.push(crd_kinds(objects.iter().map(|object| &object.object)));
        }
    }
    let mut scopes: BTreeMap<(String, String), Scope> = BTreeMap::new();
    for (api_version, kind) in kinds {
        if let Ok(Some(resolved)) = cluster.resolve(&api_version, &kind).await {
            scopes.insert((api_version, kind), resolved.scope);
        }
    }
    for (key, scope) in defined.into_iter().flatten() {
        scopes.entry(key).or_insert(scope);
    }
    scopes
}

/// Observes one app: its tracker, every rendered and tracked object, and dry runs where needed.
pub async fn observe_app(
    cluster: &Cluster,
    store: &TrackerStore<'_>,
    desired: DesiredApp,
    field_manager: &str,
) -> AppObservation {
    let (tracker, tracker_error) = match store.read(&desired.app).await {
        Ok(tracker) => (tracker, None),
        Err(error) => (None, Some(error.to_string())),
    };
    let mut live = LiveObjects::default();
    if desired.is_blocked() {
        return AppObservation {
            desired,
            live,
            tracker,
            tracker_error,
            apply: ApplyNeeds::Observation,
        };
    }
    let created_kinds = crd_kinds(desired.objects.iter().map(|object| &object.object));
    for object in &desired.objects {
        let object_ref = &object.object_ref;
        let resolved = match cluster
            .resolve(&object_ref.api_version, &object_ref.kind)
            .await
        {
            Ok(Some(resolved)) => resolved,
            Ok(None) => {
                let observed = if created_kinds
                    .contains_key(&(object_ref.api_version.clone(), object_ref.kind.clone()))
                {
                    // Its CRD is created by this very app: the object is created after it.
                    Observed::Absent
                } else {
                    Observed::Failed(not_served(object_ref))
                };
                live.objects.insert(object_ref.clone(), observed);
                continue;
            }
            Err(error) => {
                live.objects
                    .insert(object_ref.clone(), Observed::Failed(describe_error(&error)));
                continue;
            }
        };
        let observed = match read(cluster, &resolved, object_ref).await {
            Err(message) => Observed::Failed(message),
            Ok(None) => Observed::Absent,
            Ok(Some(live_object)) => {
                let facts = object.facts();
                let admission =
                    ownership::admit(&desired.app, Some(&live_object), &facts, &desired.policies);
                let recorded = tracker
                    .as_ref()
                    .and_then(|tracker| tracker.applied(object_ref));
                let unchanged_since_apply = recorded.is_some_and(|entry| {
                    entry.hash == object.hash
                        && (entry.resource_version.as_deref()
                            == live_object
                                .pointer("/metadata/resourceVersion")
                                .and_then(Value::as_str)
                            // The resourceVersion also moves when only `status` changed (a
                            // Deployment's controller writes it after every apply), which
                            // would cost a dry run per workload on every plan. With the desired
                            // state the one last applied, a live object that still holds every
                            // rendered field as rendered has nothing to apply; the planner
                            // compares it the same way (projected), so both agree.
                            || crate::diff::projected_equal(&live_object, &object.object))
                });
                if admission != Admission::Write || unchanged_since_apply {
                    Observed::Present {
                        live: live_object,
                        dry_run: None,
                    }
                } else {
                    match dry_run(
                        cluster,
                        &resolved,
                        object_ref,
                        &object.object,
                        field_manager,
                    )
                    .await
                    {
                        Ok(dry_run) => Observed::Present {
                            live: live_object,
                            dry_run: Some(dry_run),
                        },
                        Err(message) => Observed::Failed(format!("dry run: {message}")),
                    }
                }
            }
        };
        live.objects.insert(object_ref.clone(), observed);
    }
    if let Some(tracker) = &tracker {
        let desired_refs: BTreeSet<&ObjectRef> = desired
            .objects
            .iter()
            .map(|object| &object.object_ref)
            .collect();
        for object_ref in tracker.entries.keys() {
            if !desired_refs.contains(object_ref) {
                let observed = observe_tracked(cluster, object_ref).await;
                live.objects.insert(object_ref.clone(), observed);
            }
        }
    }
    AppObservation {
        desired,
        live,
        tracker,
        tracker_error,
        apply: ApplyNeeds::Observation,
    }
}

/// Observes the apps whose trackers (of this source, among `trackers`: every tracker of the
/// cluster, see [`TrackerStore::list_and_keep`]) list them but which are no longer rendered.
pub async fn observe_orphans(
    cluster: &Cluster,
    trackers: BTreeMap<AppRef, TrackerRecord>,
    rendered: &BTreeSet<AppRef>,
    source: Option<&str>,
) -> Vec<OrphanObservation> {
    let mut orphans = Vec::new();
    for (app, tracker) in trackers {
        // Apps applied from another source, or with no source recorded, are not ours to delete.
        if rendered.contains(&app) || source.is_none() || tracker.source.as_deref() != source {
            continue;
        }
        let mut live = LiveObjects::default();
        for object_ref in tracker.entries.keys() {
            live.objects.insert(
                object_ref.clone(),
                observe_tracked(cluster, object_ref).await,
            );
        }
        orphans.push(OrphanObservation { app, live, tracker });
    }
    orphans
}

/// Reads in bulk what observing these apps will read: their rendered objects and, with a
/// `tracker_namespace`, their trackers (see [`Cluster::prefetch`]; `None` when the store
/// already listed them). The reads of [`observe_app`] then take from that snapshot; call
/// [`Cluster::clear_prefetched`] when the observation is done.
pub async fn prefetch(
    cluster: &Cluster,
    apps: &[DesiredApp],
    tracker_namespace: Option<&str>,
) -> crate::cluster::PrefetchStats {
    let objects = apps
        .iter()
        .filter(|app| !app.is_blocked())
        .flat_map(|app| app.objects.iter().map(|object| object.object_ref.clone()));
    let trackers = tracker_namespace.into_iter().flat_map(|namespace| {
        apps.iter().map(move |app| ObjectRef {
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            namespace: Some(namespace.to_owned()),
            name: crate::tracker::tracker_name(&app.app),
        })
    });
    // A Vec, not an iterator of closures: the future must stay `Send` for the agent's tasks.
    let wanted: Vec<ObjectRef> = objects.chain(trackers).collect();
    let stats = cluster.prefetch(wanted).await;
    tracing::debug!(
        lists = stats.lists,
        requests = stats.requests,
        objects = stats.objects,
        "read live objects in bulk"
    );
    stats
}

/// The message of a kind the cluster does not serve.
pub fn not_served(object_ref: &ObjectRef) -> String {
    format!(
        "kind {} ({}) is not served by the cluster (CRD not installed?)",
        object_ref.kind, object_ref.api_version
    )
}

/// Reads one object; `Ok(None)` when it does not exist.
///
/// # Errors
///
/// A description of the failed request.
pub async fn read(
    cluster: &Cluster,
    resolved: &Resolved,
    object_ref: &ObjectRef,
) -> Result<Option<Value>, String> {
    if let Some(prefetched) = cluster.take_prefetched(object_ref) {
        return Ok(prefetched);
    }
    let api = cluster.api(resolved, object_ref).await;
    match api.get_opt(&object_ref.name).await {
        Ok(None) => Ok(None),
        Ok(Some(mut object)) => {
            // As `Cluster::prefetch` does: plans never read them, and they are large.
            object.metadata.managed_fields = None;
            serde_json::to_value(object)
                .map(Some)
                .map_err(|error| error.to_string())
        }
        Err(error) => Err(describe_error(&error)),
    }
}

/// The server-side-apply dry run of a desired object: the live object as it would be after our
/// apply.
///
/// # Errors
///
/// A description of the failed request (admission rejections show up here).
pub async fn dry_run(
    cluster: &Cluster,
    resolved: &Resolved,
    object_ref: &ObjectRef,
    object: &Value,
    field_manager: &str,
) -> Result<Value, String> {
    match crate::writer::dry_run_apply(cluster, resolved, object_ref, object, field_manager).await {
        Ok(mut object) => {
            object.metadata.managed_fields = None;
            serde_json::to_value(object).map_err(|error| error.to_string())
        }
        Err(error) => Err(describe_error(&error)),
    }
}

async fn observe_tracked(cluster: &Cluster, object_ref: &ObjectRef) -> Observed {
    match cluster
        .resolve(&object_ref.api_version, &object_ref.kind)
        .await
    {
        // A kind no longer served has no objects left: nothing to prune.
        Ok(None) => Observed::Absent,
        Err(error) => Observed::Failed(describe_error(&error)),
        Ok(Some(resolved)) => match read(cluster, &resolved, object_ref).await {
            Ok(Some(live)) => Observed::Present {
                live,
                dry_run: None,
            },
            Ok(None) => Observed::Absent,
            Err(message) => Observed::Failed(message),
        },
    }
}

/// The kinds served by the CRDs among some objects, with their scope, keyed by
/// `(apiVersion, kind)` for every version the CRD serves.
pub fn crd_kinds<'a>(
    objects: impl Iterator<Item = &'a Value>,
) -> BTreeMap<(String, String), Scope> {
    let mut kinds = BTreeMap::new();
    for object in objects {
        let is_crd = object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
            && object
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|api_version| api_version.starts_with("apiextensions.k8s.io/"));
        if !is_crd {
            continue;
        }
        let spec = object.get("spec");
        let text = |pointer: &str| {
            spec.and_then(|spec| spec.pointer(pointer))
                .and_then(Value::as_str)
        };
        let (Some(group), Some(kind)) = (text("/group"), text("/names/kind")) else {
            continue;
        };
        let scope = if text("/scope") == Some("Cluster") {
            Scope::Cluster
        } else {
            Scope::Namespaced
        };
        let versions = spec
            .and_then(|spec| spec.get("versions"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|version| version.get("name").and_then(Value::as_str));
        for version in versions {
            kinds.insert((format!("{group}/{version}"), kind.to_owned()), scope);
        }
    }
    kinds
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crd_kinds_lists_every_served_version_with_its_scope() {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Widget", "plural": "widgets"},
                     "versions": [{"name": "v1"}, {"name": "v2"}]}
        });
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        let kinds = crd_kinds([&crd, &other].into_iter());
        assert_eq!(
            kinds.into_iter().collect::<Vec<_>>(),
            vec![
                (
                    ("example.com/v1".to_owned(), "Widget".to_owned()),
                    Scope::Cluster
                ),
                (
                    ("example.com/v2".to_owned(), "Widget".to_owned()),
                    Scope::Cluster
                ),
            ]
        );
    }

    #[test]
    fn cluster_version_keeps_the_minor_versions_leading_digits() {
        let managed = cluster_version_of("1", "29+", "v1.29.8-eks-a737599", "linux/arm64");
        assert_eq!(
            managed,
            analyzer::ClusterVersion {
                major: "1".to_owned(),
                minor: 29,
                git_version: "v1.29.8-eks-a737599".to_owned(),
                platform: "linux/arm64".to_owned(),
            }
        );
        assert_eq!(
            cluster_version_of("", "", "v0.0.0-master", "linux/amd64").minor,
            0
        );
    }
}
