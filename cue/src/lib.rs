//! A native CUE parser and evaluator.
//!
//! `cue` implements the part of the CUE language (v0.14, the version KubeVela pins) that
//! KubeVela's component, trait, policy and workflow-step templates use, and exports results to
//! JSON. It knows nothing of Kubernetes or KubeVela, does no I/O, and never panics on input:
//! problems come back as [`Error`] values with positions.
//!
//! ```
//! let parsed = cue::parse_file(cue::FileId(0), "a: *1 | int\nb: a + 1\n");
//! assert!(parsed.errors.is_empty());
//! let evaluator = cue::Evaluator::new();
//! let value = evaluator.evaluate(&[&parsed.file], &[]);
//! assert_eq!(value.to_json().unwrap(), serde_json::json!({"a": 1, "b": 2}));
//! ```
//!
//! The pieces, in pipeline order:
//! - [`parse_file`] turns source text into an [`ast::File`] plus syntax errors (it recovers).
//!   Parsed files are immutable and `Send + Sync`: parse a template once, evaluate it many times.
//! - [`Evaluator::evaluate`] unifies files (and injected JSON data such as a template's
//!   `parameter` and `context`) into a [`Value`].
//! - [`Value::to_json`] exports concrete data like `cue export`; [`Value::export`] gives the
//!   syntax-like [`Exported`] view that keeps defaults, types and doc comments.
//! - [`Evaluator::evaluate_parts`] is the renderer's one pass: only the requested top-level
//!   fields, exported straight from the evaluation ([`Parts`]), and the errors of the whole.

pub mod ast;
mod error;
mod eval;
mod exported;
mod parser;
mod parts;
mod reads;
mod span;

pub use error::{Error, ErrorKind};
pub use eval::builtins::yaml_options;
pub use eval::{Budget, Deadline, Evaluator, Injection, Value};
pub use exported::{Constraint, Exported, ExportedField, KindSet};
pub use parser::{Parsed, parse_file};
pub use parts::{Parts, Take};
pub use reads::InjectedReads;
pub use span::{FileId, LineCol, LineIndex, Span};
