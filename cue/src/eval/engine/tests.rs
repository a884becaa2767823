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
