//! `sensitive-host-mount` (warning): a pod mounts a sensitive host directory: the root, `/etc`,
//! `/proc`, `/sys`, `/boot`, `/dev`, `/lib`, `/usr`, `/bin`, `/sbin`, the kubelet's or the
//! container runtime's state, or a container runtime socket (`docker.sock`, `containerd.sock`,
//! `crio.sock`).
//!
//! Such a mount gives the pod control of the node. kube-linter's `sensitive-host-mounts` and
//! `docker-sock` (`host-path` warns about every host path; this one about the dangerous ones).
//!
//! ```yaml
//! volumes:
//!   - name: docker
//!     hostPath: {path: /var/run/docker.sock}   # warning
//! ```

use serde_json::Value;

use super::AppContext;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

/// Host directories whose mount hands over the node (a path under them counts too).
const SENSITIVE: &[&str] = &[
    "/etc",
    "/proc",
    "/sys",
    "/boot",
    "/dev",
    "/lib",
    "/usr",
    "/bin",
    "/sbin",
    "/var/lib/kubelet",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/var/run/containerd",
    "/run/containerd",
    "/var/run/crio",
    "/run/crio",
];

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    for (index, volume) in pod.spec.volumes.iter().enumerate() {
        let Some(path) = volume
            .host_path
            .and_then(|host_path| host_path.get("path"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let trimmed = path.trim_end_matches('/');
        let sensitive = trimmed.is_empty()
            || SENSITIVE.iter().any(|directory| {
                trimmed == *directory || trimmed.starts_with(&format!("{directory}/"))
            });
        if sensitive {
            out.push(ctx.at_object(
                object,
                Diagnostic::warning(
                    "sensitive-host-mount",
                    format!(
                        "{} mounts the host's `{path}` (volume `{}`), which gives it control of the node",
                        super::object_label(&object.object),
                        volume.name
                    ),
                    Some(ctx.field_span(
                        object,
                        &format!("{}/volumes/{index}/hostPath/path", pod.pointer),
                    )),
                ),
            ));
        }
    }
}
