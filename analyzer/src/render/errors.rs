//! Turns evaluator errors into diagnostics: an error under `parameter` is the user's
//! `invalid-properties` (pointing at the property in the Application), anything else a
//! `cue-error` in the definition's template.

use cue::Span;

use crate::Diagnostic;
use crate::load::yaml::{Positions, escape_segment};

/// Where the properties given to one template live in the Application document.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PropertiesSite<'a> {
    pub(crate) positions: &'a Positions,
    /// JSON pointer of the `properties` (`/spec/components/0/traits/1/properties`).
    pub(crate) pointer: &'a str,
    /// JSON pointer of the item that owns them (the component or trait entry).
    pub(crate) owner_pointer: &'a str,
}

/// What is being evaluated, for messages: `component `web``, `trait `scaler` of component
/// `web``.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) description: &'a str,
    /// The definition whose template is evaluated.
    pub(crate) definition: &'a crate::model::Definition,
    /// The definition's declaration, for template errors without a position.
    pub(crate) definition_span: Span,
}

/// One evaluator error as a diagnostic.
pub(crate) fn evaluation_diagnostic(
    error: &cue::Error,
    site: &PropertiesSite<'_>,
    subject: &Subject<'_>,
) -> Diagnostic {
    if let Some(diagnostic) = budget_diagnostic(error, subject) {
        return diagnostic;
    }
    let path = &error.path;
    if path.first().map(String::as_str) == Some("parameter") {
        let rest = &path[1..];
        let mut pointer = site.pointer.to_owned();
        for segment in rest {
            pointer.push('/');
            pointer.push_str(&escape_segment(segment));
        }
        let span = if site.positions.contains(&pointer) {
            site.positions.value_span(&pointer)
        } else if site.positions.contains(site.pointer) {
            site.positions.value_span(site.pointer)
        } else {
            site.positions.value_span(site.owner_pointer)
        };
        let property = if rest.is_empty() {
            "properties".to_owned()
        } else {
            format!("properties.{}", rest.join("."))
        };
        let mut diagnostic = Diagnostic::error(
            "invalid-properties",
            format!(
                "{}: invalid {property}: {}",
                subject.description,
                strip_path(error)
            ),
            Some(span),
        );
        for other in error.spans.iter().filter(|other| other.file != span.file) {
            diagnostic = diagnostic.with_label(*other, "constraint declared here");
        }
        return diagnostic;
    }
    // The template is the primary position; values that came from the Application (the
    // injected context or properties) are secondary.
    let app_file = site.positions.file();
    let spans: Vec<Span> = error
        .spans
        .iter()
        .copied()
        .filter(|span| *span != Span::default())
        .collect();
    let primary = spans
        .iter()
        .copied()
        .find(|span| span.file != app_file)
        .or_else(|| spans.first().copied())
        .unwrap_or(subject.definition_span);
    let mut diagnostic = Diagnostic::error(
        "cue-error",
        format!("{}: {}", subject.description, with_path(error)),
        Some(primary),
    );
    for other in spans.iter().filter(|span| **span != primary) {
        let note = if other.file == app_file {
            "value from the Application"
        } else {
            "also involved"
        };
        diagnostic = diagnostic.with_label(*other, note);
    }
    diagnostic
}

/// An evaluation stopped by its budget: the app is blocked, and the message names the
/// definition, the limit and the setting that raises it. At the definition, since the
/// evaluation as a whole has no value to point into.
fn budget_diagnostic(error: &cue::Error, subject: &Subject<'_>) -> Option<Diagnostic> {
    let definition = subject.definition;
    let reason = error
        .message
        .strip_prefix("evaluation stopped: ")
        .unwrap_or(&error.message);
    let message = |setting: &str| {
        format!(
            "{}: evaluating the template of {} `{}` stopped: {reason}; the app is not rendered. \
             Make the template do less work, or raise `{setting}` in driftless.yaml if it \
             really needs more",
            subject.description,
            definition.kind.cr_kind(),
            definition.name,
        )
    };
    let span = Some(subject.definition_span);
    match error.kind {
        cue::ErrorKind::Budget => Some(Diagnostic::error(
            "render-budget",
            message("analysis.limits.steps"),
            span,
        )),
        cue::ErrorKind::Deadline => Some(Diagnostic::error(
            "render-deadline",
            message("analysis.limits.appSeconds"),
            span,
        )),
        _ => None,
    }
}

/// The error's message prefixed with its path, like CUE prints it.
pub(crate) fn with_path(error: &cue::Error) -> String {
    let message = strip_path(error);
    if error.path.is_empty() {
        message
    } else {
        format!("{}: {message}", error.path_string())
    }
}

/// The message without a leading `path: ` if the evaluator already included it.
fn strip_path(error: &cue::Error) -> String {
    let prefix = format!("{}: ", error.path_string());
    error
        .message
        .strip_prefix(&prefix)
        .unwrap_or(&error.message)
        .to_owned()
}
