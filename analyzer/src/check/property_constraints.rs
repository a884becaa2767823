//! Splits the renderer's `invalid-properties` errors into one rule per kind of mistake, by
//! reading the definition's `parameter` constraint at the offending property:
//! `missing-property`, `property-type`, `property-not-allowed` (enums and disjunctions of
//! values), `property-out-of-range` (bounds) and `property-pattern` (regular expressions).
//!
//! The renderer finds the error by unifying the properties with the template, and points at
//! the property's exact line and column; what it cannot say well is *which* constraint
//! failed (for `*1 | int & <=5`, CUE reports the conflict with the default `1`, not the
//! bound). The classification keeps the position and rewrites the message from the
//! constraint. An error the classification does not understand stays `invalid-properties`.
//! Only apps that have such an error pay for it.

use std::sync::Arc;

use cue::{Exported, KindSet, Span};
use serde_json::Value;

use super::AppContext;
use super::unknown_property::Schema;
use crate::Diagnostic;
use crate::load::yaml::escape_segment;
use crate::model::DefinitionKind;

/// Rewrites `invalid-properties` errors of `ctx`'s app in place.
pub(crate) fn classify(ctx: &AppContext<'_>, diagnostics: &mut [Diagnostic]) {
    if !diagnostics.iter().any(|d| d.rule == "invalid-properties") {
        return;
    }
    let sites = property_sites(ctx);
    for diagnostic in diagnostics.iter_mut() {
        if diagnostic.rule != "invalid-properties" {
            continue;
        }
        if let Some(replacement) = reclassify(ctx, &sites, diagnostic) {
            *diagnostic = replacement;
        }
    }
}

/// The properties of each component, trait and policy with the schema of their definition:
/// (JSON pointer of `properties`, properties, schema).
fn property_sites<'a>(ctx: &'a AppContext<'_>) -> Vec<(String, &'a Value, Arc<Schema>)> {
    let spec = &ctx.loaded.app.spec;
    let schemas = ctx.parameter_schemas;
    let mut sites = Vec::new();
    for (index, component) in spec.components.iter().enumerate() {
        if let (Some(properties), Some(schema)) = (
            &component.properties,
            schemas.get(DefinitionKind::Component, &component.component_type),
        ) {
            sites.push((
                format!("/spec/components/{index}/properties"),
                properties,
                schema,
            ));
        }
        for (trait_index, component_trait) in component.traits.iter().enumerate() {
            if let (Some(properties), Some(schema)) = (
                &component_trait.properties,
                schemas.get(DefinitionKind::Trait, &component_trait.trait_type),
            ) {
                sites.push((
                    format!("/spec/components/{index}/traits/{trait_index}/properties"),
                    properties,
                    schema,
                ));
            }
        }
    }
    for (index, policy) in spec.policies.iter().enumerate() {
        if let (Some(properties), Some(schema)) = (
            &policy.properties,
            schemas.get(DefinitionKind::Policy, &policy.policy_type),
        ) {
            sites.push((
                format!("/spec/policies/{index}/properties"),
                properties,
                schema,
            ));
        }
    }
    sites
}

fn reclassify(
    ctx: &AppContext<'_>,
    sites: &[(String, &Value, Arc<Schema>)],
    diagnostic: &Diagnostic,
) -> Option<Diagnostic> {
    let span = diagnostic.span?;
    let positions = &ctx.loaded.document.positions;
    if diagnostic.message.contains("missing required property") {
        // The renderer points at the properties' value (their first entry): the finding is
        // about the `properties:` key.
        let span = properties_pointers(ctx)
            .find(|pointer| positions.contains(pointer) && positions.value_span(pointer) == span)
            .map_or(span, |pointer| positions.key_span(&pointer));
        return Some(carry(
            super::missing_property::diagnostic(diagnostic.message.clone(), span),
            diagnostic,
        ));
    }
    for (pointer, properties, schema) in sites {
        let mut found = None;
        find_at_span(
            properties,
            Node::Schema(schema),
            pointer,
            "",
            positions,
            span,
            &mut found,
        );
        let Some((path, value, constraint)) = found else {
            continue;
        };
        let subject = diagnostic
            .message
            .split_once(": invalid ")
            .map_or("", |(subject, _)| subject);
        let replacement = judge(subject, &path, value, &constraint, span)?;
        return Some(carry(replacement, diagnostic));
    }
    None
}

/// The pointer of every `properties` of a component, trait or policy of `ctx`'s app.
fn properties_pointers<'a>(ctx: &'a AppContext<'_>) -> impl Iterator<Item = String> + 'a {
    let spec = &ctx.loaded.app.spec;
    let components = spec
        .components
        .iter()
        .enumerate()
        .flat_map(|(index, component)| {
            std::iter::once(format!("/spec/components/{index}/properties")).chain(
                (0..component.traits.len()).map(move |trait_index| {
                    format!("/spec/components/{index}/traits/{trait_index}/properties")
                }),
            )
        });
    let policies =
        (0..spec.policies.len()).map(|index| format!("/spec/policies/{index}/properties"));
    components.chain(policies)
}

/// The new diagnostic with the old one's app, component and labels.
fn carry(mut replacement: Diagnostic, original: &Diagnostic) -> Diagnostic {
    replacement.app = original.app.clone();
    replacement.component = original.component.clone();
    replacement.labels = original.labels.clone();
    replacement
}

#[derive(Clone, Copy)]
enum Node<'a> {
    Schema(&'a Schema),
    Exported(&'a Exported),
}

/// Finds the property whose value's span is `span`, with its dotted path and constraint.
fn find_at_span<'a>(
    value: &'a Value,
    node: Node<'a>,
    pointer: &str,
    path: &str,
    positions: &crate::load::yaml::Positions,
    span: Span,
    found: &mut Option<(String, &'a Value, Exported)>,
) {
    if found.is_some() {
        return;
    }
    if !path.is_empty() && positions.contains(pointer) && positions.value_span(pointer) == span {
        let constraint = match node {
            Node::Schema(Schema::Leaf(exported)) | Node::Exported(exported) => exported.clone(),
            Node::Schema(Schema::Struct(_)) => Exported::Incomplete(cue::Constraint {
                kinds: KindSet::STRUCT,
                text: "{...}".to_owned(),
            }),
            Node::Schema(Schema::Unchecked) => return,
        };
        *found = Some((path.to_owned(), value, constraint));
        return;
    }
    let Value::Object(map) = value else {
        return;
    };
    for (key, child) in map {
        let child_node = match node {
            Node::Schema(Schema::Struct(fields)) => {
                match fields.iter().find(|field| field.label == *key) {
                    Some(field) => Node::Schema(&field.schema),
                    None => continue,
                }
            }
            Node::Schema(Schema::Leaf(exported)) | Node::Exported(exported) => {
                match struct_field(exported, key) {
                    Some(field) => Node::Exported(field),
                    None => continue,
                }
            }
            Node::Schema(Schema::Unchecked) => return,
        };
        let child_pointer = format!("{pointer}/{}", escape_segment(key));
        let child_path = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        find_at_span(
            child,
            child_node,
            &child_pointer,
            &child_path,
            positions,
            span,
            found,
        );
    }
}

/// The constraint of field `key` in a struct (or a struct default).
fn struct_field<'a>(exported: &'a Exported, key: &str) -> Option<&'a Exported> {
    match exported {
        Exported::Struct(fields) => fields
            .iter()
            .find(|field| field.label == key)
            .map(|field| &field.value),
        Exported::Default { default, .. } => struct_field(default, key),
        _ => None,
    }
}

/// One alternative of a constraint.
enum Alternative {
    Value(Value),
    Constraint { kinds: KindSet, text: String },
}

fn alternatives(exported: &Exported) -> Vec<Alternative> {
    match exported {
        Exported::Scalar(value) => vec![Alternative::Value(value.clone())],
        Exported::Default { default, others } => std::iter::once(default.as_ref())
            .chain(others)
            .flat_map(alternatives)
            .collect(),
        Exported::Incomplete(constraint) => {
            // A disjunction without default exports as its text: `"a" | "b"` is an enum.
            let literals: Option<Vec<Value>> = constraint
                .text
                .split(" | ")
                .map(|part| serde_json::from_str::<Value>(part.trim()).ok())
                .collect();
            match literals {
                Some(values) if constraint.text.contains(" | ") => {
                    values.into_iter().map(Alternative::Value).collect()
                }
                _ => vec![Alternative::Constraint {
                    kinds: constraint.kinds,
                    text: constraint.text.clone(),
                }],
            }
        }
        Exported::Struct(_) => vec![Alternative::Constraint {
            kinds: KindSet::STRUCT,
            text: "{...}".to_owned(),
        }],
        Exported::List { .. } => vec![Alternative::Constraint {
            kinds: KindSet::LIST,
            text: "[...]".to_owned(),
        }],
        Exported::Bottom(_) => Vec::new(),
    }
}

fn kind_of(value: &Value) -> KindSet {
    match value {
        Value::Null => KindSet::NULL,
        Value::Bool(_) => KindSet::BOOL,
        Value::Number(number) if number.is_f64() => KindSet::FLOAT,
        Value::Number(_) => KindSet::INT,
        Value::String(_) => KindSet::STRING,
        Value::Array(_) => KindSet::LIST,
        Value::Object(_) => KindSet::STRUCT,
    }
}

fn kind_name(kinds: KindSet) -> String {
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
    let parts: Vec<&str> = names
        .iter()
        .filter(|(kind, _)| kinds.contains(*kind))
        .map(|(_, name)| *name)
        .collect();
    parts.join(" or ")
}

/// Which rule the value breaks, from the constraint's alternatives.
fn judge(
    subject: &str,
    path: &str,
    value: &Value,
    constraint: &Exported,
    span: Span,
) -> Option<Diagnostic> {
    let alternatives = alternatives(constraint);
    if alternatives.is_empty() {
        return None;
    }
    let kind = kind_of(value);
    let allowed = alternatives.iter().fold(KindSet(0), |kinds, alternative| {
        kinds.union(match alternative {
            Alternative::Value(value) => kind_of(value),
            Alternative::Constraint { kinds, .. } => *kinds,
        })
    });
    // An int satisfies `number` and `float` constraints in CUE.
    let kind_ok = |kinds: KindSet| {
        kinds.contains(kind) || (kind == KindSet::INT && kinds.contains(KindSet::FLOAT))
    };
    let prefix = if subject.is_empty() {
        String::new()
    } else {
        format!("{subject}: ")
    };
    if !kind_ok(allowed) {
        return Some(super::property_type::diagnostic(
            format!(
                "{prefix}property `{path}` must be {}, found {} {value}",
                kind_name(allowed),
                kind_name(kind)
            ),
            span,
        ));
    }
    let same_kind: Vec<&Alternative> = alternatives
        .iter()
        .filter(|alternative| match alternative {
            Alternative::Value(candidate) => kind_ok(kind_of(candidate)),
            Alternative::Constraint { kinds, .. } => kind_ok(*kinds),
        })
        .collect();
    let texts: Vec<&str> = same_kind
        .iter()
        .filter_map(|alternative| match alternative {
            Alternative::Constraint { text, .. } => Some(text.as_str()),
            Alternative::Value(_) => None,
        })
        .collect();
    if texts.is_empty() {
        let values: Vec<String> = same_kind
            .iter()
            .filter_map(|alternative| match alternative {
                Alternative::Value(value) => Some(value.to_string()),
                Alternative::Constraint { .. } => None,
            })
            .collect();
        return Some(super::property_not_allowed::diagnostic(
            format!(
                "{prefix}property `{path}` is {value}; allowed: {}",
                values.join(", ")
            ),
            span,
        ));
    }
    let constraint_text = texts.join(" | ");
    if texts
        .iter()
        .any(|text| text.contains("=~") || text.contains("!~"))
    {
        return Some(super::property_pattern::diagnostic(
            format!("{prefix}property `{path}` is {value}, which does not match {constraint_text}"),
            span,
        ));
    }
    if texts
        .iter()
        .any(|text| text.contains('<') || text.contains('>'))
    {
        return Some(super::property_out_of_range::diagnostic(
            format!("{prefix}property `{path}` is {value}, out of range {constraint_text}"),
            span,
        ));
    }
    None
}
