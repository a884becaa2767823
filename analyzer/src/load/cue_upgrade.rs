//! KubeVela v1.11's rewrite of legacy list arithmetic, applied to every definition template
//! before it is compiled (`pkg/cue/upgrade/upgrade_1_11.go`, the `list-arithmetic` upgrade).
//!
//! CUE v0.14 rejects `list + list` and `list * n`; KubeVela rewrites them to `list.Concat([...])`
//! and `list.Repeat(list, n)` (importing `list`) so that definitions written for older CUE
//! still render. It decides what is a list from syntax alone, and so does this module, rule for
//! rule, so that a template KubeVela renders renders here and one it rejects is rejected:
//! - a field whose label is an identifier and whose value is a list literal, a `list.*` call, a
//!   disjunction with a list side or a unary expression (`*[]`) over one makes its label a list
//!   name, anywhere in the file; in a struct field `p: { q: [...] }` also `p.q`;
//! - then, until nothing changes, so does a field whose value is a list operation (`+` of two
//!   list expressions, `*` of a list and a number, `list.Concat`/`list.Repeat`);
//! - a list expression is a list literal, a `list.*` call, a list name, or `p.q` registered;
//! - `a + b + c` whose operands are all list expressions becomes one `list.Concat([a, b, c])`.
//!
//! It does not look at scopes or values: `x + y` is left alone when `x` is a list that no field
//! of that name declares literally (`parameter.items + [...]`), exactly as KubeVela leaves it,
//! and CUE then reports the error.

use std::collections::HashSet;

use cue::ast::{
    BinaryOp, Clause, Comprehension, Decl, Expr, File, Ident, Import, Label, ListElem, ListLit,
    StringPart, StructLit,
};

/// `file` with its list arithmetic rewritten; `file` itself when it has none.
pub(crate) fn upgrade_list_arithmetic(file: File) -> File {
    let lists = list_names(&file);
    let mut upgraded = file.clone();
    let mut rewritten = false;
    for decl in &mut upgraded.decls {
        rewrite_decl(decl, &lists, &mut rewritten);
    }
    if !rewritten {
        return file;
    }
    if !upgraded.imports.iter().any(|import| import.path == "list") {
        // KubeVela adds the import unaliased, first.
        upgraded.imports.insert(
            0,
            Import {
                alias: None,
                path: "list".to_owned(),
                span: cue::Span::new(file.span.file, file.span.start, file.span.start),
            },
        );
    }
    // A new file: its compile checks are computed afresh.
    upgraded.compile_checks = cue::ast::CompileChecks::default();
    upgraded
}

/// The names KubeVela takes for lists (see the module doc).
fn list_names(file: &File) -> HashSet<String> {
    let mut names = HashSet::new();
    visit_fields(&file.decls, &mut |label, value| {
        if is_list_literal(value) {
            names.insert(label.to_owned());
        } else if let Expr::Struct(lit) = value {
            register_nested_literals(lit, label, &mut names);
        }
    });
    loop {
        let mut changed = false;
        visit_fields(&file.decls, &mut |label, value| {
            if !names.contains(label) && is_list_operation(value, &names) {
                names.insert(label.to_owned());
                changed = true;
            } else if let Expr::Struct(lit) = value {
                changed |= register_nested_operations(lit, label, &mut names);
            }
        });
        if !changed {
            return names;
        }
    }
}

fn register_nested_literals(lit: &StructLit, prefix: &str, names: &mut HashSet<String>) {
    for (label, value) in ident_fields(&lit.decls) {
        let qualified = format!("{prefix}.{label}");
        if is_list_literal(value) {
            names.insert(qualified);
            names.insert(label.to_owned());
        } else if let Expr::Struct(nested) = value {
            register_nested_literals(nested, &qualified, names);
        }
    }
}

fn register_nested_operations(lit: &StructLit, prefix: &str, names: &mut HashSet<String>) -> bool {
    let mut changed = false;
    for (label, value) in ident_fields(&lit.decls) {
        let qualified = format!("{prefix}.{label}");
        if !names.contains(&qualified) && is_list_operation(value, names) {
            names.insert(qualified);
            names.insert(label.to_owned());
            changed = true;
        } else if let Expr::Struct(nested) = value {
            changed |= register_nested_operations(nested, &qualified, names);
        }
    }
    changed
}

/// The fields of `decls` (not nested) whose label is an identifier.
fn ident_fields(decls: &[Decl]) -> impl Iterator<Item = (&str, &Expr)> {
    decls.iter().filter_map(|decl| match decl {
        Decl::Field(field) => match &field.label {
            Label::Ident(ident) => Some((ident.name.as_str(), &field.value)),
            _ => None,
        },
        _ => None,
    })
}

/// Calls `visit` on every field of the tree whose label is an identifier, outer fields first.
fn visit_fields(decls: &[Decl], visit: &mut dyn FnMut(&str, &Expr)) {
    for decl in decls {
        match decl {
            Decl::Field(field) => {
                if let Label::Ident(ident) = &field.label {
                    visit(&ident.name, &field.value);
                }
                visit_expr_fields(&field.value, visit);
            }
            Decl::Let(clause) => visit_expr_fields(&clause.value, visit),
            Decl::Embed(expr) => visit_expr_fields(expr, visit),
            Decl::Comprehension(comprehension) => visit_comprehension(comprehension, visit),
            Decl::Ellipsis(Some(expr), _) => visit_expr_fields(expr, visit),
            Decl::Ellipsis(None, _) | Decl::Attribute(_) => {}
        }
    }
}

fn visit_comprehension(comprehension: &Comprehension, visit: &mut dyn FnMut(&str, &Expr)) {
    for clause in &comprehension.clauses {
        match clause {
            Clause::For { source, .. } => visit_expr_fields(source, visit),
            Clause::If { condition, .. } => visit_expr_fields(condition, visit),
            Clause::Let(clause) => visit_expr_fields(&clause.value, visit),
        }
    }
    visit_fields(&comprehension.body.decls, visit);
}

fn visit_expr_fields(expr: &Expr, visit: &mut dyn FnMut(&str, &Expr)) {
    match expr {
        Expr::Struct(lit) => visit_fields(&lit.decls, visit),
        Expr::List(lit) => {
            for elem in &lit.elems {
                match elem {
                    ListElem::Expr(expr) => visit_expr_fields(expr, visit),
                    ListElem::Comprehension(comprehension) => {
                        visit_comprehension(comprehension, visit)
                    }
                }
            }
            if let Some(Some(expr)) = &lit.ellipsis {
                visit_expr_fields(expr, visit);
            }
        }
        Expr::String { parts, .. } | Expr::Bytes { parts, .. } => {
            for part in parts {
                if let StringPart::Interp(expr) = part {
                    visit_expr_fields(expr, visit);
                }
            }
        }
        Expr::Selector { base, .. } => visit_expr_fields(base, visit),
        Expr::Index { base, index, .. } => {
            visit_expr_fields(base, visit);
            visit_expr_fields(index, visit);
        }
        Expr::Slice { base, lo, hi, .. } => {
            visit_expr_fields(base, visit);
            for bound in [lo, hi].into_iter().flatten() {
                visit_expr_fields(bound, visit);
            }
        }
        Expr::Call { func, args, .. } => {
            visit_expr_fields(func, visit);
            for arg in args {
                visit_expr_fields(arg, visit);
            }
        }
        Expr::Unary { operand, .. } => visit_expr_fields(operand, visit),
        Expr::Binary { lhs, rhs, .. } => {
            visit_expr_fields(lhs, visit);
            visit_expr_fields(rhs, visit);
        }
        Expr::Paren(inner, _) => visit_expr_fields(inner, visit),
        Expr::Ident(_)
        | Expr::Null(_)
        | Expr::Bool(..)
        | Expr::Number { .. }
        | Expr::Top(_)
        | Expr::Bottom(_) => {}
    }
}

/// `list.<anything>(...)`.
fn is_list_call(expr: &Expr) -> Option<&str> {
    let Expr::Call { func, .. } = expr else {
        return None;
    };
    match func.as_ref() {
        Expr::Selector { base, label, .. } if matches!(base.as_ref(), Expr::Ident(Ident { name, .. }) if name == "list") => {
            Some(label.as_str())
        }
        _ => None,
    }
}

/// KubeVela's `isListLiteral`.
fn is_list_literal(expr: &Expr) -> bool {
    match expr {
        Expr::List(_) => true,
        Expr::Call { .. } => is_list_call(expr).is_some(),
        Expr::Binary {
            op: BinaryOp::Disjunction,
            lhs,
            rhs,
            ..
        } => is_list_literal(lhs) || is_list_literal(rhs),
        Expr::Unary { operand, .. } => is_list_literal(operand),
        _ => false,
    }
}

/// KubeVela's `isListExpression`.
fn is_list_expression(expr: &Expr, names: &HashSet<String>) -> bool {
    match expr {
        Expr::List(_) => true,
        Expr::Call { .. } => is_list_call(expr).is_some(),
        Expr::Ident(ident) => names.contains(&ident.name),
        Expr::Selector { base, label, .. } => match base.as_ref() {
            Expr::Ident(base) => names.contains(&format!("{}.{label}", base.name)),
            _ => false,
        },
        _ => false,
    }
}

/// KubeVela's `isNumericExpression`: a number literal, or any identifier not taken for a list.
fn is_numeric_expression(expr: &Expr, names: &HashSet<String>) -> bool {
    match expr {
        Expr::Number { .. } => true,
        Expr::Ident(ident) => !names.contains(&ident.name),
        Expr::Unary { operand, .. } => is_numeric_expression(operand, names),
        _ => false,
    }
}

/// KubeVela's `isListOperationResult`.
fn is_list_operation(expr: &Expr, names: &HashSet<String>) -> bool {
    match expr {
        Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
            ..
        } => is_list_expression(lhs, names) && is_list_expression(rhs, names),
        Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
            ..
        } => repeat_operands(lhs, rhs, names).is_some(),
        Expr::Call { .. } => matches!(is_list_call(expr), Some("Concat" | "Repeat")),
        _ => false,
    }
}

/// `(list, count)` of `lhs * rhs` when one side is a list expression and the other a number.
fn repeat_operands<'e>(
    lhs: &'e Expr,
    rhs: &'e Expr,
    names: &HashSet<String>,
) -> Option<(&'e Expr, &'e Expr)> {
    if is_list_expression(lhs, names) && is_numeric_expression(rhs, names) {
        Some((lhs, rhs))
    } else if is_numeric_expression(lhs, names) && is_list_expression(rhs, names) {
        Some((rhs, lhs))
    } else {
        None
    }
}

/// The operands of a left-associative `+` chain when every one is a list expression, with
/// `list.Concat([...])` operands inlined (KubeVela's `collectAddChain`).
fn add_chain(expr: &Expr, names: &HashSet<String>) -> Option<Vec<Expr>> {
    match expr {
        Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
            ..
        } => {
            let mut operands = add_chain(lhs, names)?;
            if !is_list_expression(rhs, names) {
                return None;
            }
            operands.extend(concat_arguments(rhs));
            Some(operands)
        }
        _ if is_list_expression(expr, names) => Some(concat_arguments(expr)),
        _ => None,
    }
}

/// The elements of `list.Concat([a, b])`, or the expression itself.
fn concat_arguments(expr: &Expr) -> Vec<Expr> {
    if let Expr::Call { args, .. } = expr
        && is_list_call(expr) == Some("Concat")
        && let [Expr::List(list)] = args.as_slice()
        && list.ellipsis.is_none()
        && let Some(elements) = list
            .elems
            .iter()
            .map(|elem| match elem {
                ListElem::Expr(expr) => Some(expr.clone()),
                ListElem::Comprehension(_) => None,
            })
            .collect::<Option<Vec<Expr>>>()
    {
        return elements;
    }
    vec![expr.clone()]
}

fn list_call(function: &str, args: Vec<Expr>, span: cue::Span) -> Expr {
    Expr::Call {
        func: Box::new(Expr::Selector {
            base: Box::new(Expr::Ident(Ident {
                name: "list".to_owned(),
                span,
            })),
            label: function.to_owned(),
            label_span: span,
            span,
        }),
        args,
        span,
    }
}

/// Rewrites `expr` and what it contains, outermost first, as KubeVela's `astutil.Apply` does.
fn rewrite_expr(expr: &mut Expr, names: &HashSet<String>, rewritten: &mut bool) {
    let replacement = match &*expr {
        Expr::Binary {
            op: BinaryOp::Add,
            span,
            ..
        } => add_chain(expr, names)
            .filter(|operands| operands.len() >= 2)
            .map(|operands| {
                let list = Expr::List(ListLit {
                    elems: operands.into_iter().map(ListElem::Expr).collect(),
                    ellipsis: None,
                    span: *span,
                });
                list_call("Concat", vec![list], *span)
            }),
        Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
            span,
        } => repeat_operands(lhs, rhs, names)
            .map(|(list, count)| list_call("Repeat", vec![list.clone(), count.clone()], *span)),
        _ => None,
    };
    if let Some(replacement) = replacement {
        *expr = replacement;
        *rewritten = true;
    }
    match expr {
        Expr::Struct(lit) => {
            for decl in &mut lit.decls {
                rewrite_decl(decl, names, rewritten);
            }
        }
        Expr::List(lit) => rewrite_list(lit, names, rewritten),
        Expr::String { parts, .. } | Expr::Bytes { parts, .. } => {
            for part in parts {
                if let StringPart::Interp(expr) = part {
                    rewrite_expr(expr, names, rewritten);
                }
            }
        }
        Expr::Selector { base, .. } => rewrite_expr(base, names, rewritten),
        Expr::Index { base, index, .. } => {
            rewrite_expr(base, names, rewritten);
            rewrite_expr(index, names, rewritten);
        }
        Expr::Slice { base, lo, hi, .. } => {
            rewrite_expr(base, names, rewritten);
            for bound in [lo, hi].into_iter().flatten() {
                rewrite_expr(bound, names, rewritten);
            }
        }
        Expr::Call { func, args, .. } => {
            rewrite_expr(func, names, rewritten);
            for arg in args {
                rewrite_expr(arg, names, rewritten);
            }
        }
        Expr::Unary { operand, .. } => rewrite_expr(operand, names, rewritten),
        Expr::Binary { lhs, rhs, .. } => {
            rewrite_expr(lhs, names, rewritten);
            rewrite_expr(rhs, names, rewritten);
        }
        Expr::Paren(inner, _) => rewrite_expr(inner, names, rewritten),
        Expr::Ident(_)
        | Expr::Null(_)
        | Expr::Bool(..)
        | Expr::Number { .. }
        | Expr::Top(_)
        | Expr::Bottom(_) => {}
    }
}

fn rewrite_list(lit: &mut ListLit, names: &HashSet<String>, rewritten: &mut bool) {
    for elem in &mut lit.elems {
        match elem {
            ListElem::Expr(expr) => rewrite_expr(expr, names, rewritten),
            ListElem::Comprehension(comprehension) => {
                rewrite_comprehension(comprehension, names, rewritten)
            }
        }
    }
    if let Some(Some(expr)) = &mut lit.ellipsis {
        rewrite_expr(expr, names, rewritten);
    }
}

fn rewrite_comprehension(
    comprehension: &mut Comprehension,
    names: &HashSet<String>,
    rewritten: &mut bool,
) {
    for clause in &mut comprehension.clauses {
        match clause {
            Clause::For { source, .. } => rewrite_expr(source, names, rewritten),
            Clause::If { condition, .. } => rewrite_expr(condition, names, rewritten),
            Clause::Let(clause) => rewrite_expr(&mut clause.value, names, rewritten),
        }
    }
    for decl in &mut comprehension.body.decls {
        rewrite_decl(decl, names, rewritten);
    }
}

fn rewrite_decl(decl: &mut Decl, names: &HashSet<String>, rewritten: &mut bool) {
    match decl {
        Decl::Field(field) => {
            if let Label::Dynamic(expr, _) | Label::Pattern(expr, _) = &mut field.label {
                rewrite_expr(expr, names, rewritten);
            }
            rewrite_expr(&mut field.value, names, rewritten);
        }
        Decl::Let(clause) => rewrite_expr(&mut clause.value, names, rewritten),
        Decl::Embed(expr) => rewrite_expr(expr, names, rewritten),
        Decl::Comprehension(comprehension) => {
            rewrite_comprehension(comprehension, names, rewritten)
        }
        Decl::Ellipsis(Some(expr), _) => rewrite_expr(expr, names, rewritten),
        Decl::Ellipsis(None, _) | Decl::Attribute(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(source: &str) -> Result<serde_json::Value, String> {
        let parsed = cue::parse_file(cue::FileId(0), source);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let file = upgrade_list_arithmetic(parsed.file);
        cue::Evaluator::new()
            .evaluate(&[&file], &[])
            .to_json()
            .map_err(|errors| format!("{errors:?}"))
    }

    #[test]
    fn list_sums_of_declared_lists_become_concat() {
        let value = export(
            "a: [1]\nb: [2, 3]\nsum: a + b + [4]\nnested: {x: [5]}\nmore: nested.x + a\nthrice: [0] * 3\n",
        )
        .unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "a": [1], "b": [2, 3], "sum": [1, 2, 3, 4], "nested": {"x": [5]},
                "more": [5, 1], "thrice": [0, 0, 0],
            })
        );
    }

    #[test]
    fn numbers_and_strings_are_left_alone() {
        let value = export("n: 1 + 2\ns: \"a\" + \"b\"\nm: 2 * 3\n").unwrap();
        assert_eq!(value, serde_json::json!({"n": 3, "s": "ab", "m": 6}));
    }

    #[test]
    fn lists_kubevela_cannot_see_stay_an_error() {
        // A chain is not a list expression to KubeVela: `sum` is not taken for a list.
        let error = export("a: [1]\nsum: a + a + a\nmore: sum + a\n").unwrap_err();
        assert!(error.contains("list.Concat"), "{error}");
        // `q` is a list, but no field gives it a list literal: KubeVela leaves the sum alone
        // and CUE v0.14 rejects it, so must we.
        let error = export("p: {items: [1]}\nq: p.items\nr: q + [2]\n").unwrap_err();
        assert!(error.contains("list.Concat"), "{error}");
    }

    #[test]
    fn an_unchanged_file_is_returned_as_it_is() {
        let parsed = cue::parse_file(cue::FileId(0), "a: [1]\nb: a\n");
        let uid_before = format!("{:?}", parsed.file.imports);
        let file = upgrade_list_arithmetic(parsed.file.clone());
        assert_eq!(file, parsed.file);
        assert_eq!(format!("{:?}", file.imports), uid_before);
    }
}
