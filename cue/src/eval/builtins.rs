//! Predeclared functions (`len`, `div`, ...) and the standard packages KubeVela's definitions
//! import: `strings`, `strconv`, `list`, `math`, `struct`, `encoding/json`, `encoding/base64`,
//! `encoding/yaml`; `more.rs` adds `path`, `crypto/sha256`, `crypto/sha512` and
//! `encoding/hex`. Functions not listed produce `unsupported: <pkg>.<name>`.

mod more;

use std::rc::Rc;

use base64::Engine as _;

use crate::ast::BinaryOp;
use crate::span::Span;
use crate::{Error, ErrorKind};

use super::engine::{Engine, FieldKind, R, VId, is_definition, is_hidden};
use super::val::{Atom, Validator, format_float};

const PACKAGES: &[&str] = &[
    "strings",
    "strconv",
    "list",
    "math",
    "struct",
    "encoding/json",
    "encoding/base64",
    "encoding/yaml",
];

/// Every supported function (and function-like constant), as `<pkg>.<name>`.
const FUNCTIONS: &[&str] = &[
    "len",
    "close",
    "and",
    "or",
    "div",
    "mod",
    "quo",
    "rem",
    "strings.Join",
    "strings.Split",
    "strings.SplitN",
    "strings.Contains",
    "strings.ContainsAny",
    "strings.HasPrefix",
    "strings.HasSuffix",
    "strings.Replace",
    "strings.ToLower",
    "strings.ToUpper",
    "strings.TrimSpace",
    "strings.TrimPrefix",
    "strings.TrimSuffix",
    "strings.Trim",
    "strings.TrimLeft",
    "strings.TrimRight",
    "strings.Index",
    "strings.LastIndex",
    "strings.Repeat",
    "strings.MinRunes",
    "strings.MaxRunes",
    "strings.Fields",
    "strings.Count",
    "strings.ToTitle",
    "strings.SplitAfter",
    "strings.Runes",
    "strings.IndexAny",
    "strings.ByteAt",
    "strings.ByteSlice",
    "strings.SliceRunes",
    "strconv.Atoi",
    "strconv.FormatInt",
    "strconv.ParseInt",
    "strconv.Quote",
    "strconv.Unquote",
    "strconv.FormatFloat",
    "strconv.ParseFloat",
    "strconv.FormatBool",
    "strconv.ParseBool",
    "strconv.FormatUint",
    "strconv.ParseUint",
    "list.Concat",
    "list.Contains",
    "list.Sort",
    "list.SortStrings",
    "list.SortStable",
    "list.FlattenN",
    "list.Range",
    "list.Drop",
    "list.Take",
    "list.Slice",
    "list.UniqueItems",
    "list.MinItems",
    "list.MaxItems",
    "list.Sum",
    "list.Max",
    "list.Min",
    "list.Avg",
    "list.Repeat",
    "list.Product",
    "list.IsSorted",
    "list.Reverse",
    "list.Ascending",
    "list.Descending",
    "math.Floor",
    "math.Ceil",
    "math.Round",
    "math.Abs",
    "math.Pow",
    "math.Sqrt",
    "math.Trunc",
    "math.Log",
    "math.Exp",
    "math.RoundToEven",
    "struct.MinFields",
    "struct.MaxFields",
    "json.Marshal",
    "json.Unmarshal",
    "json.Valid",
    "json.MarshalStream",
    "json.Indent",
    "json.Compact",
    "base64.Encode",
    "base64.Decode",
    "base64.EncodedLen",
    "base64.DecodedLen",
    "yaml.Marshal",
    "yaml.Unmarshal",
    "yaml.MarshalStream",
    "yaml.Validate",
];

/// The canonical name of an importable package, if supported.
pub fn package(path: &str) -> Option<&'static str> {
    PACKAGES
        .iter()
        .chain(more::PACKAGES)
        .find(|p| **p == path)
        .copied()
}

pub fn predeclared(name: &str) -> &'static str {
    FUNCTIONS
        .iter()
        .find(|f| **f == name)
        .copied()
        .unwrap_or("len")
}

/// `pkg.name`: a function or a constant.
pub fn member(pkg: &'static str, name: &str, span: Span) -> R {
    let short = pkg.rsplit('/').next().unwrap_or(pkg);
    let full = format!("{short}.{name}");
    match full.as_str() {
        "math.Pi" => return R::Atom(Atom::Float(std::f64::consts::PI)),
        "math.E" => return R::Atom(Atom::Float(std::f64::consts::E)),
        // Go names CUE v0.14 does not define: `cue` reports them as undefined, so must we.
        "math.MaxInt64" | "math.MaxInt" | "math.MinInt64" | "math.MinInt" | "math.MaxInt32"
        | "math.MinInt32" | "math.Max" | "math.Min" | "strconv.Itoa" | "strings.Title" => {
            return R::Err(Error::new(
                ErrorKind::Reference,
                format!("undefined field: {name}"),
                span,
            ));
        }
        _ => {}
    }
    if let Some(atom) = more::constant(&full) {
        return R::Atom(atom);
    }
    match FUNCTIONS
        .iter()
        .chain(more::FUNCTIONS)
        .find(|f| **f == full)
    {
        Some(f) => R::Func(f),
        None => R::Err(Error::new(
            ErrorKind::Unsupported,
            format!("unsupported: {pkg}.{name}"),
            span,
        )),
    }
}

fn err(kind: ErrorKind, message: impl Into<String>, span: Span) -> Error {
    Error::new(kind, message, span)
}

struct Args<'e, 'a> {
    engine: &'e mut Engine<'a>,
    values: Vec<(R, Span)>,
    name: &'static str,
    span: Span,
}

impl<'a> Args<'_, 'a> {
    fn arity(&self, n: usize) -> Result<(), Error> {
        if self.values.len() == n {
            Ok(())
        } else {
            Err(err(
                ErrorKind::Builtin,
                format!(
                    "{}: expected {n} arguments, got {}",
                    self.name,
                    self.values.len()
                ),
                self.span,
            ))
        }
    }

    fn atom(&mut self, i: usize) -> Result<Atom, Error> {
        let (r, span) = self.values.get(i).cloned().ok_or_else(|| {
            err(
                ErrorKind::Builtin,
                format!("{}: missing argument {}", self.name, i + 1),
                self.span,
            )
        })?;
        self.engine.concrete(r, span)
    }

    fn str(&mut self, i: usize) -> Result<Rc<str>, Error> {
        match self.atom(i)? {
            Atom::Str(s) => Ok(s),
            Atom::Bytes(b) => Ok(Rc::from(String::from_utf8_lossy(&b).as_ref())),
            other => Err(self.type_error(i, &other, "string")),
        }
    }

    fn int(&mut self, i: usize) -> Result<i64, Error> {
        match self.atom(i)? {
            Atom::Int(n) => Ok(n),
            other => Err(self.type_error(i, &other, "int")),
        }
    }

    fn num(&mut self, i: usize) -> Result<f64, Error> {
        let atom = self.atom(i)?;
        atom.as_f64()
            .ok_or_else(|| self.type_error(i, &atom, "number"))
    }

    fn list(&mut self, i: usize) -> Result<Vec<VId>, Error> {
        let (r, span) = self.values.get(i).cloned().ok_or_else(|| {
            err(
                ErrorKind::Builtin,
                format!("{}: missing argument {}", self.name, i + 1),
                self.span,
            )
        })?;
        self.engine.list_items(r, span)
    }

    fn type_error(&self, i: usize, atom: &Atom, want: &str) -> Error {
        let span = self.values.get(i).map_or(self.span, |(_, s)| *s);
        err(
            ErrorKind::Builtin,
            format!(
                "cannot use {} as {want} in argument {} to {}",
                atom.cue_text(),
                i + 1,
                self.name
            ),
            span,
        )
    }

    fn fail(&self, message: impl Into<String>) -> Error {
        err(
            ErrorKind::Builtin,
            format!("error in call to {}: {}", self.name, message.into()),
            self.span,
        )
    }
}

fn string(s: impl AsRef<str>) -> R {
    R::Atom(Atom::str(s.as_ref()))
}

/// Calls a builtin function.
pub fn call<'a>(
    engine: &mut Engine<'a>,
    name: &'static str,
    values: Vec<(R, Span)>,
    span: Span,
) -> R {
    let mut args = Args {
        engine,
        values,
        name,
        span,
    };
    match call_inner(&mut args) {
        Ok(r) => r,
        Err(e) => R::Err(e),
    }
}

fn call_inner(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    match name {
        "len" => {
            a.arity(1)?;
            let (r, span) = a.values[0].clone();
            if let R::Atom(atom) = &r {
                return match atom {
                    Atom::Str(s) => Ok(R::Atom(Atom::Int(s.len() as i64))),
                    Atom::Bytes(b) => Ok(R::Atom(Atom::Int(b.len() as i64))),
                    other => Err(a.type_error(0, other, "list, struct, string or bytes")),
                };
            }
            let v = a.engine.vertex_of(r, span)?;
            let v = a.engine.concrete_vertex(v, span)?;
            if let Some(e) = a.engine.vs[v as usize].errors.first() {
                return Err(e.clone());
            }
            let vertex = &a.engine.vs[v as usize];
            if let Some(list) = &vertex.list {
                return Ok(R::Atom(Atom::Int(list.elems.len() as i64)));
            }
            if vertex.is_struct {
                let fields = a.engine.struct_fields(R::V(v), span)?;
                return Ok(R::Atom(Atom::Int(fields.len() as i64)));
            }
            match a.atom(0)? {
                Atom::Str(s) => Ok(R::Atom(Atom::Int(s.len() as i64))),
                Atom::Bytes(b) => Ok(R::Atom(Atom::Int(b.len() as i64))),
                other => Err(a.type_error(0, &other, "list, struct, string or bytes")),
            }
        }
        "div" | "mod" | "quo" | "rem" => {
            a.arity(2)?;
            let (x, y) = (a.int(0)?, a.int(1)?);
            if y == 0 {
                return Err(a.fail("division by zero"));
            }
            let result = match name {
                "div" => x.checked_div_euclid(y),
                "mod" => x.checked_rem_euclid(y),
                "quo" => x.checked_div(y),
                _ => x.checked_rem(y),
            };
            result
                .map(|n| R::Atom(Atom::Int(n)))
                .ok_or_else(|| a.fail("integer overflow"))
        }
        _ if more::FUNCTIONS.contains(&name) => more::call(a),
        _ if name.starts_with("strings.") => strings(a),
        _ if name.starts_with("strconv.") => strconv(a),
        _ if name.starts_with("list.") => list(a),
        _ if name.starts_with("math.") => math(a),
        _ if name.starts_with("struct.") => {
            a.arity(1)?;
            let n = a.int(0)?;
            Ok(R::Valid(Validator::Builtin(name, vec![Atom::Int(n)])))
        }
        _ if name.starts_with("json.") => json(a),
        _ if name.starts_with("base64.") => base64(a),
        _ if name.starts_with("yaml.") => yaml(a),
        _ => Err(err(
            ErrorKind::Unsupported,
            format!("unsupported: {name}"),
            a.span,
        )),
    }
}

fn strings(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let r = match name {
        "strings.MinRunes" | "strings.MaxRunes" => {
            if a.values.len() == 1 {
                let n = a.int(0)?;
                return Ok(R::Valid(Validator::Builtin(name, vec![Atom::Int(n)])));
            }
            a.arity(2)?;
            let (s, n) = (a.str(0)?, a.int(1)?);
            let count = s.chars().count() as i64;
            R::Atom(Atom::Bool(if name == "strings.MinRunes" {
                count >= n
            } else {
                count <= n
            }))
        }
        "strings.Join" => {
            a.arity(2)?;
            let items = a.list(0)?;
            let sep = a.str(1)?;
            let mut parts = Vec::with_capacity(items.len());
            for item in items {
                match a.engine.concrete(R::V(item), a.span)? {
                    Atom::Str(s) => parts.push(String::from(&*s)),
                    other => {
                        return Err(a.fail(format!(
                            "invalid list element {}: expected string",
                            other.cue_text()
                        )));
                    }
                }
            }
            string(parts.join(&sep))
        }
        "strings.Split" | "strings.SplitAfter" => {
            a.arity(2)?;
            let (s, sep) = (a.str(0)?, a.str(1)?);
            let parts: Vec<String> = if sep.is_empty() {
                s.chars().map(|c| c.to_string()).collect()
            } else if name == "strings.Split" {
                s.split(&*sep).map(str::to_owned).collect()
            } else {
                s.split_inclusive(&*sep).map(str::to_owned).collect()
            };
            str_list(a, parts)
        }
        "strings.SplitN" => {
            a.arity(3)?;
            let (s, sep, n) = (a.str(0)?, a.str(1)?, a.int(2)?);
            let parts: Vec<String> = if n < 0 {
                s.split(&*sep).map(str::to_owned).collect()
            } else if n == 0 {
                Vec::new()
            } else {
                s.splitn(n as usize, &*sep).map(str::to_owned).collect()
            };
            str_list(a, parts)
        }
        "strings.Fields" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let parts = s.split_whitespace().map(str::to_owned).collect();
            str_list(a, parts)
        }
        "strings.Contains" | "strings.HasPrefix" | "strings.HasSuffix" | "strings.ContainsAny" => {
            a.arity(2)?;
            let (s, sub) = (a.str(0)?, a.str(1)?);
            R::Atom(Atom::Bool(match name {
                "strings.Contains" => s.contains(&*sub),
                "strings.HasPrefix" => s.starts_with(&*sub),
                "strings.HasSuffix" => s.ends_with(&*sub),
                _ => s.chars().any(|c| sub.contains(c)),
            }))
        }
        "strings.Replace" => {
            a.arity(4)?;
            let (s, old, new, n) = (a.str(0)?, a.str(1)?, a.str(2)?, a.int(3)?);
            if n < 0 {
                string(s.replace(&*old, &new))
            } else {
                string(s.replacen(&*old, &new, n as usize))
            }
        }
        "strings.ToLower" => {
            a.arity(1)?;
            string(a.str(0)?.to_lowercase())
        }
        "strings.ToUpper" | "strings.ToTitle" => {
            a.arity(1)?;
            string(a.str(0)?.to_uppercase())
        }
        "strings.TrimSpace" => {
            a.arity(1)?;
            string(a.str(0)?.trim())
        }
        "strings.TrimPrefix" => {
            a.arity(2)?;
            let (s, p) = (a.str(0)?, a.str(1)?);
            string(s.strip_prefix(&*p).unwrap_or(&s))
        }
        "strings.TrimSuffix" => {
            a.arity(2)?;
            let (s, p) = (a.str(0)?, a.str(1)?);
            string(s.strip_suffix(&*p).unwrap_or(&s))
        }
        "strings.Trim" | "strings.TrimLeft" | "strings.TrimRight" => {
            a.arity(2)?;
            let (s, cut) = (a.str(0)?, a.str(1)?);
            let f = |c: char| cut.contains(c);
            string(match name {
                "strings.Trim" => s.trim_matches(f),
                "strings.TrimLeft" => s.trim_start_matches(f),
                _ => s.trim_end_matches(f),
            })
        }
        "strings.Index" | "strings.LastIndex" | "strings.IndexAny" => {
            a.arity(2)?;
            let (s, sub) = (a.str(0)?, a.str(1)?);
            let found = match name {
                "strings.Index" => s.find(&*sub),
                "strings.LastIndex" => s.rfind(&*sub),
                _ => s.find(|c: char| sub.contains(c)),
            };
            R::Atom(Atom::Int(found.map_or(-1, |i| i as i64)))
        }
        "strings.Count" => {
            a.arity(2)?;
            let (s, sub) = (a.str(0)?, a.str(1)?);
            let n = if sub.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(&*sub).count()
            };
            R::Atom(Atom::Int(n as i64))
        }
        "strings.Repeat" => {
            a.arity(2)?;
            let (s, n) = (a.str(0)?, a.int(1)?);
            let n = usize::try_from(n).map_err(|_| a.fail("negative Repeat count"))?;
            if s.len().saturating_mul(n) > super::engine::MAX_STRING_LEN {
                return Err(a.fail("result too large"));
            }
            a.engine.charge_bytes(s.len().saturating_mul(n));
            string(s.repeat(n))
        }
        "strings.Runes" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let items = s
                .chars()
                .map(|c| a.engine.atom_vertex(Atom::Int(c as i64), a.span))
                .collect();
            R::V(a.engine.list_of(items, a.span))
        }
        "strings.ByteAt" => {
            a.arity(2)?;
            let (s, i) = (a.str(0)?, a.int(1)?);
            let b = usize::try_from(i)
                .ok()
                .and_then(|i| s.as_bytes().get(i).copied())
                .ok_or_else(|| a.fail("index out of range"))?;
            R::Atom(Atom::Int(b as i64))
        }
        "strings.ByteSlice" | "strings.SliceRunes" => {
            a.arity(3)?;
            let (s, lo, hi) = (a.str(0)?, a.int(1)?, a.int(2)?);
            let (lo, hi) = (
                usize::try_from(lo).unwrap_or(0),
                usize::try_from(hi).unwrap_or(0),
            );
            if name == "strings.SliceRunes" {
                let chars: Vec<char> = s.chars().collect();
                let part = chars
                    .get(lo..hi)
                    .ok_or_else(|| a.fail("index out of range"))?;
                string(part.iter().collect::<String>())
            } else {
                string(s.get(lo..hi).ok_or_else(|| a.fail("index out of range"))?)
            }
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                a.span,
            ));
        }
    };
    Ok(r)
}

fn str_list(a: &mut Args<'_, '_>, parts: Vec<String>) -> R {
    let items = parts
        .into_iter()
        .map(|p| a.engine.atom_vertex(Atom::str(&p), a.span))
        .collect();
    R::V(a.engine.list_of(items, a.span))
}

fn strconv(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let r = match name {
        "strconv.Atoi" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let n: i64 = s.parse().map_err(|_| {
                a.fail(format!(
                    "strconv.Atoi: parsing {}: invalid syntax",
                    super::val::quote_string(&s)
                ))
            })?;
            R::Atom(Atom::Int(n))
        }
        "strconv.FormatInt" | "strconv.FormatUint" => {
            a.arity(2)?;
            let (n, base) = (a.int(0)?, a.int(1)?);
            if !(2..=36).contains(&base) {
                return Err(a.fail("invalid base"));
            }
            string(format_radix(n, base as u32))
        }
        "strconv.ParseInt" | "strconv.ParseUint" => {
            a.arity(3)?;
            let (s, base) = (a.str(0)?, a.int(1)?);
            let _bits = a.int(2)?;
            let base = if base == 0 { 10 } else { base as u32 };
            let n = i64::from_str_radix(&s, base).map_err(|_| {
                a.fail(format!(
                    "{name}: parsing {}: invalid syntax",
                    super::val::quote_string(&s)
                ))
            })?;
            R::Atom(Atom::Int(n))
        }
        "strconv.Quote" => {
            a.arity(1)?;
            string(super::val::quote_string(&a.str(0)?))
        }
        "strconv.Unquote" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let v: String = serde_json::from_str(&s).map_err(|_| a.fail("invalid syntax"))?;
            string(v)
        }
        "strconv.FormatFloat" => {
            a.arity(4)?;
            let f = a.num(0)?;
            let fmt = a.int(1)?;
            let prec = a.int(2)?;
            let text = match (u8::try_from(fmt).map(char::from), prec) {
                (Ok('f'), p) if p >= 0 => format!("{f:.*}", p as usize),
                (Ok('e'), p) if p >= 0 => format!("{f:.*e}", p as usize),
                (Ok('f' | 'g'), _) => format!("{f}"),
                _ => format_float(f),
            };
            string(text)
        }
        "strconv.ParseFloat" => {
            a.arity(2)?;
            let s = a.str(0)?;
            let f: f64 = s.parse().map_err(|_| a.fail("invalid syntax"))?;
            R::Atom(Atom::Float(f))
        }
        "strconv.FormatBool" => {
            a.arity(1)?;
            match a.atom(0)? {
                Atom::Bool(b) => string(b.to_string()),
                other => return Err(a.type_error(0, &other, "bool")),
            }
        }
        "strconv.ParseBool" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let b = match &*s {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                _ => return Err(a.fail("invalid syntax")),
            };
            R::Atom(Atom::Bool(b))
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                a.span,
            ));
        }
    };
    Ok(r)
}

fn format_radix(n: i64, base: u32) -> String {
    if n == 0 {
        return "0".to_owned();
    }
    let negative = n < 0;
    let mut m = n.unsigned_abs();
    let mut digits = Vec::new();
    while m > 0 {
        let d = (m % base as u64) as u32;
        digits.push(std::char::from_digit(d, base).unwrap_or('?'));
        m /= base as u64;
    }
    if negative {
        digits.push('-');
    }
    digits.iter().rev().collect()
}

fn list(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let span = a.span;
    let r = match name {
        "list.MinItems" | "list.MaxItems" => {
            if a.values.len() == 1 {
                let n = a.int(0)?;
                return Ok(R::Valid(Validator::Builtin(name, vec![Atom::Int(n)])));
            }
            a.arity(2)?;
            let (items, n) = (a.list(0)?, a.int(1)?);
            let len = items.len() as i64;
            R::Atom(Atom::Bool(if name == "list.MinItems" {
                len >= n
            } else {
                len <= n
            }))
        }
        "list.UniqueItems" => {
            if a.values.is_empty() {
                return Ok(R::Valid(Validator::Builtin(name, Vec::new())));
            }
            a.arity(1)?;
            let items = a.list(0)?;
            let mut seen = Vec::new();
            let mut unique = true;
            for item in items {
                let j = vertex_json(a.engine, item, span, 0)?;
                if seen.contains(&j) {
                    unique = false;
                }
                seen.push(j);
            }
            R::Atom(Atom::Bool(unique))
        }
        "list.Concat" => {
            a.arity(1)?;
            let lists = a.list(0)?;
            let mut out = Vec::new();
            for l in lists {
                out.extend(a.engine.list_items(R::V(l), span)?);
            }
            R::V(a.engine.list_of(out, span))
        }
        "list.Repeat" => {
            a.arity(2)?;
            let (items, n) = (a.list(0)?, a.int(1)?);
            let n = usize::try_from(n).map_err(|_| a.fail("negative count"))?;
            if items.len().saturating_mul(n) > 1_000_000 {
                return Err(a.fail("result too large"));
            }
            a.engine.charge(items.len().saturating_mul(n));
            let mut out = Vec::new();
            for _ in 0..n {
                if a.engine.over_budget() {
                    break;
                }
                out.extend(items.iter().copied());
            }
            R::V(a.engine.list_of(out, span))
        }
        "list.Contains" => {
            a.arity(2)?;
            let items = a.list(0)?;
            let (needle_r, needle_span) = a.values[1].clone();
            let needle_v = a.engine.vertex_of(needle_r, needle_span)?;
            let needle = vertex_json(a.engine, needle_v, needle_span, 0)?;
            let mut found = false;
            for item in items {
                if vertex_json(a.engine, item, span, 0)? == needle {
                    found = true;
                    break;
                }
            }
            R::Atom(Atom::Bool(found))
        }
        "list.Drop" | "list.Take" => {
            a.arity(2)?;
            let (items, n) = (a.list(0)?, a.int(1)?);
            let n = usize::try_from(n)
                .map_err(|_| a.fail("negative index"))?
                .min(items.len());
            let part = if name == "list.Drop" {
                items[n..].to_vec()
            } else {
                items[..n].to_vec()
            };
            R::V(a.engine.list_of(part, span))
        }
        "list.Slice" => {
            a.arity(3)?;
            let (items, lo, hi) = (a.list(0)?, a.int(1)?, a.int(2)?);
            let (lo, hi) = (usize::try_from(lo).ok(), usize::try_from(hi).ok());
            match (lo, hi) {
                (Some(lo), Some(hi)) if lo <= hi && hi <= items.len() => {
                    R::V(a.engine.list_of(items[lo..hi].to_vec(), span))
                }
                _ => return Err(a.fail("slice bounds out of range")),
            }
        }
        "list.Reverse" => {
            a.arity(1)?;
            let mut items = a.list(0)?;
            items.reverse();
            R::V(a.engine.list_of(items, span))
        }
        "list.FlattenN" => {
            a.arity(2)?;
            let items = a.list(0)?;
            let depth = a.int(1)?;
            let out = flatten(a, items, depth)?;
            R::V(a.engine.list_of(out, span))
        }
        "list.Range" => {
            a.arity(3)?;
            let (start, limit, step) = (a.atom(0)?, a.atom(1)?, a.atom(2)?);
            let mut out = Vec::new();
            match (start, limit, step) {
                (Atom::Int(s), Atom::Int(l), Atom::Int(st)) => {
                    if st == 0 {
                        return Err(a.fail("step must be non zero"));
                    }
                    let mut i = s;
                    while (st > 0 && i < l) || (st < 0 && i > l) {
                        out.push(a.engine.atom_vertex(Atom::Int(i), span));
                        if a.engine.over_budget() {
                            break;
                        }
                        if out.len() > 1_000_000 {
                            return Err(a.fail("range too large"));
                        }
                        i += st;
                    }
                }
                (s, l, st) => {
                    let (s, l, st) = (
                        s.as_f64().unwrap_or(0.0),
                        l.as_f64().unwrap_or(0.0),
                        st.as_f64().unwrap_or(0.0),
                    );
                    if st == 0.0 {
                        return Err(a.fail("step must be non zero"));
                    }
                    let mut i = s;
                    while (st > 0.0 && i < l) || (st < 0.0 && i > l) {
                        out.push(a.engine.atom_vertex(Atom::Float(i), span));
                        if out.len() > 1_000_000 {
                            return Err(a.fail("range too large"));
                        }
                        i += st;
                    }
                }
            }
            R::V(a.engine.list_of(out, span))
        }
        "list.Sum" | "list.Product" | "list.Max" | "list.Min" | "list.Avg" => {
            a.arity(1)?;
            let items = a.list(0)?;
            let mut atoms = Vec::new();
            for item in items {
                atoms.push(a.engine.concrete(R::V(item), span)?);
            }
            if atoms.iter().any(|x| x.as_f64().is_none()) {
                return Err(a.fail("list contains a non-number"));
            }
            let all_int = atoms.iter().all(|x| matches!(x, Atom::Int(_)));
            if atoms.is_empty() && name != "list.Sum" && name != "list.Product" {
                return Err(a.fail("empty list"));
            }
            if all_int && name != "list.Avg" {
                let ints: Vec<i64> = atoms
                    .iter()
                    .filter_map(|x| if let Atom::Int(i) = x { Some(*i) } else { None })
                    .collect();
                let value = match name {
                    "list.Sum" => ints.iter().try_fold(0i64, |acc, x| acc.checked_add(*x)),
                    "list.Product" => ints.iter().try_fold(1i64, |acc, x| acc.checked_mul(*x)),
                    "list.Max" => ints.iter().copied().max(),
                    _ => ints.iter().copied().min(),
                };
                R::Atom(Atom::Int(value.ok_or_else(|| a.fail("integer overflow"))?))
            } else {
                let fs: Vec<f64> = atoms.iter().filter_map(Atom::as_f64).collect();
                let sum = || super::decimal::fold(BinaryOp::Add, &atoms, 0);
                let value = match name {
                    "list.Sum" => sum(),
                    "list.Product" => super::decimal::fold(BinaryOp::Mul, &atoms, 1),
                    "list.Max" => fs.iter().copied().fold(f64::MIN, f64::max),
                    "list.Min" => fs.iter().copied().fold(f64::MAX, f64::min),
                    _ => {
                        let n = i64::try_from(atoms.len()).unwrap_or(i64::MAX);
                        let total = Atom::Float(sum());
                        super::decimal::arith(BinaryOp::Div, &total, &Atom::Int(n))
                            .unwrap_or(sum() / atoms.len() as f64)
                    }
                };
                R::Atom(Atom::Float(value))
            }
        }
        "list.Sort" | "list.SortStable" | "list.SortStrings" | "list.IsSorted" => {
            let items = a.list(0)?;
            let descending = if name == "list.SortStrings" {
                a.arity(1)?;
                false
            } else {
                a.arity(2)?;
                match a.values[1].0.clone() {
                    R::Func("list.Ascending") => false,
                    R::Func("list.Descending") => true,
                    _ => {
                        return Err(err(
                            ErrorKind::Unsupported,
                            "unsupported: list.Sort with a custom comparator (only list.Ascending and list.Descending)",
                            a.values[1].1,
                        ));
                    }
                }
            };
            let mut keyed = Vec::new();
            for item in items {
                keyed.push((a.engine.concrete(R::V(item), span)?, item));
            }
            let mut sorted = keyed.clone();
            sorted.sort_by(|x, y| {
                let ord = super::val::compare(&x.0, &y.0).unwrap_or(std::cmp::Ordering::Equal);
                if descending { ord.reverse() } else { ord }
            });
            if name == "list.IsSorted" {
                R::Atom(Atom::Bool(
                    sorted.iter().map(|x| x.1).eq(keyed.iter().map(|x| x.1)),
                ))
            } else {
                let out = sorted.into_iter().map(|(_, v)| v).collect();
                R::V(a.engine.list_of(out, span))
            }
        }
        "list.Ascending" | "list.Descending" => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: calling {name}"),
                span,
            ));
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                span,
            ));
        }
    };
    Ok(r)
}

fn flatten(a: &mut Args<'_, '_>, items: Vec<VId>, depth: i64) -> Result<Vec<VId>, Error> {
    let mut out = Vec::new();
    for item in items {
        let v = a.engine.concrete_vertex(item, a.span)?;
        if depth != 0 && a.engine.vs[v as usize].list.is_some() {
            let inner = a.engine.list_items(R::V(v), a.span)?;
            out.extend(flatten(a, inner, depth - 1)?);
        } else {
            out.push(item);
        }
    }
    Ok(out)
}

fn math(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let r = match name {
        "math.Abs" => {
            a.arity(1)?;
            match a.atom(0)? {
                Atom::Int(i) => R::Atom(Atom::Int(
                    i.checked_abs().ok_or_else(|| a.fail("overflow"))?,
                )),
                Atom::Float(f) => R::Atom(Atom::Float(f.abs())),
                other => return Err(a.type_error(0, &other, "number")),
            }
        }
        "math.Floor" | "math.Ceil" | "math.Round" | "math.Trunc" | "math.RoundToEven" => {
            a.arity(1)?;
            let f = a.num(0)?;
            let value = match name {
                "math.Floor" => f.floor(),
                "math.Ceil" => f.ceil(),
                "math.Round" => f.round(),
                "math.RoundToEven" => f.round_ties_even(),
                _ => f.trunc(),
            };
            // CUE returns ints for these.
            if value.abs() < 9.0e18 {
                R::Atom(Atom::Int(value as i64))
            } else {
                R::Atom(Atom::Float(value))
            }
        }
        "math.Pow" => {
            a.arity(2)?;
            let (x, y) = (a.num(0)?, a.num(1)?);
            integral_float(x.powf(y))
        }
        "math.Sqrt" | "math.Log" | "math.Exp" => {
            a.arity(1)?;
            let x = a.num(0)?;
            integral_float(match name {
                "math.Sqrt" => x.sqrt(),
                "math.Log" => x.ln(),
                _ => x.exp(),
            })
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                a.span,
            ));
        }
    };
    Ok(r)
}

/// CUE computes these with decimals: an exact integral result prints without a fraction, which
/// we approximate by returning an int.
fn integral_float(f: f64) -> R {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 {
        R::Atom(Atom::Int(f as i64))
    } else {
        R::Atom(Atom::Float(f))
    }
}

fn json(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let span = a.span;
    let r = match name {
        "json.Marshal" => {
            a.arity(1)?;
            let (r, s) = a.values[0].clone();
            let v = a.engine.vertex_of(r, s)?;
            let j = vertex_json(a.engine, v, s, 0)?;
            string(serde_json::to_string(&j).map_err(|e| a.fail(e.to_string()))?)
        }
        "json.MarshalStream" => {
            a.arity(1)?;
            let items = a.list(0)?;
            let mut out = String::new();
            for item in items {
                let j = vertex_json(a.engine, item, span, 0)?;
                out.push_str(&serde_json::to_string(&j).map_err(|e| a.fail(e.to_string()))?);
                out.push('\n');
            }
            string(out)
        }
        "json.Unmarshal" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let j: serde_json::Value =
                serde_json::from_str(&s).map_err(|e| a.fail(format!("json: {e}")))?;
            R::V(a.engine.json_vertex(&j, span))
        }
        "json.Valid" => {
            a.arity(1)?;
            let s = a.str(0)?;
            R::Atom(Atom::Bool(
                serde_json::from_str::<serde_json::Value>(&s).is_ok(),
            ))
        }
        "json.Indent" => {
            a.arity(3)?;
            let s = a.str(0)?;
            let j: serde_json::Value =
                serde_json::from_str(&s).map_err(|e| a.fail(format!("json: {e}")))?;
            string(serde_json::to_string_pretty(&j).map_err(|e| a.fail(e.to_string()))?)
        }
        "json.Compact" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let j: serde_json::Value =
                serde_json::from_str(&s).map_err(|e| a.fail(format!("json: {e}")))?;
            string(serde_json::to_string(&j).map_err(|e| a.fail(e.to_string()))?)
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                span,
            ));
        }
    };
    Ok(r)
}

fn base64(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let engine = base64::engine::general_purpose::STANDARD;
    let r = match name {
        "base64.Encode" => {
            a.arity(2)?;
            if a.atom(0)? != Atom::Null {
                return Err(a.fail("base64: unsupported encoding: cannot use value as null"));
            }
            let data: Vec<u8> = match a.atom(1)? {
                Atom::Str(s) => s.as_bytes().to_vec(),
                Atom::Bytes(b) => b.to_vec(),
                other => return Err(a.type_error(1, &other, "bytes")),
            };
            string(engine.encode(data))
        }
        "base64.Decode" => {
            a.arity(2)?;
            if a.atom(0)? != Atom::Null {
                return Err(a.fail("base64: unsupported encoding: cannot use value as null"));
            }
            let s = a.str(1)?;
            let data = engine
                .decode(s.as_bytes())
                .map_err(|e| a.fail(e.to_string()))?;
            R::Atom(Atom::Bytes(Rc::from(data.as_slice())))
        }
        "base64.EncodedLen" => {
            a.arity(2)?;
            let n = a.int(1)?;
            R::Atom(Atom::Int((n + 2) / 3 * 4))
        }
        "base64.DecodedLen" => {
            a.arity(2)?;
            let n = a.int(1)?;
            R::Atom(Atom::Int(n / 4 * 3))
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                a.span,
            ));
        }
    };
    Ok(r)
}

fn yaml(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let span = a.span;
    let r = match name {
        "yaml.Marshal" => {
            a.arity(1)?;
            let (r, s) = a.values[0].clone();
            let v = a.engine.vertex_of(r, s)?;
            let j = vertex_json(a.engine, v, s, 0)?;
            string(yaml_text(&j).map_err(|e| a.fail(e))?)
        }
        "yaml.MarshalStream" => {
            a.arity(1)?;
            let items = a.list(0)?;
            let mut docs = Vec::new();
            for item in items {
                let j = vertex_json(a.engine, item, span, 0)?;
                docs.push(yaml_text(&j).map_err(|e| a.fail(e))?);
            }
            string(docs.join("---\n"))
        }
        "yaml.Unmarshal" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let j: serde_json::Value =
                serde_saphyr::from_str(&s).map_err(|e| a.fail(format!("yaml: {e}")))?;
            R::V(a.engine.json_vertex(&j, span))
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                span,
            ));
        }
    };
    Ok(r)
}

fn yaml_text(j: &serde_json::Value) -> Result<String, String> {
    serde_saphyr::to_string(j).map_err(|e| e.to_string())
}

/// Concrete JSON of a vertex, defaults taken (for `json.Marshal` and friends).
pub fn vertex_json(
    engine: &mut Engine<'_>,
    v: VId,
    span: Span,
    depth: u32,
) -> Result<serde_json::Value, Error> {
    if depth > 100 {
        return Err(err(ErrorKind::Cycle, "structural cycle", span));
    }
    let v = engine.concrete_vertex(v, span)?;
    if let Some(e) = engine.vs[v as usize].errors.first() {
        return Err(e.clone());
    }
    if let Some(list) = engine.vs[v as usize].list.clone() {
        let mut out = Vec::with_capacity(list.elems.len());
        for elem in list.elems {
            out.push(vertex_json(engine, elem, span, depth + 1)?);
        }
        return Ok(serde_json::Value::Array(out));
    }
    let vertex = &engine.vs[v as usize];
    if vertex.is_struct
        || (vertex.struct_hint
            && vertex.shape.atom.is_none()
            && vertex.shape.kinds == crate::KindSet::TOP)
    {
        let arcs = engine.ordered_arcs(v);
        let mut map = serde_json::Map::new();
        for (sym, arc) in arcs {
            let label = engine.sym(sym).to_owned();
            if is_hidden(&label) || is_definition(&label) {
                continue;
            }
            match engine.vs[arc as usize].field {
                FieldKind::Optional => continue,
                FieldKind::Required | FieldKind::Regular => {}
            }
            engine.eval_vertex(arc);
            let value = vertex_json(engine, arc, span, depth + 1)?;
            map.insert(label, value);
        }
        return Ok(serde_json::Value::Object(map));
    }
    let atom = engine.concrete(R::V(v), span)?;
    Ok(atom.to_json())
}
