//! `host-ipc` (warning): a pod shares the host's IPC namespace (`hostIPC: true`).
//!
//! Its processes can read and write the shared memory of every process on the node.
//! kube-linter's `host-ipc`.
//!
//! ```yaml
//! objects:
//!   - {apiVersion: v1, kind: Pod, spec: {hostIPC: true, containers: [...]}}  # warning
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
    if let Some((message, span)) =
        super::host_pid::host_namespace(ctx, object, pod, "hostIPC", "IPC")
    {
        out.push(ctx.at_object(object, Diagnostic::warning("host-ipc", message, span)));
    }
}
