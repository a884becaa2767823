//! The texts of a deploy's commit statuses: one result per app (success, or why not), the
//! change counts and digests their descriptions carry, and the summary over all apps.

use std::collections::BTreeMap;

use super::AppResults;
use crate::apply::ApplyOutcome;
use crate::forge::StatusState;
use crate::plan::{Action, AppPlan, Plan};
use crate::server::PageApp;
use crate::sync::{AppOutcome, Synced};
use analyzer::{AppRef, Severity};

/// The apps of a deploy's results that get a commit status of their own: all of them when
/// they are at most `limit`; otherwise only the apps that did not succeed, at most `limit`,
/// so that a first deploy of 10,000 apps does not spend the forge's write budget on 10,000
/// successes (the summary status and the plan page cover every app).
pub(super) fn apps_with_own_status(results: &AppResults, limit: usize) -> Vec<&AppRef> {
    if results.len() <= limit {
        return results.keys().collect();
    }
    results
        .iter()
        .filter(|(_, (state, _))| *state != StatusState::Success)
        .map(|(app, _)| app)
        .take(limit)
        .collect()
}

/// The summary's note when some apps got no status of their own (see
/// [`apps_with_own_status`]).
pub(super) fn own_status_note(results: &AppResults, limit: usize) -> Option<String> {
    let posted = apps_with_own_status(results, limit).len();
    (posted < results.len()).then(|| {
        format!(
            "; own statuses for {posted} of {} apps (appStatusLimit {limit})",
            results.len()
        )
    })
}

pub(super) fn failed_apps(results: &AppResults) -> Vec<(String, String)> {
    results
        .iter()
        .filter(|(_, (state, _))| *state != StatusState::Success)
        .map(|(app, (_, description))| (app.to_string(), description.clone()))
        .collect()
}

fn first_error(app_plan: &AppPlan) -> Option<String> {
    app_plan
        .diagnostics
        .iter()
        .find(|diagnostic| diagnostic.severity == Severity::Error)
        .map(|diagnostic| format!("{}: {}", diagnostic.rule, diagnostic.message))
}

/// Each planned app's result after a sync that applied: its plan's first error, else its
/// apply's or workflow's outcome (an app held, or a workflow not run, has none).
pub(super) fn app_results_from_sync(synced: &Synced) -> AppResults {
    let mut results = AppResults::new();
    for (app_plan, synced_app) in synced.plan.apps.iter().zip(&synced.apps) {
        let report = match &synced_app.outcome {
            AppOutcome::Applied(report) | AppOutcome::Workflow(_, report) => Some(report),
            AppOutcome::Planned | AppOutcome::Held => None,
        };
        let result = match (first_error(app_plan), report.map(|report| &report.outcome)) {
            (Some(error), _) => (StatusState::Failure, error),
            (None, Some(ApplyOutcome::Applied)) => {
                (StatusState::Success, applied_description(app_plan))
            }
            (None, Some(ApplyOutcome::Skipped(reason))) => {
                (StatusState::Failure, format!("not applied: {reason}"))
            }
            (None, Some(ApplyOutcome::Failed(error))) => {
                (StatusState::Failure, format!("apply failed: {error}"))
            }
            (None, None) => (
                StatusState::Error,
                "not applied (no apply report)".to_owned(),
            ),
        };
        results.insert(app_plan.app.clone(), result);
    }
    results
}

pub(super) fn app_results_plan_only(plan: &Plan, note: &str) -> AppResults {
    plan.apps
        .iter()
        .map(|app_plan| {
            let result = match first_error(app_plan) {
                Some(error) => (StatusState::Failure, error),
                None => (
                    StatusState::Success,
                    format!(
                        "{note}: {}{}",
                        app_change_counts(app_plan),
                        digest_note(app_plan)
                    ),
                ),
            };
            (app_plan.app.clone(), result)
        })
        .collect()
}

fn applied_description(app_plan: &AppPlan) -> String {
    let n_changes = app_plan
        .changes
        .iter()
        .filter(|change| change.action != Action::Unchanged)
        .count();
    let digest = digest_note(app_plan);
    if n_changes == 0 {
        format!("in sync, nothing to apply{digest}")
    } else {
        format!("applied: {}{digest}", app_change_counts(app_plan))
    }
}

/// `; digest 0123456789ab` for an app plan with a digest.
fn digest_note(app_plan: &AppPlan) -> String {
    let short = (app_plan.digest.as_ref()).map(|digest| crate::review::digest::short(&digest.full));
    short.map_or_else(String::new, |digest| format!("; digest {digest}"))
}

fn app_change_counts(app_plan: &AppPlan) -> String {
    counts(app_plan.changes.iter().map(|change| change.action))
}

/// `; plan digest 0123456789ab` for a plan with a digest.
pub(super) fn plan_digest_note(plan: &Plan) -> String {
    let digest = crate::review::digest::plan_digest(plan);
    digest.map_or_else(String::new, |digest| {
        format!("; plan digest {}", crate::review::digest::short(&digest))
    })
}

pub(super) fn change_counts(plan: &Plan) -> String {
    counts(
        plan.apps
            .iter()
            .flat_map(|app| app.changes.iter().map(|change| change.action)),
    )
}

pub(super) fn counts(actions: impl Iterator<Item = Action>) -> String {
    let mut by_action: BTreeMap<Action, usize> = BTreeMap::new();
    for action in actions {
        *by_action.entry(action).or_default() += 1;
    }
    let order = [
        Action::Create,
        Action::Update,
        Action::Delete,
        Action::Conflict,
        Action::Unchanged,
    ];
    order
        .iter()
        .map(|action| {
            format!(
                "{} {}",
                by_action.get(action).copied().unwrap_or(0),
                action.as_str()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn summarize(results: &AppResults, failed: &[String]) -> (StatusState, String) {
    if failed.is_empty() {
        (
            StatusState::Success,
            format!("{} app(s) deployed", results.len()),
        )
    } else {
        (
            StatusState::Failure,
            format!(
                "{} of {} app(s) failed: {}",
                failed.len(),
                results.len(),
                failed.join(", ")
            ),
        )
    }
}

pub(super) fn page_rows(results: &AppResults) -> Vec<PageApp> {
    results
        .iter()
        .map(|(app, (state, description))| PageApp {
            app: app.to_string(),
            state: *state,
            description: description.clone(),
        })
        .collect()
}
