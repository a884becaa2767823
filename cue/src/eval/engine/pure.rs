//! Optional fields whose value cannot depend on the evaluation's data.
//!
//! A template's `parameter` schema declares many optional fields (`cmd?: [...string]`,
//! `livenessProbe?: #Probe`) that most apps leave out. Such an untouched field holds only what
//! the template says, so its built value is the same in every evaluation of the template; the
//! result tree (see `node.rs`) reuses it instead of evaluating it per app. That is only sound
//! when nothing in the field can see the evaluation's inputs, which is decided here, lexically
//! and conservatively: every identifier in the field's conjuncts must name something bound
//! inside them (a regular field of a struct literal, a `let`, a comprehension variable, an
//! alias of the field's own value), a predeclared identifier, an imported package, or a
//! top-level definition whose own declarations pass the same test. Anything else (a reference to
//! `parameter` or `context`, to an enclosing field, to an optional field, whose value depends on
//! when it is read) makes the field ineligible.

use crate::ast::{Clause, Comprehension, Decl, Expr, Field, FieldConstraint, Label, ListElem};
use crate::ast::{StringPart, StructLit};

use super::{ConjKind, Engine, EnvId, EnvKind, ROOT, State, VId, is_definition};

/// What identifies an eligible optional field across evaluations: the file it was written in,
/// where and how deep it sits, and its conjuncts (AST addresses, closedness), which are all its
/// value depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SchemaKey {
    file: u64,
    legacy_list_arithmetic: bool,
    depth: u32,
    vertex_depth: u32,
    optional_depth: u32,
    conjs: Vec<(usize, u8, u32)>,
}

/// A name bound inside the walked conjuncts, and whether referring to it keeps them eligible.
type Local<'s> = (&'s str, bool);

impl<'a> Engine<'a> {
    /// The key of optional arc `v` when it has not been evaluated yet and all its conjuncts are
    /// template expressions (no data, no reference copies). Whether the arc is eligible is
    /// [`Engine::is_data_independent`]'s answer; the key alone says nothing about it.
    pub fn schema_key(&self, v: VId, depth: u32, optional_depth: u32) -> Option<SchemaKey> {
        let file = self.schema_scope?;
        let vertex = self.v(v);
        if vertex.state != State::New
            || !vertex.errors.is_empty()
            || vertex.forward.is_some()
            || vertex.alts.is_some()
            || vertex.conjs.is_empty()
        {
            return None;
        }
        let mut conjs = Vec::with_capacity(vertex.conjs.len());
        for conj in &vertex.conjs {
            let (address, tag) = match &conj.kind {
                ConjKind::Expr(expr) => (*expr as *const Expr as usize, 0u8),
                kind => match kind.decls() {
                    Some(decls) => (decls.as_ptr() as usize, 1u8),
                    None => return None,
                },
            };
            conjs.push((address, tag * 4 + conj.close as u8, conj.grp));
        }
        Some(SchemaKey {
            file,
            legacy_list_arithmetic: self.legacy_list_arithmetic,
            depth,
            vertex_depth: vertex.depth,
            optional_depth,
            conjs,
        })
    }

    /// Whether nothing in arc `v`'s conjuncts can refer to the evaluation's data (see the
    /// module doc). Only meaningful for an arc [`Engine::schema_key`] gave a key for.
    pub fn is_data_independent(&self, v: VId) -> bool {
        let mut walk = Walk {
            engine: self,
            visiting: Vec::new(),
        };
        self.v(v).conjs.iter().all(|conj| {
            let mut locals = Vec::new();
            match &conj.kind {
                ConjKind::Expr(expr) => walk.expr(expr, &mut locals, conj.env),
                kind => match kind.decls() {
                    Some(decls) => walk.decls(decls, &mut locals, conj.env),
                    None => false,
                },
            }
        })
    }
}

struct Walk<'e, 'a> {
    engine: &'e Engine<'a>,
    /// Top-level definitions being checked (a recursive definition is as independent as its
    /// other declarations).
    visiting: Vec<&'a str>,
}

impl<'e, 'a> Walk<'e, 'a> {
    fn expr(&mut self, expr: &'a Expr, locals: &mut Vec<Local<'a>>, env: EnvId) -> bool {
        match expr {
            Expr::Ident(ident) => match locals.iter().rev().find(|(name, _)| *name == ident.name) {
                Some((_, eligible)) => *eligible,
                None => self.free(&ident.name, env),
            },
            Expr::Null(_)
            | Expr::Bool(..)
            | Expr::Number { .. }
            | Expr::Top(_)
            | Expr::Bottom(_) => true,
            Expr::String { parts, .. } | Expr::Bytes { parts, .. } => {
                parts.iter().all(|part| match part {
                    StringPart::Lit(_) => true,
                    StringPart::Interp(expr) => self.expr(expr, locals, env),
                })
            }
            Expr::Struct(lit) => self.struct_lit(lit, locals, env),
            Expr::List(list) => {
                list.elems.iter().all(|elem| match elem {
                    ListElem::Expr(expr) => self.expr(expr, locals, env),
                    ListElem::Comprehension(comp) => self.comprehension(comp, locals, env),
                }) && match &list.ellipsis {
                    Some(Some(ty)) => self.expr(ty, locals, env),
                    _ => true,
                }
            }
            Expr::Selector { base, .. } => self.expr(base, locals, env),
            Expr::Index { base, index, .. } => {
                self.expr(base, locals, env) && self.expr(index, locals, env)
            }
            Expr::Slice { base, lo, hi, .. } => {
                self.expr(base, locals, env)
                    && lo.as_deref().is_none_or(|lo| self.expr(lo, locals, env))
                    && hi.as_deref().is_none_or(|hi| self.expr(hi, locals, env))
            }
            Expr::Call { func, args, .. } => {
                self.expr(func, locals, env) && args.iter().all(|arg| self.expr(arg, locals, env))
            }
            Expr::Unary { operand, .. } => self.expr(operand, locals, env),
            Expr::Binary { lhs, rhs, .. } => {
                self.expr(lhs, locals, env) && self.expr(rhs, locals, env)
            }
            Expr::Paren(inner, _) => self.expr(inner, locals, env),
        }
    }

    fn struct_lit(&mut self, lit: &'a StructLit, locals: &mut Vec<Local<'a>>, env: EnvId) -> bool {
        self.decls(&lit.decls, locals, env)
    }

    /// A struct body: its field names, aliases and lets are in scope for all of it. Optional
    /// fields are in scope too, but referring to one depends on when it is read (see
    /// `Engine::eval_ident`), so such a reference makes the body ineligible.
    fn decls(&mut self, decls: &'a [Decl], locals: &mut Vec<Local<'a>>, env: EnvId) -> bool {
        let mark = locals.len();
        for decl in decls {
            match decl {
                Decl::Field(field) => {
                    let eligible = field.constraint != FieldConstraint::Optional;
                    match &field.label {
                        Label::Ident(ident) => locals.push((&ident.name, eligible)),
                        Label::Alias(_, inner) if matches!(inner.as_ref(), Label::Pattern(..)) => {}
                        Label::Alias(alias, inner) => {
                            locals.push((&alias.name, eligible));
                            if let Label::Ident(ident) = inner.as_ref() {
                                locals.push((&ident.name, eligible));
                            }
                        }
                        Label::String(..) | Label::Dynamic(..) | Label::Pattern(..) => {}
                    }
                }
                Decl::Let(lc) => locals.push((&lc.name.name, true)),
                _ => {}
            }
        }
        let eligible = decls.iter().all(|decl| match decl {
            Decl::Field(field) => self.field(field, locals, env),
            Decl::Let(lc) => self.expr(&lc.value, locals, env),
            Decl::Embed(expr) => self.expr(expr, locals, env),
            Decl::Comprehension(comp) => self.comprehension(comp, locals, env),
            Decl::Ellipsis(Some(ty), _) => self.expr(ty, locals, env),
            Decl::Ellipsis(None, _) | Decl::Attribute(_) => true,
        });
        locals.truncate(mark);
        eligible
    }

    fn field(&mut self, field: &'a Field, locals: &mut Vec<Local<'a>>, env: EnvId) -> bool {
        let label_expr = match &field.label {
            Label::Dynamic(expr, _) | Label::Pattern(expr, _) => Some(expr.as_ref()),
            Label::Alias(_, inner) => match inner.as_ref() {
                Label::Dynamic(expr, _) | Label::Pattern(expr, _) => Some(expr.as_ref()),
                _ => None,
            },
            Label::Ident(_) | Label::String(..) => None,
        };
        if let Some(expr) = label_expr
            && !self.expr(expr, locals, env)
        {
            return false;
        }
        let mark = locals.len();
        // Aliases of the label or the value name something of this field only.
        if let Some(alias) = &field.label_expr_alias {
            locals.push((&alias.name, true));
        }
        if let Label::Alias(alias, inner) = &field.label
            && matches!(inner.as_ref(), Label::Pattern(..))
        {
            locals.push((&alias.name, true));
        }
        if let Some(alias) = &field.value_alias {
            locals.push((&alias.name, true));
        }
        let eligible = self.expr(&field.value, locals, env);
        locals.truncate(mark);
        eligible
    }

    fn comprehension(
        &mut self,
        comp: &'a Comprehension,
        locals: &mut Vec<Local<'a>>,
        env: EnvId,
    ) -> bool {
        let mark = locals.len();
        let mut eligible = true;
        for clause in &comp.clauses {
            eligible = match clause {
                Clause::For {
                    key, value, source, ..
                } => {
                    let ok = self.expr(source, locals, env);
                    if let Some(key) = key {
                        locals.push((&key.name, true));
                    }
                    locals.push((&value.name, true));
                    ok
                }
                Clause::If { condition, .. } => self.expr(condition, locals, env),
                Clause::Let(lc) => {
                    let ok = self.expr(&lc.value, locals, env);
                    locals.push((&lc.name.name, true));
                    ok
                }
            };
            if !eligible {
                break;
            }
        }
        eligible = eligible && self.struct_lit(&comp.body, locals, env);
        locals.truncate(mark);
        eligible
    }

    /// A name not bound inside the walked conjuncts, resolved through their environment the
    /// way `Engine::resolve_ident` does.
    fn free(&mut self, name: &str, env: EnvId) -> bool {
        let engine = self.engine;
        let mut cur = Some(env);
        while let Some(e) = cur {
            let scope = &engine.envs[e as usize];
            match &scope.kind {
                EnvKind::Struct { vertex, decls } => {
                    let declared = decls.iter().any(|decl| match decl {
                        Decl::Field(field) => match &field.label {
                            Label::Ident(ident) => ident.name == name,
                            Label::Alias(_, inner)
                                if matches!(inner.as_ref(), Label::Pattern(..)) =>
                            {
                                false
                            }
                            Label::Alias(alias, inner) => {
                                alias.name == name
                                    || matches!(inner.as_ref(), Label::Ident(i) if i.name == name)
                            }
                            _ => false,
                        },
                        Decl::Let(lc) => lc.name.name == name,
                        _ => false,
                    });
                    if declared {
                        return *vertex == ROOT && self.root_definition(name, e);
                    }
                    if *vertex == ROOT
                        && engine
                            .sym_index
                            .get(name)
                            .is_some_and(|sym| engine.find_arc(ROOT, *sym).is_some())
                    {
                        return false;
                    }
                }
                EnvKind::Bind { name: bound, .. } | EnvKind::SelfAlias { name: bound, .. } => {
                    if *bound == name {
                        return false;
                    }
                }
                EnvKind::File { imports } => {
                    let imported = imports.iter().any(|import| {
                        import
                            .alias
                            .as_ref()
                            .map(|a| a.name.as_str())
                            .unwrap_or_else(|| super::super::compile::default_name(&import.path))
                            == name
                    });
                    if imported {
                        return true;
                    }
                }
            }
            cur = scope.parent;
        }
        // Predeclared (`string`, `int`, `len`, ...) or an unknown name: the same in every
        // evaluation either way.
        true
    }

    /// Whether top-level definition `name` (declared in the root struct environment
    /// `root_env`) is independent of the data: declared only by plain regular fields of the
    /// one file, none of which refers to data, and no top-level comprehension, embedding or
    /// dynamic label could add to it.
    fn root_definition(&mut self, name: &str, root_env: EnvId) -> bool {
        let engine = self.engine;
        let Some(decls) = engine.schema_root_decls else {
            return false;
        };
        if !is_definition(name) {
            return false;
        }
        if self.visiting.contains(&name) {
            return true;
        }
        let open_ended = decls.iter().any(|decl| match decl {
            Decl::Embed(_) | Decl::Comprehension(_) => true,
            Decl::Field(field) => !matches!(&field.label, Label::Ident(_) | Label::String(..)),
            _ => false,
        });
        if open_ended {
            return false;
        }
        let fields: Vec<&'a Field> = decls
            .iter()
            .filter_map(|decl| match decl {
                Decl::Field(field) if matches!(&field.label, Label::Ident(i) if i.name == name) => {
                    Some(field)
                }
                _ => None,
            })
            .collect();
        let Some(first) = fields.first() else {
            return false;
        };
        let Label::Ident(ident) = &first.label else {
            return false;
        };
        self.visiting.push(&ident.name);
        let eligible = fields.iter().all(|field| {
            field.constraint == FieldConstraint::Regular && {
                let mut locals = Vec::new();
                self.field(field, &mut locals, root_env)
            }
        });
        self.visiting.pop();
        eligible
    }
}
