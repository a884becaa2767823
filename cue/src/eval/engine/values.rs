//! Reading values out of vertices: following forwards, defaults, concrete atoms, struct
//! fields in CUE's order, descriptions for messages, and compiled regexes.

use smallvec::SmallVec;
use std::rc::Rc;

use crate::eval::val::Atom;
use crate::exported::KindSet;
use crate::span::Span;
use crate::{Error, ErrorKind};

use super::symbols::EMPTY_SYM;
use super::{Close, ConjKind, Engine, FieldKind, R, State, Sym, VId, is_definition, is_hidden};

impl<'a> Engine<'a> {
    /// Arcs in (an approximation of) CUE v0.14's field order. A copy (callers evaluate while
    /// they iterate), on the stack for the usual struct of a few fields: every struct walked
    /// for a result copied its arcs into a heap vector (~70 K per 1,000 apps).
    pub fn ordered_arcs(&self, v: VId) -> SmallVec<[(Sym, VId); 8]> {
        let mut arcs: SmallVec<[(Sym, VId); 8]> = SmallVec::from_slice(&self.v(v).arcs);
        let has_comprehension_arcs = arcs.iter().any(|(_, arc)| self.v(*arc).from_comprehension);
        if !has_comprehension_arcs
            && arcs
                .windows(2)
                .all(|w| self.v(w[0].1).pos <= self.v(w[1].1).pos)
        {
            return arcs;
        }
        // Source order of the declarations (CUE v0.14 sorts fields topologically, which is
        // source order within a file); data fields keep their insertion order, last.
        arcs.sort_by_key(|(_, arc)| self.v(*arc).pos);
        if has_comprehension_arcs {
            // CUE's toposort chains a struct literal's own fields as one block placed at its
            // last field's position, and each comprehension's fields at their own: a
            // comprehension before that last field comes before all of the struct's own
            // fields (`{a: 1, if c {b: 2}, d: 3}` exports as `b, a, d`).
            let last_own = arcs
                .iter()
                .map(|(_, arc)| self.v(*arc))
                .filter(|arc| !arc.from_comprehension && arc.pos != u64::MAX)
                .map(|arc| arc.pos)
                .max();
            if let Some(last_own) = last_own {
                let is_early = |arc: VId| {
                    let arc = self.v(arc);
                    arc.from_comprehension && arc.pos < last_own
                };
                let mut reordered: SmallVec<[(Sym, VId); 8]> = arcs
                    .iter()
                    .copied()
                    .filter(|(_, arc)| is_early(*arc))
                    .collect();
                reordered.extend(arcs.iter().copied().filter(|(_, arc)| !is_early(*arc)));
                arcs = reordered;
            }
        }
        arcs
    }

    /// Follows forwarding (a disjunction resolved to one alternative).
    #[inline]
    pub fn deref(&self, mut v: VId) -> VId {
        while let Some(next) = self.v(v).forward {
            v = next;
        }
        v
    }

    /// The vertex to use where a single value is needed: forwarded, and the default of an
    /// unresolved disjunction.
    pub fn concrete_vertex(&mut self, v: VId, span: Span) -> Result<VId, Error> {
        self.eval_vertex(v);
        let v = self.deref(v);
        match self.default_of(v) {
            Some(Ok(d)) => {
                self.eval_vertex(d);
                Ok(self.deref(d))
            }
            Some(Err(())) => Err(Error {
                kind: ErrorKind::Incomplete,
                message: format!("incomplete value {}", self.describe(v)),
                spans: vec![span],
                path: self.path(v),
            }),
            None => Ok(v),
        }
    }

    /// For an unresolved disjunction, its default (or an error when there is none).
    #[inline]
    pub fn default_of(&self, v: VId) -> Option<Result<VId, ()>> {
        let alts = self.v(v).alts.as_ref()?;
        let defaults: Vec<VId> = alts.iter().filter(|(_, d)| *d).map(|(a, _)| *a).collect();
        if defaults.len() == 1 && alts.len() > 1 {
            Some(Ok(defaults[0]))
        } else {
            Some(Err(()))
        }
    }

    /// Short CUE text of a vertex's value for messages.
    pub fn describe(&self, v: VId) -> String {
        let v = self.deref(v);
        let vertex = self.v(v);
        if let Some(alts) = &vertex.alts {
            let parts: Vec<String> = alts
                .iter()
                .map(|(a, d)| {
                    let text = self.describe(*a);
                    if *d { format!("*{text}") } else { text }
                })
                .collect();
            return parts.join(" | ");
        }
        if vertex.list.is_some() {
            return "[...]".to_owned();
        }
        if vertex.is_struct {
            return "{...}".to_owned();
        }
        vertex.shape.constraint_text()
    }

    pub fn vertex_of(&mut self, r: R, span: Span) -> Result<VId, Error> {
        match r {
            R::V(v) => Ok(v),
            R::Err(e) => Err(e),
            R::Atom(atom) => Ok(self.atom_vertex(atom, span)),
            R::Kinds(kinds) => {
                let label = EMPTY_SYM;
                let t = self.new_vertex(None, label);
                self.add_conj(t, ConjKind::Kinds(kinds, span), 0, Close::Open, 0, false);
                Ok(t)
            }
            R::Valid(validator) => {
                let label = EMPTY_SYM;
                let t = self.new_vertex(None, label);
                self.add_conj(
                    t,
                    ConjKind::Validator(Box::new((validator, span))),
                    0,
                    Close::Open,
                    0,
                    false,
                );
                Ok(t)
            }
            R::Top => {
                let label = EMPTY_SYM;
                Ok(self.new_vertex(None, label))
            }
            R::Pkg(name) | R::Func(name) => Err(Error::new(
                ErrorKind::Unsupported,
                format!("unsupported: {name} used as a value"),
                span,
            )),
        }
    }

    /// The regular fields of a struct value.
    pub fn struct_fields(&mut self, r: R, span: Span) -> Result<Vec<(Sym, VId)>, Error> {
        let v = self.vertex_of(r, span)?;
        let v = self.concrete_vertex(v, span)?;
        if let Some(error) = self.v(v).errors.first() {
            return Err(error.clone());
        }
        if !(self.v(v).is_struct || self.v(v).struct_hint) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("cannot use {} as struct", self.describe(v)),
                span,
            ));
        }
        let arcs = self.ordered_arcs(v);
        Ok(arcs
            .into_iter()
            .filter(|(sym, arc)| {
                let label = self.sym(*sym);
                !is_hidden(label)
                    && !is_definition(label)
                    && self.v(*arc).field == FieldKind::Regular
            })
            .collect())
    }

    /// A concrete scalar from an expression result.
    pub fn concrete(&mut self, r: R, span: Span) -> Result<Atom, Error> {
        match r {
            R::Atom(atom) => Ok(atom),
            R::Err(e) => Err(e),
            R::V(v) => {
                if self.v(v).state == State::Running {
                    if let Some((atom, _)) = &self.v(v).shape.atom
                        && self.v(v).disjs().is_empty()
                    {
                        return Ok(atom.clone());
                    }
                    // Incomplete rather than Cycle: a value that refers back to itself
                    // before it is known is not an error Validate() reports (CUE neither).
                    return Err(Error {
                        kind: ErrorKind::Incomplete,
                        message: "cycle in reference".to_owned(),
                        spans: vec![span],
                        path: self.path(v),
                    });
                }
                let v = self.concrete_vertex(v, span)?;
                let vertex = self.v(v);
                if let Some(error) = vertex.errors.first() {
                    return Err(error.clone());
                }
                if let Some((atom, _)) = &vertex.shape.atom {
                    return Ok(atom.clone());
                }
                let (kind, message) = if vertex.list.is_some() || vertex.is_struct {
                    (
                        ErrorKind::Conflict,
                        format!("invalid operand {} (expected a scalar)", self.describe(v)),
                    )
                } else if vertex.alts.is_some() {
                    (
                        ErrorKind::Incomplete,
                        format!("incomplete value {}", self.describe(v)),
                    )
                } else if vertex.struct_hint && vertex.shape.kinds == KindSet::TOP {
                    (
                        ErrorKind::Conflict,
                        "invalid operand {...} (expected a scalar)".to_owned(),
                    )
                } else {
                    (
                        ErrorKind::Incomplete,
                        format!("incomplete value {}", vertex.shape.constraint_text()),
                    )
                };
                Err(Error {
                    kind,
                    message,
                    spans: vec![span],
                    path: self.path(v),
                })
            }
            R::Kinds(kinds) => Err(Error::new(
                ErrorKind::Incomplete,
                format!("incomplete value {}", crate::eval::val::kind_text(kinds)),
                span,
            )),
            R::Valid(validator) => Err(Error::new(
                ErrorKind::Incomplete,
                format!("incomplete value {}", validator.text()),
                span,
            )),
            R::Top => Err(Error::new(
                ErrorKind::Incomplete,
                "incomplete value _",
                span,
            )),
            R::Pkg(name) | R::Func(name) => Err(Error::new(
                ErrorKind::Unsupported,
                format!("unsupported: {name} used as a value"),
                span,
            )),
        }
    }

    pub fn regex(&mut self, pattern: &str, span: Span) -> Result<Rc<regex::Regex>, Error> {
        if let Some(re) = self.regexes.get(pattern) {
            return Ok(re.clone());
        }
        let re = regex::Regex::new(pattern).map_err(|e| {
            Error::new(
                ErrorKind::Conflict,
                format!("invalid regular expression {pattern:?}: {e}"),
                span,
            )
        })?;
        let re = Rc::new(re);
        self.regexes.insert(pattern.to_owned(), re.clone());
        Ok(re)
    }
}

pub fn json_atom(json: &serde_json::Value) -> Atom {
    match json {
        serde_json::Value::Null => Atom::Null,
        serde_json::Value::Bool(b) => Atom::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Atom::Int(i)
            } else if let Some(f) = n.as_f64() {
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    Atom::Int(f as i64)
                } else {
                    Atom::Float(f)
                }
            } else {
                Atom::Float(f64::NAN)
            }
        }
        serde_json::Value::String(s) => Atom::str(s),
        // Structured values are handled by the callers.
        _ => Atom::Null,
    }
}
