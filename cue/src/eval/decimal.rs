//! Decimal arithmetic for floats, so that `0.1 + 0.2` is `0.3` as in CUE.
//!
//! CUE computes with arbitrary-precision decimals (34 significant digits for division); we keep
//! floats as `f64`. Binary floating point would turn `123.45 - 987.65` into
//! `-864.1999999999999`, a silently different number in the output. So each operand is read
//! back as the shortest decimal that round-trips to it (which is what the source said, for
//! values that came from literals), the operation is done exactly on `i128` mantissas, and the
//! exact result is rounded to the nearest `f64` once. When a mantissa would overflow `i128`, the
//! caller falls back to plain `f64` arithmetic (values that large or that precise are beyond
//! what an `f64` holds anyway).

use crate::ast::BinaryOp;

use super::val::Atom;

/// A decimal `mantissa × 10^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    mantissa: i128,
    exponent: i32,
}

/// Mantissas are scaled up to at most this before a division, leaving room for the quotient's
/// digits (an `i128` holds 38).
const DIVIDEND_LIMIT: i128 = 10i128.pow(36);

impl Decimal {
    fn of(atom: &Atom) -> Option<Decimal> {
        match atom {
            Atom::Int(i) => Some(Decimal {
                mantissa: i128::from(*i),
                exponent: 0,
            }),
            Atom::Float(f) if f.is_finite() => Decimal::of_f64(*f),
            _ => None,
        }
    }

    /// The shortest decimal that round-trips to `f` (Rust's `{:e}` formatting).
    fn of_f64(f: f64) -> Option<Decimal> {
        let text = format!("{f:e}");
        let (digits, exponent) = text.split_once('e')?;
        let exponent: i32 = exponent.parse().ok()?;
        let (negative, digits) = match digits.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, digits),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let mantissa: i128 = format!("{whole}{fraction}").parse().ok()?;
        let fraction_len = i32::try_from(fraction.len()).ok()?;
        Some(Decimal {
            mantissa: if negative { -mantissa } else { mantissa },
            exponent: exponent.checked_sub(fraction_len)?,
        })
    }

    fn to_f64(self) -> Option<f64> {
        format!("{}e{}", self.mantissa, self.exponent).parse().ok()
    }

    /// This decimal with exponent `exponent` (not above its own).
    fn rescaled(self, exponent: i32) -> Option<i128> {
        let shift = u32::try_from(self.exponent.checked_sub(exponent)?).ok()?;
        self.mantissa.checked_mul(10i128.checked_pow(shift)?)
    }

    fn add(self, other: Decimal) -> Option<Decimal> {
        let exponent = self.exponent.min(other.exponent);
        Some(Decimal {
            mantissa: self
                .rescaled(exponent)?
                .checked_add(other.rescaled(exponent)?)?,
            exponent,
        })
    }

    fn mul(self, other: Decimal) -> Option<Decimal> {
        Some(Decimal {
            mantissa: self.mantissa.checked_mul(other.mantissa)?,
            exponent: self.exponent.checked_add(other.exponent)?,
        })
    }

    /// The quotient to at least 19 significant digits (an `f64` needs 17), truncated.
    fn div(self, other: Decimal) -> Option<Decimal> {
        if other.mantissa == 0 {
            return None;
        }
        let mut dividend = self.mantissa;
        let mut exponent = self.exponent.checked_sub(other.exponent)?;
        while dividend != 0 && dividend.abs() < DIVIDEND_LIMIT / 10 {
            dividend *= 10;
            exponent = exponent.checked_sub(1)?;
        }
        Some(Decimal {
            mantissa: dividend / other.mantissa,
            exponent,
        })
    }
}

/// `a op b` for `+`, `-`, `*` and `/` on numbers, computed in decimal and rounded once to the
/// nearest `f64`; `None` when an operand is not a finite number or the exact computation does
/// not fit (the caller then uses `f64` arithmetic).
pub fn arith(op: BinaryOp, a: &Atom, b: &Atom) -> Option<f64> {
    let (x, y) = (Decimal::of(a)?, Decimal::of(b)?);
    let result = match op {
        BinaryOp::Add => x.add(y)?,
        BinaryOp::Sub => x.add(Decimal {
            mantissa: y.mantissa.checked_neg()?,
            exponent: y.exponent,
        })?,
        BinaryOp::Mul => x.mul(y)?,
        BinaryOp::Div => x.div(y)?,
        _ => return None,
    };
    result.to_f64().filter(|f| f.is_finite())
}

/// `identity op a₀ op a₁ ...` for `+` or `*` over numbers, each step as in [`arith`] (falling
/// back to `f64` for a step that does not fit).
pub fn fold(op: BinaryOp, atoms: &[Atom], identity: i64) -> f64 {
    let mut acc = Atom::Int(identity);
    for atom in atoms {
        let exact = arith(op, &acc, atom);
        let value = exact.unwrap_or_else(|| {
            let (x, y) = (acc.as_f64().unwrap_or(0.0), atom.as_f64().unwrap_or(0.0));
            if op == BinaryOp::Mul { x * y } else { x + y }
        });
        acc = Atom::Float(value);
    }
    acc.as_f64().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> Atom {
        Atom::Float(x)
    }

    #[test]
    fn decimal_results_round_once() {
        assert_eq!(arith(BinaryOp::Add, &f(0.1), &f(0.2)), Some(0.3));
        assert_eq!(arith(BinaryOp::Sub, &f(123.45), &f(987.65)), Some(-864.2));
        assert_eq!(
            arith(BinaryOp::Mul, &f(123.45), &f(987.65)),
            Some(121925.3925)
        );
        assert_eq!(arith(BinaryOp::Div, &f(0.3), &f(0.1)), Some(3.0));
        assert_eq!(
            arith(BinaryOp::Div, &Atom::Int(1), &Atom::Int(3)),
            Some(1.0 / 3.0)
        );
        assert_eq!(arith(BinaryOp::Mul, &f(1.5e-7), &Atom::Int(2)), Some(3e-7));
        assert_eq!(arith(BinaryOp::Div, &f(1.0), &f(0.0)), None);
    }

    #[test]
    fn overflow_is_left_to_the_caller() {
        assert_eq!(arith(BinaryOp::Mul, &f(1e300), &f(1e300)), None);
        assert_eq!(arith(BinaryOp::Add, &f(1e300), &f(1e-300)), None);
    }
}
