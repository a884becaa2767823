//! `net-raw-capability` (warning): a container keeps the `NET_RAW` capability (it drops
//! neither `NET_RAW` nor `ALL`).
//!
//! `NET_RAW` lets a process forge packets and spoof addresses on the pod network.
//! kube-linter's `drop-net-raw-capability`.
//!
//! ```yaml
//! securityContext:
//!   capabilities:
//!     drop: [NET_RAW]      # or [ALL]
//! ```

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
        let dropped = effective
            .capabilities("drop")
            .iter()
            .any(|capability| capability == "NET_RAW" || capability == "ALL");
        if !dropped {
            {
                let (message, span) = finding(
                    ctx,
                    object,
                    pod,
                    container,
                    "keeps the `NET_RAW` capability; drop it (`capabilities.drop: [ALL]`)",
                    "",
                );
                out.push(ctx.at_object(
                    object,
                    Diagnostic::warning("net-raw-capability", message, span),
                ));
            }
        }
    }
}
