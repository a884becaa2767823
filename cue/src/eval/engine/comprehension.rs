//! Comprehensions and dynamic fields, which run once the vertex's other conjuncts are
//! processed: their clauses (`for`, `if`, `let`) and the fields they add.

use smallvec::SmallVec;

use crate::ast::Clause;
use crate::eval::val::Atom;
use crate::{Error, ErrorKind};

use super::{
    Close, ConjKind, Engine, EnvId, EnvKind, FieldKind, Pending, VId, is_definition, is_hidden,
    quoted_label_error,
};

/// The environments a comprehension's clauses produce, one per body: an `if` gives at most
/// one, and most `for`s over a template's data only a few.
type ClauseEnvs = SmallVec<[EnvId; 4]>;

impl<'a> Engine<'a> {
    pub(super) fn process_pending(&mut self, v: VId, pending: Pending<'a>) {
        match pending {
            Pending::Comprehension(comp, env, close, grp, pos) => {
                match self.run_clauses(&comp.clauses, env) {
                    Err(error) if error.kind == ErrorKind::Incomplete => {
                        let error = self.relocate(v, error);
                        if !self.v(v).incomplete.contains(&error) {
                            self.vm(v).incomplete.push(error);
                        }
                    }
                    Ok(envs) => {
                        let arcs_before = self.v(v).arcs.len();
                        // New arcs go at `pos`, or at the end when it is past the arcs.
                        let first_new = pos.min(arcs_before);
                        let mut pos = pos;
                        for env in envs {
                            // Processed right away so its fields take the comprehension's
                            // place in the field order.
                            let saved = self.insert_at.replace((v, pos));
                            self.process_decls(
                                v,
                                &comp.body.decls,
                                comp.body.span,
                                env,
                                close,
                                grp,
                            );
                            if let Some((_, p)) = self.insert_at {
                                pos = p;
                            }
                            self.insert_at = saved;
                        }
                        let n_new = self.v(v).arcs.len() - arcs_before;
                        for index in first_new..first_new + n_new {
                            if let Some(&(_, arc)) = self.v(v).arcs.get(index) {
                                self.vm(arc).from_comprehension = true;
                            }
                        }
                    }
                    Err(error) => {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                    }
                }
            }
            Pending::Dynamic(field, expr, env, close, grp, pos) => {
                let r = self.eval_expr(expr, env);
                match self.concrete(r, expr.span()) {
                    Ok(Atom::Str(name)) => {
                        if let Some(error) = quoted_label_error(&name, expr.span()) {
                            let error = self.relocate(v, error);
                            self.add_error(v, error);
                            return;
                        }
                        let sym = self.intern(&name);
                        let saved = self.insert_at.replace((v, pos));
                        self.add_field_named(v, sym, field, env, close, grp);
                        self.insert_at = saved;
                    }
                    Ok(other) => {
                        let message = match other {
                            Atom::Int(_) => "integer fields not supported".to_owned(),
                            other => format!(
                                "invalid label {}: label must be a string",
                                other.cue_text()
                            ),
                        };
                        let error = self.err(v, ErrorKind::Conflict, message, vec![expr.span()]);
                        self.add_error(v, error);
                    }
                    Err(error) => {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                    }
                }
            }
        }
    }

    /// Runs comprehension clauses, returning one environment per produced body.
    #[inline]
    pub(super) fn run_clauses(
        &mut self,
        clauses: &'a [Clause],
        env: EnvId,
    ) -> Result<ClauseEnvs, Error> {
        let mut out = ClauseEnvs::new();
        self.run_clauses_into(clauses, env, &mut out)?;
        Ok(out)
    }

    fn run_clauses_into(
        &mut self,
        clauses: &'a [Clause],
        env: EnvId,
        out: &mut ClauseEnvs,
    ) -> Result<(), Error> {
        let Some((first, rest)) = clauses.split_first() else {
            out.push(env);
            return Ok(());
        };
        match first {
            Clause::If { condition, .. } => {
                let r = self.eval_expr(condition, env);
                match self.concrete(r, condition.span())? {
                    Atom::Bool(true) => self.run_clauses_into(rest, env, out),
                    Atom::Bool(false) => Ok(()),
                    other => Err(Error::new(
                        ErrorKind::Conflict,
                        format!("invalid condition {}: expected bool", other.cue_text()),
                        condition.span(),
                    )),
                }
            }
            Clause::Let(lc) => {
                let let_label = self.intern_ast(&lc.name.name);
                let vertex = self.new_vertex(None, let_label);
                self.vm(vertex).field = FieldKind::Regular;
                self.add_conj(
                    vertex,
                    ConjKind::Expr(&lc.value),
                    env,
                    Close::Open,
                    0,
                    false,
                );
                let env = self.new_env(
                    Some(env),
                    EnvKind::Bind {
                        name: &lc.name.name,
                        vertex,
                    },
                );
                self.run_clauses_into(rest, env, out)
            }
            Clause::For {
                key,
                value,
                source,
                span,
            } => {
                let r = self.eval_expr(source, env);
                let src = self.vertex_of(r, source.span())?;
                let src = self.concrete_vertex(src, *span)?;
                let items = self.range_items(src, source.span())?;
                for (k, item) in items {
                    if let Some(error) = self.meter.error(*span) {
                        return Err(error);
                    }
                    let mut env2 = env;
                    if let Some(key) = key {
                        let key_label = self.intern_ast(&key.name);
                        let kv = self.new_vertex(None, key_label);
                        self.vm(kv).field = FieldKind::Regular;
                        self.add_conj(
                            kv,
                            ConjKind::Atom(Box::new((k, key.span))),
                            env,
                            Close::Open,
                            0,
                            false,
                        );
                        env2 = self.new_env(
                            Some(env2),
                            EnvKind::Bind {
                                name: &key.name,
                                vertex: kv,
                            },
                        );
                    }
                    env2 = self.new_env(
                        Some(env2),
                        EnvKind::Bind {
                            name: &value.name,
                            vertex: item,
                        },
                    );
                    self.run_clauses_into(rest, env2, out)?;
                }
                Ok(())
            }
        }
    }

    /// What a `for` clause ranges over in `src`: a list's elements by index, or a struct's
    /// regular fields by label (hidden fields and definitions left out); anything else is an
    /// error at `source_span`.
    fn range_items(
        &mut self,
        src: VId,
        source_span: crate::Span,
    ) -> Result<Vec<(Atom, VId)>, Error> {
        let items: Vec<(Atom, VId)> = if let Some(list) = &self.v(src).list {
            list.elems
                .iter()
                .enumerate()
                .map(|(i, e)| (Atom::Int(i as i64), *e))
                .collect()
        } else if self.v(src).is_struct || self.v(src).struct_hint {
            let arcs = self.ordered_arcs(src);
            let mut items = Vec::with_capacity(arcs.len());
            for (sym, arc) in arcs {
                // The key shares the symbol's text (no string copied per item).
                let label = self.sym_text(sym);
                if is_hidden(&label) || is_definition(&label) {
                    continue;
                }
                if self.v(arc).field != FieldKind::Regular {
                    continue;
                }
                items.push((Atom::Str(label), arc));
            }
            items
        } else {
            let text = self.v(src).shape.constraint_text();
            let kind = if self.v(src).shape.atom.is_some() {
                ErrorKind::Conflict
            } else {
                ErrorKind::Incomplete
            };
            return Err(Error::new(
                kind,
                format!("cannot range over {text}"),
                source_span,
            ));
        };
        Ok(items)
    }
}
