//! Fuzz target: the CUE evaluator under a small budget must never panic, hang or overflow the
//! stack, whatever the program, and must end within its budget: every error, the budget's
//! included, carries a span inside the input.
//!
//! The input is one CUE file, evaluated with a `parameter` and a `context` injected as the
//! renderer injects them, on both evaluation paths (the whole value, and the renderer's
//! requested parts), then exported to JSON and to the trait-patching form.

#![no_main]

use std::sync::OnceLock;

use cue::{Budget, Evaluator, Injection, Span, Take};
use libfuzzer_sys::fuzz_target;

/// Small enough that a hostile program stops within milliseconds.
const STEPS: u64 = 20_000;

fn injected() -> &'static (serde_json::Value, serde_json::Value) {
    static INJECTED: OnceLock<(serde_json::Value, serde_json::Value)> = OnceLock::new();
    INJECTED.get_or_init(|| {
        (
            serde_json::json!({"image": "nginx", "replicas": 2, "ports": [80, 443], "env": {"A": "1"}, "size": 3000, "text": "t"}),
            serde_json::json!({"name": "web", "namespace": "default", "appName": "demo", "output": {"kind": "Deployment"}}),
        )
    })
}

fn check_spans(source: &str, errors: &[cue::Error]) {
    for error in errors {
        for span in &error.spans {
            if *span == Span::default() {
                continue;
            }
            assert!(span.start <= span.end, "inverted span {span:?} for {error}");
            assert!(
                span.end as usize <= source.len(),
                "span {span:?} past the end for {error}"
            );
            assert!(
                source.is_char_boundary(span.start as usize)
                    && source.is_char_boundary(span.end as usize),
                "span {span:?} splits a character for {error}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = cue::parse_file(cue::FileId(0), source);
    let (parameter, context) = injected();
    // The injected values have no text of their own: they point at the start of the input.
    let at = Span {
        file: cue::FileId(0),
        start: 0,
        end: 0,
    };
    let injections = [
        Injection {
            field: "parameter",
            value: parameter,
            span: at,
        },
        Injection {
            field: "context",
            value: context,
            span: at,
        },
    ];
    let evaluator = Evaluator::new().with_budget(Budget {
        steps: STEPS,
        deadline: None,
    });
    let value = evaluator.evaluate(&[&parsed.file], &injections);
    check_spans(source, &value.validate());
    if let Err(errors) = value.to_json() {
        check_spans(source, &errors);
    }
    let _ = value.export();
    let parts = evaluator.evaluate_parts(
        &[&parsed.file],
        &injections,
        &[
            ("output", Take::Export),
            ("outputs", Take::Fields),
            ("parameter", Take::Value),
        ],
    );
    check_spans(source, parts.errors());
});
