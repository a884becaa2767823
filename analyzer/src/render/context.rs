//! The `context` a template sees (kubevela-render-semantics.md §1.2), and the JSON encoding
//! KubeVela gives injected data.

use cue::{Exported, ExportedField};
use serde_json::{Map, Value, json};

use super::output_reads::Reads;
use super::patch::convert::is_data_field;

use crate::ClusterVersion;
use crate::load::application::LoadedApp;
use crate::model::{Component, TemplateReads};

/// Every field a template's `context` can have: the component context's, the traits'
/// `componentType`, `output` and `outputs`. A template that reads none of them renders the
/// same for every app (a test checks that [`component_context`] builds no other field).
pub(crate) const CONTEXT_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "appName",
    "appRevision",
    "appRevisionNum",
    "revision",
    "components",
    "appLabels",
    "appAnnotations",
    "workflowName",
    "publishVersion",
    "replicaKey",
    "cluster",
    "clusterVersion",
    "parameter",
    "componentType",
    "output",
    "outputs",
];

/// What `template` can read of its context, from its syntax.
pub(crate) fn template_reads(template: &cue::ast::File) -> TemplateReads {
    TemplateReads {
        context: template.may_read_fields("context", CONTEXT_FIELDS),
        output: template.may_read_fields("context", &["output", "outputs"]),
        components: template.may_read_fields("context", &["components"]),
        parameter: template.may_read_fields("context", &["parameter"]),
    }
}

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

/// An exported value as a trait's `context.output(s)` carries it: [`into_go_json`] of its
/// lenient JSON (non-concrete values left out; `null` when it holds an error), built in one
/// pass from the export instead of building the JSON and then re-encoding it.
pub(crate) fn context_json(value: &Exported) -> Value {
    let mut has_bottom = false;
    let json = lenient_go_json(value, &mut has_bottom);
    if has_bottom {
        Value::Null
    } else {
        json.unwrap_or(Value::Null)
    }
}

/// [`context_json`] of only what `reads` can observe of `value` (see [`super::output_reads`]):
/// the fields it names, an empty placeholder where only existence is tested. `null` when
/// `value` holds an error anywhere, as for the whole value.
pub(crate) fn context_json_read(value: &Exported, reads: &Reads) -> Value {
    if *reads == Reads::All {
        return context_json(value);
    }
    if lenient_has_bottom(value) {
        return Value::Null;
    }
    pruned_go_json(value, reads).unwrap_or(Value::Null)
}

/// Whether [`lenient_go_json`] of `value` would meet an error value.
fn lenient_has_bottom(value: &Exported) -> bool {
    match value {
        Exported::Bottom(_) => true,
        Exported::Default { default, .. } => lenient_has_bottom(default),
        Exported::Struct(fields) => fields
            .iter()
            .any(|field| is_data_field(field) && lenient_has_bottom(&field.value)),
        Exported::List { elems, .. } => elems.iter().any(lenient_has_bottom),
        Exported::Scalar(_) | Exported::Incomplete(_) => false,
    }
}

/// [`lenient_go_json`] of the parts of `value` that `reads` names; `value` holds no error.
fn pruned_go_json(value: &Exported, reads: &Reads) -> Option<Value> {
    match (value, reads) {
        (Exported::Default { default, .. }, _) => pruned_go_json(default, reads),
        (Exported::Struct(_), Reads::Exists) => Some(Value::Object(Map::new())),
        (Exported::List { .. }, Reads::Exists) => Some(Value::Array(Vec::new())),
        (Exported::Struct(fields), Reads::Fields(read_fields)) => {
            let mut data_fields: Vec<(&ExportedField, &Reads)> = fields
                .iter()
                .filter(|field| is_data_field(field))
                .filter_map(|field| read_fields.get(&field.label).map(|reads| (field, reads)))
                .collect();
            data_fields.sort_by(|(left, _), (right, _)| left.label.cmp(&right.label));
            let mut object = Map::with_capacity(data_fields.len());
            for (field, reads) in data_fields {
                if let Some(json) = pruned_go_json(&field.value, reads) {
                    object.insert(field.label.clone(), json);
                }
            }
            Some(Value::Object(object))
        }
        // Scalars, and a list or scalar where fields are selected (the selection fails on
        // the whole value, with the same error): kept whole.
        _ => {
            let mut has_bottom = false;
            lenient_go_json(value, &mut has_bottom)
        }
    }
}

/// `None` for a non-concrete value (left out of its struct, `null` in a list).
fn lenient_go_json(value: &Exported, has_bottom: &mut bool) -> Option<Value> {
    match value {
        Exported::Scalar(Value::Number(number)) => Some(go_number(number)),
        Exported::Scalar(scalar) => Some(scalar.clone()),
        Exported::Default { default, .. } => lenient_go_json(default, has_bottom),
        Exported::Struct(fields) => {
            // Go's encoding/json writes map keys sorted: the fields are sorted (by reference)
            // before they are converted, so the JSON is built in its final order.
            let mut data_fields: Vec<&ExportedField> =
                fields.iter().filter(|field| is_data_field(field)).collect();
            data_fields.sort_by(|left, right| left.label.cmp(&right.label));
            let mut object = Map::with_capacity(data_fields.len());
            for field in data_fields {
                if let Some(json) = lenient_go_json(&field.value, has_bottom) {
                    object.insert(field.label.clone(), json);
                }
            }
            Some(Value::Object(object))
        }
        Exported::List { elems, .. } => Some(Value::Array(
            elems
                .iter()
                .map(|elem| lenient_go_json(elem, has_bottom).unwrap_or(Value::Null))
                .collect(),
        )),
        Exported::Incomplete(_) => None,
        Exported::Bottom(_) => {
            *has_bottom = true;
            None
        }
    }
}

/// A number as Go writes it: an integral float within the exact range is an integer.
fn go_number(number: &serde_json::Number) -> Value {
    if let Some(float) = number.as_f64()
        && number.is_f64()
        && float.fract() == 0.0
        && float.abs() < 9.007_199_254_740_992e15
    {
        json!(float as i64)
    } else {
        Value::Number(number.clone())
    }
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

/// The context of one component's template. `components` and `parameter` (copies of the app's
/// spec, the largest entries) are left out when `reads` says no template can see them: the
/// evaluation is the same without them.
pub(crate) fn component_context(
    loaded: &LoadedApp,
    component: &Component,
    components: &Value,
    cluster_version: &ClusterVersion,
    reads: TemplateReads,
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
    // JSON of every component) into a new value instead of cloning it, and in Go's order (keys
    // sorted, as `into_go_json` would leave them), so only the copied app data is re-encoded.
    let mut context = Map::with_capacity(CONTEXT_FIELDS.len());
    let mut entry = |key: &str, value: Value| {
        context.insert(key.to_owned(), value);
    };
    entry(
        "appAnnotations",
        sorted_string_map(&app.metadata.annotations),
    );
    entry("appLabels", sorted_string_map(&app.metadata.labels));
    entry("appName", Value::from(loaded.app_ref.name.as_str()));
    let revision = app_revision(loaded);
    entry("appRevision", Value::from(revision));
    entry("appRevisionNum", Value::from(app_revision_number(revision)));
    entry("cluster", Value::from(""));
    let mut version = Map::with_capacity(4);
    version.insert(
        "gitVersion".to_owned(),
        Value::from(cluster_version.git_version.as_str()),
    );
    version.insert(
        "major".to_owned(),
        Value::from(cluster_version.major.as_str()),
    );
    version.insert("minor".to_owned(), Value::from(cluster_version.minor));
    version.insert(
        "platform".to_owned(),
        Value::from(cluster_version.platform.as_str()),
    );
    entry("clusterVersion", Value::Object(version));
    if reads.components {
        entry("components", go_json(components));
    }
    entry("name", Value::from(component.name.as_str()));
    entry("namespace", Value::from(loaded.app_ref.namespace.as_str()));
    if let Some(properties) = component.properties.as_ref().filter(|_| reads.parameter) {
        entry("parameter", go_json(properties));
    }
    entry(
        "publishVersion",
        Value::from(annotation("app.oam.dev/publishVersion")),
    );
    entry(
        "replicaKey",
        Value::from(component.replica_key.as_deref().unwrap_or("")),
    );
    entry("revision", Value::from(""));
    entry(
        "workflowName",
        Value::from(annotation("app.oam.dev/workflowName")),
    );
    Value::Object(context)
}

/// A string-to-string map as a JSON object, keys sorted (Go's order).
fn sorted_string_map(map: &indexmap::IndexMap<String, String>) -> Value {
    let mut entries: Vec<(&String, &String)> = map.iter().collect();
    entries.sort_unstable_by(|left, right| left.0.cmp(right.0));
    Value::Object(
        entries
            .into_iter()
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
    fn the_component_context_has_only_the_listed_fields() {
        let snapshot = crate::Snapshot {
            commit: None,
            files: vec![crate::SourceFile {
                path: "apps/app.yaml".to_owned(),
                contents: "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: app
  namespace: ns
  labels:
    z: last
    a: b
  annotations:
    c: d
    b: e
spec:
  components:
    - name: web
      type: webservice
      properties:
        image: nginx
        cpu: 1.0
        env:
          - value: v
            name: n
"
                .to_owned(),
            }],
        };
        let namespaces = crate::load::application::NamespaceRules {
            forced: None,
            default: "default",
        };
        let loaded =
            crate::load::load_snapshot(&snapshot, &crate::Definitions::builtin(), &namespaces);
        assert_eq!(loaded.apps.len(), 1, "{:?}", loaded.diagnostics);
        let app = &loaded.apps[0];
        let component = &app.app.spec.components[0];
        let context = component_context(
            app,
            component,
            &json!([]),
            &ClusterVersion::vela_offline(),
            TemplateReads::default(),
        );
        let keys: Vec<&str> = context
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(keys.contains(&"components") && keys.contains(&"parameter"));
        // Built in Go's encoding already: encoding it again changes nothing (key order
        // included, at every level).
        assert_eq!(
            serde_json::to_string(&into_go_json(context.clone())).unwrap(),
            serde_json::to_string(&context).unwrap()
        );
        for key in keys {
            assert!(
                CONTEXT_FIELDS.contains(&key),
                "{key} is not in CONTEXT_FIELDS"
            );
        }
        let without = component_context(
            app,
            component,
            &json!([]),
            &ClusterVersion::vela_offline(),
            TemplateReads {
                components: false,
                parameter: false,
                ..TemplateReads::default()
            },
        );
        let without = without.as_object().unwrap();
        assert!(!without.contains_key("components") && !without.contains_key("parameter"));
    }

    #[test]
    fn template_reads_tell_which_context_fields_a_template_sees() {
        let parse = |text: &str| cue::parse_file(cue::FileId(0), text).file;
        let scaler = template_reads(&parse(
            "patch: spec: replicas: parameter.replicas
",
        ));
        assert!(!scaler.context && !scaler.output && !scaler.components);
        let labels = template_reads(&parse(
            "patch: {if context.output.spec != _|_ {spec: x: context.name}}
",
        ));
        assert!(labels.context && labels.output && !labels.components && !labels.parameter);
        let whole = template_reads(&parse(
            "x: [for k, v in context {k}]
",
        ));
        assert_eq!(whole, TemplateReads::default());
    }

    /// `context_json` is the Go encoding of the lenient JSON export, in one pass: sorted keys,
    /// integral floats as integers, non-concrete values left out, `null` for an error.
    #[test]
    fn context_json_is_the_go_encoding_of_the_lenient_export() {
        use super::super::patch::convert::{Concreteness, into_exported, to_json};
        use cue::{Constraint, KindSet};
        let field = |label: &str, value: Exported, optional: bool| ExportedField {
            label: label.to_owned(),
            value,
            doc: Vec::new(),
            optional,
        };
        let incomplete = || {
            Exported::Incomplete(Constraint {
                kinds: KindSet::STRING,
                text: "string".to_owned(),
            })
        };
        let values = [
            into_exported(json!({"b": 1.0, "a": {"d": [2.5, 3.0], "c": true}, "_h": 1})),
            Exported::Struct(vec![
                field("z", incomplete(), false),
                field(
                    "y",
                    Exported::Default {
                        default: Box::new(Exported::Scalar(json!(2.0))),
                        others: vec![incomplete()],
                    },
                    false,
                ),
                field("opt", Exported::Scalar(json!(1)), true),
                field(
                    "list",
                    Exported::List {
                        elems: vec![incomplete(), Exported::Scalar(json!("x"))],
                        open: false,
                        rest: None,
                    },
                    false,
                ),
            ]),
            Exported::Struct(vec![
                field("a", Exported::Scalar(json!(1)), false),
                field("bad", Exported::Bottom(Vec::new()), false),
            ]),
            incomplete(),
        ];
        for value in values {
            let expected = into_go_json(to_json(&value, Concreteness::Lenient).unwrap_or_default());
            let actual = context_json(&value);
            assert_eq!(
                serde_json::to_string(&actual).unwrap(),
                serde_json::to_string(&expected).unwrap(),
                "{value:?}"
            );
        }
    }

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
