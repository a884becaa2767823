//! Diagnostics: plain data about a problem in the user's repository, anchored in source.
//! Rendering them for humans happens at the edge (`agent::report`).

use cue::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Warning,
    Error,
}

/// One finding. `rule` is a stable kebab-case id (`yaml-syntax`, `unknown-component-type`,
/// `invalid-properties`, `cue-error`, ...), documented in RULES.md.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub rule: &'static str,
    pub severity: Severity,
    pub message: String,
    /// Where the problem is. A span with the snapshot's `FileId`s; see [`crate::SourceMap`].
    pub span: Option<Span>,
    /// Other places involved (both sides of a conflict), with a short note each.
    pub labels: Vec<Label>,
    pub app: Option<crate::AppRef>,
    pub component: Option<String>,
}

/// A secondary position of a diagnostic.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}
