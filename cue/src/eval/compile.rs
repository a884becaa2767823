//! The compile-time checks CUE makes before evaluating, so that a file `cue export` rejects is
//! not exported here either: an import whose name no expression in the file uses ("imported and
//! not used"), and a default mark `*` that is not a term of a disjunction ("preference mark not
//! allowed at this position", as in `a: *1` or `(*1) & int`).

use crate::ast::{self, BinaryOp, Clause, Decl, Expr, Label, ListElem, StringPart, UnaryOp};
use crate::{Error, ErrorKind};

/// One error per import of `file` that no identifier in the file refers to.
pub fn unused(file: &ast::File) -> Vec<Error> {
    if file.imports.is_empty() {
        return Vec::new();
    }
    let mut used = Vec::new();
    for decl in &file.decls {
        visit_decl(decl, &mut |expr, _| {
            if let Expr::Ident(ident) = expr {
                used.push(ident.name.as_str());
            }
        });
    }
    file.imports
        .iter()
        .filter_map(|import| {
            let local = import
                .alias
                .as_ref()
                .map_or_else(|| default_name(&import.path), |a| a.name.as_str());
            if used.contains(&local) {
                return None;
            }
            let message = match &import.alias {
                Some(alias) => format!(
                    "imported and not used: \"{}\" as {}",
                    import.path, alias.name
                ),
                None => format!("imported and not used: \"{}\"", import.path),
            };
            Some(Error::new(ErrorKind::Reference, message, import.span))
        })
        .collect()
}

/// The name an import binds without an explicit one: the qualifier after `:`
/// (`"example.com/x:y"` binds `y`), else the last path element without its major version
/// (`"example.com/pkg@v0"` binds `pkg`).
pub fn default_name(path: &str) -> &str {
    if let Some((_, qualifier)) = path.rsplit_once(':') {
        return qualifier;
    }
    let last = path.rsplit('/').next().unwrap_or(path);
    last.split_once('@').map_or(last, |(name, _)| name)
}

/// One error per default mark `*` in `file` that is not a term of a disjunction.
pub fn misplaced_marks(file: &ast::File) -> Vec<Error> {
    let mut errors = Vec::new();
    for decl in &file.decls {
        visit_decl(decl, &mut |expr, disjunction_term| {
            if let Expr::Unary {
                op: UnaryOp::Default,
                span,
                ..
            } = expr
                && !disjunction_term
            {
                errors.push(Error::new(
                    ErrorKind::Syntax,
                    "preference mark not allowed at this position",
                    *span,
                ));
            }
        });
    }
    errors
}

/// Calls `f` on every expression under `decl`, with whether it is a direct term of a
/// disjunction (an operand of `|`).
fn visit_decl<'a>(decl: &'a Decl, f: &mut impl FnMut(&'a Expr, bool)) {
    match decl {
        Decl::Field(field) => {
            visit_label(&field.label, f);
            visit_expr(&field.value, false, f);
        }
        Decl::Let(clause) => visit_expr(&clause.value, false, f),
        Decl::Embed(expr) => visit_expr(expr, false, f),
        Decl::Comprehension(comp) => visit_comprehension(comp, f),
        Decl::Ellipsis(Some(expr), _) => visit_expr(expr, false, f),
        Decl::Ellipsis(None, _) | Decl::Attribute(_) => {}
    }
}

fn visit_label<'a>(label: &'a Label, f: &mut impl FnMut(&'a Expr, bool)) {
    match label {
        Label::Dynamic(expr, _) | Label::Pattern(expr, _) => visit_expr(expr, false, f),
        Label::Alias(_, inner) => visit_label(inner, f),
        Label::Ident(_) | Label::String(..) => {}
    }
}

fn visit_comprehension<'a>(comp: &'a ast::Comprehension, f: &mut impl FnMut(&'a Expr, bool)) {
    for clause in &comp.clauses {
        match clause {
            Clause::For { source, .. } => visit_expr(source, false, f),
            Clause::If { condition, .. } => visit_expr(condition, false, f),
            Clause::Let(clause) => visit_expr(&clause.value, false, f),
        }
    }
    for decl in &comp.body.decls {
        visit_decl(decl, f);
    }
}

fn visit_parts<'a>(parts: &'a [StringPart], f: &mut impl FnMut(&'a Expr, bool)) {
    for part in parts {
        if let StringPart::Interp(expr) = part {
            visit_expr(expr, false, f);
        }
    }
}

fn visit_expr<'a>(expr: &'a Expr, disjunction_term: bool, f: &mut impl FnMut(&'a Expr, bool)) {
    f(expr, disjunction_term);
    match expr {
        Expr::Ident(_)
        | Expr::Null(_)
        | Expr::Bool(..)
        | Expr::Number { .. }
        | Expr::Top(_)
        | Expr::Bottom(_) => {}
        Expr::String { parts, .. } | Expr::Bytes { parts, .. } => visit_parts(parts, f),
        Expr::Struct(lit) => {
            for decl in &lit.decls {
                visit_decl(decl, f);
            }
        }
        Expr::List(lit) => {
            for elem in &lit.elems {
                match elem {
                    ListElem::Expr(expr) => visit_expr(expr, false, f),
                    ListElem::Comprehension(comp) => visit_comprehension(comp, f),
                }
            }
            if let Some(Some(ty)) = &lit.ellipsis {
                visit_expr(ty, false, f);
            }
        }
        Expr::Selector { base, .. } => visit_expr(base, false, f),
        Expr::Index { base, index, .. } => {
            visit_expr(base, false, f);
            visit_expr(index, false, f);
        }
        Expr::Slice { base, lo, hi, .. } => {
            visit_expr(base, false, f);
            for bound in [lo, hi].into_iter().flatten() {
                visit_expr(bound, false, f);
            }
        }
        Expr::Call { func, args, .. } => {
            visit_expr(func, false, f);
            for arg in args {
                visit_expr(arg, false, f);
            }
        }
        Expr::Unary { operand, .. } => visit_expr(operand, false, f),
        Expr::Binary { op, lhs, rhs, .. } => {
            let terms = *op == BinaryOp::Disjunction;
            visit_expr(lhs, terms, f);
            visit_expr(rhs, terms, f);
        }
        Expr::Paren(inner, _) => visit_expr(inner, false, f),
    }
}
