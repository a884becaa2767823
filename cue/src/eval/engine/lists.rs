//! Lists: list literals and their element types, reading a list's elements, indexing and
//! slicing.

use crate::ast::Expr;
use crate::eval::val::Atom;
use crate::exported::KindSet;
use crate::span::Span;
use crate::{Error, ErrorKind, ast};

use super::{Close, Conj, ConjKind, Engine, EnvId, FieldKind, R, VId};

impl<'a> Engine<'a> {
    /// Records a list literal of `n` elements (closed or open).
    pub(super) fn list_literal(&mut self, v: VId, span: Span, n: usize, closed: bool) {
        if let Err(c) = self.vm(v).shape.add_kinds(KindSet::LIST, span) {
            self.conflict(v, c);
            return;
        }
        let list = self.vm(v).list.get_or_insert_with(Box::default);
        // The elements follow: room for them at once.
        if list.elems.is_empty() {
            list.elems.reserve(n);
        }
        if closed {
            match list.closed_len {
                Some((len, _)) if len != n => {
                    let error = self.err(
                        v,
                        ErrorKind::Conflict,
                        format!("incompatible list lengths ({len} and {n})"),
                        vec![span],
                    );
                    self.add_error(v, error);
                }
                _ => list.closed_len = Some((n, span)),
            }
        }
    }

    pub(super) fn list_elem(&mut self, v: VId, i: usize) -> VId {
        if let Some(list) = &self.v(v).list
            && let Some(elem) = list.elems.get(i)
        {
            return *elem;
        }
        let sym = self.index_sym(i);
        let elem = self.new_vertex(Some(v), sym);
        self.vm(elem).field = FieldKind::Regular;
        let list = self.vm(v).list.get_or_insert_with(Box::default);
        list.elems.push(elem);
        elem
    }

    pub(super) fn process_list(&mut self, v: VId, lit: &'a ast::ListLit, env: EnvId, close: Close) {
        let child = Self::child_close(close);
        let mut index = 0;
        let mut elems: Vec<(usize, ConjKind<'a>, EnvId)> = Vec::new();
        for elem in &lit.elems {
            match elem {
                ast::ListElem::Expr(expr) => {
                    elems.push((index, ConjKind::Expr(expr), env));
                    index += 1;
                }
                ast::ListElem::Comprehension(comp) => match self.run_clauses(&comp.clauses, env) {
                    Ok(envs) => {
                        for env in envs {
                            elems.push((index, ConjKind::Body(&comp.body), env));
                            index += 1;
                        }
                    }
                    Err(error) => {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                    }
                },
            }
        }
        self.list_literal(v, lit.span, index, lit.ellipsis.is_none());
        for (i, kind, env) in elems {
            let elem = self.list_elem(v, i);
            self.add_conj(elem, kind, env, child, 0, false);
        }
        if let Some(Some(ty)) = &lit.ellipsis {
            let list = self.vm(v).list.get_or_insert_with(Box::default);
            list.types.push(Conj {
                kind: ConjKind::Expr(ty),
                env,
                close: child,
                grp: 0,
                derived: false,
            });
        }
    }

    pub(super) fn index_list(&mut self, base: R, i: i64, span: Span) -> R {
        let base = match self
            .vertex_of(base, span)
            .and_then(|v| self.concrete_vertex(v, span))
        {
            Ok(v) => v,
            Err(e) => return R::Err(e),
        };
        if let Some(error) = self.v(base).errors.first() {
            return R::Err(error.clone());
        }
        let Some(list) = &self.v(base).list else {
            return R::Err(Error::new(
                ErrorKind::Conflict,
                format!("invalid index {i} for {}", self.describe(base)),
                span,
            ));
        };
        match usize::try_from(i).ok().and_then(|i| list.elems.get(i)) {
            Some(elem) => R::V(*elem),
            None => R::Err(Error::new(
                ErrorKind::Incomplete,
                format!("index out of range [{i}] with length {}", list.elems.len()),
                span,
            )),
        }
    }

    pub(super) fn slice(
        &mut self,
        base: &'a Expr,
        lo: Option<&'a Expr>,
        hi: Option<&'a Expr>,
        env: EnvId,
        span: Span,
    ) -> R {
        let base_r = self.eval_expr(base, env);
        let bound = |this: &mut Self, e: Option<&'a Expr>| -> Result<Option<i64>, Error> {
            match e {
                None => Ok(None),
                Some(e) => {
                    let r = this.eval_expr(e, env);
                    match this.concrete(r, e.span())? {
                        Atom::Int(i) => Ok(Some(i)),
                        other => Err(Error::new(
                            ErrorKind::Conflict,
                            format!("invalid slice index {}", other.cue_text()),
                            e.span(),
                        )),
                    }
                }
            }
        };
        let (lo, hi) = match (bound(self, lo), bound(self, hi)) {
            (Ok(l), Ok(h)) => (l, h),
            (Err(e), _) | (_, Err(e)) => return R::Err(e),
        };
        let items = match self.list_items(base_r, span) {
            Ok(items) => items,
            Err(e) => return R::Err(e),
        };
        let n = items.len() as i64;
        let lo = lo.unwrap_or(0);
        let hi = hi.unwrap_or(n);
        if lo < 0 || hi > n || lo > hi {
            return R::Err(Error::new(
                ErrorKind::Conflict,
                format!("invalid slice index [{lo}:{hi}] with length {n}"),
                span,
            ));
        }
        R::V(self.list_of(items[lo as usize..hi as usize].to_vec(), span))
    }

    /// The elements of a list value.
    pub fn list_items(&mut self, r: R, span: Span) -> Result<Vec<VId>, Error> {
        let v = self.vertex_of(r, span)?;
        let v = self.concrete_vertex(v, span)?;
        if let Some(error) = self.v(v).errors.first() {
            return Err(error.clone());
        }
        match &self.v(v).list {
            Some(list) => Ok(list.elems.clone()),
            None => Err(Error::new(
                if self.v(v).shape.atom.is_some() || self.v(v).is_struct {
                    ErrorKind::Conflict
                } else {
                    ErrorKind::Incomplete
                },
                format!("cannot use {} as list", self.describe(v)),
                span,
            )),
        }
    }

    /// Whether the list value `v` is open (`[...T]`).
    /// The element constraint of an open list (`T` of `[...T]`, every such `T` unified), as a
    /// new evaluated vertex below the list; `None` without one. For the syntax-like export,
    /// which keeps it (KubeVela's patches apply `[...{...}]` to every element).
    pub fn list_element_constraint(&mut self, v: VId) -> Option<VId> {
        let v = self.deref(v);
        let types = self
            .v(v)
            .list
            .as_ref()
            .filter(|list| list.closed_len.is_none() && !list.types.is_empty())?
            .types
            .clone();
        let sym = self.intern("...");
        let constraint = self.new_vertex(Some(v), sym);
        self.vm(constraint).field = FieldKind::Regular;
        for ty in &types {
            self.add_conj(constraint, ty.kind.clone(), ty.env, ty.close, 0, false);
        }
        self.eval_vertex(constraint);
        Some(constraint)
    }

    pub fn list_is_open(&self, v: VId) -> bool {
        let v = self.deref(v);
        self.v(v)
            .list
            .as_ref()
            .is_some_and(|l| l.closed_len.is_none())
    }
}
