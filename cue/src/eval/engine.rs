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

use smallvec::SmallVec;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::ast::{self, BinaryOp, Clause, Decl, Expr, FieldConstraint, Label, UnaryOp};
use crate::exported::KindSet;
use crate::span::Span;
use crate::{Error, ErrorKind};

mod pure;

pub use pure::SchemaKey;

use super::budget::{BYTES_PER_STEP, Budget, Meter};
use super::val::{
    Atom, BoundOp, Conflict, Shape, Validator, atom_conflict, compare, format_float, parse_number,
};

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
/// Most alternatives a disjunction expansion may produce.
const MAX_DISJUNCTS: usize = 512;
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
    fn pos(&self) -> usize {
        match self {
            Pending::Comprehension(.., pos) | Pending::Dynamic(.., pos) => *pos,
        }
    }

    /// The same item, inserting its fields at `pos`.
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
    fn is_empty(&self) -> bool {
        self.disjs.is_empty()
            && self.pending.is_empty()
            && self.patterns.is_empty()
            && self.groups.is_empty()
            && self.deep_group == 0
    }
}

impl<'a> Vertex<'a> {
    fn disjs(&self) -> &[Conj<'a>] {
        self.rare.as_ref().map_or(&[], |r| &r.disjs)
    }

    fn pending(&self) -> &[Pending<'a>] {
        self.rare.as_ref().map_or(&[], |r| &r.pending)
    }

    fn patterns(&self) -> &[Pattern<'a>] {
        self.rare.as_ref().map_or(&[], |r| &r.patterns)
    }

    fn groups(&self) -> &[Group] {
        self.rare.as_ref().map_or(&[], |r| &r.groups)
    }

    /// Group `g` (1-based, as conjuncts number them).
    fn group_mut(&mut self, g: u32) -> Option<&mut Group> {
        let rare = self.rare.as_mut()?;
        rare.groups.get_mut((g as usize).wrapping_sub(1))
    }

    fn deep_group(&self) -> u32 {
        self.rare.as_ref().map_or(0, |r| r.deep_group)
    }

    fn rare_mut(&mut self) -> &mut Rare<'a> {
        self.rare.get_or_insert_with(Box::default)
    }

    fn take_disjs(&mut self) -> SmallVec<[Conj<'a>; 1]> {
        self.rare
            .as_mut()
            .map(|r| std::mem::take(&mut r.disjs))
            .unwrap_or_default()
    }

    fn take_pending(&mut self) -> SmallVec<[Pending<'a>; 2]> {
        self.rare
            .as_mut()
            .map(|r| std::mem::take(&mut r.pending))
            .unwrap_or_default()
    }

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

/// Label symbols (text, index, list-index symbols), shared by the evaluations of one thread: the
/// same templates are evaluated over and over with the same labels, so an evaluation takes the
/// table over instead of allocating and hashing every label again, and hands it back when it
/// ends. A symbol's number is only used within one evaluation (results hold label text).
#[derive(Default)]
struct Symbols {
    syms: Vec<Rc<str>>,
    sym_index: HashMap<Rc<str>, Sym, FxBuild>,
    index_syms: Vec<Sym>,
    ast_syms: AstSyms,
    constants: Constants,
    hops: Hops,
}

/// The values of a file's constant string and number literals by (file identity, address of
/// the literal): every evaluation of a template reads the same literals, and each was parsed
/// (numbers) or copied into a shared string again per evaluation. Keyed like [`AstSyms`];
/// independent of the symbol table, but kept and reset with it.
type Constants = HashMap<(u64, usize), Atom, FxBuild>;

/// Symbols of label text in a file's AST by (file identity, address, length): the same
/// template's labels are interned on every evaluation, and hashing three words is cheaper than
/// hashing and comparing the text. Only valid with the symbol table it was filled against, so
/// it travels with it in [`Symbols`]. The identity (`ast::CompileChecks`) is never shared by
/// another file, so an entry of a dropped file is never hit again, even if its memory is reused.
type AstSyms = HashMap<(u64, usize, usize), Sym, FxBuild>;

/// How each identifier of a file resolved, by (file identity, address of the identifier):
/// which environment answered, counted from the one the identifier is evaluated in, and what
/// it found there. Scoping is lexical: an identifier is always evaluated in an environment
/// chain of the same shape (one environment per enclosing struct body, comprehension binding
/// and alias, see [`Engine::new_env`]'s callers), so the same environment answers in every
/// evaluation of the file, and the walk that looked at each scope on the way (a hashed
/// declaration lookup per struct, the label interned) is done once per thread. Only what is
/// static is kept: a field's symbol (so it travels with the symbol table in [`Symbols`]), a
/// `let`'s declaration; the root's injected fields are looked up in every evaluation.
type Hops = HashMap<(u64, usize), Hop, FxBuild>;

/// One [`Hops`] entry.
#[derive(Debug, Clone, Copy)]
struct Hop {
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

thread_local! {
    static SYMBOLS: std::cell::RefCell<Symbols> = const {
        std::cell::RefCell::new(Symbols {
            syms: Vec::new(),
            sym_index: HashMap::with_hasher(FxBuild),
            index_syms: Vec::new(),
            ast_syms: HashMap::with_hasher(FxBuild),
            constants: HashMap::with_hasher(FxBuild),
            hops: HashMap::with_hasher(FxBuild),
        })
    };
}

/// Symbols kept per thread before the table starts over (data keys, such as label and env var
/// names of many apps, would otherwise accumulate in a long-running process).
const MAX_SHARED_SYMBOLS: usize = 1 << 16;

/// The empty label, interned first (labels of the root and of temporary vertices).
const EMPTY_SYM: Sym = 0;

/// A small, fast, non-cryptographic hasher (FxHash) for the label interner: labels are not
/// attacker-controlled in a way that matters here, and SipHash dominated profiles.
#[derive(Debug, Clone, Copy, Default)]
pub struct FxBuild;

#[derive(Debug, Clone, Copy, Default)]
pub struct FxHasher(u64);

impl std::hash::BuildHasher for FxBuild {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*byte)).wrapping_mul(K);
        }
    }

    fn write_usize(&mut self, i: usize) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        self.0 = (self.0.rotate_left(5) ^ i as u64).wrapping_mul(K);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Where each identifier is declared in a struct's declarations, by (file identity, address of
/// the declarations, address and length of the identifier's name in the AST): see
/// [`Engine::declaration_of`]. The file's identity (`ast::CompileChecks`) is never shared by
/// another file, so an entry of a dropped file is never hit again, even if its memory is
/// reused. Kept per thread, taken over by each evaluation and handed back, like [`Symbols`].
type DeclIndex = HashMap<(u64, usize, Scope, usize, usize), u32, FxBuild>;

/// What a [`DeclIndex`] entry searched: a struct's declarations or the file's imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Scope {
    Decls,
    Imports,
}

thread_local! {
    static DECL_INDEX: std::cell::RefCell<DeclIndex> =
        const { std::cell::RefCell::new(HashMap::with_hasher(FxBuild)) };
}

/// Entries kept per thread before the index starts over (templates come and go in a
/// long-running process).
const MAX_DECL_INDEX: usize = 1 << 16;

/// [`DeclIndex`]'s value for "no declaration of that name here".
const NO_DECLARATION: u32 = u32::MAX;

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

/// Which kind of label a symbol is.
pub fn is_hidden(label: &str) -> bool {
    label.starts_with('_') && label != "_"
}

#[inline]
pub fn is_definition(label: &str) -> bool {
    label.starts_with('#') || label.starts_with("_#")
}

impl Drop for Engine<'_> {
    /// Hands the symbol table back to the thread (see [`Symbols`]).
    fn drop(&mut self) {
        let (ast_syms, constants) = match self.ast_syms_saved.take() {
            // This evaluation's own tables (several files) are dropped; the thread's ones still
            // match the symbol table, as symbols are only appended.
            Some(saved) => saved,
            None => (
                std::mem::take(&mut self.ast_syms),
                std::mem::take(&mut self.constants),
            ),
        };
        let symbols = Symbols {
            syms: std::mem::take(&mut self.syms),
            sym_index: std::mem::take(&mut self.sym_index),
            index_syms: std::mem::take(&mut self.index_syms),
            ast_syms,
            constants,
            hops: std::mem::take(&mut self.hops),
        };
        // During thread teardown the table is simply dropped.
        let _ = SYMBOLS.try_with(|shared| *shared.borrow_mut() = symbols);
        let decl_index = std::mem::take(&mut self.decl_index);
        let _ = DECL_INDEX.try_with(|shared| *shared.borrow_mut() = decl_index);
    }
}

impl<'a> Engine<'a> {
    pub fn new(budget: Budget) -> Engine<'a> {
        // An evaluation nested in another on the same thread finds the table taken and starts
        // an empty one: correct, just not shared.
        let shared = SYMBOLS
            .try_with(|symbols| std::mem::take(&mut *symbols.borrow_mut()))
            .unwrap_or_default();
        let shared = if shared.syms.len() > MAX_SHARED_SYMBOLS
            || shared.ast_syms.len() > MAX_SHARED_SYMBOLS
            || shared.constants.len() > MAX_SHARED_SYMBOLS
            || shared.hops.len() > MAX_SHARED_SYMBOLS
        {
            Symbols::default()
        } else {
            shared
        };
        let mut decl_index = DECL_INDEX
            .try_with(|index| std::mem::take(&mut *index.borrow_mut()))
            .unwrap_or_default();
        if decl_index.len() > MAX_DECL_INDEX {
            decl_index.clear();
        }
        let mut engine = Engine {
            vs: Vec::with_capacity(1),
            envs: Vec::with_capacity(64),
            syms: shared.syms,
            sym_index: shared.sym_index,
            ast_syms: shared.ast_syms,
            constants: shared.constants,
            ast_uid: 0,
            ast_syms_saved: None,
            index_syms: shared.index_syms,
            lets: HashMap::with_hasher(FxBuild),
            alias_envs: HashMap::with_hasher(FxBuild),
            regexes: HashMap::new(),
            depth: 0,
            insert_at: None,
            ref_in_definition: false,
            legacy_list_arithmetic: false,
            omit_injected_data: false,
            schema_scope: None,
            schema_root_decls: None,
            file_uid: None,
            decl_index,
            hops: shared.hops,
            size_hint: &VERTEX_CAPACITY_HINT,
            meter: Meter::new(budget),
        };
        let root_label = engine.intern("");
        let mut root = Vertex::new(None, root_label, 0);
        root.field = FieldKind::Regular;
        engine.vs.push(root);
        engine
    }

    /// Sizes of the arenas, for profiling (`CUE_STATS=1`).
    pub fn stats(&self) -> String {
        let conjs: usize = self.vs.iter().map(|v| v.conjs.len()).sum();
        let alts = self.vs.iter().filter(|v| v.alts.is_some()).count();
        let forwards = self.vs.iter().filter(|v| v.forward.is_some()).count();
        format!(
            "vertices {} envs {} conjuncts {conjs} syms {} disjunctions {alts} forwarded {forwards} steps {}",
            self.vs.len(),
            self.envs.len(),
            self.syms.len(),
            self.meter.spent()
        )
    }

    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(sym) = self.sym_index.get(s) {
            return *sym;
        }
        let rc: Rc<str> = Rc::from(s);
        let sym = self.syms.len() as Sym;
        self.syms.push(rc.clone());
        self.sym_index.insert(rc, sym);
        sym
    }

    /// [`Engine::intern`] for label text that lives in the AST (stable address for `'a`).
    pub fn intern_ast(&mut self, s: &'a str) -> Sym {
        let key = (self.ast_uid, s.as_ptr() as usize, s.len());
        if let Some(sym) = self.ast_syms.get(&key) {
            return *sym;
        }
        let sym = self.intern(s);
        self.ast_syms.insert(key, sym);
        sym
    }

    /// The symbol of list index `i`.
    fn index_sym(&mut self, i: usize) -> Sym {
        while self.index_syms.len() <= i {
            let next = self.index_syms.len().to_string();
            let sym = self.intern(&next);
            self.index_syms.push(sym);
        }
        self.index_syms[i]
    }

    /// Remembers how many vertices this evaluation needed, so the next one allocates its arena
    /// once instead of growing (and copying) it several times.
    pub fn record_size(&self) {
        let needed = self.vs.len().min(MAX_VERTEX_CAPACITY_HINT);
        self.size_hint.fetch_max(needed, Ordering::Relaxed);
    }

    pub fn sym(&self, sym: Sym) -> &str {
        self.syms.get(sym as usize).map_or("", |s| s)
    }

    /// [`Engine::sym`] as a shared string: for a label held across calls that borrow the
    /// engine mutably, without copying its text.
    fn sym_text(&self, sym: Sym) -> Rc<str> {
        self.syms
            .get(sym as usize)
            .cloned()
            .unwrap_or_else(|| Rc::from(""))
    }

    fn v(&self, v: VId) -> &Vertex<'a> {
        &self.vs[v as usize]
    }

    fn vm(&mut self, v: VId) -> &mut Vertex<'a> {
        &mut self.vs[v as usize]
    }

    pub fn new_vertex(&mut self, parent: Option<VId>, label: Sym) -> VId {
        self.meter.charge(1);
        let depth = parent.map_or(0, |p| self.v(p).depth + 1);
        let id = self.vs.len() as VId;
        // `resize_with` lets the vertex be written straight into its slot; `push` built it on
        // the stack and copied it (a vertex is ~540 bytes, ~400 vertices per app).
        self.vs
            .resize_with(id as usize + 1, || Vertex::new(parent, label, depth));
        id
    }

    fn new_env(&mut self, parent: Option<EnvId>, kind: EnvKind<'a>) -> EnvId {
        self.meter.charge(1);
        let id = self.envs.len() as EnvId;
        self.envs.push(Env { parent, kind });
        id
    }

    /// Whether the evaluation went over its [`Budget`] and stops.
    #[inline]
    pub fn over_budget(&self) -> bool {
        self.meter.exceeded()
    }

    /// The error the evaluation ends in when it went over its [`Budget`], at the first file.
    pub fn budget_error(&self) -> Option<Error> {
        self.meter
            .error(self.vs.first().map(|root| root.span).unwrap_or_default())
    }

    /// Counts `bytes` of string built against the budget.
    pub fn charge_bytes(&mut self, bytes: usize) {
        self.meter.charge((bytes / BYTES_PER_STEP) as u64);
    }

    /// Counts `steps` of work done without making vertices (a list's items copied).
    pub fn charge(&mut self, steps: usize) {
        self.meter.charge(steps as u64);
    }

    /// Adds the files and injections to the root vertex.
    pub fn load(&mut self, files: &[&'a ast::File], injections: &[super::Injection<'a>]) {
        if let [file] = files
            && injections
                .iter()
                .all(|i| !is_definition(i.field) && !is_hidden(i.field))
        {
            self.schema_scope = Some(file.compile_checks.uid);
            self.schema_root_decls = Some(&file.decls);
        }
        if let [file] = files {
            self.size_hint = &file.compile_checks.vertex_hint;
            self.file_uid = Some(file.compile_checks.uid);
            self.ast_uid = file.compile_checks.uid;
        } else {
            // Labels and literals of several files are keyed without an identity: only for
            // this evaluation.
            let own = HashMap::with_capacity_and_hasher(128, FxBuild);
            let saved_syms = std::mem::replace(&mut self.ast_syms, own);
            let saved_constants = std::mem::take(&mut self.constants);
            self.ast_syms_saved = Some((saved_syms, saved_constants));
        }
        let hint = match self.size_hint.load(Ordering::Relaxed) {
            0 => 64,
            seen => seen,
        };
        self.vs.reserve(hint.saturating_sub(self.vs.len()));
        for file in files {
            let checks = file.compile_checks.checks.get_or_init(|| {
                let mut errors = super::compile::unused(file);
                errors.extend(super::compile::misplaced_marks(file));
                errors
            });
            for error in checks {
                self.add_error(ROOT, error.clone());
            }
            let env = self.new_env(
                None,
                EnvKind::File {
                    imports: &file.imports,
                },
            );
            self.add_conj(ROOT, ConjKind::File(file), env, Close::Open, 0, false);
        }
        for injection in injections {
            let sym = self.intern(injection.field);
            let arc = self.arc(ROOT, sym);
            self.vm(arc).field = FieldKind::Regular;
            let env = self.new_env(None, EnvKind::File { imports: &[] });
            self.add_conj(
                arc,
                ConjKind::Json(injection.value, injection.span),
                env,
                Close::Open,
                0,
                false,
            );
        }
    }

    /// The injected JSON `v` holds when that is all it holds: its only conjunct is the
    /// injection (no declaration, pattern or closedness of the program applies to it, so its
    /// subtree is that data exactly and cannot fail) and nothing went wrong so far.
    pub fn injected_data(&self, v: VId) -> Option<&'a serde_json::Value> {
        let vertex = self.v(v);
        if !vertex.errors.is_empty() || vertex.forward.is_some() || vertex.alts.is_some() {
            return None;
        }
        match vertex.conjs.as_slice() {
            [
                Conj {
                    kind: ConjKind::Json(json, _),
                    ..
                },
            ] => Some(json),
            _ => None,
        }
    }

    /// The path of a vertex, for errors.
    pub fn path(&self, v: VId) -> Vec<String> {
        // A vertex's depth is the number of labels above it: one allocation for the path.
        let mut labels = Vec::with_capacity(self.v(v).depth as usize);
        let mut cur = Some(v);
        while let Some(id) = cur {
            let vertex = self.v(id);
            if vertex.parent.is_some() {
                labels.push(self.sym(vertex.label).to_owned());
            }
            cur = vertex.parent;
        }
        labels.reverse();
        labels
    }

    fn err(&self, v: VId, kind: ErrorKind, message: impl Into<String>, spans: Vec<Span>) -> Error {
        Error {
            kind,
            message: message.into(),
            spans,
            path: self.path(v),
        }
    }

    fn add_error(&mut self, v: VId, error: Error) {
        let vertex = self.vm(v);
        if !vertex
            .errors
            .iter()
            .any(|e| e.message == error.message && e.spans == error.spans)
        {
            vertex.errors.push(error);
        }
    }

    fn conflict(&mut self, v: VId, conflict: Conflict) {
        let error = self.err(v, ErrorKind::Conflict, conflict.message, conflict.spans);
        self.add_error(v, error);
    }

    /// The child arc `sym` of `v`, created if missing.
    pub fn arc(&mut self, v: VId, sym: Sym) -> VId {
        if let Some((_, arc)) = self.v(v).arcs.iter().find(|(s, _)| *s == sym) {
            return *arc;
        }
        let arc = self.new_vertex(Some(v), sym);
        match &mut self.insert_at {
            Some((target, pos)) if *target == v && *pos < self.vs[v as usize].arcs.len() => {
                self.vs[v as usize].arcs.insert(*pos, (sym, arc));
                *pos += 1;
            }
            _ => self.vm(v).arcs.push((sym, arc)),
        }
        if self.v(v).patterns().is_empty() {
            return arc;
        }
        // Patterns seen so far apply to the new arc.
        let label = self.sym_text(sym);
        let patterns = self.v(v).patterns().to_vec();
        for pattern in patterns {
            if self.pattern_matches(&pattern.matcher, &label) {
                let close = if pattern.close == Close::Deep {
                    Close::Deep
                } else {
                    Close::Open
                };
                let env = self.field_env(pattern.field, pattern.env, arc, sym);
                self.add_conj(arc, ConjKind::Expr(pattern.value), env, close, 0, false);
            }
        }
        arc
    }

    fn find_arc(&self, v: VId, sym: Sym) -> Option<VId> {
        self.v(v)
            .arcs
            .iter()
            .find(|(s, _)| *s == sym)
            .map(|(_, a)| *a)
    }

    pub fn add_conj(
        &mut self,
        v: VId,
        kind: ConjKind<'a>,
        env: EnvId,
        close: Close,
        grp: u32,
        derived: bool,
    ) {
        let vertex = &self.vs[v as usize];
        // Skip an identical conjunct: keeps reference cycles (`a: b, b: a`) finite.
        let duplicate = vertex.conjs.iter().any(|c| {
            c.env == env
                && c.close == close
                && c.grp == grp
                && match (&c.kind, &kind) {
                    (ConjKind::Expr(a), ConjKind::Expr(b)) => std::ptr::eq(*a, *b),
                    (ConjKind::Body(a), ConjKind::Body(b)) => std::ptr::eq(*a, *b),
                    (ConjKind::File(a), ConjKind::File(b)) => std::ptr::eq(*a, *b),
                    (ConjKind::Json(a, _), ConjKind::Json(b, _)) => std::ptr::eq(*a, *b),
                    (ConjKind::Ref(a, _), ConjKind::Ref(b, _)) => a == b,
                    _ => false,
                }
        });
        if duplicate {
            return;
        }
        let vertex = &mut self.vs[v as usize];
        if vertex.conjs.is_empty() {
            vertex.span = conj_span(&kind);
        }
        if vertex.state == State::Done && vertex.forward.is_none() && vertex.alts.is_none() {
            // A conjunct arriving late (from a comprehension after the vertex was already
            // looked at): process it on the next evaluation.
            vertex.state = State::New;
        }
        vertex.conjs.push(Conj {
            kind,
            env,
            close,
            grp,
            derived,
        });
    }

    // ---------------------------------------------------------------------------------------
    // Vertex evaluation

    /// Evaluates `v` one level deep: its own value, its arcs' conjuncts (not their values),
    /// comprehensions, disjunctions and closedness.
    pub fn eval_vertex(&mut self, v: VId) {
        if self.v(v).state != State::New {
            return;
        }
        // Evaluation recurses through references; grow the stack on demand instead of
        // overflowing it (rayon workers have 2 MiB).
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || self.eval_vertex_inner(v));
    }

    fn eval_vertex_inner(&mut self, v: VId) {
        if self.stop_over_budget(v) {
            return;
        }
        if self.v(v).depth > MAX_TREE_DEPTH {
            let span = self.v(v).span;
            let error = self.err(v, ErrorKind::Cycle, "structural cycle", vec![span]);
            self.add_error(v, error);
            self.vm(v).state = State::Done;
            return;
        }
        if self.depth > MAX_EVAL_DEPTH {
            let span = self.v(v).span;
            let error = self.err(
                v,
                ErrorKind::Cycle,
                "evaluation too deep (reference cycle?)",
                vec![span],
            );
            self.add_error(v, error);
            self.vm(v).state = State::Done;
            return;
        }
        self.depth += 1;
        self.vm(v).state = State::Running;
        loop {
            loop {
                if self.stop_over_budget(v) {
                    self.depth -= 1;
                    return;
                }
                // One lookup of the vertex per conjunct (processing it may add more).
                let vertex = &mut self.vs[v as usize];
                let Some(conj) = vertex.conjs.get(vertex.cursor) else {
                    break;
                };
                // Most conjuncts are expressions: processed without cloning the conjunct (a
                // call matching every kind).
                if let ConjKind::Expr(expr) = conj.kind {
                    let (env, close, grp) = (conj.env, conj.close, conj.grp);
                    vertex.cursor += 1;
                    self.process_expr(v, expr, env, close, grp);
                    continue;
                }
                let conj = conj.clone();
                vertex.cursor += 1;
                self.process_conj(v, conj);
            }
            if !self.v(v).disjs().is_empty() {
                self.expand_disjunctions(v);
                self.depth -= 1;
                self.vm(v).state = State::Done;
                return;
            }
            let pending = self.vm(v).take_pending();
            if pending.is_empty() {
                break;
            }

            // In source order, as a later comprehension may test what an earlier one adds
            // (`if x.a != _|_ {...}` after `if c {x: a: 1}`). The fields an item inserts move
            // the insertion point of every later item at or after its own.
            let mut inserted: SmallVec<[(usize, usize); 4]> = SmallVec::new();
            for item in pending {
                let pos = item.pos();
                let shift: usize = inserted
                    .iter()
                    .filter(|(at, _)| *at <= pos)
                    .map(|(_, n)| n)
                    .sum();
                let before = self.v(v).arcs.len();
                self.process_pending(v, item.at(pos.saturating_add(shift)));
                let added = self.v(v).arcs.len().saturating_sub(before);
                inserted.push((pos, added));
            }
        }
        self.finish(v);
        self.depth -= 1;
        if self.v(v).state == State::Running {
            self.vm(v).state = State::Done;
        }
    }

    /// Over budget, `v` ends in the budget error (no value of the evaluation is used then,
    /// but nothing half-evaluated may look clean either).
    fn stop_over_budget(&mut self, v: VId) -> bool {
        if !self.over_budget() {
            return false;
        }
        let span = self.v(v).span;
        if let Some(error) = self.meter.error(span) {
            let error = self.relocate(v, error);
            self.add_error(v, error);
        }
        self.vm(v).state = State::Done;
        true
    }

    fn finish(&mut self, v: VId) {
        // List element types and lengths.
        if let Some(list) = &self.v(v).list {
            let n_elems = list.elems.len();
            if let Some((len, span)) = list.closed_len
                && n_elems > len
            {
                let error = self.err(
                    v,
                    ErrorKind::Conflict,
                    format!("incompatible list lengths ({len} and {n_elems})"),
                    vec![span],
                );
                self.add_error(v, error);
            }
            // Element types (`[...T]`) apply to every element; most lists have none, and
            // then nothing is copied.
            if let Some(list) = self.v(v).list.as_ref().filter(|l| !l.types.is_empty()) {
                let (elems, types) = (list.elems.clone(), list.types.clone());
                for elem in elems {
                    for ty in &types {
                        self.add_conj(elem, ty.kind.clone(), ty.env, ty.close, 0, false);
                    }
                }
            }
        }
        // Closedness.
        if self.v(v).groups().iter().any(|g| g.closed && !g.ellipsis) {
            let groups: SmallVec<[Group; 1]> = self.v(v).groups().iter().cloned().collect();
            let deep_group = self.v(v).deep_group() as usize;
            let arcs = self.v(v).arcs.clone();
            for (sym, arc) in arcs {
                let label = self.sym_text(sym);
                if is_hidden(&label) || is_definition(&label) {
                    continue;
                }
                let allows = |engine: &Self, group: &Group| {
                    group.labels.contains(&sym)
                        || group.patterns.iter().any(|p| {
                            let matcher = engine.v(v).patterns().get(*p).map(|p| p.matcher.clone());
                            matcher.is_some_and(|m| engine.pattern_matches(&m, &label))
                        })
                };
                for (index, group) in groups.iter().enumerate() {
                    if !group.closed || group.ellipsis {
                        continue;
                    }
                    let allowed = allows(self, group)
                        || (index + 1 == deep_group
                            && groups.iter().any(|other| {
                                other.in_definition
                                    && other.closed
                                    && !other.ellipsis
                                    && allows(self, other)
                            }));
                    if !allowed {
                        let span = self.v(arc).decl_span.unwrap_or(self.v(arc).span);
                        let error =
                            self.err(arc, ErrorKind::Closed, "field not allowed", vec![span]);
                        self.add_error(arc, error);
                        break;
                    }
                }
            }
        }
        if let Err(conflict) = self.v(v).shape.check() {
            self.conflict(v, conflict);
        }
        self.check_composite_validators(v);
    }

    /// Runs the validators that apply to a list or struct (`list.MaxItems(3)`,
    /// `struct.MinFields(1)`): [`Shape::check`] only sees scalars.
    fn check_composite_validators(&mut self, v: VId) {
        if self.v(v).shape.validators.is_empty() {
            return;
        }
        let validators: Vec<(Validator, Span)> = self
            .v(v)
            .shape
            .validators
            .iter()
            .filter(|(validator, _)| {
                matches!(validator, Validator::Builtin(name, _)
                    if name.starts_with("list.") || name.starts_with("struct."))
            })
            .cloned()
            .collect();
        for (validator, span) in validators {
            let Validator::Builtin(name, args) = &validator else {
                continue;
            };
            let bound = match args.first() {
                Some(Atom::Int(n)) => Some(*n),
                _ => None,
            };
            let failure = match (*name, bound) {
                ("list.MinItems" | "list.MaxItems", Some(n)) => {
                    let Some(list) = &self.v(v).list else {
                        continue;
                    };
                    let len = i64::try_from(list.elems.len()).unwrap_or(i64::MAX);
                    if *name == "list.MinItems" && len < n {
                        Some(format!("len(list) < MinItems({n}) ({len} < {n})"))
                    } else if *name == "list.MaxItems" && len > n {
                        Some(format!("len(list) > MaxItems({n}) ({len} > {n})"))
                    } else {
                        None
                    }
                }
                ("list.UniqueItems", None) => {
                    let Some(list) = &self.v(v).list else {
                        continue;
                    };
                    let elems = list.elems.clone();
                    let mut duplicate = None;
                    'outer: for (i, a) in elems.iter().enumerate() {
                        for (j, b) in elems.iter().enumerate().skip(i + 1) {
                            if self.same_value(*a, *b, 0) {
                                duplicate = Some((i, j));
                                break 'outer;
                            }
                        }
                    }
                    duplicate.map(|(i, j)| format!("equal values at position {i} and {j}"))
                }
                ("struct.MinFields" | "struct.MaxFields", Some(n)) => {
                    if !self.v(v).is_struct {
                        continue;
                    }
                    let count = self
                        .v(v)
                        .arcs
                        .iter()
                        .filter(|(sym, arc)| {
                            let label = self.sym(*sym);
                            self.v(*arc).field != FieldKind::Optional
                                && !is_hidden(label)
                                && !is_definition(label)
                        })
                        .count();
                    let count = i64::try_from(count).unwrap_or(i64::MAX);
                    if *name == "struct.MinFields" && count < n {
                        Some(format!("len(fields) < MinFields({n}) ({count} < {n})"))
                    } else if *name == "struct.MaxFields" && count > n {
                        Some(format!("len(fields) > MaxFields({n}) ({count} > {n})"))
                    } else {
                        None
                    }
                }
                _ => {
                    let message = format!("unsupported: validator {}", validator.text());
                    let error = self.err(v, ErrorKind::Unsupported, message, vec![span]);
                    self.add_error(v, error);
                    continue;
                }
            };
            if let Some(reason) = failure {
                let message = format!(
                    "invalid value (does not satisfy {}): {reason}",
                    validator.text()
                );
                let error = self.err(v, ErrorKind::Conflict, message, vec![span]);
                self.add_error(v, error);
            }
        }
    }

    fn process_conj(&mut self, v: VId, conj: Conj<'a>) {
        let Conj {
            kind,
            env,
            close,
            grp,
            ..
        } = conj;
        match kind {
            ConjKind::Expr(expr) => self.process_expr(v, expr, env, close, grp),
            ConjKind::Body(lit) => self.process_decls(v, &lit.decls, lit.span, env, close, grp),
            ConjKind::File(file) => self.process_decls(v, &file.decls, file.span, env, close, grp),
            ConjKind::Json(json, span) => self.process_json(v, json, span),
            ConjKind::Ref(target, span) => self.process_ref(v, target, span, close, grp),
            ConjKind::Atom(atom) => {
                let (atom, span) = *atom;
                if let Err(c) = self.vm(v).shape.add_atom(atom, span) {
                    self.conflict(v, c);
                }
            }
            ConjKind::Kinds(kinds, span) => {
                if let Err(c) = self.vm(v).shape.add_kinds(kinds, span) {
                    self.conflict(v, c);
                }
            }
            ConjKind::Validator(validator) => {
                let (validator, span) = *validator;
                if let Err(c) = self.vm(v).shape.add_validator(validator, span) {
                    self.conflict(v, c);
                }
            }
            ConjKind::Or(items, span) => {
                self.vm(v).rare_mut().disjs.push(Conj {
                    kind: ConjKind::Or(items, span),
                    env,
                    close,
                    grp,
                    derived: false,
                });
            }
            ConjKind::StructOf(arcs, span) => {
                self.mark_struct(v, span);
                for (sym, target) in arcs.iter() {
                    let arc = self.arc(v, *sym);
                    let vertex = self.vm(arc);
                    vertex.field = vertex.field.max(FieldKind::Regular);
                    self.add_conj(
                        arc,
                        ConjKind::Ref(*target, span),
                        env,
                        Close::Open,
                        0,
                        false,
                    );
                }
            }
            ConjKind::ListOf(elems, span) => {
                let n = elems.len();
                self.list_literal(v, span, n, true);
                for (i, target) in elems.iter().enumerate() {
                    let elem = self.list_elem(v, i);
                    self.add_conj(
                        elem,
                        ConjKind::Ref(*target, span),
                        env,
                        Close::Open,
                        0,
                        false,
                    );
                }
            }
        }
    }

    fn mark_struct(&mut self, v: VId, span: Span) {
        self.vm(v).is_struct = true;
        if let Err(c) = self.vm(v).shape.add_kinds(KindSet::STRUCT, span) {
            self.conflict(v, c);
        }
    }

    fn child_close(close: Close) -> Close {
        if close == Close::Deep {
            Close::Deep
        } else {
            Close::Open
        }
    }

    fn mark_in_definition(&mut self, v: VId, g: u32, in_definition: bool) {
        if let Some(group) = self.vm(v).group_mut(g) {
            group.in_definition = in_definition;
        }
    }

    fn new_group(&mut self, v: VId, closed: bool) -> u32 {
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

    fn process_decls(
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

    fn add_field_named(
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
    fn field_env(&mut self, field: &'a ast::Field, env: EnvId, arc: VId, sym: Sym) -> EnvId {
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

    fn pattern_matches(&self, matcher: &PatternMatch, label: &str) -> bool {
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

    fn process_json(&mut self, v: VId, json: &'a serde_json::Value, span: Span) {
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

    /// Records a list literal of `n` elements (closed or open).
    fn list_literal(&mut self, v: VId, span: Span, n: usize, closed: bool) {
        if let Err(c) = self.vm(v).shape.add_kinds(KindSet::LIST, span) {
            self.conflict(v, c);
            return;
        }
        let list = self.vm(v).list.get_or_insert_with(Box::default);
        // The elements follow: room for them at once.
        if list.elems.is_empty() {
            list.elems.reserve(n);
        }
        if closed {
            match list.closed_len {
                Some((len, _)) if len != n => {
                    let error = self.err(
                        v,
                        ErrorKind::Conflict,
                        format!("incompatible list lengths ({len} and {n})"),
                        vec![span],
                    );
                    self.add_error(v, error);
                }
                _ => list.closed_len = Some((n, span)),
            }
        }
    }

    fn list_elem(&mut self, v: VId, i: usize) -> VId {
        if let Some(list) = &self.v(v).list
            && let Some(elem) = list.elems.get(i)
        {
            return *elem;
        }
        let sym = self.index_sym(i);
        let elem = self.new_vertex(Some(v), sym);
        self.vm(elem).field = FieldKind::Regular;
        let list = self.vm(v).list.get_or_insert_with(Box::default);
        list.elems.push(elem);
        elem
    }

    fn process_list(&mut self, v: VId, lit: &'a ast::ListLit, env: EnvId, close: Close) {
        let child = Self::child_close(close);
        let mut index = 0;
        let mut elems: Vec<(usize, ConjKind<'a>, EnvId)> = Vec::new();
        for elem in &lit.elems {
            match elem {
                ast::ListElem::Expr(expr) => {
                    elems.push((index, ConjKind::Expr(expr), env));
                    index += 1;
                }
                ast::ListElem::Comprehension(comp) => match self.run_clauses(&comp.clauses, env) {
                    Ok(envs) => {
                        for env in envs {
                            elems.push((index, ConjKind::Body(&comp.body), env));
                            index += 1;
                        }
                    }
                    Err(error) => {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                    }
                },
            }
        }
        self.list_literal(v, lit.span, index, lit.ellipsis.is_none());
        for (i, kind, env) in elems {
            let elem = self.list_elem(v, i);
            self.add_conj(elem, kind, env, child, 0, false);
        }
        if let Some(Some(ty)) = &lit.ellipsis {
            let list = self.vm(v).list.get_or_insert_with(Box::default);
            list.types.push(Conj {
                kind: ConjKind::Expr(ty),
                env,
                close: child,
                grp: 0,
                derived: false,
            });
        }
    }

    /// Gives an error the path of `v` if it has none (errors from sub-evaluations).
    fn relocate(&self, v: VId, mut error: Error) -> Error {
        error.path = self.path(v);
        error
    }

    fn process_expr(&mut self, v: VId, expr: &'a Expr, env: EnvId, close: Close, grp: u32) {
        match expr {
            Expr::Paren(inner, _) => self.process_expr(v, inner, env, close, grp),
            Expr::Binary {
                op: BinaryOp::Unify,
                lhs,
                rhs,
                ..
            } => {
                self.process_expr(v, lhs, env, close, grp);
                self.process_expr(v, rhs, env, close, grp);
            }
            Expr::Binary {
                op: BinaryOp::Disjunction,
                ..
            }
            | Expr::Unary {
                op: UnaryOp::Default,
                ..
            } => {
                self.vm(v).rare_mut().disjs.push(Conj {
                    kind: ConjKind::Expr(expr),
                    env,
                    close,
                    grp,
                    derived: false,
                });
            }
            Expr::Struct(lit) => self.process_decls(v, &lit.decls, lit.span, env, close, grp),
            Expr::List(lit) => self.process_list(v, lit, env, close),
            Expr::Top(_) => {}
            Expr::Bottom(span) => {
                let error = self.err(
                    v,
                    ErrorKind::Conflict,
                    "explicit error (_|_ literal) in source",
                    vec![*span],
                );
                self.add_error(v, error);
            }
            Expr::Ident(_) | Expr::Selector { .. } | Expr::Index { .. } => {
                let is_def = match expr {
                    Expr::Ident(ident) => is_definition(&ident.name),
                    Expr::Selector { label, .. } => is_definition(label),
                    _ => false,
                };
                let r = self.eval_expr(expr, env);
                let saved = self.ref_in_definition;
                self.ref_in_definition = is_def && close == Close::Deep;
                let close = if is_def { Close::Deep } else { close };
                self.merge_r(v, r, expr.span(), env, close, grp);
                self.ref_in_definition = saved;
            }
            Expr::Call { func, args, span } if is_ident(func, "close") => {
                if let [arg] = args.as_slice() {
                    let close = if close == Close::Deep {
                        Close::Deep
                    } else {
                        Close::Shallow
                    };
                    self.process_expr(v, arg, env, close, grp);
                } else {
                    let error = self.err(
                        v,
                        ErrorKind::Builtin,
                        "close: expected 1 argument",
                        vec![*span],
                    );
                    self.add_error(v, error);
                }
            }
            Expr::Call { func, args, span } if is_ident(func, "and") => {
                let r = match args.as_slice() {
                    [arg] => self.eval_expr(arg, env),
                    _ => R::Err(Error::new(
                        ErrorKind::Builtin,
                        "and: expected 1 argument",
                        *span,
                    )),
                };
                match self.list_items(r, *span) {
                    Ok(items) => {
                        for item in items {
                            self.add_conj(v, ConjKind::Ref(item, *span), env, close, grp, true);
                        }
                    }
                    Err(error) => {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                    }
                }
            }
            _ => {
                let r = self.eval_expr(expr, env);
                self.merge_r(v, r, expr.span(), env, close, grp);
            }
        }
    }

    /// Unifies an expression result into `v`.
    fn merge_r(&mut self, v: VId, r: R, span: Span, env: EnvId, close: Close, grp: u32) {
        match r {
            R::Atom(atom) => {
                if let Err(c) = self.vm(v).shape.add_atom(atom, span) {
                    self.conflict(v, c);
                }
            }
            R::V(target) => self.process_ref(v, target, span, close, grp),
            R::Kinds(kinds) => {
                if let Err(c) = self.vm(v).shape.add_kinds(kinds, span) {
                    self.conflict(v, c);
                }
            }
            R::Valid(validator) => {
                if let Err(c) = self.vm(v).shape.add_validator(validator, span) {
                    self.conflict(v, c);
                }
            }
            R::Top => {}
            R::Err(error) => {
                let error = self.relocate(v, error);
                self.add_error(v, error);
            }
            R::Pkg(name) | R::Func(name) => {
                let error = self.err(
                    v,
                    ErrorKind::Unsupported,
                    format!("unsupported: {name} used as a value"),
                    vec![span],
                );
                self.add_error(v, error);
            }
        }
        let _ = env;
    }

    /// Unifies the vertex `target` into `v` by copying its conjuncts.
    fn process_ref(&mut self, v: VId, target: VId, span: Span, close: Close, grp: u32) {
        if target == v {
            return;
        }
        let in_definition = std::mem::take(&mut self.ref_in_definition);
        // A reference to an ancestor makes the value contain itself.
        let mut ancestor = self.v(v).parent;
        while let Some(a) = ancestor {
            if a == target || self.v(a).origin == Some(target) {
                if self.v(v).field != FieldKind::Optional {
                    let error = self.err(v, ErrorKind::Cycle, "structural cycle", vec![span]);
                    self.add_error(v, error);
                }
                return;
            }
            ancestor = self.v(a).parent;
        }
        // A vertex already reduced to a scalar: take its value directly.
        let t = self.v(target);
        if t.state == State::Done
            && t.forward.is_none()
            && t.alts.is_none()
            && t.arcs.is_empty()
            && t.list.is_none()
            && !t.is_struct
            && !t.struct_hint
        {
            let shape = t.shape.clone();
            let errors = t.errors.clone();
            for error in errors {
                self.add_error(v, error);
            }
            if let Some((atom, aspan)) = shape.atom {
                if let Err(c) = self.vm(v).shape.add_atom(atom, aspan) {
                    self.conflict(v, c);
                }
            } else if shape.kinds != KindSet::TOP
                && let Err(c) = self
                    .vm(v)
                    .shape
                    .add_kinds(shape.kinds, shape.kind_src.map_or(span, |(_, s)| s))
            {
                self.conflict(v, c);
            }
            for (validator, vspan) in shape.validators {
                if let Err(c) = self.vm(v).shape.add_validator(validator, vspan) {
                    self.conflict(v, c);
                }
            }
            return;
        }
        // The conjuncts are copied one at a time below, by index, instead of collected first:
        // only `v` changes while they are added, and `v` is not `target`.
        let n_conjs = t.conjs.len();
        if t.conjs.iter().all(|c| c.derived) && t.state == State::Done {
            // Evaluated values without conjuncts of their own: results of `or()`.
            if let Some(next) = t.forward {
                self.process_ref(v, next, span, close, grp);
            } else if let Some(alts) = t.alts.clone() {
                let items = alts.into_iter().map(|(a, _)| a).collect();
                self.vm(v).rare_mut().disjs.push(Conj {
                    kind: ConjKind::Or(Rc::new(items), span),
                    env: 0,
                    close,
                    grp,
                    derived: false,
                });
            }
            return;
        }
        let mut remap: Vec<(u32, u32)> = Vec::new();
        let shared = if close != Close::Open && grp == 0 {
            let g = self.new_group(v, true);
            self.mark_in_definition(v, g, in_definition);
            g
        } else {
            grp
        };
        for index in 0..n_conjs {
            let conj = &self.v(target).conjs[index];
            if conj.derived {
                continue;
            }
            let conj = conj.clone();
            let new_close = match (close, conj.close) {
                (Close::Deep, _) | (_, Close::Deep) => Close::Deep,
                (Close::Shallow, _) | (_, Close::Shallow) => Close::Shallow,
                _ => Close::Open,
            };
            let new_grp = if shared != 0 {
                shared
            } else if conj.close != Close::Open || conj.grp != 0 {
                let key = if conj.grp != 0 { conj.grp } else { u32::MAX };
                if let Some((_, g)) = remap.iter().find(|(k, _)| *k == key) {
                    *g
                } else {
                    let closed = conj.close != Close::Open
                        || self
                            .v(target)
                            .groups()
                            .get(conj.grp as usize - 1)
                            .is_some_and(|g| g.closed);
                    let g = self.new_group(v, closed);
                    self.mark_in_definition(v, g, in_definition);
                    remap.push((key, g));
                    g
                }
            } else {
                0
            };
            self.add_conj(v, conj.kind, conj.env, new_close, new_grp, true);
        }
    }

    fn process_pending(&mut self, v: VId, pending: Pending<'a>) {
        match pending {
            Pending::Comprehension(comp, env, close, grp, pos) => {
                match self.run_clauses(&comp.clauses, env) {
                    Err(error) if error.kind == ErrorKind::Incomplete => {
                        let error = self.relocate(v, error);
                        if !self.v(v).incomplete.contains(&error) {
                            self.vm(v).incomplete.push(error);
                        }
                    }
                    Ok(envs) => {
                        let arcs_before = self.v(v).arcs.len();
                        // New arcs go at `pos`, or at the end when it is past the arcs.
                        let first_new = pos.min(arcs_before);
                        let mut pos = pos;
                        for env in envs {
                            // Processed right away so its fields take the comprehension's
                            // place in the field order.
                            let saved = self.insert_at.replace((v, pos));
                            self.process_decls(
                                v,
                                &comp.body.decls,
                                comp.body.span,
                                env,
                                close,
                                grp,
                            );
                            if let Some((_, p)) = self.insert_at {
                                pos = p;
                            }
                            self.insert_at = saved;
                        }
                        let n_new = self.v(v).arcs.len() - arcs_before;
                        for index in first_new..first_new + n_new {
                            if let Some(&(_, arc)) = self.v(v).arcs.get(index) {
                                self.vm(arc).from_comprehension = true;
                            }
                        }
                    }
                    Err(error) => {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                    }
                }
            }
            Pending::Dynamic(field, expr, env, close, grp, pos) => {
                let r = self.eval_expr(expr, env);
                match self.concrete(r, expr.span()) {
                    Ok(Atom::Str(name)) => {
                        if let Some(error) = quoted_label_error(&name, expr.span()) {
                            let error = self.relocate(v, error);
                            self.add_error(v, error);
                            return;
                        }
                        let sym = self.intern(&name);
                        let saved = self.insert_at.replace((v, pos));
                        self.add_field_named(v, sym, field, env, close, grp);
                        self.insert_at = saved;
                    }
                    Ok(other) => {
                        let message = match other {
                            Atom::Int(_) => "integer fields not supported".to_owned(),
                            other => format!(
                                "invalid label {}: label must be a string",
                                other.cue_text()
                            ),
                        };
                        let error = self.err(v, ErrorKind::Conflict, message, vec![expr.span()]);
                        self.add_error(v, error);
                    }
                    Err(error) => {
                        let error = self.relocate(v, error);
                        self.add_error(v, error);
                    }
                }
            }
        }
    }

    /// Runs comprehension clauses, returning one environment per produced body.
    fn run_clauses(&mut self, clauses: &'a [Clause], env: EnvId) -> Result<ClauseEnvs, Error> {
        let mut out = ClauseEnvs::new();
        self.run_clauses_into(clauses, env, &mut out)?;
        Ok(out)
    }

    fn run_clauses_into(
        &mut self,
        clauses: &'a [Clause],
        env: EnvId,
        out: &mut ClauseEnvs,
    ) -> Result<(), Error> {
        let Some((first, rest)) = clauses.split_first() else {
            out.push(env);
            return Ok(());
        };
        match first {
            Clause::If { condition, .. } => {
                let r = self.eval_expr(condition, env);
                match self.concrete(r, condition.span())? {
                    Atom::Bool(true) => self.run_clauses_into(rest, env, out),
                    Atom::Bool(false) => Ok(()),
                    other => Err(Error::new(
                        ErrorKind::Conflict,
                        format!("invalid condition {}: expected bool", other.cue_text()),
                        condition.span(),
                    )),
                }
            }
            Clause::Let(lc) => {
                let let_label = self.intern_ast(&lc.name.name);
                let vertex = self.new_vertex(None, let_label);
                self.vm(vertex).field = FieldKind::Regular;
                self.add_conj(
                    vertex,
                    ConjKind::Expr(&lc.value),
                    env,
                    Close::Open,
                    0,
                    false,
                );
                let env = self.new_env(
                    Some(env),
                    EnvKind::Bind {
                        name: &lc.name.name,
                        vertex,
                    },
                );
                self.run_clauses_into(rest, env, out)
            }
            Clause::For {
                key,
                value,
                source,
                span,
            } => {
                let r = self.eval_expr(source, env);
                let src = self.vertex_of(r, source.span())?;
                let src = self.concrete_vertex(src, *span)?;
                let items: Vec<(Atom, VId)> = if let Some(list) = &self.v(src).list {
                    list.elems
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (Atom::Int(i as i64), *e))
                        .collect()
                } else if self.v(src).is_struct || self.v(src).struct_hint {
                    let arcs = self.ordered_arcs(src);
                    let mut items = Vec::with_capacity(arcs.len());
                    for (sym, arc) in arcs {
                        // The key shares the symbol's text (no string copied per item).
                        let label = self.sym_text(sym);
                        if is_hidden(&label) || is_definition(&label) {
                            continue;
                        }
                        if self.v(arc).field != FieldKind::Regular {
                            continue;
                        }
                        items.push((Atom::Str(label), arc));
                    }
                    items
                } else {
                    let text = self.v(src).shape.constraint_text();
                    let kind = if self.v(src).shape.atom.is_some() {
                        ErrorKind::Conflict
                    } else {
                        ErrorKind::Incomplete
                    };
                    return Err(Error::new(
                        kind,
                        format!("cannot range over {text}"),
                        source.span(),
                    ));
                };
                for (k, item) in items {
                    if let Some(error) = self.meter.error(*span) {
                        return Err(error);
                    }
                    let mut env2 = env;
                    if let Some(key) = key {
                        let key_label = self.intern_ast(&key.name);
                        let kv = self.new_vertex(None, key_label);
                        self.vm(kv).field = FieldKind::Regular;
                        self.add_conj(
                            kv,
                            ConjKind::Atom(Box::new((k, key.span))),
                            env,
                            Close::Open,
                            0,
                            false,
                        );
                        env2 = self.new_env(
                            Some(env2),
                            EnvKind::Bind {
                                name: &key.name,
                                vertex: kv,
                            },
                        );
                    }
                    env2 = self.new_env(
                        Some(env2),
                        EnvKind::Bind {
                            name: &value.name,
                            vertex: item,
                        },
                    );
                    self.run_clauses_into(rest, env2, out)?;
                }
                Ok(())
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Disjunctions

    fn expand_disjunctions(&mut self, v: VId) {
        let disjs = self.vm(v).take_disjs();
        // Alternatives of each disjunction: (conjunct kind, env, close, grp, default flag).
        let mut sets: SmallVec<[Alts<'a>; 1]> = SmallVec::new();
        for d in &disjs {
            if let ConjKind::Or(items, span) = &d.kind {
                let alts = items
                    .iter()
                    .map(|item| {
                        (
                            Conj {
                                kind: ConjKind::Ref(*item, *span),
                                env: d.env,
                                close: d.close,
                                grp: d.grp,
                                derived: true,
                            },
                            true,
                        )
                    })
                    .collect();
                sets.push(alts);
                continue;
            }
            let ConjKind::Expr(expr) = d.kind else {
                continue;
            };
            let (leaves, has_default) = disjunction_terms(expr);
            let alts = leaves
                .into_iter()
                .map(|(e, is_default)| {
                    (
                        Conj {
                            kind: ConjKind::Expr(e),
                            env: d.env,
                            close: d.close,
                            grp: d.grp,
                            derived: true,
                        },
                        !has_default || is_default,
                    )
                })
                .collect();
            sets.push(alts);
        }
        if self.atomic_disjunction(v, &sets) {
            return;
        }
        let total: usize = sets
            .iter()
            .map(|set| set.len())
            .try_fold(1usize, |acc, n| acc.checked_mul(n))
            .unwrap_or(usize::MAX);
        if total > MAX_DISJUNCTS {
            let span = self.v(v).span;
            let error = self.err(
                v,
                ErrorKind::Unsupported,
                "unsupported: disjunction with too many alternatives",
                vec![span],
            );
            self.add_error(v, error);
            return;
        }
        let mut survivors: Vec<(VId, bool)> = Vec::new();
        let mut failures: Vec<Error> = Vec::new();
        let mut choice = vec![0usize; sets.len()];
        loop {
            let z = self.clone_state(v);
            let mut is_default = true;
            for (set, &i) in sets.iter().zip(&choice) {
                let (conj, flag) = &set[i];
                is_default &= *flag;
                let c = conj.clone();
                self.add_conj(z, c.kind, c.env, c.close, c.grp, true);
            }
            self.eval_vertex(z);
            let errors = self.deep_errors(z, 0);
            if errors.is_empty() {
                // An alternative that is itself a disjunction contributes its alternatives.
                if let Some(alts) = self.v(z).alts.clone() {
                    for (alt, flag) in alts {
                        survivors.push((alt, flag && is_default));
                    }
                } else {
                    survivors.push((self.deref(z), is_default));
                }
            } else {
                failures.extend(errors);
            }
            // Next combination.
            let mut k = 0;
            loop {
                if k == choice.len() {
                    break;
                }
                choice[k] += 1;
                if choice[k] < sets[k].len() {
                    break;
                }
                choice[k] = 0;
                k += 1;
            }
            if k == choice.len() {
                break;
            }
        }
        // Merge equal alternatives.
        let mut unique: Vec<(VId, bool)> = Vec::new();
        for (alt, flag) in survivors {
            if let Some(existing) = unique.iter_mut().find(|(u, _)| self.same_value(*u, alt, 0)) {
                existing.1 |= flag;
            } else {
                unique.push((alt, flag));
            }
        }
        match unique.len() {
            0 => {
                let span = self.v(v).span;
                if failures.is_empty() {
                    let error = self.err(v, ErrorKind::Conflict, "empty disjunction", vec![span]);
                    self.add_error(v, error);
                }
                let n = failures.len();
                for mut failure in failures {
                    if n > 1 {
                        failure.message = format!("{} (in empty disjunction)", failure.message);
                    }
                    self.add_error(v, failure);
                }
            }
            1 => self.vm(v).forward = Some(unique[0].0),
            _ => self.vm(v).alts = Some(unique),
        }
    }

    /// Fast path for the most common disjunction, a single one over scalars and types
    /// (`*"ClusterIP" | "NodePort"`, `*1 | int`) on a vertex that is not a struct or list:
    /// alternatives are checked on shapes, without cloning vertices. Returns false (having
    /// changed nothing) when it does not apply.
    fn atomic_disjunction(&mut self, v: VId, sets: &[Alts<'a>]) -> bool {
        let [set] = sets else { return false };
        {
            let vx = self.v(v);
            if !vx.arcs.is_empty()
                || vx.list.is_some()
                || vx.is_struct
                || vx.struct_hint
                || !vx.pending().is_empty()
                || !vx.errors.is_empty()
            {
                return false;
            }
        }
        // Disjunctions have a few alternatives: these three stay on the stack (one to three heap
        // vectors per disjunction otherwise, ~60 K disjunctions per 1,000 apps).
        let mut results: SmallVec<[(R, Span, bool); 4]> = SmallVec::new();
        for (conj, flag) in set {
            let ConjKind::Expr(expr) = conj.kind else {
                return false;
            };
            if !matches!(
                expr,
                Expr::Null(_)
                    | Expr::Bool(..)
                    | Expr::Number { .. }
                    | Expr::String { .. }
                    | Expr::Ident(_)
                    | Expr::Unary { .. }
                    | Expr::Top(_)
            ) {
                return false;
            }
            let r = self.eval_expr(expr, conj.env);
            match r {
                R::Atom(_) | R::Kinds(_) | R::Valid(_) | R::Top => {
                    results.push((r, expr.span(), *flag))
                }
                _ => return false,
            }
        }
        let base = self.v(v).shape.clone();
        let mut survivors: SmallVec<[(Shape, bool); 4]> = SmallVec::new();
        // A failed alternative's message is needed only if none survives (then each failure
        // is reported): an atom that differs from the value's atom is noted as `Err` and
        // explained below, instead of formatting a conflict that is usually dropped.
        let mut failures: SmallVec<[Result<Conflict, (Atom, Span)>; 4]> = SmallVec::new();
        for (r, span, flag) in results {
            if let (R::Atom(atom), Some((old, _))) = (&r, &base.atom)
                && old != atom
            {
                failures.push(Err((atom.clone(), span)));
                continue;
            }
            let mut shape = base.clone();
            let applied = match r {
                R::Atom(atom) => shape.add_atom(atom, span),
                R::Kinds(kinds) => shape.add_kinds(kinds, span),
                R::Valid(validator) => shape.add_validator(validator, span),
                _ => Ok(()),
            }
            .and_then(|()| shape.check());
            match applied {
                Ok(()) => {
                    let same = survivors
                        .iter_mut()
                        .find(|(s, _)| match (&s.atom, &shape.atom) {
                            (Some((a, _)), Some((b, _))) => a == b,
                            (None, None) => s.constraint_text() == shape.constraint_text(),
                            _ => false,
                        });
                    match same {
                        Some(existing) => existing.1 |= flag,
                        None => survivors.push((shape, flag)),
                    }
                }
                Err(conflict) => failures.push(Ok(conflict)),
            }
        }
        match survivors.len() {
            0 => {
                let n = failures.len();
                for failure in failures {
                    let mut failure = match (failure, &base.atom) {
                        (Ok(conflict), _) => conflict,
                        (Err((atom, span)), Some((old, old_span))) => {
                            atom_conflict(old, *old_span, &atom, span)
                        }
                        // Noted only when the value has an atom.
                        (Err(_), None) => continue,
                    };
                    if n > 1 {
                        failure.message = format!("{} (in empty disjunction)", failure.message);
                    }
                    self.conflict(v, failure);
                }
            }
            1 => {
                if let Some((shape, _)) = survivors.pop() {
                    self.vm(v).shape = shape;
                }
            }
            _ => {
                let parent = self.v(v).parent;
                let label = self.v(v).label;
                let field = self.v(v).field;
                let span = self.v(v).span;
                let mut alts = Vec::with_capacity(survivors.len());
                for (shape, flag) in survivors {
                    let alt = self.new_vertex(parent, label);
                    let vertex = self.vm(alt);
                    vertex.shape = shape;
                    vertex.state = State::Done;
                    vertex.field = field;
                    vertex.span = span;
                    alts.push((alt, flag));
                }
                self.vm(v).alts = Some(alts);
            }
        }
        true
    }

    /// A fresh vertex holding `v`'s conjuncts processed so far (not its disjunctions).
    fn clone_state(&mut self, v: VId) -> VId {
        // The copy starts without the pending disjunctions: set them aside instead of cloning
        // them only to clear the clone.
        let disjs = self.vm(v).take_disjs();
        let mut copy = if self.v(v).rare.as_ref().is_some_and(|r| r.is_empty()) {
            // Only the disjunctions were set aside: the copy needs no box of its own.
            let rare = self.vm(v).rare.take();
            let copy = self.v(v).clone();
            self.vm(v).rare = rare;
            copy
        } else {
            self.v(v).clone()
        };
        if !disjs.is_empty() {
            self.vm(v).rare_mut().disjs = disjs;
        }
        copy.origin = Some(self.v(v).origin.unwrap_or(v));
        copy.state = State::New;
        copy.cursor = copy.conjs.len();
        copy.depth = self.v(v).depth;
        // Children are copied unevaluated so the alternative can add to them.
        // The cloned arc and element vectors are reused, each entry replaced by its copy.
        let mut arcs = std::mem::take(&mut copy.arcs);
        let list = copy.list.take();
        // Pushed, not written over a placeholder vertex (built and dropped for nothing).
        let z = self.vs.len() as VId;
        self.vs.push(copy);
        for entry in &mut arcs {
            entry.1 = self.clone_unevaluated(entry.1, z);
        }
        self.vm(z).arcs = arcs;
        if let Some(mut list) = list {
            for elem in &mut list.elems {
                *elem = self.clone_unevaluated(*elem, z);
            }
            self.vm(z).list = Some(list);
        }
        z
    }

    fn clone_unevaluated(&mut self, v: VId, parent: VId) -> VId {
        let src = self.v(v);
        let label = src.label;
        let field = src.field;
        let docs = src.docs.clone();
        let span = src.span;
        let pos = src.pos;
        let from_comprehension = src.from_comprehension;
        let conjs: Conjs<'a> = src.conjs.iter().filter(|c| !c.derived).cloned().collect();
        let id = self.new_vertex(Some(parent), label);
        let vertex = self.vm(id);
        vertex.field = field;
        vertex.docs = docs;
        vertex.span = span;
        vertex.pos = pos;
        vertex.from_comprehension = from_comprehension;
        vertex.conjs = conjs;
        id
    }

    /// Errors in `v` and below (evaluating everything): a disjunct with any error, including a
    /// failed reference, is eliminated (cycles excepted: they may resolve later).
    pub fn deep_errors(&mut self, v: VId, depth: u32) -> Vec<Error> {
        self.eval_vertex(v);
        let v = self.deref(v);
        let mut errors: Vec<Error> = self
            .v(v)
            .errors
            .iter()
            .filter(|e| e.kind != ErrorKind::Cycle)
            .cloned()
            .collect();
        if depth > MAX_TREE_DEPTH || !errors.is_empty() {
            return errors;
        }
        if self.v(v).alts.is_some() {
            return errors;
        }
        // Optional fields are not descended into: nothing fills them, and recursive
        // definitions (`#L: {next?: #L}`) would never end.
        let children: Vec<VId> = self
            .v(v)
            .arcs
            .iter()
            .map(|(_, a)| *a)
            .filter(|a| self.v(*a).field != FieldKind::Optional)
            .chain(self.v(v).list.iter().flat_map(|l| l.elems.iter().copied()))
            .collect();
        for child in children {
            errors.extend(self.deep_errors(child, depth + 1));
            if !errors.is_empty() {
                break;
            }
        }
        errors
    }

    /// Structural equality of two evaluated values (for merging equal disjuncts).
    fn same_value(&mut self, a: VId, b: VId, depth: u32) -> bool {
        if depth > 20 {
            return false;
        }
        self.eval_vertex(a);
        self.eval_vertex(b);
        let (a, b) = (self.deref(a), self.deref(b));
        if a == b {
            return true;
        }
        let (va, vb) = (self.v(a), self.v(b));
        if va.alts.is_some() || vb.alts.is_some() {
            return false;
        }
        if va.is_struct != vb.is_struct || va.list.is_some() != vb.list.is_some() {
            return false;
        }
        match (&va.shape.atom, &vb.shape.atom) {
            (Some((x, _)), Some((y, _))) => return x == y,
            (None, None) => {}
            _ => return false,
        }
        if va.shape.kinds != vb.shape.kinds
            || va.shape.validators.len() != vb.shape.validators.len()
            || !va
                .shape
                .validators
                .iter()
                .zip(&vb.shape.validators)
                .all(|((x, _), (y, _))| x == y)
        {
            return false;
        }
        if let (Some(la), Some(lb)) = (&va.list, &vb.list) {
            if la.elems.len() != lb.elems.len()
                || la.closed_len.map(|c| c.0) != lb.closed_len.map(|c| c.0)
            {
                return false;
            }
            let pairs: Vec<(VId, VId)> = la
                .elems
                .iter()
                .copied()
                .zip(lb.elems.iter().copied())
                .collect();
            return pairs
                .into_iter()
                .all(|(x, y)| self.same_value(x, y, depth + 1));
        }
        if va.arcs.len() != vb.arcs.len() {
            return false;
        }
        let arcs_a = va.arcs.clone();
        let arcs_b = vb.arcs.clone();
        for (sym, x) in arcs_a {
            let Some((_, y)) = arcs_b.iter().find(|(s, _)| *s == sym) else {
                return false;
            };
            if self.v(x).field != self.v(*y).field || !self.same_value(x, *y, depth + 1) {
                return false;
            }
        }
        true
    }

    /// Arcs in (an approximation of) CUE v0.14's field order. A copy (callers evaluate while
    /// they iterate), on the stack for the usual struct of a few fields: every struct walked
    /// for a result copied its arcs into a heap vector (~70 K per 1,000 apps).
    pub fn ordered_arcs(&self, v: VId) -> SmallVec<[(Sym, VId); 8]> {
        let mut arcs: SmallVec<[(Sym, VId); 8]> = SmallVec::from_slice(&self.v(v).arcs);
        let has_comprehension_arcs = arcs.iter().any(|(_, arc)| self.v(*arc).from_comprehension);
        if !has_comprehension_arcs
            && arcs
                .windows(2)
                .all(|w| self.v(w[0].1).pos <= self.v(w[1].1).pos)
        {
            return arcs;
        }
        // Source order of the declarations (CUE v0.14 sorts fields topologically, which is
        // source order within a file); data fields keep their insertion order, last.
        arcs.sort_by_key(|(_, arc)| self.v(*arc).pos);
        if has_comprehension_arcs {
            // CUE's toposort chains a struct literal's own fields as one block placed at its
            // last field's position, and each comprehension's fields at their own: a
            // comprehension before that last field comes before all of the struct's own
            // fields (`{a: 1, if c {b: 2}, d: 3}` exports as `b, a, d`).
            let last_own = arcs
                .iter()
                .map(|(_, arc)| self.v(*arc))
                .filter(|arc| !arc.from_comprehension && arc.pos != u64::MAX)
                .map(|arc| arc.pos)
                .max();
            if let Some(last_own) = last_own {
                let is_early = |arc: VId| {
                    let arc = self.v(arc);
                    arc.from_comprehension && arc.pos < last_own
                };
                let mut reordered: SmallVec<[(Sym, VId); 8]> = arcs
                    .iter()
                    .copied()
                    .filter(|(_, arc)| is_early(*arc))
                    .collect();
                reordered.extend(arcs.iter().copied().filter(|(_, arc)| !is_early(*arc)));
                arcs = reordered;
            }
        }
        arcs
    }

    /// Follows forwarding (a disjunction resolved to one alternative).
    pub fn deref(&self, mut v: VId) -> VId {
        while let Some(next) = self.v(v).forward {
            v = next;
        }
        v
    }

    /// The vertex to use where a single value is needed: forwarded, and the default of an
    /// unresolved disjunction.
    pub fn concrete_vertex(&mut self, v: VId, span: Span) -> Result<VId, Error> {
        self.eval_vertex(v);
        let v = self.deref(v);
        match self.default_of(v) {
            Some(Ok(d)) => {
                self.eval_vertex(d);
                Ok(self.deref(d))
            }
            Some(Err(())) => Err(Error {
                kind: ErrorKind::Incomplete,
                message: format!("incomplete value {}", self.describe(v)),
                spans: vec![span],
                path: self.path(v),
            }),
            None => Ok(v),
        }
    }

    /// For an unresolved disjunction, its default (or an error when there is none).
    pub fn default_of(&self, v: VId) -> Option<Result<VId, ()>> {
        let alts = self.v(v).alts.as_ref()?;
        let defaults: Vec<VId> = alts.iter().filter(|(_, d)| *d).map(|(a, _)| *a).collect();
        if defaults.len() == 1 && alts.len() > 1 {
            Some(Ok(defaults[0]))
        } else {
            Some(Err(()))
        }
    }

    /// Short CUE text of a vertex's value for messages.
    pub fn describe(&self, v: VId) -> String {
        let v = self.deref(v);
        let vertex = self.v(v);
        if let Some(alts) = &vertex.alts {
            let parts: Vec<String> = alts
                .iter()
                .map(|(a, d)| {
                    let text = self.describe(*a);
                    if *d { format!("*{text}") } else { text }
                })
                .collect();
            return parts.join(" | ");
        }
        if vertex.list.is_some() {
            return "[...]".to_owned();
        }
        if vertex.is_struct {
            return "{...}".to_owned();
        }
        vertex.shape.constraint_text()
    }

    // ---------------------------------------------------------------------------------------
    // Expressions

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
                    .unwrap_or_else(|| super::compile::default_name(&import.path));
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
    fn resolve_ident(&mut self, ident: &'a ast::Ident, env: EnvId) -> Resolved {
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
                                let label = match &field.label {
                                    Label::Alias(_, inner) => inner.as_ref(),
                                    other => other,
                                };
                                // Static labels are interned by address (no string built per
                                // reference).
                                let (sym, static_label) = match label {
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
                                                    format!(
                                                        "invalid label {}: label must be a string",
                                                        other.cue_text()
                                                    ),
                                                    expr.span(),
                                                );
                                                return (Resolved::Error(error), None);
                                            }
                                            Err(error) => return (Resolved::Error(error), None),
                                        }
                                    }
                                    _ => {
                                        let what = "nested label alias".to_owned();
                                        return (Resolved::Unsupported(what), None);
                                    }
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
                        let resolved = match super::builtins::package(&import.path) {
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

    pub fn eval_expr(&mut self, expr: &'a Expr, env: EnvId) -> R {
        // A leaf (literal or identifier) uses a bounded amount of stack: whatever it evaluates
        // further (a referenced vertex, a label expression) goes through `eval_vertex` or
        // `eval_expr` again, which check. So leaves (~60 % of the expressions the render bench
        // evaluates) skip the stack check (a thread-local read and a call each).
        let leaf = match expr {
            Expr::Null(_)
            | Expr::Bool(..)
            | Expr::Number { .. }
            | Expr::Top(_)
            | Expr::Ident(_) => true,
            Expr::String { parts, .. } => {
                matches!(parts.as_slice(), [ast::StringPart::Lit(_)] | [])
            }
            _ => false,
        };
        if leaf {
            return self.eval_expr_inner(expr, env);
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.eval_expr_inner(expr, env)
        })
    }

    fn eval_expr_inner(&mut self, expr: &'a Expr, env: EnvId) -> R {
        match expr {
            Expr::Null(_) => R::Atom(Atom::Null),
            Expr::Bool(b, _) => R::Atom(Atom::Bool(*b)),
            Expr::Number { text, kind, span } => {
                let key = (self.ast_uid, expr as *const Expr as usize);
                if let Some(atom) = self.constants.get(&key) {
                    return R::Atom(atom.clone());
                }
                match parse_number(text, *kind == ast::NumberKind::Int) {
                    Ok(atom) => {
                        self.constants.insert(key, atom.clone());
                        R::Atom(atom)
                    }
                    Err(message) => {
                        let kind = if message.starts_with("unsupported") {
                            ErrorKind::Unsupported
                        } else {
                            ErrorKind::Syntax
                        };
                        R::Err(Error::new(kind, message, *span))
                    }
                }
            }
            Expr::String { parts, .. }
                if matches!(parts.as_slice(), [ast::StringPart::Lit(_)] | []) =>
            {
                // Constant strings are shared: evaluated many times, allocated once per thread.
                let key = (self.ast_uid, expr as *const Expr as usize);
                if let Some(atom) = self.constants.get(&key) {
                    return R::Atom(atom.clone());
                }
                let text = match parts.as_slice() {
                    [ast::StringPart::Lit(text)] => text.as_str(),
                    _ => "",
                };
                let atom = Atom::Str(Rc::from(text));
                self.constants.insert(key, atom.clone());
                R::Atom(atom)
            }
            Expr::String { parts, span } => match self.interpolate(parts, env, *span) {
                Ok(s) => R::Atom(Atom::Str(Rc::from(s.as_str()))),
                Err(e) => R::Err(e),
            },
            Expr::Bytes { parts, span } => match self.interpolate(parts, env, *span) {
                Ok(s) => R::Atom(Atom::Bytes(Rc::from(s.as_bytes()))),
                Err(e) => R::Err(e),
            },
            Expr::Top(_) => R::Top,
            Expr::Bottom(span) => R::Err(Error::new(
                ErrorKind::Conflict,
                "explicit error (_|_ literal) in source",
                *span,
            )),
            Expr::Paren(inner, _) => self.eval_expr(inner, env),
            Expr::Ident(ident) => self.eval_ident(ident, env),
            Expr::Selector {
                base,
                label,
                label_span,
                span,
            } => {
                let base_r = self.eval_expr(base, env);
                match base_r {
                    R::Pkg(pkg) => super::builtins::member(pkg, label, *span),
                    R::Err(e) => R::Err(e),
                    other => {
                        let sym = self.intern_ast(label);
                        self.select(other, sym, *label_span)
                    }
                }
            }
            Expr::Index { base, index, span } => {
                let base_r = self.eval_expr(base, env);
                if let R::Err(e) = base_r {
                    return R::Err(e);
                }
                let index_r = self.eval_expr(index, env);
                let index = match self.concrete(index_r, index.span()) {
                    Ok(atom) => atom,
                    Err(e) => return R::Err(e),
                };
                self.index(base_r, index, *span)
            }
            Expr::Slice { base, lo, hi, span } => {
                self.slice(base, lo.as_deref(), hi.as_deref(), env, *span)
            }
            Expr::Call { func, args, span } => self.call(func, args, env, *span),
            Expr::Unary { op, operand, span } => self.unary(*op, operand, env, *span),
            Expr::Binary {
                op: BinaryOp::Unify | BinaryOp::Disjunction,
                ..
            } => self.temp_vertex(expr, env),
            Expr::Binary { op, lhs, rhs, span } => self.binary(*op, lhs, rhs, env, *span),
            Expr::Struct(_) | Expr::List(_) => self.temp_vertex(expr, env),
        }
    }

    /// `base[index]` for an evaluated base and a concrete index.
    fn index(&mut self, base: R, index: Atom, span: Span) -> R {
        match index {
            Atom::Str(s) => {
                let sym = self.intern(&s);
                self.select(base, sym, span)
            }
            Atom::Int(i) => self.index_list(base, i, span),
            other => R::Err(Error::new(
                ErrorKind::Conflict,
                format!("invalid index {}", other.cue_text()),
                span,
            )),
        }
    }

    /// Evaluates an expression into a fresh vertex.
    fn temp_vertex(&mut self, expr: &'a Expr, env: EnvId) -> R {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(t, ConjKind::Expr(expr), env, Close::Open, 0, false);
        self.eval_vertex(t);
        R::V(t)
    }

    fn eval_ident(&mut self, ident: &'a ast::Ident, env: EnvId) -> R {
        let resolved = self.resolve_ident(ident, env);
        self.ident_value(ident, resolved)
    }

    /// The value of `ident`, resolved to `resolved`.
    fn ident_value(&mut self, ident: &'a ast::Ident, resolved: Resolved) -> R {
        match resolved {
            Resolved::Vertex(v) => R::V(v),
            Resolved::Field(v) => {
                // Only once the struct is complete is an optional field known to stay one
                // (a later conjunct may still make it regular).
                let parent_done = self
                    .v(v)
                    .parent
                    .is_some_and(|p| self.v(p).state == State::Done);
                if parent_done && self.v(v).field == FieldKind::Optional {
                    R::Err(Error::new(
                        ErrorKind::Incomplete,
                        format!("cannot reference optional field: {}", ident.name),
                        ident.span,
                    ))
                } else {
                    R::V(v)
                }
            }
            Resolved::Error(error) => R::Err(error),
            Resolved::Pkg(pkg) => R::Pkg(pkg),
            Resolved::Unsupported(what) if !what.is_empty() => R::Err(Error::new(
                ErrorKind::Unsupported,
                format!("unsupported: {what}"),
                ident.span,
            )),
            Resolved::Unsupported(_) => match ident.name.as_str() {
                "int" => R::Kinds(KindSet::INT),
                "float" => R::Kinds(KindSet::FLOAT),
                "number" => R::Kinds(KindSet::NUMBER),
                "string" => R::Kinds(KindSet::STRING),
                "bytes" => R::Kinds(KindSet::BYTES),
                "bool" => R::Kinds(KindSet::BOOL),
                "null" => R::Atom(Atom::Null),
                name if predeclared_range(name).is_some() => {
                    self.predeclared_type(name, ident.span)
                }
                "len" | "close" | "and" | "or" | "div" | "mod" | "quo" | "rem" => {
                    R::Func(super::builtins::predeclared(&ident.name))
                }
                _ => R::Err(Error::new(
                    ErrorKind::Reference,
                    format!("reference \"{}\" not found", ident.name),
                    ident.span,
                )),
            },
        }
    }

    /// A predeclared number type with a range (`uint8`, `int32`, `float64`, ...): its kind
    /// and its bounds, as a fresh vertex.
    fn predeclared_type(&mut self, name: &str, span: Span) -> R {
        let Some((kinds, lo, hi)) = predeclared_range(name) else {
            return R::Err(Error::new(
                ErrorKind::Reference,
                format!("reference \"{name}\" not found"),
                span,
            ));
        };
        let t = self.new_vertex(None, EMPTY_SYM);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(t, ConjKind::Kinds(kinds, span), 0, Close::Open, 0, false);
        for (op, bound) in [(BoundOp::Ge, lo), (BoundOp::Le, hi)] {
            if let Some(bound) = bound {
                let validator = Validator::Bound(op, bound);
                self.add_conj(
                    t,
                    ConjKind::Validator(Box::new((validator, span))),
                    0,
                    Close::Open,
                    0,
                    false,
                );
            }
        }
        self.eval_vertex(t);
        R::V(t)
    }

    /// `x.label` or `x["label"]`.
    fn select(&mut self, base: R, sym: Sym, span: Span) -> R {
        let base = match self.vertex_of(base, span) {
            Ok(v) => v,
            Err(e) => return R::Err(e),
        };
        let base = match self.concrete_vertex(base, span) {
            Ok(v) => v,
            Err(e) => return R::Err(e),
        };
        match self.lookup_arc(base, sym, span) {
            Ok(arc) => R::V(arc),
            Err(e) => R::Err(e),
        }
    }

    /// The arc `sym` of the evaluated vertex `base`, if it exists as a regular field.
    pub fn lookup_arc(&mut self, base: VId, sym: Sym, span: Span) -> Result<VId, Error> {
        let running = self.v(base).state == State::Running;
        if let Some(error) = self.v(base).errors.first() {
            return Err(error.clone());
        }
        match self.find_arc(base, sym) {
            Some(arc) => {
                let field = self.v(arc).field;
                if field == FieldKind::Optional {
                    let name = self.sym(sym).to_owned();
                    return Err(Error {
                        kind: ErrorKind::Incomplete,
                        message: format!("cannot reference optional field: {name}"),
                        spans: vec![span],
                        path: self.path(base),
                    });
                }
                Ok(arc)
            }
            None => {
                let name = self.sym(sym).to_owned();
                let vertex = self.v(base);
                let is_struct = vertex.is_struct || vertex.struct_hint || running;
                let message = if is_struct {
                    format!("undefined field: {name}")
                } else if vertex.list.is_some() {
                    format!("invalid selector {name} for list")
                } else if vertex.shape.atom.is_some() {
                    format!(
                        "invalid selector {name} for value {}",
                        vertex.shape.constraint_text()
                    )
                } else {
                    format!("undefined field: {name}")
                };
                let kind = if is_struct || vertex.shape.atom.is_none() {
                    ErrorKind::Incomplete
                } else {
                    ErrorKind::Reference
                };
                Err(Error {
                    kind,
                    message,
                    spans: vec![span],
                    path: self.path(base),
                })
            }
        }
    }

    fn index_list(&mut self, base: R, i: i64, span: Span) -> R {
        let base = match self
            .vertex_of(base, span)
            .and_then(|v| self.concrete_vertex(v, span))
        {
            Ok(v) => v,
            Err(e) => return R::Err(e),
        };
        if let Some(error) = self.v(base).errors.first() {
            return R::Err(error.clone());
        }
        let Some(list) = &self.v(base).list else {
            return R::Err(Error::new(
                ErrorKind::Conflict,
                format!("invalid index {i} for {}", self.describe(base)),
                span,
            ));
        };
        match usize::try_from(i).ok().and_then(|i| list.elems.get(i)) {
            Some(elem) => R::V(*elem),
            None => R::Err(Error::new(
                ErrorKind::Incomplete,
                format!("index out of range [{i}] with length {}", list.elems.len()),
                span,
            )),
        }
    }

    fn slice(
        &mut self,
        base: &'a Expr,
        lo: Option<&'a Expr>,
        hi: Option<&'a Expr>,
        env: EnvId,
        span: Span,
    ) -> R {
        let base_r = self.eval_expr(base, env);
        let bound = |this: &mut Self, e: Option<&'a Expr>| -> Result<Option<i64>, Error> {
            match e {
                None => Ok(None),
                Some(e) => {
                    let r = this.eval_expr(e, env);
                    match this.concrete(r, e.span())? {
                        Atom::Int(i) => Ok(Some(i)),
                        other => Err(Error::new(
                            ErrorKind::Conflict,
                            format!("invalid slice index {}", other.cue_text()),
                            e.span(),
                        )),
                    }
                }
            }
        };
        let (lo, hi) = match (bound(self, lo), bound(self, hi)) {
            (Ok(l), Ok(h)) => (l, h),
            (Err(e), _) | (_, Err(e)) => return R::Err(e),
        };
        let items = match self.list_items(base_r, span) {
            Ok(items) => items,
            Err(e) => return R::Err(e),
        };
        let n = items.len() as i64;
        let lo = lo.unwrap_or(0);
        let hi = hi.unwrap_or(n);
        if lo < 0 || hi > n || lo > hi {
            return R::Err(Error::new(
                ErrorKind::Conflict,
                format!("invalid slice index [{lo}:{hi}] with length {n}"),
                span,
            ));
        }
        R::V(self.list_of(items[lo as usize..hi as usize].to_vec(), span))
    }

    /// A new list vertex whose elements unify with `items`.
    pub fn list_of(&mut self, items: Vec<VId>, span: Span) -> VId {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(
            t,
            ConjKind::ListOf(Rc::new(items), span),
            0,
            Close::Open,
            0,
            false,
        );
        t
    }

    /// A new struct vertex with the given fields.
    pub fn struct_of(&mut self, fields: Vec<(Sym, VId)>, span: Span) -> VId {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(
            t,
            ConjKind::StructOf(Rc::new(fields), span),
            0,
            Close::Open,
            0,
            false,
        );
        t
    }

    /// A new vertex holding one atom.
    pub fn atom_vertex(&mut self, atom: Atom, span: Span) -> VId {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        self.add_conj(
            t,
            ConjKind::Atom(Box::new((atom, span))),
            0,
            Close::Open,
            0,
            false,
        );
        t
    }

    /// Builds vertices from JSON data (builtin results).
    pub fn json_vertex(&mut self, json: &serde_json::Value, span: Span) -> VId {
        match json {
            serde_json::Value::Object(map) => {
                let mut fields = Vec::new();
                for (key, value) in map {
                    let sym = self.intern(key);
                    let child = self.json_vertex(value, span);
                    fields.push((sym, child));
                }
                self.struct_of(fields, span)
            }
            serde_json::Value::Array(items) => {
                let elems = items.iter().map(|i| self.json_vertex(i, span)).collect();
                self.list_of(elems, span)
            }
            scalar => self.atom_vertex(json_atom(scalar), span),
        }
    }

    pub fn vertex_of(&mut self, r: R, span: Span) -> Result<VId, Error> {
        match r {
            R::V(v) => Ok(v),
            R::Err(e) => Err(e),
            R::Atom(atom) => Ok(self.atom_vertex(atom, span)),
            R::Kinds(kinds) => {
                let label = EMPTY_SYM;
                let t = self.new_vertex(None, label);
                self.add_conj(t, ConjKind::Kinds(kinds, span), 0, Close::Open, 0, false);
                Ok(t)
            }
            R::Valid(validator) => {
                let label = EMPTY_SYM;
                let t = self.new_vertex(None, label);
                self.add_conj(
                    t,
                    ConjKind::Validator(Box::new((validator, span))),
                    0,
                    Close::Open,
                    0,
                    false,
                );
                Ok(t)
            }
            R::Top => {
                let label = EMPTY_SYM;
                Ok(self.new_vertex(None, label))
            }
            R::Pkg(name) | R::Func(name) => Err(Error::new(
                ErrorKind::Unsupported,
                format!("unsupported: {name} used as a value"),
                span,
            )),
        }
    }

    /// The elements of a list value.
    pub fn list_items(&mut self, r: R, span: Span) -> Result<Vec<VId>, Error> {
        let v = self.vertex_of(r, span)?;
        let v = self.concrete_vertex(v, span)?;
        if let Some(error) = self.v(v).errors.first() {
            return Err(error.clone());
        }
        match &self.v(v).list {
            Some(list) => Ok(list.elems.clone()),
            None => Err(Error::new(
                if self.v(v).shape.atom.is_some() || self.v(v).is_struct {
                    ErrorKind::Conflict
                } else {
                    ErrorKind::Incomplete
                },
                format!("cannot use {} as list", self.describe(v)),
                span,
            )),
        }
    }

    /// Whether the list value `v` is open (`[...T]`).
    /// The element constraint of an open list (`T` of `[...T]`, every such `T` unified), as a
    /// new evaluated vertex below the list; `None` without one. For the syntax-like export,
    /// which keeps it (KubeVela's patches apply `[...{...}]` to every element).
    pub fn list_element_constraint(&mut self, v: VId) -> Option<VId> {
        let v = self.deref(v);
        let types = self
            .v(v)
            .list
            .as_ref()
            .filter(|list| list.closed_len.is_none() && !list.types.is_empty())?
            .types
            .clone();
        let sym = self.intern("...");
        let constraint = self.new_vertex(Some(v), sym);
        self.vm(constraint).field = FieldKind::Regular;
        for ty in &types {
            self.add_conj(constraint, ty.kind.clone(), ty.env, ty.close, 0, false);
        }
        self.eval_vertex(constraint);
        Some(constraint)
    }

    pub fn list_is_open(&self, v: VId) -> bool {
        let v = self.deref(v);
        self.v(v)
            .list
            .as_ref()
            .is_some_and(|l| l.closed_len.is_none())
    }

    /// The regular fields of a struct value.
    pub fn struct_fields(&mut self, r: R, span: Span) -> Result<Vec<(Sym, VId)>, Error> {
        let v = self.vertex_of(r, span)?;
        let v = self.concrete_vertex(v, span)?;
        if let Some(error) = self.v(v).errors.first() {
            return Err(error.clone());
        }
        if !(self.v(v).is_struct || self.v(v).struct_hint) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("cannot use {} as struct", self.describe(v)),
                span,
            ));
        }
        let arcs = self.ordered_arcs(v);
        Ok(arcs
            .into_iter()
            .filter(|(sym, arc)| {
                let label = self.sym(*sym);
                !is_hidden(label)
                    && !is_definition(label)
                    && self.v(*arc).field == FieldKind::Regular
            })
            .collect())
    }

    /// A concrete scalar from an expression result.
    pub fn concrete(&mut self, r: R, span: Span) -> Result<Atom, Error> {
        match r {
            R::Atom(atom) => Ok(atom),
            R::Err(e) => Err(e),
            R::V(v) => {
                if self.v(v).state == State::Running {
                    if let Some((atom, _)) = &self.v(v).shape.atom
                        && self.v(v).disjs().is_empty()
                    {
                        return Ok(atom.clone());
                    }
                    // Incomplete rather than Cycle: a value that refers back to itself
                    // before it is known is not an error Validate() reports (CUE neither).
                    return Err(Error {
                        kind: ErrorKind::Incomplete,
                        message: "cycle in reference".to_owned(),
                        spans: vec![span],
                        path: self.path(v),
                    });
                }
                let v = self.concrete_vertex(v, span)?;
                let vertex = self.v(v);
                if let Some(error) = vertex.errors.first() {
                    return Err(error.clone());
                }
                if let Some((atom, _)) = &vertex.shape.atom {
                    return Ok(atom.clone());
                }
                let (kind, message) = if vertex.list.is_some() || vertex.is_struct {
                    (
                        ErrorKind::Conflict,
                        format!("invalid operand {} (expected a scalar)", self.describe(v)),
                    )
                } else if vertex.alts.is_some() {
                    (
                        ErrorKind::Incomplete,
                        format!("incomplete value {}", self.describe(v)),
                    )
                } else if vertex.struct_hint && vertex.shape.kinds == KindSet::TOP {
                    (
                        ErrorKind::Conflict,
                        "invalid operand {...} (expected a scalar)".to_owned(),
                    )
                } else {
                    (
                        ErrorKind::Incomplete,
                        format!("incomplete value {}", vertex.shape.constraint_text()),
                    )
                };
                Err(Error {
                    kind,
                    message,
                    spans: vec![span],
                    path: self.path(v),
                })
            }
            R::Kinds(kinds) => Err(Error::new(
                ErrorKind::Incomplete,
                format!("incomplete value {}", super::val::kind_text(kinds)),
                span,
            )),
            R::Valid(validator) => Err(Error::new(
                ErrorKind::Incomplete,
                format!("incomplete value {}", validator.text()),
                span,
            )),
            R::Top => Err(Error::new(
                ErrorKind::Incomplete,
                "incomplete value _",
                span,
            )),
            R::Pkg(name) | R::Func(name) => Err(Error::new(
                ErrorKind::Unsupported,
                format!("unsupported: {name} used as a value"),
                span,
            )),
        }
    }

    pub fn regex(&mut self, pattern: &str, span: Span) -> Result<Rc<regex::Regex>, Error> {
        if let Some(re) = self.regexes.get(pattern) {
            return Ok(re.clone());
        }
        let re = regex::Regex::new(pattern).map_err(|e| {
            Error::new(
                ErrorKind::Conflict,
                format!("invalid regular expression {pattern:?}: {e}"),
                span,
            )
        })?;
        let re = Rc::new(re);
        self.regexes.insert(pattern.to_owned(), re.clone());
        Ok(re)
    }

    fn interpolate(
        &mut self,
        parts: &'a [ast::StringPart],
        env: EnvId,
        span: Span,
    ) -> Result<String, Error> {
        let mut out = String::new();
        for part in parts {
            match part {
                ast::StringPart::Lit(s) => out.push_str(s),
                ast::StringPart::Interp(expr) => {
                    let r = self.eval_expr(expr, env);
                    match self.concrete(r, expr.span())? {
                        Atom::Str(s) => out.push_str(&s),
                        Atom::Int(i) => out.push_str(&i.to_string()),
                        Atom::Float(f) => out.push_str(&format_float(f)),
                        Atom::Bool(b) => out.push_str(&b.to_string()),
                        Atom::Bytes(b) => out.push_str(&String::from_utf8_lossy(&b)),
                        Atom::Null => {
                            return Err(Error::new(
                                ErrorKind::Conflict,
                                "invalid interpolation: cannot use null as string",
                                expr.span(),
                            ));
                        }
                    }
                }
            }
        }
        let _ = span;
        self.charge_bytes(out.len());
        Ok(out)
    }

    fn unary(&mut self, op: UnaryOp, operand: &'a Expr, env: EnvId, span: Span) -> R {
        let r = self.eval_expr(operand, env);
        if op == UnaryOp::Default {
            return r;
        }
        let atom = match self.concrete(r, operand.span()) {
            Ok(atom) => atom,
            Err(e) => return R::Err(e),
        };
        let bad = |what: &str| {
            R::Err(Error::new(
                ErrorKind::Conflict,
                format!("invalid operation {what}{}", atom.cue_text()),
                span,
            ))
        };
        match op {
            UnaryOp::Neg => match atom {
                Atom::Int(i) => i
                    .checked_neg()
                    .map_or_else(|| overflow(span), |i| R::Atom(Atom::Int(i))),
                Atom::Float(f) => R::Atom(Atom::Float(-f)),
                _ => bad("-"),
            },
            UnaryOp::Pos => match atom {
                Atom::Int(_) | Atom::Float(_) => R::Atom(atom),
                _ => bad("+"),
            },
            UnaryOp::Not => match atom {
                Atom::Bool(b) => R::Atom(Atom::Bool(!b)),
                _ => bad("!"),
            },
            UnaryOp::Lt | UnaryOp::Le | UnaryOp::Gt | UnaryOp::Ge => {
                let bop = match op {
                    UnaryOp::Lt => BoundOp::Lt,
                    UnaryOp::Le => BoundOp::Le,
                    UnaryOp::Gt => BoundOp::Gt,
                    _ => BoundOp::Ge,
                };
                match atom {
                    Atom::Int(_) | Atom::Float(_) | Atom::Str(_) | Atom::Bytes(_) => {
                        R::Valid(Validator::Bound(bop, atom))
                    }
                    _ => bad(bop.text()),
                }
            }
            UnaryOp::Ne => R::Valid(Validator::NotEqual(atom)),
            UnaryOp::Match | UnaryOp::NotMatch => match atom {
                Atom::Str(s) => match self.regex(&s, span) {
                    Ok(re) => R::Valid(Validator::Match(re, op == UnaryOp::Match)),
                    Err(e) => R::Err(e),
                },
                _ => bad("=~"),
            },
            UnaryOp::Default => R::Top,
        }
    }

    /// Whether an expression evaluates without error (`x != _|_`).
    fn exists(&mut self, expr: &'a Expr, env: EnvId) -> bool {
        match self.probe(expr, env) {
            None => false,
            Some(R::Err(_)) => false,
            Some(R::V(v)) => {
                if self.v(v).state == State::Running {
                    return true;
                }
                self.eval_vertex(v);
                let v = self.deref(v);
                if !self.v(v).errors.is_empty() {
                    return false;
                }
                match self.default_of(v) {
                    Some(Ok(d)) => {
                        self.eval_vertex(d);
                        let d = self.deref(d);
                        self.v(d).errors.is_empty()
                    }
                    _ => true,
                }
            }
            Some(_) => true,
        }
    }

    /// Evaluates a selector chain for an existence check without building errors for a
    /// missing field (the common `if parameter.x != _|_`); `None` when it does not exist.
    fn probe(&mut self, expr: &'a Expr, env: EnvId) -> Option<R> {
        let (base, label, span) = match expr {
            Expr::Paren(inner, _) => return self.probe(inner, env),
            // An optional field without a regular declaration does not exist (yet).
            // Resolved once: the value is that of the same resolution.
            Expr::Ident(ident) => {
                return match self.resolve_ident(ident, env) {
                    Resolved::Field(v) if self.v(v).field == FieldKind::Optional => None,
                    resolved => Some(self.ident_value(ident, resolved)),
                };
            }
            Expr::Selector {
                base, label, span, ..
            } => (base, label.as_str(), *span),
            Expr::Index { base, index, span } => match index.as_ref() {
                Expr::String { parts, .. } => match parts.as_slice() {
                    [ast::StringPart::Lit(label)] => (base, label.as_str(), *span),
                    _ => return self.probe_index(base, index, env, *span),
                },
                _ => return self.probe_index(base, index, env, *span),
            },
            _ => return Some(self.eval_expr(expr, env)),
        };
        match self.probe(base, env)? {
            R::V(x) => {
                let x = self.concrete_vertex(x, span).ok()?;
                if !self.v(x).errors.is_empty() {
                    return None;
                }
                let sym = self.intern_ast(label);
                let arc = self.find_arc(x, sym)?;
                if self.v(arc).field == FieldKind::Optional {
                    return None;
                }
                Some(R::V(arc))
            }
            R::Pkg(_) => Some(self.eval_expr(expr, env)),
            _ => None,
        }
    }

    /// [`Engine::probe`] of `base[index]` with a computed index (`_delKeys[k] == _|_`): what
    /// evaluating it gives, except that a missing field is `None` instead of an error built
    /// (path, message) only to be dropped. Every error is `None` too, as [`Engine::exists`]
    /// treats them alike.
    fn probe_index(
        &mut self,
        base: &'a Expr,
        index: &'a Expr,
        env: EnvId,
        span: Span,
    ) -> Option<R> {
        let base_r = self.eval_expr(base, env);
        if let R::Err(_) = base_r {
            return None;
        }
        let index_r = self.eval_expr(index, env);
        let index = self.concrete(index_r, index.span()).ok()?;
        let Atom::Str(label) = index else {
            return Some(self.index(base_r, index, span));
        };
        // `select` without its errors.
        let x = self.vertex_of(base_r, span).ok()?;
        let x = self.concrete_vertex(x, span).ok()?;
        if !self.v(x).errors.is_empty() {
            return None;
        }
        let sym = self.intern(&label);
        let arc = self.find_arc(x, sym)?;
        if self.v(arc).field == FieldKind::Optional {
            return None;
        }
        Some(R::V(arc))
    }

    fn binary(&mut self, op: BinaryOp, lhs: &'a Expr, rhs: &'a Expr, env: EnvId, span: Span) -> R {
        match op {
            BinaryOp::Eq | BinaryOp::Ne if is_bottom(rhs) || is_bottom(lhs) => {
                let other = if is_bottom(rhs) { lhs } else { rhs };
                let exists = self.exists(other, env);
                return R::Atom(Atom::Bool(if op == BinaryOp::Ne {
                    exists
                } else {
                    !exists
                }));
            }
            BinaryOp::And | BinaryOp::Or => {
                let l = self.eval_expr(lhs, env);
                let l = match self.concrete(l, lhs.span()) {
                    Ok(Atom::Bool(b)) => b,
                    Ok(other) => return bad_operand(op, &other, span),
                    Err(e) => return R::Err(e),
                };
                if op == BinaryOp::And && !l {
                    return R::Atom(Atom::Bool(false));
                }
                if op == BinaryOp::Or && l {
                    return R::Atom(Atom::Bool(true));
                }
                let r = self.eval_expr(rhs, env);
                return match self.concrete(r, rhs.span()) {
                    Ok(Atom::Bool(b)) => R::Atom(Atom::Bool(b)),
                    Ok(other) => bad_operand(op, &other, span),
                    Err(e) => R::Err(e),
                };
            }
            _ => {}
        }
        let l = self.eval_expr(lhs, env);
        let r = self.eval_expr(rhs, env);
        // Comparing a struct or list with null is allowed (and false for ==).
        if matches!(op, BinaryOp::Eq | BinaryOp::Ne) {
            let lnull = matches!(l, R::Atom(Atom::Null));
            let rnull = matches!(r, R::Atom(Atom::Null));
            if lnull != rnull {
                let other = if lnull { r.clone() } else { l.clone() };
                if let R::V(v) = other
                    && let Ok(v) = self.concrete_vertex(v, span)
                    && (self.v(v).is_struct || self.v(v).list.is_some())
                {
                    return R::Atom(Atom::Bool(op == BinaryOp::Ne));
                }
            }
        }
        if matches!(op, BinaryOp::Add | BinaryOp::Mul) && (self.is_list(&l) || self.is_list(&r)) {
            if self.legacy_list_arithmetic {
                return self.legacy_list_op(op, l, r, span);
            }
            return R::Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "{} of lists is superseded by list.{}; see https://cuelang.org/e/v0.11-list-arithmetic",
                    if op == BinaryOp::Add {
                        "Addition"
                    } else {
                        "Multiplication"
                    },
                    if op == BinaryOp::Add {
                        "Concat"
                    } else {
                        "Repeat"
                    }
                ),
                span,
            ));
        }
        let a = match self.concrete(l, lhs.span()) {
            Ok(a) => a,
            Err(e) => return R::Err(e),
        };
        let b = match self.concrete(r, rhs.span()) {
            Ok(b) => b,
            Err(e) => return R::Err(e),
        };
        match binary_atoms(op, &a, &b, span) {
            Ok(atom) => {
                if let Atom::Str(text) = &atom {
                    self.charge_bytes(text.len());
                }
                R::Atom(atom)
            }
            Err(e) => R::Err(e),
        }
    }

    /// `list + list` (concatenation) and `list * n` / `n * list` (repetition), as CUE before
    /// v0.11 and KubeVela's legacy-template upgrade compute them.
    fn legacy_list_op(&mut self, op: BinaryOp, l: R, r: R, span: Span) -> R {
        let items = if op == BinaryOp::Add {
            let left = match self.list_items(l, span) {
                Ok(items) => items,
                Err(e) => return R::Err(e),
            };
            match self.list_items(r, span) {
                Ok(right) => left.into_iter().chain(right).collect(),
                Err(e) => return R::Err(e),
            }
        } else {
            let (list, count) = if self.is_list(&l) { (l, r) } else { (r, l) };
            let items = match self.list_items(list, span) {
                Ok(items) => items,
                Err(e) => return R::Err(e),
            };
            let n = match self.concrete(count, span) {
                Ok(Atom::Int(n)) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                Ok(other) => {
                    return R::Err(Error::new(
                        ErrorKind::Conflict,
                        format!("cannot repeat a list {} times", other.cue_text()),
                        span,
                    ));
                }
                Err(e) => return R::Err(e),
            };
            if items.len().saturating_mul(n) > MAX_STRING_LEN {
                return R::Err(Error::new(
                    ErrorKind::Unsupported,
                    "unsupported: list repetition result too large",
                    span,
                ));
            }
            let mut out = Vec::with_capacity(items.len() * n);
            for _ in 0..n {
                out.extend(items.iter().copied());
            }
            out
        };
        R::V(self.list_of(items, span))
    }

    fn is_list(&mut self, r: &R) -> bool {
        if let R::V(v) = r {
            let v = *v;
            self.eval_vertex(v);
            let v = self.deref(v);
            return self.v(v).list.is_some();
        }
        false
    }

    fn call(&mut self, func: &'a Expr, args: &'a [Expr], env: EnvId, span: Span) -> R {
        let f = match self.eval_expr(func, env) {
            R::Func(name) => name,
            R::Err(e) => return R::Err(e),
            _ => {
                return R::Err(Error::new(
                    ErrorKind::Conflict,
                    "cannot call non-function",
                    func.span(),
                ));
            }
        };
        if f == "close" || f == "and" || f == "or" {
            // Evaluated as a value of its own, through the conjunct machinery.
            return self.temp_call(func, args, env, span, f);
        }
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            values.push((self.eval_expr(arg, env), arg.span()));
        }
        super::builtins::call(self, f, values, span)
    }

    fn temp_call(
        &mut self,
        _func: &'a Expr,
        args: &'a [Expr],
        env: EnvId,
        span: Span,
        f: &'static str,
    ) -> R {
        let label = EMPTY_SYM;
        let t = self.new_vertex(None, label);
        self.vm(t).field = FieldKind::Regular;
        match (f, args) {
            ("close", [arg]) => {
                self.add_conj(t, ConjKind::Expr(arg), env, Close::Shallow, 0, false)
            }
            ("and", [arg]) => {
                let r = self.eval_expr(arg, env);
                match self.list_items(r, span) {
                    Ok(items) => {
                        for item in items {
                            self.add_conj(t, ConjKind::Ref(item, span), env, Close::Open, 0, false);
                        }
                    }
                    Err(e) => return R::Err(e),
                }
            }
            ("or", [arg]) => {
                let r = self.eval_expr(arg, env);
                match self.list_items(r, span) {
                    Ok(items) => {
                        let mut alts = Vec::new();
                        for item in items {
                            self.eval_vertex(item);
                            if self.deep_errors(item, 0).is_empty() {
                                alts.push((self.deref(item), true));
                            }
                        }
                        match alts.len() {
                            0 => {
                                return R::Err(Error::new(
                                    ErrorKind::Conflict,
                                    "empty disjunction",
                                    span,
                                ));
                            }
                            1 => self.vm(t).forward = Some(alts[0].0),
                            _ => self.vm(t).alts = Some(alts),
                        }
                        self.vm(t).state = State::Done;
                        return R::V(t);
                    }
                    Err(e) => return R::Err(e),
                }
            }
            _ => {
                return R::Err(Error::new(
                    ErrorKind::Builtin,
                    format!("{f}: expected 1 argument"),
                    span,
                ));
            }
        }
        self.eval_vertex(t);
        R::V(t)
    }
}

/// The kind and bounds of a predeclared number type (spec: "Predeclared identifiers").
///
/// Integers are 64-bit here, so `uint64`, `int64`, `int128` and `uint128` keep only the bounds
/// an `i64` can violate: every integer the evaluator can hold is within the others (larger
/// literals are rejected as unsupported when parsed).
fn predeclared_range(name: &str) -> Option<(KindSet, Option<Atom>, Option<Atom>)> {
    let int =
        |lo: i64, hi: Option<i64>| Some((KindSet::INT, Some(Atom::Int(lo)), hi.map(Atom::Int)));
    match name {
        "uint" | "uint64" | "uint128" => int(0, None),
        "uint8" => int(0, Some(255)),
        "uint16" => int(0, Some(65_535)),
        "uint32" => int(0, Some(4_294_967_295)),
        "rune" => int(0, Some(0x10_FFFF)),
        "int8" => int(-128, Some(127)),
        "int16" => int(-32_768, Some(32_767)),
        "int32" => int(-2_147_483_648, Some(2_147_483_647)),
        "int64" | "int128" => Some((KindSet::INT, None, None)),
        "float32" => Some((
            KindSet::NUMBER,
            Some(Atom::Float(-3.402_823_466_385_288_6e38)),
            Some(Atom::Float(3.402_823_466_385_288_6e38)),
        )),
        "float64" => Some((KindSet::NUMBER, None, None)),
        _ => None,
    }
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

fn is_ident(expr: &Expr, name: &str) -> bool {
    matches!(expr, Expr::Ident(ident) if ident.name == name)
}

fn is_bottom(expr: &Expr) -> bool {
    match expr {
        Expr::Bottom(_) => true,
        Expr::Paren(inner, _) => is_bottom(inner),
        _ => false,
    }
}

fn conj_span(kind: &ConjKind<'_>) -> Span {
    match kind {
        ConjKind::Expr(e) => e.span(),
        ConjKind::Body(lit) => lit.span,
        ConjKind::File(file) => file.span,
        ConjKind::Atom(atom) => atom.1,
        ConjKind::Validator(validator) => validator.1,
        ConjKind::Json(_, s)
        | ConjKind::Ref(_, s)
        | ConjKind::StructOf(_, s)
        | ConjKind::ListOf(_, s)
        | ConjKind::Kinds(_, s)
        | ConjKind::Or(_, s) => *s,
    }
}

/// Collects the leaves of a disjunction with whether each is marked default.
/// The alternatives of a disjunction expression with their default flags, and whether it has
/// a default at all, following the spec's rewrite rules for nested disjunctions: in a marked
/// disjunction (`*a | b`), a marked term keeps its own default if it has one and is its own
/// default otherwise (M1, M2), and an unmarked term loses its defaults (M0, M3); in an unmarked
/// one, terms keep their defaults (D0-D2). So `*1 | (*2 | 3)` defaults to 1 and
/// `*(*1 | 2) | 3` to 1.
fn disjunction_terms(expr: &Expr) -> (Terms<'_>, bool) {
    let mut terms = Terms::new();
    disjunction_chain(expr, &mut terms);
    let marked = terms.iter().any(|(_, m)| *m);
    let mut leaves = Terms::new();
    let mut has_default = marked;
    for (term, term_marked) in terms {
        let nested = match term {
            Expr::Paren(inner, _) if is_disjunction(inner) => inner.as_ref(),
            other if is_disjunction(other) => other,
            // A plain term is its own leaf, default exactly when marked in a marked chain
            // (what the nested case below gives for a one-leaf, unmarked disjunction).
            other => {
                leaves.push((other, marked && term_marked));
                continue;
            }
        };
        let (inner, inner_default) = disjunction_terms(nested);
        for (leaf, leaf_default) in inner {
            let is_default = match (marked, term_marked) {
                (true, true) => !inner_default || leaf_default,
                (true, false) => false,
                (false, _) => inner_default && leaf_default,
            };
            leaves.push((leaf, is_default));
        }
        has_default |= !marked && inner_default;
    }
    (leaves, has_default)
}

/// The alternatives of one disjunction being expanded, with their default flags: inline up to
/// four, like [`Terms`].
type Alts<'a> = SmallVec<[(Conj<'a>, bool); 4]>;

/// The environments a comprehension's clauses produce, one per body: an `if` gives at most
/// one, and most `for`s over a template's data only a few.
type ClauseEnvs = SmallVec<[EnvId; 4]>;

/// Terms of a disjunction with their default marks, inline up to four (most disjunctions in
/// KubeVela templates have two or three terms, and they are expanded on every evaluation).
type Terms<'a> = SmallVec<[(&'a Expr, bool); 4]>;

/// The terms of one syntactic disjunction `a | *b | c` (not looking into parentheses), each
/// with whether it is marked.
fn disjunction_chain<'a>(expr: &'a Expr, out: &mut Terms<'a>) {
    match expr {
        Expr::Binary {
            op: BinaryOp::Disjunction,
            lhs,
            rhs,
            ..
        } => {
            disjunction_chain(lhs, out);
            disjunction_chain(rhs, out);
        }
        Expr::Unary {
            op: UnaryOp::Default,
            operand,
            ..
        } => out.push((operand, true)),
        other => out.push((other, false)),
    }
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

fn is_disjunction(expr: &Expr) -> bool {
    match expr {
        Expr::Binary {
            op: BinaryOp::Disjunction,
            ..
        }
        | Expr::Unary {
            op: UnaryOp::Default,
            ..
        } => true,
        Expr::Paren(inner, _) => is_disjunction(inner),
        _ => false,
    }
}

pub fn json_atom(json: &serde_json::Value) -> Atom {
    match json {
        serde_json::Value::Null => Atom::Null,
        serde_json::Value::Bool(b) => Atom::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Atom::Int(i)
            } else if let Some(f) = n.as_f64() {
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    Atom::Int(f as i64)
                } else {
                    Atom::Float(f)
                }
            } else {
                Atom::Float(f64::NAN)
            }
        }
        serde_json::Value::String(s) => Atom::str(s),
        // Structured values are handled by the callers.
        _ => Atom::Null,
    }
}

fn overflow(span: Span) -> R {
    R::Err(Error::new(
        ErrorKind::Unsupported,
        "unsupported: integer overflow (integers beyond 64 bits)",
        span,
    ))
}

fn bad_operand(op: BinaryOp, atom: &Atom, span: Span) -> R {
    R::Err(Error::new(
        ErrorKind::Conflict,
        format!(
            "invalid operand {} ('{}' requires bool)",
            atom.cue_text(),
            op_text(op)
        ),
        span,
    ))
}

fn op_text(op: BinaryOp) -> &'static str {
    match op {
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
    }
}

/// Arithmetic, comparison and matching on concrete scalars.
pub fn binary_atoms(op: BinaryOp, a: &Atom, b: &Atom, span: Span) -> Result<Atom, Error> {
    let mismatch = || {
        Error::new(
            ErrorKind::Conflict,
            format!(
                "invalid operands {} and {} to '{}' (type {} and {})",
                a.cue_text(),
                b.cue_text(),
                op_text(op),
                super::val::kind_text(a.kind()),
                super::val::kind_text(b.kind())
            ),
            span,
        )
    };
    let ovf = || {
        Error::new(
            ErrorKind::Unsupported,
            "unsupported: integer overflow (integers beyond 64 bits)",
            span,
        )
    };
    match op {
        BinaryOp::Eq | BinaryOp::Ne => {
            let comparable = a.kind() == b.kind() || (a.as_f64().is_some() && b.as_f64().is_some());
            if !comparable && *a != Atom::Null && *b != Atom::Null {
                return Err(mismatch());
            }
            let eq = a.equals(b);
            Ok(Atom::Bool(if op == BinaryOp::Eq { eq } else { !eq }))
        }
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
            let ord = compare(a, b).ok_or_else(mismatch)?;
            Ok(Atom::Bool(match op {
                BinaryOp::Lt => ord.is_lt(),
                BinaryOp::Le => ord.is_le(),
                BinaryOp::Gt => ord.is_gt(),
                _ => ord.is_ge(),
            }))
        }
        BinaryOp::Match | BinaryOp::NotMatch => match (a, b) {
            (Atom::Str(s), Atom::Str(p)) => {
                let re = regex::Regex::new(p).map_err(|e| {
                    Error::new(
                        ErrorKind::Conflict,
                        format!("invalid regular expression: {e}"),
                        span,
                    )
                })?;
                Ok(Atom::Bool(re.is_match(s) == (op == BinaryOp::Match)))
            }
            _ => Err(mismatch()),
        },
        BinaryOp::Add => match (a, b) {
            (Atom::Int(x), Atom::Int(y)) => x.checked_add(*y).map(Atom::Int).ok_or_else(ovf),
            (Atom::Str(x), Atom::Str(y)) => Ok(Atom::Str(Rc::from(format!("{x}{y}").as_str()))),
            (Atom::Bytes(x), Atom::Bytes(y)) => {
                Ok(Atom::Bytes(Rc::from([&x[..], &y[..]].concat().as_slice())))
            }
            _ => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => Ok(Atom::Float(
                    super::decimal::arith(op, a, b).unwrap_or(x + y),
                )),
                _ => Err(mismatch()),
            },
        },
        BinaryOp::Sub => match (a, b) {
            (Atom::Int(x), Atom::Int(y)) => x.checked_sub(*y).map(Atom::Int).ok_or_else(ovf),
            _ => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => Ok(Atom::Float(
                    super::decimal::arith(op, a, b).unwrap_or(x - y),
                )),
                _ => Err(mismatch()),
            },
        },
        BinaryOp::Mul => match (a, b) {
            (Atom::Int(x), Atom::Int(y)) => x.checked_mul(*y).map(Atom::Int).ok_or_else(ovf),
            (Atom::Str(s), Atom::Int(n)) | (Atom::Int(n), Atom::Str(s)) => {
                let n = usize::try_from(*n).map_err(|_| mismatch())?;
                if s.len().saturating_mul(n) > MAX_STRING_LEN {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        "unsupported: string repetition result too large",
                        span,
                    ));
                }
                Ok(Atom::Str(Rc::from(s.repeat(n).as_str())))
            }
            _ => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => Ok(Atom::Float(
                    super::decimal::arith(op, a, b).unwrap_or(x * y),
                )),
                _ => Err(mismatch()),
            },
        },
        BinaryOp::Div => match (a.as_f64(), b.as_f64()) {
            (Some(_), Some(0.0)) => Err(Error::new(
                ErrorKind::Conflict,
                "failed arithmetic: division by zero",
                span,
            )),
            (Some(x), Some(y)) => Ok(Atom::Float(
                super::decimal::arith(op, a, b).unwrap_or(x / y),
            )),
            _ => Err(mismatch()),
        },
        BinaryOp::And | BinaryOp::Or | BinaryOp::Unify | BinaryOp::Disjunction => Err(mismatch()),
    }
}
