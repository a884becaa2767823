//! The compile-time check CUE makes on imports: an import whose name no expression in the file
//! uses is an error ("imported and not used"), so a file `cue export` rejects is not exported
//! here either.

use crate::ast::{self, Clause, Decl, Expr, Label, ListElem, StringPart};
use crate::{Error, ErrorKind};

/// One error per import of `file` that no identifier in the file refers to.
pub fn unused(file: &ast::File) -> Vec<Error> {
    if file.imports.is_empty() {
        return Vec::new();
    }
    let mut used = Vec::new();
    for decl in &file.decls {
        decl_idents(decl, &mut used);
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

/// Collects the names of the identifiers used in expressions (not labels) under `decl`.
fn decl_idents<'a>(decl: &'a Decl, out: &mut Vec<&'a str>) {
    match decl {
        Decl::Field(field) => field_idents(field, out),
        Decl::Let(clause) => expr_idents(&clause.value, out),
        Decl::Embed(expr) => expr_idents(expr, out),
        Decl::Comprehension(comp) => comprehension_idents(comp, out),
        Decl::Ellipsis(Some(expr), _) => expr_idents(expr, out),
        Decl::Ellipsis(None, _) | Decl::Attribute(_) => {}
    }
}

fn field_idents<'a>(field: &'a ast::Field, out: &mut Vec<&'a str>) {
    label_idents(&field.label, out);
    expr_idents(&field.value, out);
}

fn label_idents<'a>(label: &'a Label, out: &mut Vec<&'a str>) {
    match label {
        Label::Dynamic(expr, _) | Label::Pattern(expr, _) => expr_idents(expr, out),
        Label::Alias(_, inner) => label_idents(inner, out),
        Label::Ident(_) | Label::String(..) => {}
    }
}

fn comprehension_idents<'a>(comp: &'a ast::Comprehension, out: &mut Vec<&'a str>) {
    for clause in &comp.clauses {
        match clause {
            Clause::For { source, .. } => expr_idents(source, out),
            Clause::If { condition, .. } => expr_idents(condition, out),
            Clause::Let(clause) => expr_idents(&clause.value, out),
        }
    }
    for decl in &comp.body.decls {
        decl_idents(decl, out);
    }
}

fn parts_idents<'a>(parts: &'a [StringPart], out: &mut Vec<&'a str>) {
    for part in parts {
        if let StringPart::Interp(expr) = part {
            expr_idents(expr, out);
        }
    }
}

fn expr_idents<'a>(expr: &'a Expr, out: &mut Vec<&'a str>) {
    match expr {
        Expr::Ident(ident) => out.push(&ident.name),
        Expr::String { parts, .. } | Expr::Bytes { parts, .. } => parts_idents(parts, out),
        Expr::Struct(lit) => {
            for decl in &lit.decls {
                decl_idents(decl, out);
            }
        }
        Expr::List(lit) => {
            for elem in &lit.elems {
                match elem {
                    ListElem::Expr(expr) => expr_idents(expr, out),
                    ListElem::Comprehension(comp) => comprehension_idents(comp, out),
                }
            }
            if let Some(Some(ty)) = &lit.ellipsis {
                expr_idents(ty, out);
            }
        }
        Expr::Selector { base, .. } => expr_idents(base, out),
        Expr::Index { base, index, .. } => {
            expr_idents(base, out);
            expr_idents(index, out);
        }
        Expr::Slice { base, lo, hi, .. } => {
            expr_idents(base, out);
            for bound in [lo, hi].into_iter().flatten() {
                expr_idents(bound, out);
            }
        }
        Expr::Call { func, args, .. } => {
            expr_idents(func, out);
            for arg in args {
                expr_idents(arg, out);
            }
        }
        Expr::Unary { operand, .. } => expr_idents(operand, out),
        Expr::Binary { lhs, rhs, .. } => {
            expr_idents(lhs, out);
            expr_idents(rhs, out);
        }
        Expr::Paren(inner, _) => expr_idents(inner, out),
        Expr::Null(_) | Expr::Bool(..) | Expr::Number { .. } | Expr::Top(_) | Expr::Bottom(_) => {}
    }
}
