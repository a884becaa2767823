//! `dangling-ingress` (warning): an Ingress routes to a Service that its app does not have.
//!
//! The route answers 503. kube-linter's `dangling-ingress`. Looked up among the app's own
//! rendered objects (a Service of another app is reported too: suppress it there).
//!
//! ```yaml
//! backend:
//!   service: {name: web, port: {number: 80}}   # warning: no Service `web` in the app
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
    if value.get("kind").and_then(Value::as_str) != Some("Ingress")
        || value.get("apiVersion").and_then(Value::as_str) != Some("networking.k8s.io/v1")
    {
        return;
    }
    let namespace = namespace_of(value, &ctx.loaded.app_ref.namespace);
    let mut backends = Vec::new();
    if value.pointer("/spec/defaultBackend/service").is_some() {
        backends.push("/spec/defaultBackend".to_owned());
    }
    for (rule, paths) in value
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(rule, value)| Some((rule, value.pointer("/http/paths")?.as_array()?)))
    {
        for path in 0..paths.len() {
            backends.push(format!("/spec/rules/{rule}/http/paths/{path}/backend"));
        }
    }
    for pointer in backends {
        let Some(service) = value
            .pointer(&format!("{pointer}/service/name"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        if index.has(Some("Service"), namespace, service) {
            continue;
        }
        out.push(ctx.at_object(
            object,
            Diagnostic::warning(
                "dangling-ingress",
                format!(
                    "{}: routes to Service `{service}`, which the app does not have",
                    super::object_label(value)
                ),
                Some(ctx.source_span(object, &format!("{pointer}/service/name"), None)),
            ),
        ));
    }
}
