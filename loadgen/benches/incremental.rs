//! The agent's per-commit analysis at scale: one changed app among 100, 1,000 and 10,000, with
//! the cache warm. `analyze_incremental` is what `driftless agent` runs per commit
//! (`analyzer::analyze_snapshot_shared_with_ids`: each file comes with an id of its text, as
//! the agent's git blob ids; here a hash of the text, computed outside the measurement as git
//! computes blob ids when the commit is made). `analyze_incremental_bytes` is the same without
//! ids (`analyze_snapshot_shared`): each file's text is compared with the cached one. Each
//! iteration changes app 7 to its next generation, so exactly one file is parsed and one app
//! rendered again. Both still visit every file and app (a hash-map lookup per file, a pointer
//! comparison and a reference count per app). `analyze_changes` is told the changed file
//! (`analyzer::analyze_changes`, as the agent's git tree diff tells it) and visits nothing
//! else: its figure should be about the same whatever the number of apps.
//!
//! ```sh
//! cargo bench -p loadgen --bench incremental
//! ```

// Bench code: a failed unwrap is a failed bench setup.
#![allow(clippy::unwrap_used)]

use std::hash::{Hash, Hasher};
use std::time::Duration;

use analyzer::{
    AnalysisCache, AnalysisOptions, BlobId, Definitions, FileChange, Snapshot, SourceFile,
    analyze_changes, analyze_snapshot_shared, analyze_snapshot_shared_with_ids,
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
    let mut files: Vec<SourceFile> = loadgen::generate(n_apps, &options)
        .into_iter()
        .map(|file| SourceFile {
            path: file.path.to_string_lossy().into_owned(),
            contents: file.contents,
        })
        .collect();
    // In path order, as the agent's git snapshots are.
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Snapshot {
        commit: None,
        files,
    }
}

/// An id of each file's text (a 64-bit hash and the length: distinct for the bench's texts,
/// which the `analyzed == 1` assertion would catch otherwise).
fn blob_ids(snapshot: &Snapshot) -> Vec<BlobId> {
    snapshot
        .files
        .iter()
        .map(|file| {
            let mut hasher = std::hash::DefaultHasher::new();
            file.contents.hash(&mut hasher);
            let mut id = [0; 20];
            id[..8].copy_from_slice(&hasher.finish().to_le_bytes());
            id[8..16].copy_from_slice(&(file.contents.len() as u64).to_le_bytes());
            id
        })
        .collect()
}

fn bench_incremental(c: &mut Criterion) {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    for (group_name, with_ids) in [
        ("analyze_incremental", true),
        ("analyze_incremental_bytes", false),
    ] {
        let mut group = c.benchmark_group(group_name);
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(20));
        for n_apps in [100, 1_000, 10_000] {
            // Two revisions that differ in app 7 only; alternating between them changes one
            // app per analysis.
            let revisions = [snapshot(n_apps, 1), snapshot(n_apps, 2)];
            let ids = [blob_ids(&revisions[0]), blob_ids(&revisions[1])];
            let analyze = |next: usize, cache: &mut AnalysisCache| {
                if with_ids {
                    analyze_snapshot_shared_with_ids(
                        &revisions[next],
                        &ids[next],
                        &definitions,
                        &options,
                        cache,
                    )
                } else {
                    analyze_snapshot_shared(&revisions[next], &definitions, &options, cache)
                }
            };
            let mut cache = AnalysisCache::new();
            analyze(0, &mut cache);
            let mut next = 1;
            group.bench_function(format!("1_changed_of_{n_apps}"), |b| {
                b.iter(|| {
                    let output = analyze(next, &mut cache);
                    assert_eq!(cache.last_run().analyzed, 1);
                    assert_eq!(output.0.len(), n_apps);
                    next = 1 - next;
                    output
                });
            });
        }
        group.finish();
    }
}

/// One changed app among N through [`analyze_changes`]: the changed file alone is handed
/// over, as the agent does from its git tree diff.
fn bench_changes(c: &mut Criterion) {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    let mut group = c.benchmark_group("analyze_changes");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for n_apps in [100, 1_000, 10_000] {
        let revisions = [snapshot(n_apps, 1), snapshot(n_apps, 2)];
        let ids = [blob_ids(&revisions[0]), blob_ids(&revisions[1])];
        // Per revision, the change that leads to it from the other: the files that differ.
        let changes: Vec<Vec<FileChange>> = (0..2)
            .map(|next| {
                revisions[next]
                    .files
                    .iter()
                    .zip(&revisions[1 - next].files)
                    .zip(&ids[next])
                    .filter(|((new, old), _)| new.contents != old.contents)
                    .map(|((new, _), id)| FileChange {
                        path: new.path.clone(),
                        contents: Some(new.contents.clone()),
                        blob_id: Some(*id),
                    })
                    .collect()
            })
            .collect();
        assert_eq!(changes[0].len(), 1);
        let mut cache = AnalysisCache::new();
        analyze_snapshot_shared_with_ids(
            &revisions[0],
            &ids[0],
            &definitions,
            &options,
            &mut cache,
        );
        let mut next = 1;
        group.bench_function(format!("1_changed_of_{n_apps}"), |b| {
            b.iter(|| {
                let output = analyze_changes(&changes[next], &definitions, &options, &mut cache)
                    .expect("a one-file edit is patched");
                assert_eq!(cache.last_run().analyzed, 1);
                assert_eq!(output.0.len(), n_apps);
                next = 1 - next;
                output
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_incremental, bench_changes);
criterion_main!(benches);
