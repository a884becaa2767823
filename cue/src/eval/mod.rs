//! The CUE evaluator: public API ([`Evaluator`], [`Value`]) over the engine.
//!
//! - `engine.rs`: vertices, conjuncts, environments, unification, disjunctions, closedness.
//! - `val.rs`: scalars, kinds, bounds and validators.
//! - `decimal.rs`: float arithmetic done in decimal, as CUE does.
//! - `compile.rs`: the checks CUE makes when compiling a file (unused imports, misplaced `*`).
//! - `builtins.rs`: predeclared functions and the standard packages.
//! - `node.rs`: the owned result tree a [`Value`] wraps, with JSON and syntax-like export.

mod budget;
pub(crate) mod builtins;
mod compile;
mod decimal;
mod engine;
mod node;
mod val;

use std::rc::Rc;

use crate::ast;
use crate::span::Span;
use crate::{Error, Exported};

use node::Node;

pub use budget::{Budget, Deadline};

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
#[derive(Debug, Default, Clone, Copy)]
pub struct Evaluator {
    legacy_list_arithmetic: bool,
    budget: Budget,
}

impl Evaluator {
    pub fn new() -> Evaluator {
        Evaluator::default()
    }

    /// Accepts list arithmetic from CUE before v0.11 (`list + list` concatenates, `list * n`
    /// repeats) instead of reporting it as superseded by `list.Concat` / `list.Repeat`. KubeVela
    /// upgrades legacy templates this way before evaluating them, so its renders need it; plain
    /// `cue export` semantics (the default) reject it.
    pub fn with_legacy_list_arithmetic(mut self, on: bool) -> Evaluator {
        self.legacy_list_arithmetic = on;
        self
    }

    /// Limits each evaluation's work ([`Budget`]); [`Budget::default`] unless set. An
    /// evaluation over its budget has no value: it is one [`crate::ErrorKind::Budget`] (or
    /// [`crate::ErrorKind::Deadline`]) error.
    pub fn with_budget(mut self, budget: Budget) -> Evaluator {
        self.budget = budget;
        self
    }

    /// The budget each evaluation gets.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Unifies `files` as one package and `injections` into their top-level fields.
    pub fn evaluate(&self, files: &[&ast::File], injections: &[Injection<'_>]) -> Value {
        self.evaluate_with(files, injections, false)
    }

    /// [`Evaluator::evaluate`], except that an injected top-level field the program never
    /// unified with (a template's `context` that it only reads) is left out of the result: it
    /// would be the caller's own JSON, unchanged and without errors, so [`Value::validate`] and
    /// every other field are the same, and copying it into the result is saved.
    pub fn evaluate_omitting_injected(
        &self,
        files: &[&ast::File],
        injections: &[Injection<'_>],
    ) -> Value {
        self.evaluate_with(files, injections, true)
    }

    fn evaluate_with(
        &self,
        files: &[&ast::File],
        injections: &[Injection<'_>],
        omit_injected: bool,
    ) -> Value {
        let mut engine = engine::Engine::new(self.budget);
        engine.legacy_list_arithmetic = self.legacy_list_arithmetic;
        engine.omit_injected_data = omit_injected;
        engine.load(files, injections);
        let mut root = node::build(&mut engine, engine::ROOT);
        engine.record_size();
        if let Some(error) = engine.budget_error() {
            root = Rc::new(Node::Bottom(vec![error]));
        }
        if stats_enabled() {
            eprintln!("cue: {}", engine.stats());
        }
        Value {
            node: root,
            doc: node::no_doc(),
            path: Rc::new(Vec::new()),
        }
    }
}

/// Whether `CUE_STATS` asks for arena sizes on stderr (read once).
fn stats_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("CUE_STATS").is_some())
}

/// An evaluated value. Cheap to clone; owns the evaluation it came from.
#[derive(Debug, Clone)]
pub struct Value {
    node: Rc<Node>,
    doc: Rc<Vec<String>>,
    path: Rc<Vec<String>>,
}

impl Value {
    /// The value at `path` (regular, optional, hidden or definition field names, or list
    /// indices), if it exists.
    pub fn lookup(&self, path: &[&str]) -> Option<Value> {
        let mut node = self.node.clone();
        let mut doc = self.doc.clone();
        let mut full: Vec<String> = self.path.as_ref().clone();
        for label in path {
            let (next, next_doc) = node::child(&node, label)?;
            node = next;
            doc = next_doc;
            full.push((*label).to_owned());
        }
        Some(Value {
            node,
            doc,
            path: Rc::new(full),
        })
    }

    /// Regular fields (not optional, hidden or definitions), in CUE field order.
    pub fn fields(&self) -> Vec<(String, Value)> {
        node::regular_fields(&self.node)
            .into_iter()
            .map(|(label, node, doc)| {
                let mut path = self.path.as_ref().clone();
                path.push(label.clone());
                (
                    label,
                    Value {
                        node,
                        doc,
                        path: Rc::new(path),
                    },
                )
            })
            .collect()
    }

    /// Doc comments of the field this value was looked up from.
    pub fn doc(&self) -> Vec<String> {
        self.doc.as_ref().clone()
    }

    /// Every error anywhere in the value, without requiring concreteness (CUE's
    /// `Value.Validate()`).
    pub fn validate(&self) -> Vec<Error> {
        let mut errors = Vec::new();
        node::validate(&self.node, &mut errors);
        errors
    }

    /// Concrete JSON, like `cue export`: defaults taken; optional, hidden and definition fields
    /// omitted; any non-concrete regular field is an error.
    ///
    /// # Errors
    /// Every conflict and every incomplete value found, each with its path and spans.
    pub fn to_json(&self) -> Result<serde_json::Value, Vec<Error>> {
        let mut errors = Vec::new();
        let mut path: Vec<Rc<str>> = self.path.iter().map(|p| Rc::from(p.as_str())).collect();
        let json = node::to_json(&self.node, &mut path, &mut errors);
        if errors.is_empty() {
            Ok(json)
        } else {
            Err(errors)
        }
    }

    /// The syntax-like export used by trait patching.
    pub fn export(&self) -> Exported {
        node::export(&self.node)
    }

    /// Whether the value is an error (bottom).
    pub fn is_bottom(&self) -> bool {
        matches!(self.node.as_ref(), Node::Bottom(_))
    }
}
