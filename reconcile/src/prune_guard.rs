//! Deletion needs positive evidence: the decisions that look at a whole pass, not one object.
//! Pure: it takes the render's diagnostics and the planned apps, and returns what may be
//! pruned; observing and deleting live elsewhere (`live`, `apply`).
//!
//! An app leaves the cluster only when its file was deleted, or when its file loaded cleanly
//! without it. The render cannot tell those apart from a file that failed to load: a file that
//! does not parse contributes no Application at all, so its apps look removed from Git. And a
//! definition that no longer loads may change what every app renders (a repository definition
//! that overrode a built-in one falls back to the built-in). So a pass whose render has any
//! error not tied to one app (a file that does not load, a broken definition) is
//! [`Evidence::Incomplete`]: it prunes nothing. The apps missing from such a render keep their
//! objects and are reported blocked; the apps still rendered are applied, without their
//! prunes. An app that fails to render is in the render, blocked, and the planner gives it no
//! change at all (`planner::plan_app`), so it is never pruned either.

use std::collections::BTreeSet;

use analyzer::{AppRef, Diagnostic, Severity};

use crate::plan::{Action, AppPlan};

/// The rule of the diagnostic that blocks an app whose deletion is held.
pub const RULE_PRUNE_HELD: &str = "prune-held";
/// The rule of the plan's diagnostic for a pass held by its prune budget.
pub const RULE_PRUNE_BUDGET: &str = "prune-budget";

/// Whether a pass knows enough of its source to delete what left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// Every file of the source loaded and every definition with it: an app missing from the
    /// render was removed from Git, and an object missing from an app's render was removed
    /// from the app.
    Complete,
    /// Something of the source could not be loaded; the reason says what, and what to do.
    Incomplete(String),
}

/// Rules of an app's diagnostics that say a definition it uses does not load (the analyzer
/// reports a broken definition on the apps that use it): a problem of the source, not of the
/// app.
const DEFINITION_LOAD_RULES: &[&str] = &["cue-syntax"];

impl Evidence {
    /// The evidence a render gives: incomplete when any of its diagnostics not tied to one app
    /// (`diagnostics`) is an error, or when an app's diagnostic (`app_diagnostics`) says a
    /// definition does not load. `path_of` names the file of a diagnostic (`None` when the
    /// caller has no source map: the reason then counts the errors without naming files).
    pub fn of_render<'a>(
        diagnostics: &'a [Diagnostic],
        app_diagnostics: impl IntoIterator<Item = &'a Diagnostic>,
        path_of: &dyn Fn(cue::FileId) -> Option<String>,
    ) -> Evidence {
        let definition_errors = app_diagnostics
            .into_iter()
            .filter(|diagnostic| DEFINITION_LOAD_RULES.contains(&diagnostic.rule));
        let errors: Vec<&Diagnostic> = diagnostics
            .iter()
            .chain(definition_errors)
            .filter(|diagnostic| diagnostic.severity == Severity::Error)
            .collect();
        if errors.is_empty() {
            return Evidence::Complete;
        }
        let files: BTreeSet<String> = errors
            .iter()
            .filter_map(|diagnostic| diagnostic.span.and_then(|span| path_of(span.file)))
            .collect();
        let what = if files.is_empty() {
            format!(
                "the source has {} error(s) not tied to one app (a file that does not load, or a broken definition)",
                errors.len()
            )
        } else {
            let names: Vec<&str> = files.iter().map(String::as_str).take(5).collect();
            let more = files.len().saturating_sub(names.len());
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("{}{more} did not load", names.join(", "))
        };
        Evidence::Incomplete(format!(
            "{what}; nothing is pruned until every file of the source loads (fix the errors, or delete the file)"
        ))
    }
}

/// How much one pass of a source may prune before it waits for approval (`prune:` of a
/// source in `driftless.yaml`; `driftless apply` uses the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneBudget {
    /// At most this many objects per pass.
    pub max_objects: usize,
    /// At most this share of the source's objects per pass, in percent. Checked only for a
    /// source of at least [`PERCENT_MIN_OBJECTS`] objects: in a smaller one a single app is a
    /// large share.
    pub max_percent: usize,
}

/// The smallest source (in objects) whose prunes are also held to `maxPercent`.
pub const PERCENT_MIN_OBJECTS: usize = 10;

impl Default for PruneBudget {
    fn default() -> Self {
        PruneBudget {
            max_objects: 50,
            max_percent: 30,
        }
    }
}

/// Prunes over the budget that a person allowed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Approval {
    /// None: a pass over the budget prunes nothing.
    #[default]
    None,
    /// Up to `objects` prunes in a pass of `revision` (`driftless approve-prune`, read from the
    /// cluster): an approval never covers another commit, nor more than was approved.
    Revision { revision: String, objects: usize },
    /// Any number (`driftless apply --approve-prune`).
    Any,
}

/// A pass's prunes against its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassBudget {
    pub budget: PruneBudget,
    pub approval: Approval,
    /// The objects of the source that stay (rendered); `None`: the objects of the apps the
    /// pass plans, right when it plans every app of the source (the CLI).
    pub source_objects: Option<usize>,
    /// The commit the pass deploys, for an [`Approval::Revision`].
    pub revision: Option<String>,
    /// Said after "nothing is pruned until": how to approve (`{objects}` is replaced by the
    /// number of prunes).
    pub how_to_approve: String,
}

impl Default for PassBudget {
    fn default() -> Self {
        PassBudget {
            budget: PruneBudget::default(),
            approval: Approval::None,
            source_objects: None,
            revision: None,
            how_to_approve: "the prunes are approved".to_owned(),
        }
    }
}

impl PassBudget {
    /// Why `prunes` deletions, next to `kept` objects of the source that stay, must wait;
    /// `None` when they are within the budget or approved.
    pub fn exceeded(&self, prunes: usize, kept: usize) -> Option<String> {
        let revision = self.revision.as_deref();
        let total = prunes + kept;
        let over_count = prunes > self.budget.max_objects;
        let over_share =
            total >= PERCENT_MIN_OBJECTS && prunes * 100 > self.budget.max_percent * total;
        if !over_count && !over_share {
            return None;
        }
        let approved = match &self.approval {
            Approval::None => false,
            Approval::Any => true,
            Approval::Revision {
                revision: approved,
                objects,
            } => revision == Some(approved.as_str()) && prunes <= *objects,
        };
        if approved {
            return None;
        }
        // Short enough up front for a commit status (140 characters): the count, then how
        // to approve.
        Some(format!(
            "{prunes} prune(s) held by the prune budget ({}% of {total} objects; max {} or {}%): nothing is pruned until {}",
            prunes * 100 / total.max(1),
            self.budget.max_objects,
            self.budget.max_percent,
            self.how_to_approve
                .replace("{objects}", &prunes.to_string())
        ))
    }
}

/// The number of objects a pass deletes.
pub fn count_prunes(app_plans: &[AppPlan]) -> usize {
    app_plans
        .iter()
        .flat_map(|app_plan| &app_plan.changes)
        .filter(|change| change.action == Action::Delete)
        .count()
}

/// Holds every prune of a pass whose evidence is incomplete: each planned delete becomes an
/// unchanged object kept with `reason`. An app in `removed` (tracked, missing from the render)
/// is blocked with a [`RULE_PRUNE_HELD`] error, so it is reported and its tracker kept; an app
/// still rendered gets a warning naming how many of its objects were kept.
pub fn hold_prunes(app_plans: &mut [AppPlan], removed: &BTreeSet<AppRef>, reason: &str) {
    for app_plan in app_plans {
        let mut held = 0;
        for change in &mut app_plan.changes {
            if change.action == Action::Delete {
                change.action = Action::Unchanged;
                change.diff.clear();
                // Never "not pruned ...": that reason releases the object from the tracker
                // (`apply::leaves_tracker`), and a held object stays ours.
                change.reason = Some(format!("kept: {reason}"));
                held += 1;
            }
        }
        if removed.contains(&app_plan.app) {
            app_plan.diagnostics.push(
                Diagnostic::error(
                    RULE_PRUNE_HELD,
                    format!(
                        "app {} is no longer in the render, but it is not deleted: {reason}",
                        app_plan.app
                    ),
                    None,
                )
                .for_app(&app_plan.app),
            );
        } else if held > 0 {
            app_plan.diagnostics.push(
                Diagnostic::warning(
                    RULE_PRUNE_HELD,
                    format!("{held} object(s) no longer rendered are kept: {reason}"),
                    None,
                )
                .for_app(&app_plan.app),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Change, ObjectRef};

    fn app(name: &str) -> AppRef {
        AppRef {
            namespace: "team".to_owned(),
            name: name.to_owned(),
        }
    }

    fn change(action: Action, name: &str) -> Change {
        Change {
            action,
            cluster: "local".to_owned(),
            object: ObjectRef {
                api_version: "v1".to_owned(),
                kind: "ConfigMap".to_owned(),
                namespace: Some("team".to_owned()),
                name: name.to_owned(),
            },
            diff: "kind: ConfigMap\n".to_owned(),
            changed_fields: Vec::new(),
            reason: None,
        }
    }

    fn app_plan(name: &str, changes: Vec<Change>) -> AppPlan {
        AppPlan {
            app: app(name),
            revision: None,
            changes,
            diagnostics: Vec::new(),
            health: None,
            digest: None,
        }
    }

    fn span(file: u32) -> Option<cue::Span> {
        Some(cue::Span {
            file: cue::FileId(file),
            start: 0,
            end: 1,
        })
    }

    #[test]
    fn a_render_without_errors_outside_apps_is_complete() {
        let warning = Diagnostic::warning("remote-placement", "elsewhere", span(0));
        assert_eq!(
            Evidence::of_render(&[warning], [], &|_| Some("apps/a.yaml".to_owned())),
            Evidence::Complete
        );
        // An app's own render error is the app's: it is blocked, not the whole pass.
        let app_error = Diagnostic::error("unknown-component-type", "no such type", span(1));
        assert_eq!(
            Evidence::of_render(&[], [&app_error], &|_| None),
            Evidence::Complete
        );
    }

    #[test]
    fn a_file_that_does_not_load_makes_the_evidence_incomplete_and_is_named() {
        let diagnostics = [
            Diagnostic::error("yaml-syntax", "tab in indentation", span(3)),
            Diagnostic::error("yaml-syntax", "again", span(3)),
            Diagnostic::warning("unused", "x", span(4)),
        ];
        let Evidence::Incomplete(reason) = Evidence::of_render(&diagnostics, [], &|file| {
            Some(format!("apps/{}.yaml", file.0))
        }) else {
            panic!("a broken file must make the evidence incomplete");
        };
        assert!(reason.starts_with("apps/3.yaml did not load;"), "{reason}");
        assert!(!reason.contains("apps/4.yaml"), "{reason}");
    }

    #[test]
    fn without_paths_the_errors_are_counted() {
        let diagnostics = [Diagnostic::error("cue-error", "broken definition", None)];
        let Evidence::Incomplete(reason) = Evidence::of_render(&diagnostics, [], &|_| None) else {
            panic!("an error outside apps must make the evidence incomplete");
        };
        assert!(
            reason.contains("1 error(s) not tied to one app"),
            "{reason}"
        );
    }

    #[test]
    fn a_definition_that_does_not_load_makes_the_evidence_incomplete_from_an_app() {
        let broken = Diagnostic::error("cue-syntax", "expected '}'", span(7));
        let Evidence::Incomplete(reason) = Evidence::of_render(&[], [&broken], &|file| {
            Some(format!("definitions/{}.cue", file.0))
        }) else {
            panic!("a definition that does not load must make the evidence incomplete");
        };
        assert!(
            reason.starts_with("definitions/7.cue did not load"),
            "{reason}"
        );
    }

    #[test]
    fn a_pass_over_its_budget_waits_for_an_approval_of_its_revision_and_count() {
        let budget = PassBudget {
            how_to_approve: "approved".to_owned(),
            revision: Some("abc".to_owned()),
            ..PassBudget::default()
        };
        // 9 of a source's 10 objects: over 30%.
        let reason = budget.exceeded(9, 1).expect("over the budget");
        assert!(
            reason.starts_with(
                "9 prune(s) held by the prune budget (90% of 10 objects; max 50 or 30%)"
            ),
            "{reason}"
        );
        assert!(
            reason.ends_with("nothing is pruned until approved"),
            "{reason}"
        );
        // Within: a small share, or a small source.
        assert_eq!(budget.exceeded(2, 98), None);
        assert_eq!(budget.exceeded(5, 4), None);
        // Over the count alone, however large the source.
        assert!(budget.exceeded(51, 100_000).is_some());
        let approved = |revision: &str, objects| PassBudget {
            approval: Approval::Revision {
                revision: revision.to_owned(),
                objects,
            },
            ..budget.clone()
        };
        assert_eq!(approved("abc", 9).exceeded(9, 1), None);
        // Not another commit, not more than approved, not a pass of no known commit.
        assert!(approved("def", 9).exceeded(9, 1).is_some());
        assert!(approved("abc", 8).exceeded(9, 1).is_some());
        let unknown = PassBudget {
            revision: None,
            ..approved("abc", 9)
        };
        assert!(unknown.exceeded(9, 1).is_some());
        let any = PassBudget {
            approval: Approval::Any,
            revision: None,
            ..budget.clone()
        };
        assert_eq!(any.exceeded(1000, 0), None);
    }

    #[test]
    fn a_held_pass_deletes_nothing_and_blocks_the_removed_apps() {
        let mut plans = vec![
            app_plan(
                "gone",
                vec![change(Action::Delete, "a"), change(Action::Delete, "b")],
            ),
            app_plan(
                "kept",
                vec![change(Action::Create, "c"), change(Action::Delete, "d")],
            ),
            app_plan("quiet", vec![change(Action::Unchanged, "e")]),
        ];
        let removed = BTreeSet::from([app("gone")]);
        hold_prunes(&mut plans, &removed, "apps/x.yaml did not load");
        assert!(
            plans
                .iter()
                .flat_map(|plan| &plan.changes)
                .all(|change| change.action != Action::Delete)
        );
        // A held object stays in the tracker: its reason is not the one that releases it.
        for change in &plans[0].changes {
            assert_eq!(
                change.reason.as_deref(),
                Some("kept: apps/x.yaml did not load")
            );
            assert!(change.diff.is_empty());
        }
        let gone = &plans[0].diagnostics;
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].severity, Severity::Error);
        assert_eq!(gone[0].rule, RULE_PRUNE_HELD);
        assert!(
            gone[0]
                .message
                .contains("team/gone is no longer in the render"),
            "{}",
            gone[0].message
        );
        // The rendered app still creates, and is only warned about its kept object.
        assert_eq!(plans[1].changes[0].action, Action::Create);
        assert_eq!(plans[1].diagnostics.len(), 1);
        assert_eq!(plans[1].diagnostics[0].severity, Severity::Warning);
        assert!(plans[2].diagnostics.is_empty());
    }
}
