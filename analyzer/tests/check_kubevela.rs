//! The analysis on KubeVela's own examples (`shared/kubevela/`, read in place): every
//! component and trait example of the reference docs, analyzed one Application at a time with
//! KubeVela's internal definitions. Errors from the *analysis* rules on these valid apps would
//! be false errors; the ones that remain are pinned, with reasons, in
//! `tests/kubevela/check-errors.txt` (render errors are pinned by `kubevela.rs`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use analyzer::{AnalysisOptions, Definitions, Snapshot, SourceFile};

/// The rules of `analyzer/src/check/` (not the load and render rules).
const CHECK_RULES: &[&str] = &[
    "dependency-cycle",
    "duplicate-object",
    "invalid-name",
    "removed-api-version",
    "trait-conflict",
    "unknown-cluster",
    "unknown-dependency",
    "unknown-workflow-step-type",
];

fn kubevela_root() -> PathBuf {
    let root = std::env::var_os("KUBEVELA").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/kubevela"),
        PathBuf::from,
    );
    assert!(
        root.is_dir(),
        "KubeVela folder not found at {}",
        root.display()
    );
    root
}

fn internal_definitions() -> Vec<SourceFile> {
    let mut files = Vec::new();
    for class in ["component", "trait", "policy", "workflowstep"] {
        let dir = kubevela_root()
            .join("vela-templates/definitions/internal")
            .join(class);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "cue"))
            .collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            files.push(SourceFile {
                path: format!("definitions/{class}/{name}"),
                contents: std::fs::read_to_string(&path).unwrap(),
            });
        }
    }
    files
}

#[test]
fn def_doc_examples_have_no_false_analysis_errors() {
    let root = kubevela_root().join("_extracted/references/docgen/def-doc");
    let definitions = internal_definitions();
    let mut lines = Vec::new();
    for class in ["component", "trait", "policy", "workflowstep"] {
        let Ok(entries) = std::fs::read_dir(root.join(class)) else {
            continue;
        };
        let mut examples: Vec<PathBuf> = entries.map(|entry| entry.unwrap().path()).collect();
        examples.sort();
        for example in examples {
            let name = format!("{class}/{}", example.file_name().unwrap().to_string_lossy());
            let text = std::fs::read_to_string(&example).unwrap();
            for (index, document) in text.split("\n---\n").enumerate() {
                let mut files = definitions.clone();
                files.push(SourceFile {
                    path: "apps/example.yaml".to_owned(),
                    contents: document.to_owned(),
                });
                let snapshot = Snapshot {
                    commit: None,
                    files,
                };
                let (output, sources) = analyzer::analyze_snapshot(
                    &snapshot,
                    &Definitions::empty(),
                    &AnalysisOptions::default(),
                );
                for line in common::diagnostics_text(&output, &sources).lines() {
                    let is_check_error = CHECK_RULES
                        .iter()
                        .any(|rule| line.starts_with(&format!("error[{rule}]")));
                    if is_check_error {
                        lines.push(format!("{name}#{index}: {line}"));
                    }
                }
            }
        }
    }
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubevela/check-errors.txt");
    expect_test::expect_file![golden].assert_eq(&(lines.join("\n") + "\n"));
}
