//! KubeVela's labels, annotations, names and namespaces on rendered objects
//! (kubevela-render-semantics.md §3): stage A (`makeWorkloadWithContext`) adds the render
//! labels, stage B (`SetOAMContract`) the OAM contract.

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::trait_name::generated_trait_name;

/// What the labels are made of, per component.
#[derive(Debug, Clone)]
pub(crate) struct LabelContext<'a> {
    pub(crate) app_name: &'a str,
    pub(crate) app_namespace: &'a str,
    pub(crate) app_labels: &'a IndexMap<String, String>,
    pub(crate) app_annotations: &'a IndexMap<String, String>,
    pub(crate) component: &'a str,
    pub(crate) component_type: &'a str,
    /// The app revision's name: `""` offline, unless the manifest carries a
    /// `status.latestRevision` (see [`super::context::app_revision`]).
    pub(crate) app_revision: &'a str,
}

/// Which object of a component.
#[derive(Debug, Clone)]
pub(crate) enum ObjectRole<'a> {
    Workload,
    /// A component `outputs` entry (`trait_type` = `AuxiliaryWorkload`) or a trait output.
    Auxiliary {
        trait_type: &'a str,
        resource: &'a str,
        /// `spec.workloadRefPath` of the trait, with the workload it must point at.
        workload_ref: Option<(&'a str, &'a Value)>,
    },
}

/// Annotations that never reach an object (`SetOAMContract` deletes them).
const REMOVED_ANNOTATIONS: &[&str] = &[
    "app.oam.dev/inplace-upgrade",
    "filter.oam.dev/label-keys",
    "filter.oam.dev/annotation-keys",
    "kubectl.kubernetes.io/last-applied-configuration",
];

const NAME: &str = "app.oam.dev/name";
const NAMESPACE: &str = "app.oam.dev/namespace";
const COMPONENT: &str = "app.oam.dev/component";
const APP_REVISION: &str = "app.oam.dev/appRevision";

/// Adds labels, annotations, name and namespace to one rendered object.
pub(crate) fn apply_contract(object: &mut Value, ctx: &LabelContext<'_>, role: &ObjectRole<'_>) {
    let Some(root) = object.as_object_mut() else {
        return;
    };
    let metadata = object_entry(root, "metadata");
    // Stage A: render labels, overriding what the template set.
    let labels = object_entry(metadata, "labels");
    let mut set = |key: &str, value: &str| {
        labels.insert(key.to_owned(), Value::String(value.to_owned()));
    };
    set(NAME, ctx.app_name);
    set(COMPONENT, ctx.component);
    set(APP_REVISION, ctx.app_revision);
    match role {
        ObjectRole::Workload => set("workload.oam.dev/type", ctx.component_type),
        ObjectRole::Auxiliary {
            trait_type,
            resource,
            ..
        } => {
            set("trait.oam.dev/type", trait_type);
            set("trait.oam.dev/resource", resource);
        }
    }
    // KubeVela names an unnamed trait output here, from the object as the render left it
    // (`assembleTrait` runs before the contract's labels and annotations).
    let generated_name = match role {
        ObjectRole::Auxiliary { trait_type, .. } if !has_name(metadata) => {
            Some(generated_trait_name(
                ctx.component,
                trait_type,
                &Value::Object(without_app_revision(root)),
            ))
        }
        _ => None,
    };
    let metadata = object_entry(root, "metadata");
    let labels = object_entry(metadata, "labels");
    let mut set = |key: &str, value: &str| {
        labels.insert(key.to_owned(), Value::String(value.to_owned()));
    };
    // Stage B: the OAM contract. Its common labels are the app's labels with the name,
    // namespace, revision and component forced, then the keys filtered out; set in that order
    // (a key already there keeps its place). Name, revision and component were just set to
    // those same values, so setting them again changes nothing and is skipped.
    let filtered_labels = listed_keys(ctx.app_annotations, "filter.oam.dev/label-keys");
    let resource_type = match role {
        ObjectRole::Workload => "WORKLOAD",
        ObjectRole::Auxiliary { .. } => "TRAIT",
    };
    set("app.oam.dev/resourceType", resource_type);
    for (key, value) in ctx.app_labels {
        if [NAME, COMPONENT, APP_REVISION].contains(&key.as_str())
            || filtered_labels.contains(&key.as_str())
        {
            continue;
        }
        set(
            key,
            if key == NAMESPACE {
                ctx.app_namespace
            } else {
                value
            },
        );
    }
    if !ctx.app_labels.contains_key(NAMESPACE) && !filtered_labels.contains(&NAMESPACE) {
        set(NAMESPACE, ctx.app_namespace);
    }
    {
        let filtered_annotations =
            listed_keys(ctx.app_annotations, "filter.oam.dev/annotation-keys");
        // Always present, even empty: KubeVela's app annotation map is never nil.
        let annotations = object_entry(metadata, "annotations");
        for (key, value) in ctx.app_annotations {
            annotations.insert(key.clone(), Value::String(value.clone()));
        }
        annotations.retain(|key, _| {
            !REMOVED_ANNOTATIONS.contains(&key.as_str())
                && !filtered_annotations.contains(&key.as_str())
        });
    }
    if !has_name(metadata) {
        let name = generated_name.unwrap_or_else(|| ctx.component.to_owned());
        let metadata = object_entry(root, "metadata");
        metadata.insert("name".to_owned(), Value::String(name));
    }
    let is_namespace_kind = root.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && root.get("kind").and_then(Value::as_str) == Some("Namespace");
    let metadata = object_entry(root, "metadata");
    let has_namespace = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty());
    if !has_namespace && !is_namespace_kind {
        metadata.insert(
            "namespace".to_owned(),
            Value::String(ctx.app_namespace.to_owned()),
        );
    }
    if let ObjectRole::Auxiliary {
        workload_ref: Some((path, workload)),
        ..
    } = role
    {
        set_workload_ref(root, path, workload);
    }
}

/// Labels, name and namespace of an object rendered by a custom policy: only the stage-A
/// common labels (the component label holds the policy name), the policy name when the object
/// has no name, the app namespace when it has none, and no annotations
/// (kubevela-render-semantics.md §3, last paragraph).
pub(crate) fn apply_policy_labels(
    object: &mut Value,
    app_name: &str,
    app_namespace: &str,
    policy: &str,
) {
    let Some(root) = object.as_object_mut() else {
        return;
    };
    let metadata = object_entry(root, "metadata");
    {
        let labels = object_entry(metadata, "labels");
        for (key, value) in [
            ("app.oam.dev/name", app_name),
            ("app.oam.dev/component", policy),
            ("app.oam.dev/appRevision", ""),
        ] {
            labels.insert(key.to_owned(), Value::String(value.to_owned()));
        }
    }
    for (key, value) in [("name", policy), ("namespace", app_namespace)] {
        let missing = metadata
            .get(key)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if missing {
            metadata.insert(key.to_owned(), Value::String(value.to_owned()));
        }
    }
}

/// `type@v2` → `type-v2`, KubeVela's `ConvertDefinitionRevName`, for labels and headers.
pub(crate) fn trait_type_label(trait_type: &str) -> String {
    trait_type.replacen('@', "-", 1)
}

pub(crate) fn object_entry<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
) -> &'a mut Map<String, Value> {
    let entry = object
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => map,
        _ => unreachable!("the entry was just made an object"),
    }
}

fn listed_keys<'a>(annotations: &'a IndexMap<String, String>, key: &str) -> Vec<&'a str> {
    annotations
        .get(key)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn has_name(metadata: &Map<String, Value>) -> bool {
    metadata
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|name| !name.is_empty())
}

/// The object without its `app.oam.dev/appRevision` label, which KubeVela leaves out of the
/// generated name's hash.
fn without_app_revision(root: &Map<String, Value>) -> Map<String, Value> {
    let mut copy = root.clone();
    if let Some(Value::Object(labels)) = copy
        .get_mut("metadata")
        .and_then(|metadata| metadata.get_mut("labels"))
    {
        labels.shift_remove("app.oam.dev/appRevision");
    }
    copy
}

fn set_workload_ref(root: &mut Map<String, Value>, path: &str, workload: &Value) {
    let reference = serde_json::json!({
        "apiVersion": workload.get("apiVersion").cloned().unwrap_or_default(),
        "kind": workload.get("kind").cloned().unwrap_or_default(),
        "name": workload.pointer("/metadata/name").cloned().unwrap_or_default(),
    });
    let segments: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut current = root;
    for segment in parents {
        current = object_entry(current, segment);
    }
    current.insert((*last).to_owned(), reference);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx<'a>(
        labels: &'a IndexMap<String, String>,
        annotations: &'a IndexMap<String, String>,
    ) -> LabelContext<'a> {
        LabelContext {
            app_name: "demo",
            app_namespace: "team-a",
            app_labels: labels,
            app_annotations: annotations,
            component: "web",
            component_type: "webservice",
            app_revision: "",
        }
    }

    #[test]
    fn workload_gets_the_oam_contract() {
        let labels = IndexMap::from([("team".to_owned(), "a".to_owned())]);
        let annotations = IndexMap::new();
        let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"labels": {"app.oam.dev/name": "x"}}});
        apply_contract(
            &mut object,
            &ctx(&labels, &annotations),
            &ObjectRole::Workload,
        );
        assert_eq!(
            object,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
                "labels": {
                    "app.oam.dev/name": "demo",
                    "app.oam.dev/component": "web",
                    "app.oam.dev/appRevision": "",
                    "workload.oam.dev/type": "webservice",
                    "app.oam.dev/resourceType": "WORKLOAD",
                    "team": "a",
                    "app.oam.dev/namespace": "team-a"
                },
                "annotations": {},
                "name": "web",
                "namespace": "team-a"
            }})
        );
    }

    /// The labels in order, as KubeVela sets them: stage A's, then the common labels (the
    /// app's labels with name, namespace, revision and component forced, then filtered),
    /// computed here the plain way, on app labels that hold forced keys in several places,
    /// with and without filters.
    #[test]
    fn labels_are_set_in_kubevela_order() {
        let app_labels = IndexMap::from([
            ("app.oam.dev/namespace".to_owned(), "mine".to_owned()),
            ("team".to_owned(), "a".to_owned()),
            ("app.oam.dev/name".to_owned(), "other".to_owned()),
            ("secret".to_owned(), "x".to_owned()),
            ("app.oam.dev/resourceType".to_owned(), "odd".to_owned()),
        ]);
        for filter in [
            "",
            "secret",
            "app.oam.dev/namespace",
            "app.oam.dev/name, team",
        ] {
            let annotations =
                IndexMap::from([("filter.oam.dev/label-keys".to_owned(), filter.to_owned())]);
            let context = ctx(&app_labels, &annotations);
            let mut object =
                json!({"metadata": {"labels": {"z": "1", "app.oam.dev/component": "t"}}});
            apply_contract(&mut object, &context, &ObjectRole::Workload);
            let actual: Vec<(&String, &Value)> = object["metadata"]["labels"]
                .as_object()
                .unwrap()
                .iter()
                .collect();

            let mut expected = Map::new();
            for (key, value) in [
                ("z", "1"),
                ("app.oam.dev/component", "web"),
                ("app.oam.dev/name", "demo"),
                ("app.oam.dev/appRevision", ""),
                ("workload.oam.dev/type", "webservice"),
            ] {
                expected.insert(key.to_owned(), json!(value));
            }
            let filtered = listed_keys(&annotations, "filter.oam.dev/label-keys");
            let mut common = app_labels.clone();
            for (key, value) in [
                ("app.oam.dev/name", "demo"),
                ("app.oam.dev/namespace", "team-a"),
                ("app.oam.dev/appRevision", ""),
                ("app.oam.dev/component", "web"),
            ] {
                common.insert(key.to_owned(), value.to_owned());
            }
            common.retain(|key, _| !filtered.contains(&key.as_str()));
            expected.insert("app.oam.dev/resourceType".to_owned(), json!("WORKLOAD"));
            for (key, value) in common {
                expected.insert(key, json!(value));
            }
            let expected: Vec<(&String, &Value)> = expected.iter().collect();
            assert_eq!(actual, expected, "filter {filter:?}");
        }
    }

    #[test]
    fn auxiliaries_get_trait_labels_app_annotations_and_filters() {
        let labels = IndexMap::from([("secret".to_owned(), "x".to_owned())]);
        let annotations = IndexMap::from([
            ("note".to_owned(), "hello".to_owned()),
            ("filter.oam.dev/label-keys".to_owned(), "secret".to_owned()),
            (
                "filter.oam.dev/annotation-keys".to_owned(),
                "drop-me".to_owned(),
            ),
        ]);
        let mut object = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "other", "annotations": {"drop-me": "1"}}});
        let role = ObjectRole::Auxiliary {
            trait_type: "expose",
            resource: "service",
            workload_ref: None,
        };
        apply_contract(&mut object, &ctx(&labels, &annotations), &role);
        let metadata = &object["metadata"];
        assert_eq!(metadata["annotations"], json!({"note": "hello"}));
        assert_eq!(metadata["namespace"], "other");
        assert_eq!(metadata["labels"]["trait.oam.dev/type"], "expose");
        assert_eq!(metadata["labels"]["trait.oam.dev/resource"], "service");
        assert_eq!(metadata["labels"]["app.oam.dev/resourceType"], "TRAIT");
        assert!(metadata["labels"].get("secret").is_none());
    }

    #[test]
    fn namespaces_are_not_namespaced_and_workload_refs_are_set() {
        let (labels, annotations) = (IndexMap::new(), IndexMap::new());
        let mut namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
        apply_contract(
            &mut namespace,
            &ctx(&labels, &annotations),
            &ObjectRole::Workload,
        );
        assert!(namespace["metadata"].get("namespace").is_none());
        let workload =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let mut scaler = json!({"apiVersion": "x/v1", "kind": "Scaler", "metadata": {"name": "s"}});
        let role = ObjectRole::Auxiliary {
            trait_type: "scaler",
            resource: "s",
            workload_ref: Some(("spec.workloadRef", &workload)),
        };
        apply_contract(&mut scaler, &ctx(&labels, &annotations), &role);
        assert_eq!(
            scaler["spec"]["workloadRef"],
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
        );
    }

    #[test]
    fn versioned_trait_types_use_dashes() {
        assert_eq!(trait_type_label("scaler@v2"), "scaler-v2");
        assert_eq!(trait_type_label("scaler"), "scaler");
    }
}
