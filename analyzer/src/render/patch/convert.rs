//! Conversions between the evaluator's [`Exported`] view and JSON.
//!
//! Exporting to JSON follows `cue export` / KubeVela's `Unstructured()`: defaults are taken,
//! optional fields are dropped, and any non-concrete value is an error (nothing is silently
//! dropped). The lenient mode drops non-concrete values instead, as `context.output` for
//! traits does (the injected context is JSON; `context::context_json` builds it).

use cue::{Exported, ExportedField};

/// How to treat a non-concrete value when exporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Concreteness {
    /// A non-concrete value is an error.
    Required,
    /// A non-concrete value is left out. The renderer builds `context.output` with
    /// `context::context_json`, which is this plus Go's encoding in one pass; tests use this
    /// mode to show partial results and as `context_json`'s reference.
    #[cfg_attr(not(test), expect(dead_code))]
    Lenient,
}

/// A value that could not be exported, with its path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExportError {
    pub(crate) path: Vec<String>,
    pub(crate) message: String,
    /// Evaluator errors behind a bottom value, when there are any.
    pub(crate) causes: Vec<cue::Error>,
}

impl ExportError {
    fn incomplete(path: Vec<String>, constraint: &str) -> Self {
        Self {
            path,
            message: format!("incomplete value {constraint}"),
            causes: Vec::new(),
        }
    }

    fn bottom(path: Vec<String>, causes: Vec<cue::Error>) -> Self {
        Self {
            path,
            message: causes.first().map_or_else(
                || "explicit error (_|_ literal)".to_owned(),
                |e| e.message.clone(),
            ),
            causes,
        }
    }
}

/// The JSON of a value.
///
/// # Errors
/// Every non-concrete or bottom value found (in `Required` mode; bottoms in both modes).
pub(crate) fn to_json(
    value: &Exported,
    concreteness: Concreteness,
) -> Result<serde_json::Value, Vec<ExportError>> {
    let mut errors = Vec::new();
    let mut path = Vec::new();
    let json = convert(value, concreteness, &mut path, &mut errors);
    if errors.is_empty() {
        Ok(json.unwrap_or(serde_json::Value::Null))
    } else {
        Err(errors)
    }
}

/// [`to_json`] of a value the caller no longer needs: labels and scalars are moved into the
/// JSON instead of copied (the final export of every rendered object).
///
/// # Errors
/// As [`to_json`].
pub(crate) fn into_json(
    value: Exported,
    concreteness: Concreteness,
) -> Result<serde_json::Value, Vec<ExportError>> {
    let mut errors = Vec::new();
    let mut path = Vec::new();
    let json = convert_owned(value, concreteness, &mut path, &mut errors);
    if errors.is_empty() {
        Ok(json.unwrap_or(serde_json::Value::Null))
    } else {
        Err(errors)
    }
}

/// `into_exported(into_json(value, Required)?)` without building the JSON (the base of a
/// JSON merge patch, and the patch): defaults taken; optional, hidden and definition fields
/// and doc comments dropped; every list open.
///
/// # Errors
/// As [`into_json`] in `Required` mode: every non-concrete or bottom value, in the same order.
pub(crate) fn into_concrete(mut value: Exported) -> Result<Exported, Vec<ExportError>> {
    let mut errors = Vec::new();
    make_concrete(&mut value, None, &mut errors);
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

/// One step of the path to the value [`make_concrete`] is at, on the stack: the path is
/// only turned into strings when an error is reported.
struct PathNode<'p> {
    step: Step<'p>,
    parent: Option<&'p PathNode<'p>>,
}

fn node_path(node: Option<&PathNode<'_>>) -> Vec<String> {
    let mut steps = Vec::new();
    let mut current = node;
    while let Some(node) = current {
        steps.push(node.step);
        current = node.parent;
    }
    steps.reverse();
    owned_path(&steps)
}

/// [`convert_owned`] in `Required` mode, making `value` concrete where it is instead of
/// building JSON (or a new export): structs keep their vectors, dropped fields are removed.
/// `false` when `value` is not concrete (the error is in `errors`): its struct leaves it out,
/// its list holds `null` there.
fn make_concrete(
    value: &mut Exported,
    path: Option<&PathNode<'_>>,
    errors: &mut Vec<ExportError>,
) -> bool {
    match value {
        Exported::Scalar(_) => true,
        Exported::Default { default, .. } => {
            let default = std::mem::replace(default.as_mut(), Exported::Struct(Vec::new()));
            *value = default;
            make_concrete(value, path, errors)
        }
        Exported::Struct(fields) => {
            fields.retain_mut(|field| {
                if !is_data_field(field) {
                    return false;
                }
                field.doc = Vec::new();
                let node = PathNode {
                    step: Step::Label(&field.label),
                    parent: path,
                };
                make_concrete(&mut field.value, Some(&node), errors)
            });
            true
        }
        Exported::List { elems, open, .. } => {
            *open = true;
            for (index, elem) in elems.iter_mut().enumerate() {
                let node = PathNode {
                    step: Step::Index(index),
                    parent: path,
                };
                if !make_concrete(elem, Some(&node), errors) {
                    *elem = Exported::Scalar(serde_json::Value::Null);
                }
            }
            true
        }
        Exported::Incomplete(constraint) => {
            errors.push(ExportError::incomplete(node_path(path), &constraint.text));
            false
        }
        Exported::Bottom(causes) => {
            errors.push(ExportError::bottom(node_path(path), std::mem::take(causes)));
            false
        }
    }
}

/// A step of [`convert_owned`]'s path: the label is held here while its value is converted,
/// then becomes the JSON key.
enum OwnedStep {
    Label(String),
    Index(usize),
}

fn owned_steps(path: &[OwnedStep]) -> Vec<String> {
    path.iter()
        .map(|step| match step {
            OwnedStep::Label(label) => label.clone(),
            OwnedStep::Index(index) => index.to_string(),
        })
        .collect()
}

/// [`convert`], consuming the value (same results, same errors, same order).
fn convert_owned(
    value: Exported,
    concreteness: Concreteness,
    path: &mut Vec<OwnedStep>,
    errors: &mut Vec<ExportError>,
) -> Option<serde_json::Value> {
    match value {
        Exported::Scalar(scalar) => Some(scalar),
        Exported::Default { default, .. } => convert_owned(*default, concreteness, path, errors),
        Exported::Struct(fields) => {
            let mut object = serde_json::Map::with_capacity(fields.len());
            for field in fields.into_iter().filter(is_data_field) {
                path.push(OwnedStep::Label(field.label));
                let json = convert_owned(field.value, concreteness, path, errors);
                if let (Some(json), Some(OwnedStep::Label(label))) = (json, path.pop()) {
                    object.insert(label, json);
                }
            }
            Some(serde_json::Value::Object(object))
        }
        Exported::List { elems, .. } => {
            let mut items = Vec::with_capacity(elems.len());
            for (index, elem) in elems.into_iter().enumerate() {
                path.push(OwnedStep::Index(index));
                // A non-concrete list element cannot be left out without shifting the others.
                match convert_owned(elem, concreteness, path, errors) {
                    Some(json) => items.push(json),
                    None => items.push(serde_json::Value::Null),
                }
                path.pop();
            }
            Some(serde_json::Value::Array(items))
        }
        Exported::Incomplete(constraint) => {
            if concreteness == Concreteness::Required {
                errors.push(ExportError::incomplete(owned_steps(path), &constraint.text));
            }
            None
        }
        Exported::Bottom(causes) => {
            errors.push(ExportError::bottom(owned_steps(path), causes));
            None
        }
    }
}

/// One step of the path to the value being converted. Kept borrowed and turned into strings
/// only when an error is reported: conversion runs on every rendered object.
#[derive(Debug, Clone, Copy)]
enum Step<'v> {
    Label(&'v str),
    Index(usize),
}

fn owned_path(path: &[Step<'_>]) -> Vec<String> {
    path.iter()
        .map(|step| match step {
            Step::Label(label) => (*label).to_owned(),
            Step::Index(index) => index.to_string(),
        })
        .collect()
}

fn convert<'v>(
    value: &'v Exported,
    concreteness: Concreteness,
    path: &mut Vec<Step<'v>>,
    errors: &mut Vec<ExportError>,
) -> Option<serde_json::Value> {
    match value {
        Exported::Scalar(scalar) => Some(scalar.clone()),
        Exported::Default { default, .. } => convert(default, concreteness, path, errors),
        Exported::Struct(fields) => {
            let mut object = serde_json::Map::with_capacity(fields.len());
            for field in fields.iter().filter(|field| is_data_field(field)) {
                path.push(Step::Label(&field.label));
                if let Some(json) = convert(&field.value, concreteness, path, errors) {
                    object.insert(field.label.clone(), json);
                }
                path.pop();
            }
            Some(serde_json::Value::Object(object))
        }
        Exported::List { elems, .. } => {
            let mut items = Vec::with_capacity(elems.len());
            for (index, elem) in elems.iter().enumerate() {
                path.push(Step::Index(index));
                // A non-concrete list element cannot be left out without shifting the others.
                match convert(elem, concreteness, path, errors) {
                    Some(json) => items.push(json),
                    None => items.push(serde_json::Value::Null),
                }
                path.pop();
            }
            Some(serde_json::Value::Array(items))
        }
        Exported::Incomplete(constraint) => {
            if concreteness == Concreteness::Required {
                errors.push(ExportError::incomplete(owned_path(path), &constraint.text));
            }
            None
        }
        Exported::Bottom(causes) => {
            errors.push(ExportError::bottom(owned_path(path), causes.clone()));
            None
        }
    }
}

/// Whether a field reaches JSON: not optional, not hidden (`_x`), not a definition (`#X`).
/// Hidden fields and definitions appear in exports (a patch carries its hidden fields into the
/// base, like upstream), but never in data, and errors inside them do not block export.
///
/// FIXME(#2): `ExportedField` does not say whether a label was quoted, so a regular field
/// written `"_x"` is taken for a hidden one.
pub(crate) fn is_data_field(field: &ExportedField) -> bool {
    !field.optional && !field.label.starts_with('_') && !field.label.starts_with('#')
}

/// A JSON value as a concrete exported value. Lists are open, like KubeVela re-parsing a JSON
/// patch result with every list opened. Takes the JSON by value: labels and scalars are moved.
pub(crate) fn into_exported(value: serde_json::Value) -> Exported {
    match value {
        serde_json::Value::Object(object) => Exported::Struct(
            object
                .into_iter()
                .map(|(label, value)| ExportedField {
                    label,
                    value: into_exported(value),
                    doc: Vec::new(),
                    optional: false,
                })
                .collect(),
        ),
        serde_json::Value::Array(items) => Exported::List {
            elems: items.into_iter().map(into_exported).collect(),
            open: true,
            rest: None,
        },
        scalar => Exported::Scalar(scalar),
    }
}

/// Short CUE-like text of a value, for conflict messages.
pub(crate) fn describe(value: &Exported) -> String {
    match value {
        Exported::Scalar(scalar) => scalar.to_string(),
        Exported::Struct(_) => "{...}".to_owned(),
        Exported::List { .. } => "[...]".to_owned(),
        Exported::Default { default, others } => {
            let mut parts = vec![format!("*{}", describe(default))];
            parts.extend(others.iter().map(describe));
            parts.join(" | ")
        }
        Exported::Incomplete(constraint) => constraint.text.clone(),
        Exported::Bottom(_) => "_|_".to_owned(),
    }
}

/// CUE's kind name of a value, for "mismatched types" messages.
pub(crate) fn kind_name(value: &Exported) -> &'static str {
    match value {
        Exported::Scalar(serde_json::Value::Null) => "null",
        Exported::Scalar(serde_json::Value::Bool(_)) => "bool",
        Exported::Scalar(serde_json::Value::Number(number)) => {
            if number.is_f64() {
                "float"
            } else {
                "int"
            }
        }
        Exported::Scalar(serde_json::Value::String(_)) => "string",
        Exported::Scalar(_) | Exported::Struct(_) => "struct",
        Exported::List { .. } => "list",
        Exported::Default { default, .. } => kind_name(default),
        Exported::Incomplete(_) => "incomplete",
        Exported::Bottom(_) => "bottom",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cue::{Constraint, KindSet};
    use serde_json::json;

    fn field(label: &str, value: Exported, optional: bool) -> ExportedField {
        ExportedField {
            label: label.to_owned(),
            value,
            doc: Vec::new(),
            optional,
        }
    }

    fn incomplete(text: &str) -> Exported {
        Exported::Incomplete(Constraint {
            kinds: KindSet::STRING,
            text: text.to_owned(),
        })
    }

    #[test]
    fn takes_defaults_and_drops_optional_fields() {
        let value = Exported::Struct(vec![
            field(
                "replicas",
                Exported::Default {
                    default: Box::new(Exported::Scalar(json!(1))),
                    others: vec![incomplete("int")],
                },
                false,
            ),
            field("name", incomplete("string"), true),
        ]);
        assert_eq!(
            to_json(&value, Concreteness::Required).unwrap(),
            json!({"replicas": 1})
        );
    }

    #[test]
    fn incomplete_values_are_errors_with_paths_or_dropped_when_lenient() {
        let value = Exported::Struct(vec![field(
            "spec",
            Exported::Struct(vec![field("image", incomplete("string"), false)]),
            false,
        )]);
        let errors = to_json(&value, Concreteness::Required).unwrap_err();
        assert_eq!(errors[0].path, vec!["spec", "image"]);
        assert_eq!(errors[0].message, "incomplete value string");
        assert_eq!(
            to_json(&value, Concreteness::Lenient).unwrap(),
            json!({"spec": {}})
        );
    }

    /// The consuming conversion gives what the borrowing one gives: values, dropped fields,
    /// and errors with their paths, in order.
    #[test]
    fn into_json_matches_to_json() {
        let bottom = Exported::Bottom(vec![cue::Error::new(
            cue::ErrorKind::Conflict,
            "conflicting values 1 and 2",
            cue::Span::default(),
        )]);
        let values = [
            Exported::Struct(vec![
                field("b", Exported::Scalar(json!(2)), false),
                field("a", Exported::Scalar(json!("x")), false),
                field("_hidden", Exported::Scalar(json!(0)), false),
                field("opt", incomplete("string"), true),
                field(
                    "list",
                    Exported::List {
                        elems: vec![incomplete("int"), Exported::Scalar(json!(true))],
                        open: false,
                        rest: None,
                    },
                    false,
                ),
            ]),
            Exported::Struct(vec![
                field(
                    "spec",
                    Exported::Struct(vec![
                        field("image", incomplete("string"), false),
                        field("bad", bottom, false),
                        field("ok", Exported::Scalar(json!(1)), false),
                    ]),
                    false,
                ),
                field("after", Exported::Scalar(json!(null)), false),
            ]),
        ];
        for value in values {
            for concreteness in [Concreteness::Required, Concreteness::Lenient] {
                assert_eq!(
                    into_json(value.clone(), concreteness),
                    to_json(&value, concreteness),
                    "{value:?} {concreteness:?}"
                );
            }
        }
    }

    #[test]
    fn json_round_trips() {
        let value = json!({"a": [1, {"b": null}], "c": "x"});
        assert_eq!(
            to_json(&into_exported(value.clone()), Concreteness::Required).unwrap(),
            value
        );
    }
}
