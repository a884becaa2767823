//! Parses real-world CUE: every KubeVela built-in definition (must parse without errors) and
//! every `.cue` file inside CUE's own txtar test suite (must not panic). The reference `cue` CLI
//! v0.14.1 parses every one of those (`cue fmt` accepts all 729), so each file we reject must be
//! a known, explained difference listed in `cases/parse/cue_testdata_known_differences.txt`.

mod support;

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

use cue::{FileId, LineIndex, parse_file};
use support::{files_with_suffix, parse_txtar, shared_dir};

/// Renders the first error of a parse as `line:column: message`.
fn first_error(source: &str, errors: &[cue::Error]) -> Option<String> {
    let error = errors.first()?;
    let at = LineIndex::new(source).line_col(error.span().map_or(0, |span| span.start));
    Some(format!("{}:{}: {}", at.line, at.column, error.message))
}

#[test]
fn kubevela_definitions_parse_without_errors() {
    let root = shared_dir().join("kubevela/vela-templates/definitions");
    let mut n_files = 0;
    let mut failures = Vec::new();
    for folder in ["internal", "deprecated", "registry"] {
        let dir = root.join(folder);
        assert!(
            dir.is_dir(),
            "missing KubeVela definitions folder {}",
            dir.display()
        );
        for path in files_with_suffix(&dir, ".cue") {
            let source = std::fs::read_to_string(&path).expect("definition is UTF-8");
            let parsed = parse_file(FileId(0), &source);
            n_files += 1;
            if let Some(error) = first_error(&source, &parsed.errors) {
                failures.push(format!("{}:{error}", path.display()));
            }
        }
    }
    assert!(
        n_files > 50,
        "expected the KubeVela definitions, found {n_files} files"
    );
    assert!(
        failures.is_empty(),
        "{} of {n_files} definitions failed to parse:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn cue_testdata_parses_without_panics_and_agrees_with_cue_on_validity() {
    let root = shared_dir().join("cue");
    // Lines are `archive:section  # reason`.
    let expected_rejected: BTreeSet<String> =
        include_str!("cases/parse/cue_testdata_known_differences.txt")
            .lines()
            .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
            .map(|line| line.split('#').next().unwrap_or(line).trim().to_owned())
            .collect();
    let mut n_sections = 0;
    let mut panics = Vec::new();
    let mut rejected = BTreeSet::new();
    let mut details = Vec::new();
    for archive in files_with_suffix(&root, ".txtar") {
        let text = std::fs::read_to_string(&archive).expect("archive is UTF-8");
        let relative = archive
            .strip_prefix(&root)
            .expect("archive under root")
            .display()
            .to_string();
        for file in parse_txtar(&text) {
            if !file.name.ends_with(".cue") {
                continue;
            }
            n_sections += 1;
            let key = format!("{relative}:{}", file.name);
            match catch_unwind(AssertUnwindSafe(|| parse_file(FileId(0), &file.content))) {
                Ok(parsed) => {
                    if let Some(error) = first_error(&file.content, &parsed.errors) {
                        details.push(format!("{key}: {error}"));
                        rejected.insert(key);
                    }
                }
                Err(_) => panics.push(key),
            }
        }
    }
    assert!(
        n_sections > 500,
        "expected CUE's test suite, found {n_sections} .cue sections"
    );
    assert!(
        panics.is_empty(),
        "the parser panicked on:\n{}",
        panics.join("\n")
    );
    let wrongly_rejected: Vec<&String> = rejected.difference(&expected_rejected).collect();
    let wrongly_accepted: Vec<&String> = expected_rejected.difference(&rejected).collect();
    eprintln!(
        "{n_sections} .cue sections; we reject {}, of which {} are known differences",
        rejected.len(),
        expected_rejected.len()
    );
    for detail in &details {
        eprintln!("  {detail}");
    }
    assert!(
        wrongly_rejected.is_empty() && wrongly_accepted.is_empty(),
        "disagreement with the cue CLI on syntax validity:\nwe reject, cue accepts:\n{}\nlisted as known differences but now accepted (remove them):\n{}",
        wrongly_rejected
            .iter()
            .map(|key| key.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        wrongly_accepted
            .iter()
            .map(|key| key.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
