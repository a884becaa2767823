//! Golden analysis cases: each directory under `tests/cases/check/<rule-id>/<case>/` is a tiny
//! repository (`apps/`, `definitions/`, optionally `driftless.yaml`) with a `case.md` saying
//! what it shows, next to the expected `diagnostics.txt` (rule id, severity, file, line and
//! column of every diagnostic). A case under a rule's directory must report that rule.
//! `settings/` holds the severity and suppression cases. Re-bless with `UPDATE_EXPECT=1`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use analyzer::{AnalysisConfig, AnalysisOptions};

fn check_case(case_file: &Path) -> datatest_stable::Result<()> {
    let case_dir = case_file.parent().ok_or("case.md has a parent directory")?;
    let snapshot = common::snapshot_of_dir(case_dir, &["case.md", "diagnostics.txt"])?;
    let config = match std::fs::read_to_string(case_dir.join("driftless.yaml")) {
        Ok(text) => AnalysisConfig::from_agent_config(&text)?,
        Err(_) => AnalysisConfig::default(),
    };
    let options = AnalysisOptions {
        config,
        ..AnalysisOptions::default()
    };
    let (output, sources) = analyzer::analyze_snapshot(&snapshot, common::builtins(), &options);
    let text = common::diagnostics_text(&output, &sources);
    let absolute = std::env::current_dir()?.join(case_dir);
    expect_test::expect_file![absolute.join("diagnostics.txt")].assert_eq(&text);
    let rule_dir = case_dir
        .parent()
        .and_then(Path::file_name)
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    if analyzer::rules::rule_by_id(rule_dir).is_some() {
        assert!(
            text.contains(&format!("[{rule_dir}]")),
            "case {} does not report `{rule_dir}`",
            case_dir.display()
        );
    }
    Ok(())
}

datatest_stable::harness! {
    { test = check_case, root = "tests/cases/check", pattern = r"case\.md$" },
}
