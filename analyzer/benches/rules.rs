//! The analysis beyond the render: `analyze_snapshot` next to `render_snapshot` on
//! the same `loadgen` apps, so the difference is the rules, OpenAPI validation and the rest of
//! the analysis pipeline. Small on purpose (300 apps): it is meant to be run under callgrind,
//! where per-function costs show what each rule costs per object.
//!
//! ```sh
//! cargo bench -p analyzer --bench rules
//! B=$(ls target/release/deps/rules-* | grep -v '\.d$')
//! RAYON_NUM_THREADS=1 valgrind --tool=callgrind $B --bench --profile-time 5 rules/analyze_300_apps
//! ```

// Bench code: a failed unwrap is a failed bench setup.
#![allow(clippy::unwrap_used)]

use analyzer::{AnalysisOptions, Definitions, RenderOptions, Snapshot, SourceFile};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

// The binary's allocator (src/main.rs), so these figures match `driftless analyze`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const N_APPS: usize = 300;

fn bench_rules(c: &mut Criterion) {
    let builtins = Definitions::builtin();
    let options = AnalysisOptions::default();
    let render_options = RenderOptions {
        cluster_version: options.render.cluster_version.clone(),
        ..RenderOptions::default()
    };
    let input = Snapshot {
        commit: None,
        files: loadgen::generate(N_APPS, &loadgen::Options::default())
            .into_iter()
            .map(|file| SourceFile {
                path: file.path.to_string_lossy().into_owned(),
                contents: file.contents,
            })
            .collect(),
    };
    // Every generated app must analyze without an error, or this would time error paths.
    let (analyzed, _) = analyzer::analyze_snapshot(&input, &builtins, &options);
    assert_eq!(analyzed.apps.len(), N_APPS);
    assert!(analyzed.apps.iter().all(|app| !app.is_blocked()));
    let mut group = c.benchmark_group("rules");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N_APPS as u64));
    group.bench_function(format!("analyze_{N_APPS}_apps"), |b| {
        b.iter(|| analyzer::analyze_snapshot(&input, &builtins, &options));
    });
    group.bench_function(format!("render_{N_APPS}_apps"), |b| {
        b.iter(|| analyzer::render_snapshot(&input, &builtins, &render_options));
    });
    group.finish();
}

criterion_group!(benches, bench_rules);
criterion_main!(benches);
