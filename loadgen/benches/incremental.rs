//! The agent's per-commit analysis at scale: one changed app among 100, 1,000 and 10,000, with
//! the cache warm (`analyzer::analyze_snapshot_shared`, as `driftless agent` runs it per
//! commit). Each iteration changes app 7 to its next generation, so exactly one file is parsed
//! and one app rendered again; the figure should stay about the same whatever the number of
//! apps (issue #9). What remains per app is cheap: a byte comparison of each file with the
//! cached text, one map lookup per file and per app, a reference count per reused app and a
//! pointer per app in the output and the source map.
//!
//! ```sh
//! cargo bench -p loadgen --bench incremental
//! ```

// Bench code: a failed unwrap is a failed bench setup.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use analyzer::{
    AnalysisCache, AnalysisOptions, Definitions, Snapshot, SourceFile, analyze_snapshot_shared,
};
use criterion::{Criterion, criterion_group, criterion_main};

// The binary's allocator, so these figures match `driftless` (see src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHANGED: usize = 7;

fn snapshot(n_apps: usize, generation: u32) -> Snapshot {
    let options = loadgen::Options {
        generation,
        changed: vec![CHANGED],
        ..loadgen::Options::default()
    };
    Snapshot {
        commit: None,
        files: loadgen::generate(n_apps, &options)
            .into_iter()
            .map(|file| SourceFile {
                path: file.path.to_string_lossy().into_owned(),
                contents: file.contents,
            })
            .collect(),
    }
}

fn bench_incremental(c: &mut Criterion) {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    let mut group = c.benchmark_group("analyze_incremental");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for n_apps in [100, 1_000, 10_000] {
        // Two revisions that differ in app 7 only; alternating between them changes one app
        // per analysis.
        let revisions = [snapshot(n_apps, 1), snapshot(n_apps, 2)];
        let mut cache = AnalysisCache::new();
        analyze_snapshot_shared(&revisions[0], &definitions, &options, &mut cache);
        let mut next = 1;
        group.bench_function(format!("1_changed_of_{n_apps}"), |b| {
            b.iter(|| {
                let output =
                    analyze_snapshot_shared(&revisions[next], &definitions, &options, &mut cache);
                assert_eq!(cache.last_run().analyzed, 1);
                assert_eq!(output.0.apps.len(), n_apps);
                next = 1 - next;
                output
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_incremental);
criterion_main!(benches);
