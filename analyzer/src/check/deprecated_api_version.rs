//! `deprecated-api-version` (warning): a rendered object uses an API version that is
//! deprecated but still served by the target Kubernetes release (1.34).
//!
//! ```yaml
//! objects:
//!   - apiVersion: v1
//!     kind: Endpoints          # warning: deprecated since 1.33, use EndpointSlice
//! ```

use super::AppContext;
use super::api_versions::{RetiredApi, TARGET_VERSION, is_removed};
use crate::{Diagnostic, RenderedObject};

/// `retired` is the object's entry in the table of retired API versions, if any.
pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    retired: Option<&RetiredApi>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(api) =
        retired.filter(|api| !is_removed(api) && (1, api.deprecated_in) <= TARGET_VERSION)
    else {
        return;
    };
    let removal = match api.removed_in {
        Some(minor) => format!(", removed in 1.{minor}"),
        None => String::new(),
    };
    out.push(ctx.at_object(
        object,
        Diagnostic::warning(
            "deprecated-api-version",
            format!(
                "{} {} is deprecated since Kubernetes 1.{}{removal}; use {}",
                api.api_version, api.kind, api.deprecated_in, api.replacement
            ),
            Some(ctx.object_span(object)),
        ),
    ));
}
