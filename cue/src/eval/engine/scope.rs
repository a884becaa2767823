//! Identifier resolution: walking the lexical environments to a declaration, `let` vertices,
//! imports, and the per-thread tables that remember each identifier's answer ([`Hops`],
//! [`DeclIndex`]).

use std::collections::HashMap;

use crate::ast::{Decl, Label};
use crate::eval::val::Atom;
use crate::{Error, ErrorKind, ast};

use super::symbols::FxBuild;
use super::{Close, ConjKind, Engine, Env, EnvId, EnvKind, FieldKind, ROOT, Resolved, Sym, VId};

/// How each identifier of a file resolved, by (file identity, address of the identifier):
/// which environment answered, counted from the one the identifier is evaluated in, and what
/// it found there. Scoping is lexical: an identifier is always evaluated in an environment
/// chain of the same shape (one environment per enclosing struct body, comprehension binding
/// and alias, see [`Engine::new_env`]'s callers), so the same environment answers in every
/// evaluation of the file, and the walk that looked at each scope on the way (a hashed
/// declaration lookup per struct, the label interned) is done once per thread. Only what is
/// static is kept: a field's symbol (so it travels with the symbol table in [`Symbols`]), a
/// `let`'s declaration; the root's injected fields are looked up in every evaluation.
pub(super) type Hops = HashMap<(u64, usize), Hop, FxBuild>;

/// One [`Hops`] entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hop {
    /// Environments to go up from the identifier's own.
    up: u32,
    /// The answering environment's declarations or bound name (address), checked on use.
    scope: usize,
    found: Found,
}

/// What the environment of a [`Hop`] answers.
#[derive(Debug, Clone, Copy)]
enum Found {
    /// A field of the struct: its label.
    Field(Sym),
    /// The `let` declaration at this index of the struct's declarations.
    Let(u32),
    /// A comprehension binding or label alias.
    Bind,
    /// A value alias (see [`EnvKind::SelfAlias`]).
    SelfAlias,
    /// The root struct, which does not declare the name: an injected field of that label
    /// if the root has one, else the walk goes on from the next environment out.
    Root(Sym),
}

/// Where each identifier is declared in a struct's declarations, by (file identity, address of
/// the declarations, address and length of the identifier's name in the AST): see
/// [`Engine::declaration_of`]. The file's identity (`ast::CompileChecks`) is never shared by
/// another file, so an entry of a dropped file is never hit again, even if its memory is
/// reused. Kept per thread, taken over by each evaluation and handed back, like [`Symbols`].
pub(super) type DeclIndex = HashMap<(u64, usize, Scope, usize, usize), u32, FxBuild>;

/// What a [`DeclIndex`] entry searched: a struct's declarations or the file's imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Scope {
    Decls,
    Imports,
}

thread_local! {
    pub(super) static DECL_INDEX: std::cell::RefCell<DeclIndex> =
        const { std::cell::RefCell::new(HashMap::with_hasher(FxBuild)) };
}

/// Entries kept per thread before the index starts over (templates come and go in a
/// long-running process).
pub(super) const MAX_DECL_INDEX: usize = 1 << 16;

/// [`DeclIndex`]'s value for "no declaration of that name here".
const NO_DECLARATION: u32 = u32::MAX;

impl<'a> Engine<'a> {
    /// The index of the declaration in `decls` that binds `name` (a field label or alias, or
    /// a `let`), as CUE's scoping finds it: the first one. A pure function of the two, so for
    /// a single-file evaluation it is remembered per thread under the file's identity (see
    /// [`DeclIndex`]): the same template resolves the same identifiers on every evaluation.
    fn declaration_of(&mut self, decls: &'a [Decl], name: &'a str) -> Option<usize> {
        let scope = (decls.as_ptr() as usize, Scope::Decls);
        self.remembered(scope, name, || find_declaration(decls, name))
    }

    /// The index of the import in `imports` whose local name is `name` (remembered like
    /// [`Engine::declaration_of`]: every predeclared identifier, such as `string`, walks the
    /// imports too).
    fn import_of(&mut self, imports: &'a [ast::Import], name: &'a str) -> Option<usize> {
        let scope = (imports.as_ptr() as usize, Scope::Imports);
        self.remembered(scope, name, || {
            imports.iter().position(|import| {
                let local = import
                    .alias
                    .as_ref()
                    .map(|a| a.name.as_str())
                    .unwrap_or_else(|| crate::eval::compile::default_name(&import.path));
                local == name
            })
        })
    }

    /// `find()`, remembered in [`DeclIndex`] for a single-file evaluation.
    fn remembered(
        &mut self,
        (scope, kind): (usize, Scope),
        name: &'a str,
        find: impl FnOnce() -> Option<usize>,
    ) -> Option<usize> {
        let Some(uid) = self.file_uid else {
            return find();
        };
        let key = (uid, scope, kind, name.as_ptr() as usize, name.len());
        if let Some(&index) = self.decl_index.get(&key) {
            return (index != NO_DECLARATION).then_some(index as usize);
        }
        let found = find();
        match found.map(u32::try_from) {
            None => {
                self.decl_index.insert(key, NO_DECLARATION);
            }
            Some(Ok(index)) if index != NO_DECLARATION => {
                self.decl_index.insert(key, index);
            }
            // Too far down a (huge) struct to store: found again next time.
            Some(_) => {}
        }
        found
    }

    /// What `ident`, evaluated in `env`, refers to. For a single file, the environment that
    /// answered and its static answer are remembered per identifier (see [`Hops`]), so the
    /// next evaluation goes straight there.
    pub(super) fn resolve_ident(&mut self, ident: &'a ast::Ident, env: EnvId) -> Resolved {
        let name = ident.name.as_str();
        let Some(uid) = self.file_uid else {
            return self.walk_scopes(name, Some(env), None).0;
        };
        let key = (uid, ident as *const ast::Ident as usize);
        if let Some(hop) = self.hops.get(&key).copied()
            && let Some(resolved) = self.follow(hop, name, env)
        {
            #[cfg(debug_assertions)]
            {
                // Tests check the lexical-scoping assumption against the full walk.
                let walked = self.walk_scopes(name, Some(env), None).0;
                debug_assert!(
                    same_resolution(&resolved, &walked),
                    "remembered resolution of {name} differs from the walk"
                );
            }
            return resolved;
        }
        let (resolved, hop) = self.walk_scopes(name, Some(env), None);
        if let Some(hop) = hop {
            self.hops.insert(key, hop);
        }
        resolved
    }

    /// Resolves `name` from environment `env` with a remembered [`Hop`]; `None` when the
    /// environment found there is not the one remembered (then the caller walks).
    fn follow(&mut self, hop: Hop, name: &'a str, env: EnvId) -> Option<Resolved> {
        let mut e = env;
        let mut below: Option<VId> = None;
        for _ in 0..hop.up {
            let Env { parent, kind } = self.envs[e as usize];
            if let EnvKind::Struct { vertex, .. } = kind {
                below = Some(vertex);
            }
            e = parent?;
        }
        let Env { parent, kind } = self.envs[e as usize];
        match (kind, hop.found) {
            (EnvKind::Struct { vertex, decls }, Found::Field(sym))
                if decls.as_ptr() as usize == hop.scope =>
            {
                let arc = self
                    .find_arc(vertex, sym)
                    .unwrap_or_else(|| self.arc(vertex, sym));
                Some(Resolved::Field(arc))
            }
            (EnvKind::Struct { vertex, decls }, Found::Let(index))
                if decls.as_ptr() as usize == hop.scope =>
            {
                match decls.get(index as usize) {
                    Some(Decl::Let(lc)) => Some(self.let_vertex(lc, name, e, vertex)),
                    _ => None,
                }
            }
            (
                EnvKind::Bind {
                    name: bound,
                    vertex,
                },
                Found::Bind,
            ) if bound.as_ptr() as usize == hop.scope => Some(Resolved::Vertex(vertex)),
            (
                EnvKind::SelfAlias {
                    name: bound,
                    vertex,
                },
                Found::SelfAlias,
            ) if bound.as_ptr() as usize == hop.scope => {
                Some(Resolved::Vertex(below.unwrap_or(vertex)))
            }
            (EnvKind::Struct { vertex, decls }, Found::Root(sym))
                if vertex == ROOT && decls.as_ptr() as usize == hop.scope =>
            {
                if let Some(arc) = self.find_arc(ROOT, sym) {
                    return Some(Resolved::Field(arc));
                }
                Some(self.walk_scopes(name, parent, Some(vertex)).0)
            }
            _ => None,
        }
    }

    /// The vertex of `let` clause `lc` of the struct environment `e` (of `vertex`), made on
    /// first use.
    fn let_vertex(
        &mut self,
        lc: &'a ast::LetClause,
        name: &'a str,
        e: EnvId,
        vertex: VId,
    ) -> Resolved {
        let key = (e, lc as *const ast::LetClause as usize);
        if let Some(v) = self.lets.get(&key) {
            return Resolved::Vertex(*v);
        }
        let let_label = self.intern_ast(name);
        let lv = self.new_vertex(Some(vertex), let_label);
        self.vm(lv).field = FieldKind::Regular;
        self.add_conj(lv, ConjKind::Expr(&lc.value), e, Close::Open, 0, false);
        self.lets.insert(key, lv);
        Resolved::Vertex(lv)
    }

    /// Resolves `name` by walking the environments out from `start` (`below`: the vertex of
    /// the innermost struct environment already walked), looking at each scope. Also returns
    /// the [`Hop`] that leads to the same answer in a later evaluation, when it is static.
    fn walk_scopes(
        &mut self,
        name: &'a str,
        start: Option<EnvId>,
        mut below: Option<VId>,
    ) -> (Resolved, Option<Hop>) {
        let mut cur = start;
        let mut up = 0u32;
        // The root struct that did not declare the name, where a later evaluation looks for
        // an injected field first.
        let mut root_hop: Option<Hop> = None;
        while let Some(e) = cur {
            let Env { parent, kind } = self.envs[e as usize];
            match kind {
                EnvKind::Struct { vertex, decls } => {
                    // The vertex of the innermost struct environment walked so far: what a
                    // `SelfAlias` directly above it names.
                    below = Some(vertex);
                    let scope = decls.as_ptr() as usize;
                    if let Some(index) = self.declaration_of(decls, name) {
                        match &decls[index] {
                            Decl::Field(field) => {
                                let (sym, static_label) =
                                    match self.field_label_sym(&field.label, e) {
                                        Ok(label) => label,
                                        Err(resolved) => return (resolved, None),
                                    };
                                let arc = self
                                    .find_arc(vertex, sym)
                                    .unwrap_or_else(|| self.arc(vertex, sym));
                                let hop = (static_label && root_hop.is_none()).then_some(Hop {
                                    up,
                                    scope,
                                    found: Found::Field(sym),
                                });
                                return (Resolved::Field(arc), hop.or(root_hop));
                            }
                            Decl::Let(lc) => {
                                let hop = match u32::try_from(index) {
                                    Ok(index) if root_hop.is_none() => Some(Hop {
                                        up,
                                        scope,
                                        found: Found::Let(index),
                                    }),
                                    _ => root_hop,
                                };
                                return (self.let_vertex(lc, name, e, vertex), hop);
                            }
                            _ => {}
                        }
                    }
                    if vertex == ROOT {
                        let sym = self.intern_ast(name);
                        if root_hop.is_none() {
                            root_hop = Some(Hop {
                                up,
                                scope,
                                found: Found::Root(sym),
                            });
                        }
                        if let Some(arc) = self.find_arc(ROOT, sym) {
                            return (Resolved::Field(arc), root_hop);
                        }
                    }
                }
                EnvKind::Bind {
                    name: bound,
                    vertex,
                } => {
                    if bound == name {
                        let hop = root_hop.or(Some(Hop {
                            up,
                            scope: bound.as_ptr() as usize,
                            found: Found::Bind,
                        }));
                        return (Resolved::Vertex(vertex), hop);
                    }
                }
                EnvKind::SelfAlias {
                    name: bound,
                    vertex,
                } => {
                    if bound == name {
                        let hop = root_hop.or(Some(Hop {
                            up,
                            scope: bound.as_ptr() as usize,
                            found: Found::SelfAlias,
                        }));
                        return (Resolved::Vertex(below.unwrap_or(vertex)), hop);
                    }
                }
                EnvKind::File { imports } => {
                    if let Some(import) = self.import_of(imports, name).map(|i| &imports[i]) {
                        let resolved = match crate::eval::builtins::package(&import.path) {
                            Some(pkg) => Resolved::Pkg(pkg),
                            None => Resolved::Unsupported(format!("import \"{}\"", import.path)),
                        };
                        return (resolved, root_hop);
                    }
                }
            }
            cur = parent;
            up += 1;
        }
        (Resolved::Unsupported(String::new()), root_hop)
    }

    /// The symbol of the field a `X=label: value` alias names, and whether it is static
    /// (interned by address, no string built per reference); a dynamic label is evaluated in
    /// `e`. `Err` is what the alias resolves to when the label is not a string.
    fn field_label_sym(
        &mut self,
        field_label: &'a Label,
        e: EnvId,
    ) -> Result<(Sym, bool), Resolved> {
        let label = match field_label {
            Label::Alias(_, inner) => inner.as_ref(),
            other => other,
        };
        // Static labels are interned by address (no string built per
        // reference).
        let sym = match label {
            Label::Ident(id) => (self.intern_ast(&id.name), true),
            Label::String(s, _) => (self.intern_ast(s), true),
            Label::Dynamic(expr, _) => {
                // `X=(expr): value`: the field the label evaluates to.
                let r = self.eval_expr(expr, e);
                match self.concrete(r, expr.span()) {
                    Ok(Atom::Str(s)) => (self.intern(&s), false),
                    Ok(other) => {
                        let error = Error::new(
                            ErrorKind::Conflict,
                            format!("invalid label {}: label must be a string", other.cue_text()),
                            expr.span(),
                        );
                        return Err(Resolved::Error(error));
                    }
                    Err(error) => return Err(Resolved::Error(error)),
                }
            }
            _ => {
                let what = "nested label alias".to_owned();
                return Err(Resolved::Unsupported(what));
            }
        };
        Ok(sym)
    }
}

/// The first declaration of `decls` binding `name` (see [`Engine::declaration_of`]).
fn find_declaration(decls: &[Decl], name: &str) -> Option<usize> {
    decls.iter().position(|decl| match decl {
        Decl::Field(field) => match &field.label {
            // `X=[expr]: value` binds `X` only within `value`.
            Label::Alias(_, inner) if matches!(inner.as_ref(), Label::Pattern(..)) => false,
            Label::Alias(alias, inner) => {
                alias.name == name || matches!(inner.as_ref(), Label::Ident(id) if id.name == name)
            }
            Label::Ident(id) => id.name == name,
            _ => false,
        },
        Decl::Let(lc) => lc.name.name == name,
        _ => false,
    })
}

/// Whether two resolutions of one identifier are the same (the check of [`Hops`] in debug
/// builds).
#[cfg(debug_assertions)]
fn same_resolution(a: &Resolved, b: &Resolved) -> bool {
    match (a, b) {
        (Resolved::Vertex(a), Resolved::Vertex(b)) | (Resolved::Field(a), Resolved::Field(b)) => {
            a == b
        }
        (Resolved::Error(a), Resolved::Error(b)) => a.message == b.message,
        (Resolved::Pkg(a), Resolved::Pkg(b)) => a == b,
        (Resolved::Unsupported(a), Resolved::Unsupported(b)) => a == b,
        _ => false,
    }
}
