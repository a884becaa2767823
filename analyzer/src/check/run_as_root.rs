//! `run-as-root` (warning): a container may run as root: neither it nor its pod sets
//! `runAsNonRoot: true` or a non-zero `runAsUser`.
//!
//! A process that escapes a root container is root on the node. kube-linter's
//! `run-as-non-root`. Set `securityContext.runAsNonRoot: true` (and a `runAsUser` if the image
//! has no numeric user).
//!
//! ```yaml
//! containers:
//!   - name: web
//!     image: nginx:1.27        # warning: may run as root
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
        let non_root = effective.get("runAsNonRoot").and_then(Value::as_bool) == Some(true);
        let user = effective.get("runAsUser").and_then(Value::as_i64);
        if non_root || user.is_some_and(|user| user > 0) {
            continue;
        }
        {
            let (message, span) = finding(
                ctx,
                object,
                pod,
                container,
                "may run as root; set `securityContext.runAsNonRoot: true`",
                "",
            );
            out.push(ctx.at_object(object, Diagnostic::warning("run-as-root", message, span)));
        }
    }
}
