//! `missing-kind` (error): a rendered object has no `apiVersion` or no `kind` (or one that is
//! empty or not text).
//!
//! The API server cannot tell what the object is and rejects it; the other rules cannot check
//! it either. The diagnostic points at the object when the app lists it verbatim (a
//! `k8s-objects` component), otherwise at the component that rendered it.
//!
//! ```yaml
//! objects:
//!   - apiVersion: v1
//!     kind:                  # error: ConfigMap `settings` has no `kind`
//!     metadata: {name: settings}
//! ```

use super::AppContext;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(ctx: &AppContext<'_>, object: &RenderedObject, out: &mut Vec<Diagnostic>) {
    let text = |field: &str| {
        object
            .object
            .get(field)
            .and_then(serde_json::Value::as_str)
            .filter(|text| !text.is_empty())
    };
    let missing: Vec<&str> = ["apiVersion", "kind"]
        .into_iter()
        .filter(|field| text(field).is_none())
        .collect();
    if missing.is_empty() {
        return;
    }
    let fields = missing
        .iter()
        .map(|field| format!("`{field}`"))
        .collect::<Vec<_>>()
        .join(" and no ");
    let pointer = format!("/{}", missing.first().copied().unwrap_or("kind"));
    out.push(ctx.at_object(
        object,
        Diagnostic::error(
            "missing-kind",
            format!(
                "{} has no {fields}; the API server cannot tell what it is: set both",
                super::object_label(&object.object)
            ),
            Some(ctx.field_span(object, &pointer)),
        ),
    ));
}
