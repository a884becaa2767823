//! The plan as markdown, for a pull-request comment: a summary table of apps, then per app a
//! table of its changes and each diff in a collapsible `<details>` block, then diagnostics.
//!
//! The comment has a size cap ([`MarkdownOptions::max_len`]; GitHub rejects comments over
//! 65,536 characters). When the full text is too long, the largest diffs are collapsed first
//! (replaced by a one-line note), so the many small diffs a reviewer can read stay visible. If
//! the text is still too long with every diff collapsed, it is cut at a line boundary with a
//! note. The cap counts bytes, which is never less than characters, so it is conservative.

use std::fmt::Write as _;

use analyzer::{Diagnostic, Severity, SourceMap};

use crate::plan::{Action, AppPlan, Change, Plan};
use crate::report::diagnostics::location_string;
use crate::report::{Summary, target_description};

/// Options for [`plan_markdown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkdownOptions {
    /// The most bytes the comment may have.
    pub max_len: usize,
}

impl Default for MarkdownOptions {
    /// 60,000 bytes: under GitHub's 65,536-character limit with room for a forge's own header.
    fn default() -> MarkdownOptions {
        MarkdownOptions { max_len: 60_000 }
    }
}

/// The plan as a markdown comment, at most `options.max_len` bytes.
pub fn plan_markdown(plan: &Plan, sources: &SourceMap, options: MarkdownOptions) -> String {
    let pieces = build_pieces(plan, sources);
    // The hidden digests line opens the comment (reviewed-plan mode reads it back); a plan too
    // large for it goes without, and the agent relies on the digests it recorded.
    let digests = crate::review::digest::comment_line(plan);
    if digests.len() < options.max_len / 2 {
        format!(
            "{digests}\n{}",
            fit(pieces, options.max_len - digests.len() - 1)
        )
    } else {
        fit(pieces, options.max_len)
    }
}

/// A part of the comment: fixed text, or a diff block that can be collapsed to a short note.
enum Piece {
    Fixed(String),
    Diff { full: String, collapsed: String },
}

fn build_pieces(plan: &Plan, sources: &SourceMap) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    write_summary(&mut text, plan);
    for app in &plan.apps {
        write_app(&mut text, &mut pieces, app);
    }
    write_diagnostics(&mut text, plan, sources);
    pieces.push(Piece::Fixed(text));
    pieces
}

/// The heading, the plan's summary and digest, and one table row per app.
fn write_summary(text: &mut String, plan: &Plan) {
    let summary = Summary::of_plan(plan);
    let _ = writeln!(text, "### Driftless plan\n");
    let _ = writeln!(
        text,
        "> {}\n",
        capitalize(&target_description(&plan.target))
    );
    let _ = write!(text, "**Plan: {}**", summary.sentence());
    if summary.unchanged > 0 {
        let _ = write!(text, " ({} unchanged)", summary.unchanged);
    }
    if let Some(digest) = crate::review::digest::plan_digest(plan) {
        let _ = write!(text, "\n\nPlan digest `{digest}`");
    }
    text.push_str("\n\n");

    if plan.apps.is_empty() {
        text.push_str("No applications found.\n");
    } else {
        text.push_str("| App | Create | Update | Delete | Conflict | Unchanged | Status |\n");
        text.push_str("| --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
        for app in &plan.apps {
            let counts = Summary::of_app(app);
            let _ = writeln!(
                text,
                "| `{}` | {} | {} | {} | {} | {} | {} |",
                app.app,
                counts.create,
                counts.update,
                counts.delete,
                counts.conflict,
                counts.unchanged,
                status(app, &counts)
            );
        }
    }
}

/// One app's section: blocked, no changes, or a table of its changes with each diff in a
/// collapsible block (a piece of its own, which may be collapsed to fit).
fn write_app(text: &mut String, pieces: &mut Vec<Piece>, app: &AppPlan) {
    let _ = writeln!(text, "\n#### `{}`\n", app.app);
    if let Some(revision) = &app.revision {
        let _ = writeln!(text, "Revision `{revision}`\n");
    }
    if let Some(digest) = &app.digest {
        let _ = writeln!(text, "Digest `{digest}`\n");
    }
    let errors = error_count(&app.diagnostics);
    if errors > 0 {
        let _ = writeln!(
            text,
            "Blocked by {errors} {}; not planned. See the diagnostics below.",
            plural(errors, "error", "errors")
        );
        return;
    }
    let visible: Vec<&Change> = app
        .changes
        .iter()
        .filter(|change| change.action != Action::Unchanged)
        .collect();
    if visible.is_empty() {
        text.push_str("No changes.\n");
        return;
    }
    text.push_str("| Action | Kind | Namespace | Name | Cluster | Note |\n");
    text.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for change in &visible {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} |",
            action_label(change.action),
            escape(&change.object.kind),
            escape(change.object.namespace.as_deref().unwrap_or("")),
            escape(&change.object.name),
            escape(&change.cluster),
            escape(change.reason.as_deref().unwrap_or(""))
        );
    }
    // Conflicts carry no diff; their reason is in the table.
    for change in visible.into_iter().filter(|change| !change.diff.is_empty()) {
        let _ = write!(
            text,
            "\n<details><summary><code>{} {}</code></summary>\n\n",
            action_label(change.action),
            escape(&super::object_label(&change.object))
        );
        if !change.changed_fields.is_empty() {
            let _ = writeln!(
                text,
                "Changed: {}\n",
                change
                    .changed_fields
                    .iter()
                    .map(|field| format!("`{field}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        pieces.push(Piece::Fixed(std::mem::take(text)));
        let full = diff_block(change);
        let collapsed = format!(
            "_Diff omitted to fit the comment size limit ({} lines); run `driftless plan` to see it._\n",
            full.lines().count().saturating_sub(2)
        );
        pieces.push(Piece::Diff { full, collapsed });
        text.push_str("\n</details>\n");
    }
}

/// Every diagnostic of the plan and its apps, with where and for which app.
fn write_diagnostics(text: &mut String, plan: &Plan, sources: &SourceMap) {
    let all_diagnostics: Vec<&Diagnostic> = plan
        .diagnostics
        .iter()
        .chain(plan.apps.iter().flat_map(|app| &app.diagnostics))
        .collect();
    if !all_diagnostics.is_empty() {
        text.push_str("\n#### Diagnostics\n\n");
        for diagnostic in all_diagnostics {
            let severity = match diagnostic.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            let location = match diagnostic.span {
                Some(_) => format!(" at `{}`", location_string(diagnostic, sources)),
                None => String::new(),
            };
            let _ = write!(
                text,
                "- **{severity}** `{}`{location}: {}",
                diagnostic.rule,
                escape(&diagnostic.message)
            );
            if let Some(app) = &diagnostic.app {
                let _ = write!(text, " (app `{app}`");
                if let Some(component) = &diagnostic.component {
                    let _ = write!(text, ", component `{component}`");
                }
                text.push(')');
            }
            text.push('\n');
        }
    }
}

/// Joins the pieces, collapsing the largest diffs first until the text fits in `max_len`.
fn fit(pieces: Vec<Piece>, max_len: usize) -> String {
    let full_len = |piece: &Piece| match piece {
        Piece::Fixed(text) => text.len(),
        Piece::Diff { full, .. } => full.len(),
    };
    let mut total: usize = pieces.iter().map(full_len).sum();
    let mut collapse = vec![false; pieces.len()];
    if total > max_len {
        let mut largest: Vec<usize> = (0..pieces.len())
            .filter(|&index| matches!(pieces[index], Piece::Diff { .. }))
            .collect();
        // Largest first; ties in document order, so the output is deterministic.
        largest.sort_by(|&a, &b| {
            full_len(&pieces[b])
                .cmp(&full_len(&pieces[a]))
                .then(a.cmp(&b))
        });
        for index in largest {
            if total <= max_len {
                break;
            }
            if let Piece::Diff { full, collapsed } = &pieces[index] {
                total = total - full.len() + collapsed.len();
                collapse[index] = true;
            }
        }
    }
    let mut out = String::with_capacity(total);
    for (piece, collapsed) in pieces.iter().zip(collapse) {
        match piece {
            Piece::Fixed(text) => out.push_str(text),
            Piece::Diff { full, .. } if !collapsed => out.push_str(full),
            Piece::Diff {
                collapsed: note, ..
            } => out.push_str(note),
        }
    }
    if out.len() > max_len {
        const NOTE: &str = "\n\n_Plan truncated to fit the comment size limit; run `driftless plan` to see all of it._\n";
        let mut cut = max_len.saturating_sub(NOTE.len());
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        let cut = out[..cut].rfind('\n').unwrap_or(0);
        out.truncate(cut);
        out.push_str(NOTE);
    }
    out
}

/// The change's diff as a fenced `diff` block; creates and deletes become `+`/`-` lines.
fn diff_block(change: &Change) -> String {
    let body: String = match change.action {
        Action::Create => prefix_lines(&change.diff, "+ "),
        Action::Delete => prefix_lines(&change.diff, "- "),
        _ => change.diff.clone(),
    };
    // A fence longer than any backtick run inside, so the diff cannot close it early.
    let longest_run = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    let mut block = format!("{fence}diff\n{body}");
    if !block.ends_with('\n') {
        block.push('\n');
    }
    let _ = writeln!(block, "{fence}");
    block
}

fn prefix_lines(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|line| format!("{prefix}{line}\n"))
        .collect()
}

fn status(app: &AppPlan, counts: &Summary) -> String {
    let errors = error_count(&app.diagnostics);
    if errors > 0 {
        return format!("blocked ({errors} {})", plural(errors, "error", "errors"));
    }
    let warnings = app.diagnostics.len() - errors;
    let state = if counts.has_changes() {
        "changes"
    } else {
        "no changes"
    };
    if warnings > 0 {
        format!(
            "{state}, {warnings} {}",
            plural(warnings, "warning", "warnings")
        )
    } else {
        state.to_owned()
    }
}

fn action_label(action: Action) -> &'static str {
    match action {
        Action::Create => "+ create",
        Action::Update => "~ update",
        Action::Delete => "- delete",
        Action::Conflict => "! conflict",
        Action::Unchanged => "unchanged",
    }
}

fn error_count(diagnostics: &[Diagnostic]) -> usize {
    diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.severity == Severity::Error)
        .count()
}

fn plural<'a>(count: usize, one: &'a str, many: &'a str) -> &'a str {
    if count == 1 { one } else { many }
}

/// Escapes text for a table cell or an HTML summary: no pipes, no tags.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plan_human::tests::{change, sample_plan};
    use expect_test::expect;

    #[test]
    fn renders_tables_details_and_diagnostics() {
        let out = plan_markdown(
            &sample_plan(),
            &SourceMap::new(),
            MarkdownOptions::default(),
        );
        expect![[r#"
            <!-- driftless:digests team-a/web=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef -->
            ### Driftless plan

            > Planned against cluster(s) local

            **Plan: 1 to create, 1 to update, 1 to delete, 1 conflict** (1 unchanged)

            Plan digest `bcbb89594beed938dd8d0fd292a36df4e5a10581959cc417e04a2bc5eb1e4a32`

            | App | Create | Update | Delete | Conflict | Unchanged | Status |
            | --- | ---: | ---: | ---: | ---: | ---: | --- |
            | `team-a/broken` | 0 | 0 | 0 | 0 | 0 | blocked (1 error) |
            | `team-a/web` | 1 | 1 | 1 | 1 | 1 | changes |

            #### `team-a/broken`

            Revision `1a2b3c4`

            Blocked by 1 error; not planned. See the diagnostics below.

            #### `team-a/web`

            Revision `1a2b3c4`

            Digest `0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef`

            | Action | Kind | Namespace | Name | Cluster | Note |
            | --- | --- | --- | --- | --- | --- |
            | - delete | ConfigMap | team-a | old | local |  |
            | + create | Deployment | team-a | web | local |  |
            | ~ update | Deployment | team-a | worker | local |  |
            | ! conflict | ConfigMap | team-a | shared | local | owned by app team-b/api |

            <details><summary><code>- delete ConfigMap team-a/old</code></summary>

            ```diff
            - data:
            -   a: b
            ```

            </details>

            <details><summary><code>+ create Deployment team-a/web</code></summary>

            ```diff
            + kind: Deployment
            + spec:
            +   replicas: 2
            ```

            </details>

            <details><summary><code>~ update Deployment team-a/worker</code></summary>

            Changed: `spec.replicas`

            ```diff
            @@ -1,1 +1,1 @@
            -replicas: 1
            +replicas: 3
            ```

            </details>

            #### Diagnostics

            - **error** `yaml-syntax`: bad
        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn collapses_the_largest_diffs_first_to_fit_the_limit() {
        let mut plan = sample_plan();
        let big = "data:\n".to_owned() + &"  key: value\n".repeat(400);
        let small = "data:\n  key: value\n";
        plan.apps[1].changes = vec![
            change(Action::Create, "ConfigMap", "small", small),
            change(Action::Create, "ConfigMap", "big", &big),
        ];
        let unlimited = plan_markdown(
            &plan,
            &SourceMap::new(),
            MarkdownOptions {
                max_len: usize::MAX,
            },
        );
        assert!(unlimited.len() > 4000, "{}", unlimited.len());
        let out = plan_markdown(&plan, &SourceMap::new(), MarkdownOptions { max_len: 4000 });
        assert!(out.len() <= 4000, "{}", out.len());
        assert!(
            out.contains("+   key: value\n```"),
            "the small diff stays:\n{out}"
        );
        assert!(
            out.contains("Diff omitted to fit the comment size limit (401 lines)"),
            "{out}"
        );
    }

    #[test]
    fn truncates_at_a_line_when_collapsing_is_not_enough() {
        let out = plan_markdown(
            &sample_plan(),
            &SourceMap::new(),
            MarkdownOptions { max_len: 300 },
        );
        assert!(out.len() <= 300, "{}", out.len());
        assert!(
            out.ends_with("run `driftless plan` to see all of it._\n"),
            "{out}"
        );
        assert!(out.starts_with("<!-- driftless:digests"), "{out}");
        assert!(out.contains("-->\n### Driftless plan\n"), "{out}");
    }

    #[test]
    fn fences_outlast_backticks_in_the_diff() {
        let block = diff_block(&change(
            Action::Create,
            "ConfigMap",
            "x",
            "script: ````echo````\n",
        ));
        assert!(block.starts_with("`````diff\n"), "{block}");
        assert!(block.ends_with("\n`````\n"), "{block}");
    }
}
