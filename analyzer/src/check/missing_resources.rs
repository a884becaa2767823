//! `missing-resources` (warning): a container without CPU and memory requests and limits.
//!
//! Without requests the scheduler cannot place the pod sensibly; without limits one pod can
//! starve its neighbours. Both are reported in one diagnostic per container.
//!
//! ```yaml
//! components:
//!   - name: web
//!     type: webservice
//!     properties:
//!       image: nginx:1.27     # warning: no resources; set cpu and memory
//! ```

use super::AppContext;
use super::pod_spec::{ContainerList, PodTemplate};
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    // Ephemeral containers may not set resources.
    for container in pod
        .spec
        .containers
        .iter()
        .filter(|container| container.list != ContainerList::EphemeralContainers)
    {
        let resources = container.resources.as_ref();
        let has = |map: Option<&serde_json::Map<String, serde_json::Value>>| {
            map.is_some_and(|map| !map.is_empty())
        };
        let requests = has(resources.and_then(|r| r.requests));
        let limits = has(resources.and_then(|r| r.limits));
        let missing = match (requests, limits) {
            (true, true) => continue,
            (false, true) => "resource requests",
            (true, false) => "resource limits",
            (false, false) => "resource requests and limits",
        };
        out.push(ctx.at_object(
            object,
            Diagnostic::warning(
                "missing-resources",
                format!(
                    "{}: {} has no {missing}",
                    super::object_label(&object.object),
                    container.label()
                ),
                Some(ctx.source_span(
                    object,
                    &format!("{}/resources", pod.container_pointer(container)),
                    Some("cpu"),
                )),
            ),
        ));
    }
}
