//! The planner: pairs desired and live objects and decides each object's action. Pure — it takes
//! what `observe` learned as data ([`LiveObjects`], the [`TrackerRecord`]) and returns an
//! [`AppPlan`]; no client, no clock.
//!
//! Pairing follows gitops-engine's `Reconcile`: desired objects are keyed by [`ObjectRef`] (with
//! the namespace fixed by the kind's scope), live objects are looked up by the same key, and
//! tracked objects without a desired counterpart are the prune candidates.
//!
//! Comparison (see `diff`): with a server-side-apply dry-run result, the dry run is compared with
//! the live object; without one, the live object cut down to the rendered fields is compared with
//! the render. When the tracker records the same desired hash and the live object still has the
//! resourceVersion we left it at, nothing can have changed and the object is unchanged without
//! any dry run — the cost of a plan follows what changed.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::model::Policy;
use analyzer::{AppRef, AppRender, Diagnostic, RenderedObject};
use serde_json::Value;
use sha2::Digest;

use crate::diff;
use crate::ownership::{self, Admission};
use crate::plan::{Action, AppPlan, Change, ObjectRef, Plan, PlanTarget, Scope};
use crate::policy::{ApplyOnceMoment, GcStrategy, ObjectFacts, ResourcePolicies};
use crate::tracker::TrackerRecord;

/// The rule of the error that blocks an app writing into the tracker namespace.
pub const RULE_RESERVED_NAMESPACE: &str = "reserved-namespace";

/// One object the app wants, ready to plan and apply.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredObject {
    /// The identity, namespace fixed by scope.
    pub object_ref: ObjectRef,
    pub component: String,
    /// The component's type, for the workload only.
    pub component_type: Option<String>,
    /// `None` for the workload (see `RenderedObject::trait_type`).
    pub trait_type: Option<String>,
    /// The `outputs` key of an auxiliary object (what health CUE sees in `context.outputs`).
    pub output_name: Option<String>,
    /// The rendered object with our ownership marks, as it will be applied.
    pub object: Value,
    /// SHA-256 of `object` as JSON (hex).
    pub hash: String,
}

/// Everything one app wants.
#[derive(Debug, Clone)]
pub struct DesiredApp {
    pub app: AppRef,
    pub revision: Option<String>,
    /// In render order.
    pub objects: Vec<DesiredObject>,
    pub policies: ResourcePolicies,
    /// The render's diagnostics plus ours (bad policies, duplicate objects).
    pub diagnostics: Vec<Diagnostic>,
}

/// What observing the cluster found for one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    Absent,
    Present {
        live: Value,
        /// The server-side-apply dry-run result, when one was made.
        dry_run: Option<Value>,
    },
    /// Reading or dry-running it failed; the message says why.
    Failed(String),
}

/// What observing the cluster found for one app's objects (desired and tracked). An object
/// missing from the map is absent (an empty cluster).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveObjects {
    pub objects: BTreeMap<ObjectRef, Observed>,
}

/// Knobs of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanOptions {
    /// The target cluster's name, copied into every change.
    pub cluster: String,
    pub prune: Prune,
    /// Whether missing namespaces of the apps' objects are planned for creation
    /// (`crate::namespaces`; the planner itself does not look at it).
    pub create_namespaces: crate::namespaces::CreateNamespaces,
}

/// Whether objects dropped from the render are deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    Allowed,
    Disabled,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            cluster: "local".to_owned(),
            prune: Prune::Allowed,
            create_namespaces: crate::namespaces::CreateNamespaces::default(),
        }
    }
}

impl DesiredObject {
    /// The facts policy selectors look at.
    pub fn facts(&self) -> ObjectFacts<'_> {
        ObjectFacts {
            component: &self.component,
            component_type: self.component_type.as_deref(),
            trait_type: self.trait_type.as_deref(),
            kind: &self.object_ref.kind,
            name: &self.object_ref.name,
        }
    }
}

impl DesiredApp {
    /// Builds the desired objects of a rendered app: fixes namespaces by scope (`scope_of` maps
    /// `(apiVersion, kind)` to the kind's scope, `None` when unknown: the namespace is then kept
    /// as rendered), adds ownership marks, hashes, and parses the resource policies. Two objects
    /// with the same identity are a `duplicate-object` error. The rendered objects are copied,
    /// or parsed when the render holds them packed ([`analyzer::CachedApp`]: one app's objects
    /// as values at a time, the desired objects of the group being planned).
    pub fn from_rendered<A: AppRender + ?Sized>(
        rendered: &A,
        policies: &[Policy],
        revision: Option<String>,
        scope_of: &dyn Fn(&str, &str) -> Option<Scope>,
    ) -> DesiredApp {
        let objects = if rendered.is_blocked() {
            Vec::new()
        } else {
            rendered.objects().into_owned()
        };
        DesiredApp::from_rendered_objects(rendered, objects, policies, revision, scope_of)
    }

    /// [`DesiredApp::from_rendered`] with the rendered objects given apart, moved rather than
    /// copied: a caller that needs the render no more (the CLI's plan and apply) does not hold
    /// every object of 10,000 apps twice. `rendered` gives the app, its diagnostics and whether
    /// it is blocked; its own `objects` are not read.
    pub fn from_rendered_objects<A: AppRender + ?Sized>(
        rendered: &A,
        rendered_objects: Vec<RenderedObject>,
        policies: &[Policy],
        revision: Option<String>,
        scope_of: &dyn Fn(&str, &str) -> Option<Scope>,
    ) -> DesiredApp {
        let app = rendered.app();
        let (policies, mut diagnostics) = ResourcePolicies::from_policies(app, policies);
        diagnostics.splice(0..0, rendered.diagnostics().iter().cloned());
        let mut objects = Vec::new();
        let mut seen = BTreeSet::new();
        if !rendered.is_blocked() {
            for rendered_object in rendered_objects {
                let object_ref = match ObjectRef::from_object(&rendered_object.object) {
                    Ok(object_ref) => object_ref,
                    Err(error) => {
                        diagnostics.push(
                            Diagnostic::error(
                                "invalid-object",
                                format!("a rendered object is not valid: {error}"),
                                None,
                            )
                            .for_app(app)
                            .for_component(&rendered_object.component),
                        );
                        continue;
                    }
                };
                let RenderedObject {
                    component,
                    trait_type,
                    output_name,
                    mut object,
                } = rendered_object;
                let object_ref = match scope_of(&object_ref.api_version, &object_ref.kind) {
                    Some(scope) => {
                        let fixed = object_ref.with_scope(scope, &app.namespace);
                        set_namespace(&mut object, fixed.namespace.as_deref());
                        fixed
                    }
                    None => object_ref,
                };
                if !seen.insert(object_ref.clone()) {
                    diagnostics.push(
                        Diagnostic::error(
                            "duplicate-object",
                            format!("{object_ref} is rendered more than once"),
                            None,
                        )
                        .for_app(app)
                        .for_component(&component),
                    );
                    continue;
                }
                ownership::mark(&mut object, app);
                let component_type = match trait_type {
                    None => object
                        .pointer("/metadata/labels/workload.oam.dev~1type")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    Some(_) => None,
                };
                objects.push(DesiredObject {
                    hash: hash_object(&object),
                    object_ref,
                    component,
                    component_type,
                    trait_type,
                    output_name,
                    object,
                });
            }
        }
        DesiredApp {
            app: app.clone(),
            revision,
            objects,
            policies,
            diagnostics,
        }
    }

    /// Blocks the app when it renders the Namespace `reserved` (the tracker namespace, which
    /// holds every app's ownership records), an object in it, or anything there that looks
    /// like one of Driftless's records: no app may create, change or delete them. The one
    /// exception: trackers kept in the app's own namespace (`--tracker-namespace` set to it)
    /// leave the app its ordinary objects there, never a record. The error names each object.
    pub fn refuse_reserved_namespace(&mut self, reserved: &str) {
        let own_namespace = self.app.namespace == reserved;
        let offending: Vec<String> = self
            .objects
            .iter()
            .filter(|object| {
                let object_ref = &object.object_ref;
                let is_reserved_namespace = object_ref.kind == "Namespace"
                    && object_ref.group().is_empty()
                    && object_ref.name == reserved;
                let inside = object_ref.namespace.as_deref() == Some(reserved);
                is_reserved_namespace || (inside && (!own_namespace || looks_like_a_record(object)))
            })
            .map(|object| object.object_ref.to_string())
            .collect();
        if offending.is_empty() {
            return;
        }
        self.diagnostics.push(
            Diagnostic::error(
                RULE_RESERVED_NAMESPACE,
                format!(
                    "namespace {reserved} is reserved for Driftless's resource trackers; no app may write there: {} (render the objects into another namespace)",
                    offending.join(", ")
                ),
                None,
            )
            .for_app(&self.app),
        );
    }

    /// True when any diagnostic is an error: such an app is planned with no changes at all (and
    /// in particular no prune).
    pub fn is_blocked(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|diagnostic| diagnostic.severity == analyzer::Severity::Error)
    }
}

/// A ConfigMap named or labelled like Driftless's records in the tracker namespace: trackers
/// (`<namespace>.<app>`), workflow states, placement records and prune approvals
/// (`driftless-*`), each labelled `driftless.dev/...`.
fn looks_like_a_record(object: &DesiredObject) -> bool {
    if object.object_ref.kind != "ConfigMap" {
        return false;
    }
    let name = &object.object_ref.name;
    let labelled = object
        .object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_some_and(|labels| labels.keys().any(|key| key.starts_with("driftless.dev/")));
    name.contains('.') || name.starts_with("driftless-") || labelled
}

/// The well-known cluster-scoped kinds, for planning without a cluster (no discovery). Kinds not
/// listed are taken as namespaced.
pub fn builtin_scope(api_version: &str, kind: &str) -> Option<Scope> {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let cluster = matches!(
        (group, kind),
        ("", "Namespace" | "Node" | "PersistentVolume")
            | (
                "rbac.authorization.k8s.io",
                "ClusterRole" | "ClusterRoleBinding"
            )
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | (
                "storage.k8s.io",
                "StorageClass" | "CSIDriver" | "VolumeAttachment"
            )
            | ("scheduling.k8s.io", "PriorityClass")
            | ("networking.k8s.io", "IngressClass")
            | ("node.k8s.io", "RuntimeClass")
            | ("apiregistration.k8s.io", "APIService")
            | (
                "admissionregistration.k8s.io",
                "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"
            )
    );
    Some(if cluster {
        Scope::Cluster
    } else {
        Scope::Namespaced
    })
}

/// SHA-256 of an object's JSON text, hex. `serde_json` keeps insertion order and the render's
/// order is deterministic, so equal renders hash equal.
pub fn hash_object(object: &Value) -> String {
    let bytes = serde_json::to_vec(object).expect("a JSON value always serialises");
    hex::encode(sha2::Sha256::digest(&bytes))
}

/// The apply order of a kind: Namespaces and CRDs first, then Helm's install order, custom
/// resources last. Deletions run in the reverse order.
pub fn kind_rank(kind: &str) -> usize {
    const ORDER: &[&str] = &[
        "Namespace",
        "CustomResourceDefinition",
        "NetworkPolicy",
        "ResourceQuota",
        "LimitRange",
        "PodDisruptionBudget",
        "ServiceAccount",
        "Secret",
        "ConfigMap",
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "DaemonSet",
        "Pod",
        "ReplicationController",
        "ReplicaSet",
        "Deployment",
        "HorizontalPodAutoscaler",
        "StatefulSet",
        "Job",
        "CronJob",
        "IngressClass",
        "Ingress",
        "APIService",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ];
    ORDER
        .iter()
        .position(|known| *known == kind)
        .unwrap_or(ORDER.len())
}

/// Plans one app against what was observed.
pub fn plan_app(
    desired: &DesiredApp,
    live: &LiveObjects,
    tracker: Option<&TrackerRecord>,
    options: &PlanOptions,
) -> AppPlan {
    let mut plan = AppPlan {
        app: desired.app.clone(),
        revision: desired.revision.clone(),
        changes: Vec::new(),
        diagnostics: desired.diagnostics.clone(),
        health: None,
        digest: None,
    };
    if desired.is_blocked() {
        return plan;
    }
    let change = |action, object: &ObjectRef, diff: String, reason: Option<String>| {
        new_change(&options.cluster, action, object, diff, reason)
    };
    let mut writes = Vec::new();
    for desired_object in apply_order(&desired.objects) {
        let object_ref = &desired_object.object_ref;
        let observed = live.objects.get(object_ref).unwrap_or(&Observed::Absent);
        let (live_object, dry_run) = match observed {
            Observed::Absent => (None, None),
            Observed::Present { live, dry_run } => (Some(live), dry_run.as_ref()),
            Observed::Failed(message) => {
                plan.diagnostics
                    .push(object_error(&desired.app, desired_object, message));
                continue;
            }
        };
        let facts = desired_object.facts();
        match ownership::admit(&desired.app, live_object, &facts, &desired.policies) {
            Admission::Create => writes.push(change(
                Action::Create,
                object_ref,
                diff::to_yaml(&desired_object.object),
                None,
            )),
            Admission::Skip(reason) => writes.push(change(
                Action::Unchanged,
                object_ref,
                String::new(),
                Some(reason),
            )),
            Admission::Conflict(reason) | Admission::Missing(reason) => writes.push(change(
                Action::Conflict,
                object_ref,
                String::new(),
                Some(reason),
            )),
            Admission::Write => {
                let Some(live_object) = live_object else {
                    continue;
                };
                let write = Write {
                    desired_object,
                    facts: &facts,
                    live_object,
                    dry_run,
                };
                writes.push(update_change(desired, write, tracker, &options.cluster));
            }
        }
    }
    if options.prune == Prune::Allowed
        && let Some(tracker) = tracker
    {
        let desired_refs: BTreeSet<&ObjectRef> = desired
            .objects
            .iter()
            .map(|object| &object.object_ref)
            .collect();
        let prunes = prune_changes(
            &desired.app,
            tracker,
            live,
            options,
            PruneCause::Update(&desired.policies),
            &|object_ref| !desired_refs.contains(object_ref),
            &mut plan.diagnostics,
        );
        plan.changes.extend(prunes);
    }
    plan.changes.extend(writes);
    // An object that could not be observed blocks the whole app, as a render error does: the
    // apply would stop there anyway, and a plan listing the rest would promise changes that
    // will not happen.
    if plan.diagnostics.len() > desired.diagnostics.len() {
        plan.changes.clear();
    } else {
        plan.digest = Some(crate::digest::app_digest(desired, live));
    }
    plan
}

/// A change of `object` on `cluster`, with no changed fields named.
fn new_change(
    cluster: &str,
    action: Action,
    object: &ObjectRef,
    diff: String,
    reason: Option<String>,
) -> Change {
    Change {
        action,
        cluster: cluster.to_owned(),
        object: object.clone(),
        diff,
        changed_fields: Vec::new(),
        reason,
    }
}

/// An object of ours, present, that the app may write.
struct Write<'a> {
    desired_object: &'a DesiredObject,
    facts: &'a ObjectFacts<'a>,
    live_object: &'a Value,
    dry_run: Option<&'a Value>,
}

/// The change to an object the app may write: an update with its diff (against the server's
/// dry run when there is one, else the desired object projected on the live one), or
/// unchanged (the same object applied and untouched since, or drift allowed by `apply-once`).
fn update_change(
    desired: &DesiredApp,
    write: Write<'_>,
    tracker: Option<&TrackerRecord>,
    cluster: &str,
) -> Change {
    let change = |action, object: &ObjectRef, diff: String, reason: Option<String>| {
        new_change(cluster, action, object, diff, reason)
    };
    let Write {
        desired_object,
        facts,
        live_object,
        dry_run,
    } = write;
    let object_ref = &desired_object.object_ref;
    let recorded = tracker.and_then(|tracker| tracker.applied(object_ref));
    let same_desired = recorded.is_some_and(|entry| entry.hash == desired_object.hash);
    let moment = if same_desired {
        ApplyOnceMoment::StateKeep
    } else {
        ApplyOnceMoment::Update
    };
    let drift_paths = desired.policies.drift_allowed(facts, moment);
    if drift_paths.iter().any(|path| path == "*") {
        return change(
            Action::Unchanged,
            object_ref,
            String::new(),
            Some("exists; drift allowed (apply-once policy)".to_owned()),
        );
    }
    let unchanged_since_apply = same_desired
        && recorded.and_then(|entry| entry.resource_version.as_deref())
            == resource_version(live_object);
    let object_diff = match dry_run {
        Some(dry_run) => {
            let mut dry_run = dry_run.clone();
            keep_live_paths(&mut dry_run, live_object, &drift_paths);
            diff::diff_server_side(live_object, &dry_run)
        }
        None if unchanged_since_apply => None,
        None => {
            let mut desired_value = desired_object.object.clone();
            keep_live_paths(&mut desired_value, live_object, &drift_paths);
            diff::diff_projected(live_object, &desired_value)
        }
    };
    match object_diff {
        None => change(Action::Unchanged, object_ref, String::new(), None),
        Some(object_diff) => Change {
            changed_fields: object_diff.changed_fields,
            ..change(Action::Update, object_ref, object_diff.unified, None)
        },
    }
}

/// Plans the deletion of an app that disappeared from its source: every tracked object is
/// deleted unless its recorded strategy is `never`.
pub fn plan_app_deletion(
    app: &AppRef,
    live: &LiveObjects,
    tracker: &TrackerRecord,
    options: &PlanOptions,
) -> AppPlan {
    let mut diagnostics = Vec::new();
    let changes = prune_changes(
        app,
        tracker,
        live,
        options,
        PruneCause::AppDeleted,
        &|_| true,
        &mut diagnostics,
    );
    AppPlan {
        app: app.clone(),
        revision: None,
        changes,
        diagnostics,
        health: None,
        digest: Some(crate::digest::deletion_digest(app, live)),
    }
}

/// Plans every app and resolves objects rendered by more than one app: when none of them owns
/// the live object yet, the first app (in app order) creates it and the others get a conflict
/// naming it.
pub fn plan_all(app_plans: Vec<AppPlan>, target: PlanTarget, diagnostics: Vec<Diagnostic>) -> Plan {
    let mut app_plans = app_plans;
    app_plans.sort_by(|a, b| a.app.cmp(&b.app));
    let mut creators: BTreeMap<(String, ObjectRef), AppRef> = BTreeMap::new();
    for app_plan in &mut app_plans {
        for change in &mut app_plan.changes {
            if change.action != Action::Create {
                continue;
            }
            let key = (change.cluster.clone(), change.object.clone());
            match creators.get(&key) {
                Some(first) => {
                    change.action = Action::Conflict;
                    change.reason = Some(format!("also rendered by app {first}, which creates it"));
                    change.diff.clear();
                }
                None => {
                    creators.insert(key, app_plan.app.clone());
                }
            }
        }
    }
    Plan {
        target,
        apps: app_plans,
        diagnostics,
    }
}

/// Sets the paths an `apply-once` policy lets drift to their live values (removing them when the
/// live object has none), so neither the diff nor the apply touches them.
pub fn keep_live_paths(desired: &mut Value, live: &Value, paths: &[String]) {
    for path in paths {
        let segments: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
        let Some((last, parents)) = segments.split_last() else {
            continue;
        };
        let live_value = segments
            .iter()
            .try_fold(live, |value, segment| value.get(*segment));
        let pointer: String = parents
            .iter()
            .map(|segment| format!("/{}", segment.replace('~', "~0").replace('/', "~1")))
            .collect();
        let Some(target) = desired.pointer_mut(&pointer) else {
            continue;
        };
        if let Some(map) = target.as_object_mut() {
            match live_value {
                Some(value) => {
                    map.insert((*last).to_owned(), value.clone());
                }
                None => {
                    map.remove(*last);
                }
            }
        }
    }
}

/// The order objects are applied in: by kind rank, then render order.
pub fn apply_order(objects: &[DesiredObject]) -> Vec<&DesiredObject> {
    let mut ordered: Vec<&DesiredObject> = objects.iter().collect();
    ordered.sort_by_key(|object| kind_rank(&object.object_ref.kind));
    ordered
}

enum PruneCause<'a> {
    /// The app is still rendered: the current policies decide.
    Update(&'a ResourcePolicies),
    /// The app is gone: the strategies recorded at apply time decide.
    AppDeleted,
}

fn prune_changes(
    app: &AppRef,
    tracker: &TrackerRecord,
    live: &LiveObjects,
    options: &PlanOptions,
    cause: PruneCause<'_>,
    is_candidate: &dyn Fn(&ObjectRef) -> bool,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Change> {
    let mut prunes = Vec::new();
    for (object_ref, entry) in &tracker.entries {
        if !is_candidate(object_ref) {
            continue;
        }
        let kept = match &cause {
            PruneCause::Update(policies) => {
                let (strategy, _) = policies.gc_for(&entry.facts(object_ref));
                if policies.garbage_collect.keep_legacy_resource {
                    Some("kept (garbage-collect keepLegacyResource)".to_owned())
                } else if strategy != GcStrategy::OnAppUpdate {
                    Some(format!(
                        "kept (garbage-collect strategy {})",
                        strategy_name(strategy)
                    ))
                } else {
                    None
                }
            }
            PruneCause::AppDeleted => (entry.gc == GcStrategy::Never)
                .then(|| "kept (garbage-collect strategy never)".to_owned()),
        };
        let observed = live.objects.get(object_ref).unwrap_or(&Observed::Absent);
        let live_object = match observed {
            Observed::Absent => continue,
            Observed::Failed(message) => {
                diagnostics.push(
                    Diagnostic::error("cluster-error", format!("{object_ref}: {message}"), None)
                        .for_app(app),
                );
                continue;
            }
            Observed::Present { live, .. } => live,
        };
        let change = |action, diff: String, reason: Option<String>| Change {
            action,
            cluster: options.cluster.clone(),
            object: object_ref.clone(),
            diff,
            changed_fields: Vec::new(),
            reason,
        };
        if let Some(reason) = kept {
            prunes.push(change(Action::Unchanged, String::new(), Some(reason)));
        } else if prune_disabled_by_annotation(live_object) {
            prunes.push(change(
                Action::Unchanged,
                String::new(),
                Some(format!("kept (annotated {PRUNE_ANNOTATION}: \"false\")")),
            ));
        } else if ownership::carries_marks_of(live_object, app) {
            prunes.push(change(
                Action::Delete,
                diff::to_yaml(&diff::normalize(live_object)),
                None,
            ));
        } else {
            prunes.push(change(
                Action::Unchanged,
                String::new(),
                Some("not pruned: no longer carries this app's ownership marks".to_owned()),
            ));
        }
    }
    // Deletions run in reverse apply order: workloads before the namespaces they live in.
    prunes.sort_by_key(|change| std::cmp::Reverse(kind_rank(&change.object.kind)));
    prunes
}

/// The annotation that keeps an object from ever being pruned when set to `"false"`.
pub const PRUNE_ANNOTATION: &str = "driftless.dev/prune";

/// Whether the live object says it must never be pruned (`driftless.dev/prune: "false"`),
/// whoever set it: a person protecting an object by hand.
fn prune_disabled_by_annotation(live: &Value) -> bool {
    live.pointer("/metadata/annotations/driftless.dev~1prune")
        .and_then(Value::as_str)
        .is_some_and(|value| value.eq_ignore_ascii_case("false"))
}

fn strategy_name(strategy: GcStrategy) -> &'static str {
    match strategy {
        GcStrategy::OnAppUpdate => "onAppUpdate",
        GcStrategy::OnAppDelete => "onAppDelete",
        GcStrategy::Never => "never",
    }
}

fn object_error(app: &AppRef, object: &DesiredObject, message: &str) -> Diagnostic {
    Diagnostic::error(
        "cluster-error",
        format!("{}: {message}", object.object_ref),
        None,
    )
    .for_app(app)
    .for_component(&object.component)
}

fn resource_version(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

fn set_namespace(object: &mut Value, namespace: Option<&str>) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    match namespace {
        Some(namespace) => {
            metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
        }
        None => {
            metadata.remove("namespace");
        }
    }
}

#[cfg(test)]
mod tests;
