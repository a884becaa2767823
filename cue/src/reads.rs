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
    /// constrain it), and nothing at the top level can add fields there (a dynamic or pattern
    /// label, an embedded value other than a struct literal). `name` used as a whole (`for k, v
    /// in context`, `json.Marshal(context)`, `let c = context`) or indexed (`context["output"]`)
    /// counts as observing every field.
    pub fn may_read_fields(&self, name: &str, fields: &[&str]) -> bool {
        let mut reads = MayRead {
            name,
            fields,
            reads: false,
        };
        self.walk_injected_reads(name, &mut reads);
        reads.reads
    }

    /// Walks every place this file may observe the value injected as its top-level field
    /// `name`, conservatively: `reads` is told of each expression first (and may take it as a
    /// reference of its own kind), and of everything that may observe the value whole — `name`
    /// used as a whole, a field labelled `name` anywhere, and at the top level a dynamic or
    /// pattern label or an embedded value other than a struct literal.
    pub fn walk_injected_reads(&self, name: &str, reads: &mut impl InjectedReads) {
        Walk { name, reads }.decls(&self.decls, true);
    }
}

/// What [`File::walk_injected_reads`] reports to the caller deciding what a file reads.
pub trait InjectedReads {
    /// An expression, before the walk looks inside it: `true` when the caller took it as a
    /// reference of its own (the walk does not descend into it then).
    fn reference(&mut self, expr: &Expr) -> bool;
    /// Something may observe the whole injected value.
    fn everything(&mut self);
    /// Whether the answer is settled, so the walk can stop.
    fn settled(&self) -> bool;
}

/// [`File::may_read_fields`]'s answer: a selector of one of `fields` reads, others do not.
struct MayRead<'n> {
    name: &'n str,
    fields: &'n [&'n str],
    reads: bool,
}

impl InjectedReads for MayRead<'_> {
    fn reference(&mut self, expr: &Expr) -> bool {
        match expr {
            Expr::Selector { base, label, .. } if matches!(base.as_ref(), Expr::Ident(ident) if ident.name == self.name) =>
            {
                self.reads |= self.fields.contains(&label.as_str());
                true
            }
            _ => false,
        }
    }

    fn everything(&mut self) {
        self.reads = true;
    }

    fn settled(&self) -> bool {
        self.reads
    }
}

struct Walk<'n, 'r, R> {
    name: &'n str,
    reads: &'r mut R,
}

impl<R: InjectedReads> Walk<'_, '_, R> {
    /// `top`: the declarations are those of the file's top-level struct (where `name` lives).
    fn decls(&mut self, decls: &[Decl], top: bool) {
        for decl in decls {
            if self.reads.settled() {
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
                    self.everything_if(top);
                    self.expr(expr);
                }
                Decl::Comprehension(comprehension) => self.comprehension(comprehension, top),
                Decl::Ellipsis(Some(expr), _) => self.expr(expr),
                Decl::Ellipsis(None, _) | Decl::Attribute(_) => {}
            }
        }
    }

    fn everything_if(&mut self, condition: bool) {
        if condition {
            self.reads.everything();
        }
    }

    fn label(&mut self, label: &Label, top: bool) {
        match label {
            Label::Ident(ident) => self.everything_if(ident.name == self.name),
            Label::String(text, _) => self.everything_if(text == self.name),
            Label::Dynamic(expr, _) | Label::Pattern(expr, _) => {
                // At the top level it may name (or constrain) `name`; deeper it cannot.
                self.everything_if(top);
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
        if self.reads.settled() || self.reads.reference(expr) {
            return;
        }
        match expr {
            Expr::Ident(ident) => self.everything_if(ident.name == self.name),
            Expr::Selector { base, .. } => self.expr(base),
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
