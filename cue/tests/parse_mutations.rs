//! Property test: the parser never panics and keeps every error span inside the input, on
//! thousands of mutated KubeVela templates (truncations, byte flips, deletions, insertions of
//! syntax characters, duplicated slices). This runs in every `cargo test`; the cargo-fuzz target
//! in `fuzz/` explores further (see FUZZING.md).

mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};

use cue::{FileId, parse_file};
use support::{Rng, files_with_suffix, mutate, shared_dir};

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
