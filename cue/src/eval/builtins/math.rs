//! `math`: CUE's `pkg/math` functions.

use crate::{Error, ErrorKind};

use super::{Args, err};
use crate::eval::engine::R;
use crate::eval::val::Atom;

pub(super) fn math(a: &mut Args<'_, '_>) -> Result<R, Error> {
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
