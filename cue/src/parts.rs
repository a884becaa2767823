//! The parts of an evaluation a caller asked for, built in one pass from the evaluated
//! vertices ([`crate::Evaluator::evaluate_parts`]).
//!
//! A renderer reads a few top-level fields of a template (`output`, `outputs`, `patch`, ...)
//! in one form each and needs every error of the whole value. Building the full result tree
//! ([`crate::Value`]) and exporting from it builds every field twice and the unread ones for
//! nothing; here each requested field is exported straight from the vertices, the others are
//! only checked for errors.

use crate::{Error, Exported, Value};

/// How to take one top-level field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// The field exported as a whole, with its doc comments: what
    /// `value.lookup(&[field]).map(|v| (v.export(), v.doc()))` gives.
    Export,
    /// The field's regular fields, each exported, in CUE order: what
    /// `value.lookup(&[field]).map(|v| v.fields())` gives, each exported.
    Fields,
    /// The field as a [`Value`], for reads that want JSON or further lookups.
    Value,
}

/// One requested field, as taken.
#[derive(Debug)]
pub(crate) enum Taken {
    /// The field does not exist (or was already taken).
    Absent,
    Export(Exported, Vec<String>),
    Fields(Vec<(String, Exported)>),
    Value(Value),
}

/// The requested top-level fields of an evaluation and the errors of the whole value.
#[derive(Debug)]
pub struct Parts {
    /// What [`Value::validate`] of the whole value gives.
    pub(crate) errors: Vec<Error>,
    /// One entry per requested field, by name.
    pub(crate) taken: Vec<(String, Taken)>,
}

impl Parts {
    /// Every error anywhere in the value, as [`Value::validate`] reports them.
    pub fn errors(&self) -> &[Error] {
        &self.errors
    }

    /// Field `name` requested with [`Take::Export`]: its export and doc comments, moved out
    /// (a second call gives `None`).
    pub fn take_export(&mut self, name: &str) -> Option<(Exported, Vec<String>)> {
        match self.take(name) {
            Taken::Export(value, doc) => Some((value, doc)),
            _ => None,
        }
    }

    /// Field `name` requested with [`Take::Fields`]: its regular fields, exported, moved out
    /// (empty when absent, not a struct, or already taken).
    pub fn take_fields(&mut self, name: &str) -> Vec<(String, Exported)> {
        match self.take(name) {
            Taken::Fields(fields) => fields,
            _ => Vec::new(),
        }
    }

    /// Field `name` requested with [`Take::Value`].
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.taken.iter().find_map(|(label, taken)| match taken {
            Taken::Value(value) if label == name => Some(value),
            _ => None,
        })
    }

    fn take(&mut self, name: &str) -> Taken {
        self.taken
            .iter_mut()
            .find(|(label, _)| label == name)
            .map_or(Taken::Absent, |(_, taken)| {
                std::mem::replace(taken, Taken::Absent)
            })
    }
}
