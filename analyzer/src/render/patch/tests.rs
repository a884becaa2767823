//! Patch engine cases, after KubeVela's `wf:pkg/cue/model/sets/operation_test.go` (TestPatch,
//! TestStrategyPatch) and kubevela-render-semantics.md §2.2-2.3.
//!
//! Values are written as JSON with three conventions: a key `label//+tag=v;+tag2=w` carries doc
//! comment tags; a string `§string` is a non-concrete type; `§*1|int` is a default.

use cue::{Constraint, Exported, ExportedField, KindSet};
use serde_json::{Value, json};

use super::convert::{Concreteness, to_json};
use super::{PatchError, apply_patch};

fn ex(value: &Value) -> Exported {
    match value {
        Value::Object(object) => Exported::Struct(
            object
                .iter()
                .map(|(key, value)| {
                    let (label, doc) = match key.split_once("//") {
                        Some((label, tags)) => {
                            (label, tags.split(';').map(str::to_owned).collect())
                        }
                        None => (key.as_str(), Vec::new()),
                    };
                    ExportedField {
                        label: label.to_owned(),
                        value: ex(value),
                        doc,
                        optional: false,
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Exported::List {
            elems: items.iter().map(ex).collect(),
            open: false,
            rest: None,
        },
        Value::String(text) if text.starts_with('§') => {
            let text = &text['§'.len_utf8()..];
            match text.strip_prefix('*').and_then(|rest| rest.split_once('|')) {
                Some((default, other)) => Exported::Default {
                    default: Box::new(ex(&serde_json::from_str(default).unwrap())),
                    others: vec![constraint(other)],
                },
                None => constraint(text),
            }
        }
        scalar => Exported::Scalar(scalar.clone()),
    }
}

fn constraint(text: &str) -> Exported {
    let kinds = match text {
        "string" => KindSet::STRING,
        "int" => KindSet::INT,
        text if text.starts_with(">=") => KindSet::NUMBER,
        _ => KindSet::TOP,
    };
    Exported::Incomplete(Constraint {
        kinds,
        text: text.to_owned(),
    })
}

/// Bounds are checked by the evaluator in production; here `>=N` is enough.
fn check(constraint: &Constraint, value: &Exported) -> Result<(), String> {
    if let (Some(bound), Exported::Scalar(Value::Number(number))) =
        (constraint.text.strip_prefix(">="), value)
        && number.as_f64() < bound.parse::<f64>().ok()
    {
        return Err(format!(
            "invalid value {number} (out of bound {})",
            constraint.text
        ));
    }
    Ok(())
}

fn patch_with_doc(base: Value, patch: Value, doc: &[&str]) -> Result<Value, PatchError> {
    let doc: Vec<String> = doc.iter().map(|line| (*line).to_owned()).collect();
    let result = apply_patch(ex(&base), ex(&patch), &doc, &check)?;
    Ok(to_json(&result, Concreteness::Lenient).unwrap())
}

fn patch(base: Value, patch: Value) -> Result<Value, PatchError> {
    patch_with_doc(base, patch, &[])
}

fn error(result: Result<Value, PatchError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn structs_are_open_and_equal_scalars_unify() {
    let result = patch(
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 1}}),
        json!({"metadata": {"name": "web", "labels": {"a": "b"}}}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"metadata": {"name": "web", "labels": {"a": "b"}}, "spec": {"replicas": 1}})
    );
}

#[test]
fn different_scalars_conflict_with_their_path() {
    let result = patch(
        json!({"spec": {"replicas": 1}}),
        json!({"spec": {"replicas": 3}}),
    );
    assert_eq!(error(result), "spec.replicas: conflicting values 1 and 3");
    let result = patch(
        json!({"spec": {"replicas": 1}}),
        json!({"spec": {"replicas": "3"}}),
    );
    assert_eq!(
        error(result),
        "spec.replicas: conflicting values 1 and \"3\" (mismatched types int and string)"
    );
}

#[test]
fn a_default_yields_and_a_type_is_filled() {
    let result = patch(
        json!({"spec": {"replicas": "§*1|int", "image": "§string"}}),
        json!({"spec": {"replicas": 3, "image": "nginx"}}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"spec": {"replicas": 3, "image": "nginx"}})
    );
    let result = patch(json!({"image": "§string"}), json!({"image": 1}));
    assert_eq!(
        error(result),
        "image: conflicting values string and 1 (mismatched types string and int)"
    );
    let result = patch(json!({"port": "§>=1"}), json!({"port": 0}));
    assert_eq!(error(result), "port: invalid value 0 (out of bound >=1)");
}

#[test]
fn retain_keys_on_a_shorthand_field_overrides_a_scalar() {
    // The scaler trait: `// +patchStrategy=retainKeys` above `patch: spec: replicas:` tags
    // `replicas` (CUE's doc rule for shorthand chains).
    let result = patch(
        json!({"spec": {"replicas": 1, "selector": {"a": "b"}}}),
        json!({"spec": {"replicas//+patchStrategy=retainKeys": 3}}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"spec": {"replicas": 3, "selector": {"a": "b"}}})
    );
}

#[test]
fn retain_keys_on_a_struct_replaces_it_wholesale() {
    let result = patch(
        json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}),
        json!({"spec": {"strategy//+patchStrategy=retainKeys": {"type": "Recreate"}}}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"spec": {"strategy": {"type": "Recreate"}}})
    );
}

#[test]
fn lists_unify_by_position_and_a_longer_patch_appends() {
    let result = patch(
        json!({"args": ["a", "b"]}),
        json!({"args": ["a", "b", "c"]}),
    );
    assert_eq!(result.unwrap(), json!({"args": ["a", "b", "c"]}));
    let result = patch(json!({"args": ["a", "b"]}), json!({"args": ["x"]}));
    assert_eq!(error(result), "args: incompatible list lengths (2 and 1)");
    let result = patch(json!({"args": ["a", "b"]}), json!({"args": ["x", "b"]}));
    assert_eq!(error(result), "args.0: conflicting values \"a\" and \"x\"");
}

#[test]
fn patch_key_merges_list_elements_by_key() {
    let base = json!({"containers": [
        {"name": "main", "image": "nginx"},
        {"name": "sidecar", "image": "envoy"}
    ]});
    let result = patch(
        base,
        json!({"containers//+patchKey=name": [
            {"name": "sidecar", "env": [{"name": "A", "value": "1"}]},
            {"name": "extra", "image": "busybox"}
        ]}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"containers": [
            {"name": "main", "image": "nginx"},
            {"name": "sidecar", "image": "envoy", "env": [{"name": "A", "value": "1"}]},
            {"name": "extra", "image": "busybox"}
        ]})
    );
}

#[test]
fn patch_key_is_inherited_by_nested_lists() {
    let base = json!({"containers": [{"name": "main", "env": [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"}
    ]}]});
    let result = patch(
        base,
        json!({"containers//+patchKey=name": [{"name": "main", "env": [
            {"name": "C", "value": "3"},
            {"name": "B", "value": "2"}
        ]}]}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"containers": [{"name": "main", "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "value": "2"},
            {"name": "C", "value": "3"}
        ]}]})
    );
}

#[test]
fn a_conflict_inside_a_keyed_element_is_still_an_error() {
    let result = patch(
        json!({"containers": [{"name": "main", "image": "nginx"}]}),
        json!({"containers//+patchKey=name": [{"name": "main", "image": "httpd"}]}),
    );
    assert_eq!(
        error(result),
        "containers.0.image: conflicting values \"nginx\" and \"httpd\""
    );
}

#[test]
fn dotted_and_comma_separated_keys() {
    let base = json!({"envFrom": [
        {"secretRef": {"name": "s1"}},
        {"configMapRef": {"name": "c1"}}
    ]});
    let result = patch(
        base,
        json!({"envFrom//+patchKey=secretRef.name,configMapRef.name": [
            {"configMapRef": {"name": "c2"}},
            {"secretRef": {"name": "s1"}, "prefix": "S_"}
        ]}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"envFrom": [
            {"secretRef": {"name": "s1"}, "prefix": "S_"},
            {"configMapRef": {"name": "c1"}},
            {"configMapRef": {"name": "c2"}}
        ]})
    );
}

#[test]
fn patch_elements_without_the_key_are_dropped() {
    let result = patch(
        json!({"ports": [{"name": "http", "port": 80}]}),
        json!({"ports//+patchKey=name": [{"port": 90}, {"name": "grpc", "port": 9000}]}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"ports": [{"name": "http", "port": 80}, {"name": "grpc", "port": 9000}]})
    );
}

#[test]
fn a_key_that_is_not_a_literal_abandons_the_keyed_merge() {
    // webservice-style port names are exported as defaults: upstream falls back to positions.
    let result = patch(
        json!({"ports": [{"name": "§*\"port-80\"|string", "containerPort": 80}]}),
        json!({"ports//+patchKey=name": [{"name": "metrics", "containerPort": 9090}]}),
    );
    assert_eq!(
        error(result),
        "ports.0.containerPort: conflicting values 80 and 9090"
    );
}

#[test]
fn retain_keys_on_a_keyed_list_replaces_matched_elements() {
    let result = patch(
        json!({"volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]}),
        json!({"volumes//+patchKey=name;+patchStrategy=retainKeys": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}}
        ]}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}},
            {"name": "cache", "emptyDir": {}}
        ]})
    );
}

#[test]
fn replace_makes_a_list_exactly_the_patch_list() {
    let result = patch(
        json!({"args": ["a", "b", "c"], "other": 1}),
        json!({"args//+patchStrategy=replace": ["x"]}),
    );
    assert_eq!(result.unwrap(), json!({"args": ["x"], "other": 1}));
    let result = patch(json!({}), json!({"args//+patchStrategy=replace": ["x"]}));
    assert_eq!(result.unwrap(), json!({"args": ["x"]}));
}

#[test]
fn json_merge_patch_replaces_and_deletes_without_conflicts() {
    let result = patch_with_doc(
        json!({"spec": {"replicas": 1, "paused": true, "args": ["a", "b"]}}),
        json!({"spec": {"replicas": 3, "paused": null, "args": ["c"]}}),
        &["+patchStrategy=jsonMergePatch"],
    );
    assert_eq!(
        result.unwrap(),
        json!({"spec": {"replicas": 3, "args": ["c"]}})
    );
}

#[test]
fn json_patch_applies_operations_and_reports_failures() {
    let result = patch_with_doc(
        json!({"spec": {"replicas": 1}}),
        json!({"operations": [{"op": "replace", "path": "/spec/replicas", "value": 5}]}),
        &["+patchStrategy=jsonPatch"],
    );
    assert_eq!(result.unwrap(), json!({"spec": {"replicas": 5}}));
    let result = patch_with_doc(
        json!({"spec": {}}),
        json!({"operations": [{"op": "remove", "path": "/spec/replicas"}]}),
        &["+patchStrategy=jsonPatch"],
    );
    assert_eq!(
        error(result),
        "operation 0: path /spec/replicas does not exist"
    );
}

#[test]
fn json_strategies_need_a_concrete_workload() {
    let result = patch_with_doc(
        json!({"spec": {"image": "§string"}}),
        json!({"spec": {"a": 1}}),
        &["+patchStrategy=jsonMergePatch"],
    );
    assert_eq!(
        error(result),
        "spec.image: the workload must be concrete for a JSON patch strategy: incomplete value string"
    );
}

#[test]
fn after_a_json_merge_patch_later_patches_conflict_on_scalars() {
    let doc: Vec<String> = vec!["+patchStrategy=jsonMergePatch".to_owned()];
    let merged = apply_patch(
        ex(&json!({"spec": {"replicas": "§*1|int"}})),
        ex(&json!({"metadata": {"labels": {"a": "b"}}})),
        &doc,
        &check,
    )
    .unwrap();
    let result = apply_patch(merged, ex(&json!({"spec": {"replicas": 3}})), &[], &check);
    assert_eq!(
        result.unwrap_err().to_string(),
        "spec.replicas: conflicting values 1 and 3"
    );
}

#[test]
fn an_empty_keyed_patch_list_leaves_the_base_alone() {
    let result = patch(
        json!({"env": [{"name": "A", "value": "1"}]}),
        json!({"env//+patchKey=name": []}),
    );
    assert_eq!(
        result.unwrap(),
        json!({"env": [{"name": "A", "value": "1"}]})
    );
    let result = patch(
        json!({"env": [{"name": "A", "value": "1"}]}),
        json!({"env": []}),
    );
    assert_eq!(error(result), "env: incompatible list lengths (1 and 0)");
}
