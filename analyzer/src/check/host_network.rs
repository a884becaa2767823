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
                    super::object_label(&object.object)
                ),
                Some(ctx.field_span(object, &format!("{}/hostNetwork", pod.pointer))),
            ),
        ));
    }
}
