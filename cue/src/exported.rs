//! A syntax-like export of an evaluated value that keeps what JSON cannot: default markers,
//! non-concrete types and bounds, optional fields, and doc comments.
//!
//! KubeVela's trait patch engine works on exactly this view of a value (it exports the base and
//! the patch with `Syntax(Docs(true), ResolveReferences(true))`, see
//! kubevela-render-semantics.md §2.2), so the analyzer's patch engine consumes it. Field order is
//! CUE's field order.

/// One node of an exported value.
#[derive(Debug, Clone, PartialEq)]
pub enum Exported {
    /// An open struct, fields in CUE order.
    Struct(Vec<ExportedField>),
    /// A list. `open` is true for `[...]`-style lists that accept more elements; `rest` is
    /// the element constraint of an open list (`T` of `[...T]`) when it has one, which CUE
    /// applies to every element, present or added later.
    List {
        elems: Vec<Exported>,
        open: bool,
        rest: Option<Box<Exported>>,
    },
    /// A concrete scalar: null, bool, number or string.
    Scalar(serde_json::Value),
    /// A disjunction with a default (`*"port-80" | string`): the default and the other
    /// alternatives.
    Default {
        default: Box<Exported>,
        others: Vec<Exported>,
    },
    /// A non-concrete value (`string`, `int`, `>=0 & <=100`, `=~"^a"`), with the CUE text that
    /// states it.
    Incomplete(Constraint),
    /// An error value.
    Bottom(Vec<crate::Error>),
}

/// A non-concrete value as data: its kind and its CUE source text.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    /// Which kinds a concrete value may have to satisfy it.
    pub kinds: KindSet,
    /// CUE text of the constraint, for messages and for re-parsing (`string`, `>=1 & <=10`).
    pub text: String,
}

/// A set of CUE kinds, as bit flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KindSet(pub u16);

impl KindSet {
    pub const NULL: KindSet = KindSet(1);
    pub const BOOL: KindSet = KindSet(1 << 1);
    pub const INT: KindSet = KindSet(1 << 2);
    pub const FLOAT: KindSet = KindSet(1 << 3);
    pub const STRING: KindSet = KindSet(1 << 4);
    pub const BYTES: KindSet = KindSet(1 << 5);
    pub const LIST: KindSet = KindSet(1 << 6);
    pub const STRUCT: KindSet = KindSet(1 << 7);
    pub const NUMBER: KindSet = KindSet((1 << 2) | (1 << 3));
    pub const TOP: KindSet = KindSet(0xff);

    pub fn contains(self, other: KindSet) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn union(self, other: KindSet) -> KindSet {
        KindSet(self.0 | other.0)
    }
}

/// A field of an exported struct.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportedField {
    pub label: String,
    pub value: Exported,
    /// Doc comment lines of the field (see [`crate::ast::Field::doc`]).
    pub doc: Vec<String>,
    /// `label?:` fields are exported so patches can see them, but never reach JSON.
    pub optional: bool,
}
