//! The evaluation engine: an arena of vertices (one per value node), conjuncts with their
//! lexical environments, and the unification loop.
//!
//! Model (a simplified version of CUE's own `adt` package):
//! - A [`Vertex`] collects *conjuncts*: expressions together with the environment they were
//!   written in. Evaluating a vertex processes its conjuncts: struct literals add conjuncts to
//!   child arcs, scalars and types narrow its [`Shape`], references copy the conjuncts of the
//!   referenced vertex (so that `#D & {a: 2}` re-evaluates `#D`'s fields relative to the new
//!   value, as CUE does), and disjunctions are expanded into one vertex per alternative.
//! - Environments ([`Env`]) are the lexical scopes: a struct literal bound to the vertex it is
//!   evaluated into, or a comprehension/let binding. Identifiers resolve by walking them.
//! - Closedness is tracked per vertex by groups: the labels a closed conjunct (a definition, or
//!   `close()`) declares, its patterns and whether it has `...`.
//!
//! Everything lives in one arena per evaluation and is addressed by `u32` ids; after evaluation
//! the result is converted into an owned tree (see `node.rs`), so the AST borrow ends there.
//!
//! The engine is one `impl Engine` spread over files by job, each documented at its top:
//! - `symbols.rs`: label symbols and the per-thread tables; `Engine::new` and its drop.
//! - `arena.rs`: vertices, environments, budget, loading, errors, arcs, data vertices.
//! - `unify.rs`: the unification loop over a vertex's conjuncts, and references.
//! - `structs.rs`: struct literals, fields, aliases, pattern constraints, closedness groups.
//! - `lists.rs`: list literals, element types, indexing and slicing.
//! - `comprehension.rs`: comprehensions and dynamic fields.
//! - `disjunction.rs`: disjunction expansion and defaults.
//! - `finish.rs`: finishing a vertex (list checks, validators), errors and comparison.
//! - `scope.rs`: identifier resolution and its per-thread tables.
//! - `expr.rs`: expressions in value position (identifiers, selectors, indices).
//! - `operators.rs`: unary and binary operators, interpolation, calls.
//! - `values.rs`: reading results (defaults, concrete values, ordered fields).
//! - `pure.rs`: optional fields whose value cannot depend on the evaluation's data.

use smallvec::SmallVec;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;

use crate::ast::{self, Decl, Expr};
use crate::exported::KindSet;
use crate::span::Span;
use crate::{Error, ErrorKind};

mod arena;
mod comprehension;
mod disjunction;
mod expr;
mod finish;
mod lists;
mod operators;
mod pure;
mod scope;
mod structs;
mod symbols;
mod unify;
mod values;

#[cfg(test)]
mod tests;

pub use pure::SchemaKey;
pub use symbols::FxBuild;
pub use values::json_atom;

use super::budget::Meter;
use super::val::{Atom, Shape, Validator};
use scope::{DeclIndex, Hops};
use symbols::{AstSyms, Constants};

pub type VId = u32;

pub type EnvId = u32;

pub type Sym = u32;

/// Recursion limit of the evaluator (nested evaluations of references and expressions).
const MAX_EVAL_DEPTH: u32 = 300;

/// Depth of the value tree beyond which a structural cycle is assumed.
const MAX_TREE_DEPTH: u32 = 250;

/// Stack left before growing it, and the size of each new stack segment.
pub const STACK_RED_ZONE: usize = 256 * 1024;

pub const STACK_SEGMENT: usize = 4 * 1024 * 1024;

/// Largest string a repetition may build.
pub const MAX_STRING_LEN: usize = 1 << 24;

/// Initial vertex arena size when several files are evaluated together: the largest such
/// evaluation seen so far in this process, capped so one huge input does not make every later
/// evaluation reserve a large block. A single file keeps its own hint
/// (`ast::CompileChecks::vertex_hint`), so small templates do not reserve what large ones need.
static VERTEX_CAPACITY_HINT: AtomicUsize = AtomicUsize::new(64);

const MAX_VERTEX_CAPACITY_HINT: usize = 4096;

/// How closedness applies to a conjunct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    Open,
    /// `close({...})`: this level only.
    Shallow,
    /// Inside a definition: this level and everything below.
    Deep,
}

/// What a conjunct is. Kept to 24 bytes (the rare atoms and validators boxed, bodies by
/// reference to their node), so that two conjuncts fit inline in a vertex (see [`Conjs`]).
#[derive(Debug, Clone)]
pub enum ConjKind<'a> {
    Expr(&'a Expr),
    /// A comprehension body's declarations (a list comprehension's element).
    Body(&'a ast::StructLit),
    /// A file's declarations.
    File(&'a ast::File),
    Json(&'a serde_json::Value, Span),
    /// Unify with another vertex (a reference): its conjuncts are copied.
    Ref(VId, Span),
    Atom(Box<(Atom, Span)>),
    /// Data built by builtins: a struct of existing vertices.
    StructOf(Rc<Vec<(Sym, VId)>>, Span),
    /// Data built by builtins: a closed list of existing vertices.
    ListOf(Rc<Vec<VId>>, Span),
    Validator(Box<(Validator, Span)>),
    Kinds(KindSet, Span),
    /// A disjunction of existing vertices (`or([...])`), all alternatives unmarked.
    Or(Rc<Vec<VId>>, Span),
}

impl<'a> ConjKind<'a> {
    /// The declarations of a struct body conjunct.
    #[inline]
    pub fn decls(&self) -> Option<&'a [Decl]> {
        match self {
            ConjKind::Body(lit) => Some(&lit.decls),
            ConjKind::File(file) => Some(&file.decls),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Conj<'a> {
    pub kind: ConjKind<'a>,
    pub env: EnvId,
    pub close: Close,
    /// Closedness group in the vertex (0: none).
    pub grp: u32,
    /// Produced by processing another conjunct of the same vertex (not copied by references).
    pub derived: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FieldKind {
    Optional,
    Required,
    Regular,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    New,
    Running,
    Done,
}

#[derive(Debug, Clone, Default)]
struct Group {
    closed: bool,
    ellipsis: bool,
    /// Made for a definition referenced from within a definition (its conjunct was already
    /// closed deeply before naming the definition). The definition's own literal structs (the
    /// vertex's deep group) then allow its fields too: a definition is closed over everything
    /// its conjuncts declare.
    in_definition: bool,
    labels: Vec<Sym>,
    patterns: Vec<usize>,
}

#[derive(Debug, Clone)]
struct Pattern<'a> {
    matcher: PatternMatch,
    /// The pattern constraint's declaration, for its aliases.
    field: &'a ast::Field,
    value: &'a Expr,
    env: EnvId,
    close: Close,
}

#[derive(Debug, Clone)]
enum PatternMatch {
    Any,
    Shape(Shape),
    Never,
}

#[derive(Debug, Clone)]
enum Pending<'a> {
    /// The last field is where the produced fields go in the arc order (source order).
    Comprehension(&'a ast::Comprehension, EnvId, Close, u32, usize),
    Dynamic(&'a ast::Field, &'a Expr, EnvId, Close, u32, usize),
}

impl<'a> Pending<'a> {
    /// Where the item's fields go in the arc order.
    #[inline]
    fn pos(&self) -> usize {
        match self {
            Pending::Comprehension(.., pos) | Pending::Dynamic(.., pos) => *pos,
        }
    }

    /// The same item, inserting its fields at `pos`.
    #[inline]
    fn at(self, pos: usize) -> Pending<'a> {
        match self {
            Pending::Comprehension(comp, env, close, grp, _) => {
                Pending::Comprehension(comp, env, close, grp, pos)
            }
            Pending::Dynamic(field, expr, env, close, grp, _) => {
                Pending::Dynamic(field, expr, env, close, grp, pos)
            }
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ListState<'a> {
    pub elems: Vec<VId>,
    closed_len: Option<(usize, Span)>,
    types: Vec<Conj<'a>>,
}

/// A vertex's conjuncts, the first two stored inline: the average vertex has 1.2 of them
/// (the 1,000-app render bench), but a third of the vertices get a second one (a reference
/// copies its target's), and moving them to the heap was one allocation (and one free) each.
type Conjs<'a> = SmallVec<[Conj<'a>; 2]>;

#[derive(Debug, Clone)]
pub struct Vertex<'a> {
    pub parent: Option<VId>,
    pub label: Sym,
    pub field: FieldKind,
    conjs: Conjs<'a>,
    cursor: usize,
    state: State,
    pub shape: Shape,
    pub is_struct: bool,
    pub struct_hint: bool,
    pub arcs: Vec<(Sym, VId)>,
    /// Boxed: most vertices are no list, and an inline `ListState` made every vertex larger
    /// and its drop longer (~300 K vertices dropped per 1,000 apps).
    pub list: Option<Box<ListState<'a>>>,
    /// Disjunctions, pending items, patterns and closedness groups, which few vertices have.
    rare: Option<Box<Rare<'a>>>,
    pub errors: Vec<Error>,
    /// Incomplete errors of comprehensions (their source or condition not yet known): the
    /// comprehension adds no fields, the struct keeps the others (see `Node::Struct`).
    pub incomplete: Vec<Error>,
    pub forward: Option<VId>,
    /// The vertex this one is a disjunction alternative of (see `clone_state`): a reference
    /// to it from inside this one is a structural cycle, as a reference to an ancestor is.
    origin: Option<VId>,
    /// Remaining alternatives of an unresolved disjunction, with their default marks.
    pub alts: Option<Vec<(VId, bool)>>,
    /// Doc comments of the field declarations, usually one (`// +usage=` on every
    /// parameter field of a template): kept inline.
    pub docs: SmallVec<[(usize, &'a [String]); 1]>,
    pub depth: u32,
    /// Source position (file, offset) of the earliest field declaration defining this arc;
    /// `u64::MAX` for data (JSON, builtin results). Fields are ordered by it.
    pos: u64,
    /// The arc was first made by a comprehension's body (`if c { x: 1 }`), which CUE orders
    /// apart from the struct's own fields (see [`Engine::ordered_arcs`]).
    from_comprehension: bool,
    /// The first field declaration defining this arc (label included), for closedness errors.
    decl_span: Option<Span>,
    /// The span of the first conjunct, for errors about the vertex as a whole.
    pub span: Span,
}

/// The parts of a [`Vertex`] that few vertices use, behind one box: each vertex of every
/// evaluation is created and dropped, and empty vectors still cost their space and their drop
/// (render/1000_apps: ~416 K vertices per 1,000 apps, few with disjunctions, comprehensions or
/// pattern constraints).
#[derive(Debug, Clone, Default)]
struct Rare<'a> {
    /// Disjunctions not yet expanded (a vertex usually has one: inline, no second allocation
    /// after the box's).
    disjs: SmallVec<[Conj<'a>; 1]>,
    pending: SmallVec<[Pending<'a>; 2]>,
    patterns: Vec<Pattern<'a>>,
    /// Closedness groups: a struct of a definition has one (kept inline), most vertices
    /// none (here rather than in every vertex: one drop less per vertex).
    groups: SmallVec<[Group; 1]>,
    /// The group of the vertex's deeply closed (definition) conjuncts, 0 if none.
    deep_group: u32,
}

impl Rare<'_> {
    #[inline]
    fn is_empty(&self) -> bool {
        self.disjs.is_empty()
            && self.pending.is_empty()
            && self.patterns.is_empty()
            && self.groups.is_empty()
            && self.deep_group == 0
    }
}

impl<'a> Vertex<'a> {
    #[inline]
    fn disjs(&self) -> &[Conj<'a>] {
        self.rare.as_ref().map_or(&[], |r| &r.disjs)
    }

    #[inline]
    fn pending(&self) -> &[Pending<'a>] {
        self.rare.as_ref().map_or(&[], |r| &r.pending)
    }

    #[inline]
    fn patterns(&self) -> &[Pattern<'a>] {
        self.rare.as_ref().map_or(&[], |r| &r.patterns)
    }

    #[inline]
    fn groups(&self) -> &[Group] {
        self.rare.as_ref().map_or(&[], |r| &r.groups)
    }

    /// Group `g` (1-based, as conjuncts number them).
    #[inline]
    fn group_mut(&mut self, g: u32) -> Option<&mut Group> {
        let rare = self.rare.as_mut()?;
        rare.groups.get_mut((g as usize).wrapping_sub(1))
    }

    #[inline]
    fn deep_group(&self) -> u32 {
        self.rare.as_ref().map_or(0, |r| r.deep_group)
    }

    #[inline]
    fn rare_mut(&mut self) -> &mut Rare<'a> {
        self.rare.get_or_insert_with(Box::default)
    }

    #[inline]
    fn take_disjs(&mut self) -> SmallVec<[Conj<'a>; 1]> {
        self.rare
            .as_mut()
            .map(|r| std::mem::take(&mut r.disjs))
            .unwrap_or_default()
    }

    #[inline]
    fn take_pending(&mut self) -> SmallVec<[Pending<'a>; 2]> {
        self.rare
            .as_mut()
            .map(|r| std::mem::take(&mut r.pending))
            .unwrap_or_default()
    }

    #[inline]
    fn new(parent: Option<VId>, label: Sym, depth: u32) -> Vertex<'a> {
        Vertex {
            parent,
            label,
            field: FieldKind::Optional,
            conjs: Conjs::new(),
            cursor: 0,
            state: State::New,
            shape: Shape::default(),
            is_struct: false,
            struct_hint: false,
            arcs: Vec::new(),
            list: None,
            rare: None,
            errors: Vec::new(),
            incomplete: Vec::new(),
            forward: None,
            origin: None,
            alts: None,
            docs: SmallVec::new(),
            depth,
            pos: u64::MAX,
            from_comprehension: false,
            decl_span: None,
            span: Span::default(),
        }
    }
}

/// `Copy`: every identifier's resolution reads the environments it walks by value.
#[derive(Debug, Clone, Copy)]
enum EnvKind<'a> {
    Struct {
        vertex: VId,
        decls: &'a [Decl],
    },
    Bind {
        name: &'a str,
        vertex: VId,
    },
    /// A value alias (`label: X=value`) or a pattern's field alias (`X=[expr]: value`): `X`
    /// names the value the conjunct is evaluated into. That is the vertex of the struct
    /// environment directly below this one (so a copy made by a reference, `b: a`, sees
    /// itself, as in CUE); `vertex` is the field the alias was declared on, used when the
    /// value is not a struct.
    SelfAlias {
        name: &'a str,
        vertex: VId,
    },
    File {
        imports: &'a [ast::Import],
    },
}

#[derive(Debug, Clone, Copy)]
struct Env<'a> {
    parent: Option<EnvId>,
    kind: EnvKind<'a>,
}

/// The result of evaluating an expression in value position.
#[derive(Debug, Clone)]
pub enum R {
    Atom(Atom),
    V(VId),
    Kinds(KindSet),
    Valid(Validator),
    Top,
    Err(Error),
    /// An imported package (`strings`).
    Pkg(&'static str),
    /// A package member that is a function (`strings.Join`), or a predeclared function.
    Func(&'static str),
}

/// What an identifier resolves to.
enum Resolved {
    Vertex(VId),
    /// A field of an enclosing struct (rather than a let, alias or comprehension binding).
    Field(VId),
    Error(Error),
    Pkg(&'static str),
    Unsupported(String),
}

/// One evaluation's state.
pub struct Engine<'a> {
    pub vs: Vec<Vertex<'a>>,
    envs: Vec<Env<'a>>,
    pub syms: Vec<Rc<str>>,
    sym_index: HashMap<Rc<str>, Sym, FxBuild>,
    /// Symbols of label strings borrowed from the AST, keyed by the file's identity, address
    /// and length (see [`AstSyms`]).
    ast_syms: AstSyms,
    /// The file identity [`Engine::intern_ast`] keys by: the one file evaluated, or 0 for
    /// several files, whose labels go to a table of this evaluation only.
    ast_uid: u64,
    /// The thread's [`AstSyms`] and [`Constants`], set aside while a several-file evaluation
    /// uses its own.
    ast_syms_saved: Option<(AstSyms, Constants)>,
    /// Symbols of list indices `0`, `1`, … (interned without formatting the number each time).
    index_syms: Vec<Sym>,
    lets: HashMap<(EnvId, usize), VId, FxBuild>,
    /// The environment [`Engine::field_env`] made for (outer environment, field, arc), reused
    /// so that re-adding the same aliased conjunct is recognised as a duplicate (keeps alias
    /// cycles finite and fast).
    alias_envs: HashMap<(EnvId, usize, VId), EnvId, FxBuild>,
    /// The values of constant string and number literals (see [`Constants`]).
    constants: Constants,
    regexes: HashMap<String, Rc<regex::Regex>>,
    depth: u32,
    /// Where new arcs of a vertex go while a comprehension body is processed.
    insert_at: Option<(VId, usize)>,
    /// Set while merging a reference whose conjunct was deeply closed before it named a
    /// definition; see [`Group::in_definition`].
    ref_in_definition: bool,
    /// KubeVela's upgrade of pre-v0.11 CUE: `list + list` concatenates and `list * n` repeats
    /// (see [`super::Evaluator::with_legacy_list_arithmetic`]).
    pub legacy_list_arithmetic: bool,
    /// Leave untouched injected top-level data out of the result tree (see
    /// [`super::Evaluator::evaluate_omitting_injected`]).
    pub omit_injected_data: bool,
    /// The identity of the one file evaluated, when results that depend on the file alone
    /// may be reused across evaluations (see `pure.rs`), and its top-level declarations.
    schema_scope: Option<u64>,
    schema_root_decls: Option<&'a [Decl]>,
    /// The identity of the one file evaluated (`ast::CompileChecks`), under which
    /// [`Engine::declaration_of`] remembers its answers; `None` for several files.
    file_uid: Option<u64>,
    decl_index: DeclIndex,
    /// The thread's [`Hops`], taken over like [`Symbols`].
    hops: Hops,
    /// Where this evaluation's arena size is remembered (see [`Engine::record_size`]).
    size_hint: &'a AtomicUsize,
    /// The work done against the evaluation's [`Budget`].
    meter: Meter,
}

pub const ROOT: VId = 0;

/// Which kind of label a symbol is.
#[inline]
pub fn is_hidden(label: &str) -> bool {
    label.starts_with('_') && label != "_"
}

#[inline]
pub fn is_definition(label: &str) -> bool {
    label.starts_with('#') || label.starts_with("_#")
}

/// A field named by a string (`"#a": 1`, `("_b"): 2`, a JSON key `"_c"`) is a regular field in
/// CUE, but labels are kept as text here, where such a name would read as a definition or a
/// hidden field (and silently vanish from the output): refused as unsupported instead.
fn quoted_label_error(label: &str, span: Span) -> Option<Error> {
    (is_hidden(label) || is_definition(label)).then(|| {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "unsupported: field name {} given as a string starts with '#' or '_'",
                super::val::quote_string(label)
            ),
            span,
        )
    })
}
