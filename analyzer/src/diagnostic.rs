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

impl Diagnostic {
    /// An error with a primary position and no app yet.
    pub fn error(rule: &'static str, message: impl Into<String>, span: Option<Span>) -> Diagnostic {
        Diagnostic::new(rule, Severity::Error, message.into(), span)
    }

    /// A warning with a primary position and no app yet.
    pub fn warning(
        rule: &'static str,
        message: impl Into<String>,
        span: Option<Span>,
    ) -> Diagnostic {
        Diagnostic::new(rule, Severity::Warning, message.into(), span)
    }

    fn new(rule: &'static str, severity: Severity, message: String, span: Option<Span>) -> Self {
        Diagnostic {
            rule,
            severity,
            message,
            span,
            labels: Vec::new(),
            app: None,
            component: None,
        }
    }

    /// The same diagnostic, attributed to an app.
    pub fn for_app(mut self, app: &crate::AppRef) -> Diagnostic {
        self.app = Some(app.clone());
        self
    }

    /// The same diagnostic, attributed to a component.
    pub fn for_component(mut self, component: &str) -> Diagnostic {
        self.component = Some(component.to_owned());
        self
    }

    /// Adds a secondary position.
    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }
}
