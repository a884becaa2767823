//! `property-type` (error): a property's value has a type the definition's `parameter` does
//! not accept (a string for an `int`, a list for a struct...).
//!
//! The diagnostic points at the value in the Application and names the accepted types.
//!
//! ```yaml
//! traits:
//!   - type: scaler
//!     properties:
//!       replicas: three     # error: property `replicas` must be int, found string "three"
//! ```

use crate::Diagnostic;

pub(crate) fn diagnostic(message: String, span: cue::Span) -> Diagnostic {
    Diagnostic::error("property-type", message, Some(span))
}
