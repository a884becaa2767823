//! The container security settings the kube-linter equivalents read: each container's
//! effective `securityContext` (the container's over the pod's), and a helper to report on one
//! container.

use serde_json::{Map, Value};

use super::AppContext;
use super::pod_spec::{Container, PodTemplate};
use crate::RenderedObject;

/// A container's security settings, the container's own over the pod's.
pub(crate) struct Effective<'a> {
    pod: Option<&'a Map<String, Value>>,
    container: Option<&'a Map<String, Value>>,
}

impl<'a> Effective<'a> {
    pub(crate) fn of(
        object: &'a Value,
        pod: &PodTemplate<'a>,
        container: &Container<'a>,
    ) -> Effective<'a> {
        let context = |map: Option<&'a Map<String, Value>>| {
            map.and_then(|map| map.get("securityContext"))
                .and_then(Value::as_object)
        };
        Effective {
            pod: context(pod.raw(object)),
            container: context(pod.raw_container(object, container)),
        }
    }

    /// The container's value of `key`, else the pod's (for the fields both have).
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.container
            .and_then(|context| context.get(key))
            .filter(|value| !value.is_null())
            .or_else(|| self.pod.and_then(|context| context.get(key)))
            .filter(|value| !value.is_null())
    }

    /// The container's own value of `key`.
    pub(crate) fn own(&self, key: &str) -> Option<&'a Value> {
        self.container
            .and_then(|context| context.get(key))
            .filter(|value| !value.is_null())
    }

    /// The capabilities the container adds (`add`) or drops (`drop`), upper-cased without a
    /// `CAP_` prefix.
    pub(crate) fn capabilities(&self, list: &str) -> Vec<String> {
        self.own("capabilities")
            .and_then(|capabilities| capabilities.get(list))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|name| name.to_uppercase().trim_start_matches("CAP_").to_owned())
            .collect()
    }
}

/// The message and span of a finding about `container`: `problem`, pointing at `field` of it
/// (the container when empty).
pub(crate) fn finding(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    container: &Container<'_>,
    problem: &str,
    field: &str,
) -> (String, Option<cue::Span>) {
    (
        format!(
            "{}: {} {problem}",
            super::object_label(&object.object),
            container.label()
        ),
        Some(ctx.field_span(
            object,
            &format!("{}{field}", pod.container_pointer(container)),
        )),
    )
}
