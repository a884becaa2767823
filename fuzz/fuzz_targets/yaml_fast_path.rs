//! Fuzz target: the loader's YAML fast path (`analyzer/src/load/yaml/fast.rs`, granit-parser
//! events read directly) must give exactly serde-saphyr's documents and positions whenever it
//! answers, and neither may panic. Any disagreement aborts with both results.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Snapshots carry text; the agent reports a non-UTF-8 file before loading.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(mismatch) = analyzer::yaml_fast_path_mismatch(text) {
        panic!("fast path differs from serde-saphyr on {text:?}:\n{mismatch}");
    }
});
