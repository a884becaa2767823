//! Expressions in value position: identifiers, predeclared types, selectors and indices, and
//! the arcs they look up.

use std::rc::Rc;

use crate::ast::{BinaryOp, Expr};
use crate::eval::val::{Atom, BoundOp, Validator, parse_number};
use crate::exported::KindSet;
use crate::span::Span;
use crate::{Error, ErrorKind, ast};

use super::symbols::EMPTY_SYM;
use super::{
    Close, ConjKind, Engine, EnvId, FieldKind, R, Resolved, STACK_RED_ZONE, STACK_SEGMENT, State,
    Sym, VId,
};

impl<'a> Engine<'a> {
    pub fn eval_expr(&mut self, expr: &'a Expr, env: EnvId) -> R {
        // A leaf (literal or identifier) uses a bounded amount of stack: whatever it evaluates
        // further (a referenced vertex, a label expression) goes through `eval_vertex` or
        // `eval_expr` again, which check. So leaves (~60 % of the expressions the render bench
        // evaluates) skip the stack check (a thread-local read and a call each).
        let leaf = match expr {
            Expr::Null(_)
            | Expr::Bool(..)
            | Expr::Number { .. }
            | Expr::Top(_)
            | Expr::Ident(_) => true,
            Expr::String { parts, .. } => {
                matches!(parts.as_slice(), [ast::StringPart::Lit(_)] | [])
            }
            _ => false,
        };
        if leaf {
            return self.eval_expr_inner(expr, env);
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.eval_expr_inner(expr, env)
        })
    }

    fn eval_expr_inner(&mut self, expr: &'a Expr, env: EnvId) -> R {
        match expr {
            Expr::Null(_) => R::Atom(Atom::Null),
            Expr::Bool(b, _) => R::Atom(Atom::Bool(*b)),
            Expr::Number { text, kind, span } => {
                let key = (self.ast_uid, expr as *const Expr as usize);
                if let Some(atom) = self.constants.get(&key) {
                    return R::Atom(atom.clone());
                }
                match parse_number(text, *kind == ast::NumberKind::Int) {
                    Ok(atom) => {
                        self.constants.insert(key, atom.clone());
                        R::Atom(atom)
                    }
                    Err(message) => {
                        let kind = if message.starts_with("unsupported") {
                            ErrorKind::Unsupported
                        } else {
                            ErrorKind::Syntax
                        };
                        R::Err(Error::new(kind, message, *span))
                    }
                }
            }
            Expr::String { parts, .. }
                if matches!(parts.as_slice(), [ast::StringPart::Lit(_)] | []) =>
            {
                // Constant strings are shared: evaluated many times, allocated once per thread.
                let key = (self.ast_uid, expr as *const Expr as usize);
                if let Some(atom) = self.constants.get(&key) {
                    return R::Atom(atom.clone());
                }
                let text = match parts.as_slice() {
                    [ast::StringPart::Lit(text)] => text.as_str(),
                    _ => "",
                };
                let atom = Atom::Str(Rc::from(text));
                self.constants.insert(key, atom.clone());
                R::Atom(atom)
            }
            Expr::String { parts, span } => match self.interpolate(parts, env, *span) {
                Ok(s) => R::Atom(Atom::Str(Rc::from(s.as_str()))),
                Err(e) => R::Err(e),
            },
            Expr::Bytes { parts, span } => match self.interpolate(parts, env, *span) {
                Ok(s) => R::Atom(Atom::Bytes(Rc::from(s.as_bytes()))),
                Err(e) => R::Err(e),
            },
            Expr::Top(_) => R::Top,
            Expr::Bottom(span) => R::Err(Error::new(
                ErrorKind::Conflict,
                "explicit error (_|_ literal) in source",
                *span,
            )),
            Expr::Paren(inner, _) => self.eval_expr(inner, env),
            Expr::Ident(ident) => self.eval_ident(ident, env),
            Expr::Selector {
                base,
                label,
                label_span,
                span,
            } => {
                let base_r = self.eval_expr(base, env);
                match base_r {
                    R::Pkg(pkg) => crate::eval::builtins::member(pkg, label, *span),
                    R::Err(e) => R::Err(e),
                    other => {
                        let sym = self.intern_ast(label);
                        self.select(other, sym, *label_span)
                    }
                }
            }
            Expr::Index { base, index, span } => {
                let base_r = self.eval_expr(base, env);
                if let R::Err(e) = base_r {
                    return R::Err(e);
                }
                let index_r = self.eval_expr(index, env);
                let index = match self.concrete(index_r, index.span()) {
                    Ok(atom) => atom,
                    Err(e) => return R::Err(e),
                };
                self.index(base_r, index, *span)
            }
            Expr::Slice { base, lo, hi, span } => {
                self.slice(base, lo.as_deref(), hi.as_deref(), env, *span)
            }
            Expr::Call { func, args, span } => self.call(func, args, env, *span),
            Expr::Unary { op, operand, span } => self.unary(*op, operand, env, *span),
            Expr::Binary {
                op: BinaryOp::Unify | BinaryOp::Disjunction,
                ..
            } => self.temp_vertex(expr, env),
            Expr::Binary { op, lhs, rhs, span } => self.binary(*op, lhs, rhs, env, *span),
            Expr::Struct(_) | Expr::List(_) => self.temp_vertex(expr, env),
        }
    }

    /// `base[index]` for an evaluated base and a concrete index.
    pub(super) fn index(&mut self, base: R, index: Atom, span: Span) -> R {
        match index {
            Atom::Str(s) => {
                let sym = self.intern(&s);
                self.select(base, sym, span)
            }
            Atom::Int(i) => self.index_list(base, i, span),
            other => R::Err(Error::new(
                ErrorKind::Conflict,
                format!("invalid index {}", other.cue_text()),
                span,
            )),
        }
    }

    /// Evaluates an expression into a fresh vertex.
    fn temp_vertex(&mut self, expr: &'a Expr, env: EnvId) -> R {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(t, ConjKind::Expr(expr), env, Close::Open, 0, false);
        self.eval_vertex(t);
        R::V(t)
    }

    fn eval_ident(&mut self, ident: &'a ast::Ident, env: EnvId) -> R {
        let resolved = self.resolve_ident(ident, env);
        self.ident_value(ident, resolved)
    }

    /// The value of `ident`, resolved to `resolved`.
    pub(super) fn ident_value(&mut self, ident: &'a ast::Ident, resolved: Resolved) -> R {
        match resolved {
            Resolved::Vertex(v) => R::V(v),
            Resolved::Field(v) => {
                // Only once the struct is complete is an optional field known to stay one
                // (a later conjunct may still make it regular).
                let parent_done = self
                    .v(v)
                    .parent
                    .is_some_and(|p| self.v(p).state == State::Done);
                if parent_done && self.v(v).field == FieldKind::Optional {
                    R::Err(Error::new(
                        ErrorKind::Incomplete,
                        format!("cannot reference optional field: {}", ident.name),
                        ident.span,
                    ))
                } else {
                    R::V(v)
                }
            }
            Resolved::Error(error) => R::Err(error),
            Resolved::Pkg(pkg) => R::Pkg(pkg),
            Resolved::Unsupported(what) if !what.is_empty() => R::Err(Error::new(
                ErrorKind::Unsupported,
                format!("unsupported: {what}"),
                ident.span,
            )),
            Resolved::Unsupported(_) => match ident.name.as_str() {
                "int" => R::Kinds(KindSet::INT),
                "float" => R::Kinds(KindSet::FLOAT),
                "number" => R::Kinds(KindSet::NUMBER),
                "string" => R::Kinds(KindSet::STRING),
                "bytes" => R::Kinds(KindSet::BYTES),
                "bool" => R::Kinds(KindSet::BOOL),
                "null" => R::Atom(Atom::Null),
                name if predeclared_range(name).is_some() => {
                    self.predeclared_type(name, ident.span)
                }
                "len" | "close" | "and" | "or" | "div" | "mod" | "quo" | "rem" => {
                    R::Func(crate::eval::builtins::predeclared(&ident.name))
                }
                _ => R::Err(Error::new(
                    ErrorKind::Reference,
                    format!("reference \"{}\" not found", ident.name),
                    ident.span,
                )),
            },
        }
    }

    /// A predeclared number type with a range (`uint8`, `int32`, `float64`, ...): its kind
    /// and its bounds, as a fresh vertex.
    fn predeclared_type(&mut self, name: &str, span: Span) -> R {
        let Some((kinds, lo, hi)) = predeclared_range(name) else {
            return R::Err(Error::new(
                ErrorKind::Reference,
                format!("reference \"{name}\" not found"),
                span,
            ));
        };
        let t = self.new_vertex(None, EMPTY_SYM);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(t, ConjKind::Kinds(kinds, span), 0, Close::Open, 0, false);
        for (op, bound) in [(BoundOp::Ge, lo), (BoundOp::Le, hi)] {
            if let Some(bound) = bound {
                let validator = Validator::Bound(op, bound);
                self.add_conj(
                    t,
                    ConjKind::Validator(Box::new((validator, span))),
                    0,
                    Close::Open,
                    0,
                    false,
                );
            }
        }
        self.eval_vertex(t);
        R::V(t)
    }

    /// `x.label` or `x["label"]`.
    fn select(&mut self, base: R, sym: Sym, span: Span) -> R {
        let base = match self.vertex_of(base, span) {
            Ok(v) => v,
            Err(e) => return R::Err(e),
        };
        let base = match self.concrete_vertex(base, span) {
            Ok(v) => v,
            Err(e) => return R::Err(e),
        };
        match self.lookup_arc(base, sym, span) {
            Ok(arc) => R::V(arc),
            Err(e) => R::Err(e),
        }
    }

    /// The arc `sym` of the evaluated vertex `base`, if it exists as a regular field.
    pub fn lookup_arc(&mut self, base: VId, sym: Sym, span: Span) -> Result<VId, Error> {
        let running = self.v(base).state == State::Running;
        if let Some(error) = self.v(base).errors.first() {
            return Err(error.clone());
        }
        match self.find_arc(base, sym) {
            Some(arc) => {
                let field = self.v(arc).field;
                if field == FieldKind::Optional {
                    let name = self.sym(sym).to_owned();
                    return Err(Error {
                        kind: ErrorKind::Incomplete,
                        message: format!("cannot reference optional field: {name}"),
                        spans: vec![span],
                        path: self.path(base),
                    });
                }
                Ok(arc)
            }
            None => {
                let name = self.sym(sym).to_owned();
                let vertex = self.v(base);
                let is_struct = vertex.is_struct || vertex.struct_hint || running;
                let message = if is_struct {
                    format!("undefined field: {name}")
                } else if vertex.list.is_some() {
                    format!("invalid selector {name} for list")
                } else if vertex.shape.atom.is_some() {
                    format!(
                        "invalid selector {name} for value {}",
                        vertex.shape.constraint_text()
                    )
                } else {
                    format!("undefined field: {name}")
                };
                let kind = if is_struct || vertex.shape.atom.is_none() {
                    ErrorKind::Incomplete
                } else {
                    ErrorKind::Reference
                };
                Err(Error {
                    kind,
                    message,
                    spans: vec![span],
                    path: self.path(base),
                })
            }
        }
    }
}

/// The kind and bounds of a predeclared number type (spec: "Predeclared identifiers").
///
/// Integers are 64-bit here, so `uint64`, `int64`, `int128` and `uint128` keep only the bounds
/// an `i64` can violate: every integer the evaluator can hold is within the others (larger
/// literals are rejected as unsupported when parsed).
fn predeclared_range(name: &str) -> Option<(KindSet, Option<Atom>, Option<Atom>)> {
    let int =
        |lo: i64, hi: Option<i64>| Some((KindSet::INT, Some(Atom::Int(lo)), hi.map(Atom::Int)));
    match name {
        "uint" | "uint64" | "uint128" => int(0, None),
        "uint8" => int(0, Some(255)),
        "uint16" => int(0, Some(65_535)),
        "uint32" => int(0, Some(4_294_967_295)),
        "rune" => int(0, Some(0x10_FFFF)),
        "int8" => int(-128, Some(127)),
        "int16" => int(-32_768, Some(32_767)),
        "int32" => int(-2_147_483_648, Some(2_147_483_647)),
        "int64" | "int128" => Some((KindSet::INT, None, None)),
        "float32" => Some((
            KindSet::NUMBER,
            Some(Atom::Float(-3.402_823_466_385_288_6e38)),
            Some(Atom::Float(3.402_823_466_385_288_6e38)),
        )),
        "float64" => Some((KindSet::NUMBER, None, None)),
        _ => None,
    }
}
