//! `deprecated-service-account-field` (warning): a pod spec sets the deprecated
//! `serviceAccount` field instead of `serviceAccountName`.
//!
//! kube-linter's `deprecated-service-account-field`.
//!
//! ```yaml
//! spec:
//!   serviceAccount: runner     # warning: use serviceAccountName
//! ```

use serde_json::Value;

use super::AppContext;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    let set = pod
        .raw(&object.object)
        .and_then(|spec| spec.get("serviceAccount"))
        .and_then(Value::as_str)
        .is_some_and(|name| !name.is_empty());
    if set {
        out.push(ctx.at_object(
            object,
            Diagnostic::warning(
                "deprecated-service-account-field",
                format!(
                    "{} sets the deprecated `serviceAccount`; use `serviceAccountName`",
                    super::object_label(&object.object)
                ),
                Some(ctx.field_span(object, &format!("{}/serviceAccount", pod.pointer))),
            ),
        ));
    }
}
