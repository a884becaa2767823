//! Analysis throughput: the whole analysis (load, render, every rule, OpenAPI
//! validation) of 10,000 apps rendering 50,000 objects, the issue's budget of 2 s; OpenAPI
//! validation of those 50,000 objects alone; and, on 1,000 of the apps, the whole analysis
//! next to the render alone, so the share of the checks is the difference.
//!
//! The 10,000 apps are rendered once, outside the measurement: rendering has its own bench
//! (`render.rs`) and owner. Run with `cargo bench -p analyzer --bench analyze`; figures go to
//! BENCHMARKS.md.

// Bench code: a failed unwrap is a failed bench.
#![allow(clippy::unwrap_used)]

use analyzer::{AnalysisOptions, Definitions, RenderOptions, Snapshot, SourceFile};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

// The binary's allocator (src/main.rs), so these figures match `driftless analyze`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One app rendering five objects: a webservice's Deployment and Service, the gateway
/// trait's Ingress, and a ConfigMap and a Secret from a `k8s-objects` component, the shapes of
/// KubeVela's load-test templates (`hack/load-test/app-templates/`) plus what platform repos add.
fn app(index: usize) -> SourceFile {
    let shard = index % 10;
    let contents = format!(
        r#"apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: app-{index}
  namespace: team-{shard}
spec:
  components:
    - name: web-{index}
      type: webservice
      properties:
        image: registry.example.com/shop/web:1.{shard}.0
        ports:
          - port: 8080
            expose: true
        env:
          - name: APP_ID
            value: "{index}"
        cpu: "250m"
        memory: "256Mi"
      traits:
        - type: scaler
          properties:
            replicas: {replicas}
        - type: gateway
          properties:
            domain: app-{index}.example.com
            http:
              "/": 8080
        - type: labels
          properties:
            tier: frontend
    - name: config-{index}
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata: {{name: app-{index}-config}}
            data: {{LOG_LEVEL: info, SHARD: "{shard}"}}
          - apiVersion: v1
            kind: Secret
            metadata: {{name: app-{index}-token}}
            type: Opaque
            stringData: {{token: "t-{index}"}}
"#,
        replicas = 1 + index % 3
    );
    SourceFile {
        path: format!("apps/team-{shard}/app-{index}.yaml"),
        contents,
    }
}

fn snapshot(n_apps: usize) -> Snapshot {
    Snapshot {
        commit: None,
        files: (0..n_apps).map(app).collect(),
    }
}

fn bench(c: &mut Criterion) {
    let builtins = Definitions::builtin();
    let options = AnalysisOptions::default();
    let render_options = RenderOptions {
        cluster_version: options.render.cluster_version.clone(),
        ..RenderOptions::default()
    };
    let (rendered, _) = analyzer::render_snapshot(&snapshot(10_000), &builtins, &render_options);
    let objects: Vec<serde_json::Value> = rendered
        .apps
        .iter()
        .flat_map(|app| app.objects.iter().map(|object| object.object.clone()))
        .collect();
    eprintln!("schema bench: {} objects from 10,000 apps", objects.len());
    // The bench measures valid objects: a violation in generated apps would be a bug in the
    // generator or the templates.
    assert_eq!(analyzer::schema::count_violations(&objects), 0);

    let mut group = c.benchmark_group("analyze");
    group.sample_size(10);
    group.throughput(Throughput::Elements(objects.len() as u64));
    group.bench_function("schema_validation_10000_apps", |b| {
        b.iter(|| analyzer::schema::count_violations(&objects))
    });
    // The issue's figure: 10,000 apps, ~50,000 rendered objects, with schema validation.
    let large = snapshot(10_000);
    let (analyzed, _) = analyzer::analyze_snapshot(&large, &builtins, &options);
    assert!(analyzed.apps.iter().all(|app| !app.is_blocked()));
    drop(analyzed);
    group.measurement_time(std::time::Duration::from_secs(60));
    group.bench_function("analyze_10000_apps", |b| {
        b.iter(|| analyzer::analyze_snapshot(&large, &builtins, &options))
    });
    group.measurement_time(std::time::Duration::from_secs(5));
    let small = snapshot(1_000);
    // Every generated app must analyze without an error, or the bench would time error paths.
    let (analyzed, _) = analyzer::analyze_snapshot(&small, &builtins, &options);
    assert!(analyzed.apps.iter().all(|app| !app.is_blocked()));
    group.throughput(Throughput::Elements(1_000));
    group.bench_function("analyze_1000_apps", |b| {
        b.iter(|| analyzer::analyze_snapshot(&small, &builtins, &options))
    });
    // The same apps rendered only (load + render): analyze minus this is the rules' share.
    group.bench_function("render_1000_apps", |b| {
        b.iter(|| analyzer::render_snapshot(&small, &builtins, &render_options))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
