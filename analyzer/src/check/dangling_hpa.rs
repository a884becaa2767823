//! `dangling-hpa` (warning): a HorizontalPodAutoscaler scales an object that its app does not
//! have.
//!
//! The autoscaler does nothing. kube-linter's `dangling-horizontalpodautoscaler`. Looked up
//! among the app's own rendered objects, by kind and name.
//!
//! ```yaml
//! scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}   # warning: no such Deployment
//! ```

use serde_json::Value;

use super::AppContext;
use super::app_objects::{AppObjects, namespace_of};
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    index: &AppObjects<'_>,
    object: &RenderedObject,
    out: &mut Vec<Diagnostic>,
) {
    let value = &object.object;
    if value.get("kind").and_then(Value::as_str) != Some("HorizontalPodAutoscaler") {
        return;
    }
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    let (Some(kind), Some(name)) = (
        text("/spec/scaleTargetRef/kind"),
        text("/spec/scaleTargetRef/name"),
    ) else {
        return;
    };
    let namespace = namespace_of(value, &ctx.loaded.app_ref.namespace);
    if index.has(Some(kind), namespace, name) {
        return;
    }
    out.push(ctx.at_object(
        object,
        Diagnostic::warning(
            "dangling-hpa",
            format!(
                "{}: scales {kind} `{name}`, which the app does not have",
                super::object_label(value)
            ),
            Some(ctx.source_span(object, "/spec/scaleTargetRef", None)),
        ),
    ));
}
