//! Conformance with KubeVela: example Applications from `shared/kubevela/` rendered with
//! KubeVela's *own* definitions, read in place from
//! `vela-templates/definitions/internal/` (never copied), and checked against golden outputs.
//!
//! The shared folder is required: these tests fail, not skip, when it is missing. Override its
//! location with `KUBEVELA=/path/to/kubevela`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use analyzer::{Definitions, RenderOptions, RenderOutput, Snapshot, SourceFile, SourceMap};
use serde_json::{Value, json};

fn kubevela_root() -> PathBuf {
    let root = std::env::var_os("KUBEVELA").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/kubevela"),
        PathBuf::from,
    );
    assert!(
        root.join("vela-templates/definitions/internal").is_dir(),
        "KubeVela reference folder not found at {} (set KUBEVELA)",
        root.display()
    );
    root
}

/// A file of the KubeVela folder. The Helm chart's definitions carry a template expression
/// for their namespace; upstream tests substitute `vela-system`, and so does this.
fn read(relative: &str) -> String {
    let path = kubevela_root().join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .replace(
            "{{ include \"systemDefinitionNamespace\" . }}",
            "vela-system",
        )
}

/// KubeVela's internal component, trait and policy definitions as snapshot files.
fn internal_definitions() -> Vec<SourceFile> {
    let mut files = Vec::new();
    for class in ["component", "trait", "policy"] {
        let dir = kubevela_root()
            .join("vela-templates/definitions/internal")
            .join(class);
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "cue"))
            .collect();
        names.sort();
        for path in names {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            files.push(SourceFile {
                path: format!("definitions/{class}/{name}"),
                contents: std::fs::read_to_string(&path).unwrap(),
            });
        }
    }
    files
}

/// Renders `apps` with only the given definition files (KubeVela's YAML CRs).
fn render_with_only(
    apps: &[&str],
    definitions: &[&str],
    options: &RenderOptions,
) -> (RenderOutput, SourceMap) {
    render_files(Vec::new(), apps, definitions, "definitions", options)
}

/// Renders `apps` (paths relative to the KubeVela folder) plus `extra` definition files with
/// KubeVela's definitions only (no Driftless built-ins).
fn render(
    apps: &[&str],
    extra_definitions: &[&str],
    options: &RenderOptions,
) -> (RenderOutput, SourceMap) {
    let files = internal_definitions();
    render_files(files, apps, extra_definitions, "definitions/extra", options)
}

/// Renders `files` plus `apps` (under `apps/`) and `definitions` (under `definition_dir`), with
/// no Driftless built-ins.
fn render_files(
    mut files: Vec<SourceFile>,
    apps: &[&str],
    definitions: &[&str],
    definition_dir: &str,
    options: &RenderOptions,
) -> (RenderOutput, SourceMap) {
    let file_name = |path: &str| {
        Path::new(path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    for (index, app) in apps.iter().enumerate() {
        files.push(SourceFile {
            path: format!("apps/{index}-{}", file_name(app)),
            contents: read(app),
        });
    }
    for definition in definitions {
        files.push(SourceFile {
            path: format!("{definition_dir}/{}", file_name(definition)),
            contents: read(definition),
        });
    }
    let snapshot = Snapshot {
        commit: None,
        files,
    };
    analyzer::render_snapshot(&snapshot, &Definitions::empty(), options)
}

fn objects(output: &RenderOutput) -> Vec<Value> {
    output
        .apps
        .iter()
        .flat_map(|app| app.objects.iter().map(|object| object.object.clone()))
        .collect()
}

fn assert_clean(output: &RenderOutput, sources: &SourceMap) {
    let text = common::diagnostics_text(output, sources);
    assert!(text.is_empty(), "unexpected diagnostics:\n{text}");
}

/// `expected` is contained in `actual`: every field of `expected` is present and equal; extra
/// fields in `actual` are allowed (for goldens from older vela versions with fewer labels).
fn assert_contains(actual: &Value, expected: &Value, path: &str) {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => {
            for (key, value) in expected {
                let child = format!("{path}.{key}");
                let Some(actual_value) = actual.get(key) else {
                    panic!("{child}: missing, expected {value}");
                };
                assert_contains(actual_value, value, &child);
            }
        }
        (Value::Array(actual), Value::Array(expected)) => {
            assert_eq!(actual.len(), expected.len(), "{path}: list lengths");
            for (index, (a, e)) in actual.iter().zip(expected).enumerate() {
                assert_contains(a, e, &format!("{path}[{index}]"));
            }
        }
        _ => assert_eq!(actual, expected, "{path}"),
    }
}

/// Prints a render like `vela dry-run` (kubevela-render-semantics.md §4.3): headers per
/// component and auxiliary, keys sorted.
fn vela_print(output: &RenderOutput) -> String {
    let mut out = String::new();
    for app in &output.apps {
        let mut current: Option<&str> = None;
        for object in &app.objects {
            if current != Some(object.component.as_str()) {
                if current.is_some() {
                    out.push('\n');
                }
                out.push_str(&format!(
                    "---\n# Application({}) -- Component({})\n---\n\n",
                    app.app.name, object.component
                ));
                current = Some(&object.component);
            }
            match object.trait_type.as_deref() {
                None => {}
                Some("AuxiliaryWorkload") => out.push_str("## From the auxiliary workload\n"),
                Some(trait_type) => out.push_str(&format!("## From the trait {trait_type}\n")),
            }
            out.push_str(&serde_saphyr::to_string(&sorted(&object.object)).unwrap());
            out.push_str("\n---\n");
        }
        if current.is_some() {
            out.push('\n');
        }
    }
    out
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&object[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn assert_substrings(printed: &str, expected: &[&str], not_expected: &[&str]) {
    for substring in expected {
        assert!(
            printed.contains(substring),
            "missing {substring:?} in:\n{printed}"
        );
    }
    for substring in not_expected {
        assert!(
            !printed.contains(substring),
            "unexpected {substring:?} in:\n{printed}"
        );
    }
}

// --- FIXTURES.yaml: full goldens -------------------------------------------------------------

#[test]
fn fixture_dryrun_exp_comp_full_golden() {
    // FIXTURES: pkg/appfile/dryrun/testdata/dryrun-app.yaml → dryrun-exp-comp.yaml
    let (output, sources) = render_with_only(
        &["pkg/appfile/dryrun/testdata/dryrun-app.yaml"],
        &[
            "pkg/appfile/dryrun/testdata/cd-myworker.yaml",
            "pkg/appfile/dryrun/testdata/td-myingress.yaml",
        ],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    let expected: Value =
        serde_saphyr::from_str(&read("pkg/appfile/dryrun/testdata/dryrun-exp-comp.yaml")).unwrap();
    let app = &output.apps[0];
    assert_eq!(app.objects[0].object, expected["ComponentOutput"]);
    let auxiliaries: Vec<Value> = app.objects[1..].iter().map(|o| o.object.clone()).collect();
    assert_eq!(
        Value::Array(auxiliaries),
        expected["ComponentOutputsAndTraits"]
    );
    assert_eq!(
        app.objects
            .iter()
            .map(|o| (o.trait_type.clone(), o.output_name.clone()))
            .collect::<Vec<_>>(),
        vec![
            (None, None),
            (Some("myingress".to_owned()), Some("service".to_owned())),
            (Some("myingress".to_owned()), Some("ingress".to_owned())),
        ]
    );
}

#[test]
fn fixture_docs_dry_run_example_old_golden() {
    // FIXTURES: docs/examples/dry-run/app.yaml → _extracted/docs/examples/dry-run/expected-output.yaml.
    // FIXME(#4): `myworker` imports KubeVela's generated Kubernetes schema package
    // `kube/apps/v1`, which the evaluator does not provide; today the app is blocked with an
    // "unsupported" error at the import. The trait-only part of the golden is checked below.
    let (output, sources) = render_with_only(
        &["docs/examples/dry-run/app.yaml"],
        &[
            "docs/examples/dry-run/definitions/myworker.yaml",
            "docs/examples/dry-run/definitions/myingress.yaml",
        ],
        &RenderOptions::default(),
    );
    let diagnostics = common::diagnostics_text(&output, &sources);
    assert!(
        diagnostics.starts_with(
            "error[cue-error] definitions/myworker.yaml:16:17: component `myweb`: output: unsupported: import \"kube/apps/v1\""
        ),
        "{diagnostics}"
    );
    assert!(output.apps[0].objects.is_empty());
    // The same app with the dryrun-testdata worker (no schema import) matches the golden: every
    // field of the old golden is present and equal; newer labels are extra.
    let (output, sources) = render_with_only(
        &["docs/examples/dry-run/app.yaml"],
        &[
            "pkg/appfile/dryrun/testdata/cd-myworker.yaml",
            "pkg/appfile/dryrun/testdata/td-myingress.yaml",
        ],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    let expected: Vec<Value> = serde_saphyr::from_str_multiple(&read(
        "_extracted/docs/examples/dry-run/expected-output.yaml",
    ))
    .unwrap();
    let actual = objects(&output);
    assert_eq!(actual.len(), expected.len());
    for (index, (actual, expected)) in actual.iter().zip(&expected).enumerate() {
        assert_contains(actual, expected, &format!("object[{index}]"));
    }
}

#[test]
fn fixture_app_namespace_is_kept() {
    // FIXTURES: dryrun-app-with-ns.yaml: comps[0].ComponentOutput.metadata.namespace == custom-ns
    let (output, sources) = render_with_only(
        &["pkg/appfile/dryrun/testdata/dryrun-app-with-ns.yaml"],
        &["pkg/appfile/dryrun/testdata/cd-myworker.yaml"],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    assert_eq!(
        output.apps[0].objects[0].object["metadata"]["namespace"],
        json!("custom-ns")
    );
}

// --- FIXTURES.yaml: asserted substrings --------------------------------------------------------

const WEBSERVICE_CR: &str = "charts/vela-core/templates/defwithtemplate/webservice.yaml";
const SCALER_CR: &str = "charts/vela-core/templates/defwithtemplate/scaler.yaml";

#[test]
fn fixture_dry_run_without_deploy_workflow() {
    let (output, sources) = render_with_only(
        &["pkg/appfile/dryrun/testdata/testing-dry-run-3.yaml"],
        &[WEBSERVICE_CR],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    assert_substrings(
        &vela_print(&output),
        &[
            "# Application(testing-app)",
            "name: testing-dryrun",
            "kind: Deployment",
        ],
        &[],
    );
}

#[test]
fn fixture_dry_run_with_trait() {
    let (output, sources) = render_with_only(
        &["pkg/appfile/dryrun/testdata/testing-dry-run-5.yaml"],
        &[
            WEBSERVICE_CR,
            "charts/vela-core/templates/defwithtemplate/nocalhost.yaml",
        ],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    assert_substrings(
        &vela_print(&output),
        &[
            "# Application(testing-app) -- Component(testing-dryrun)",
            "## From the trait nocalhost",
            "trait.oam.dev/type: nocalhost",
        ],
        &[],
    );
}

#[test]
fn fixture_cli_dry_run_and_namespaces() {
    let app = "references/cli/test-data/dry-run/testing-dry-run-1.yaml";
    let (output, sources) = render_with_only(
        &[app],
        &[WEBSERVICE_CR, SCALER_CR],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    assert_substrings(
        &vela_print(&output),
        &[
            "name: testing-dryrun",
            "kind: Deployment",
            "replicas: 1",
            "namespace: default",
        ],
        &[],
    );
    let options = RenderOptions {
        forced_namespace: Some("test-namespace".to_owned()),
        ..RenderOptions::default()
    };
    let (output, sources) = render_with_only(&[app], &[WEBSERVICE_CR, SCALER_CR], &options);
    assert_clean(&output, &sources);
    assert_substrings(&vela_print(&output), &["namespace: test-namespace"], &[]);
}

#[test]
fn fixture_cli_offline_with_definition_file() {
    let (output, sources) = render_with_only(
        &["references/cli/test-data/dry-run/testing-dry-run-6.yaml"],
        &["references/cli/test-data/dry-run/definitions/testing-worker-def.yaml"],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    assert_substrings(
        &vela_print(&output),
        &[
            "# Application(testing-app)",
            "name: testing-dryrun",
            "kind: Deployment",
            "workload.oam.dev/type: myworker",
        ],
        &[],
    );
}

#[test]
fn fixture_cli_forced_namespace_overrides_the_manifest() {
    let options = RenderOptions {
        forced_namespace: Some("forced-ns".to_owned()),
        ..RenderOptions::default()
    };
    let (output, sources) = render_with_only(
        &["references/cli/test-data/dry-run/testing-dry-run-override.yaml"],
        &[WEBSERVICE_CR],
        &options,
    );
    assert_clean(&output, &sources);
    assert_substrings(
        &vela_print(&output),
        &["namespace: forced-ns"],
        &["namespace: original-ns"],
    );
}

// --- def-doc and usage examples with KubeVela's internal .cue definitions ------------------------
// Goldens in tests/kubevela/: our render, reviewed against KubeVela's semantics (the
// labels of §3, the worked example of §8) and re-blessed with UPDATE_EXPECT=1.

fn check_example(app: &str, golden: &str) {
    let (output, sources) = render(&[app], &[], &RenderOptions::default());
    assert_clean(&output, &sources);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kubevela")
        .join(golden);
    expect_test::expect_file![golden].assert_eq(&vela_print(&output));
}

#[test]
fn example_worker() {
    check_example(
        "_extracted/references/docgen/def-doc/component/worker.eg.yaml",
        "worker.yaml",
    );
}

#[test]
fn example_webservice_with_expose() {
    check_example(
        "_extracted/references/docgen/def-doc/trait/expose.eg.yaml",
        "expose.yaml",
    );
}

#[test]
fn example_webservice_with_labels_and_annotations() {
    check_example(
        "_extracted/references/docgen/def-doc/trait/annotations.eg.yaml",
        "annotations.yaml",
    );
}

#[test]
fn example_worker_with_labels() {
    check_example(
        "vela-templates/definitions/usage-examples/application-with-labels.yaml",
        "labels.yaml",
    );
}

#[test]
fn example_webservice_with_scaler() {
    check_example(
        "references/cli/test-data/dry-run/testing-dry-run-1.yaml",
        "scaler.yaml",
    );
}

#[test]
fn example_webservice_with_sidecar_and_env() {
    // Both documents of env.eg.yaml are apps named `busybox`; render them one at a time.
    let text = read("_extracted/references/docgen/def-doc/trait/env.eg.yaml");
    for (index, document) in text.split("\n---\n").enumerate() {
        let mut files = internal_definitions();
        files.push(SourceFile {
            path: "apps/env.yaml".to_owned(),
            contents: document.to_owned(),
        });
        let (output, sources) = analyzer::render_snapshot(
            &Snapshot {
                commit: None,
                files,
            },
            &Definitions::empty(),
            &RenderOptions::default(),
        );
        assert_clean(&output, &sources);
        let golden =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/kubevela/env-{index}.yaml"));
        expect_test::expect_file![golden].assert_eq(&vela_print(&output));
    }
}

/// Every component and trait example of KubeVela's reference docs, rendered one Application at
/// a time with KubeVela's internal definitions. The status of each (objects rendered, or the
/// first diagnostic) is pinned in `tests/kubevela/def-doc-status.txt`, so a regression or an
/// improvement shows up as a reviewed diff. Examples whose definitions are not part of
/// `internal/` (cloud resources, addons) report `unknown-*-type`, which is expected.
#[test]
fn def_doc_examples_status() {
    let root = kubevela_root().join("_extracted/references/docgen/def-doc");
    let mut lines = Vec::new();
    for class in ["component", "trait"] {
        let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join(class))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        examples.sort();
        for example in examples {
            let name = format!("{class}/{}", example.file_name().unwrap().to_string_lossy());
            let text = std::fs::read_to_string(&example).unwrap();
            for (index, document) in text.split("\n---\n").enumerate() {
                let mut files = internal_definitions();
                files.push(SourceFile {
                    path: "apps/example.yaml".to_owned(),
                    contents: document.to_owned(),
                });
                let snapshot = Snapshot {
                    commit: None,
                    files,
                };
                let (output, sources) = analyzer::render_snapshot(
                    &snapshot,
                    &Definitions::empty(),
                    &RenderOptions::default(),
                );
                let diagnostics = common::diagnostics_text(&output, &sources);
                let first_error = diagnostics.lines().find(|line| line.starts_with("error"));
                let status = match first_error {
                    Some(error) => error.to_owned(),
                    None => {
                        let kinds: Vec<String> = objects(&output)
                            .iter()
                            .map(|object| object["kind"].as_str().unwrap_or("?").to_owned())
                            .collect();
                        format!("ok: {}", kinds.join(", "))
                    }
                };
                lines.push(format!("{name}#{index}: {status}"));
            }
        }
    }
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubevela/def-doc-status.txt");
    expect_test::expect_file![golden].assert_eq(&(lines.join("\n") + "\n"));
}

#[test]
fn fixture_dry_run_with_override_policy_per_topology() {
    // FIXTURES: testing-dry-run-1.yaml: one deploy step per topology, the prod one with an
    // override (replicas 3). Upstream prints one block per topology.
    // FIXME(#4): the render output has no per-placement objects yet, so the app is blocked with
    // `unsupported-policy` instead of rendering both placements.
    let (output, sources) = render_with_only(
        &["pkg/appfile/dryrun/testdata/testing-dry-run-1.yaml"],
        &[
            WEBSERVICE_CR,
            SCALER_CR,
            "pkg/appfile/dryrun/testdata/wd-deploy.yaml",
        ],
        &RenderOptions::default(),
    );
    let diagnostics = common::diagnostics_text(&output, &sources);
    assert!(
        diagnostics.starts_with("error[unsupported-policy] "),
        "{diagnostics}"
    );
    assert!(output.apps[0].objects.is_empty());
}

#[test]
fn example_task() {
    // Upstream's task.eg.md indents two lines with a tab (4 columns in the docs); YAML forbids
    // tabs, so they are expanded here (the status golden records the raw file's YAML error).
    let text =
        read("_extracted/references/docgen/def-doc/component/task.eg.yaml").replace('\t', "    ");
    let mut files = internal_definitions();
    files.push(SourceFile {
        path: "apps/task.yaml".to_owned(),
        contents: text,
    });
    let (output, sources) = analyzer::render_snapshot(
        &Snapshot {
            commit: None,
            files,
        },
        &Definitions::empty(),
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubevela/task.yaml");
    expect_test::expect_file![golden].assert_eq(&vela_print(&output));
}

#[test]
fn fixture_dry_run_with_custom_policy() {
    let (output, sources) = render_with_only(
        &["pkg/appfile/dryrun/testdata/testing-dry-run-4.yaml"],
        &[
            WEBSERVICE_CR,
            "pkg/appfile/dryrun/testdata/pd-mypolicy.yaml",
        ],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    let app = &output.apps[0];
    let policy_object = app.objects.last().unwrap();
    assert_eq!(policy_object.trait_type.as_deref(), Some("Policy"));
    assert_eq!(policy_object.component, "mypolicy");
    assert_eq!(
        policy_object.object,
        json!({
            "apiVersion": "testing/v1",
            "kind": "Policy",
            "policy": {"name": "my-policy"},
            "metadata": {
                "labels": {
                    "app.oam.dev/name": "testing-app",
                    "app.oam.dev/component": "mypolicy",
                    "app.oam.dev/appRevision": ""
                },
                "name": "mypolicy",
                "namespace": "default"
            }
        })
    );
    assert_substrings(
        &vela_print(&output),
        &[
            "# Application(testing-app) -- Component(testing-dryrun)",
            "name: my-policy",
        ],
        &[],
    );
}

#[test]
fn fixture_dry_run_with_workflow_ref() {
    // FIXTURES: references/cli testing-dry-run-4.yaml: `workflow.ref` names the standalone
    // Workflow `testing-wf`, whose deploy step names the standalone topology Policy.
    let (output, sources) = render_with_only(
        &[
            "references/cli/test-data/dry-run/testing-dry-run-4.yaml",
            "references/cli/test-data/dry-run/testing-policy.yaml",
            "references/cli/test-data/dry-run/testing-wf.yaml",
        ],
        &[
            WEBSERVICE_CR,
            "charts/vela-core/templates/defwithtemplate/deploy.yaml",
        ],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    assert_substrings(
        &vela_print(&output),
        &["name: testing-dryrun", "kind: Deployment"],
        &[],
    );
    // Without the Workflow object the reference is an error at `workflow.ref`.
    let (output, sources) = render_with_only(
        &["references/cli/test-data/dry-run/testing-dry-run-4.yaml"],
        &[WEBSERVICE_CR],
        &RenderOptions::default(),
    );
    assert_eq!(
        common::diagnostics_text(&output, &sources),
        "error[unknown-workflow] apps/0-testing-dry-run-4.yaml:12:10: workflow `testing-wf` not found in namespace `default` [app default/testing-app]\n"
    );
}

#[test]
fn fixture_cli_standalone_policy_and_workflow_not_referenced() {
    // FIXTURES: references/cli testing-dry-run-5.yaml with the standalone Policy and Workflow
    // files next to it: the app does not reference them, so they change nothing (vela prints
    // "not referenced" warnings; `--merge` is a CLI option Driftless does not have).
    let (output, sources) = render_with_only(
        &[
            "references/cli/test-data/dry-run/testing-dry-run-5.yaml",
            "references/cli/test-data/dry-run/testing-policy.yaml",
            "references/cli/test-data/dry-run/testing-wf.yaml",
        ],
        &[WEBSERVICE_CR],
        &RenderOptions::default(),
    );
    assert_clean(&output, &sources);
    assert_substrings(
        &vela_print(&output),
        &["name: testing-dryrun", "kind: Deployment"],
        &[],
    );
}

#[test]
fn fixture_cli_dry_run_with_workflow_per_topology() {
    // FIXTURES: references/cli testing-dry-run-3.yaml, like the pkg fixture: two local
    // topologies with different overrides.
    // FIXME(#4): no per-placement output yet, so the app is blocked with `unsupported-policy`.
    let (output, sources) = render_with_only(
        &["references/cli/test-data/dry-run/testing-dry-run-3.yaml"],
        &[
            WEBSERVICE_CR,
            SCALER_CR,
            "charts/vela-core/templates/defwithtemplate/deploy.yaml",
        ],
        &RenderOptions::default(),
    );
    let diagnostics = common::diagnostics_text(&output, &sources);
    assert!(
        diagnostics.starts_with("error[unsupported-policy] "),
        "{diagnostics}"
    );
}
