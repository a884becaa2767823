//! The CUE abstract syntax tree, as produced by [`crate::parse_file`].
//!
//! It is the contract between the parser and the evaluator. It mirrors the grammar of the CUE
//! specification (`shared/cue/doc/ref/spec.md`) closely, keeps every node's [`Span`], and keeps
//! doc comments on fields, because KubeVela's trait patching reads `// +patchKey=` and
//! `// +patchStrategy=` from them.
//!
//! It deliberately holds no evaluation state: a parsed file is immutable and can be shared
//! across threads (`Arc<File>`), so each definition is parsed once and evaluated per app. The
//! one thing computed from it and kept with it is the result of the compile-time checks
//! ([`CompileChecks`]), which depends on the file alone.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::Error;
use crate::span::Span;

/// One parsed source file.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub package: Option<Ident>,
    pub imports: Vec<Import>,
    pub decls: Vec<Decl>,
    pub span: Span,
    /// Filled by the first evaluation; start with `CompileChecks::default()`.
    pub compile_checks: CompileChecks,
}

/// What the evaluator keeps with a [`File`]: the errors of CUE's compile-time checks (unused
/// imports, misplaced default marks), computed once on its first evaluation instead of walking
/// the whole file on every evaluation of a template, and an identity that no other file shares
/// (the key under which evaluations of the file cache results that depend on the file alone).
/// It is a cache, not syntax: it compares equal to any other, a clone gets a fresh identity, and
/// a file whose fields are changed after an evaluation must get a fresh one.
#[derive(Debug)]
pub struct CompileChecks {
    pub(crate) checks: OnceLock<Vec<Error>>,
    pub(crate) uid: u64,
    /// The most vertices an evaluation of this file needed so far: the next one sizes its
    /// arena from it (a trait template needs a few dozen, a component template hundreds).
    pub(crate) vertex_hint: AtomicUsize,
}

impl CompileChecks {
    fn next_uid() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
}

impl Default for CompileChecks {
    fn default() -> CompileChecks {
        CompileChecks {
            checks: OnceLock::new(),
            uid: CompileChecks::next_uid(),
            vertex_hint: AtomicUsize::new(0),
        }
    }
}

// A clone is another file (its nodes live at other addresses): it must not share the identity.
impl Clone for CompileChecks {
    fn clone(&self) -> CompileChecks {
        CompileChecks {
            checks: self.checks.clone(),
            uid: CompileChecks::next_uid(),
            vertex_hint: AtomicUsize::new(self.vertex_hint.load(Ordering::Relaxed)),
        }
    }
}

impl PartialEq for CompileChecks {
    fn eq(&self, _: &CompileChecks) -> bool {
        true
    }
}

/// `import "strings"` or `import s "strings"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    /// The local name, when given explicitly (`import s "strings"`).
    pub alias: Option<Ident>,
    /// The import path, unquoted (`strings`, `encoding/json`).
    pub path: String,
    pub span: Span,
}

/// An identifier. `name` keeps the prefix: `#Def`, `_hidden`, `_#hiddenDef`, `__builtin`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A declaration inside a struct literal or at file level.
#[derive(Debug, Clone, PartialEq)]
pub enum Decl {
    Field(Field),
    /// `let x = expr`.
    Let(LetClause),
    /// An embedded expression (`#Base`, `{...}`, a scalar at file level, `if c {...}` etc.).
    Embed(Expr),
    /// A comprehension at declaration level: `for k, v in x { ... }` or `if c { ... }`.
    Comprehension(Comprehension),
    /// `...` or `...T` inside a struct (opens it).
    Ellipsis(Option<Expr>, Span),
    /// A declaration-level attribute `@foo(...)`.
    Attribute(Attribute),
}

/// A field `label: value`, `label?: value`, `label!: value`, or a pattern constraint
/// `[expr]: value`.
///
/// A shorthand chain `a: b: c: v` is parsed as nested single-field struct literals with
/// `StructLit::shorthand` set. Doc comments before a chain belong to the innermost field
/// (CUE's `ExtractDoc` rule; see kubevela-render-semantics.md §2.2), and the parser attaches them
/// there.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub label: Label,
    pub constraint: FieldConstraint,
    pub value: Expr,
    pub attrs: Vec<Attribute>,
    /// Doc comment lines directly above the field, with `//` and one following space removed,
    /// in source order.
    pub doc: Vec<String>,
    pub span: Span,
    /// `[X=expr]: value` or `(X=expr): value`: `X` is bound to the concrete label (the field
    /// name the pattern matched, or the dynamic label's string) within `value`. The label
    /// itself is `Label::Pattern(expr)` / `Label::Dynamic(expr)` as without the alias.
    pub label_expr_alias: Option<Ident>,
    /// `label: X=value`: `X` is bound to the field's value within `value`.
    pub value_alias: Option<Ident>,
}

/// Whether a field is regular, optional (`?`) or required (`!`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldConstraint {
    Regular,
    Optional,
    Required,
}

/// A field label.
#[derive(Debug, Clone, PartialEq)]
pub enum Label {
    /// `foo`, `#Foo`, `_foo`. Identifier labels are in scope for references.
    Ident(Ident),
    /// `"foo-bar"`: a quoted string label without interpolation (not referable by name).
    String(String, Span),
    /// `"\(x)-suffix"` or `(expr)`: a dynamic label computed at evaluation time.
    Dynamic(Box<Expr>, Span),
    /// `[expr]`: a pattern constraint applying `value` to every field whose name matches.
    Pattern(Box<Expr>, Span),
    /// `X=label`: an alias bound to the field's value, visible in the enclosing scope.
    Alias(Ident, Box<Label>),
}

/// `@name(body)`; the body is kept as raw text.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub name: String,
    pub body: String,
    pub span: Span,
}

/// `let name = expr`.
#[derive(Debug, Clone, PartialEq)]
pub struct LetClause {
    pub name: Ident,
    pub value: Expr,
    pub span: Span,
}

/// `for ... in ... / if ... / let ...` clauses followed by a struct literal body.
#[derive(Debug, Clone, PartialEq)]
pub struct Comprehension {
    pub clauses: Vec<Clause>,
    pub body: StructLit,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Clause {
    /// `for key, value in source` (`key` is absent in `for value in source`).
    For {
        key: Option<Ident>,
        value: Ident,
        source: Expr,
        span: Span,
    },
    If {
        condition: Expr,
        span: Span,
    },
    Let(LetClause),
}

/// `{ decls }`.
#[derive(Debug, Clone, PartialEq)]
pub struct StructLit {
    pub decls: Vec<Decl>,
    /// True when this literal was written as a shorthand chain `a: b: v` (no braces).
    pub shorthand: bool,
    pub span: Span,
}

/// `[ elems ]`, with an optional trailing `...` or `...T`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListLit {
    pub elems: Vec<ListElem>,
    /// `Some(None)` for `...`, `Some(Some(T))` for `...T`, `None` for a closed list.
    pub ellipsis: Option<Option<Box<Expr>>>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ListElem {
    Expr(Expr),
    /// `[for x in xs { x }]`: each iteration yields one element (the body's embedded value).
    Comprehension(Comprehension),
}

/// A piece of a string literal: literal text (escapes already decoded) or `\(expr)`.
#[derive(Debug, Clone, PartialEq)]
pub enum StringPart {
    Lit(String),
    Interp(Expr),
}

/// The kind of a number literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberKind {
    Int,
    Float,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Pos,
    /// `!x`
    Not,
    /// `*x`: marks a default inside a disjunction.
    Default,
    /// `<x`, `<=x`, `>x`, `>=x`, `!=x`, `=~x`, `!~x`: bound and regex constraints.
    Lt,
    Le,
    Gt,
    Ge,
    Ne,
    Match,
    NotMatch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `|`
    Disjunction,
    /// `&`
    Unify,
    /// `||`
    Or,
    /// `&&`
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `=~`
    Match,
    /// `!~`
    NotMatch,
    Add,
    Sub,
    Mul,
    /// `/` (always yields a float in CUE).
    Div,
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Ident(Ident),
    /// `null`
    Null(Span),
    /// `true` / `false`
    Bool(bool, Span),
    /// A number literal, kept as written (`1_000`, `0x1F`, `1.5e3`, `2Ki`); the evaluator parses
    /// it. `kind` says whether it is an int or float literal.
    Number {
        text: String,
        kind: NumberKind,
        span: Span,
    },
    /// A double-quoted (or `#"..."#`, or `"""` multi-line) string, possibly interpolated.
    String {
        parts: Vec<StringPart>,
        span: Span,
    },
    /// A single-quoted bytes literal, possibly interpolated.
    Bytes {
        parts: Vec<StringPart>,
        span: Span,
    },
    /// `_`
    Top(Span),
    /// `_|_`
    Bottom(Span),
    Struct(StructLit),
    List(ListLit),
    /// `x.label` (label may be an identifier, `#Def`, or a quoted string).
    Selector {
        base: Box<Expr>,
        label: String,
        label_span: Span,
        span: Span,
    },
    /// `x[i]`
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
        span: Span,
    },
    /// `x[lo:hi]`
    Slice {
        base: Box<Expr>,
        lo: Option<Box<Expr>>,
        hi: Option<Box<Expr>>,
        span: Span,
    },
    /// `f(args)`: builtin calls (`len(x)`, `strings.Join(x, ",")`, `close({})`).
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
        span: Span,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
        span: Span,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        span: Span,
    },
    /// `(x)`
    Paren(Box<Expr>, Span),
}

impl Expr {
    /// The source span of this expression.
    pub fn span(&self) -> Span {
        match self {
            Expr::Ident(ident) => ident.span,
            Expr::Null(span)
            | Expr::Bool(_, span)
            | Expr::Number { span, .. }
            | Expr::String { span, .. }
            | Expr::Bytes { span, .. }
            | Expr::Top(span)
            | Expr::Bottom(span)
            | Expr::Selector { span, .. }
            | Expr::Index { span, .. }
            | Expr::Slice { span, .. }
            | Expr::Call { span, .. }
            | Expr::Unary { span, .. }
            | Expr::Binary { span, .. }
            | Expr::Paren(_, span) => *span,
            Expr::Struct(lit) => lit.span,
            Expr::List(lit) => lit.span,
        }
    }
}
