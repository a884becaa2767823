//! `dangling-service` (warning): a Service's selector matches the pod template of no workload
//! of its app.
//!
//! The Service has no endpoints: traffic to it goes nowhere. kube-linter's `dangling-service`.
//! Looked up among the app's own rendered objects (a Service that selects another app's pods
//! is reported too: suppress it there). A Service without a selector (its endpoints managed
//! by hand) is not reported.
//!
//! ```yaml
//! - apiVersion: v1
//!   kind: Service
//!   spec:
//!     selector: {app: web}     # warning: no pod template of the app has app=web
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
    if value.get("kind").and_then(Value::as_str) != Some("Service")
        || value.get("apiVersion").and_then(Value::as_str) != Some("v1")
    {
        return;
    }
    let Some(selector) = value
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|selector| !selector.is_empty())
    else {
        return;
    };
    let namespace = namespace_of(value, &ctx.loaded.app_ref.namespace);
    if index.selects_pods(namespace, selector) {
        return;
    }
    out.push(ctx.at_object(
        object,
        Diagnostic::warning(
            "dangling-service",
            format!(
                "{}: its selector matches no pod template of the app; it has no endpoints",
                super::object_label(value)
            ),
            Some(ctx.source_span(object, "/spec/selector", None)),
        ),
    ));
}
