//! Scalar values and the scalar part of the value lattice: concrete atoms, kinds, bounds and
//! other validators, and how they unify.
//!
//! A vertex's non-structural content is a [`Shape`]: the set of kinds it may still take, at most
//! one concrete atom, and validators (bounds, `!=`, regexes, builtin validators) that a concrete
//! value must satisfy. Unifying two shapes intersects kinds, checks atoms for equality and
//! collects validators; validators run once the atom is known.

use std::rc::Rc;

use crate::exported::KindSet;
use crate::span::Span;

/// A concrete scalar.
#[derive(Debug, Clone, PartialEq)]
pub enum Atom {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
}

impl Atom {
    pub fn kind(&self) -> KindSet {
        match self {
            Atom::Null => KindSet::NULL,
            Atom::Bool(_) => KindSet::BOOL,
            Atom::Int(_) => KindSet::INT,
            Atom::Float(_) => KindSet::FLOAT,
            Atom::Str(_) => KindSet::STRING,
            Atom::Bytes(_) => KindSet::BYTES,
        }
    }

    pub fn str(s: &str) -> Atom {
        Atom::Str(Rc::from(s))
    }

    /// Bytes of text a copy of this atom holds: a string's or bytes' length, else 0.
    pub fn text_len(&self) -> usize {
        match self {
            Atom::Str(s) => s.len(),
            Atom::Bytes(b) => b.len(),
            _ => 0,
        }
    }

    /// The number as f64 if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Atom::Int(i) => Some(*i as f64),
            Atom::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// CUE syntax for the atom, as used in messages and exported constraints.
    pub fn cue_text(&self) -> String {
        match self {
            Atom::Null => "null".to_owned(),
            Atom::Bool(b) => b.to_string(),
            Atom::Int(i) => i.to_string(),
            Atom::Float(f) => format_float(*f),
            Atom::Str(s) => quote_string(s),
            Atom::Bytes(b) => format!("'{}'", String::from_utf8_lossy(b)),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Atom::Null => serde_json::Value::Null,
            Atom::Bool(b) => serde_json::Value::Bool(*b),
            Atom::Int(i) => serde_json::Value::from(*i),
            Atom::Float(f) => float_json(*f),
            Atom::Str(s) => serde_json::Value::String(String::from(&**s)),
            Atom::Bytes(b) => {
                use base64::Engine;
                serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(b))
            }
        }
    }

    /// Equality as CUE's `==` sees it (ints and floats compare by value).
    pub fn equals(&self, other: &Atom) -> bool {
        match (self, other) {
            (Atom::Int(a), Atom::Float(b)) | (Atom::Float(b), Atom::Int(a)) => (*a as f64) == *b,
            _ => self == other,
        }
    }
}

/// A float as JSON: integral floats keep a fractional part the way CUE prints them.
pub fn float_json(f: f64) -> serde_json::Value {
    serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// CUE's text for a float (`1.0`, `0.5`, `1e+30`).
pub fn format_float(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

/// A double-quoted CUE/JSON string literal.
pub fn quote_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// CUE's name for a kind set (`int`, `string`, `int | string`).
/// The conflict of two different concrete values (what [`Shape::add_atom`] reports).
pub fn atom_conflict(old: &Atom, old_span: Span, atom: &Atom, span: Span) -> Conflict {
    let message = if old.kind() == atom.kind() {
        format!(
            "conflicting values {} and {}",
            old.cue_text(),
            atom.cue_text()
        )
    } else {
        format!(
            "conflicting values {} and {} (mismatched types {} and {})",
            old.cue_text(),
            atom.cue_text(),
            kind_text(old.kind()),
            kind_text(atom.kind())
        )
    };
    Conflict {
        message,
        spans: vec![old_span, span],
    }
}

pub fn kind_text(kinds: KindSet) -> String {
    if kinds == KindSet::TOP {
        return "_".to_owned();
    }
    // One kind (most constraints: `string`, `int`, `bool`): its name, nothing to join.
    let single = match kinds {
        KindSet::NULL => Some("null"),
        KindSet::BOOL => Some("bool"),
        KindSet::INT => Some("int"),
        KindSet::FLOAT => Some("float"),
        KindSet::NUMBER => Some("number"),
        KindSet::STRING => Some("string"),
        KindSet::BYTES => Some("bytes"),
        KindSet::LIST => Some("list"),
        KindSet::STRUCT => Some("struct"),
        _ => None,
    };
    if let Some(name) = single {
        return name.to_owned();
    }
    let mut parts = Vec::new();
    let names = [
        (KindSet::NULL, "null"),
        (KindSet::BOOL, "bool"),
        (KindSet::STRING, "string"),
        (KindSet::BYTES, "bytes"),
        (KindSet::LIST, "list"),
        (KindSet::STRUCT, "struct"),
    ];
    if kinds.contains(KindSet::NUMBER) {
        parts.push("number");
    } else if kinds.contains(KindSet::INT) {
        parts.push("int");
    } else if kinds.contains(KindSet::FLOAT) {
        parts.push("float");
    }
    for (kind, name) in names {
        if kinds.contains(kind) {
            parts.push(name);
        }
    }
    if parts.is_empty() {
        return "_|_".to_owned();
    }
    parts.join(" | ")
}

pub fn intersect(a: KindSet, b: KindSet) -> KindSet {
    KindSet(a.0 & b.0)
}

/// Comparison operators of bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundOp {
    Lt,
    Le,
    Gt,
    Ge,
}

impl BoundOp {
    pub fn text(self) -> &'static str {
        match self {
            BoundOp::Lt => "<",
            BoundOp::Le => "<=",
            BoundOp::Gt => ">",
            BoundOp::Ge => ">=",
        }
    }
}

/// A constraint a concrete value must satisfy.
#[derive(Debug, Clone)]
pub enum Validator {
    Bound(BoundOp, Atom),
    NotEqual(Atom),
    Match(Rc<regex::Regex>, bool),
    /// A builtin validator such as `strings.MinRunes(3)`: name and arguments.
    Builtin(&'static str, Vec<Atom>),
}

impl PartialEq for Validator {
    fn eq(&self, other: &Validator) -> bool {
        match (self, other) {
            (Validator::Bound(a, x), Validator::Bound(b, y)) => a == b && x == y,
            (Validator::NotEqual(x), Validator::NotEqual(y)) => x == y,
            (Validator::Match(a, x), Validator::Match(b, y)) => x == y && a.as_str() == b.as_str(),
            (Validator::Builtin(a, x), Validator::Builtin(b, y)) => a == b && x == y,
            _ => false,
        }
    }
}

impl Validator {
    pub fn text(&self) -> String {
        match self {
            Validator::Bound(op, atom) => format!("{}{}", op.text(), atom.cue_text()),
            Validator::NotEqual(atom) => format!("!={}", atom.cue_text()),
            Validator::Match(re, true) => format!("=~{}", quote_string(re.as_str())),
            Validator::Match(re, false) => format!("!~{}", quote_string(re.as_str())),
            Validator::Builtin(name, args) => {
                let args: Vec<String> = args.iter().map(Atom::cue_text).collect();
                format!("{name}({})", args.join(", "))
            }
        }
    }

    /// The kinds a value must have for this validator to possibly hold.
    pub fn kinds(&self) -> KindSet {
        match self {
            Validator::Bound(_, Atom::Str(_)) => KindSet::STRING,
            Validator::Bound(_, Atom::Bytes(_)) => KindSet::BYTES,
            Validator::Bound(..) => KindSet::NUMBER,
            Validator::NotEqual(_) => KindSet::TOP,
            Validator::Match(..) => KindSet::STRING,
            Validator::Builtin(name, _) => match *name {
                "strings.MinRunes" | "strings.MaxRunes" => KindSet::STRING,
                "list.MinItems" | "list.MaxItems" | "list.UniqueItems" => KindSet::LIST,
                "struct.MinFields" | "struct.MaxFields" => KindSet::STRUCT,
                _ => KindSet::TOP,
            },
        }
    }

    /// Checks a concrete scalar. `Ok(())` when it holds.
    pub fn check(&self, atom: &Atom) -> Result<(), String> {
        let ok = match self {
            Validator::Bound(op, bound) => match compare(atom, bound) {
                Some(ord) => match op {
                    BoundOp::Lt => ord.is_lt(),
                    BoundOp::Le => ord.is_le(),
                    BoundOp::Gt => ord.is_gt(),
                    BoundOp::Ge => ord.is_ge(),
                },
                None => false,
            },
            Validator::NotEqual(other) => !atom.equals(other),
            Validator::Match(re, want) => match atom {
                Atom::Str(s) => re.is_match(s) == *want,
                _ => false,
            },
            Validator::Builtin(name, args) => match (*name, atom, args.first()) {
                ("strings.MinRunes", Atom::Str(s), Some(Atom::Int(n))) => {
                    s.chars().count() as i64 >= *n
                }
                ("strings.MaxRunes", Atom::Str(s), Some(Atom::Int(n))) => {
                    s.chars().count() as i64 <= *n
                }
                _ => false,
            },
        };
        if ok {
            Ok(())
        } else {
            Err(match self {
                Validator::Bound(..) | Validator::NotEqual(_) => {
                    format!(
                        "invalid value {} (out of bound {})",
                        atom.cue_text(),
                        self.text()
                    )
                }
                Validator::Match(..) => {
                    format!(
                        "invalid value {} (out of bound {})",
                        atom.cue_text(),
                        self.text()
                    )
                }
                Validator::Builtin(..) => {
                    format!(
                        "invalid value {} (does not satisfy {})",
                        atom.cue_text(),
                        self.text()
                    )
                }
            })
        }
    }
}

/// Orders two atoms of comparable kinds (numbers with numbers, strings with strings).
pub fn compare(a: &Atom, b: &Atom) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Atom::Int(x), Atom::Int(y)) => Some(x.cmp(y)),
        (Atom::Str(x), Atom::Str(y)) => Some(x.cmp(y)),
        (Atom::Bytes(x), Atom::Bytes(y)) => Some(x.cmp(y)),
        _ => {
            let (x, y) = (a.as_f64()?, b.as_f64()?);
            x.partial_cmp(&y)
        }
    }
}

/// Parses a CUE number literal (`1_000`, `0x1F`, `0o17`, `0b1`, `1.5e3`, `2Ki`, `1.5M`).
pub fn parse_number(text: &str, is_int: bool) -> Result<Atom, String> {
    let clean: String = text.chars().filter(|c| *c != '_').collect();
    let (body, mult) = split_multiplier(&clean);
    if let Some(mult) = mult {
        let base: f64 = body.parse().map_err(|_| format!("invalid number {text}"))?;
        let value = base * mult;
        if value.fract() != 0.0 || value.abs() > i64::MAX as f64 {
            return Err(format!("invalid number {text}"));
        }
        return Ok(Atom::Int(value as i64));
    }
    if is_int {
        let lower = body.to_ascii_lowercase();
        let parsed = if let Some(hex) = lower.strip_prefix("0x") {
            i64::from_str_radix(hex, 16)
        } else if let Some(oct) = lower.strip_prefix("0o") {
            i64::from_str_radix(oct, 8)
        } else if let Some(bin) = lower.strip_prefix("0b") {
            i64::from_str_radix(bin, 2)
        } else {
            lower.parse::<i64>()
        };
        parsed
            .map(Atom::Int)
            .map_err(|_| format!("unsupported: integer literal {text} does not fit in 64 bits"))
    } else {
        body.parse::<f64>()
            .map(Atom::Float)
            .map_err(|_| format!("invalid number {text}"))
    }
}

fn split_multiplier(text: &str) -> (&str, Option<f64>) {
    let units: [(&str, f64); 10] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("K", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
    ];
    if text.starts_with("0x") || text.starts_with("0X") {
        return (text, None);
    }
    for (suffix, mult) in units {
        if let Some(body) = text.strip_suffix(suffix) {
            return (body, Some(mult));
        }
    }
    (text, None)
}

/// The scalar part of a vertex: allowed kinds, at most one concrete atom, validators.
#[derive(Debug, Clone)]
pub struct Shape {
    pub kinds: KindSet,
    /// The concrete atom and where it came from.
    pub atom: Option<(Atom, Span)>,
    pub validators: Vec<(Validator, Span)>,
    /// Where the narrowest kind restriction came from, for messages.
    pub kind_src: Option<(KindSet, Span)>,
}

impl Default for Shape {
    fn default() -> Shape {
        Shape {
            kinds: KindSet::TOP,
            atom: None,
            validators: Vec::new(),
            kind_src: None,
        }
    }
}

/// A conflict found while unifying shapes: message and the spans involved.
#[derive(Debug, Clone)]
pub struct Conflict {
    pub message: String,
    pub spans: Vec<Span>,
}

impl Shape {
    /// Restricts to `kinds` (a type such as `int`, or the kind of a struct or list).
    pub fn add_kinds(&mut self, kinds: KindSet, span: Span) -> Result<(), Conflict> {
        let new = intersect(self.kinds, kinds);
        if new.0 == 0 {
            let (old_text, old_span) = self.describe();
            return Err(Conflict {
                message: format!(
                    "conflicting values {} and {} (mismatched types {} and {})",
                    old_text,
                    kind_text(kinds),
                    kind_text(self.kinds),
                    kind_text(kinds)
                ),
                spans: vec![span, old_span],
            });
        }
        if new != self.kinds {
            self.kind_src = Some((kinds, span));
        }
        self.kinds = new;
        Ok(())
    }

    pub fn add_atom(&mut self, atom: Atom, span: Span) -> Result<(), Conflict> {
        if let Some((old, old_span)) = &self.atom {
            if *old == atom {
                return Ok(());
            }
            return Err(atom_conflict(old, *old_span, &atom, span));
        }
        let kind = atom.kind();
        if intersect(self.kinds, kind).0 == 0 {
            let (old_text, old_span) = self.describe();
            return Err(Conflict {
                message: format!(
                    "conflicting values {} and {} (mismatched types {} and {})",
                    old_text,
                    atom.cue_text(),
                    kind_text(self.kinds),
                    kind_text(kind)
                ),
                spans: vec![old_span, span],
            });
        }
        self.kinds = intersect(self.kinds, kind);
        self.atom = Some((atom, span));
        Ok(())
    }

    pub fn add_validator(&mut self, validator: Validator, span: Span) -> Result<(), Conflict> {
        self.add_kinds(validator.kinds(), span)?;
        if !self.validators.iter().any(|(v, _)| *v == validator) {
            self.validators.push((validator, span));
        }
        Ok(())
    }

    /// Runs validators against the atom, if concrete.
    #[inline]
    pub fn check(&self) -> Result<(), Conflict> {
        if let Some((atom, span)) = &self.atom {
            for (validator, vspan) in &self.validators {
                if let Err(message) = validator.check(atom) {
                    return Err(Conflict {
                        message,
                        spans: vec![*span, *vspan],
                    });
                }
            }
        }
        Ok(())
    }

    /// CUE text of this shape and a span for messages.
    pub fn describe(&self) -> (String, Span) {
        if let Some((atom, span)) = &self.atom {
            return (atom.cue_text(), *span);
        }
        let span = self.kind_src.map(|(_, s)| s).unwrap_or_default();
        (self.constraint_text(), span)
    }

    /// `string`, `int & >=0 & <=10`, `=~"^a"`.
    pub fn constraint_text(&self) -> String {
        if let Some((atom, _)) = &self.atom {
            return atom.cue_text();
        }
        if self.validators.is_empty() {
            return kind_text(self.kinds);
        }
        let mut parts = Vec::new();
        let implied = self
            .validators
            .iter()
            .fold(KindSet::TOP, |acc, (v, _)| intersect(acc, v.kinds()));
        if self.kinds != implied || self.validators.is_empty() {
            parts.push(kind_text(self.kinds));
        }
        for (validator, _) in &self.validators {
            parts.push(validator.text());
        }
        parts.join(" & ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_literals() {
        assert_eq!(parse_number("1_000", true), Ok(Atom::Int(1000)));
        assert_eq!(parse_number("0x1F", true), Ok(Atom::Int(31)));
        assert_eq!(parse_number("2Ki", true), Ok(Atom::Int(2048)));
        assert_eq!(parse_number("1.5M", true), Ok(Atom::Int(1_500_000)));
        assert_eq!(parse_number("1.5", false), Ok(Atom::Float(1.5)));
        assert!(parse_number("99999999999999999999", true).is_err());
    }

    #[test]
    fn shapes_unify_and_check_bounds() {
        let mut shape = Shape::default();
        shape.add_kinds(KindSet::INT, Span::default()).unwrap();
        shape
            .add_validator(Validator::Bound(BoundOp::Le, Atom::Int(3)), Span::default())
            .unwrap();
        shape.add_atom(Atom::Int(5), Span::default()).unwrap();
        let err = shape.check().unwrap_err();
        assert_eq!(err.message, "invalid value 5 (out of bound <=3)");
        assert!(shape.add_atom(Atom::str("x"), Span::default()).is_err());
    }
}
