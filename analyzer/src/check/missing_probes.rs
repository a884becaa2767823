//! `missing-probes` (warning): a long-running container without a liveness or readiness
//! probe.
//!
//! Without a readiness probe, traffic reaches the pod before it can serve; without a
//! liveness probe, a hung process is never restarted. Jobs and CronJobs are not checked:
//! they run to completion.
//!
//! ```yaml
//! components:
//!   - name: web
//!     type: webservice
//!     properties:
//!       image: nginx:1.27     # warning: no readinessProbe or livenessProbe
//! ```

use super::AppContext;
use super::pod_spec::{ContainerList, PodTemplate, WorkloadKind};
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    if pod.workload == WorkloadKind::Batch {
        return;
    }
    // Init and ephemeral containers are not probed (a restartable init container may be, but
    // is not expected to).
    for container in pod
        .spec
        .containers
        .iter()
        .filter(|container| container.list == ContainerList::Containers)
    {
        let missing = match (
            container.liveness_probe.is_some(),
            container.readiness_probe.is_some(),
        ) {
            (true, true) => continue,
            (true, false) => "readiness probe",
            (false, true) => "liveness probe",
            (false, false) => "liveness and readiness probes",
        };
        out.push(ctx.at_object(
            object,
            Diagnostic::warning(
                "missing-probes",
                format!(
                    "{}: {} has no {missing}",
                    super::object_label(&object.object),
                    container.label()
                ),
                Some(ctx.field_span(object, &pod.container_pointer(container))),
            ),
        ));
    }
}
