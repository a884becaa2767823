//! `property-not-allowed` (error): a property's value is not one of the values an enum or a
//! disjunction of the definition's `parameter` allows (`*"ClusterIP" | "NodePort"`).
//!
//! The diagnostic points at the value and lists the allowed values.
//!
//! ```yaml
//! properties:
//!   exposeType: Public      # error: property `exposeType` is "Public"; allowed: "ClusterIP", "NodePort", "LoadBalancer"
//! ```

use crate::Diagnostic;

pub(crate) fn diagnostic(message: String, span: cue::Span) -> Diagnostic {
    Diagnostic::error("property-not-allowed", message, Some(span))
}
