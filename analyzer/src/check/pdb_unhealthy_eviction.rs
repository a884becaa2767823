//! `pdb-unhealthy-eviction` (warning): a PodDisruptionBudget does not let unhealthy pods be
//! evicted (`unhealthyPodEvictionPolicy` is not `AlwaysAllow`).
//!
//! With the default policy, a pod that is running but not ready counts against the budget, so
//! one crash-looping pod can block every node drain of the application. kube-linter's
//! `pdb-unhealthy-pod-eviction-policy`.
//!
//! ```yaml
//! spec:
//!   minAvailable: 1
//!   unhealthyPodEvictionPolicy: AlwaysAllow   # without it: warning
//! ```

use serde_json::Value;

use super::AppContext;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(ctx: &AppContext<'_>, object: &RenderedObject, out: &mut Vec<Diagnostic>) {
    let value = &object.object;
    if value.get("kind").and_then(Value::as_str) != Some("PodDisruptionBudget") {
        return;
    }
    let policy = value
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str);
    if policy == Some("AlwaysAllow") {
        return;
    }
    let (pointer, problem) = match policy {
        Some(other) => (
            "/spec/unhealthyPodEvictionPolicy",
            format!("unhealthyPodEvictionPolicy is {other}, not AlwaysAllow"),
        ),
        None => ("/spec", "sets no unhealthyPodEvictionPolicy".to_owned()),
    };
    out.push(ctx.at_object(
        object,
        Diagnostic::warning(
            "pdb-unhealthy-eviction",
            format!(
                "{}: {problem}, so a pod that is running but not ready can block node drains \
                 (set `unhealthyPodEvictionPolicy: AlwaysAllow`)",
                super::object_label(value)
            ),
            Some(ctx.source_span(object, pointer, None)),
        ),
    ));
}
