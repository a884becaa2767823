//! A step's `if`: `always`, or a CUE expression over `status.<step>` and `inputs.<name>`,
//! as in KubeVela (`pkg/workflow/...` `checkIfCondition`): each step's status carries
//! `phase`, `message`, `reason`, and the booleans `succeeded`, `failed`, `skipped` and
//! `timeout`. Step names with dashes are written `status["step-name"]`.

use cue::{Evaluator, FileId, Injection, Span};

/// A parsed `if`.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `if: always`: runs even after an earlier step failed.
    Always,
    /// A CUE boolean expression.
    Expression(String),
}

/// Why an `if` could not be parsed or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConditionError {
    #[error("if expression {expression:?} is not valid CUE: {message}")]
    Syntax { expression: String, message: String },
    #[error("if expression {expression:?} did not evaluate to a boolean: {message}")]
    NotBoolean { expression: String, message: String },
}

/// The CUE field the expression is bound to, named so that it cannot collide with the injected
/// `status` and `inputs`.
const RESULT_FIELD: &str = "driftlessIfResult";

impl Condition {
    /// Parses an `if` value.
    ///
    /// # Errors
    /// The expression is not valid CUE syntax.
    pub fn parse(text: &str) -> Result<Condition, ConditionError> {
        let trimmed = text.trim();
        if trimmed == "always" {
            return Ok(Condition::Always);
        }
        let parsed = cue::parse_file(FileId(0), &source_for(trimmed));
        if let Some(error) = parsed.errors.first() {
            return Err(ConditionError::Syntax {
                expression: trimmed.to_owned(),
                message: error.to_string(),
            });
        }
        Ok(Condition::Expression(trimmed.to_owned()))
    }

    /// Step names the expression reads through `status.NAME` or `status["NAME"]`; the
    /// scheduler waits for those steps before evaluating it, as KubeVela does.
    pub fn referenced_steps(&self) -> Vec<String> {
        let Condition::Expression(expression) = self else {
            return Vec::new();
        };
        let mut names = Vec::new();
        let mut rest = expression.as_str();
        while let Some(at) = rest.find("status") {
            let preceded_by_ident = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
            rest = &rest[at + "status".len()..];
            if preceded_by_ident {
                continue;
            }
            if let Some(after_dot) = rest.strip_prefix('.') {
                let len = after_dot
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(after_dot.len());
                if len > 0 {
                    names.push(after_dot[..len].to_owned());
                }
            } else if let Some(after_bracket) = rest.strip_prefix("[\"")
                && let Some(end) = after_bracket.find('"')
            {
                names.push(after_bracket[..end].to_owned());
            }
        }
        names.sort();
        names.dedup();
        names
    }

    /// Evaluates the condition. `status` maps step names to their status objects and `inputs`
    /// the step's resolved inputs by name.
    ///
    /// # Errors
    /// The expression does not reduce to a concrete boolean (a type error, a reference to a
    /// missing step or input).
    pub fn evaluate(
        &self,
        status: &serde_json::Value,
        inputs: &serde_json::Value,
    ) -> Result<bool, ConditionError> {
        let Condition::Expression(expression) = self else {
            return Ok(true);
        };
        let source = source_for(expression);
        let parsed = cue::parse_file(FileId(0), &source);
        let not_boolean = |message: String| ConditionError::NotBoolean {
            expression: expression.clone(),
            message,
        };
        if let Some(error) = parsed.errors.first() {
            return Err(ConditionError::Syntax {
                expression: expression.clone(),
                message: error.to_string(),
            });
        }
        let span = Span::new(FileId(0), 0, 0);
        let injections = [
            Injection {
                field: "status",
                value: status,
                span,
            },
            Injection {
                field: "inputs",
                value: inputs,
                span,
            },
        ];
        let value = Evaluator::new().evaluate(&[&parsed.file], &injections);
        let result = value
            .lookup(&[RESULT_FIELD])
            .ok_or_else(|| not_boolean("no result".to_owned()))?;
        match result.to_json() {
            Ok(serde_json::Value::Bool(flag)) => Ok(flag),
            Ok(other) => Err(not_boolean(format!("got {other}"))),
            Err(errors) => Err(not_boolean(
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            )),
        }
    }
}

/// The CUE file the expression is evaluated in. `status` and `inputs` are declared open so
/// that an expression over them parses and evaluates even when nothing is injected.
fn source_for(expression: &str) -> String {
    format!("status: {{...}}\ninputs: {{...}}\n{RESULT_FIELD}: ({expression})\n")
}
