//! `strings`: the functions of CUE's `pkg/strings`.

use crate::{Error, ErrorKind};

use super::{Args, err, string};
use crate::eval::engine::R;
use crate::eval::val::{Atom, Validator};

pub(super) fn strings(a: &mut Args<'_, '_>) -> Result<R, Error> {
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
                    Atom::Str(s) => parts.push(s),
                    other => {
                        return Err(a.fail(format!(
                            "invalid list element {}: expected string",
                            other.cue_text()
                        )));
                    }
                }
            }
            // One string may be listed many times: the result's size is checked before it is made.
            let len = parts.iter().map(|s| s.len()).sum::<usize>()
                + sep.len().saturating_mul(parts.len().saturating_sub(1));
            if len > crate::eval::engine::MAX_STRING_LEN {
                return Err(a.fail("result too large"));
            }
            let mut out = String::with_capacity(len);
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push_str(&sep);
                }
                out.push_str(part);
            }
            string(out)
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
            // Each match can grow the string by `new`: the result's size is checked first.
            let matches = if old.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(&*old).count()
            };
            let matches = usize::try_from(n).map_or(matches, |n| matches.min(n));
            let len = s.len() - matches * old.len() + matches.saturating_mul(new.len());
            if len > crate::eval::engine::MAX_STRING_LEN {
                return Err(a.fail("result too large"));
            }
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
            if s.len().saturating_mul(n) > crate::eval::engine::MAX_STRING_LEN {
                return Err(a.fail("result too large"));
            }
            a.engine.charge_bytes(s.len().saturating_mul(n));
            string(s.repeat(n))
        }
        "strings.Runes" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let runes = s.chars().map(|c| Atom::Int(c as i64));
            R::V(a.engine.atom_list(runes, a.span))
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

pub(super) fn str_list(a: &mut Args<'_, '_>, parts: Vec<String>) -> R {
    let parts = parts.iter().map(|p| Atom::str(p));
    R::V(a.engine.atom_list(parts, a.span))
}
