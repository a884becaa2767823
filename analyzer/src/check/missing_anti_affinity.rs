//! `missing-anti-affinity` (warning): a Deployment, StatefulSet or ReplicaSet runs more than one
//! replica with nothing that spreads them over nodes: no pod anti-affinity and no topology
//! spread constraint.
//!
//! The scheduler may then put every replica on one node, and that node's failure takes the
//! whole application down. kube-linter's `no-anti-affinity`; a topology spread constraint,
//! the newer way to say the same, counts as well.
//!
//! ```yaml
//! spec:
//!   replicas: 3              # warning without one of these in the pod template:
//!   template:
//!     spec:
//!       topologySpreadConstraints: [{ maxSkew: 1, topologyKey: kubernetes.io/hostname, ... }]
//!       affinity: { podAntiAffinity: { ... } }
//! ```

use serde_json::Value;

use super::AppContext;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

const REPLICATED: [&str; 3] = ["Deployment", "StatefulSet", "ReplicaSet"];

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    kind: &str,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    if !REPLICATED.contains(&kind) {
        return;
    }
    let value = &object.object;
    let replicas = value.pointer("/spec/replicas").and_then(Value::as_i64);
    if replicas.is_none_or(|replicas| replicas < 2) {
        return;
    }
    let spec = pod.raw(value);
    let has = |key: &str| spec.and_then(|spec| spec.get(key));
    let anti_affinity = has("affinity").and_then(|affinity| affinity.get("podAntiAffinity"));
    let spread = has("topologySpreadConstraints")
        .and_then(Value::as_array)
        .is_some_and(|constraints| !constraints.is_empty());
    if anti_affinity.is_some() || spread {
        return;
    }
    out.push(ctx.at_object(
        object,
        Diagnostic::warning(
            "missing-anti-affinity",
            format!(
                "{}: runs {} replicas with no pod anti-affinity or topology spread constraint, so \
                 all of them may land on one node",
                super::object_label(value),
                replicas.unwrap_or_default()
            ),
            Some(ctx.source_span(object, "/spec/replicas", None)),
        ),
    ));
}
