//! RFC 7396 JSON merge patch and RFC 6902 JSON patch on `serde_json` values, the
//! `jsonMergePatch` and `jsonPatch` patch strategies (KubeVela uses `evanphx/json-patch`).

use cue::{Exported, ExportedField};
use serde_json::Value;

#[cfg(test)]
use super::convert::into_exported;

/// Applies a JSON merge patch: objects merge recursively, `null` deletes, anything else
/// (lists included) replaces. The renderer merges on the export
/// ([`merge_patch_exported`]); this JSON form is the reference its tests compare with.
#[cfg(test)]
pub(crate) fn merge_patch(base: &mut Value, patch: &Value) {
    let Value::Object(patch_object) = patch else {
        *base = patch.clone();
        return;
    };
    if !base.is_object() {
        *base = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(base_object) = base {
        for (key, patch_value) in patch_object {
            if patch_value.is_null() {
                base_object.shift_remove(key);
            } else {
                let entry = base_object.entry(key.clone()).or_insert(Value::Null);
                merge_patch(entry, patch_value);
            }
        }
    }
}

/// [`merge_patch`] of a concrete export onto a concrete export (both as
/// `convert::into_concrete` gives them): the same result as merging their JSON and reading that
/// back with `convert::into_exported`, without the JSON (field order kept, a deleted field
/// shifts the rest, new fields are appended in the patch's order). The patch is consumed: its
/// values are moved into the base.
pub(crate) fn merge_patch_exported(base: &mut Exported, patch: Exported) {
    let Exported::Struct(patch_fields) = patch else {
        *base = patch;
        return;
    };
    if !matches!(base, Exported::Struct(_)) {
        *base = Exported::Struct(Vec::new());
    }
    if let Exported::Struct(fields) = base {
        for ExportedField { label, value, .. } in patch_fields {
            let position = fields.iter().position(|field| field.label == label);
            if matches!(value, Exported::Scalar(Value::Null)) {
                if let Some(index) = position {
                    fields.remove(index);
                }
                continue;
            }
            let index = position.unwrap_or_else(|| {
                fields.push(ExportedField {
                    label,
                    value: Exported::Scalar(Value::Null),
                    doc: Vec::new(),
                    optional: false,
                });
                fields.len() - 1
            });
            if let Some(field) = fields.get_mut(index) {
                merge_patch_exported(&mut field.value, value);
            }
        }
    }
}

/// Applies a JSON patch (a list of operations).
///
/// # Errors
/// A malformed operation, a path that does not exist where it must, or a failed `test`.
pub(crate) fn json_patch(base: &mut Value, operations: &Value) -> Result<(), String> {
    let Value::Array(operations) = operations else {
        return Err("json patch operations must be a list".to_owned());
    };
    for (index, operation) in operations.iter().enumerate() {
        apply_operation(base, operation)
            .map_err(|message| format!("operation {index}: {message}"))?;
    }
    Ok(())
}

fn apply_operation(base: &mut Value, operation: &Value) -> Result<(), String> {
    let field = |name: &str| operation.get(name);
    let op = field("op").and_then(Value::as_str).ok_or("missing `op`")?;
    let path = field("path")
        .and_then(Value::as_str)
        .ok_or("missing `path`")?;
    let value = || {
        field("value")
            .cloned()
            .ok_or_else(|| format!("`{op}` needs a `value`"))
    };
    match op {
        "add" => add(base, path, value()?),
        "remove" => remove(base, path).map(drop),
        "replace" => {
            remove(base, path)?;
            add(base, path, value()?)
        }
        "move" => {
            let from = field("from")
                .and_then(Value::as_str)
                .ok_or("`move` needs `from`")?;
            let moved = remove(base, from)?;
            add(base, path, moved)
        }
        "copy" => {
            let from = field("from")
                .and_then(Value::as_str)
                .ok_or("`copy` needs `from`")?;
            let copied = base
                .pointer(from)
                .cloned()
                .ok_or_else(|| format!("path {from} does not exist"))?;
            add(base, path, copied)
        }
        "test" => {
            let expected = value()?;
            match base.pointer(path) {
                Some(actual) if *actual == expected => Ok(()),
                _ => Err(format!("test failed at {path}")),
            }
        }
        other => Err(format!("unknown op `{other}`")),
    }
}

fn split_pointer(path: &str) -> Result<(String, String), String> {
    if path.is_empty() {
        return Err("the root cannot be patched".to_owned());
    }
    let slash = path
        .rfind('/')
        .ok_or_else(|| format!("invalid path {path}"))?;
    let last = path[slash + 1..].replace("~1", "/").replace("~0", "~");
    Ok((path[..slash].to_owned(), last))
}

fn add(base: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let (parent_path, last) = split_pointer(path)?;
    let parent = base
        .pointer_mut(&parent_path)
        .ok_or_else(|| format!("path {parent_path} does not exist"))?;
    match parent {
        Value::Object(object) => {
            object.insert(last, value);
            Ok(())
        }
        Value::Array(items) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| format!("invalid index {last}"))?
            };
            if index > items.len() {
                return Err(format!("index {index} out of range"));
            }
            items.insert(index, value);
            Ok(())
        }
        _ => Err(format!("path {parent_path} is not a container")),
    }
}

fn remove(base: &mut Value, path: &str) -> Result<Value, String> {
    let (parent_path, last) = split_pointer(path)?;
    let parent = base
        .pointer_mut(&parent_path)
        .ok_or_else(|| format!("path {parent_path} does not exist"))?;
    match parent {
        Value::Object(object) => object
            .shift_remove(&last)
            .ok_or_else(|| format!("path {path} does not exist")),
        Value::Array(items) => {
            let index = last
                .parse::<usize>()
                .map_err(|_| format!("invalid index {last}"))?;
            if index >= items.len() {
                return Err(format!("index {index} out of range"));
            }
            Ok(items.remove(index))
        }
        _ => Err(format!("path {parent_path} is not a container")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Merging on the concrete export gives what merging the JSON and reading it back gives
    /// (defaults, optional and hidden fields, closed lists, deletions, new and replaced
    /// values), and the concrete export fails where the JSON export fails.
    #[test]
    fn merge_on_the_export_matches_merge_on_json() {
        use super::super::convert::{Concreteness, into_concrete, into_json};
        use cue::{Constraint, KindSet};
        let field = |label: &str, value: Exported, optional: bool| ExportedField {
            label: label.to_owned(),
            value,
            doc: vec!["// +patchKey=name".to_owned()],
            optional,
        };
        let incomplete = || {
            Exported::Incomplete(Constraint {
                kinds: KindSet::STRING,
                text: "string".to_owned(),
            })
        };
        let base = Exported::Struct(vec![
            field(
                "metadata",
                into_exported(json!({"name": "x", "labels": {"a": "1", "b": "2"}})),
                false,
            ),
            field(
                "replicas",
                Exported::Default {
                    default: Box::new(Exported::Scalar(json!(1))),
                    others: vec![incomplete()],
                },
                false,
            ),
            field("opt", incomplete(), true),
            field("_hidden", Exported::Scalar(json!(0)), false),
            field(
                "list",
                Exported::List {
                    elems: vec![Exported::Scalar(json!(1))],
                    open: false,
                    rest: None,
                },
                false,
            ),
        ]);
        let patches = [
            json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"x": [1, {"y": 2}]}}),
            json!({"replicas": null, "list": [2, 3], "metadata": "flat"}),
            json!([1, 2]),
            json!("scalar"),
            json!({}),
        ];
        for patch in patches {
            let mut json = into_json(base.clone(), Concreteness::Required).unwrap();
            merge_patch(&mut json, &patch);
            let mut exported = into_concrete(base.clone()).unwrap();
            merge_patch_exported(&mut exported, into_exported(patch.clone()));
            assert_eq!(exported, into_exported(json), "{patch}");
        }
        // A patch as a template gives it (defaults, optional and hidden fields, closed lists,
        // doc comments): made concrete, it is the export of its JSON, and merges the same.
        let patch = Exported::Struct(vec![
            field(
                "metadata",
                Exported::Struct(vec![field(
                    "labels",
                    Exported::Struct(vec![
                        field("a", Exported::Scalar(json!(null)), false),
                        field(
                            "c",
                            Exported::Default {
                                default: Box::new(Exported::Scalar(json!("3"))),
                                others: vec![incomplete()],
                            },
                            false,
                        ),
                        field("d?", incomplete(), true),
                    ]),
                    false,
                )]),
                false,
            ),
            field("_hidden", Exported::Scalar(json!(1)), false),
            field(
                "list",
                Exported::List {
                    elems: vec![Exported::Scalar(json!(2))],
                    open: false,
                    rest: None,
                },
                false,
            ),
        ]);
        let patch_json = into_json(patch.clone(), Concreteness::Required).unwrap();
        let concrete_patch = into_concrete(patch).unwrap();
        assert_eq!(concrete_patch, into_exported(patch_json.clone()));
        let mut json = into_json(base.clone(), Concreteness::Required).unwrap();
        merge_patch(&mut json, &patch_json);
        let mut exported = into_concrete(base.clone()).unwrap();
        merge_patch_exported(&mut exported, concrete_patch);
        assert_eq!(exported, into_exported(json));
        let broken = Exported::Struct(vec![
            field("a", incomplete(), false),
            field("b", Exported::Bottom(Vec::new()), false),
        ]);
        assert_eq!(
            into_concrete(broken.clone()).unwrap_err(),
            into_json(broken, Concreteness::Required).unwrap_err()
        );
    }

    #[test]
    fn merge_patch_follows_rfc_7396() {
        let mut base = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(&mut base, &json!({"a": "z", "c": {"f": null}, "l": [3]}));
        assert_eq!(base, json!({"a": "z", "c": {"d": "e"}, "l": [3]}));
    }

    #[test]
    fn json_patch_applies_operations_in_order() {
        let mut base = json!({"spec": {"containers": [{"name": "a"}]}});
        json_patch(
            &mut base,
            &json!([
                {"op": "add", "path": "/spec/containers/-", "value": {"name": "b"}},
                {"op": "replace", "path": "/spec/containers/0/name", "value": "c"},
                {"op": "test", "path": "/spec/containers/1/name", "value": "b"},
                {"op": "copy", "from": "/spec/containers/1", "path": "/spec/first"},
                {"op": "remove", "path": "/spec/containers/1"}
            ]),
        )
        .unwrap();
        assert_eq!(
            base,
            json!({"spec": {"containers": [{"name": "c"}], "first": {"name": "b"}}})
        );
    }

    #[test]
    fn failing_operations_are_errors() {
        let mut base = json!({"a": 1});
        let error = json_patch(&mut base, &json!([{"op": "remove", "path": "/b"}])).unwrap_err();
        assert_eq!(error, "operation 0: path /b does not exist");
        let error = json_patch(
            &mut base,
            &json!([{"op": "test", "path": "/a", "value": 2}]),
        )
        .unwrap_err();
        assert_eq!(error, "operation 0: test failed at /a");
    }
}
