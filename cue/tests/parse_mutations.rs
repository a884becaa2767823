//! Property test: the parser never panics and keeps every error span inside the input, on
//! thousands of mutated KubeVela templates (truncations, byte flips, deletions, insertions of
//! syntax characters, duplicated slices). This runs in every `cargo test`; the cargo-fuzz target
//! in `fuzz/` explores further (see FUZZING.md).

mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};

use cue::{FileId, parse_file};
use support::{files_with_suffix, shared_dir};

/// A small deterministic generator (xorshift64*), so failures reproduce exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that matter to the lexer and parser.
const SYNTAX: &[u8] = b"{}[]()\"'#\\:,.?!=|&*<>/\n \t_@0xe.";

fn mutate(source: &[u8], rng: &mut Rng) -> Vec<u8> {
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

#[test]
fn mutated_kubevela_templates_never_panic() {
    let root = shared_dir().join("kubevela/vela-templates/definitions");
    let templates = files_with_suffix(&root, ".cue");
    assert!(
        templates.len() > 50,
        "expected KubeVela's definitions under {}",
        root.display()
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut n_inputs = 0;
    let mut n_with_errors = 0;
    for path in &templates {
        let source = std::fs::read(path).expect("readable definition");
        for _ in 0..25 {
            let mutated = mutate(&source, &mut rng);
            // Keep the valid UTF-8 prefix: the parser takes text.
            let text = match std::str::from_utf8(&mutated) {
                Ok(text) => text,
                Err(error) => {
                    std::str::from_utf8(&mutated[..error.valid_up_to()]).expect("valid prefix")
                }
            };
            n_inputs += 1;
            let parsed = catch_unwind(AssertUnwindSafe(|| parse_file(FileId(0), text)));
            let Ok(parsed) = parsed else {
                panic!(
                    "the parser panicked on a mutation of {}:\n{text}",
                    path.display()
                );
            };
            if !parsed.errors.is_empty() {
                n_with_errors += 1;
            }
            for error in &parsed.errors {
                let span = error.span().expect("parse errors have a span");
                assert!(
                    span.start <= span.end
                        && text.is_char_boundary(span.start as usize)
                        && text.is_char_boundary(span.end as usize),
                    "bad span {span:?} for '{error}' on a mutation of {}:\n{text}",
                    path.display()
                );
            }
        }
    }
    // The mutations must actually exercise error paths, or this test proves little.
    assert!(
        n_with_errors * 2 > n_inputs,
        "only {n_with_errors} of {n_inputs} mutations had errors"
    );
}
