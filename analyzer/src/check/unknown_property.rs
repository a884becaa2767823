//! `unknown-property` (error): a key in `properties` that the definition's `parameter`
//! schema does not declare, with a "did you mean" suggestion by edit distance.
//!
//! KubeVela's `parameter` structs are open, so such a key is silently ignored: the setting
//! the user meant never takes effect, which is why it blocks the app by default. A repository
//! that relies on open parameters makes it a warning in `driftless.yaml`
//! (`analysis: {rules: {unknown-property: warning}}`). Only struct levels with declared fields are checked;
//! lists and disjunctions of structs are not looked into.
//!
//! ```yaml
//! components:
//!   - name: web
//!     type: webservice
//!     properties:
//!       image: nginx:1.27
//!       prots: [80]           # error: unknown property `prots`; did you mean `ports`?
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use cue::{Exported, Span};

use super::AppContext;
use crate::Diagnostic;
use crate::definitions::Definitions;
use crate::load::yaml::escape_segment;
use crate::model::DefinitionKind;

/// The field names of a `parameter` schema, as plain data (a `cue::Value` cannot cross
/// threads).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Schema {
    /// A struct with declared fields: `(label, doc lines, schema)` in CUE order.
    Struct(Vec<SchemaField>),
    /// A value that is not a struct with declared fields (scalars, lists, disjunctions,
    /// bounds), as exported: not looked into here, but the property rules
    /// (`property_constraints`) read its constraint.
    Leaf(Exported),
    /// Nothing known (no `parameter`, a template that failed, a struct without fields).
    Unchecked,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchemaField {
    pub(crate) label: String,
    pub(crate) doc: Vec<String>,
    pub(crate) schema: Schema,
}

/// Evaluated `parameter` schemas by kind and name (without `@version`): the definition's
/// source digest then, and the schema. What [`ParameterSchemas`] hands back to the caller for
/// the next analysis.
pub(crate) type SchemaMemo = BTreeMap<DefinitionKind, BTreeMap<String, ([u8; 32], Arc<Schema>)>>;

/// The `parameter` schema of a definition, evaluated the first time a rule asks for it (per
/// analysis, or once for as long as the definition is unchanged when the caller keeps the
/// [`SchemaMemo`]): a commit that changes one app among 10,000 walks no other app to find the
/// definitions in use, and evaluates no template again.
#[derive(Debug)]
pub(crate) struct ParameterSchemas<'a> {
    definitions: &'a Definitions,
    evaluator: &'a cue::Evaluator,
    memo: RwLock<SchemaMemo>,
}

impl<'a> ParameterSchemas<'a> {
    /// The schemas of `definitions`, starting from `memo` (entries of definitions whose source
    /// changed, or that are gone, are dropped).
    pub(crate) fn new(
        definitions: &'a Definitions,
        evaluator: &'a cue::Evaluator,
        mut memo: SchemaMemo,
    ) -> ParameterSchemas<'a> {
        for (kind, by_name) in &mut memo {
            by_name.retain(|name, (digest, _)| {
                definitions
                    .get(*kind, name)
                    .is_some_and(|definition| definition.source_digest == *digest)
            });
        }
        ParameterSchemas {
            definitions,
            evaluator,
            memo: RwLock::new(memo),
        }
    }

    /// The schema of a definition's `parameter`; `None` when there is no such definition or
    /// it has no template.
    pub(crate) fn get(&self, kind: DefinitionKind, name: &str) -> Option<Arc<Schema>> {
        let base = name.split_once('@').map_or(name, |(base, _)| base);
        {
            // A poisoned lock only means an evaluation panicked elsewhere: the map is intact.
            let memo = self.memo.read().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, schema)) = memo.get(&kind).and_then(|by_name| by_name.get(base)) {
                return Some(schema.clone());
            }
        }
        let definition = self.definitions.get(kind, base)?;
        let template = definition.template.as_ref()?;
        // A template that panics the evaluator is the renderer's `internal-error` to report;
        // here it just has no schema. Two threads may evaluate one template at once: both get
        // the same schema.
        let schema = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let value = self.evaluator.evaluate(&[template.as_ref()], &[]);
            value
                .lookup(&["parameter"])
                .map_or(Schema::Unchecked, |parameter| {
                    schema_of(&parameter.export())
                })
        }))
        .unwrap_or(Schema::Unchecked);
        let schema = Arc::new(schema);
        self.memo
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(kind)
            .or_default()
            .insert(base.to_owned(), (definition.source_digest, schema.clone()));
        Some(schema)
    }

    /// The schemas evaluated so far, for the next analysis.
    pub(crate) fn into_memo(self) -> SchemaMemo {
        self.memo
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn schema_of(exported: &Exported) -> Schema {
    match exported {
        Exported::Struct(fields) => {
            let declared: Vec<SchemaField> = fields
                .iter()
                .filter(|field| !field.label.starts_with('_') && !field.label.starts_with('#'))
                .map(|field| SchemaField {
                    label: field.label.clone(),
                    doc: field.doc.clone(),
                    schema: schema_of(&field.value),
                })
                .collect();
            if declared.is_empty() {
                Schema::Unchecked
            } else {
                Schema::Struct(declared)
            }
        }
        other => Schema::Leaf(other.clone()),
    }
}

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let spec = &ctx.loaded.app.spec;
    for (index, component) in spec.components.iter().enumerate() {
        let block = Block {
            kind: DefinitionKind::Component,
            type_name: &component.component_type,
            subject: "component type",
            properties: component.properties.as_ref(),
            place: Place::Component(index),
            component: Some(&component.name),
        };
        block.check(ctx, out);
        for (trait_index, component_trait) in component.traits.iter().enumerate() {
            let block = Block {
                kind: DefinitionKind::Trait,
                type_name: &component_trait.trait_type,
                subject: "trait",
                properties: component_trait.properties.as_ref(),
                place: Place::Trait(index, trait_index),
                component: Some(&component.name),
            };
            block.check(ctx, out);
        }
    }
    for (index, policy) in spec.policies.iter().enumerate() {
        let block = Block {
            kind: DefinitionKind::Policy,
            type_name: &policy.policy_type,
            subject: "policy type",
            properties: policy.properties.as_ref(),
            place: Place::Policy(index),
            component: None,
        };
        block.check(ctx, out);
    }
}

/// One `properties` block of the Application and the definition it is checked against.
struct Block<'a> {
    kind: DefinitionKind,
    type_name: &'a str,
    /// How messages name the definition: "component type", "trait", "policy type".
    subject: &'static str,
    properties: Option<&'a serde_json::Value>,
    place: Place,
    component: Option<&'a str>,
}

/// Where a `properties` block is in the Application.
#[derive(Clone, Copy)]
enum Place {
    Component(usize),
    /// `(component, trait)`.
    Trait(usize, usize),
    Policy(usize),
}

impl Place {
    /// The JSON pointer of the block.
    fn pointer(self) -> String {
        match self {
            Place::Component(index) => format!("/spec/components/{index}/properties"),
            Place::Trait(index, trait_index) => {
                format!("/spec/components/{index}/traits/{trait_index}/properties")
            }
            Place::Policy(index) => format!("/spec/policies/{index}/properties"),
        }
    }
}

/// The keys from a block's `properties` down to a value, on the stack: a pointer string is
/// only built for an unknown key (most keys are declared).
struct Path<'p> {
    key: &'p str,
    parent: Option<&'p Path<'p>>,
}

impl Path<'_> {
    /// Appends the JSON pointer segments of this path, root first.
    fn push_to(&self, pointer: &mut String) {
        if let Some(parent) = self.parent {
            parent.push_to(pointer);
        }
        pointer.push('/');
        if self.key.contains(['~', '/']) {
            pointer.push_str(&escape_segment(self.key));
        } else {
            pointer.push_str(self.key);
        }
    }
}

impl Block<'_> {
    fn check(&self, ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
        let (Some(properties), Some(schema)) = (
            self.properties,
            ctx.parameter_schemas.get(self.kind, self.type_name),
        ) else {
            return;
        };
        self.walk(ctx, properties, &schema, None, out);
    }

    /// Checks the keys of `value` (at `path` under the block) against `schema`.
    fn walk(
        &self,
        ctx: &AppContext<'_>,
        value: &serde_json::Value,
        schema: &Schema,
        path: Option<&Path<'_>>,
        out: &mut Vec<Diagnostic>,
    ) {
        let (Some(object), Schema::Struct(fields)) = (value.as_object(), schema) else {
            return;
        };
        for (key, child) in object {
            let here = Path { key, parent: path };
            match fields.iter().find(|field| field.label == *key) {
                Some(field) => self.walk(ctx, child, &field.schema, Some(&here), out),
                None => {
                    let mut pointer = self.place.pointer();
                    here.push_to(&mut pointer);
                    let span: Span = ctx.loaded.document.positions.key_span(&pointer);
                    let suggestion = closest(key, fields.iter().map(|field| field.label.as_str()))
                        .map(|name| format!("; did you mean `{name}`?"))
                        .unwrap_or_default();
                    let mut diagnostic = Diagnostic::error(
                        "unknown-property",
                        format!(
                            "unknown property `{key}`: {} `{}` does not declare it{suggestion}",
                            self.subject, self.type_name
                        ),
                        Some(span),
                    );
                    if let Some(component) = self.component {
                        diagnostic = diagnostic.for_component(component);
                    }
                    out.push(diagnostic);
                }
            }
        }
    }
}

/// The candidate nearest to `word` by edit distance, if near enough to be a typo: at most
/// one edit per three characters (and at least one).
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .map(|candidate| {
            (
                edit_distance(&word.to_lowercase(), &candidate.to_lowercase()),
                candidate,
            )
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Edit distance with adjacent transpositions (optimal string alignment): `prots` is one
/// edit from `ports`, as a typist sees it.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut table = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        table[i * width] = i;
    }
    for (j, cell) in table.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (table[(i - 1) * width + j] + 1)
                .min(table[i * width + j - 1] + 1)
                .min(table[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(table[(i - 2) * width + j - 2] + 1);
            }
            table[i * width + j] = best;
        }
    }
    table[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_are_near_misses_only() {
        let fields = ["image", "ports", "cpu", "memory"];
        assert_eq!(closest("prots", fields.iter().copied()), Some("ports"));
        assert_eq!(closest("imgae", fields.iter().copied()), Some("image"));
        assert_eq!(closest("replicas", fields.iter().copied()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
