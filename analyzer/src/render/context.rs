//! The `context` a template sees (kubevela-render-semantics.md §1.2), and the JSON encoding
//! KubeVela gives injected data.

use serde_json::{Map, Value, json};

use crate::ClusterVersion;
use crate::load::application::LoadedApp;
use crate::model::Component;

/// Go's `json.Marshal` of a `map[string]interface{}`: keys sorted, and every number went
/// through `float64`, so an integral float (`1.0`) is an int. Comprehensions over injected
/// structs iterate in this order, so it decides list order in outputs (the env trait).
pub(crate) fn go_json(value: &Value) -> Value {
    into_go_json(value.clone())
}

/// [`go_json`] of a value the caller owns: sorted and converted in place, without copying it.
pub(crate) fn into_go_json(mut value: Value) -> Value {
    encode_in_place(&mut value);
    value
}

fn encode_in_place(value: &mut Value) {
    match value {
        Value::Object(object) => {
            object.sort_keys();
            object.values_mut().for_each(encode_in_place);
        }
        Value::Array(items) => items.iter_mut().for_each(encode_in_place),
        Value::Number(number) => {
            if let Some(float) = number.as_f64()
                && number.is_f64()
                && float.fract() == 0.0
                && float.abs() < 9.007_199_254_740_992e15
            {
                *value = json!(float as i64);
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// The context of one component's template.
pub(crate) fn component_context(
    loaded: &LoadedApp,
    component: &Component,
    components: &Value,
    cluster_version: &ClusterVersion,
) -> Value {
    let app = &loaded.app;
    let annotation = |key: &str| {
        app.metadata
            .annotations
            .get(key)
            .cloned()
            .unwrap_or_default()
    };
    // Built entry by entry rather than with `json!`, which would serialize `components` (the
    // JSON of every component) into a new value instead of cloning it. The order does not
    // matter: `into_go_json` sorts the keys.
    let mut context = Map::new();
    let mut entry = |key: &str, value: Value| {
        context.insert(key.to_owned(), value);
    };
    entry("name", Value::from(component.name.as_str()));
    entry("namespace", Value::from(loaded.app_ref.namespace.as_str()));
    entry("appName", Value::from(loaded.app_ref.name.as_str()));
    entry("appRevision", Value::from(app_revision(loaded)));
    entry(
        "appRevisionNum",
        Value::from(app_revision_number(app_revision(loaded))),
    );
    entry("revision", Value::from(""));
    entry("components", components.clone());
    entry("appLabels", string_map(&app.metadata.labels));
    entry("appAnnotations", string_map(&app.metadata.annotations));
    entry(
        "workflowName",
        Value::from(annotation("app.oam.dev/workflowName")),
    );
    entry(
        "publishVersion",
        Value::from(annotation("app.oam.dev/publishVersion")),
    );
    entry(
        "replicaKey",
        Value::from(component.replica_key.as_deref().unwrap_or("")),
    );
    entry("cluster", Value::from(""));
    entry(
        "clusterVersion",
        json!({
            "major": cluster_version.major,
            "gitVersion": cluster_version.git_version,
            "platform": cluster_version.platform,
            "minor": cluster_version.minor,
        }),
    );
    if let Some(properties) = &component.properties {
        entry("parameter", properties.clone());
    }
    into_go_json(Value::Object(context))
}

/// A string-to-string map as a JSON object.
fn string_map(map: &indexmap::IndexMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect(),
    )
}

/// The app revision name KubeVela renders with: `status.latestRevision.name` when the manifest
/// carries one (`pkg/appfile/parser.go`, `GenerateAppFileFromApp`), else `""` as offline.
pub(crate) fn app_revision(loaded: &LoadedApp) -> &str {
    loaded
        .document
        .value
        .pointer("/status/latestRevision/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The number of a revision named `<app>-v<N>` (KubeVela's `ExtractRevisionNum`), else 0.
fn app_revision_number(revision: &str) -> u64 {
    revision
        .rsplit_once("-v")
        .and_then(|(_, number)| number.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_json_sorts_keys_and_turns_integral_floats_into_ints() {
        let value = json!({"b": 1.0, "a": {"d": [2.5, 3.0], "c": true}});
        let encoded = go_json(&value);
        assert_eq!(
            serde_json::to_string(&encoded).unwrap(),
            r#"{"a":{"c":true,"d":[2.5,3]},"b":1}"#
        );
        assert_eq!(into_go_json(value), encoded);
    }
}
