//! `property-out-of-range` (error): a number outside the bounds of the definition's
//! `parameter` (`int & >=1 & <=5`).
//!
//! CUE itself reports a failed bound inside a defaulted disjunction as a conflict with the
//! default (`conflicting values 9 and 1`); this rule names the bound instead.
//!
//! ```yaml
//! properties:
//!   replicas: 9             # error: property `replicas` is 9, out of range int & >=1 & <=5
//! ```

use crate::Diagnostic;

pub(crate) fn diagnostic(message: String, span: cue::Span) -> Diagnostic {
    Diagnostic::error("property-out-of-range", message, Some(span))
}
