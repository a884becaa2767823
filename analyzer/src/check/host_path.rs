//! `host-path` (warning): a pod that mounts a `hostPath` volume.
//!
//! A host path gives the pod the node's files; writable, it can alter the node. Use a
//! PersistentVolumeClaim, a ConfigMap or an `emptyDir` instead.
//!
//! ```yaml
//! traits:
//!   - type: storage
//!     properties:
//!       hostPath:
//!         - {name: logs, path: /var/log, mountPath: /logs}   # warning
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
    for (index, volume) in pod
        .spec
        .volumes
        .iter()
        .enumerate()
        .filter(|(_, volume)| volume.host_path.is_some())
    {
        out.push(ctx.at_object(
            object,
            Diagnostic::warning(
                "host-path",
                format!(
                    "{} mounts host path volume `{}`",
                    super::object_label(&object.object),
                    volume.name
                ),
                Some(ctx.field_span(object, &format!("{}/volumes/{index}/hostPath", pod.pointer))),
            ),
        ));
    }
}
