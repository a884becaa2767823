//! `privilege-escalation` (warning): a container allows privilege escalation
//! (`allowPrivilegeEscalation: true`) or adds the `SYS_ADMIN` capability.
//!
//! Its processes can gain more privileges than the container started with (setuid binaries,
//! mounts). kube-linter's `privilege-escalation-container`.
//!
//! ```yaml
//! securityContext:
//!   allowPrivilegeEscalation: true   # warning
//! ```

use serde_json::Value;

use super::AppContext;
use super::container_security::{Effective, finding};
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    for container in &pod.spec.containers {
        let effective = Effective::of(&object.object, pod, container);
        if effective
            .own("allowPrivilegeEscalation")
            .and_then(Value::as_bool)
            == Some(true)
        {
            {
                let (message, span) = finding(
                    ctx,
                    object,
                    pod,
                    container,
                    "allows privilege escalation (`allowPrivilegeEscalation: true`)",
                    "/securityContext/allowPrivilegeEscalation",
                );
                out.push(ctx.at_object(
                    object,
                    Diagnostic::warning("privilege-escalation", message, span),
                ));
            }
        } else if effective
            .capabilities("add")
            .iter()
            .any(|capability| capability == "SYS_ADMIN" || capability == "ALL")
        {
            {
                let (message, span) = finding(
                    ctx,
                    object,
                    pod,
                    container,
                    "adds the `SYS_ADMIN` capability",
                    "/securityContext/capabilities/add",
                );
                out.push(ctx.at_object(
                    object,
                    Diagnostic::warning("privilege-escalation", message, span),
                ));
            }
        }
    }
}
