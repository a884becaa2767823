//! The default patch strategy: KubeVela's `StrategyUnify` (`wf:pkg/cue/model/sets/operation.go`,
//! `walk.go`) reimplemented on exported values.
//!
//! Upstream exports base and patch to CUE syntax, rewrites both ASTs (opening every list that
//! is a field value, re-ordering keyed list elements, blanking `retainKeys` targets) and unifies
//! them in a fresh context. Here the same rewrites happen during one structural walk:
//! - structs are open: new fields are added, shared fields unify;
//! - scalars must be equal; a default (`*1 | int`) yields to a patch value that fits one of its
//!   alternatives; a type or bound (`string`, `>=1`) is filled by a value of that kind;
//! - lists unify positionally; a list that is a field value in the base is open, so a longer
//!   patch list appends; a closed patch list shorter than the base is a length conflict;
//! - `+patchKey=k` (own, or inherited from the nearest tagged ancestor; dotted paths and comma
//!   lists allowed) re-orders the patch list to line up with the base by key first;
//! - `+patchStrategy=retainKeys` replaces instead of unifying (a non-list field's value
//!   wholesale; the matched elements of a keyed list), `+patchStrategy=replace` makes a list
//!   exactly the patch list.

use cue::{Constraint, Exported, ExportedField, KindSet};

use super::PatchError;
use super::convert::{describe, kind_name};
use super::tags::{FieldTags, PatchStrategy};

/// Checks whether a concrete value satisfies a non-concrete constraint (`>=1 & <=10`,
/// `=~"^a"`); `Err` carries the reason. Kind membership is checked before it is called.
pub(crate) type ConstraintCheck<'a> = &'a dyn Fn(&Constraint, &Exported) -> Result<(), String>;

/// Unifies `patch` into `base` with the default strategy.
///
/// # Errors
/// The first conflict, with its path.
pub(crate) fn unify_patch(
    base: Exported,
    patch: Exported,
    check: ConstraintCheck<'_>,
) -> Result<Exported, PatchError> {
    let mut walker = Walker {
        check,
        path: Vec::new(),
    };
    walker.unify(
        base,
        patch,
        PatchStrategy::Unify,
        None,
        ListContext::FieldValue,
    )
}

/// Whether a list is a struct field's value (opened by KubeVela before unifying) or an element
/// of another list (left as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListContext {
    FieldValue,
    ListElement,
}

struct Walker<'a> {
    check: ConstraintCheck<'a>,
    path: Vec<String>,
}

impl Walker<'_> {
    fn conflict(&self, message: String) -> PatchError {
        PatchError {
            path: self.path.clone(),
            message,
        }
    }

    /// Both sides are consumed: what the patch adds is moved into the result, not copied.
    fn unify(
        &mut self,
        base: Exported,
        patch: Exported,
        strategy: PatchStrategy,
        patch_key: Option<&str>,
        context: ListContext,
    ) -> Result<Exported, PatchError> {
        match (base, patch) {
            (Exported::Bottom(errors), _) => Err(self.conflict(errors.first().map_or_else(
                || "explicit error (_|_ literal)".to_owned(),
                |e| e.message.clone(),
            ))),
            (_, Exported::Bottom(errors)) => Err(self.conflict(errors.first().map_or_else(
                || "explicit error (_|_ literal)".to_owned(),
                |e| e.message.clone(),
            ))),
            (Exported::Struct(base_fields), Exported::Struct(patch_fields)) => {
                self.unify_structs(base_fields, patch_fields, patch_key)
            }
            (
                Exported::List { elems, open, rest },
                Exported::List {
                    elems: patch_elems,
                    open: patch_open,
                    rest: patch_rest,
                },
            ) => {
                // KubeVela opens every list that is a field value before unifying.
                let base_open = open || context == ListContext::FieldValue;
                if strategy == PatchStrategy::Replace {
                    return Ok(Exported::List {
                        elems: patch_elems,
                        open: patch_open,
                        rest: patch_rest,
                    });
                }
                self.unify_lists(
                    ListSide {
                        elems,
                        open: base_open,
                        rest,
                    },
                    ListSide {
                        elems: patch_elems,
                        open: patch_open,
                        rest: patch_rest,
                    },
                    strategy,
                    patch_key,
                )
            }
            (base @ Exported::Default { .. }, patch) | (base, patch @ Exported::Default { .. }) => {
                self.unify_disjunctions(base, patch, patch_key)
            }
            (Exported::Incomplete(constraint), patch) => {
                self.fill_constraint(&constraint, patch, patch_key)
            }
            (base, Exported::Incomplete(constraint)) => {
                let base_for_error = describe(&base);
                self.fill_constraint(&constraint, base, patch_key)
                    .map_err(|error| {
                        self.conflict(format!(
                            "conflicting values {base_for_error} and {}{}",
                            constraint.text,
                            error
                                .message
                                .split_once(" (")
                                .map_or(String::new(), |(_, rest)| format!(" ({rest}"))
                        ))
                    })
            }
            (Exported::Scalar(base_scalar), Exported::Scalar(patch_scalar)) => {
                if scalars_equal(&base_scalar, &patch_scalar) {
                    Ok(Exported::Scalar(base_scalar))
                } else {
                    Err(self.mismatch(
                        &Exported::Scalar(base_scalar),
                        &Exported::Scalar(patch_scalar),
                    ))
                }
            }
            (base, patch) => Err(self.mismatch(&base, &patch)),
        }
    }

    fn mismatch(&self, base: &Exported, patch: &Exported) -> PatchError {
        let (base_kind, patch_kind) = (kind_name(base), kind_name(patch));
        let suffix = if base_kind == patch_kind {
            String::new()
        } else {
            format!(" (mismatched types {base_kind} and {patch_kind})")
        };
        self.conflict(format!(
            "conflicting values {} and {}{suffix}",
            describe(base),
            describe(patch)
        ))
    }

    fn unify_structs(
        &mut self,
        mut base_fields: Vec<ExportedField>,
        patch_fields: Vec<ExportedField>,
        inherited_key: Option<&str>,
    ) -> Result<Exported, PatchError> {
        for patch_field in patch_fields {
            let tags = FieldTags::parse(&patch_field.doc);
            let key = tags.patch_key.as_deref().or(inherited_key);
            self.path.push(patch_field.label.clone());
            match base_fields
                .iter_mut()
                .find(|field| field.label == patch_field.label)
            {
                None => base_fields.push(patch_field),
                Some(base_field) => {
                    let base_value =
                        std::mem::replace(&mut base_field.value, Exported::Bottom(Vec::new()));
                    let is_list = matches!(patch_field.value, Exported::List { .. });
                    base_field.value = if tags.strategy == PatchStrategy::RetainKeys && !is_list {
                        // retainKeys on a non-list: the patch value replaces the base value.
                        patch_field.value
                    } else {
                        self.unify(
                            base_value,
                            patch_field.value,
                            tags.strategy,
                            key,
                            ListContext::FieldValue,
                        )?
                    };
                    // A regular field unified with an optional one is regular.
                    base_field.optional = base_field.optional && patch_field.optional;
                }
            }
            self.path.pop();
        }
        Ok(Exported::Struct(base_fields))
    }

    fn unify_lists(
        &mut self,
        base: ListSide,
        patch: ListSide,
        strategy: PatchStrategy,
        patch_key: Option<&str>,
    ) -> Result<Exported, PatchError> {
        let (base_elems, base_open, base_rest) = (base.elems, base.open, base.rest);
        let (patch_elems, patch_open, patch_rest) = (patch.elems, patch.open, patch.rest);
        // A keyed rewrite re-orders the patch elements (each at most once), with an empty
        // struct where none lines up; they are moved, not copied.
        let (base_elems, patch_elems, patch_open): (Vec<Exported>, Vec<Exported>, bool) =
            match patch_key {
                Some(key) => match keyed_rewrite(base_elems, &patch_elems, key, strategy) {
                    Ok(rewrite) => {
                        let mut slots: Vec<Option<Exported>> =
                            patch_elems.into_iter().map(Some).collect();
                        let patch = rewrite
                            .patch
                            .iter()
                            .map(|slot| {
                                slot.and_then(|index| slots.get_mut(index).and_then(Option::take))
                                    .unwrap_or_else(|| Exported::Struct(Vec::new()))
                            })
                            .collect();
                        (rewrite.base, patch, true)
                    }
                    Err(base_elems) => (base_elems, patch_elems, patch_open),
                },
                None => (base_elems, patch_elems, patch_open),
            };
        let (base_len, patch_len) = (base_elems.len(), patch_elems.len());
        if (patch_len < base_len && !patch_open) || (patch_len > base_len && !base_open) {
            return Err(self.conflict(format!(
                "incompatible list lengths ({base_len} and {patch_len})"
            )));
        }
        let mut elems = Vec::with_capacity(base_len.max(patch_len));
        let mut patch_iter = patch_elems.into_iter();
        for (index, base_elem) in base_elems.into_iter().enumerate() {
            // An element only the base has still meets the patch's element constraint
            // (`[...{lifecycle: ...}]` patches every container).
            let patch_elem = patch_iter.next().or_else(|| patch_rest.as_deref().cloned());
            match patch_elem {
                Some(patch_elem) => {
                    self.path.push(index.to_string());
                    elems.push(self.unify(
                        base_elem,
                        patch_elem,
                        PatchStrategy::Unify,
                        patch_key,
                        ListContext::ListElement,
                    )?);
                    self.path.pop();
                }
                None => elems.push(base_elem),
            }
        }
        for (index, patch_elem) in patch_iter.enumerate() {
            // And one only the patch has meets the base's.
            elems.push(match base_rest.as_deref() {
                Some(constraint) => {
                    self.path.push((base_len + index).to_string());
                    let unified = self.unify(
                        constraint.clone(),
                        patch_elem,
                        PatchStrategy::Unify,
                        patch_key,
                        ListContext::ListElement,
                    )?;
                    self.path.pop();
                    unified
                }
                None => patch_elem,
            });
        }
        Ok(Exported::List {
            elems,
            open: base_open && patch_open,
            rest: patch_rest.or(base_rest),
        })
    }

    /// `(*a | b) & (*c | d)`: every pair of alternatives that unifies survives; a pair is a
    /// default when both sides are defaults (a side without a marked default counts as all
    /// defaults), like CUE's disjunction rules.
    fn unify_disjunctions(
        &mut self,
        base: Exported,
        patch: Exported,
        patch_key: Option<&str>,
    ) -> Result<Exported, PatchError> {
        let base_alternatives = alternatives(&base);
        let patch_alternatives = alternatives(&patch);
        let mut results: Vec<(Exported, bool)> = Vec::new();
        let mut first_error = None;
        for (base_alternative, base_default) in &base_alternatives {
            for (patch_alternative, patch_default) in &patch_alternatives {
                match self.unify(
                    base_alternative.clone(),
                    patch_alternative.clone(),
                    PatchStrategy::Unify,
                    patch_key,
                    ListContext::FieldValue,
                ) {
                    Ok(value) => {
                        let is_default = *base_default && *patch_default;
                        if let Some(existing) = results.iter_mut().find(|(v, _)| *v == value) {
                            existing.1 |= is_default;
                        } else {
                            results.push((value, is_default));
                        }
                    }
                    Err(error) => {
                        first_error.get_or_insert(error);
                    }
                }
            }
        }
        if results.is_empty() {
            return Err(first_error.unwrap_or_else(|| self.mismatch(&base, &patch)));
        }
        if results.len() == 1 {
            return Ok(results.remove(0).0);
        }
        match results.iter().position(|(_, is_default)| *is_default) {
            Some(default_index) => {
                let default = results.remove(default_index).0;
                Ok(Exported::Default {
                    default: Box::new(default),
                    others: results.into_iter().map(|(value, _)| value).collect(),
                })
            }
            None => {
                let kinds = results
                    .iter()
                    .fold(KindSet::default(), |kinds, (value, _)| {
                        kinds.union(kind_set(value))
                    });
                let text = results
                    .iter()
                    .map(|(value, _)| describe(value))
                    .collect::<Vec<_>>()
                    .join(" | ");
                Ok(Exported::Incomplete(Constraint { kinds, text }))
            }
        }
    }

    /// A non-concrete constraint unified with another value.
    fn fill_constraint(
        &mut self,
        constraint: &Constraint,
        value: Exported,
        _patch_key: Option<&str>,
    ) -> Result<Exported, PatchError> {
        if let Exported::Incomplete(other) = &value {
            if other.text == constraint.text || is_top(other) {
                return Ok(Exported::Incomplete(constraint.clone()));
            }
            if is_top(constraint) {
                return Ok(value);
            }
            let kinds = KindSet(constraint.kinds.0 & other.kinds.0);
            if kinds.0 == 0 {
                return Err(self.conflict(format!(
                    "conflicting values {} and {} (mismatched types)",
                    constraint.text, other.text
                )));
            }
            return Ok(Exported::Incomplete(Constraint {
                kinds,
                text: format!("{} & {}", constraint.text, other.text),
            }));
        }
        let value_kinds = kind_set(&value);
        if constraint.kinds.0 & value_kinds.0 == 0 {
            return Err(self.conflict(format!(
                "conflicting values {} and {} (mismatched types {} and {})",
                constraint.text,
                describe(&value),
                constraint_kind_name(constraint),
                kind_name(&value)
            )));
        }
        if !is_plain_kind(constraint) && matches!(value, Exported::Scalar(_)) {
            (self.check)(constraint, &value).map_err(|reason| self.conflict(reason))?;
        }
        Ok(value)
    }
}

/// The result of lining up a keyed patch list with its base list.
struct KeyedRewrite {
    base: Vec<Exported>,
    /// Indices into the patch list, in the new order; `None` is an empty struct (`{}`).
    patch: Vec<Option<usize>>,
}

/// KubeVela's `listMergeProcess`: `Err` (the base list, untouched) when the merge is abandoned
/// (a key value that is not a basic literal, or no patch element with a key), and plain
/// positional unification applies. The base list is moved, not copied: it is the workload's.
fn keyed_rewrite(
    base: Vec<Exported>,
    patch: &[Exported],
    key: &str,
    strategy: PatchStrategy,
) -> Result<KeyedRewrite, Vec<Exported>> {
    let keys: Vec<&str> = key
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect();
    if keys.is_empty() {
        return Err(base);
    }
    if patch.is_empty() {
        // Upstream rewrites an empty keyed patch list to `[{}, ..., ...]`: it leaves the base
        // list as it is (the storage trait patches `env: []` when no env is mounted).
        return Ok(KeyedRewrite {
            base,
            patch: Vec::new(),
        });
    }
    // Key values as literal text; `Err` abandons the merge.
    let key_text = |elem: &Exported, key: &str| -> Result<Option<String>, ()> {
        match lookup_dotted(elem, key) {
            None => Ok(None),
            Some(Exported::Scalar(scalar)) if !scalar.is_object() && !scalar.is_array() => {
                Ok(Some(scalar.to_string()))
            }
            Some(_) => Err(()),
        }
    };
    // Key values of each element, per key; `Err` when one is not a basic literal.
    let keys_of = |elems: &[Exported]| -> Result<Vec<Vec<Option<String>>>, ()> {
        elems
            .iter()
            .map(|elem| keys.iter().map(|key| key_text(elem, key)).collect())
            .collect()
    };
    let Ok(patch_keys) = keys_of(patch) else {
        return Err(base);
    };
    if patch_keys
        .iter()
        .all(|per_key| per_key.iter().all(Option::is_none))
    {
        return Err(base);
    }
    let Ok(base_keys) = keys_of(&base) else {
        return Err(base);
    };
    let mut rewritten_base = base;
    let mut rewritten_patch = Vec::new();
    let mut consumed = vec![false; patch.len()];
    for (key_index, _) in keys.iter().enumerate() {
        for (base_index, base_key) in base_keys.iter().enumerate() {
            let Some(base_value) = &base_key[key_index] else {
                // Upstream emits no placeholder for a base element without the key, so later
                // elements shift: mirrored on purpose.
                continue;
            };
            // Duplicate patch keys: the last one wins.
            let matched = patch_keys
                .iter()
                .rposition(|per_key| per_key[key_index].as_ref() == Some(base_value))
                .filter(|index| !consumed[*index]);
            match matched {
                Some(patch_index) => {
                    for (other, per_key) in patch_keys.iter().enumerate() {
                        if per_key[key_index].as_ref() == Some(base_value) {
                            consumed[other] = true;
                        }
                    }
                    rewritten_patch.push(Some(patch_index));
                    if strategy == PatchStrategy::RetainKeys {
                        rewritten_base[base_index] = Exported::Struct(Vec::new());
                    }
                }
                None => rewritten_patch.push(None),
            }
        }
    }
    for index in 0..patch.len() {
        // Patch elements without any key are dropped, like upstream.
        if !consumed[index] && patch_keys[index].iter().any(Option::is_some) {
            rewritten_patch.push(Some(index));
        }
    }
    Ok(KeyedRewrite {
        base: rewritten_base,
        patch: rewritten_patch,
    })
}

fn lookup_dotted<'a>(value: &'a Exported, path: &str) -> Option<&'a Exported> {
    let mut current = value;
    for segment in path.split('.') {
        let Exported::Struct(fields) = current else {
            return None;
        };
        current = &fields.iter().find(|field| field.label == segment)?.value;
    }
    Some(current)
}

fn alternatives(value: &Exported) -> Vec<(Exported, bool)> {
    match value {
        Exported::Default { default, others } => std::iter::once(((**default).clone(), true))
            .chain(others.iter().map(|other| (other.clone(), false)))
            .collect(),
        other => vec![(other.clone(), true)],
    }
}

fn scalars_equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a, b) {
        // CUE compares numbers by value within one kind; an int and a float never unify.
        (serde_json::Value::Number(x), serde_json::Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                x.is_f64() && y.is_f64() && x.as_f64() == y.as_f64()
            } else {
                x.as_i128() == y.as_i128()
            }
        }
        _ => a == b,
    }
}

fn kind_set(value: &Exported) -> KindSet {
    match value {
        Exported::Scalar(serde_json::Value::Null) => KindSet::NULL,
        Exported::Scalar(serde_json::Value::Bool(_)) => KindSet::BOOL,
        Exported::Scalar(serde_json::Value::Number(number)) => {
            if number.is_f64() {
                KindSet::FLOAT
            } else {
                KindSet::INT
            }
        }
        Exported::Scalar(serde_json::Value::String(_)) => KindSet::STRING,
        Exported::Scalar(_) | Exported::Struct(_) => KindSet::STRUCT,
        Exported::List { .. } => KindSet::LIST,
        Exported::Default { default, others } => {
            others.iter().fold(kind_set(default), |kinds, other| {
                kinds.union(kind_set(other))
            })
        }
        Exported::Incomplete(constraint) => constraint.kinds,
        Exported::Bottom(_) => KindSet::default(),
    }
}

fn is_top(constraint: &Constraint) -> bool {
    constraint.text.trim() == "_"
}

/// A bare kind (`string`, `int`, `_`, `{...}`) needs no evaluation to check membership.
fn is_plain_kind(constraint: &Constraint) -> bool {
    matches!(
        constraint.text.trim(),
        "_" | "string"
            | "int"
            | "float"
            | "number"
            | "bool"
            | "null"
            | "bytes"
            | "{...}"
            | "[...]"
            | "{}"
            | "[..._]"
            | "[...string]"
    )
}

fn constraint_kind_name(constraint: &Constraint) -> String {
    let names = [
        (KindSet::NULL, "null"),
        (KindSet::BOOL, "bool"),
        (KindSet::INT, "int"),
        (KindSet::FLOAT, "float"),
        (KindSet::STRING, "string"),
        (KindSet::BYTES, "bytes"),
        (KindSet::LIST, "list"),
        (KindSet::STRUCT, "struct"),
    ];
    if constraint.kinds.contains(KindSet::NUMBER) && !constraint.kinds.contains(KindSet::STRING) {
        return "number".to_owned();
    }
    names
        .iter()
        .filter(|(kind, _)| constraint.kinds.contains(*kind))
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join("|")
}

/// One side of a list unification: its elements, whether it accepts more, and its element
/// constraint.
struct ListSide {
    elems: Vec<Exported>,
    open: bool,
    rest: Option<Box<Exported>>,
}
