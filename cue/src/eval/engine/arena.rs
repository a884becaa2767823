//! The arena: vertices and environments, the step budget, loading files and injected data,
//! errors, arcs and the conjuncts added to them, and vertices built from data (lists, structs,
//! atoms, JSON) for builtins.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use crate::eval::budget::{BYTES_PER_STEP, COMPARED_PER_STEP};
use crate::eval::val::{Atom, Conflict};
use crate::span::Span;
use crate::{Error, ErrorKind, ast};

use super::symbols::{EMPTY_SYM, FxBuild};
use super::values::json_atom;
use super::{
    Close, Conj, ConjKind, Engine, Env, EnvId, EnvKind, FieldKind, ROOT, State, Sym, VId, Vertex,
    is_definition, is_hidden,
};

impl<'a> Engine<'a> {
    #[inline]
    pub(super) fn v(&self, v: VId) -> &Vertex<'a> {
        &self.vs[v as usize]
    }

    #[inline]
    pub(super) fn vm(&mut self, v: VId) -> &mut Vertex<'a> {
        &mut self.vs[v as usize]
    }

    #[inline]
    pub fn new_vertex(&mut self, parent: Option<VId>, label: Sym) -> VId {
        self.meter.charge(1);
        let depth = parent.map_or(0, |p| self.v(p).depth + 1);
        let id = self.vs.len() as VId;
        // `resize_with` lets the vertex be written straight into its slot; `push` built it on
        // the stack and copied it (a vertex is ~540 bytes, ~400 vertices per app).
        self.vs
            .resize_with(id as usize + 1, || Vertex::new(parent, label, depth));
        id
    }

    #[inline]
    pub(super) fn new_env(&mut self, parent: Option<EnvId>, kind: EnvKind<'a>) -> EnvId {
        self.meter.charge(1);
        let id = self.envs.len() as EnvId;
        self.envs.push(Env { parent, kind });
        id
    }

    /// Whether the evaluation went over its [`Budget`] and stops.
    #[inline]
    pub fn over_budget(&self) -> bool {
        self.meter.exceeded()
    }

    /// The error the evaluation ends in when it went over its [`Budget`], at the first file.
    #[inline]
    pub fn budget_error(&self) -> Option<Error> {
        self.meter
            .error(self.vs.first().map(|root| root.span).unwrap_or_default())
    }

    /// Counts `bytes` of string built against the budget.
    #[inline]
    pub fn charge_bytes(&mut self, bytes: usize) {
        self.meter.charge((bytes / BYTES_PER_STEP) as u64);
    }

    /// Counts a copy of `atom`'s text leaving the evaluation (exported, marshalled, or returned
    /// by a builtin): one string referenced many times is copied each time, and would
    /// otherwise make an output far larger than its steps.
    #[inline]
    pub fn charge_copy(&mut self, atom: &Atom) {
        self.charge_bytes(atom.text_len());
    }

    /// Counts `steps` of work done without making vertices (a list's items copied).
    #[inline]
    pub fn charge(&mut self, steps: usize) {
        self.meter.charge(steps as u64);
    }

    /// Adds the files and injections to the root vertex.
    pub fn load(&mut self, files: &[&'a ast::File], injections: &[crate::eval::Injection<'a>]) {
        if let [file] = files
            && injections
                .iter()
                .all(|i| !is_definition(i.field) && !is_hidden(i.field))
        {
            self.schema_scope = Some(file.compile_checks.uid);
            self.schema_root_decls = Some(&file.decls);
        }
        if let [file] = files {
            self.size_hint = &file.compile_checks.vertex_hint;
            self.file_uid = Some(file.compile_checks.uid);
            self.ast_uid = file.compile_checks.uid;
        } else {
            // Labels and literals of several files are keyed without an identity: only for
            // this evaluation.
            let own = HashMap::with_capacity_and_hasher(128, FxBuild);
            let saved_syms = std::mem::replace(&mut self.ast_syms, own);
            let saved_constants = std::mem::take(&mut self.constants);
            self.ast_syms_saved = Some((saved_syms, saved_constants));
        }
        let hint = match self.size_hint.load(Ordering::Relaxed) {
            0 => 64,
            seen => seen,
        };
        self.vs.reserve(hint.saturating_sub(self.vs.len()));
        for file in files {
            let checks = file.compile_checks.checks.get_or_init(|| {
                let mut errors = crate::eval::compile::unused(file);
                errors.extend(crate::eval::compile::misplaced_marks(file));
                errors
            });
            for error in checks {
                self.add_error(ROOT, error.clone());
            }
            let env = self.new_env(
                None,
                EnvKind::File {
                    imports: &file.imports,
                },
            );
            self.add_conj(ROOT, ConjKind::File(file), env, Close::Open, 0, false);
        }
        for injection in injections {
            let sym = self.intern(injection.field);
            let arc = self.arc(ROOT, sym);
            self.vm(arc).field = FieldKind::Regular;
            let env = self.new_env(None, EnvKind::File { imports: &[] });
            self.add_conj(
                arc,
                ConjKind::Json(injection.value, injection.span),
                env,
                Close::Open,
                0,
                false,
            );
        }
    }

    /// The injected JSON `v` holds when that is all it holds: its only conjunct is the
    /// injection (no declaration, pattern or closedness of the program applies to it, so its
    /// subtree is that data exactly and cannot fail) and nothing went wrong so far.
    pub fn injected_data(&self, v: VId) -> Option<&'a serde_json::Value> {
        let vertex = self.v(v);
        if !vertex.errors.is_empty() || vertex.forward.is_some() || vertex.alts.is_some() {
            return None;
        }
        match vertex.conjs.as_slice() {
            [
                Conj {
                    kind: ConjKind::Json(json, _),
                    ..
                },
            ] => Some(json),
            _ => None,
        }
    }

    /// The path of a vertex, for errors.
    pub fn path(&self, v: VId) -> Vec<String> {
        // A vertex's depth is the number of labels above it: one allocation for the path.
        let mut labels = Vec::with_capacity(self.v(v).depth as usize);
        let mut cur = Some(v);
        while let Some(id) = cur {
            let vertex = self.v(id);
            if vertex.parent.is_some() {
                labels.push(self.sym(vertex.label).to_owned());
            }
            cur = vertex.parent;
        }
        labels.reverse();
        labels
    }

    pub(super) fn err(
        &self,
        v: VId,
        kind: ErrorKind,
        message: impl Into<String>,
        spans: Vec<Span>,
    ) -> Error {
        Error {
            kind,
            message: message.into(),
            spans,
            path: self.path(v),
        }
    }

    /// Gives `v` an error unless it has an equal one. The error and the scan for its equal are
    /// charged: errors copied up through nested disjunctions would otherwise grow with no
    /// step counted.
    #[inline]
    pub(super) fn add_error(&mut self, v: VId, error: Error) {
        let scanned = self.v(v).errors.len() as u64;
        self.meter
            .charge(error_steps(&error) + scanned / COMPARED_PER_STEP);
        let vertex = self.vm(v);
        if !vertex
            .errors
            .iter()
            .any(|e| e.message == error.message && e.spans == error.spans)
        {
            vertex.errors.push(error);
        }
    }

    #[inline]
    pub(super) fn conflict(&mut self, v: VId, conflict: Conflict) {
        let error = self.err(v, ErrorKind::Conflict, conflict.message, conflict.spans);
        self.add_error(v, error);
    }

    /// The child arc `sym` of `v`, created if missing.
    pub fn arc(&mut self, v: VId, sym: Sym) -> VId {
        if let Some((_, arc)) = self.v(v).arcs.iter().find(|(s, _)| *s == sym) {
            return *arc;
        }
        let arc = self.new_vertex(Some(v), sym);
        match &mut self.insert_at {
            Some((target, pos)) if *target == v && *pos < self.vs[v as usize].arcs.len() => {
                self.vs[v as usize].arcs.insert(*pos, (sym, arc));
                *pos += 1;
            }
            _ => self.vm(v).arcs.push((sym, arc)),
        }
        if self.v(v).patterns().is_empty() {
            return arc;
        }
        // Patterns seen so far apply to the new arc.
        let label = self.sym_text(sym);
        let patterns = self.v(v).patterns().to_vec();
        for pattern in patterns {
            if self.pattern_matches(&pattern.matcher, &label) {
                let close = if pattern.close == Close::Deep {
                    Close::Deep
                } else {
                    Close::Open
                };
                let env = self.field_env(pattern.field, pattern.env, arc, sym);
                self.add_conj(arc, ConjKind::Expr(pattern.value), env, close, 0, false);
            }
        }
        arc
    }

    #[inline]
    pub(super) fn find_arc(&self, v: VId, sym: Sym) -> Option<VId> {
        self.v(v)
            .arcs
            .iter()
            .find(|(s, _)| *s == sym)
            .map(|(_, a)| *a)
    }

    pub fn add_conj(
        &mut self,
        v: VId,
        kind: ConjKind<'a>,
        env: EnvId,
        close: Close,
        grp: u32,
        derived: bool,
    ) {
        // A conjunct is work (and memory) like a vertex, and so is the scan for its duplicate
        // below: a vertex given many conjuncts would otherwise stay within any step budget.
        let scanned = self.vs[v as usize].conjs.len() as u64;
        self.meter.charge(1 + scanned / COMPARED_PER_STEP);
        let vertex = &self.vs[v as usize];
        // Skip an identical conjunct: keeps reference cycles (`a: b, b: a`) finite.
        let duplicate = vertex.conjs.iter().any(|c| {
            c.env == env
                && c.close == close
                && c.grp == grp
                && match (&c.kind, &kind) {
                    (ConjKind::Expr(a), ConjKind::Expr(b)) => std::ptr::eq(*a, *b),
                    (ConjKind::Body(a), ConjKind::Body(b)) => std::ptr::eq(*a, *b),
                    (ConjKind::File(a), ConjKind::File(b)) => std::ptr::eq(*a, *b),
                    (ConjKind::Json(a, _), ConjKind::Json(b, _)) => std::ptr::eq(*a, *b),
                    (ConjKind::Ref(a, _), ConjKind::Ref(b, _)) => a == b,
                    _ => false,
                }
        });
        if duplicate {
            return;
        }
        let vertex = &mut self.vs[v as usize];
        if vertex.conjs.is_empty() {
            vertex.span = conj_span(&kind);
        }
        if vertex.state == State::Done && vertex.forward.is_none() && vertex.alts.is_none() {
            // A conjunct arriving late (from a comprehension after the vertex was already
            // looked at): process it on the next evaluation.
            vertex.state = State::New;
        }
        vertex.conjs.push(Conj {
            kind,
            env,
            close,
            grp,
            derived,
        });
    }

    /// A new list vertex whose elements unify with `items`.
    pub fn list_of(&mut self, items: Vec<VId>, span: Span) -> VId {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(
            t,
            ConjKind::ListOf(Rc::new(items), span),
            0,
            Close::Open,
            0,
            false,
        );
        t
    }

    /// A new list vertex of `atoms`, made only while the budget lasts: a builtin's list can be
    /// far larger than the steps that built its input (a string costs a step per 64 bytes, and
    /// its runes are a vertex each).
    pub fn atom_list(&mut self, atoms: impl IntoIterator<Item = Atom>, span: Span) -> VId {
        let mut items = Vec::new();
        for atom in atoms {
            if self.over_budget() {
                break;
            }
            items.push(self.atom_vertex(atom, span));
        }
        self.list_of(items, span)
    }

    /// A new struct vertex with the given fields.
    pub fn struct_of(&mut self, fields: Vec<(Sym, VId)>, span: Span) -> VId {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(
            t,
            ConjKind::StructOf(Rc::new(fields), span),
            0,
            Close::Open,
            0,
            false,
        );
        t
    }

    /// A new vertex holding one atom.
    pub fn atom_vertex(&mut self, atom: Atom, span: Span) -> VId {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(
            t,
            ConjKind::Atom(Box::new((atom, span))),
            0,
            Close::Open,
            0,
            false,
        );
        t
    }

    /// Builds vertices from JSON data (builtin results).
    pub fn json_vertex(&mut self, json: &serde_json::Value, span: Span) -> VId {
        match json {
            serde_json::Value::Object(map) => {
                let mut fields = Vec::new();
                for (key, value) in map {
                    // Decoded text can hold a value per byte or two, more than its steps.
                    if self.over_budget() {
                        break;
                    }
                    let sym = self.intern(key);
                    let child = self.json_vertex(value, span);
                    fields.push((sym, child));
                }
                self.struct_of(fields, span)
            }
            serde_json::Value::Array(items) => {
                let mut elems = Vec::new();
                for item in items {
                    if self.over_budget() {
                        break;
                    }
                    elems.push(self.json_vertex(item, span));
                }
                self.list_of(elems, span)
            }
            scalar => self.atom_vertex(json_atom(scalar), span),
        }
    }
}

fn conj_span(kind: &ConjKind<'_>) -> Span {
    match kind {
        ConjKind::Expr(e) => e.span(),
        ConjKind::Body(lit) => lit.span,
        ConjKind::File(file) => file.span,
        ConjKind::Atom(atom) => atom.1,
        ConjKind::Validator(validator) => validator.1,
        ConjKind::Json(_, s)
        | ConjKind::Ref(_, s)
        | ConjKind::StructOf(_, s)
        | ConjKind::ListOf(_, s)
        | ConjKind::Kinds(_, s)
        | ConjKind::Or(_, s) => *s,
    }
}

/// The steps an error kept or copied costs: one, and one per [`BYTES_PER_STEP`] of its message,
/// path and positions.
pub(super) fn error_steps(error: &Error) -> u64 {
    let bytes = error.message.len()
        + error.path.iter().map(String::len).sum::<usize>()
        + std::mem::size_of_val(error.spans.as_slice());
    1 + (bytes / BYTES_PER_STEP) as u64
}
