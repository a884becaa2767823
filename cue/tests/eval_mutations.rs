//! Property test: the evaluator under a small budget never panics, always ends, and keeps
//! every error span inside the input, on mutated KubeVela templates and the seeds of the
//! `eval_cue` fuzz target, evaluated with a `parameter` and a `context` injected as the
//! renderer injects them, on both evaluation paths. Runs in every `cargo test`; the cargo-fuzz
//! target `eval_cue` explores further (see FUZZING.md).

mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use cue::{Budget, Evaluator, FileId, Injection, Span, Take, parse_file};
use support::{Rng, files_with_suffix, mutate, shared_dir};

fn check_spans(text: &str, errors: &[cue::Error], origin: &Path) {
    for error in errors {
        for span in error.spans.iter().filter(|span| **span != Span::default()) {
            assert!(
                span.start <= span.end
                    && (span.end as usize) <= text.len()
                    && text.is_char_boundary(span.start as usize)
                    && text.is_char_boundary(span.end as usize),
                "bad span {span:?} for '{error}' on a mutation of {}:\n{text}",
                origin.display()
            );
        }
    }
}

fn evaluate(text: &str, origin: &Path) -> usize {
    let parameter = serde_json::json!({"image": "nginx", "replicas": 2, "ports": [80], "env": {"A": "1"}, "size": 3000, "text": "t"});
    let context = serde_json::json!({"name": "web", "namespace": "default", "appName": "demo"});
    let at = Span {
        file: FileId(0),
        start: 0,
        end: 0,
    };
    let injections = [
        Injection {
            field: "parameter",
            value: &parameter,
            span: at,
        },
        Injection {
            field: "context",
            value: &context,
            span: at,
        },
    ];
    let evaluator = Evaluator::new().with_budget(Budget {
        steps: 20_000,
        deadline: None,
    });
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let parsed = parse_file(FileId(0), text);
        let value = evaluator.evaluate(&[&parsed.file], &injections);
        let mut errors = value.validate();
        if let Err(export_errors) = value.to_json() {
            errors.extend(export_errors);
        }
        let _ = value.export();
        let parts = evaluator.evaluate_parts(
            &[&parsed.file],
            &injections,
            &[("output", Take::Export), ("outputs", Take::Fields)],
        );
        errors.extend(parts.errors().iter().cloned());
        errors
    }));
    let Ok(errors) = outcome else {
        panic!(
            "the evaluator panicked on a mutation of {}:\n{text}",
            origin.display()
        );
    };
    check_spans(text, &errors, origin);
    usize::from(errors.iter().any(|e| e.kind == cue::ErrorKind::Budget))
}

#[test]
fn mutated_templates_evaluate_within_the_budget() {
    let mut sources = files_with_suffix(
        &shared_dir().join("kubevela/vela-templates/definitions"),
        ".cue",
    );
    sources.extend(files_with_suffix(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/eval_cue"),
        ".cue",
    ));
    assert!(
        sources.len() > 50,
        "expected KubeVela's definitions and the seeds"
    );
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut over_budget = 0;
    for path in &sources {
        let source = std::fs::read(path).expect("readable template");
        for round in 0..6 {
            let mutated = if round == 0 {
                source.clone()
            } else {
                mutate(&source, &mut rng)
            };
            let text = match std::str::from_utf8(&mutated) {
                Ok(text) => text,
                Err(error) => {
                    std::str::from_utf8(&mutated[..error.valid_up_to()]).expect("valid prefix")
                }
            };
            over_budget += evaluate(text, path);
        }
    }
    // The budget seed (nested ranges) must be stopped, unmutated at least.
    assert!(over_budget >= 1, "no evaluation reached the budget");
}
