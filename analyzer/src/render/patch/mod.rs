//! The trait patch engine: applies a trait's `patch` to the component's workload (and
//! `patchOutputs` to its auxiliary objects) with KubeVela's strategies
//! (kubevela-render-semantics.md §2.2): the default strategy in [`unify`], and RFC 7396/6902
//! JSON strategies in [`json_patch`], selected by the `+patchStrategy` tag on the `patch` field
//! itself.
//!
//! It works on [`cue::Exported`] values, the syntax-like view that keeps defaults, types and
//! doc comments, which is exactly what upstream patches (`Syntax(Docs, ResolveReferences)`).

pub(crate) mod convert;
pub(crate) mod json_patch;
pub(crate) mod tags;
pub(crate) mod unify;

use cue::Exported;

use convert::{Concreteness, into_concrete, into_exported, into_json, to_json};
use tags::{FieldTags, PatchStrategy};
pub(crate) use unify::ConstraintCheck;

/// A patch that does not apply: a conflict at `path`, or a failed JSON operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PatchError {
    pub(crate) path: Vec<String>,
    pub(crate) message: String,
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path.join("."), self.message)
        }
    }
}

/// Applies `patch` (whose own doc comment lines are `patch_doc`) to `base`.
///
/// # Errors
/// A conflict (default strategy), a non-concrete base or patch (JSON strategies), or a failed
/// JSON-patch operation.
pub(crate) fn apply_patch(
    base: Exported,
    patch: Exported,
    patch_doc: &[String],
    check: ConstraintCheck<'_>,
) -> Result<Exported, PatchError> {
    match FieldTags::parse(patch_doc).strategy {
        PatchStrategy::JsonMergePatch => {
            // Merged on the concrete exports: the same as merging the JSON and reading it back
            // (upstream re-parses the merged JSON), without building either JSON.
            let mut base = into_concrete(base).map_err(|e| not_concrete("the workload", e))?;
            let patch = into_concrete(patch).map_err(|e| not_concrete("the patch", e))?;
            json_patch::merge_patch_exported(&mut base, patch);
            Ok(base)
        }
        PatchStrategy::JsonPatch => {
            let (mut base_json, patch_json) = concrete_pair(base, &patch)?;
            let operations = patch_json.get("operations").cloned().unwrap_or_default();
            json_patch::json_patch(&mut base_json, &operations).map_err(|message| PatchError {
                path: Vec::new(),
                message,
            })?;
            Ok(into_exported(base_json))
        }
        PatchStrategy::Unify | PatchStrategy::RetainKeys | PatchStrategy::Replace => {
            unify::unify_patch(base, patch, check)
        }
    }
}

/// Unifies `patch` into `base` with the default strategy only (`patchOutputs`: upstream does
/// not honour JSON strategies there).
///
/// # Errors
/// The first conflict.
pub(crate) fn unify_only(
    base: Exported,
    patch: Exported,
    check: ConstraintCheck<'_>,
) -> Result<Exported, PatchError> {
    unify::unify_patch(base, patch, check)
}

/// The JSON of the workload and of the patch. The workload is consumed: it is replaced by
/// the patched JSON, so its labels and scalars are moved, not copied.
fn concrete_pair(
    base: Exported,
    patch: &Exported,
) -> Result<(serde_json::Value, serde_json::Value), PatchError> {
    let base_json =
        into_json(base, Concreteness::Required).map_err(|e| not_concrete("the workload", e))?;
    let patch_json =
        to_json(patch, Concreteness::Required).map_err(|e| not_concrete("the patch", e))?;
    Ok((base_json, patch_json))
}

/// The error of a JSON strategy whose workload or patch (`what`) is not concrete.
fn not_concrete(what: &str, errors: Vec<convert::ExportError>) -> PatchError {
    let first = errors.into_iter().next();
    PatchError {
        path: first.as_ref().map(|e| e.path.clone()).unwrap_or_default(),
        message: format!(
            "{what} must be concrete for a JSON patch strategy: {}",
            first.map_or_else(String::new, |e| e.message)
        ),
    }
}

#[cfg(test)]
mod tests;
