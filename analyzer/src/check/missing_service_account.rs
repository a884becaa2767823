//! `missing-service-account` (warning): a pod runs as a ServiceAccount (`serviceAccountName`)
//! that its app does not create.
//!
//! The API server accepts the workload, but its pods are refused until the account exists.
//! kube-linter's `non-existent-service-account`. Looked up among the app's own rendered
//! objects; `default` always exists. An account created outside the repository is reported
//! too: suppress the rule for that app.
//!
//! ```yaml
//! spec:
//!   serviceAccountName: runner     # warning: no ServiceAccount `runner` in the app
//! ```

use serde_json::Value;

use super::AppContext;
use super::app_objects::{AppObjects, namespace_of};
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    index: &AppObjects<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(account) = pod
        .raw(&object.object)
        .and_then(|spec| spec.get("serviceAccountName"))
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty() && *name != "default")
    else {
        return;
    };
    let namespace = namespace_of(&object.object, &ctx.loaded.app_ref.namespace);
    if index.has(Some("ServiceAccount"), namespace, account) {
        return;
    }
    out.push(ctx.at_object(
        object,
        Diagnostic::warning(
            "missing-service-account",
            format!(
                "{}: runs as ServiceAccount `{account}`, which the app does not create",
                super::object_label(&object.object)
            ),
            Some(ctx.field_span(object, &format!("{}/serviceAccountName", pod.pointer))),
        ),
    ));
}
