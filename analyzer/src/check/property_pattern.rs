//! `property-pattern` (error): a string that does not match the regular expression of the
//! definition's `parameter` (`=~"^[a-z][a-z0-9-]*$"`).
//!
//! ```yaml
//! properties:
//!   topic: Orders_v1        # error: property `topic` is "Orders_v1", which does not match =~"^[a-z][a-z0-9-]*$"
//! ```

use crate::Diagnostic;

pub(crate) fn diagnostic(message: String, span: cue::Span) -> Diagnostic {
    Diagnostic::error("property-pattern", message, Some(span))
}
