//! Standard packages beyond KubeVela's core set: `path` (slash-separated paths, the `unix`
//! OS only), `crypto/sha256`, `crypto/sha512`, `encoding/hex`, and `math.MultipleOf`.
//!
//! `path` follows Go's `path/filepath` for Unix as CUE's `pkg/path` does; its functions take
//! the OS as an optional last argument, and `windows` and `plan9` paths are refused as
//! unsupported rather than treated as Unix ones.

use std::rc::Rc;

use sha2::Digest as _;

use super::strings::str_list;
use super::{Args, R, err, string};
use crate::ErrorKind;
use crate::eval::val::Atom;

/// The packages and functions of this module, as `<import path>` and `<pkg>.<name>`.
pub(super) const PACKAGES: &[&str] = &["path", "crypto/sha256", "crypto/sha512", "encoding/hex"];
pub(super) const FUNCTIONS: &[&str] = &[
    "path.Base",
    "path.Clean",
    "path.Dir",
    "path.Ext",
    "path.IsAbs",
    "path.Join",
    "path.Split",
    "path.ToSlash",
    "path.FromSlash",
    "path.VolumeName",
    "sha256.Sum256",
    "sha256.Sum224",
    "sha512.Sum512",
    "sha512.Sum384",
    "sha512.Sum512_224",
    "sha512.Sum512_256",
    "hex.Encode",
    "hex.Decode",
    "hex.EncodedLen",
    "hex.DecodedLen",
    "math.MultipleOf",
];

/// The constants of these packages: `path`'s OS names.
pub(super) fn constant(full_name: &str) -> Option<Atom> {
    match full_name {
        "path.Unix" => Some(Atom::str("unix")),
        "path.Windows" => Some(Atom::str("windows")),
        "path.Plan9" => Some(Atom::str("plan9")),
        _ => None,
    }
}

/// Calls one of [`FUNCTIONS`].
pub(super) fn call(a: &mut Args<'_, '_>) -> Result<R, crate::Error> {
    let name = a.name;
    match name.split_once('.').map_or("", |(package, _)| package) {
        "path" => path(a),
        "sha256" | "sha512" => {
            a.arity(1)?;
            let data = bytes_arg(a, 0)?;
            let digest: Vec<u8> = match name {
                "sha256.Sum256" => sha2::Sha256::digest(&data).to_vec(),
                "sha256.Sum224" => sha2::Sha224::digest(&data).to_vec(),
                "sha512.Sum512" => sha2::Sha512::digest(&data).to_vec(),
                "sha512.Sum384" => sha2::Sha384::digest(&data).to_vec(),
                "sha512.Sum512_224" => sha2::Sha512_224::digest(&data).to_vec(),
                _ => sha2::Sha512_256::digest(&data).to_vec(),
            };
            Ok(R::Atom(Atom::Bytes(Rc::from(digest.as_slice()))))
        }
        "hex" => match name {
            "hex.Encode" => {
                a.arity(1)?;
                Ok(string(hex::encode(bytes_arg(a, 0)?)))
            }
            "hex.Decode" => {
                a.arity(1)?;
                let text = a.str(0)?;
                let data = hex::decode(text.as_bytes())
                    .map_err(|error| a.fail(format!("encoding/hex: {error}")))?;
                Ok(R::Atom(Atom::Bytes(Rc::from(data.as_slice()))))
            }
            "hex.EncodedLen" => {
                a.arity(1)?;
                Ok(R::Atom(Atom::Int(a.int(0)?.saturating_mul(2))))
            }
            _ => {
                a.arity(1)?;
                Ok(R::Atom(Atom::Int(a.int(0)? / 2)))
            }
        },
        _ => {
            // math.MultipleOf: whether x / y is a whole number.
            a.arity(2)?;
            let (x, y) = (a.atom(0)?, a.atom(1)?);
            let multiple = match (&x, &y) {
                (Atom::Int(_), Atom::Int(0)) => return Err(a.fail("division by zero")),
                (Atom::Int(x), Atom::Int(y)) => x % y == 0,
                _ => {
                    let (x, y) = (a.num(0)?, a.num(1)?);
                    if y == 0.0 {
                        return Err(a.fail("division by zero"));
                    }
                    (x / y).fract() == 0.0
                }
            };
            Ok(R::Atom(Atom::Bool(multiple)))
        }
    }
}

/// A string or bytes argument, as bytes.
fn bytes_arg(a: &mut Args<'_, '_>, index: usize) -> Result<Vec<u8>, crate::Error> {
    match a.atom(index)? {
        Atom::Str(text) => Ok(text.as_bytes().to_vec()),
        Atom::Bytes(data) => Ok(data.to_vec()),
        other => Err(a.type_error(index, &other, "bytes")),
    }
}

fn path(a: &mut Args<'_, '_>) -> Result<R, crate::Error> {
    let name = a.name;
    // Every function takes one argument, and the OS last, optionally.
    let n_args = 1;
    if a.values.len() == n_args + 1 {
        let os = a.str(n_args)?;
        if &*os != "unix" {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name} for OS {os:?} (only \"unix\" paths are supported)"),
                a.span,
            ));
        }
    } else {
        a.arity(n_args)?;
    }
    if name == "path.Join" {
        let items = a.list(0)?;
        let mut parts = Vec::with_capacity(items.len());
        for item in items {
            match a.engine.concrete(R::V(item), a.span)? {
                Atom::Str(text) => parts.push(String::from(&*text)),
                other => return Err(a.type_error(0, &other, "string")),
            }
        }
        let joined: Vec<&str> = parts
            .iter()
            .map(String::as_str)
            .filter(|p| !p.is_empty())
            .collect();
        return Ok(string(if joined.is_empty() {
            String::new()
        } else {
            clean(&joined.join("/"))
        }));
    }
    let text = a.str(0)?;
    Ok(match name {
        "path.Base" => string(base(&text)),
        "path.Clean" => string(clean(&text)),
        "path.Dir" => string(clean(split(&text).0)),
        "path.Ext" => string(extension(&text)),
        "path.IsAbs" => R::Atom(Atom::Bool(text.starts_with('/'))),
        "path.Split" => {
            let (dir, file) = split(&text);
            let parts = vec![dir.to_owned(), file.to_owned()];
            str_list(a, parts)
        }
        "path.VolumeName" => string(""),
        // ToSlash and FromSlash change nothing where the separator is `/`.
        _ => string(&*text),
    })
}

/// Go's `path.Clean`: the shortest equivalent path, `.` and `..` elements resolved.
fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let rooted = path.starts_with('/');
    let mut kept: Vec<&str> = Vec::new();
    for element in path.split('/') {
        match element {
            "" | "." => {}
            ".." => {
                if kept.last().is_some_and(|last| *last != "..") {
                    kept.pop();
                } else if !rooted {
                    kept.push("..");
                }
            }
            element => kept.push(element),
        }
    }
    let joined = kept.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Go's `path.Split`: everything up to and including the last `/`, and the rest.
fn split(path: &str) -> (&str, &str) {
    let at = path.rfind('/').map_or(0, |slash| slash + 1);
    path.split_at(at)
}

/// Go's `path.Base`: the last element, trailing slashes removed.
fn base(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".to_owned();
    }
    split(trimmed).1.to_owned()
}

/// Go's `path.Ext`: the suffix from the last `.` of the last element.
fn extension(path: &str) -> &str {
    let file = split(path).1;
    file.rfind('.').map_or("", |dot| &file[dot..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_clean_split_and_name_as_go_does() {
        for (path, cleaned) in [
            ("", "."),
            ("a/b/../c", "a/c"),
            ("/../a//b/./", "/a/b"),
            ("../../x", "../../x"),
            ("a/..", "."),
            ("/", "/"),
        ] {
            assert_eq!(clean(path), cleaned, "{path}");
        }
        assert_eq!(split("a/b/c.txt"), ("a/b/", "c.txt"));
        assert_eq!(split("file"), ("", "file"));
        assert_eq!(base("a/b/"), "b");
        assert_eq!(base("///"), "/");
        assert_eq!(extension("a.b/c.tar.gz"), ".gz");
        assert_eq!(extension("a.b/c"), "");
    }
}
