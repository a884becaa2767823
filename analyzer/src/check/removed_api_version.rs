//! `removed-api-version` (error): a rendered object uses an API version that the target
//! Kubernetes release (1.34) no longer serves.
//!
//! The API server rejects the object. The table comes from the upstream deprecation guide and
//! Kubernetes' own lifecycle data of its alpha and beta types (`hack/gen-api-lifecycle.py`);
//! the message names the release that removed the version and its replacement.
//!
//! Not reported for a version that a built-in definition picked by itself: those templates
//! choose by `context.clusterVersion`, which an offline render leaves at 0 (FIXME(#8): render
//! with the target version), and KubeVela in the cluster picks the served one. A retired
//! version written in the app's properties (a `k8s-objects` component) is reported.
//!
//! ```yaml
//! outputs:
//!   ingress:
//!     apiVersion: networking.k8s.io/v1beta1   # error: removed in 1.22, use networking.k8s.io/v1
//!     kind: Ingress
//! ```

use super::AppContext;
use super::api_versions::{RetiredApi, is_removed, replacement_of};
use crate::model::DefinitionKind;
use crate::{Diagnostic, RenderedObject};

/// `retired` is the object's entry in the table of retired API versions, if any.
pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    retired: Option<&RetiredApi>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(api) = retired.filter(|api| is_removed(api)) else {
        return;
    };
    if chosen_by_builtin_template(ctx, object, api.api_version) {
        return;
    }
    let removed_in = api.removed_in.unwrap_or_default();
    out.push(ctx.at_object(
        object,
        Diagnostic::error(
            "removed-api-version",
            format!(
                "{} {} was removed in Kubernetes 1.{removed_in}; use {}",
                api.api_version,
                api.kind,
                replacement_of(api)
            ),
            Some(ctx.object_span(object)),
        ),
    ));
}

/// True when `object` came from a built-in definition and `api_version` appears nowhere in
/// the properties the user gave it.
fn chosen_by_builtin_template(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    api_version: &str,
) -> bool {
    let Some(index) = ctx.component_index(&object.component) else {
        return false;
    };
    let component = &ctx.loaded.app.spec.components[index];
    let (kind, type_name, properties) = match object.trait_type.as_deref() {
        None | Some("AuxiliaryWorkload") => (
            DefinitionKind::Component,
            component.component_type.as_str(),
            component.properties.as_ref(),
        ),
        Some(trait_type) => {
            let properties = component
                .traits
                .iter()
                .find(|t| t.trait_type == trait_type)
                .and_then(|t| t.properties.as_ref());
            (DefinitionKind::Trait, trait_type, properties)
        }
    };
    let builtin = ctx
        .definitions
        .get(kind, type_name)
        .is_some_and(|definition| definition.builtin);
    let written = properties.is_some_and(|properties| mentions(properties, api_version));
    builtin && !written
}

fn mentions(value: &serde_json::Value, text: &str) -> bool {
    match value {
        serde_json::Value::String(string) => string == text,
        serde_json::Value::Array(items) => items.iter().any(|item| mentions(item, text)),
        serde_json::Value::Object(map) => map.values().any(|item| mentions(item, text)),
        _ => false,
    }
}
