//! `pdb-blocks-eviction` (warning): a PodDisruptionBudget allows no disruption at all:
//! `maxUnavailable: 0` (or `0%`), or `minAvailable: 100%`.
//!
//! Nodes can then never be drained: upgrades and scale-downs hang. kube-linter's
//! `pdb-max-unavailable` and `pdb-min-available`.
//!
//! ```yaml
//! spec:
//!   maxUnavailable: 0          # warning
//! ```

use serde_json::Value;

use super::AppContext;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(ctx: &AppContext<'_>, object: &RenderedObject, out: &mut Vec<Diagnostic>) {
    let value = &object.object;
    if value.get("kind").and_then(Value::as_str) != Some("PodDisruptionBudget") {
        return;
    }
    let is = |pointer: &str, number: i64, percent: &str| match value.pointer(pointer) {
        Some(Value::Number(n)) => n.as_i64() == Some(number),
        Some(Value::String(text)) => text == percent,
        _ => false,
    };
    let field = if is("/spec/maxUnavailable", 0, "0%") {
        "/spec/maxUnavailable"
    } else if value.pointer("/spec/minAvailable").and_then(Value::as_str) == Some("100%") {
        "/spec/minAvailable"
    } else {
        return;
    };
    out.push(ctx.at_object(
        object,
        Diagnostic::warning(
            "pdb-blocks-eviction",
            format!(
                "{}: allows no voluntary disruption, so its nodes can never be drained",
                super::object_label(value)
            ),
            Some(ctx.source_span(object, field, None)),
        ),
    ));
}
