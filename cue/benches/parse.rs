//! Parser throughput on KubeVela's built-in definitions (the templates the agent parses). The
//! budget is microseconds per template: each is parsed once per definition revision.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn templates() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/kubevela/vela-templates/definitions/internal");
    let mut found = Vec::new();
    let mut pending = vec![root];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "cue") {
                let text = std::fs::read_to_string(&path).expect("UTF-8 template");
                found.push((path.display().to_string(), text));
            }
        }
    }
    found.sort();
    assert!(
        !found.is_empty(),
        "no KubeVela templates found under shared/"
    );
    found
}

fn parse(criterion: &mut Criterion) {
    let templates = templates();
    let total_bytes: usize = templates.iter().map(|(_, text)| text.len()).sum();
    let mut group = criterion.benchmark_group("parse");
    group.throughput(Throughput::Bytes(total_bytes as u64));
    group.bench_function("kubevela_internal_definitions", |bencher| {
        bencher.iter(|| {
            for (_, text) in &templates {
                black_box(cue::parse_file(cue::FileId(0), black_box(text)));
            }
        });
    });
    // One typical template, to read the per-template cost directly.
    if let Some((_, text)) = templates
        .iter()
        .find(|(name, _)| name.ends_with("webservice.cue"))
    {
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function("webservice", |bencher| {
            bencher.iter(|| black_box(cue::parse_file(cue::FileId(0), black_box(text))));
        });
    }
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
