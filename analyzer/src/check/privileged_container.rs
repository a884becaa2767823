//! `privileged-container` (warning): a container with `securityContext.privileged: true`.
//!
//! A privileged container has every capability of the host's root user: a compromise of the
//! container is a compromise of the node.
//!
//! ```yaml
//! traits:
//!   - type: securitycontext
//!     properties:
//!       privileged: true      # warning
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
    for container in &pod.spec.containers {
        let privileged = container
            .security_context
            .as_ref()
            .and_then(|context| context.privileged)
            == Some(true);
        if privileged {
            out.push(ctx.at_object(
                object,
                Diagnostic::warning(
                    "privileged-container",
                    format!(
                        "{}: {} runs privileged",
                        super::object_label(&object.object),
                        container.label()
                    ),
                    Some(ctx.source_span(
                        object,
                        &format!(
                            "{}/securityContext/privileged",
                            pod.container_pointer(container)
                        ),
                        Some("privileged"),
                    )),
                ),
            ));
        }
    }
}
