//! `removed-api-version` (error): a rendered object uses an API version that the target
//! Kubernetes release (1.34) no longer serves.
//!
//! The API server rejects the object. The table comes from the upstream deprecation guide;
//! the message names the release that removed the version and its replacement.
//!
//! ```yaml
//! outputs:
//!   ingress:
//!     apiVersion: networking.k8s.io/v1beta1   # error: removed in 1.22, use networking.k8s.io/v1
//!     kind: Ingress
//! ```

use super::AppContext;
use super::api_versions::{is_removed, lookup};
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(ctx: &AppContext<'_>, object: &RenderedObject, out: &mut Vec<Diagnostic>) {
    let Some(api) = lookup(&object.object).filter(|api| is_removed(api)) else {
        return;
    };
    let removed_in = api.removed_in.unwrap_or_default();
    out.push(ctx.at_object(
        object,
        Diagnostic::error(
            "removed-api-version",
            format!(
                "{} {} was removed in Kubernetes 1.{removed_in}; use {}",
                api.api_version, api.kind, api.replacement
            ),
            Some(ctx.object_span(object)),
        ),
    ));
}
