//! `ssh-port` (warning): a container exposes port 22.
//!
//! A container running an SSH server is a door into the cluster that bypasses its access
//! control; use `kubectl exec` or an ephemeral container to debug. kube-linter's `ssh-port`.
//!
//! ```yaml
//! ports:
//!   - containerPort: 22     # warning
//! ```

use serde_json::Value;

use super::AppContext;
use super::container_security::finding;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    for container in &pod.spec.containers {
        let ports = pod
            .raw_container(&object.object, container)
            .and_then(|raw| raw.get("ports"))
            .and_then(Value::as_array);
        for (index, port) in ports.into_iter().flatten().enumerate() {
            if port.get("containerPort").and_then(Value::as_i64) == Some(22) {
                {
                    let (message, span) = finding(
                        ctx,
                        object,
                        pod,
                        container,
                        "exposes the SSH port 22",
                        &format!("/ports/{index}/containerPort"),
                    );
                    out.push(ctx.at_object(object, Diagnostic::warning("ssh-port", message, span)));
                }
            }
        }
    }
}
