//! `strconv`: CUE's `pkg/strconv` conversions between strings and numbers, bools and quoted
//! text.

use crate::{Error, ErrorKind};

use super::{Args, err, string};
use crate::eval::engine::R;
use crate::eval::val::{Atom, format_float};

pub(super) fn strconv(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let r = match name {
        "strconv.Atoi" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let n: i64 = s.parse().map_err(|_| {
                a.fail(format!(
                    "strconv.Atoi: parsing {}: invalid syntax",
                    crate::eval::val::quote_string(&s)
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
                    crate::eval::val::quote_string(&s)
                ))
            })?;
            R::Atom(Atom::Int(n))
        }
        "strconv.Quote" => {
            a.arity(1)?;
            string(crate::eval::val::quote_string(&a.str(0)?))
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
