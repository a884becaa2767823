//! The engine's accounting, seen from inside: what the public budget tests cannot observe.

use super::{Engine, ROOT};
use crate::eval::Injection;
use crate::{Budget, FileId, Span};

/// Every conjunct given to a value is charged against the budget, so no evaluation makes more
/// conjuncts than it counts steps. A fuzzed template (`fuzz/eval_cue`) gave its values
/// thousands of conjuncts each without a charge: each new one was compared with all the
/// earlier ones, and 20,000 steps took 4.7 s (31 s under the fuzzer's instrumentation).
#[test]
fn conjuncts_count_against_the_budget() {
    let source = include_str!("../../../tests/fuzz_regressions/conjunct_flood.cue");
    let parsed = crate::parse_file(FileId(0), source);
    let parameter = serde_json::json!({"image": "nginx", "replicas": 2, "size": 3000});
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
    let mut engine = Engine::new(Budget {
        steps: 20_000,
        deadline: None,
    });
    engine.load(&[&parsed.file], &injections);
    let _ = crate::eval::node::build(&mut engine, ROOT);
    let conjuncts: u64 = engine.vs.iter().map(|v| v.conjs.len() as u64).sum();
    assert!(engine.over_budget(), "{}", engine.stats());
    assert!(conjuncts <= engine.meter.spent(), "{}", engine.stats());
}
