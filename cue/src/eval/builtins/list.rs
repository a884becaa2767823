//! `list`: CUE's `pkg/list` functions.

use crate::ast::BinaryOp;
use crate::{Error, ErrorKind};

use super::encoding::vertex_json;
use super::{Args, err};
use crate::eval::engine::{R, VId};
use crate::eval::val::{Atom, Validator};

pub(super) fn list(a: &mut Args<'_, '_>) -> Result<R, Error> {
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
                        if a.engine.over_budget() {
                            break;
                        }
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
                let sum = || crate::eval::decimal::fold(BinaryOp::Add, &atoms, 0);
                let value = match name {
                    "list.Sum" => sum(),
                    "list.Product" => crate::eval::decimal::fold(BinaryOp::Mul, &atoms, 1),
                    "list.Max" => fs.iter().copied().fold(f64::MIN, f64::max),
                    "list.Min" => fs.iter().copied().fold(f64::MAX, f64::min),
                    _ => {
                        let n = i64::try_from(atoms.len()).unwrap_or(i64::MAX);
                        let total = Atom::Float(sum());
                        crate::eval::decimal::arith(BinaryOp::Div, &total, &Atom::Int(n))
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
                let ord =
                    crate::eval::val::compare(&x.0, &y.0).unwrap_or(std::cmp::Ordering::Equal);
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
