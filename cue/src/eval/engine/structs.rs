//! Struct literals: their declarations and fields, the environments of field aliases, pattern
//! constraints, JSON data, and the closedness groups they add to a vertex.

use smallvec::SmallVec;

use crate::ast::{Decl, Expr, FieldConstraint, Label};
use crate::eval::val::{Atom, Shape};
use crate::exported::KindSet;
use crate::span::Span;
use crate::{Error, ErrorKind, ast};

use super::values::json_atom;
use super::{
    Close, ConjKind, Engine, EnvId, EnvKind, FieldKind, Group, Pattern, PatternMatch, Pending, R,
    Sym, VId, is_definition, is_hidden, quoted_label_error,
};

impl<'a> Engine<'a> {
    #[inline]
    pub(super) fn mark_struct(&mut self, v: VId, span: Span) {
        self.vm(v).is_struct = true;
        if let Err(c) = self.vm(v).shape.add_kinds(KindSet::STRUCT, span) {
            self.conflict(v, c);
        }
    }

    #[inline]
    pub(super) fn child_close(close: Close) -> Close {
        if close == Close::Deep {
            Close::Deep
        } else {
            Close::Open
        }
    }

    #[inline]
    pub(super) fn mark_in_definition(&mut self, v: VId, g: u32, in_definition: bool) {
        if let Some(group) = self.vm(v).group_mut(g) {
            group.in_definition = in_definition;
        }
    }

    #[inline]
    pub(super) fn new_group(&mut self, v: VId, closed: bool) -> u32 {
        let rare = self.vm(v).rare_mut();
        rare.groups.push(Group {
            closed,
            ..Group::default()
        });
        rare.groups.len() as u32
    }

    /// The group a struct body joins: the embedding's group, the vertex's definition group,
    /// or a new one.
    fn body_group(&mut self, v: VId, close: Close, grp: u32, needs_group: bool) -> u32 {
        if grp != 0 {
            if close != Close::Open
                && let Some(g) = self.vm(v).group_mut(grp)
            {
                g.closed = true;
            }
            return grp;
        }
        match close {
            Close::Deep => {
                if self.v(v).deep_group() == 0 {
                    let g = self.new_group(v, true);
                    self.vm(v).rare_mut().deep_group = g;
                }
                self.v(v).deep_group()
            }
            Close::Shallow => self.new_group(v, true),
            Close::Open if needs_group => self.new_group(v, false),
            Close::Open => 0,
        }
    }

    pub(super) fn process_decls(
        &mut self,
        v: VId,
        decls: &'a [Decl],
        span: Span,
        env: EnvId,
        close: Close,
        grp: u32,
    ) {
        let env = self.new_env(Some(env), EnvKind::Struct { vertex: v, decls });
        // What the body holds, in one pass over its declarations.
        let (mut fields, mut ellipsis, mut has_embeds) = (0usize, false, false);
        for decl in decls {
            match decl {
                Decl::Field(_) => fields += 1,
                Decl::Ellipsis(..) => ellipsis = true,
                Decl::Embed(_) | Decl::Comprehension(_) => has_embeds = true,
                Decl::Let(_) | Decl::Attribute(_) => {}
            }
        }
        let has_fields = decls.is_empty() || fields > 0 || ellipsis;
        if has_fields {
            self.mark_struct(v, span);
        } else {
            self.vm(v).struct_hint = true;
        }
        let g = self.body_group(v, close, grp, has_embeds);
        let child = Self::child_close(close);
        // One allocation for the arcs of a struct literal instead of growing it field by field
        // (a field the vertex already has just leaves the room unused).
        self.vm(v).arcs.reserve(fields);
        // The same for the labels its group collects (every struct of a definition has one),
        // when this is the group's first body.
        if g != 0
            && let Some(group) = self.vm(v).group_mut(g)
            && group.labels.is_empty()
        {
            group.labels.reserve(fields);
        }
        let mut positions: SmallVec<[usize; 4]> = SmallVec::new();
        for decl in decls {
            match decl {
                Decl::Comprehension(_) => positions.push(self.v(v).arcs.len()),
                Decl::Field(field) => self.add_field(v, field, env, child, g),
                Decl::Ellipsis(Some(ty), span) if !matches!(ty, Expr::Top(_)) => {
                    let error = self.err(
                        v,
                        ErrorKind::Unsupported,
                        "unsupported: typed ellipsis in a struct (...T)",
                        vec![*span],
                    );
                    self.add_error(v, error);
                }
                Decl::Ellipsis(_, _) => {
                    if g != 0
                        && let Some(group) = self.vm(v).group_mut(g)
                    {
                        group.ellipsis = true;
                    }
                }
                Decl::Let(_) | Decl::Attribute(_) | Decl::Embed(_) => {}
            }
        }
        if !has_embeds {
            return;
        }
        let mut positions = positions.into_iter();
        for decl in decls {
            match decl {
                Decl::Embed(expr) => {
                    self.add_conj(v, ConjKind::Expr(expr), env, close, g, true);
                }
                Decl::Comprehension(comp) => {
                    self.vm(v).rare_mut().pending.push(Pending::Comprehension(
                        comp,
                        env,
                        close,
                        g,
                        positions.next().unwrap_or(usize::MAX),
                    ));
                }
                _ => {}
            }
        }
    }

    fn add_field(&mut self, v: VId, field: &'a ast::Field, env: EnvId, child: Close, g: u32) {
        let label = match &field.label {
            Label::Alias(_, inner) => inner.as_ref(),
            other => other,
        };
        let name: &str = match label {
            Label::Ident(ident) => &ident.name,
            Label::String(s, span) => {
                if let Some(error) = quoted_label_error(s, *span) {
                    let error = self.relocate(v, error);
                    self.add_error(v, error);
                    return;
                }
                s
            }
            Label::Dynamic(expr, _) => {
                let pos = self.v(v).arcs.len();
                self.vm(v)
                    .rare_mut()
                    .pending
                    .push(Pending::Dynamic(field, expr, env, child, g, pos));
                return;
            }
            Label::Pattern(expr, _) => {
                let matcher = self.pattern_matcher(expr, env);
                let pattern = Pattern {
                    matcher,
                    field,
                    value: &field.value,
                    env,
                    close: child,
                };
                let index = self.v(v).patterns().len();
                self.vm(v).rare_mut().patterns.push(pattern.clone());
                if g != 0
                    && let Some(group) = self.vm(v).group_mut(g)
                {
                    group.patterns.push(index);
                }
                let arcs = self.v(v).arcs.clone();
                for (sym, arc) in arcs {
                    let label = self.sym_text(sym);
                    if self.pattern_matches(&pattern.matcher, &label) {
                        let env = self.field_env(field, env, arc, sym);
                        self.add_conj(arc, ConjKind::Expr(pattern.value), env, child, 0, false);
                    }
                }
                return;
            }
            Label::Alias(_, _) => {
                let error = Error::new(
                    ErrorKind::Unsupported,
                    "unsupported: nested label alias",
                    field.span,
                );
                self.add_error(v, error);
                return;
            }
        };
        let sym = self.intern_ast(name);
        self.add_field_named(v, sym, field, env, child, g);
    }

    pub(super) fn add_field_named(
        &mut self,
        v: VId,
        sym: Sym,
        field: &'a ast::Field,
        env: EnvId,
        child: Close,
        g: u32,
    ) {
        let arc = self.arc(v, sym);
        let kind = match field.constraint {
            FieldConstraint::Regular => FieldKind::Regular,
            FieldConstraint::Optional => FieldKind::Optional,
            FieldConstraint::Required => FieldKind::Required,
        };
        let close = if is_definition(self.sym(sym)) {
            Close::Deep
        } else {
            child
        };
        {
            let vertex = self.vm(arc);
            vertex.field = vertex.field.max(kind);
            let pos = (u64::from(field.span.file.0) << 32) | u64::from(field.span.start);
            vertex.pos = vertex.pos.min(pos);
            vertex.decl_span.get_or_insert(field.span);
            let key = field as *const ast::Field as usize;
            if !field.doc.is_empty() && !vertex.docs.iter().any(|(k, _)| *k == key) {
                vertex.docs.push((key, &field.doc));
            }
        }
        if g != 0
            && let Some(group) = self.vm(v).group_mut(g)
            && !group.labels.contains(&sym)
        {
            group.labels.push(sym);
        }
        let env = self.field_env(field, env, arc, sym);
        self.add_conj(arc, ConjKind::Expr(&field.value), env, close, 0, false);
    }

    /// The environment a field's value is evaluated in, given the field's arc `arc` (label
    /// `sym`): `env` plus the aliases the field declares for its value. `[X=expr]: value` and
    /// `(X=expr): value` bind `X` to the concrete label; `X=[expr]: value` and
    /// `label: X=value` bind `X` to the value itself.
    pub(super) fn field_env(
        &mut self,
        field: &'a ast::Field,
        env: EnvId,
        arc: VId,
        sym: Sym,
    ) -> EnvId {
        let pattern_alias = matches!(&field.label, Label::Alias(_, inner)
            if matches!(inner.as_ref(), Label::Pattern(..)));
        if field.label_expr_alias.is_none() && field.value_alias.is_none() && !pattern_alias {
            return env;
        }
        let key = (env, field as *const ast::Field as usize, arc);
        if let Some(cached) = self.alias_envs.get(&key) {
            return *cached;
        }
        let outer = env;
        let mut env = env;
        if let Some(alias) = &field.label_expr_alias {
            let label = self.syms[sym as usize].clone();
            let label_vertex = self.atom_vertex(Atom::Str(label), alias.span);
            env = self.new_env(
                Some(env),
                EnvKind::Bind {
                    name: &alias.name,
                    vertex: label_vertex,
                },
            );
        }
        if let Label::Alias(alias, inner) = &field.label
            && matches!(inner.as_ref(), Label::Pattern(..))
        {
            env = self.new_env(
                Some(env),
                EnvKind::SelfAlias {
                    name: &alias.name,
                    vertex: arc,
                },
            );
        }
        if let Some(alias) = &field.value_alias {
            env = self.new_env(
                Some(env),
                EnvKind::SelfAlias {
                    name: &alias.name,
                    vertex: arc,
                },
            );
        }
        self.alias_envs.insert((outer, key.1, arc), env);
        env
    }

    fn pattern_matcher(&mut self, expr: &'a Expr, env: EnvId) -> PatternMatch {
        match self.eval_expr(expr, env) {
            R::Top => PatternMatch::Any,
            R::Kinds(kinds) if kinds.contains(KindSet::STRING) => PatternMatch::Any,
            R::Kinds(_) => PatternMatch::Never,
            R::Atom(atom) => {
                let mut shape = Shape::default();
                let _ = shape.add_atom(atom, Span::default());
                PatternMatch::Shape(shape)
            }
            R::Valid(validator) => {
                let mut shape = Shape::default();
                let _ = shape.add_validator(validator, Span::default());
                PatternMatch::Shape(shape)
            }
            R::V(v) => {
                self.eval_vertex(v);
                let v = self.deref(v);
                PatternMatch::Shape(self.v(v).shape.clone())
            }
            _ => PatternMatch::Never,
        }
    }

    pub(super) fn pattern_matches(&self, matcher: &PatternMatch, label: &str) -> bool {
        if is_hidden(label) || is_definition(label) {
            return false;
        }
        match matcher {
            PatternMatch::Any => true,
            PatternMatch::Never => false,
            PatternMatch::Shape(shape) => {
                let mut shape = shape.clone();
                shape.add_atom(Atom::str(label), Span::default()).is_ok() && shape.check().is_ok()
            }
        }
    }

    pub(super) fn process_json(&mut self, v: VId, json: &'a serde_json::Value, span: Span) {
        let env = 0;
        match json {
            serde_json::Value::Object(map) => {
                self.mark_struct(v, span);
                // Room for every key at once, as `process_decls` does for a struct literal.
                self.vm(v).arcs.reserve(map.len());
                for (key, value) in map {
                    if let Some(error) = quoted_label_error(key, span) {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                        continue;
                    }
                    let sym = self.intern(key);
                    let arc = self.arc(v, sym);
                    let vertex = self.vm(arc);
                    vertex.field = vertex.field.max(FieldKind::Regular);
                    self.add_conj(arc, ConjKind::Json(value, span), env, Close::Open, 0, false);
                }
            }
            serde_json::Value::Array(items) => {
                self.list_literal(v, span, items.len(), true);
                for (i, item) in items.iter().enumerate() {
                    let elem = self.list_elem(v, i);
                    self.add_conj(elem, ConjKind::Json(item, span), env, Close::Open, 0, false);
                }
            }
            scalar => {
                let atom = json_atom(scalar);
                if let Err(c) = self.vm(v).shape.add_atom(atom, span) {
                    self.conflict(v, c);
                }
            }
        }
    }
}
