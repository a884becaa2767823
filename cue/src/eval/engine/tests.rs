//! The engine's accounting, seen from inside: what the public budget tests cannot observe.

use super::{Engine, ROOT};
use crate::{Budget, FileId};

/// Every conjunct given to a value is charged against the budget, so no evaluation makes more
/// conjuncts than it counts steps. A fuzzed template (`fuzz/eval_cue`, now one of its seeds)
/// gave its values thousands of conjuncts each without a charge: each new one was compared
/// with all the earlier ones, and 20,000 steps took 4.7 s (31 s under the fuzzer).
#[test]
fn conjuncts_count_against_the_budget() {
    let source = include_str!("../../../../fuzz/seeds/eval_cue/conjunct-flood.cue");
    let parsed = crate::parse_file(FileId(0), source);
    let mut engine = Engine::new(Budget {
        steps: 20_000,
        deadline: None,
    });
    engine.load(&[&parsed.file], &[]);
    let _ = crate::eval::node::build(&mut engine, ROOT);
    let conjuncts: u64 = engine.vs.iter().map(|v| v.conjs.len() as u64).sum();
    assert!(engine.over_budget(), "{}", engine.stats());
    assert!(conjuncts <= engine.meter.spent(), "{}", engine.stats());
}

/// Every error given to a value is charged against the budget, by its size, so the errors an
/// evaluation holds never outgrow its steps. A fuzzed template (`fuzz/eval_cue`, now one of its
/// seeds) nested an empty disjunction in itself: each level copied every error of the levels
/// below, with a longer message each time, and 1,404 steps held 347 MB of errors (5.9 GB in
/// the fuzzer's original input).
#[test]
fn errors_count_against_the_budget() {
    let source = include_str!("../../../../fuzz/seeds/eval_cue/error-flood.cue");
    let parsed = crate::parse_file(FileId(0), source);
    let mut engine = Engine::new(Budget {
        steps: 20_000,
        deadline: None,
    });
    engine.load(&[&parsed.file], &[]);
    let _ = crate::eval::node::build(&mut engine, ROOT);
    let error_steps: u64 = engine
        .vs
        .iter()
        .flat_map(|v| &v.errors)
        .map(super::arena::error_steps)
        .sum();
    assert!(
        error_steps <= engine.meter.spent(),
        "error steps {error_steps}, {}",
        engine.stats()
    );
}

/// Builtins that make a value per rune, part, number or decoded item stop making them at the
/// budget: their input cost a step per 64 bytes, so a string built within any budget would
/// otherwise give 64 times as many values as it has steps (a fuzzed template made ten million
/// with `list.Range` over floats under a 20,000-step budget).
#[test]
fn expanding_builtins_stop_at_the_budget() {
    let cases = [
        r#"import "strings"
x: len(strings.Runes(strings.Repeat("a", 1000000)))"#,
        r#"import "strings"
x: len(strings.Split(strings.Repeat("a,", 500000), ","))"#,
        r#"import "list"
x: len(list.Range(0, 1000000, 1.0))"#,
        r#"import ("encoding/json", "strings")
x: len(json.Unmarshal("[" + strings.Repeat("1,", 500000) + "1]"))"#,
    ];
    for source in cases {
        let parsed = crate::parse_file(FileId(0), source);
        assert!(parsed.errors.is_empty(), "{source}: {:?}", parsed.errors);
        let mut engine = Engine::new(Budget {
            steps: 20_000,
            deadline: None,
        });
        engine.load(&[&parsed.file], &[]);
        let _ = crate::eval::node::build(&mut engine, ROOT);
        assert!(engine.over_budget(), "{source}: {}", engine.stats());
        assert!(engine.vs.len() <= 20_100, "{source}: {}", engine.stats());
    }
}
