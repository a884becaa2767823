//! Render throughput: one app, and 1,000 generated apps, with the built-in definitions.
//!
//! Each app is modelled on KubeVela's load-test templates (`hack/load-test/app-templates/`):
//! a webservice with ports, env and resources, plus the scaler, labels and env traits.
//! Run with `cargo bench -p analyzer --bench render`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use analyzer::{Definitions, RenderOptions, Snapshot, SourceFile, render_snapshot};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

// The allocator the binary uses (src/main.rs): rendering allocates many small, short-lived
// values, and glibc malloc spent ~45 % of the render time in malloc/free.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn app(index: usize) -> SourceFile {
    let shard = index % 10;
    let contents = format!(
        r#"apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: app-{index}
  namespace: load-test-{shard}
  labels:
    team: team-{shard}
spec:
  components:
    - name: app-{index}-web
      type: webservice
      properties:
        image: nginx:1.{shard}
        ports:
          - port: 80
            expose: true
        env:
          - name: APP_ID
            value: "{index}"
        cpu: "100m"
        memory: "128Mi"
      traits:
        - type: scaler
          properties:
            replicas: {replicas}
        - type: labels
          properties:
            tier: frontend
            shard: "{shard}"
        - type: env
          properties:
            env:
              LOG_LEVEL: info
              SHARD: "{shard}"
"#,
        replicas = 1 + index % 3
    );
    SourceFile {
        path: format!("apps/shard-{shard}/app-{index}.yaml"),
        contents,
    }
}

fn snapshot(n_apps: usize) -> Snapshot {
    Snapshot {
        commit: None,
        files: (0..n_apps).map(app).collect(),
    }
}

fn bench_render(c: &mut Criterion) {
    let builtins = Definitions::builtin();
    let options = RenderOptions::default();
    // A broken bench input would measure error paths: check the render once.
    let (output, _) = render_snapshot(&snapshot(3), &builtins, &options);
    for app in &output.apps {
        assert!(
            !app.is_blocked(),
            "bench app does not render: {:?}",
            app.diagnostics
        );
        assert_eq!(app.objects.len(), 2);
    }

    let mut group = c.benchmark_group("render");
    for n_apps in [1usize, 1000] {
        let input = snapshot(n_apps);
        group.throughput(Throughput::Elements(n_apps as u64));
        if n_apps > 1 {
            group.sample_size(10);
        }
        group.bench_function(format!("{n_apps}_apps"), |b| {
            b.iter(|| render_snapshot(&input, &builtins, &options))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_render);
criterion_main!(benches);
