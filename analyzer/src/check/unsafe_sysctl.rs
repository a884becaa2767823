//! `unsafe-sysctl` (warning): a pod sets a sysctl outside Kubernetes' safe set.
//!
//! Unsafe sysctls are node-wide or can starve other pods; the kubelet refuses them unless the
//! node allows them (`--allowed-unsafe-sysctls`). kube-linter's `unsafe-sysctls`. The safe set
//! is the kubelet's: `kernel.shm_rmid_forced`, `net.ipv4.ip_local_port_range`,
//! `net.ipv4.ip_unprivileged_port_start`, `net.ipv4.tcp_syncookies`, `net.ipv4.ping_group_range`,
//! `net.ipv4.ip_local_reserved_ports`, `net.ipv4.tcp_keepalive_time`,
//! `net.ipv4.tcp_fin_timeout`, `net.ipv4.tcp_keepalive_intvl`, `net.ipv4.tcp_keepalive_probes`.
//!
//! ```yaml
//! securityContext:
//!   sysctls:
//!     - {name: kernel.msgmax, value: "65536"}   # warning
//! ```

use serde_json::Value;

use super::AppContext;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

const SAFE: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    let sysctls = pod
        .raw(&object.object)
        .and_then(|spec| spec.get("securityContext"))
        .and_then(|context| context.get("sysctls"))
        .and_then(Value::as_array);
    for (index, sysctl) in sysctls.into_iter().flatten().enumerate() {
        let Some(name) = sysctl.get("name").and_then(Value::as_str) else {
            continue;
        };
        if SAFE.contains(&name.replace('/', ".").as_str()) {
            continue;
        }
        out.push(ctx.at_object(
            object,
            Diagnostic::warning(
                "unsafe-sysctl",
                format!(
                    "{} sets the unsafe sysctl `{name}`",
                    super::object_label(&object.object)
                ),
                Some(ctx.field_span(
                    object,
                    &format!("{}/securityContext/sysctls/{index}/name", pod.pointer),
                )),
            ),
        ));
    }
}
