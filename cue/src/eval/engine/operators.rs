//! Operators and calls: interpolation, unary and binary operators with the arithmetic on
//! atoms, `exists` probes, KubeVela's legacy list arithmetic, and builtin calls.

use std::rc::Rc;

use crate::ast::{BinaryOp, Expr, UnaryOp};
use crate::eval::val::{Atom, BoundOp, Validator, compare, format_float};
use crate::span::Span;
use crate::{Error, ErrorKind, ast};

use super::symbols::EMPTY_SYM;
use super::{Close, ConjKind, Engine, EnvId, FieldKind, MAX_STRING_LEN, R, Resolved, State};

impl<'a> Engine<'a> {
    pub(super) fn interpolate(
        &mut self,
        parts: &'a [ast::StringPart],
        env: EnvId,
        span: Span,
    ) -> Result<String, Error> {
        let mut out = String::new();
        for part in parts {
            match part {
                ast::StringPart::Lit(s) => out.push_str(s),
                ast::StringPart::Interp(expr) => {
                    let r = self.eval_expr(expr, env);
                    match self.concrete(r, expr.span())? {
                        Atom::Str(s) => out.push_str(&s),
                        Atom::Int(i) => out.push_str(&i.to_string()),
                        Atom::Float(f) => out.push_str(&format_float(f)),
                        Atom::Bool(b) => out.push_str(&b.to_string()),
                        Atom::Bytes(b) => out.push_str(&String::from_utf8_lossy(&b)),
                        Atom::Null => {
                            return Err(Error::new(
                                ErrorKind::Conflict,
                                "invalid interpolation: cannot use null as string",
                                expr.span(),
                            ));
                        }
                    }
                }
            }
        }
        let _ = span;
        self.charge_bytes(out.len());
        Ok(out)
    }

    pub(super) fn unary(&mut self, op: UnaryOp, operand: &'a Expr, env: EnvId, span: Span) -> R {
        let r = self.eval_expr(operand, env);
        if op == UnaryOp::Default {
            return r;
        }
        let atom = match self.concrete(r, operand.span()) {
            Ok(atom) => atom,
            Err(e) => return R::Err(e),
        };
        let bad = |what: &str| {
            R::Err(Error::new(
                ErrorKind::Conflict,
                format!("invalid operation {what}{}", atom.cue_text()),
                span,
            ))
        };
        match op {
            UnaryOp::Neg => match atom {
                Atom::Int(i) => i
                    .checked_neg()
                    .map_or_else(|| overflow(span), |i| R::Atom(Atom::Int(i))),
                Atom::Float(f) => R::Atom(Atom::Float(-f)),
                _ => bad("-"),
            },
            UnaryOp::Pos => match atom {
                Atom::Int(_) | Atom::Float(_) => R::Atom(atom),
                _ => bad("+"),
            },
            UnaryOp::Not => match atom {
                Atom::Bool(b) => R::Atom(Atom::Bool(!b)),
                _ => bad("!"),
            },
            UnaryOp::Lt | UnaryOp::Le | UnaryOp::Gt | UnaryOp::Ge => {
                let bop = match op {
                    UnaryOp::Lt => BoundOp::Lt,
                    UnaryOp::Le => BoundOp::Le,
                    UnaryOp::Gt => BoundOp::Gt,
                    _ => BoundOp::Ge,
                };
                match atom {
                    Atom::Int(_) | Atom::Float(_) | Atom::Str(_) | Atom::Bytes(_) => {
                        R::Valid(Validator::Bound(bop, atom))
                    }
                    _ => bad(bop.text()),
                }
            }
            UnaryOp::Ne => R::Valid(Validator::NotEqual(atom)),
            UnaryOp::Match | UnaryOp::NotMatch => match atom {
                Atom::Str(s) => match self.regex(&s, span) {
                    Ok(re) => R::Valid(Validator::Match(re, op == UnaryOp::Match)),
                    Err(e) => R::Err(e),
                },
                _ => bad("=~"),
            },
            UnaryOp::Default => R::Top,
        }
    }

    /// Whether an expression evaluates without error (`x != _|_`).
    fn exists(&mut self, expr: &'a Expr, env: EnvId) -> bool {
        match self.probe(expr, env) {
            None => false,
            Some(R::Err(_)) => false,
            Some(R::V(v)) => {
                if self.v(v).state == State::Running {
                    return true;
                }
                self.eval_vertex(v);
                let v = self.deref(v);
                if !self.v(v).errors.is_empty() {
                    return false;
                }
                match self.default_of(v) {
                    Some(Ok(d)) => {
                        self.eval_vertex(d);
                        let d = self.deref(d);
                        self.v(d).errors.is_empty()
                    }
                    _ => true,
                }
            }
            Some(_) => true,
        }
    }

    /// Evaluates a selector chain for an existence check without building errors for a
    /// missing field (the common `if parameter.x != _|_`); `None` when it does not exist.
    fn probe(&mut self, expr: &'a Expr, env: EnvId) -> Option<R> {
        let (base, label, span) = match expr {
            Expr::Paren(inner, _) => return self.probe(inner, env),
            // An optional field without a regular declaration does not exist (yet).
            // Resolved once: the value is that of the same resolution.
            Expr::Ident(ident) => {
                return match self.resolve_ident(ident, env) {
                    Resolved::Field(v) if self.v(v).field == FieldKind::Optional => None,
                    resolved => Some(self.ident_value(ident, resolved)),
                };
            }
            Expr::Selector {
                base, label, span, ..
            } => (base, label.as_str(), *span),
            Expr::Index { base, index, span } => match index.as_ref() {
                Expr::String { parts, .. } => match parts.as_slice() {
                    [ast::StringPart::Lit(label)] => (base, label.as_str(), *span),
                    _ => return self.probe_index(base, index, env, *span),
                },
                _ => return self.probe_index(base, index, env, *span),
            },
            _ => return Some(self.eval_expr(expr, env)),
        };
        match self.probe(base, env)? {
            R::V(x) => {
                let x = self.concrete_vertex(x, span).ok()?;
                if !self.v(x).errors.is_empty() {
                    return None;
                }
                let sym = self.intern_ast(label);
                let arc = self.find_arc(x, sym)?;
                if self.v(arc).field == FieldKind::Optional {
                    return None;
                }
                Some(R::V(arc))
            }
            R::Pkg(_) => Some(self.eval_expr(expr, env)),
            _ => None,
        }
    }

    /// [`Engine::probe`] of `base[index]` with a computed index (`_delKeys[k] == _|_`): what
    /// evaluating it gives, except that a missing field is `None` instead of an error built
    /// (path, message) only to be dropped. Every error is `None` too, as [`Engine::exists`]
    /// treats them alike.
    fn probe_index(
        &mut self,
        base: &'a Expr,
        index: &'a Expr,
        env: EnvId,
        span: Span,
    ) -> Option<R> {
        let base_r = self.eval_expr(base, env);
        if let R::Err(_) = base_r {
            return None;
        }
        let index_r = self.eval_expr(index, env);
        let index = self.concrete(index_r, index.span()).ok()?;
        let Atom::Str(label) = index else {
            return Some(self.index(base_r, index, span));
        };
        // `select` without its errors.
        let x = self.vertex_of(base_r, span).ok()?;
        let x = self.concrete_vertex(x, span).ok()?;
        if !self.v(x).errors.is_empty() {
            return None;
        }
        let sym = self.intern(&label);
        let arc = self.find_arc(x, sym)?;
        if self.v(arc).field == FieldKind::Optional {
            return None;
        }
        Some(R::V(arc))
    }

    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        lhs: &'a Expr,
        rhs: &'a Expr,
        env: EnvId,
        span: Span,
    ) -> R {
        match op {
            BinaryOp::Eq | BinaryOp::Ne if is_bottom(rhs) || is_bottom(lhs) => {
                let other = if is_bottom(rhs) { lhs } else { rhs };
                let exists = self.exists(other, env);
                return R::Atom(Atom::Bool(if op == BinaryOp::Ne {
                    exists
                } else {
                    !exists
                }));
            }
            BinaryOp::And | BinaryOp::Or => {
                let l = self.eval_expr(lhs, env);
                let l = match self.concrete(l, lhs.span()) {
                    Ok(Atom::Bool(b)) => b,
                    Ok(other) => return bad_operand(op, &other, span),
                    Err(e) => return R::Err(e),
                };
                if op == BinaryOp::And && !l {
                    return R::Atom(Atom::Bool(false));
                }
                if op == BinaryOp::Or && l {
                    return R::Atom(Atom::Bool(true));
                }
                let r = self.eval_expr(rhs, env);
                return match self.concrete(r, rhs.span()) {
                    Ok(Atom::Bool(b)) => R::Atom(Atom::Bool(b)),
                    Ok(other) => bad_operand(op, &other, span),
                    Err(e) => R::Err(e),
                };
            }
            _ => {}
        }
        let l = self.eval_expr(lhs, env);
        let r = self.eval_expr(rhs, env);
        // Comparing a struct or list with null is allowed (and false for ==).
        if matches!(op, BinaryOp::Eq | BinaryOp::Ne) {
            let lnull = matches!(l, R::Atom(Atom::Null));
            let rnull = matches!(r, R::Atom(Atom::Null));
            if lnull != rnull {
                let other = if lnull { r.clone() } else { l.clone() };
                if let R::V(v) = other
                    && let Ok(v) = self.concrete_vertex(v, span)
                    && (self.v(v).is_struct || self.v(v).list.is_some())
                {
                    return R::Atom(Atom::Bool(op == BinaryOp::Ne));
                }
            }
        }
        if matches!(op, BinaryOp::Add | BinaryOp::Mul) && (self.is_list(&l) || self.is_list(&r)) {
            if self.legacy_list_arithmetic {
                return self.legacy_list_op(op, l, r, span);
            }
            return R::Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "{} of lists is superseded by list.{}; see https://cuelang.org/e/v0.11-list-arithmetic",
                    if op == BinaryOp::Add {
                        "Addition"
                    } else {
                        "Multiplication"
                    },
                    if op == BinaryOp::Add {
                        "Concat"
                    } else {
                        "Repeat"
                    }
                ),
                span,
            ));
        }
        let a = match self.concrete(l, lhs.span()) {
            Ok(a) => a,
            Err(e) => return R::Err(e),
        };
        let b = match self.concrete(r, rhs.span()) {
            Ok(b) => b,
            Err(e) => return R::Err(e),
        };
        match binary_atoms(op, &a, &b, span) {
            Ok(atom) => {
                if let Atom::Str(text) = &atom {
                    self.charge_bytes(text.len());
                }
                R::Atom(atom)
            }
            Err(e) => R::Err(e),
        }
    }

    /// `list + list` (concatenation) and `list * n` / `n * list` (repetition), as CUE before
    /// v0.11 and KubeVela's legacy-template upgrade compute them.
    fn legacy_list_op(&mut self, op: BinaryOp, l: R, r: R, span: Span) -> R {
        let items = if op == BinaryOp::Add {
            let left = match self.list_items(l, span) {
                Ok(items) => items,
                Err(e) => return R::Err(e),
            };
            match self.list_items(r, span) {
                Ok(right) => left.into_iter().chain(right).collect(),
                Err(e) => return R::Err(e),
            }
        } else {
            let (list, count) = if self.is_list(&l) { (l, r) } else { (r, l) };
            let items = match self.list_items(list, span) {
                Ok(items) => items,
                Err(e) => return R::Err(e),
            };
            let n = match self.concrete(count, span) {
                Ok(Atom::Int(n)) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                Ok(other) => {
                    return R::Err(Error::new(
                        ErrorKind::Conflict,
                        format!("cannot repeat a list {} times", other.cue_text()),
                        span,
                    ));
                }
                Err(e) => return R::Err(e),
            };
            if items.len().saturating_mul(n) > MAX_STRING_LEN {
                return R::Err(Error::new(
                    ErrorKind::Unsupported,
                    "unsupported: list repetition result too large",
                    span,
                ));
            }
            let mut out = Vec::with_capacity(items.len() * n);
            for _ in 0..n {
                out.extend(items.iter().copied());
            }
            out
        };
        R::V(self.list_of(items, span))
    }

    fn is_list(&mut self, r: &R) -> bool {
        if let R::V(v) = r {
            let v = *v;
            self.eval_vertex(v);
            let v = self.deref(v);
            return self.v(v).list.is_some();
        }
        false
    }

    pub(super) fn call(&mut self, func: &'a Expr, args: &'a [Expr], env: EnvId, span: Span) -> R {
        let f = match self.eval_expr(func, env) {
            R::Func(name) => name,
            R::Err(e) => return R::Err(e),
            _ => {
                return R::Err(Error::new(
                    ErrorKind::Conflict,
                    "cannot call non-function",
                    func.span(),
                ));
            }
        };
        if f == "close" || f == "and" || f == "or" {
            // Evaluated as a value of its own, through the conjunct machinery.
            return self.temp_call(func, args, env, span, f);
        }
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            values.push((self.eval_expr(arg, env), arg.span()));
        }
        crate::eval::builtins::call(self, f, values, span)
    }

    fn temp_call(
        &mut self,
        _func: &'a Expr,
        args: &'a [Expr],
        env: EnvId,
        span: Span,
        f: &'static str,
    ) -> R {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        match (f, args) {
            ("close", [arg]) => {
                self.add_conj(t, ConjKind::Expr(arg), env, Close::Shallow, 0, false)
            }
            ("and", [arg]) => {
                let r = self.eval_expr(arg, env);
                match self.list_items(r, span) {
                    Ok(items) => {
                        for item in items {
                            self.add_conj(t, ConjKind::Ref(item, span), env, Close::Open, 0, false);
                        }
                    }
                    Err(e) => return R::Err(e),
                }
            }
            ("or", [arg]) => {
                let r = self.eval_expr(arg, env);
                match self.list_items(r, span) {
                    Ok(items) => {
                        let mut alts = Vec::new();
                        for item in items {
                            self.eval_vertex(item);
                            if self.deep_errors(item, 0).is_empty() {
                                alts.push((self.deref(item), true));
                            }
                        }
                        match alts.len() {
                            0 => {
                                return R::Err(Error::new(
                                    ErrorKind::Conflict,
                                    "empty disjunction",
                                    span,
                                ));
                            }
                            1 => self.vm(t).forward = Some(alts[0].0),
                            _ => self.vm(t).alts = Some(alts),
                        }
                        self.vm(t).state = State::Done;
                        return R::V(t);
                    }
                    Err(e) => return R::Err(e),
                }
            }
            _ => {
                return R::Err(Error::new(
                    ErrorKind::Builtin,
                    format!("{f}: expected 1 argument"),
                    span,
                ));
            }
        }
        self.eval_vertex(t);
        R::V(t)
    }
}

fn is_bottom(expr: &Expr) -> bool {
    match expr {
        Expr::Bottom(_) => true,
        Expr::Paren(inner, _) => is_bottom(inner),
        _ => false,
    }
}

fn overflow(span: Span) -> R {
    R::Err(Error::new(
        ErrorKind::Unsupported,
        "unsupported: integer overflow (integers beyond 64 bits)",
        span,
    ))
}

fn bad_operand(op: BinaryOp, atom: &Atom, span: Span) -> R {
    R::Err(Error::new(
        ErrorKind::Conflict,
        format!(
            "invalid operand {} ('{}' requires bool)",
            atom.cue_text(),
            op_text(op)
        ),
        span,
    ))
}

fn op_text(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Disjunction => "|",
        BinaryOp::Unify => "&",
        BinaryOp::Or => "||",
        BinaryOp::And => "&&",
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        BinaryOp::Match => "=~",
        BinaryOp::NotMatch => "!~",
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
    }
}

/// Arithmetic, comparison and matching on concrete scalars.
pub fn binary_atoms(op: BinaryOp, a: &Atom, b: &Atom, span: Span) -> Result<Atom, Error> {
    let mismatch = || {
        Error::new(
            ErrorKind::Conflict,
            format!(
                "invalid operands {} and {} to '{}' (type {} and {})",
                a.cue_text(),
                b.cue_text(),
                op_text(op),
                crate::eval::val::kind_text(a.kind()),
                crate::eval::val::kind_text(b.kind())
            ),
            span,
        )
    };
    let ovf = || {
        Error::new(
            ErrorKind::Unsupported,
            "unsupported: integer overflow (integers beyond 64 bits)",
            span,
        )
    };
    match op {
        BinaryOp::Eq | BinaryOp::Ne => {
            let comparable = a.kind() == b.kind() || (a.as_f64().is_some() && b.as_f64().is_some());
            if !comparable && *a != Atom::Null && *b != Atom::Null {
                return Err(mismatch());
            }
            let eq = a.equals(b);
            Ok(Atom::Bool(if op == BinaryOp::Eq { eq } else { !eq }))
        }
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
            let ord = compare(a, b).ok_or_else(mismatch)?;
            Ok(Atom::Bool(match op {
                BinaryOp::Lt => ord.is_lt(),
                BinaryOp::Le => ord.is_le(),
                BinaryOp::Gt => ord.is_gt(),
                _ => ord.is_ge(),
            }))
        }
        BinaryOp::Match | BinaryOp::NotMatch => match (a, b) {
            (Atom::Str(s), Atom::Str(p)) => {
                let re = regex::Regex::new(p).map_err(|e| {
                    Error::new(
                        ErrorKind::Conflict,
                        format!("invalid regular expression: {e}"),
                        span,
                    )
                })?;
                Ok(Atom::Bool(re.is_match(s) == (op == BinaryOp::Match)))
            }
            _ => Err(mismatch()),
        },
        BinaryOp::Add => match (a, b) {
            (Atom::Int(x), Atom::Int(y)) => x.checked_add(*y).map(Atom::Int).ok_or_else(ovf),
            (Atom::Str(x), Atom::Str(y)) => Ok(Atom::Str(Rc::from(format!("{x}{y}").as_str()))),
            (Atom::Bytes(x), Atom::Bytes(y)) => {
                Ok(Atom::Bytes(Rc::from([&x[..], &y[..]].concat().as_slice())))
            }
            _ => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => Ok(Atom::Float(
                    crate::eval::decimal::arith(op, a, b).unwrap_or(x + y),
                )),
                _ => Err(mismatch()),
            },
        },
        BinaryOp::Sub => match (a, b) {
            (Atom::Int(x), Atom::Int(y)) => x.checked_sub(*y).map(Atom::Int).ok_or_else(ovf),
            _ => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => Ok(Atom::Float(
                    crate::eval::decimal::arith(op, a, b).unwrap_or(x - y),
                )),
                _ => Err(mismatch()),
            },
        },
        BinaryOp::Mul => match (a, b) {
            (Atom::Int(x), Atom::Int(y)) => x.checked_mul(*y).map(Atom::Int).ok_or_else(ovf),
            (Atom::Str(s), Atom::Int(n)) | (Atom::Int(n), Atom::Str(s)) => {
                let n = usize::try_from(*n).map_err(|_| mismatch())?;
                if s.len().saturating_mul(n) > MAX_STRING_LEN {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        "unsupported: string repetition result too large",
                        span,
                    ));
                }
                Ok(Atom::Str(Rc::from(s.repeat(n).as_str())))
            }
            _ => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => Ok(Atom::Float(
                    crate::eval::decimal::arith(op, a, b).unwrap_or(x * y),
                )),
                _ => Err(mismatch()),
            },
        },
        BinaryOp::Div => match (a.as_f64(), b.as_f64()) {
            (Some(_), Some(0.0)) => Err(Error::new(
                ErrorKind::Conflict,
                "failed arithmetic: division by zero",
                span,
            )),
            (Some(x), Some(y)) => Ok(Atom::Float(
                crate::eval::decimal::arith(op, a, b).unwrap_or(x / y),
            )),
            _ => Err(mismatch()),
        },
        BinaryOp::And | BinaryOp::Or | BinaryOp::Unify | BinaryOp::Disjunction => Err(mismatch()),
    }
}
