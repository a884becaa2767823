//! One evaluation of a template with its `parameter` and `context`, and the checks KubeVela
//! runs right after compiling it (`errs`, `Validate()` without concreteness).

use cue::{Evaluator, Exported, Injection, Span, Take};
use serde_json::Value;

use super::errors::{PropertiesSite, Subject, evaluation_diagnostic};
use crate::Diagnostic;

/// What to inject into a template.
pub(crate) struct Inputs<'a> {
    /// `None` leaves `parameter` out of the program (a trait without properties).
    pub(crate) parameter: Option<&'a Value>,
    pub(crate) parameter_span: Span,
    pub(crate) context: &'a Value,
    pub(crate) context_span: Span,
}

/// Evaluates `template` with `inputs` and takes the `requested` top-level fields (`errs` is
/// always read). `Err` holds the diagnostics when the result has errors (conflicts, failed
/// constraints, `_|_`) or a non-empty `errs` list.
pub(crate) fn evaluate(
    evaluator: &Evaluator,
    template: &cue::ast::File,
    inputs: &Inputs<'_>,
    site: &PropertiesSite<'_>,
    subject: &Subject<'_>,
    requested: &[(&str, Take)],
) -> Result<cue::Parts, Vec<Diagnostic>> {
    let injections = injections(inputs);
    let mut requested_with_errs = Vec::with_capacity(requested.len() + 1);
    requested_with_errs.extend_from_slice(requested);
    requested_with_errs.push(("errs", Take::Value));
    // Nothing reads an untouched `context` or `parameter` back: it is the renderer's own JSON.
    let value = evaluator.evaluate_parts(&[template], &injections, &requested_with_errs);
    let errors = value.errors();
    if !errors.is_empty() {
        return Err(user_facing(
            errors
                .iter()
                .map(|error| evaluation_diagnostic(error, site, subject))
                .collect(),
            site,
        ));
    }
    // `errs`: a template's own validation messages (KubeVela master checks it right after
    // compiling, "validation failed ... User Errors").
    if let Some(errs) = value.value("errs")
        && let Ok(Value::Array(messages)) = errs.to_json()
        && !messages.is_empty()
    {
        let messages: Vec<String> = messages
            .iter()
            .map(|message| {
                message
                    .as_str()
                    .map_or_else(|| message.to_string(), str::to_owned)
            })
            .collect();
        return Err(vec![Diagnostic::error(
            "invalid-properties",
            format!("{}: {}", subject.description, messages.join("; ")),
            Some(site.positions.value_span(site.pointer)),
        )]);
    }
    Ok(value)
}

/// When the properties are wrong, the same conflict also surfaces in every template value
/// derived from them; those echoes (template errors involving the Application's file) are
/// dropped, and one diagnostic per property position is kept.
fn user_facing(diagnostics: Vec<Diagnostic>, site: &PropertiesSite<'_>) -> Vec<Diagnostic> {
    let app_file = site.positions.file();
    let has_property_errors = diagnostics.iter().any(|d| d.rule == "invalid-properties");
    let mut kept: Vec<Diagnostic> = Vec::new();
    for diagnostic in diagnostics {
        let involves_app = diagnostic
            .span
            .iter()
            .chain(diagnostic.labels.iter().map(|label| &label.span))
            .any(|span| span.file == app_file);
        if has_property_errors && diagnostic.rule != "invalid-properties" && involves_app {
            continue;
        }
        if kept
            .iter()
            .any(|k| k.rule == diagnostic.rule && k.span == diagnostic.span)
        {
            continue;
        }
        kept.push(diagnostic);
    }
    kept
}

/// The `parameter` and `context` injections of `inputs`.
fn injections<'a>(inputs: &Inputs<'a>) -> Vec<Injection<'a>> {
    let mut injections = Vec::with_capacity(2);
    if let Some(parameter) = inputs.parameter {
        injections.push(Injection {
            field: "parameter",
            value: parameter,
            span: inputs.parameter_span,
        });
    }
    injections.push(Injection {
        field: "context",
        value: inputs.context,
        span: inputs.context_span,
    });
    injections
}

/// The names of `parameter` fields that are required but were not given: regular fields still
/// holding a type or constraint. Explains an incomplete output in the user's terms. Only on
/// that error path: it evaluates `template` with `inputs` again (the same result, since
/// evaluation is deterministic) to read the whole `parameter`, which the renderer's pass does
/// not build.
pub(crate) fn missing_parameters(
    evaluator: &Evaluator,
    template: &cue::ast::File,
    inputs: &Inputs<'_>,
) -> Vec<String> {
    let value = evaluator.evaluate_omitting_injected(&[template], &injections(inputs));
    let Some(parameter) = value.lookup(&["parameter"]) else {
        return Vec::new();
    };
    let mut missing = Vec::new();
    collect_missing(&parameter.export(), &mut Vec::new(), &mut missing);
    missing
}

fn collect_missing(value: &Exported, path: &mut Vec<String>, missing: &mut Vec<String>) {
    match value {
        Exported::Struct(fields) => {
            for field in fields
                .iter()
                .filter(|field| super::patch::convert::is_data_field(field))
            {
                path.push(field.label.clone());
                collect_missing(&field.value, path, missing);
                path.pop();
            }
        }
        Exported::Incomplete(_) if !path.is_empty() => missing.push(path.join(".")),
        _ => {}
    }
}
