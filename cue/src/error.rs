//! The one public error type of the crate. Parse and evaluation problems are data: they are
//! returned next to a result (or inside a bottom value), never as a panic.

use crate::span::Span;

/// What went wrong, by phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The source text is not valid CUE syntax.
    Syntax,
    /// Two values do not unify (`conflicting values 1 and 2`), a constraint failed, or an
    /// explicit `_|_` was reached.
    Conflict,
    /// A reference could not be resolved.
    Reference,
    /// A value is not concrete where a concrete value is needed (export, arithmetic, `if`).
    Incomplete,
    /// A field is not allowed by a closed struct or definition.
    Closed,
    /// A builtin function failed or was called with bad arguments.
    Builtin,
    /// A structural cycle or a reference cycle without a concrete result.
    Cycle,
    /// A construct this evaluator does not implement yet. Never a silently wrong result.
    Unsupported,
    /// The evaluation took more steps than its [`crate::Budget`] allows; it has no value.
    Budget,
    /// The evaluation ran past its [`crate::Budget`]'s deadline; it has no value.
    Deadline,
}

/// One error with its positions. `spans[0]` is the primary position; later spans are the other
/// conjuncts involved (both sides of a conflict).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub spans: Vec<Span>,
    /// The value path where the error surfaced (`spec.replicas`), empty at the top.
    pub path: Vec<String>,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>, span: Span) -> Error {
        Error {
            kind,
            message: message.into(),
            spans: vec![span],
            path: Vec::new(),
        }
    }

    /// The primary span, if the error has a position.
    pub fn span(&self) -> Option<Span> {
        self.spans.first().copied()
    }

    /// The path joined with dots, as CUE prints it.
    pub fn path_string(&self) -> String {
        self.path.join(".")
    }
}
