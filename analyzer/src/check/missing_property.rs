//! `missing-property` (error): a property the definition's `parameter` requires (a field
//! without `?` and without a default) is not given.
//!
//! The template cannot render without it, so the app is blocked. The diagnostic points at
//! the `properties:` key of the component or trait (or at the item when it has none).
//!
//! ```yaml
//! components:
//!   - name: web
//!     type: webservice
//!     properties:           # error: missing required property `image`
//!       cpu: "0.5"
//! ```

use crate::Diagnostic;

pub(crate) fn diagnostic(message: String, span: cue::Span) -> Diagnostic {
    Diagnostic::error("missing-property", message, Some(span))
}
