//! `host-pid` (warning): a pod shares the host's process namespace (`hostPID: true`).
//!
//! Its processes see, and can signal or trace, every process on the node. kube-linter's
//! `host-pid`.
//!
//! ```yaml
//! objects:
//!   - {apiVersion: v1, kind: Pod, spec: {hostPID: true, containers: [...]}}  # warning
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
    if let Some((message, span)) = host_namespace(ctx, object, pod, "hostPID", "process") {
        out.push(ctx.at_object(object, Diagnostic::warning("host-pid", message, span)));
    }
}

/// The message and span of a finding when the pod spec sets `field` to true.
pub(super) fn host_namespace(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    field: &str,
    namespace: &str,
) -> Option<(String, Option<cue::Span>)> {
    let set = pod
        .raw(&object.object)
        .and_then(|spec| spec.get(field))
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    set.then(|| {
        (
            format!(
                "{} shares the host's {namespace} namespace (`{field}: true`)",
                super::object_label(&object.object)
            ),
            Some(ctx.field_span(object, &format!("{}/{field}", pod.pointer))),
        )
    })
}
