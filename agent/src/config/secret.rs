//! Secrets in the config: [`Secret`] (a value that prints as `***`), the captured process
//! [`Environment`], and [`SecretRef`] (`{ env: NAME }` or `{ file: PATH }`), read once, at load
//! time, by the checker.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Checker, FieldProblem};

/// A secret value (token, key, webhook secret). Its `Debug` and `Display` print `***`; the only
/// way to read it is [`Secret::expose`], so a secret cannot reach a log line by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, for the one place that sends it (an HTTP header, a git credential).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The process environment, captured once by the binary and passed in, so the config loader
/// never reads the environment behind the caller's back (and tests pass their own).
#[derive(Debug, Clone, Default)]
pub struct Environment {
    vars: BTreeMap<String, Secret>,
}

impl Environment {
    /// Captures the current process environment.
    pub fn from_process() -> Environment {
        Environment {
            vars: std::env::vars()
                .map(|(name, value)| (name, Secret::new(value)))
                .collect(),
        }
    }

    /// An environment with exactly these variables.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Environment {
        Environment {
            vars: pairs
                .into_iter()
                .map(|(name, value)| (name.to_owned(), Secret::new(value)))
                .collect(),
        }
    }

    pub(super) fn var(&self, name: &str) -> Option<&Secret> {
        self.vars.get(name)
    }
}

/// Where a secret comes from: exactly one of an environment variable or a file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretRef {
    pub env: Option<String>,
    pub file: Option<PathBuf>,
}

impl Checker<'_> {
    /// Reads a secret; `None` (with a problem recorded) when it cannot be.
    pub(super) fn secret(
        &mut self,
        field: &str,
        secret_ref: &SecretRef,
        line: u64,
        column: u64,
    ) -> Option<Secret> {
        let read = match (&secret_ref.env, &secret_ref.file) {
            (Some(name), None) => match self.env.var(name) {
                Some(value) if !value.expose().trim().is_empty() => {
                    Ok(Secret::new(value.expose().trim()))
                }
                Some(_) => Err(format!("environment variable {name} is empty")),
                None => Err(format!("environment variable {name} is not set")),
            },
            (None, Some(file)) => {
                let resolved = self.resolve_path(file);
                match std::fs::read_to_string(&resolved) {
                    // Keys keep their trailing newline (OpenSSH wants it); tokens are trimmed
                    // where they are used.
                    Ok(value) if !value.trim().is_empty() => Ok(Secret::new(value)),
                    Ok(_) => Err(format!("secret file {} is empty", resolved.display())),
                    Err(error) => Err(format!(
                        "cannot read secret file {}: {error}",
                        resolved.display()
                    )),
                }
            }
            (Some(_), Some(_)) => Err("give either `env` or `file`, not both".to_owned()),
            (None, None) => Err("give `env` (a variable name) or `file` (a path)".to_owned()),
        };
        match read {
            Ok(secret) => Some(secret),
            Err(message) => {
                self.problems.push(FieldProblem {
                    field: field.to_owned(),
                    line,
                    column,
                    message,
                });
                None
            }
        }
    }

    pub(super) fn spanned_secret(
        &mut self,
        field: &str,
        secret_ref: &Spanned<SecretRef>,
    ) -> Option<Secret> {
        let (line, column) = (secret_ref.referenced.line(), secret_ref.referenced.column());
        self.secret(field, &secret_ref.value, line, column)
    }
}
