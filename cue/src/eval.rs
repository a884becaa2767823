//! The CUE evaluator. FIXME(#2): placeholder until the real evaluator lands.

use crate::ast;
use crate::span::Span;
use crate::{Error, ErrorKind, Exported};

/// JSON data unified into a top-level field before evaluation, the way KubeVela appends
/// `parameter: <JSON>` and `context: <JSON>` to a template. `span` is where errors about this
/// data point (for example the Application's `properties`).
#[derive(Debug, Clone, Copy)]
pub struct Injection<'a> {
    pub field: &'a str,
    pub value: &'a serde_json::Value,
    pub span: Span,
}

/// Evaluates parsed files. Holds no per-evaluation state, so one evaluator can be shared by
/// reference across rayon threads.
#[derive(Debug, Default)]
pub struct Evaluator {}

impl Evaluator {
    pub fn new() -> Evaluator {
        Evaluator {}
    }

    /// Unifies `files` as one package and `injections` into their top-level fields.
    pub fn evaluate(&self, _files: &[&ast::File], _injections: &[Injection<'_>]) -> Value {
        Value {}
    }
}

/// An evaluated value. Cheap to clone; owns the evaluation it came from.
#[derive(Debug, Clone)]
pub struct Value {}

impl Value {
    /// The value at `path` (regular, optional, hidden or definition field names), if it exists.
    pub fn lookup(&self, _path: &[&str]) -> Option<Value> {
        None
    }

    /// Regular fields (not optional, hidden or definitions), in CUE field order.
    pub fn fields(&self) -> Vec<(String, Value)> {
        Vec::new()
    }

    /// Doc comments of the field this value was looked up from.
    pub fn doc(&self) -> Vec<String> {
        Vec::new()
    }

    /// Every error anywhere in the value, without requiring concreteness (CUE's
    /// `Value.Validate()`).
    pub fn validate(&self) -> Vec<Error> {
        vec![unsupported()]
    }

    /// Concrete JSON, like `cue export`: defaults taken; optional, hidden and definition fields
    /// omitted; any non-concrete regular field is an error.
    ///
    /// # Errors
    /// Every conflict and every incomplete value found, each with its path and spans.
    pub fn to_json(&self) -> Result<serde_json::Value, Vec<Error>> {
        Err(vec![unsupported()])
    }

    /// The syntax-like export used by trait patching.
    pub fn export(&self) -> Exported {
        Exported::Bottom(vec![unsupported()])
    }
}

fn unsupported() -> Error {
    Error::new(ErrorKind::Unsupported, "unsupported: evaluator not implemented", Span::default())
}
