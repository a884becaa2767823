//! Golden render cases: each directory under `tests/cases/render/` is a tiny repository
//! (`apps/`, `definitions/`) with a `case.md` saying what it shows, next to the expected
//! `render.yaml` (every rendered object) and `diagnostics.txt` (every diagnostic with file,
//! line and column). Re-bless with `UPDATE_EXPECT=1`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

fn render_case(case_file: &Path) -> datatest_stable::Result<()> {
    let case_dir = case_file.parent().ok_or("case.md has a parent directory")?;
    let snapshot =
        common::snapshot_of_dir(case_dir, &["case.md", "render.yaml", "diagnostics.txt"])?;
    let (output, sources) = analyzer::render_snapshot(
        &snapshot,
        common::builtins(),
        &analyzer::RenderOptions::default(),
    );
    let absolute = std::env::current_dir()?.join(case_dir);
    expect_test::expect_file![absolute.join("render.yaml")]
        .assert_eq(&common::render_yaml(&output));
    expect_test::expect_file![absolute.join("diagnostics.txt")]
        .assert_eq(&common::diagnostics_text(&output, &sources));
    Ok(())
}

datatest_stable::harness! {
    { test = render_case, root = "tests/cases/render", pattern = r"case\.md$" },
}
