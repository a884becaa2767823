//! Comparing a desired object with a live one: normalisation, field-level changes and the
//! unified YAML diff shown to people. Pure functions on JSON values.
//!
//! Two comparisons exist, chosen by what the observer could learn:
//! - **Server-side** (the normal case): the desired object is the result of a server-side-apply
//!   dry run, i.e. the live object as it *would be* after our apply, with the apiserver's
//!   defaulting, admission and other managers' fields in place. Comparing it with the live object
//!   shows exactly what applying would change, and a field we stopped setting shows up as removed.
//! - **Projected** (no dry run available): the live object is cut down to the fields the desired
//!   object sets ([`project`]) before comparing, so fields the apiserver or other controllers
//!   added are not reported as drift. It cannot see fields we stopped setting.
//!
//! Both sides are normalised first ([`normalize`]): server-owned metadata, `status`, and
//! annotations written by Kubernetes controllers are removed, and so are nulls and empty maps
//! (the apiserver drops them, renders keep `annotations: {}`). A Secret's `stringData` is folded
//! into `data` as the apiserver stores it.
//!
//! Every text made here for people ([`to_yaml`], [`ObjectDiff::unified`]) has a Secret's values
//! masked (`redact`): the plan's diffs are built here and nowhere else, so no plan format, comment
//! or page can show a value. Field paths name keys only (`data.password`).

use serde_json::Value;

use crate::redact;

/// Server-owned `metadata` fields, never part of a desired state.
const SERVER_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "finalizers",
];

/// Annotations written by Kubernetes itself or by kubectl, never by us.
const SERVER_ANNOTATIONS: &[&str] = &[
    "deployment.kubernetes.io/revision",
    "kubectl.kubernetes.io/last-applied-configuration",
    "kubectl.kubernetes.io/restartedAt",
];

/// How one object differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDiff {
    /// Unified diff of the two objects as YAML with sorted keys, `live` → `desired`.
    pub unified: String,
    /// The changed field paths (`spec.replicas`, `metadata.labels["app"]`), sorted.
    pub changed_fields: Vec<String>,
}

/// The object without server-owned fields, nulls and empty maps.
pub fn normalize(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in SERVER_METADATA {
                metadata.remove(*field);
            }
            if let Some(annotations) = metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
            {
                for key in SERVER_ANNOTATIONS {
                    annotations.remove(*key);
                }
            }
        }
    }
    fold_string_data(&mut object);
    drop_empty(&mut object);
    object
}

/// The live object cut down to the fields `desired` sets: maps keep only the desired keys, lists
/// of equal length are projected element by element, anything else is kept whole.
pub fn project(live: &Value, desired: &Value) -> Value {
    match (live, desired) {
        (Value::Object(live_map), Value::Object(desired_map)) => Value::Object(
            desired_map
                .iter()
                .filter_map(|(key, desired_value)| {
                    live_map
                        .get(key)
                        .map(|live_value| (key.clone(), project(live_value, desired_value)))
                })
                .collect(),
        ),
        (Value::Array(live_items), Value::Array(desired_items))
            if live_items.len() == desired_items.len() =>
        {
            Value::Array(
                live_items
                    .iter()
                    .zip(desired_items)
                    .map(|(live_item, desired_item)| project(live_item, desired_item))
                    .collect(),
            )
        }
        _ => live.clone(),
    }
}

/// Compares two objects that are already normalised; `None` when they are equal.
pub fn diff(live: &Value, desired: &Value) -> Option<ObjectDiff> {
    if live == desired {
        return None;
    }
    let mut changed_fields = Vec::new();
    changed_paths(live, desired, &mut String::new(), &mut changed_fields);
    changed_fields.sort();
    let (live_shown, desired_shown) = redact::masked_pair(live, desired);
    let live_yaml = yaml_text(&sorted(&live_shown));
    let desired_yaml = yaml_text(&sorted(&desired_shown));
    let unified = similar::TextDiff::from_lines(&live_yaml, &desired_yaml)
        .unified_diff()
        .context_radius(3)
        .header("live", "desired")
        .to_string();
    Some(ObjectDiff {
        unified,
        changed_fields,
    })
}

/// The server-side comparison: the dry-run result against the live object.
pub fn diff_server_side(live: &Value, dry_run: &Value) -> Option<ObjectDiff> {
    diff(&normalize(live), &normalize(dry_run))
}

/// The projected comparison: the rendered object against the live object cut down to it.
pub fn diff_projected(live: &Value, desired: &Value) -> Option<ObjectDiff> {
    let desired = normalize(desired);
    diff(&project(&normalize(live), &desired), &desired)
}

/// Whether the live object already holds every field the desired object sets, with the same
/// values: [`diff_projected`] finding nothing, without building the diff. For an object whose
/// desired state is the one last applied (same hash), this means an apply would change
/// nothing, even though its resourceVersion moved (a controller writing `status`).
pub fn projected_equal(live: &Value, desired: &Value) -> bool {
    let desired = normalize(desired);
    project(&normalize(live), &desired) == desired
}

/// YAML for people: block style, as `kubectl` prints it, a Secret's values masked.
pub fn to_yaml(value: &Value) -> String {
    yaml_text(&redact::masked(value))
}

/// Serialising a JSON value cannot fail; should it ever, the JSON text is shown instead of
/// nothing.
fn yaml_text(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// A Secret's `stringData` written into `data` (base64), as the apiserver stores it: the live
/// Secret never has `stringData`, so comparing without this would see a change forever.
fn fold_string_data(object: &mut Value) {
    use base64::Engine as _;
    if !redact::is_secret(object) {
        return;
    }
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let Some(Value::Object(string_data)) = map.remove("stringData") else {
        return;
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Some(data) = data.as_object_mut() {
        for (key, value) in string_data {
            let text = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            data.insert(key, Value::String(encoded));
        }
    }
}

/// A copy with every map's keys sorted, so that diffs do not depend on key order.
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key.clone(), sorted(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Removes nulls and empty maps, bottom up.
fn drop_empty(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for child in map.values_mut() {
                drop_empty(child);
            }
            map.retain(|_, child| !is_empty(child));
        }
        Value::Array(items) => items.iter_mut().for_each(drop_empty),
        _ => {}
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

fn changed_paths(live: &Value, desired: &Value, path: &mut String, out: &mut Vec<String>) {
    if live == desired {
        return;
    }
    match (live, desired) {
        (Value::Object(live_map), Value::Object(desired_map)) => {
            let mut keys: Vec<&String> = live_map.keys().chain(desired_map.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let len = path.len();
                push_key(path, key);
                match (live_map.get(key), desired_map.get(key)) {
                    (Some(l), Some(d)) => changed_paths(l, d, path, out),
                    _ => out.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        (Value::Array(live_items), Value::Array(desired_items))
            if live_items.len() == desired_items.len() =>
        {
            for (index, (l, d)) in live_items.iter().zip(desired_items).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                changed_paths(l, d, path, out);
                path.truncate(len);
            }
        }
        _ => out.push(if path.is_empty() {
            ".".to_owned()
        } else {
            path.clone()
        }),
    }
}

/// `a.b` for plain keys, `a["app.oam.dev/name"]` for keys with dots, slashes or spaces.
fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push_str(&format!("[{}]", Value::String(key.to_owned())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team", "labels": {"app.oam.dev/name": "shop"}, "annotations": {}},
            "spec": {
                "replicas": replicas,
                "template": {"spec": {"containers": [{"name": "web", "image": image}]}}
            }
        })
    }

    /// The same deployment as the apiserver returns it: defaults, server metadata and status.
    fn live(replicas: i64, image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "team", "uid": "u-1", "resourceVersion": "42",
                "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app.oam.dev/name": "shop"},
                "annotations": {"deployment.kubernetes.io/revision": "3"},
                "managedFields": [{"manager": "driftless"}]
            },
            "spec": {
                "replicas": replicas,
                "revisionHistoryLimit": 10,
                "template": {"spec": {"containers": [{"name": "web", "image": image, "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log"}], "restartPolicy": "Always"}}
            },
            "status": {"replicas": replicas}
        })
    }

    #[test]
    fn projected_diff_ignores_defaults_and_server_fields() {
        assert_eq!(
            diff_projected(&live(2, "nginx:1"), &deployment(2, "nginx:1")),
            None
        );
    }

    #[test]
    fn projected_equality_ignores_status_and_defaults_but_not_spec_or_labels() {
        let mut status_moved = live(2, "nginx:1");
        status_moved["metadata"]["resourceVersion"] = json!("57");
        status_moved["status"] = json!({"replicas": 2, "observedGeneration": 3});
        assert!(projected_equal(&status_moved, &deployment(2, "nginx:1")));
        assert!(!projected_equal(&status_moved, &deployment(2, "nginx:2")));
        let mut relabelled = status_moved.clone();
        relabelled["metadata"]["labels"]["app.oam.dev/name"] = json!("other");
        assert!(!projected_equal(&relabelled, &deployment(2, "nginx:1")));
        let mut unlabelled = status_moved;
        unlabelled["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("labels");
        assert!(!projected_equal(&unlabelled, &deployment(2, "nginx:1")));
    }

    #[test]
    fn projected_diff_reports_exactly_the_changed_field() {
        let changed = diff_projected(&live(2, "nginx:1"), &deployment(3, "nginx:1")).unwrap();
        assert_eq!(changed.changed_fields, vec!["spec.replicas"]);
        assert!(
            changed.unified.contains("-  replicas: 2"),
            "{}",
            changed.unified
        );
        assert!(
            changed.unified.contains("+  replicas: 3"),
            "{}",
            changed.unified
        );
        assert!(
            changed.unified.starts_with("--- live\n+++ desired\n"),
            "{}",
            changed.unified
        );
    }

    #[test]
    fn server_side_diff_sees_removed_fields() {
        let mut dry_run = live(2, "nginx:1");
        dry_run["metadata"]["resourceVersion"] = json!("43");
        dry_run["metadata"]["generation"] = json!(4);
        assert_eq!(diff_server_side(&live(2, "nginx:1"), &dry_run), None);
        dry_run["spec"]
            .as_object_mut()
            .unwrap()
            .remove("revisionHistoryLimit");
        let changed = diff_server_side(&live(2, "nginx:1"), &dry_run).unwrap();
        assert_eq!(changed.changed_fields, vec!["spec.revisionHistoryLimit"]);
    }

    #[test]
    fn field_paths_quote_keys_with_dots_and_index_lists() {
        let before = json!({"metadata": {"labels": {"app.oam.dev/name": "a"}}, "spec": {"c": [{"image": "x"}]}});
        let after = json!({"metadata": {"labels": {"app.oam.dev/name": "b"}}, "spec": {"c": [{"image": "y"}]}});
        let changed = diff(&before, &after).unwrap();
        assert_eq!(
            changed.changed_fields,
            vec![
                "metadata.labels[\"app.oam.dev/name\"]".to_owned(),
                "spec.c[0].image".to_owned()
            ]
        );
    }

    #[test]
    fn lists_of_different_length_change_as_a_whole() {
        let changed = diff(&json!({"args": ["a"]}), &json!({"args": ["a", "b"]})).unwrap();
        assert_eq!(changed.changed_fields, vec!["args"]);
    }

    #[test]
    fn normalize_drops_nulls_and_empty_maps() {
        let normalized = normalize(
            &json!({"metadata": {"name": "x", "annotations": {}, "labels": null}, "spec": {"a": {}}}),
        );
        assert_eq!(normalized, json!({"metadata": {"name": "x"}}));
    }

    fn secret(field: &str, values: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "team"}, field: values})
    }

    #[test]
    fn secret_diffs_show_keys_and_masks_never_values() {
        // hunter2, swordfish, letmein: base64 in `data`, plain in `stringData`.
        let live = secret(
            "data",
            json!({"password": "aHVudGVyMg==", "old-key": "c3dvcmRmaXNo"}),
        );
        let desired = secret(
            "stringData",
            json!({"password": "letmein", "new-key": "swordfish"}),
        );
        let changed = diff_projected(&live, &desired).unwrap();
        for value in [
            "hunter2",
            "aHVudGVyMg",
            "swordfish",
            "c3dvcmRmaXNo",
            "letmein",
            "bGV0bWVpbg",
        ] {
            assert!(!changed.unified.contains(value), "{}", changed.unified);
        }
        assert!(
            changed.unified.contains("-  password: ++++++++\n"),
            "{}",
            changed.unified
        );
        assert!(
            changed.unified.contains("+  password: +++++++++\n"),
            "{}",
            changed.unified
        );
        assert!(
            changed.unified.contains("+  new-key: ++++++++"),
            "{}",
            changed.unified
        );
        assert_eq!(
            changed.changed_fields,
            vec!["data.new-key", "data.password"]
        );
        let server_side =
            diff_server_side(&live, &secret("data", json!({"password": "bGV0bWVpbg=="}))).unwrap();
        assert!(
            server_side.unified.contains("-  old-key: ++++++++"),
            "{}",
            server_side.unified
        );
        assert!(
            !server_side.unified.contains("c3dvcmRmaXNo"),
            "{}",
            server_side.unified
        );
    }

    #[test]
    fn string_data_equal_to_the_live_data_is_no_change() {
        let live = secret("data", json!({"password": "aHVudGVyMg=="}));
        let desired = secret("stringData", json!({"password": "hunter2"}));
        assert_eq!(diff_projected(&live, &desired), None);
        assert!(projected_equal(&live, &desired));
    }

    #[test]
    fn secret_yaml_for_people_is_masked() {
        let text = to_yaml(&secret("stringData", json!({"password": "hunter2"})));
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("password: ++++++++"), "{text}");
    }
}
