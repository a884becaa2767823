//! Which fields of an injected value a file can observe, decided from its syntax alone.
//!
//! A caller that injects a large value (KubeVela's trait `context`, whose `output` is the whole
//! workload) can leave out the fields a template cannot observe: building them into the
//! evaluation and converting them to JSON first is a large share of a trait's render. The
//! answer is conservative: `true` whenever the syntax does not rule the fields out.

use crate::ast::{Clause, Comprehension, Decl, Expr, File, Label, ListElem, StringPart};

impl File {
    /// Whether this file may observe any of `fields` of the value injected as its top-level
    /// field `name` (what [`crate::Evaluator::evaluate`] injects, e.g. `context`).
    ///
    /// `false` only when every reference to `name` selects another field (`context.name`), no
    /// field anywhere is labelled `name` (a declaration unifies with the injection and may
    /// constrain it, e.g. close it), and nothing at the top level can add fields there (a
    /// dynamic or pattern label, an embedded value other than a struct literal). `name` used as
    /// a whole (`for k, v in context`, `json.Marshal(context)`, `let c = context`) or indexed
    /// (`context["output"]`) counts as observing every field.
    pub fn may_read_fields(&self, name: &str, fields: &[&str]) -> bool {
        let mut walk = Walk {
            name,
            fields,
            reads: false,
        };
        walk.decls(&self.decls, true);
        walk.reads
    }
}

struct Walk<'n> {
    name: &'n str,
    fields: &'n [&'n str],
    reads: bool,
}

impl Walk<'_> {
    /// `top`: the declarations are those of the file's top-level struct (where `name` lives).
    fn decls(&mut self, decls: &[Decl], top: bool) {
        for decl in decls {
            if self.reads {
                return;
            }
            match decl {
                Decl::Field(field) => {
                    self.label(&field.label, top);
                    self.expr(&field.value);
                }
                Decl::Let(clause) => self.expr(&clause.value),
                Decl::Embed(Expr::Struct(lit)) => self.decls(&lit.decls, top),
                Decl::Embed(expr) => {
                    // An embedded reference at the top level (`#Base`, `patch`) brings its
                    // fields, possibly a `name` field, into the top-level struct.
                    self.reads |= top;
                    self.expr(expr);
                }
                Decl::Comprehension(comprehension) => self.comprehension(comprehension, top),
                Decl::Ellipsis(Some(expr), _) => self.expr(expr),
                Decl::Ellipsis(None, _) | Decl::Attribute(_) => {}
            }
        }
    }

    fn label(&mut self, label: &Label, top: bool) {
        match label {
            Label::Ident(ident) => self.reads |= ident.name == self.name,
            Label::String(text, _) => self.reads |= text == self.name,
            Label::Dynamic(expr, _) | Label::Pattern(expr, _) => {
                // At the top level it may name (or constrain) `name`; deeper it cannot.
                self.reads |= top;
                self.expr(expr);
            }
            Label::Alias(_, inner) => self.label(inner, top),
        }
    }

    fn comprehension(&mut self, comprehension: &Comprehension, top: bool) {
        for clause in &comprehension.clauses {
            match clause {
                Clause::For { source, .. } => self.expr(source),
                Clause::If { condition, .. } => self.expr(condition),
                Clause::Let(clause) => self.expr(&clause.value),
            }
        }
        self.decls(&comprehension.body.decls, top);
    }

    fn parts(&mut self, parts: &[StringPart]) {
        for part in parts {
            if let StringPart::Interp(expr) = part {
                self.expr(expr);
            }
        }
    }

    fn expr(&mut self, expr: &Expr) {
        if self.reads {
            return;
        }
        match expr {
            Expr::Ident(ident) => self.reads |= ident.name == self.name,
            Expr::Selector { base, label, .. } => match base.as_ref() {
                Expr::Ident(ident) if ident.name == self.name => {
                    self.reads |= self.fields.contains(&label.as_str());
                }
                _ => self.expr(base),
            },
            Expr::Null(_)
            | Expr::Bool(..)
            | Expr::Number { .. }
            | Expr::Top(_)
            | Expr::Bottom(_) => {}
            Expr::String { parts, .. } | Expr::Bytes { parts, .. } => self.parts(parts),
            Expr::Struct(lit) => self.decls(&lit.decls, false),
            Expr::List(lit) => {
                for elem in &lit.elems {
                    match elem {
                        ListElem::Expr(expr) => self.expr(expr),
                        ListElem::Comprehension(comprehension) => {
                            self.comprehension(comprehension, false);
                        }
                    }
                }
                if let Some(Some(ty)) = &lit.ellipsis {
                    self.expr(ty);
                }
            }
            Expr::Index { base, index, .. } => {
                self.expr(base);
                self.expr(index);
            }
            Expr::Slice { base, lo, hi, .. } => {
                self.expr(base);
                for bound in [lo, hi].into_iter().flatten() {
                    self.expr(bound);
                }
            }
            Expr::Call { func, args, .. } => {
                self.expr(func);
                for arg in args {
                    self.expr(arg);
                }
            }
            Expr::Unary { operand, .. } => self.expr(operand),
            Expr::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            Expr::Paren(inner, _) => self.expr(inner),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{FileId, parse_file};

    fn reads(source: &str) -> bool {
        let parsed = parse_file(FileId(0), source);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        parsed
            .file
            .may_read_fields("context", &["output", "outputs"])
    }

    #[test]
    fn selectors_of_other_fields_do_not_read() {
        assert!(!reads(
            "parameter: replicas: *1 | int\npatch: spec: replicas: parameter.replicas\n\
             patch: metadata: name: \"\\(context.name)-x\"\n\
             if context.appName != _|_ { patch: metadata: labels: app: context.appName }\n"
        ));
        // A nested field named like a selected-away one, and deeper dynamic labels, are fine.
        assert!(!reads(
            "patch: spec: output: 1\npatch: metadata: {for k, v in parameter {(k): v}}\n"
        ));
    }

    #[test]
    fn anything_that_may_see_the_fields_reads() {
        for source in [
            "patch: spec: context.output.spec\n",
            "x: context.outputs\n",
            "x: context[\"output\"]\n",
            "x: len(context)\n",
            "let c = context\nx: c.name\n",
            "x: [for k, v in context {k}]\n",
            "context: close({name: string})\n",
            "x: {context: 1}\n",
            "\"context\": _\n",
            "#Base\n#Base: {}\n",
            "for k, v in parameter {(k): v}\n",
            "[string]: _\n",
            "y: (context).output\n",
        ] {
            assert!(reads(source), "{source}");
        }
    }
}
