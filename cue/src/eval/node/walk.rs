//! [`Evaluator::evaluate_parts`]: the requested top-level fields exported straight from the
//! evaluated vertices, every other field only checked for errors, in one walk.
//!
//! The walk visits vertices in exactly the order [`super::build`] does (so lazy evaluation
//! happens in the same order) and collects errors exactly as [`super::validate`] of the built
//! tree would, so the result equals building the tree, validating it and exporting the
//! requested fields, without the tree. Optional fields still go through
//! [`super::build_optional`] (its per-thread cache of schema nodes), and the rare shapes
//! whose export needs the built alternatives (a disjunction without a default) or the
//! tree (a root that is not a struct, injected data) fall back to building nodes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::exported::{Constraint, Exported, ExportedField};
use crate::parts::{Parts, Take, Taken};
use crate::{Error, ErrorKind, ast};

use super::super::engine::{
    self, Engine, FieldKind, FxBuild, SchemaKey, VId, is_definition, is_hidden,
};
use super::super::val::kind_text;
use super::super::{Evaluator, Injection, Value};
use super::{
    MAX_DEPTH, MAX_OPTIONAL_DEPTH, Node, build, build_at, build_optional_validated, child,
    data_node, export, has_quoted_label, is_struct_vertex, regular_fields, validate,
};

impl Evaluator {
    /// Evaluates like [`Evaluator::evaluate_omitting_injected`] and returns only the
    /// `requested` top-level fields, each taken as asked ([`Take`]), with the errors of the
    /// whole value (what [`Value::validate`] gives). The result is the same as evaluating,
    /// validating and then looking up and exporting each field; fields nobody reads are never
    /// built.
    pub fn evaluate_parts(
        &self,
        files: &[&ast::File],
        injections: &[Injection<'_>],
        requested: &[(&str, Take)],
    ) -> Parts {
        let mut engine = Engine::new(self.budget);
        engine.legacy_list_arithmetic = self.legacy_list_arithmetic;
        engine.omit_injected_data = true;
        engine.load(files, injections);
        let mut parts = root_parts(&mut engine, requested);
        engine.record_size();
        if let Some(error) = engine.budget_error() {
            // Over its budget the value is incomplete: nothing of it is handed out.
            parts = Parts {
                errors: vec![error],
                taken: requested
                    .iter()
                    .map(|(name, _)| ((*name).to_owned(), Taken::Absent))
                    .collect(),
            };
        }
        if super::super::stats_enabled() {
            eprintln!("cue: {}", engine.stats());
        }
        parts
    }
}

/// Whether a walk exports what it visits or only collects its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Export,
    Validate,
}

fn root_parts(engine: &mut Engine<'_>, requested: &[(&str, Take)]) -> Parts {
    let mut errors = Vec::new();
    let mut taken: Vec<(String, Taken)> = requested
        .iter()
        .map(|(name, _)| ((*name).to_owned(), Taken::Absent))
        .collect();
    engine.eval_vertex(engine::ROOT);
    let root = engine.deref(engine::ROOT);
    let vertex = &engine.vs[root as usize];
    if !vertex.errors.is_empty()
        || vertex.alts.is_some()
        || vertex.list.is_some()
        || !is_struct_vertex(vertex)
    {
        // Not a plain struct: the tree, as `Value` has it.
        let node = build(engine, engine::ROOT);
        validate(&node, &mut errors);
        for ((name, take), (_, slot)) in requested.iter().zip(taken.iter_mut()) {
            if let Some((field, doc)) = child(&node, name) {
                *slot = taken_from_node(field, doc, *take, name);
            }
        }
        return Parts { errors, taken };
    }
    for (sym, arc) in engine.ordered_arcs(root) {
        // As in `build_inner`: the caller's own injected JSON, unchanged, is left out.
        if engine
            .injected_data(arc)
            .is_some_and(|json| !has_quoted_label(json))
        {
            continue;
        }
        let label = engine.syms[sym as usize].clone();
        let request = requested
            .iter()
            .position(|(name, _)| *name == &*label)
            .map(|index| (index, requested[index].1));
        let optional = engine.vs[arc as usize].field == FieldKind::Optional;
        let Some((index, take)) = request else {
            if optional {
                build_optional_validated(engine, arc, 1, 1, &mut errors);
            } else if is_definition(&label) {
                validate_definition(engine, arc, &mut errors);
            } else {
                walk(engine, arc, 1, 0, Mode::Validate, &mut errors);
            }
            continue;
        };
        let result = if optional {
            let node = build_optional_validated(engine, arc, 1, 1, &mut errors);
            let doc = Rc::new(docs(engine, arc));
            taken_from_node(node, doc, take, &label)
        } else {
            match take {
                Take::Export => {
                    let value = walk(engine, arc, 1, 0, Mode::Export, &mut errors)
                        .unwrap_or(Exported::Bottom(Vec::new()));
                    Taken::Export(value, docs(engine, arc))
                }
                Take::Fields => Taken::Fields(exported_fields(engine, arc, &mut errors)),
                Take::Value => {
                    let node = build_at(engine, arc, 1, 0);
                    validate(&node, &mut errors);
                    let doc = Rc::new(docs(engine, arc));
                    taken_from_node(node, doc, take, &label)
                }
            }
        };
        if let Some((_, slot)) = taken.get_mut(index) {
            *slot = result;
        }
    }
    Parts { errors, taken }
}

thread_local! {
    /// Top-level definitions that depend on their template alone (`engine/pure.rs`), by
    /// [`SchemaKey`]: `true` when one evaluation found no error in them (every evaluation of
    /// the template then finds none), `false` when they had errors or cannot be reused.
    static CLEAN_DEFINITIONS: RefCell<HashMap<SchemaKey, bool, FxBuild>> =
        const { RefCell::new(HashMap::with_hasher(FxBuild)) };
}

/// Entries kept per thread before the map starts over (a long-running process sees new
/// template files; their stale entries are never hit again).
const CLEAN_DEFINITIONS_LIMIT: usize = 1 << 12;

/// Checks top-level definition `v` (`#Probe`, `#Change`: schemas a template's `parameter`
/// refers to) for errors, as [`walk`] in [`Mode::Validate`] does. A definition that cannot
/// see the evaluation's data and was once found free of errors is free of errors in every
/// evaluation of its template: it is then neither walked nor evaluated again.
fn validate_definition(engine: &mut Engine<'_>, v: VId, errors: &mut Vec<Error>) {
    let key = engine.schema_key(v, 1, 0);
    let known = key
        .as_ref()
        .and_then(|key| CLEAN_DEFINITIONS.with(|clean| clean.borrow().get(key).copied()));
    if known == Some(true) {
        return;
    }
    // Eligibility is decided before the walk, on the conjuncts as declared.
    let eligible = key.is_some() && known.is_none() && engine.is_data_independent(v);
    // Its own errors, apart: one that equals an error found elsewhere still counts here.
    let mut found = Vec::new();
    walk(engine, v, 1, 0, Mode::Validate, &mut found);
    push_errors(&found, errors);
    if let (Some(key), None, false) = (key, known, engine.over_budget()) {
        CLEAN_DEFINITIONS.with(|clean| {
            let mut clean = clean.borrow_mut();
            if clean.len() >= CLEAN_DEFINITIONS_LIMIT {
                clean.clear();
            }
            clean.insert(key, eligible && found.is_empty());
        });
    }
}

/// A requested field taken from its built node, as the `Value` API would give it.
fn taken_from_node(node: Rc<Node>, doc: Rc<Vec<String>>, take: Take, name: &str) -> Taken {
    match take {
        Take::Export => Taken::Export(export(&node), doc.as_ref().clone()),
        Take::Fields => Taken::Fields(
            regular_fields(&node)
                .into_iter()
                .map(|(label, node, _)| (label, export(&node)))
                .collect(),
        ),
        Take::Value => Taken::Value(Value {
            node,
            doc,
            path: Rc::new(vec![name.to_owned()]),
        }),
    }
}

/// The doc comment lines of field vertex `v`, read after it was built (as `build_inner`).
fn docs(engine: &Engine<'_>, v: VId) -> Vec<String> {
    let docs = &engine.vs[v as usize].docs;
    // Most fields have none: no iterator to set up per exported field.
    if docs.is_empty() {
        return Vec::new();
    }
    docs.iter()
        .flat_map(|(_, doc)| doc.iter().cloned())
        .collect()
}

/// The regular fields of top-level field `v`, exported ([`Take::Fields`]).
fn exported_fields(
    engine: &mut Engine<'_>,
    v: VId,
    errors: &mut Vec<Error>,
) -> Vec<(String, Exported)> {
    let is_plain_struct = engine.injected_data(v).is_none() && {
        engine.eval_vertex(v);
        let w = engine.deref(v);
        let vertex = &engine.vs[w as usize];
        vertex.errors.is_empty()
            && vertex.alts.is_none()
            && vertex.list.is_none()
            && is_struct_vertex(vertex)
    };
    if !is_plain_struct {
        // Errors, a disjunction (its default's fields), data: from the built node. Building
        // evaluates `v` again, which finds it evaluated.
        let node = build_at(engine, v, 1, 0);
        validate(&node, errors);
        return regular_fields(&node)
            .into_iter()
            .map(|(label, node, _)| (label, export(&node)))
            .collect();
    }
    let w = engine.deref(v);
    let mut fields = Vec::new();
    for (sym, arc) in engine.ordered_arcs(w) {
        let label = engine.syms[sym as usize].clone();
        if engine.vs[arc as usize].field == FieldKind::Optional {
            build_optional_validated(engine, arc, 2, 1, errors);
        } else if is_hidden(&label) || is_definition(&label) {
            walk(engine, arc, 2, 0, Mode::Validate, errors);
        } else {
            let value = walk(engine, arc, 2, 0, Mode::Export, errors)
                .unwrap_or(Exported::Bottom(Vec::new()));
            fields.push((String::from(&*label), value));
        }
    }
    fields
}

/// Errors of a vertex or node that fails, as [`validate`] collects them.
fn push_errors(found: &[Error], errors: &mut Vec<Error>) {
    for error in found {
        if error.kind != ErrorKind::Incomplete && !errors.contains(error) {
            errors.push(error.clone());
        }
    }
}

/// `export(build_at(v))` in [`Mode::Export`] (`None` in [`Mode::Validate`]), with the errors
/// `validate` would find in that node added to `errors`.
fn walk(
    engine: &mut Engine<'_>,
    v: VId,
    depth: u32,
    optional_depth: u32,
    mode: Mode,
    errors: &mut Vec<Error>,
) -> Option<Exported> {
    stacker::maybe_grow(engine::STACK_RED_ZONE, engine::STACK_SEGMENT, || {
        walk_inner(engine, v, depth, optional_depth, mode, errors)
    })
}

fn walk_inner(
    engine: &mut Engine<'_>,
    v: VId,
    depth: u32,
    optional_depth: u32,
    mode: Mode,
    errors: &mut Vec<Error>,
) -> Option<Exported> {
    let export_mode = mode == Mode::Export;
    // Over budget the evaluation has no value: the rest is not walked.
    if engine.over_budget() {
        return None;
    }
    if depth == 1
        && let Some(json) = engine.injected_data(v)
        && !has_quoted_label(json)
    {
        // Data holds no errors.
        return export_mode.then(|| export(&data_node(json)));
    }
    if optional_depth > MAX_OPTIONAL_DEPTH {
        return export_mode.then(|| {
            Exported::Incomplete(Constraint {
                kinds: crate::exported::KindSet::TOP,
                text: "_".to_owned(),
            })
        });
    }
    engine.eval_vertex(v);
    let v = engine.deref(v);
    if depth > MAX_DEPTH {
        let span = engine.vs[v as usize].span;
        let error = Error {
            kind: ErrorKind::Cycle,
            message: "structural cycle".to_owned(),
            spans: vec![span],
            path: engine.path(v),
        };
        push_errors(std::slice::from_ref(&error), errors);
        return export_mode.then(|| Exported::Bottom(vec![error]));
    }
    let vertex = &engine.vs[v as usize];
    if !vertex.errors.is_empty() {
        push_errors(&vertex.errors, errors);
        return export_mode.then(|| Exported::Bottom(engine.vs[v as usize].errors.clone()));
    }
    if let Some(alts) = vertex.alts.clone() {
        return walk_disjunction(engine, v, &alts, depth, optional_depth, mode, errors);
    }
    if let Some(list_elems) = vertex.list.as_ref().map(|list| list.elems.clone()) {
        return walk_list(engine, v, list_elems, depth, optional_depth, mode, errors);
    }
    if is_struct_vertex(vertex) {
        return walk_struct(engine, v, depth, optional_depth, mode, errors);
    }
    if !export_mode {
        return None;
    }
    if let Some((atom, _)) = &vertex.shape.atom {
        let atom = atom.clone();
        engine.charge_copy(&atom);
        return Some(Exported::Scalar(atom.to_json()));
    }
    let kinds = vertex.shape.kinds;
    let text = vertex.shape.constraint_text();
    Some(Exported::Incomplete(Constraint {
        kinds,
        text: if text.is_empty() {
            kind_text(kinds)
        } else {
            text
        },
    }))
}

/// [`walk_inner`] of a disjunction: its alternatives, and the default among them (a
/// disjunction without a default is exported as its alternatives' kinds and texts).
fn walk_disjunction(
    engine: &mut Engine<'_>,
    v: VId,
    alts: &[(VId, bool)],
    depth: u32,
    optional_depth: u32,
    mode: Mode,
    errors: &mut Vec<Error>,
) -> Option<Exported> {
    let export_mode = mode == Mode::Export;
    let default = match engine.default_of(v) {
        Some(Ok(d)) => alts.iter().position(|(a, _)| *a == d),
        _ => None,
    };
    if !export_mode {
        for (alt, _) in alts {
            walk(engine, *alt, depth + 1, optional_depth, mode, errors);
        }
        return None;
    }
    let Some(default) = default else {
        // The export of a disjunction without a default states its alternatives' kinds
        // and texts: built as nodes.
        let nodes: Vec<Rc<Node>> = alts
            .iter()
            .map(|(alt, _)| build_at(engine, *alt, depth + 1, optional_depth))
            .collect();
        let node = Rc::new(Node::Disj {
            alts: nodes,
            default: None,
        });
        validate(&node, errors);
        return Some(export(&node));
    };
    let mut exported: Vec<Exported> = alts
        .iter()
        .map(|(alt, _)| {
            walk(engine, *alt, depth + 1, optional_depth, mode, errors)
                .unwrap_or(Exported::Bottom(Vec::new()))
        })
        .collect();
    let default_value = exported.remove(default);
    Some(Exported::Default {
        default: Box::new(default_value),
        others: exported,
    })
}

/// [`walk_inner`] of a list: its elements, and the constraint of further elements.
fn walk_list(
    engine: &mut Engine<'_>,
    v: VId,
    list_elems: Vec<VId>,
    depth: u32,
    optional_depth: u32,
    mode: Mode,
    errors: &mut Vec<Error>,
) -> Option<Exported> {
    let export_mode = mode == Mode::Export;
    let open = engine.list_is_open(v);
    let mut elems = Vec::with_capacity(if export_mode { list_elems.len() } else { 0 });
    for elem in list_elems {
        if let Some(value) = walk(engine, elem, depth + 1, optional_depth, mode, errors) {
            elems.push(value);
        }
    }
    if !export_mode {
        return None;
    }
    // The constraint is a schema, exported for patches: a conflict inside it is not an
    // error of this value (`cue export` reports none while no element exists).
    let rest = engine.list_element_constraint(v).and_then(|constraint| {
        let mut constraint_errors = Vec::new();
        walk(
            engine,
            constraint,
            depth + 1,
            optional_depth,
            mode,
            &mut constraint_errors,
        )
        .map(Box::new)
    });
    Some(Exported::List { elems, open, rest })
}

/// [`walk_inner`] of a struct: its fields in order (optional fields built and validated,
/// definitions validated but not exported).
fn walk_struct(
    engine: &mut Engine<'_>,
    v: VId,
    depth: u32,
    optional_depth: u32,
    mode: Mode,
    errors: &mut Vec<Error>,
) -> Option<Exported> {
    let export_mode = mode == Mode::Export;
    let arcs = engine.ordered_arcs(v);
    let mut fields = Vec::with_capacity(if export_mode { arcs.len() } else { 0 });
    for (sym, arc) in arcs {
        let optional = engine.vs[arc as usize].field == FieldKind::Optional;
        let label = &engine.syms[sym as usize];
        // `export` leaves definitions out; `validate` still looks inside them.
        let field_mode = if is_definition(label) {
            Mode::Validate
        } else {
            mode
        };
        let value = if optional {
            let node = build_optional_validated(engine, arc, depth + 1, optional_depth + 1, errors);
            (field_mode == Mode::Export).then(|| export(&node))
        } else {
            walk(engine, arc, depth + 1, optional_depth, field_mode, errors)
        };
        if let Some(value) = value {
            fields.push(ExportedField {
                label: String::from(&*engine.syms[sym as usize]),
                value,
                doc: docs(engine, arc),
                optional,
            });
        }
    }
    export_mode.then_some(Exported::Struct(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `evaluate_parts` gives what evaluating, validating and exporting the fields gives.
    fn check_same(source: &str, injections: &[Injection<'_>]) {
        let parsed = crate::parse_file(crate::FileId(0), source);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let evaluator = Evaluator::new();
        let value = evaluator.evaluate_omitting_injected(&[&parsed.file], injections);
        let requested = [
            ("output", Take::Export),
            ("outputs", Take::Fields),
            ("patch", Take::Export),
            ("errs", Take::Value),
            ("missing", Take::Export),
        ];
        let mut parts = evaluator.evaluate_parts(&[&parsed.file], injections, &requested);
        assert_eq!(parts.errors(), value.validate().as_slice(), "{source}");
        for name in ["output", "patch", "missing"] {
            let expected = value.lookup(&[name]).map(|v| (v.export(), v.doc()));
            assert_eq!(parts.take_export(name), expected, "{name} of {source}");
        }
        let expected: Vec<(String, Exported)> = value
            .lookup(&["outputs"])
            .map(|v| {
                v.fields()
                    .into_iter()
                    .map(|(label, value)| (label, value.export()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            parts.take_fields("outputs"),
            expected,
            "outputs of {source}"
        );
        assert_eq!(
            parts.value("errs").map(|v| v.to_json()),
            value.lookup(&["errs"]).map(|v| v.to_json()),
            "errs of {source}"
        );
    }

    #[test]
    fn parts_equal_the_built_value() {
        let cases = [
            "output: {a: 1, b: *\"x\" | string, c: [1, {d: int}], #D: {e: 1 & 2}, _h: 3}\n",
            "output: {a: \"x\" | \"y\", b?: string, c: >=1 & <=3}\npatch: {\n\t// +patchKey=name\n\tl: [{name: \"a\"}]\n}\n",
            "outputs: {one: {k: 1}, two: {k: 2 & 3}, _x: 1, opt?: {k: 3}}\nerrs: [\"bad\"]\n",
            "outputs: *{a: {k: 1}} | {b: {k: 2}}\nx: 1 & 2\noutput: {y: x}\n",
            "output: [1, 2]\nerrs: []\n",
            "1 & 2\n",
            "#S: {a: int}\noutput: #S & {a: 1, b: 2}\n",
        ];
        for source in cases {
            check_same(source, &[]);
        }
    }

    /// Every golden case of `tests/cases` (the language features the crate supports, errors
    /// included): each top-level field taken each way equals the built value's.
    #[test]
    fn parts_equal_the_built_value_on_every_golden_case() {
        fn cue_files(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    cue_files(&path, files);
                } else if path.extension().is_some_and(|ext| ext == "cue") {
                    files.push(path);
                }
            }
        }
        let mut files = Vec::new();
        cue_files(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases"),
            &mut files,
        );
        files.sort();
        assert!(files.len() > 50, "golden cases not found: {}", files.len());
        let evaluator = Evaluator::new();
        for path in files {
            let source = std::fs::read_to_string(&path).unwrap();
            let parsed = crate::parse_file(crate::FileId(0), &source);
            if !parsed.errors.is_empty() {
                continue;
            }
            let value = evaluator.evaluate_omitting_injected(&[&parsed.file], &[]);
            let names: Vec<String> = value.fields().into_iter().map(|(name, _)| name).collect();
            for take in [Take::Export, Take::Fields, Take::Value] {
                let requested: Vec<(&str, Take)> =
                    names.iter().map(|name| (name.as_str(), take)).collect();
                let mut parts = evaluator.evaluate_parts(&[&parsed.file], &[], &requested);
                assert_eq!(
                    parts.errors(),
                    value.validate().as_slice(),
                    "{}",
                    path.display()
                );
                for name in &names {
                    let field = value.lookup(&[name]).unwrap();
                    match take {
                        Take::Export => assert_eq!(
                            parts.take_export(name),
                            Some((field.export(), field.doc())),
                            "{name} of {}",
                            path.display()
                        ),
                        Take::Fields => {
                            let expected: Vec<(String, Exported)> = field
                                .fields()
                                .into_iter()
                                .map(|(label, value)| (label, value.export()))
                                .collect();
                            assert_eq!(
                                parts.take_fields(name),
                                expected,
                                "{name} of {}",
                                path.display()
                            );
                        }
                        Take::Value => assert_eq!(
                            parts.value(name).map(Value::to_json),
                            Some(field.to_json()),
                            "{name} of {}",
                            path.display()
                        ),
                    }
                }
            }
        }
    }

    /// A definition that depends on its template alone is checked once per thread when clean;
    /// one with errors, or one that reads the data, is checked in every evaluation.
    #[test]
    fn clean_definitions_are_checked_once_and_the_others_every_time() {
        let source = "#Pure: {a: *1 | int, b: a + 1, c: [...string]}\n#Bad: {a: 1 & 2}\n\
                      #Dep: {x: parameter.x & int}\nparameter: _\noutput: {y: 1}\n";
        let good = serde_json::json!({"x": 1});
        let bad = serde_json::json!({"x": "s"});
        for parameter in [&good, &bad, &good, &bad] {
            let injections = [Injection {
                field: "parameter",
                value: parameter,
                span: crate::Span::default(),
            }];
            check_same(source, &injections);
        }
        let parsed = crate::parse_file(crate::FileId(0), source);
        let evaluator = Evaluator::new();
        let errors = |parameter: &serde_json::Value| {
            let injections = [Injection {
                field: "parameter",
                value: parameter,
                span: crate::Span::default(),
            }];
            evaluator
                .evaluate_parts(&[&parsed.file], &injections, &[("output", Take::Export)])
                .errors()
                .len()
        };
        // `#Bad` always; `#Dep` only with the bad parameter, also after a clean evaluation.
        assert_eq!(errors(&good), 1);
        assert_eq!(errors(&bad), 2);
        assert_eq!(errors(&good), 1);
    }

    #[test]
    fn injected_data_is_left_out_and_read_the_same() {
        let context = serde_json::json!({"name": "app", "labels": {"a": "b"}});
        let parameter = serde_json::json!({"replicas": 2});
        let injections = [
            Injection {
                field: "context",
                value: &context,
                span: crate::Span::default(),
            },
            Injection {
                field: "parameter",
                value: &parameter,
                span: crate::Span::default(),
            },
        ];
        check_same(
            "parameter: {replicas: *1 | int, name?: string}\ncontext: _\noutput: {name: context.name, replicas: parameter.replicas, labels: context.labels}\n",
            &injections,
        );
        check_same(
            "parameter: {replicas: string}\ncontext: _\noutput: {r: parameter.replicas}\n",
            &injections,
        );
    }
}
