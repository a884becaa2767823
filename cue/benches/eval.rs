//! Evaluates KubeVela's `webservice` component template (read in place from
//! `../shared/kubevela/`) with a typical parameter and context, then exports it to JSON: the
//! unit of work the renderer repeats per component (DESIGN.md §4 budget).

use criterion::{Criterion, criterion_group, criterion_main};

fn template_file(source: &str) -> cue::ast::File {
    let parsed = cue::parse_file(cue::FileId(0), source);
    let file = parsed.file;
    let decls = file
        .decls
        .iter()
        .find_map(|decl| match decl {
            cue::ast::Decl::Field(field) => match (&field.label, &field.value) {
                (cue::ast::Label::Ident(ident), cue::ast::Expr::Struct(lit))
                    if ident.name == "template" =>
                {
                    Some(lit.decls.clone())
                }
                _ => None,
            },
            _ => None,
        })
        .expect("webservice.cue has a template");
    cue::ast::File {
        package: None,
        imports: file.imports.clone(),
        decls,
        span: file.span,
        compile_checks: cue::ast::CompileChecks::default(),
    }
}

fn bench(c: &mut Criterion) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/kubevela/vela-templates/definitions/internal/component/webservice.cue"
    );
    let source = std::fs::read_to_string(path).expect("webservice.cue readable");
    let file = template_file(&source);
    let parameter = serde_json::json!({
        "image": "nginx:1.25",
        "ports": [{"port": 80, "expose": true}],
        "cpu": "500m",
        "memory": "256Mi",
        "env": [{"name": "MODE", "value": "prod"}],
        "labels": {"team": "payments"}
    });
    let context = serde_json::json!({
        "name": "web", "namespace": "default", "appName": "shop", "appRevision": "",
        "appRevisionNum": 0, "revision": "", "components": [], "appLabels": {},
        "appAnnotations": {}, "workflowName": "", "publishVersion": "", "replicaKey": "",
        "cluster": "", "clusterVersion": {"major": "", "gitVersion": "", "platform": "", "minor": 0}
    });
    let evaluator = cue::Evaluator::new();
    let span = cue::Span::default();
    c.bench_function("webservice_template", |b| {
        b.iter(|| {
            let value = evaluator.evaluate(
                &[&file],
                &[
                    cue::Injection {
                        field: "parameter",
                        value: &parameter,
                        span,
                    },
                    cue::Injection {
                        field: "context",
                        value: &context,
                        span,
                    },
                ],
            );
            let output = value.lookup(&["output"]).expect("output");
            output.to_json().expect("concrete output")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
