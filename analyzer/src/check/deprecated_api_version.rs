//! `deprecated-api-version` (warning): a rendered object uses an API version that is
//! deprecated but still served by the target Kubernetes release (1.34).
//!
//! The versions come from the upstream deprecation guide and, for every alpha and beta type,
//! from Kubernetes' own lifecycle data (the `+k8s:prerelease-lifecycle-gen` markers of the
//! `k8s.io/api` module, `hack/gen-api-lifecycle.py`). A deprecated version a default API
//! server does not serve (an alpha, or a beta disabled by default) is `unserved-api`'s error.
//!
//! ```yaml
//! objects:
//!   - apiVersion: v1
//!     kind: Endpoints          # warning: deprecated since 1.33, use EndpointSlice
//! ```

use super::AppContext;
use super::api_versions::{RetiredApi, TARGET_VERSION, builtin_apis, is_removed, replacement_of};
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
    // A version a default API server does not serve at all is `unserved-api`'s error.
    if !builtin_apis().serves(api.api_version, api.kind) {
        return;
    }
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
                api.api_version,
                api.kind,
                api.deprecated_in,
                replacement_of(api)
            ),
            Some(ctx.object_span(object)),
        ),
    ));
}
