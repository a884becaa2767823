//! Loading alone (issues #8 and #9): YAML parsed with positions, Applications decoded, the
//! source map built, over 1,000 and 10,000 `loadgen` apps, without rendering. Loading runs on
//! every analysis of every file, so its cost sits under both the render and the incremental
//! analysis figures.
//!
//! ```sh
//! cargo bench -p analyzer --bench load
//! cargo bench -p analyzer --bench load -- 'load/1000_apps'
//! ```
//!
//! For before/after comparisons on the shared machine, count instructions instead of timing:
//! `RAYON_NUM_THREADS=1 valgrind --tool=cachegrind <bench binary> --bench --profile-time 5 load/1000_apps`.

// Bench code: a failed unwrap is a failed bench setup.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use analyzer::{Definitions, Snapshot, SourceFile};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

// The binary's allocator (src/main.rs), so these figures match `driftless`.
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

fn bench_load(c: &mut Criterion) {
    let builtins = Definitions::builtin();
    let mut group = c.benchmark_group("load");
    for n_apps in [1_000usize, 10_000] {
        let input = snapshot(n_apps);
        // Every generated app must load without a problem, or this would time error paths.
        assert_eq!(analyzer::load_only(&input, &builtins), (n_apps, 0));
        group.throughput(Throughput::Elements(n_apps as u64));
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(if n_apps > 1_000 { 30 } else { 10 }));
        group.bench_function(format!("{n_apps}_apps"), |b| {
            b.iter(|| analyzer::load_only(&input, &builtins));
        });
    }
    group.finish();
}

criterion_group!(benches, bench_load);
criterion_main!(benches);
