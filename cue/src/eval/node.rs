//! The owned result of an evaluation: a tree of [`Node`]s built from the engine's vertices
//! once evaluation is complete, so a [`super::Value`] no longer borrows the AST. JSON export,
//! validation and the syntax-like [`Exported`] view all work on this tree. `walk.rs`
//! ([`super::Evaluator::evaluate_parts`]) exports chosen fields from the vertices instead,
//! building nodes only where it must.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::exported::{Constraint, Exported, ExportedField, KindSet};
use crate::span::Span;
use crate::{Error, ErrorKind};

use super::engine::{
    Engine, FieldKind, FxBuild, SchemaKey, VId, Vertex, is_definition, is_hidden, json_atom,
};
use super::val::{Atom, kind_text};

mod walk;

const MAX_DEPTH: u32 = 260;

thread_local! {
    /// The doc of every field without doc comments (most of them), shared instead of
    /// allocating an empty one per node. Values are `Rc` and never leave their thread.
    static NO_DOC: Rc<Vec<String>> = Rc::new(Vec::new());
}

/// The shared empty doc.
pub fn no_doc() -> Rc<Vec<String>> {
    NO_DOC.with(Rc::clone)
}

#[derive(Debug)]
pub enum Node {
    /// Fields, and the incomplete errors of comprehensions that produced no fields (`for v in
    /// x.optional`): they fail the JSON export, as in `cue export`, but leave the other fields
    /// readable, as CUE's Go API (`Fields()`, which KubeVela uses) does.
    Struct(Vec<NField>, Vec<Error>),
    List {
        elems: Vec<Rc<Node>>,
        open: bool,
    },
    Scalar(Atom),
    Disj {
        alts: Vec<Rc<Node>>,
        default: Option<usize>,
    },
    Incomplete {
        kinds: KindSet,
        text: String,
        span: Span,
    },
    Bottom(Vec<Error>),
    /// Injected JSON that nothing in the program unified with (the `context` of a template
    /// that only reads it): it cannot hold an error, so it is kept as data and converted only
    /// when read, instead of being evaluated vertex by vertex and built node by node.
    Data(serde_json::Value),
}

#[derive(Debug)]
pub struct NField {
    pub label: Rc<str>,
    pub field: FieldKind,
    pub node: Rc<Node>,
    pub doc: Rc<Vec<String>>,
}

/// Evaluates `v` completely and converts it.
pub fn build(engine: &mut Engine<'_>, v: VId) -> Rc<Node> {
    build_at(engine, v, 0, 0)
}

/// Optional fields nested this deep in optional fields are not expanded: they only hold
/// schema (recursive definitions such as `#L: {next?: #L}` would never end).
const MAX_OPTIONAL_DEPTH: u32 = 3;

fn build_at(engine: &mut Engine<'_>, v: VId, depth: u32, optional_depth: u32) -> Rc<Node> {
    stacker::maybe_grow(
        super::engine::STACK_RED_ZONE,
        super::engine::STACK_SEGMENT,
        || build_inner(engine, v, depth, optional_depth),
    )
}

fn build_inner(engine: &mut Engine<'_>, v: VId, depth: u32, optional_depth: u32) -> Rc<Node> {
    // Over budget the evaluation has no value: the rest of the tree is not built.
    if let Some(error) = engine.budget_error() {
        return Rc::new(Node::Bottom(vec![error]));
    }
    if depth == 1
        && let Some(json) = engine.injected_data(v)
        && !has_quoted_label(json)
    {
        return Rc::new(Node::Data(json.clone()));
    }
    if optional_depth > MAX_OPTIONAL_DEPTH {
        return Rc::new(Node::Incomplete {
            kinds: KindSet::TOP,
            text: "_".to_owned(),
            span: engine.vs[v as usize].span,
        });
    }
    engine.eval_vertex(v);
    let v = engine.deref(v);
    if depth > MAX_DEPTH {
        let span = engine.vs[v as usize].span;
        return Rc::new(Node::Bottom(vec![Error {
            kind: ErrorKind::Cycle,
            message: "structural cycle".to_owned(),
            spans: vec![span],
            path: engine.path(v),
        }]));
    }
    let vertex = &engine.vs[v as usize];
    if !vertex.errors.is_empty() {
        return Rc::new(Node::Bottom(vertex.errors.clone()));
    }
    if let Some(alts) = vertex.alts.clone() {
        let default = match engine.default_of(v) {
            Some(Ok(d)) => alts.iter().position(|(a, _)| *a == d),
            _ => None,
        };
        let nodes = alts
            .iter()
            .map(|(a, _)| build_at(engine, *a, depth + 1, optional_depth))
            .collect();
        return Rc::new(Node::Disj {
            alts: nodes,
            default,
        });
    }
    // Only the element ids: the list's element types (conjuncts) are not needed here.
    if let Some(list_elems) = vertex.list.as_ref().map(|list| list.elems.clone()) {
        let open = engine.list_is_open(v);
        let elems = list_elems
            .iter()
            .map(|e| build_at(engine, *e, depth + 1, optional_depth))
            .collect();
        return Rc::new(Node::List { elems, open });
    }
    if is_struct_vertex(vertex) {
        let arcs = engine.ordered_arcs(v);
        let no_doc = no_doc();
        let mut fields = Vec::with_capacity(arcs.len());
        for (sym, arc) in arcs {
            // The same test as the `Node::Data` shortcut below: such a field is the caller's
            // JSON unchanged, and this caller does not want it back.
            if depth == 0
                && engine.omit_injected_data
                && engine
                    .injected_data(arc)
                    .is_some_and(|json| !has_quoted_label(json))
            {
                continue;
            }
            let label = engine.syms[sym as usize].clone();
            let node = if engine.vs[arc as usize].field == FieldKind::Optional {
                build_optional(engine, arc, depth + 1, optional_depth + 1)
            } else {
                build_at(engine, arc, depth + 1, optional_depth)
            };
            let a = &engine.vs[arc as usize];
            let doc = if a.docs.is_empty() {
                no_doc.clone()
            } else {
                Rc::new(a.docs.iter().flat_map(|(_, d)| d.iter().cloned()).collect())
            };
            fields.push(NField {
                label,
                field: a.field,
                node,
                doc,
            });
        }
        let incomplete = engine.vs[v as usize].incomplete.clone();
        return Rc::new(Node::Struct(fields, incomplete));
    }
    if let Some((atom, _)) = &vertex.shape.atom {
        let atom = atom.clone();
        engine.charge_copy(&atom);
        return Rc::new(Node::Scalar(atom));
    }
    Rc::new(Node::Incomplete {
        kinds: vertex.shape.kinds,
        text: vertex.shape.constraint_text(),
        span: vertex.span,
    })
}

/// Whether an evaluated vertex without errors, alternatives or list becomes a struct node.
fn is_struct_vertex(vertex: &Vertex<'_>) -> bool {
    vertex.is_struct
        || (vertex.struct_hint
            && vertex.shape.atom.is_none()
            && (vertex.shape.kinds == KindSet::TOP || vertex.shape.kinds == KindSet::STRUCT))
}

thread_local! {
    /// Built values of optional fields that depend on their file alone (see
    /// `engine/pure.rs`), or `None` for fields found ineligible. Values are `Rc` and never
    /// leave their thread; a thread renders the same templates over and over.
    static SCHEMA_CACHE: RefCell<HashMap<SchemaKey, Option<Rc<Node>>, FxBuild>> =
        const { RefCell::new(HashMap::with_hasher(FxBuild)) };
}

/// Entries kept per thread before the cache starts over (a long-running process sees new
/// template files; their stale entries are never hit again).
const SCHEMA_CACHE_LIMIT: usize = 1 << 14;

/// [`build_at`] for optional arc `v`: an untouched optional field that cannot see the data is
/// built once per template and thread, then reused.
fn build_optional(engine: &mut Engine<'_>, v: VId, depth: u32, optional_depth: u32) -> Rc<Node> {
    build_optional_reused(engine, v, depth, optional_depth).0
}

/// [`build_optional`] and [`validate`] of its node in one: a reused node was kept because it
/// holds no error, so it is not validated again.
fn build_optional_validated(
    engine: &mut Engine<'_>,
    v: VId,
    depth: u32,
    optional_depth: u32,
    errors: &mut Vec<Error>,
) -> Rc<Node> {
    let (node, reused) = build_optional_reused(engine, v, depth, optional_depth);
    if !reused {
        validate(&node, errors);
    }
    node
}

/// [`build_optional`], and whether the node came from the cache (it then has no error).
fn build_optional_reused(
    engine: &mut Engine<'_>,
    v: VId,
    depth: u32,
    optional_depth: u32,
) -> (Rc<Node>, bool) {
    let Some(key) = engine.schema_key(v, depth, optional_depth) else {
        return (build_at(engine, v, depth, optional_depth), false);
    };
    match SCHEMA_CACHE.with(|cache| cache.borrow().get(&key).cloned()) {
        Some(Some(node)) => return (node, true),
        Some(None) => return (build_at(engine, v, depth, optional_depth), false),
        None => {}
    }
    let eligible = engine.is_data_independent(v);
    let node = build_at(engine, v, depth, optional_depth);
    // Errors carry the path they were found at, which a reuse elsewhere would get wrong.
    let kept = (eligible && !has_errors(&node)).then(|| node.clone());
    if engine.over_budget() {
        return (node, false);
    }
    SCHEMA_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= SCHEMA_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, kept);
    });
    (node, false)
}

/// Whether any error is held anywhere in `node`.
fn has_errors(node: &Node) -> bool {
    match node {
        Node::Bottom(_) => true,
        Node::Struct(fields, incomplete) => {
            !incomplete.is_empty() || fields.iter().any(|f| has_errors(&f.node))
        }
        Node::List { elems, .. } => elems.iter().any(|e| has_errors(e)),
        Node::Disj { alts, .. } => alts.iter().any(|a| has_errors(a)),
        Node::Scalar(_) | Node::Incomplete { .. } | Node::Data(_) => false,
    }
}

/// Whether `json` has an object key the engine rejects (`#x`, `_x` given as strings): such
/// data goes through the engine, which reports it.
fn has_quoted_label(json: &serde_json::Value) -> bool {
    match json {
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(key, value)| is_hidden(key) || is_definition(key) || has_quoted_label(value)),
        serde_json::Value::Array(items) => items.iter().any(has_quoted_label),
        _ => false,
    }
}

/// The nodes the engine would have built for injected data (see [`Node::Data`]): regular
/// fields in the data's order, closed lists, scalars as the engine reads JSON numbers.
fn data_node(json: &serde_json::Value) -> Rc<Node> {
    Rc::new(match json {
        serde_json::Value::Object(map) => Node::Struct(
            map.iter()
                .map(|(key, value)| NField {
                    label: Rc::from(key.as_str()),
                    field: FieldKind::Regular,
                    node: data_node(value),
                    doc: no_doc(),
                })
                .collect(),
            Vec::new(),
        ),
        serde_json::Value::Array(items) => Node::List {
            elems: items.iter().map(data_node).collect(),
            open: false,
        },
        scalar => Node::Scalar(json_atom(scalar)),
    })
}

/// The JSON export of injected data: numbers normalised as the engine reads them.
fn data_json(json: &serde_json::Value) -> serde_json::Value {
    match json {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), data_json(value)))
                .collect(),
        ),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(data_json).collect())
        }
        scalar => json_atom(scalar).to_json(),
    }
}

/// `node`, with injected data converted into nodes.
fn expanded(node: &Rc<Node>) -> Rc<Node> {
    match node.as_ref() {
        Node::Data(json) => data_node(json),
        _ => node.clone(),
    }
}

/// The default of a disjunction node, or the node itself.
fn resolved(node: &Rc<Node>) -> Rc<Node> {
    let node = &expanded(node);
    match node.as_ref() {
        Node::Disj {
            alts,
            default: Some(d),
        } => alts.get(*d).cloned().unwrap_or_else(|| node.clone()),
        _ => node.clone(),
    }
}

pub fn child(node: &Rc<Node>, label: &str) -> Option<(Rc<Node>, Rc<Vec<String>>)> {
    let node = resolved(node);
    match node.as_ref() {
        Node::Struct(fields, _) => fields
            .iter()
            .find(|f| &*f.label == label)
            .map(|f| (f.node.clone(), f.doc.clone())),
        Node::List { elems, .. } => {
            let i: usize = label.parse().ok()?;
            elems.get(i).map(|e| (e.clone(), no_doc()))
        }
        _ => None,
    }
}

fn is_regular(field: &NField) -> bool {
    !is_hidden(&field.label) && !is_definition(&field.label) && field.field != FieldKind::Optional
}

pub fn regular_fields(node: &Rc<Node>) -> Vec<(String, Rc<Node>, Rc<Vec<String>>)> {
    let node = resolved(node);
    match node.as_ref() {
        Node::Struct(fields, _) => fields
            .iter()
            .filter(|f| is_regular(f))
            .map(|f| (String::from(&*f.label), f.node.clone(), f.doc.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

pub fn validate(node: &Rc<Node>, errors: &mut Vec<Error>) {
    match node.as_ref() {
        Node::Bottom(errs) => {
            for e in errs {
                if e.kind != ErrorKind::Incomplete && !errors.contains(e) {
                    errors.push(e.clone());
                }
            }
        }
        Node::Struct(fields, _) => {
            for f in fields {
                validate(&f.node, errors);
            }
        }
        Node::List { elems, .. } => {
            for e in elems {
                validate(e, errors);
            }
        }
        Node::Disj { alts, .. } => {
            for a in alts {
                validate(a, errors);
            }
        }
        Node::Scalar(_) | Node::Incomplete { .. } | Node::Data(_) => {}
    }
}

pub fn to_json(
    node: &Rc<Node>,
    path: &mut Vec<Rc<str>>,
    errors: &mut Vec<Error>,
) -> serde_json::Value {
    match node.as_ref() {
        Node::Bottom(errs) => {
            for e in errs {
                let mut e = e.clone();
                if e.path.is_empty() {
                    e.path = owned(path);
                }
                if !errors.contains(&e) {
                    errors.push(e);
                }
            }
            serde_json::Value::Null
        }
        Node::Scalar(atom) => atom.to_json(),
        Node::Data(json) => data_json(json),
        Node::Struct(fields, incomplete) => {
            for e in incomplete {
                let mut e = e.clone();
                if e.path.is_empty() {
                    e.path = owned(path);
                }
                if !errors.contains(&e) {
                    errors.push(e);
                }
            }
            let mut map = serde_json::Map::new();
            for f in fields {
                if is_hidden(&f.label) || is_definition(&f.label) || f.field == FieldKind::Optional
                {
                    // Not exported, but real errors there still fail the export (as in CUE).
                    validate(&f.node, errors);
                    continue;
                }
                path.push(f.label.clone());
                if f.field == FieldKind::Required
                    && !matches!(
                        f.node.as_ref(),
                        Node::Scalar(_) | Node::Struct(..) | Node::List { .. }
                    )
                {
                    let spans = match f.node.as_ref() {
                        Node::Incomplete { span, .. } => vec![*span],
                        _ => Vec::new(),
                    };
                    errors.push(Error {
                        kind: ErrorKind::Incomplete,
                        message: "field is required but not present".to_owned(),
                        spans,
                        path: owned(path),
                    });
                } else {
                    let value = to_json(&f.node, path, errors);
                    map.insert(String::from(&*f.label), value);
                }
                path.pop();
            }
            serde_json::Value::Object(map)
        }
        Node::List { elems, .. } => {
            let mut out = Vec::with_capacity(elems.len());
            for (i, e) in elems.iter().enumerate() {
                path.push(Rc::from(i.to_string().as_str()));
                out.push(to_json(e, path, errors));
                path.pop();
            }
            serde_json::Value::Array(out)
        }
        Node::Disj { alts, default } => match default.and_then(|d| alts.get(d)) {
            Some(d) => to_json(d, path, errors),
            None => {
                let texts: Vec<String> = alts.iter().map(text_of).collect();
                errors.push(Error {
                    kind: ErrorKind::Incomplete,
                    message: format!("incomplete value {}", texts.join(" | ")),
                    spans: vec![],
                    path: owned(path),
                });
                serde_json::Value::Null
            }
        },
        Node::Incomplete { text, span, .. } => {
            errors.push(Error {
                kind: ErrorKind::Incomplete,
                message: format!("incomplete value {text}"),
                spans: vec![*span],
                path: owned(path),
            });
            serde_json::Value::Null
        }
    }
}

fn owned(path: &[Rc<str>]) -> Vec<String> {
    path.iter().map(|p| String::from(&**p)).collect()
}

/// Short CUE text of a node.
fn text_of(node: &Rc<Node>) -> String {
    match node.as_ref() {
        Node::Scalar(atom) => atom.cue_text(),
        Node::Incomplete { text, .. } => text.clone(),
        Node::Struct(..) => "{...}".to_owned(),
        Node::List { .. } => "[...]".to_owned(),
        Node::Disj { alts, default } => alts
            .iter()
            .enumerate()
            .map(|(i, a)| {
                if Some(i) == *default {
                    format!("*{}", text_of(a))
                } else {
                    text_of(a)
                }
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Node::Bottom(_) => "_|_".to_owned(),
        Node::Data(json) => text_of(&data_node(json)),
    }
}

fn kinds_of(node: &Rc<Node>) -> KindSet {
    match node.as_ref() {
        Node::Scalar(atom) => atom.kind(),
        Node::Incomplete { kinds, .. } => *kinds,
        Node::Struct(..) => KindSet::STRUCT,
        Node::List { .. } => KindSet::LIST,
        Node::Disj { alts, .. } => alts
            .iter()
            .fold(KindSet(0), |acc, a| acc.union(kinds_of(a))),
        Node::Bottom(_) => KindSet(0),
        Node::Data(json) => kinds_of(&data_node(json)),
    }
}

pub fn export(node: &Rc<Node>) -> Exported {
    match node.as_ref() {
        Node::Data(json) => export(&data_node(json)),
        Node::Bottom(errs) => Exported::Bottom(errs.clone()),
        Node::Scalar(atom) => Exported::Scalar(atom.to_json()),
        Node::Struct(fields, _) => Exported::Struct(
            fields
                .iter()
                .filter(|f| !is_definition(&f.label))
                .map(|f| ExportedField {
                    label: String::from(&*f.label),
                    value: export(&f.node),
                    doc: f.doc.as_ref().clone(),
                    optional: f.field == FieldKind::Optional,
                })
                .collect(),
        ),
        // Built nodes keep no element constraint; `evaluate_parts`' walk exports it.
        Node::List { elems, open } => Exported::List {
            elems: elems.iter().map(export).collect(),
            open: *open,
            rest: None,
        },
        Node::Disj { alts, default } => match default.and_then(|d| alts.get(d)) {
            Some(d) => Exported::Default {
                default: Box::new(export(d)),
                others: alts
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| Some(*i) != *default)
                    .map(|(_, a)| export(a))
                    .collect(),
            },
            None => Exported::Incomplete(Constraint {
                kinds: kinds_of(node),
                text: text_of(node),
            }),
        },
        Node::Incomplete { kinds, text, .. } => Exported::Incomplete(Constraint {
            kinds: *kinds,
            text: if text.is_empty() {
                kind_text(*kinds)
            } else {
                text.clone()
            },
        }),
    }
}
