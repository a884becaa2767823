//! A compact S-expression printer for the AST, so parser tests can assert whole trees in one
//! line each. Fields print as `(: label value)`; a `[X=expr]`/`(X=expr)` label alias prints as
//! `label<X>`, a value alias as `X=value`. Fields print as `(: label value)` (`?:`, `!:` for optional and required), shorthand
//! struct literals as `{~ ...}`, binary operators as `(op lhs rhs)`, unary ones as `(op x)`.

use crate::ast::*;

pub(super) fn file(file: &File) -> String {
    let mut out = Vec::new();
    if let Some(package) = &file.package {
        out.push(format!("(package {})", package.name));
    }
    for import in &file.imports {
        match &import.alias {
            Some(alias) => out.push(format!("(import {} {:?})", alias.name, import.path)),
            None => out.push(format!("(import {:?})", import.path)),
        }
    }
    out.extend(file.decls.iter().map(decl));
    out.join("\n")
}

pub(super) fn decl(decl: &Decl) -> String {
    match decl {
        Decl::Field(field) => self::field(field),
        Decl::Let(clause) => let_clause(clause),
        Decl::Embed(value) => format!("(embed {})", expr(value)),
        Decl::Comprehension(comprehension) => self::comprehension(comprehension),
        Decl::Ellipsis(None, _) => "...".to_owned(),
        Decl::Ellipsis(Some(value), _) => format!("(... {})", expr(value)),
        Decl::Attribute(attribute) => attr(attribute),
    }
}

fn attr(attribute: &Attribute) -> String {
    format!("@{}({})", attribute.name, attribute.body)
}

fn field(field: &Field) -> String {
    let marker = match field.constraint {
        FieldConstraint::Regular => ":",
        FieldConstraint::Optional => "?:",
        FieldConstraint::Required => "!:",
    };
    let mut label = label(&field.label);
    if let Some(alias) = &field.label_expr_alias {
        label = format!("{label}<{}>", alias.name);
    }
    let value = match &field.value_alias {
        Some(alias) => format!("{}={}", alias.name, expr(&field.value)),
        None => expr(&field.value),
    };
    let mut out = format!("({marker} {label} {value}");
    for attribute in &field.attrs {
        out.push(' ');
        out.push_str(&attr(attribute));
    }
    if !field.doc.is_empty() {
        out.push_str(&format!(" #doc{:?}", field.doc));
    }
    out.push(')');
    out
}

fn label(label: &Label) -> String {
    match label {
        Label::Ident(ident) => ident.name.clone(),
        Label::String(text, _) => format!("{text:?}"),
        Label::Dynamic(value, _) => format!("(dyn {})", expr(value)),
        Label::Pattern(value, _) => format!("[{}]", expr(value)),
        Label::Alias(alias, inner) => format!("{}={}", alias.name, self::label(inner)),
    }
}

fn let_clause(clause: &LetClause) -> String {
    format!("(let {} {})", clause.name.name, expr(&clause.value))
}

fn comprehension(comprehension: &Comprehension) -> String {
    let mut out = "(comp".to_owned();
    for clause in &comprehension.clauses {
        out.push(' ');
        out.push_str(&match clause {
            Clause::For {
                key: Some(key),
                value,
                source,
                ..
            } => format!("(for {} {} {})", key.name, value.name, expr(source)),
            Clause::For {
                key: None,
                value,
                source,
                ..
            } => format!("(for {} {})", value.name, expr(source)),
            Clause::If { condition, .. } => format!("(if {})", expr(condition)),
            Clause::Let(clause) => let_clause(clause),
        });
    }
    out.push(' ');
    out.push_str(&struct_lit(&comprehension.body));
    out.push(')');
    out
}

fn struct_lit(lit: &StructLit) -> String {
    let decls: Vec<String> = lit.decls.iter().map(decl).collect();
    if lit.shorthand {
        format!("{{~ {}}}", decls.join(" "))
    } else {
        format!("{{{}}}", decls.join(" "))
    }
}

fn parts(kind: &str, parts: &[StringPart]) -> String {
    match parts {
        [] if kind == "str" => "\"\"".to_owned(),
        [StringPart::Lit(text)] if kind == "str" => format!("{text:?}"),
        _ => {
            let mut out = format!("({kind}");
            for part in parts {
                out.push(' ');
                match part {
                    StringPart::Lit(text) => out.push_str(&format!("{text:?}")),
                    StringPart::Interp(value) => out.push_str(&format!("\\({})", expr(value))),
                }
            }
            out.push(')');
            out
        }
    }
}

pub(super) fn expr(value: &Expr) -> String {
    match value {
        Expr::Ident(ident) => ident.name.clone(),
        Expr::Null(_) => "null".to_owned(),
        Expr::Bool(value, _) => value.to_string(),
        Expr::Number { text, kind, .. } => match kind {
            NumberKind::Int => text.clone(),
            NumberKind::Float => format!("{text}f"),
        },
        Expr::String {
            parts: string_parts,
            ..
        } => parts("str", string_parts),
        Expr::Bytes {
            parts: byte_parts, ..
        } => parts("bytes", byte_parts),
        Expr::Top(_) => "_".to_owned(),
        Expr::Bottom(_) => "_|_".to_owned(),
        Expr::Struct(lit) => struct_lit(lit),
        Expr::List(list) => {
            let mut items: Vec<String> = list
                .elems
                .iter()
                .map(|elem| match elem {
                    ListElem::Expr(value) => expr(value),
                    ListElem::Comprehension(comprehension) => self::comprehension(comprehension),
                })
                .collect();
            match &list.ellipsis {
                Some(None) => items.push("...".to_owned()),
                Some(Some(value)) => items.push(format!("(... {})", expr(value))),
                None => {}
            }
            format!("[{}]", items.join(" "))
        }
        Expr::Selector { base, label, .. } => format!("(. {} {label:?})", expr(base)),
        Expr::Index { base, index, .. } => format!("(idx {} {})", expr(base), expr(index)),
        Expr::Slice { base, lo, hi, .. } => {
            let bound = |value: &Option<Box<Expr>>| value.as_deref().map_or("-".to_owned(), expr);
            format!("(slice {} {} {})", expr(base), bound(lo), bound(hi))
        }
        Expr::Call { func, args, .. } => {
            let mut out = format!("(call {}", expr(func));
            for arg in args {
                out.push(' ');
                out.push_str(&expr(arg));
            }
            out.push(')');
            out
        }
        Expr::Unary { op, operand, .. } => {
            let name = match op {
                UnaryOp::Neg => "neg",
                UnaryOp::Pos => "pos",
                UnaryOp::Not => "not",
                UnaryOp::Default => "default",
                UnaryOp::Lt => "<",
                UnaryOp::Le => "<=",
                UnaryOp::Gt => ">",
                UnaryOp::Ge => ">=",
                UnaryOp::Ne => "!=",
                UnaryOp::Match => "=~",
                UnaryOp::NotMatch => "!~",
            };
            format!("({name} {})", expr(operand))
        }
        Expr::Binary { op, lhs, rhs, .. } => {
            let name = match op {
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
            };
            format!("({name} {} {})", expr(lhs), expr(rhs))
        }
        Expr::Paren(inner, _) => format!("(paren {})", expr(inner)),
    }
}
