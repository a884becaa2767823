//! The unification loop: a vertex's conjuncts processed one by one (expressions, references
//! whose conjuncts are copied, merged results), within the depth and budget limits, before
//! disjunctions, comprehensions and the finish.

use smallvec::SmallVec;
use std::rc::Rc;

use crate::ast::{BinaryOp, Expr, UnaryOp};
use crate::exported::KindSet;
use crate::span::Span;
use crate::{Error, ErrorKind};

use super::{
    Close, Conj, ConjKind, Engine, EnvId, FieldKind, MAX_EVAL_DEPTH, MAX_TREE_DEPTH, R,
    STACK_RED_ZONE, STACK_SEGMENT, State, VId, is_definition,
};

impl<'a> Engine<'a> {
    /// Evaluates `v` one level deep: its own value, its arcs' conjuncts (not their values),
    /// comprehensions, disjunctions and closedness.
    #[inline]
    pub fn eval_vertex(&mut self, v: VId) {
        if self.v(v).state != State::New {
            return;
        }
        // Evaluation recurses through references; grow the stack on demand instead of
        // overflowing it (rayon workers have 2 MiB).
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || self.eval_vertex_inner(v));
    }

    fn eval_vertex_inner(&mut self, v: VId) {
        if self.stop_over_budget(v) {
            return;
        }
        if self.v(v).depth > MAX_TREE_DEPTH {
            let span = self.v(v).span;
            let error = self.err(v, ErrorKind::Cycle, "structural cycle", vec![span]);
            self.add_error(v, error);
            self.vm(v).state = State::Done;
            return;
        }
        if self.depth > MAX_EVAL_DEPTH {
            let span = self.v(v).span;
            let error = self.err(
                v,
                ErrorKind::Cycle,
                "evaluation too deep (reference cycle?)",
                vec![span],
            );
            self.add_error(v, error);
            self.vm(v).state = State::Done;
            return;
        }
        self.depth += 1;
        self.vm(v).state = State::Running;
        loop {
            loop {
                if self.stop_over_budget(v) {
                    self.depth -= 1;
                    return;
                }
                // One lookup of the vertex per conjunct (processing it may add more).
                let vertex = &mut self.vs[v as usize];
                let Some(conj) = vertex.conjs.get(vertex.cursor) else {
                    break;
                };
                // Most conjuncts are expressions: processed without cloning the conjunct (a
                // call matching every kind).
                if let ConjKind::Expr(expr) = conj.kind {
                    let (env, close, grp) = (conj.env, conj.close, conj.grp);
                    vertex.cursor += 1;
                    self.process_expr(v, expr, env, close, grp);
                    continue;
                }
                let conj = conj.clone();
                vertex.cursor += 1;
                self.process_conj(v, conj);
            }
            if !self.v(v).disjs().is_empty() {
                self.expand_disjunctions(v);
                self.depth -= 1;
                self.vm(v).state = State::Done;
                return;
            }
            let pending = self.vm(v).take_pending();
            if pending.is_empty() {
                break;
            }

            // In source order, as a later comprehension may test what an earlier one adds
            // (`if x.a != _|_ {...}` after `if c {x: a: 1}`). The fields an item inserts move
            // the insertion point of every later item at or after its own.
            let mut inserted: SmallVec<[(usize, usize); 4]> = SmallVec::new();
            for item in pending {
                let pos = item.pos();
                let shift: usize = inserted
                    .iter()
                    .filter(|(at, _)| *at <= pos)
                    .map(|(_, n)| n)
                    .sum();
                let before = self.v(v).arcs.len();
                self.process_pending(v, item.at(pos.saturating_add(shift)));
                let added = self.v(v).arcs.len().saturating_sub(before);
                inserted.push((pos, added));
            }
        }
        self.finish(v);
        self.depth -= 1;
        if self.v(v).state == State::Running {
            self.vm(v).state = State::Done;
        }
    }

    /// Over budget, `v` ends in the budget error (no value of the evaluation is used then,
    /// but nothing half-evaluated may look clean either).
    fn stop_over_budget(&mut self, v: VId) -> bool {
        if !self.over_budget() {
            return false;
        }
        let span = self.v(v).span;
        if let Some(error) = self.meter.error(span) {
            let error = self.relocate(v, error);
            self.add_error(v, error);
        }
        self.vm(v).state = State::Done;
        true
    }

    fn process_conj(&mut self, v: VId, conj: Conj<'a>) {
        let Conj {
            kind,
            env,
            close,
            grp,
            ..
        } = conj;
        match kind {
            ConjKind::Expr(expr) => self.process_expr(v, expr, env, close, grp),
            ConjKind::Body(lit) => self.process_decls(v, &lit.decls, lit.span, env, close, grp),
            ConjKind::File(file) => self.process_decls(v, &file.decls, file.span, env, close, grp),
            ConjKind::Json(json, span) => self.process_json(v, json, span),
            ConjKind::Ref(target, span) => self.process_ref(v, target, span, close, grp),
            ConjKind::Atom(atom) => {
                let (atom, span) = *atom;
                if let Err(c) = self.vm(v).shape.add_atom(atom, span) {
                    self.conflict(v, c);
                }
            }
            ConjKind::Kinds(kinds, span) => {
                if let Err(c) = self.vm(v).shape.add_kinds(kinds, span) {
                    self.conflict(v, c);
                }
            }
            ConjKind::Validator(validator) => {
                let (validator, span) = *validator;
                if let Err(c) = self.vm(v).shape.add_validator(validator, span) {
                    self.conflict(v, c);
                }
            }
            ConjKind::Or(items, span) => {
                self.vm(v).rare_mut().disjs.push(Conj {
                    kind: ConjKind::Or(items, span),
                    env,
                    close,
                    grp,
                    derived: false,
                });
            }
            ConjKind::StructOf(arcs, span) => {
                self.mark_struct(v, span);
                for (sym, target) in arcs.iter() {
                    let arc = self.arc(v, *sym);
                    let vertex = self.vm(arc);
                    vertex.field = vertex.field.max(FieldKind::Regular);
                    self.add_conj(
                        arc,
                        ConjKind::Ref(*target, span),
                        env,
                        Close::Open,
                        0,
                        false,
                    );
                }
            }
            ConjKind::ListOf(elems, span) => {
                let n = elems.len();
                self.list_literal(v, span, n, true);
                for (i, target) in elems.iter().enumerate() {
                    let elem = self.list_elem(v, i);
                    self.add_conj(
                        elem,
                        ConjKind::Ref(*target, span),
                        env,
                        Close::Open,
                        0,
                        false,
                    );
                }
            }
        }
    }

    /// Gives an error the path of `v` if it has none (errors from sub-evaluations).
    #[inline]
    pub(super) fn relocate(&self, v: VId, mut error: Error) -> Error {
        error.path = self.path(v);
        error
    }

    fn process_expr(&mut self, v: VId, expr: &'a Expr, env: EnvId, close: Close, grp: u32) {
        match expr {
            Expr::Paren(inner, _) => self.process_expr(v, inner, env, close, grp),
            Expr::Binary {
                op: BinaryOp::Unify,
                lhs,
                rhs,
                ..
            } => {
                self.process_expr(v, lhs, env, close, grp);
                self.process_expr(v, rhs, env, close, grp);
            }
            Expr::Binary {
                op: BinaryOp::Disjunction,
                ..
            }
            | Expr::Unary {
                op: UnaryOp::Default,
                ..
            } => {
                self.vm(v).rare_mut().disjs.push(Conj {
                    kind: ConjKind::Expr(expr),
                    env,
                    close,
                    grp,
                    derived: false,
                });
            }
            Expr::Struct(lit) => self.process_decls(v, &lit.decls, lit.span, env, close, grp),
            Expr::List(lit) => self.process_list(v, lit, env, close),
            Expr::Top(_) => {}
            Expr::Bottom(span) => {
                let error = self.err(
                    v,
                    ErrorKind::Conflict,
                    "explicit error (_|_ literal) in source",
                    vec![*span],
                );
                self.add_error(v, error);
            }
            Expr::Ident(_) | Expr::Selector { .. } | Expr::Index { .. } => {
                let is_def = match expr {
                    Expr::Ident(ident) => is_definition(&ident.name),
                    Expr::Selector { label, .. } => is_definition(label),
                    _ => false,
                };
                let r = self.eval_expr(expr, env);
                let saved = self.ref_in_definition;
                self.ref_in_definition = is_def && close == Close::Deep;
                let close = if is_def { Close::Deep } else { close };
                self.merge_r(v, r, expr.span(), env, close, grp);
                self.ref_in_definition = saved;
            }
            Expr::Call { func, args, span } if is_ident(func, "close") => {
                if let [arg] = args.as_slice() {
                    let close = if close == Close::Deep {
                        Close::Deep
                    } else {
                        Close::Shallow
                    };
                    self.process_expr(v, arg, env, close, grp);
                } else {
                    let error = self.err(
                        v,
                        ErrorKind::Builtin,
                        "close: expected 1 argument",
                        vec![*span],
                    );
                    self.add_error(v, error);
                }
            }
            Expr::Call { func, args, span } if is_ident(func, "and") => {
                let r = match args.as_slice() {
                    [arg] => self.eval_expr(arg, env),
                    _ => R::Err(Error::new(
                        ErrorKind::Builtin,
                        "and: expected 1 argument",
                        *span,
                    )),
                };
                match self.list_items(r, *span) {
                    Ok(items) => {
                        for item in items {
                            self.add_conj(v, ConjKind::Ref(item, *span), env, close, grp, true);
                        }
                    }
                    Err(error) => {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                    }
                }
            }
            _ => {
                let r = self.eval_expr(expr, env);
                self.merge_r(v, r, expr.span(), env, close, grp);
            }
        }
    }

    /// Unifies an expression result into `v`.
    fn merge_r(&mut self, v: VId, r: R, span: Span, env: EnvId, close: Close, grp: u32) {
        match r {
            R::Atom(atom) => {
                if let Err(c) = self.vm(v).shape.add_atom(atom, span) {
                    self.conflict(v, c);
                }
            }
            R::V(target) => self.process_ref(v, target, span, close, grp),
            R::Kinds(kinds) => {
                if let Err(c) = self.vm(v).shape.add_kinds(kinds, span) {
                    self.conflict(v, c);
                }
            }
            R::Valid(validator) => {
                if let Err(c) = self.vm(v).shape.add_validator(validator, span) {
                    self.conflict(v, c);
                }
            }
            R::Top => {}
            R::Err(error) => {
                let error = self.relocate(v, error);
                self.add_error(v, error);
            }
            R::Pkg(name) | R::Func(name) => {
                let error = self.err(
                    v,
                    ErrorKind::Unsupported,
                    format!("unsupported: {name} used as a value"),
                    vec![span],
                );
                self.add_error(v, error);
            }
        }
        let _ = env;
    }

    /// Unifies the vertex `target` into `v` by copying its conjuncts.
    fn process_ref(&mut self, v: VId, target: VId, span: Span, close: Close, grp: u32) {
        if target == v {
            return;
        }
        let in_definition = std::mem::take(&mut self.ref_in_definition);
        // A reference to an ancestor makes the value contain itself.
        let mut ancestor = self.v(v).parent;
        while let Some(a) = ancestor {
            if a == target || self.v(a).origin == Some(target) {
                if self.v(v).field != FieldKind::Optional {
                    let error = self.err(v, ErrorKind::Cycle, "structural cycle", vec![span]);
                    self.add_error(v, error);
                }
                return;
            }
            ancestor = self.v(a).parent;
        }
        // A vertex already reduced to a scalar: take its value directly.
        let t = self.v(target);
        if t.state == State::Done
            && t.forward.is_none()
            && t.alts.is_none()
            && t.arcs.is_empty()
            && t.list.is_none()
            && !t.is_struct
            && !t.struct_hint
        {
            let shape = t.shape.clone();
            let errors = t.errors.clone();
            for error in errors {
                self.add_error(v, error);
            }
            if let Some((atom, aspan)) = shape.atom {
                if let Err(c) = self.vm(v).shape.add_atom(atom, aspan) {
                    self.conflict(v, c);
                }
            } else if shape.kinds != KindSet::TOP
                && let Err(c) = self
                    .vm(v)
                    .shape
                    .add_kinds(shape.kinds, shape.kind_src.map_or(span, |(_, s)| s))
            {
                self.conflict(v, c);
            }
            for (validator, vspan) in shape.validators {
                if let Err(c) = self.vm(v).shape.add_validator(validator, vspan) {
                    self.conflict(v, c);
                }
            }
            return;
        }
        // The conjuncts are copied one at a time below, by index, instead of collected first:
        // only `v` changes while they are added, and `v` is not `target`.
        let n_conjs = t.conjs.len();
        if t.conjs.iter().all(|c| c.derived) && t.state == State::Done {
            // Evaluated values without conjuncts of their own: results of `or()`.
            if let Some(next) = t.forward {
                self.process_ref(v, next, span, close, grp);
            } else if let Some(alts) = t.alts.clone() {
                let items = alts.into_iter().map(|(a, _)| a).collect();
                self.vm(v).rare_mut().disjs.push(Conj {
                    kind: ConjKind::Or(Rc::new(items), span),
                    env: 0,
                    close,
                    grp,
                    derived: false,
                });
            }
            return;
        }
        let mut remap: Vec<(u32, u32)> = Vec::new();
        let shared = if close != Close::Open && grp == 0 {
            let g = self.new_group(v, true);
            self.mark_in_definition(v, g, in_definition);
            g
        } else {
            grp
        };
        for index in 0..n_conjs {
            let conj = &self.v(target).conjs[index];
            if conj.derived {
                continue;
            }
            let conj = conj.clone();
            let new_close = match (close, conj.close) {
                (Close::Deep, _) | (_, Close::Deep) => Close::Deep,
                (Close::Shallow, _) | (_, Close::Shallow) => Close::Shallow,
                _ => Close::Open,
            };
            let new_grp = if shared != 0 {
                shared
            } else if conj.close != Close::Open || conj.grp != 0 {
                let key = if conj.grp != 0 { conj.grp } else { u32::MAX };
                if let Some((_, g)) = remap.iter().find(|(k, _)| *k == key) {
                    *g
                } else {
                    let closed = conj.close != Close::Open
                        || self
                            .v(target)
                            .groups()
                            .get(conj.grp as usize - 1)
                            .is_some_and(|g| g.closed);
                    let g = self.new_group(v, closed);
                    self.mark_in_definition(v, g, in_definition);
                    remap.push((key, g));
                    g
                }
            } else {
                0
            };
            self.add_conj(v, conj.kind, conj.env, new_close, new_grp, true);
        }
    }
}

fn is_ident(expr: &Expr, name: &str) -> bool {
    matches!(expr, Expr::Ident(ident) if ident.name == name)
}
