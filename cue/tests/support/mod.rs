//! Helpers shared by the corpus tests: locating the read-only reference material in `shared/`
//! and reading txtar archives (CUE's test format: `-- name --` headers, each followed by the
//! file's content).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The shared reference folder beside the repository (`/work/shared` for `/work/main`).
///
/// # Panics
/// When the folder is missing: corpus tests must fail loudly, never pass by skipping.
pub fn shared_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    assert!(
        dir.join("cue").is_dir() && dir.join("kubevela").is_dir(),
        "the shared reference folder is missing: expected {} to hold cue/ and kubevela/ \
         (the corpus tests read CUE's test suite and KubeVela's definitions from there)",
        dir.display()
    );
    dir
}

/// Every file under `dir` whose name ends with `suffix`, sorted.
pub fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", current.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// One file of a txtar archive.
pub struct TxtarFile {
    pub name: String,
    pub content: String,
}

/// Splits a txtar archive into its files (the leading comment is dropped).
pub fn parse_txtar(text: &str) -> Vec<TxtarFile> {
    let mut files: Vec<TxtarFile> = Vec::new();
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_end_matches(['\n', '\r']);
        if let Some(name) = trimmed
            .strip_prefix("-- ")
            .and_then(|rest| rest.strip_suffix(" --"))
        {
            files.push(TxtarFile {
                name: name.trim().to_owned(),
                content: String::new(),
            });
        } else if let Some(file) = files.last_mut() {
            file.content.push_str(line);
        }
    }
    files
}

/// JSON equality where numbers compare by value (`1.0 == 1`), as CUE exports floats with a
/// fraction and integers without.
///
/// Floats may also differ in the last bit: CUE prints up to 34 significant digits
/// (`1 / 3` is `0.3333333333333333333333333333333333`), and serde_json (without its
/// `float_roundtrip` feature) does not always round such long texts to the nearest `f64`.
pub fn json_equal(left: &serde_json::Value, right: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (left, right) {
        (Value::Number(a), Value::Number(b)) => {
            a == b
                || matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y))
                    if x == y || (x - y).abs() <= 2.0 * f64::EPSILON * x.abs().max(y.abs()))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, x)| b.get(key).is_some_and(|y| json_equal(x, y)))
        }
        _ => left == right,
    }
}

/// A small deterministic generator (xorshift64*), so failures reproduce exactly.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that matter to the lexer and parser.
pub const SYNTAX: &[u8] = b"{}[]()\"'#\\:,.?!=|&*<>/\n \t_@0xe.";

pub fn mutate(source: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bytes = source.to_vec();
    let n_edits = 1 + rng.below(4);
    for _ in 0..n_edits {
        let at = rng.below(bytes.len() + 1);
        match rng.below(6) {
            0 => bytes.truncate(at),
            1 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
            2 if at < bytes.len() => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(at..end);
            }
            3 => bytes.insert(at, SYNTAX[rng.below(SYNTAX.len())]),
            4 => {
                let end = (at + rng.below(64)).min(bytes.len());
                let slice = bytes[at..end].to_vec();
                let to = rng.below(bytes.len() + 1);
                bytes.splice(to..to, slice);
            }
            _ => {
                let repeat = SYNTAX[rng.below(SYNTAX.len())];
                let count = rng.below(300);
                bytes.splice(at..at, std::iter::repeat_n(repeat, count));
            }
        }
    }
    bytes
}
