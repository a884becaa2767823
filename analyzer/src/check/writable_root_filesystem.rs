//! `writable-root-filesystem` (warning): a container's root filesystem is writable
//! (`securityContext.readOnlyRootFilesystem` is not `true`).
//!
//! An attacker can then change the container's binaries and configuration. kube-linter's
//! `no-read-only-root-fs`. Mount an `emptyDir` where the application must write.
//!
//! ```yaml
//! containers:
//!   - name: web
//!     image: nginx:1.27        # warning: writable root filesystem
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
            .own("readOnlyRootFilesystem")
            .and_then(Value::as_bool)
            == Some(true)
        {
            continue;
        }
        {
            let (message, span) = finding(
                ctx,
                object,
                pod,
                container,
                "has a writable root filesystem; set `securityContext.readOnlyRootFilesystem: true`",
                "",
            );
            out.push(ctx.at_object(
                object,
                Diagnostic::warning("writable-root-filesystem", message, span),
            ));
        }
    }
}
