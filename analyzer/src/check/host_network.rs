//! `host-network` (warning): a pod with `hostNetwork: true`.
//!
//! The pod shares the node's network namespace: it can bind the node's ports and see its
//! traffic, and it bypasses network policies.
//!
//! ```yaml
//! components:
//!   - name: agent
//!     type: k8s-objects
//!     properties:
//!       objects:
//!         - {apiVersion: v1, kind: Pod, spec: {hostNetwork: true, containers: [...]}}  # warning
//! ```

use super::AppContext;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    if pod.spec.host_network == Some(true) {
        out.push(ctx.at_object(
            object,
            Diagnostic::warning(
                "host-network",
                format!(
                    "{} uses the host's network (`hostNetwork: true`)",
                    describe(object)
                ),
                Some(ctx.object_span(object)),
            ),
        ));
    }
}

/// `Deployment `web`` for messages.
pub(crate) fn describe(object: &RenderedObject) -> String {
    let kind = object
        .object
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("object");
    let name = object
        .object
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    format!("{kind} `{name}`")
}
