//! Render and analysis at scale over `loadgen`'s apps: 1, 1,000 and 10,000 apps rendered, and
//! the analysis of 1,000 and 10,000 (the budget in DESIGN.md §4 is 10,000 apps in under 2 s on
//! 2 cores). The built-in definitions are parsed once, outside the timed loop, as in the agent.
//!
//! ```sh
//! cargo bench -p loadgen --bench scale                      # everything (~5 min on 2 cores)
//! cargo bench -p loadgen --bench scale -- 'render/1000_apps'
//! ```
//!
//! `hack/scale.sh` measures the same through the release binary, with peak RSS.

// Bench code: a failed unwrap is a failed bench setup.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use analyzer::{
    AnalysisOptions, Definitions, RenderOptions, Snapshot, SourceFile, analyze_snapshot,
    render_snapshot,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

// The binary's allocator, so these figures match `driftless` (see src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn snapshot(n_apps: usize) -> Snapshot {
    Snapshot {
        commit: None,
        files: loadgen::generate(n_apps, &loadgen::Options::default())
            .into_iter()
            .map(|file| SourceFile {
                path: file.path.to_string_lossy().into_owned(),
                contents: file.contents,
            })
            .collect(),
    }
}

fn bench_scale(c: &mut Criterion) {
    let builtins = Definitions::builtin();
    let options = RenderOptions::default();
    // A broken input would measure error paths: every app must render.
    let (output, _) = render_snapshot(&snapshot(20), &builtins, &options);
    assert!(output.apps.iter().all(|app| !app.is_blocked()));

    // Inputs are generated when a bench is selected (criterion calls the routine only then),
    // once each: a filtered run (`-- analyze/1000_apps`, or `--test` under callgrind) then
    // counts nothing but the apps it measures and their generation.
    let inputs: [(usize, std::cell::OnceCell<Snapshot>); 3] = [
        (1, std::cell::OnceCell::new()),
        (1_000, std::cell::OnceCell::new()),
        (10_000, std::cell::OnceCell::new()),
    ];
    let mut group = c.benchmark_group("render");
    for (n_apps, input) in &inputs {
        let n_apps = *n_apps;
        group.throughput(Throughput::Elements(n_apps as u64));
        if n_apps > 1 {
            group.sample_size(10);
            group.measurement_time(Duration::from_secs(if n_apps > 1_000 { 120 } else { 15 }));
        }
        group.bench_function(format!("{n_apps}_apps"), |b| {
            let input = input.get_or_init(|| snapshot(n_apps));
            b.iter(|| render_snapshot(input, &builtins, &options));
        });
    }
    group.finish();

    // The same apps analysed: the difference to `render/<n>_apps` is the analysis beyond the
    // render (rules, schema validation, cross-app checks).
    let mut group = c.benchmark_group("analyze");
    let analysis = AnalysisOptions::default();
    for (n_apps, input) in inputs.iter().skip(1) {
        let n_apps = *n_apps;
        group.throughput(Throughput::Elements(n_apps as u64));
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(if n_apps > 1_000 { 120 } else { 15 }));
        group.bench_function(format!("{n_apps}_apps"), |b| {
            let input = input.get_or_init(|| snapshot(n_apps));
            b.iter(|| analyze_snapshot(input, &builtins, &analysis));
        });
    }
    group.finish();
}

criterion_group!(benches, bench_scale);
criterion_main!(benches);
