//! `selector-mismatch` (error): a workload's `spec.selector` does not select the labels of its
//! own pod template, or is missing or empty where the API server requires one.
//!
//! The API server rejects such a Deployment, ReplicaSet, StatefulSet, DaemonSet or
//! ReplicationController (`selector` does not match template `labels`); kube-linter reports
//! the same as `mismatching-selector`. For `apps/v1` kinds the selector is required and must
//! not be empty; a ReplicationController without one takes its template's labels. A Job picks
//! its own selector unless `manualSelector` is set, so only a manual one is checked.
//!
//! ```yaml
//! objects:
//!   - apiVersion: apps/v1
//!     kind: Deployment
//!     metadata: {name: web}
//!     spec:
//!       selector:
//!         matchLabels: {app: web}      # error: does not match the template's labels
//!       template:
//!         metadata:
//!           labels: {app: website}
//! ```

use serde_json::{Map, Value};

use super::AppContext;
use super::api_versions::group_of;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    api_version: &str,
    kind: &str,
    out: &mut Vec<Diagnostic>,
) {
    let value = &object.object;
    let required = match (group_of(api_version), kind) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => true,
        ("", "ReplicationController") => false,
        ("batch", "Job") => {
            if value
                .pointer("/spec/manualSelector")
                .and_then(Value::as_bool)
                != Some(true)
            {
                return;
            }
            true
        }
        _ => return,
    };
    if !super::api_versions::builtin_apis().serves(api_version, kind) {
        return;
    }
    let Some(spec) = value.get("spec").and_then(Value::as_object) else {
        return;
    };
    let empty = Map::new();
    let labels = spec
        .get("template")
        .and_then(|template| template.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let selector = spec.get("selector").filter(|selector| !selector.is_null());
    let problem = match (selector, kind) {
        (None, _) if required => Some("`spec.selector` is required".to_owned()),
        (None, _) => None,
        // A ReplicationController's selector is a plain label map.
        (Some(Value::Object(map)), "ReplicationController") => (!map.is_empty()
            && !map_matches(map, labels))
        .then(|| "`spec.selector` does not match the template's `labels`".to_owned()),
        (Some(Value::Object(selector)), _) => label_selector(selector, labels),
        (Some(_), _) => None,
    };
    let Some(problem) = problem else {
        return;
    };
    let pointer = if selector.is_some() {
        "/spec/selector"
    } else {
        "/spec"
    };
    out.push(ctx.at_object(
        object,
        Diagnostic::error(
            "selector-mismatch",
            format!(
                "{}: {problem}; the API server rejects it",
                super::object_label(value)
            ),
            Some(ctx.source_span(object, pointer, Some("selector"))),
        ),
    ));
}

/// What is wrong with a `LabelSelector` against the template's labels, if anything.
fn label_selector(selector: &Map<String, Value>, labels: &Map<String, Value>) -> Option<String> {
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(Map::is_empty) && expressions.is_none_or(Vec::is_empty) {
        return Some("`spec.selector` is empty, which would select every pod".to_owned());
    }
    if let Some(match_labels) = match_labels
        && !map_matches(match_labels, labels)
    {
        return Some(
            "`spec.selector.matchLabels` does not match the template's `labels`".to_owned(),
        );
    }
    for expression in expressions.into_iter().flatten() {
        if expression_matches(expression, labels) == Some(false) {
            return Some(
                "`spec.selector.matchExpressions` does not match the template's `labels`"
                    .to_owned(),
            );
        }
    }
    None
}

/// True when every key of `selector` has the same text value in `labels`.
fn map_matches(selector: &Map<String, Value>, labels: &Map<String, Value>) -> bool {
    selector
        .iter()
        .all(|(key, value)| labels.get(key).and_then(Value::as_str) == value.as_str())
}

/// Whether `labels` satisfy one `matchExpressions` entry; `None` when it is malformed (the
/// schema's or the API server's other checks report that).
fn expression_matches(expression: &Value, labels: &Map<String, Value>) -> Option<bool> {
    let key = expression.get("key")?.as_str()?;
    let values: Vec<&str> = expression
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let label = labels.get(key).and_then(Value::as_str);
    match expression.get("operator")?.as_str()? {
        "In" => Some(label.is_some_and(|label| values.contains(&label))),
        "NotIn" => Some(label.is_none_or(|label| !values.contains(&label))),
        "Exists" => Some(label.is_some()),
        "DoesNotExist" => Some(label.is_none()),
        _ => None,
    }
}
