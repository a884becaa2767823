//! Predeclared functions (`len`, `div`, ...) and the standard packages KubeVela's definitions
//! import: `strings`, `strconv`, `list`, `math`, `struct`, `encoding/json`, `encoding/base64`,
//! `encoding/yaml`; `more.rs` adds `path`, `crypto/sha256`, `crypto/sha512` and
//! `encoding/hex`. Functions not listed produce `unsupported: <pkg>.<name>`.
//!
//! This file holds the tables of names, argument reading ([`Args`]) and the dispatch to one
//! file per package (`strings.rs`, `strconv.rs`, `list.rs`, `math.rs`, `encoding.rs` for the
//! three `encoding/` packages, `more.rs`).

mod encoding;
pub use encoding::yaml_options;
mod list;
mod math;
mod more;
mod strconv;
mod strings;

use std::rc::Rc;

use crate::span::Span;
use crate::{Error, ErrorKind};

use super::engine::{Engine, R, VId};
use super::val::{Atom, Validator};

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
        Ok(r) => {
            if let R::Atom(atom) = &r {
                args.engine.charge_copy(atom);
            }
            r
        }
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
        _ if name.starts_with("strings.") => strings::strings(a),
        _ if name.starts_with("strconv.") => strconv::strconv(a),
        _ if name.starts_with("list.") => list::list(a),
        _ if name.starts_with("math.") => math::math(a),
        _ if name.starts_with("struct.") => {
            a.arity(1)?;
            let n = a.int(0)?;
            Ok(R::Valid(Validator::Builtin(name, vec![Atom::Int(n)])))
        }
        _ if name.starts_with("json.") => encoding::json(a),
        _ if name.starts_with("base64.") => encoding::base64(a),
        _ if name.starts_with("yaml.") => encoding::yaml(a),
        _ => Err(err(
            ErrorKind::Unsupported,
            format!("unsupported: {name}"),
            a.span,
        )),
    }
}
