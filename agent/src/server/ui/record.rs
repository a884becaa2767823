//! What the agent loop tells the UI as it works: one call per deploy, drift check, workflow
//! pass and preview, each turning the loop's own results into [`AppView`] changes. The loop
//! reads the clock and passes times in; nothing here touches a cluster.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use analyzer::{AppRef, Severity};

use super::state::{
    CommitInfo, DeployRecord, FleetState, ForgeLinks, PullPreview, SyncState, TreeObject, plan_view,
};
use crate::config::Config;
use crate::forge::{PullRequest, StatusState};
use crate::plan::{Action, AppPlan, Plan};
use crate::source::git::{CommitId, GitRepo};
use crate::sync::{LivePlan, WorkflowResult};
use crate::workflow::{StepPhase, WorkflowPhase, WorkflowState};

/// Per app, its status and description, as the loop reports them on the commit.
pub type AppResults = BTreeMap<AppRef, (StatusState, String)>;

/// How each source's commits link to the forge (sources with a forge repository only).
pub fn sources(fleet: &FleetState, config: &Config) {
    let Some(forge) = &config.forge else {
        return;
    };
    // GitHub's base URL is its API; its web pages are on github.com.
    let web = if forge.kind == crate::config::ForgeKind::Github
        && forge.base_url.contains("api.github.com")
    {
        "https://github.com".to_owned()
    } else {
        forge.base_url.trim_end_matches('/').to_owned()
    };
    for source in &config.sources {
        if let Some(repo) = &source.forge_repo {
            fleet.set_links(
                &source.name,
                ForgeLinks {
                    repository: format!("{web}/{repo}"),
                    kind: forge.kind,
                },
            );
        }
    }
}

/// A commit's author and summary; empty when the cache cannot read it.
pub fn commit_info(repo: &GitRepo, commit: &CommitId) -> CommitInfo {
    let (author, summary) = match repo.commit_summary(commit) {
        Ok((author, summary, _)) => (author, summary),
        Err(error) => {
            tracing::debug!(%error, "reading the commit's author for the UI failed");
            (String::new(), String::new())
        }
    };
    CommitInfo {
        id: commit.to_string(),
        author,
        summary,
    }
}

/// The objects of each planned app, as the render made them (before the apply consumes the
/// plan's observations).
pub fn objects(fleet: &FleetState, source: &str, cluster: &str, live_plan: &LivePlan) {
    for observation in &live_plan.observations {
        let desired = &observation.desired;
        let objects: Vec<TreeObject> = desired
            .objects
            .iter()
            .map(|object| TreeObject {
                component: object.component.clone(),
                trait_type: object.trait_type.clone(),
                cluster: cluster.to_owned(),
                object: object.object_ref.clone(),
            })
            .collect();
        fleet.update(&desired.app, source, |view| view.objects = objects);
    }
}

/// The workflow states a deploy (or drift correction) left.
pub fn workflows<'a>(
    fleet: &FleetState,
    source: &str,
    results: impl IntoIterator<Item = &'a WorkflowResult>,
) {
    for result in results {
        if let WorkflowResult::Ran(report) = result {
            let state = report.state.clone();
            fleet.update(&report.app, source, |view| view.workflow = Some(state));
        }
    }
}

/// A finished deploy of `commit`: each planned app's state, plan, health and history entry.
pub struct Deploy<'a> {
    pub source: &'a str,
    pub cluster: &'a str,
    pub commit: &'a CommitInfo,
    pub plan: &'a Plan,
    pub results: &'a AppResults,
    /// Apps a hold kept from being applied (`driftless hold`).
    pub held: &'a std::collections::BTreeSet<AppRef>,
    pub finished_at: SystemTime,
    pub duration: Duration,
}

pub fn deploy(fleet: &FleetState, deploy: &Deploy<'_>) {
    for app_plan in &deploy.plan.apps {
        let Some((state, message)) = deploy.results.get(&app_plan.app) else {
            continue;
        };
        let deleted = !app_plan.changes.is_empty()
            && app_plan
                .changes
                .iter()
                .all(|change| change.action == Action::Delete);
        if deleted && *state == StatusState::Success {
            // Removed from Git, and its objects are gone.
            fleet.remove(&app_plan.app);
            continue;
        }
        fleet.update(&app_plan.app, deploy.source, |view| {
            view.sync = if deploy.held.contains(&app_plan.app) {
                SyncState::Held
            } else {
                sync_state(app_plan, *state, view.workflow.as_ref())
            };
            view.message = message.clone();
            view.commit = Some(deploy.commit.clone());
            view.plan = Some(plan_view(app_plan, &deploy.commit.id, "deploy"));
            view.take_health(app_plan);
            let mut clusters: Vec<String> = app_plan
                .changes
                .iter()
                .map(|change| change.cluster.clone())
                .collect();
            clusters.push(deploy.cluster.to_owned());
            clusters.sort();
            clusters.dedup();
            view.clusters = clusters;
            if *state == StatusState::Success {
                view.last_apply = Some((deploy.finished_at, deploy.duration));
            }
            view.push_history(DeployRecord {
                commit: deploy.commit.clone(),
                finished_at: deploy.finished_at,
                duration: deploy.duration,
                result: *state,
                message: message.clone(),
            });
        });
    }
}

/// A commit-to-live figure (`agent::review::live_time`): every app whose last deploy was of
/// that commit shows it.
pub fn commit_to_live(fleet: &FleetState, figure: Option<(CommitId, Duration)>) {
    let Some((commit, elapsed)) = figure else {
        return;
    };
    fleet.update_where(
        |view| {
            view.commit
                .as_ref()
                .is_some_and(|info| info.id == commit.as_str())
                && view.sync == SyncState::InSync
        },
        |view| view.commit_to_live = Some(elapsed),
    );
}

/// A drift check's plan: health, and drifted or back in sync. A failed, blocked or held app
/// keeps its state: the drift check does not clear what a deploy found.
pub fn drift(fleet: &FleetState, source: &str, commit: &str, plan: &Plan) {
    for app_plan in &plan.apps {
        let drifted = app_plan
            .changes
            .iter()
            .any(|change| change.action != Action::Unchanged);
        fleet.update(&app_plan.app, source, |view| {
            view.take_health(app_plan);
            match (view.sync, drifted) {
                (SyncState::InSync, true) => {
                    view.sync = SyncState::Drifted;
                    view.message = format!(
                        "drift check: the cluster differs from Git ({})",
                        changed_objects(app_plan)
                    );
                    view.plan = Some(plan_view(app_plan, commit, "drift check"));
                }
                (SyncState::Drifted, true) => {
                    view.plan = Some(plan_view(app_plan, commit, "drift check"));
                }
                (SyncState::Drifted, false) => {
                    view.sync = SyncState::InSync;
                    view.message = "drift check: in sync".to_owned();
                }
                _ => {}
            }
        });
    }
}

/// A drift correction's results: corrected apps are in sync again.
pub fn corrected(fleet: &FleetState, source: &str, results: &AppResults) {
    for (app, (state, message)) in results {
        fleet.update(app, source, |view| {
            if *state == StatusState::Success && view.sync == SyncState::Drifted {
                view.sync = SyncState::InSync;
                view.message = format!("drift corrected: {message}");
            } else if *state != StatusState::Success {
                view.sync = SyncState::Failed;
                view.message = format!("correcting drift failed: {message}");
            }
        });
    }
}

/// A pull request's preview: the deployed apps it changes list it.
pub fn preview(fleet: &FleetState, source: &str, pull: &PullRequest, plan: &Plan) {
    let preview = PullPreview {
        number: pull.number,
        commit: pull.head_commit.to_string(),
        summary: pull.title.clone(),
    };
    for app_plan in &plan.apps {
        let changes = app_plan
            .changes
            .iter()
            .any(|change| change.action != Action::Unchanged);
        if !changes || fleet.app(&app_plan.app).is_none() {
            continue;
        }
        let preview = preview.clone();
        fleet.update(&app_plan.app, source, |view| {
            view.previews.retain(|known| known.number != preview.number);
            view.previews.push(preview);
        });
    }
}

/// The state a deploy leaves an app in.
fn sync_state(
    app_plan: &AppPlan,
    result: StatusState,
    workflow: Option<&WorkflowState>,
) -> SyncState {
    let has_error = app_plan
        .diagnostics
        .iter()
        .any(|diagnostic| diagnostic.severity == Severity::Error);
    let held_by_budget = app_plan.diagnostics.iter().any(|diagnostic| {
        diagnostic.rule == crate::prune_guard::RULE_PRUNE_HELD
            || diagnostic.rule == crate::prune_guard::RULE_PRUNE_BUDGET
    });
    match result {
        _ if held_by_budget => SyncState::Held,
        StatusState::Success => match workflow {
            Some(state) if waits_for_a_person(state) => SyncState::Held,
            Some(state) if state.phase == WorkflowPhase::Executing => SyncState::Pending,
            _ => SyncState::InSync,
        },
        StatusState::Pending => SyncState::Pending,
        StatusState::Failure if has_error => SyncState::Blocked,
        StatusState::Failure | StatusState::Error => SyncState::Failed,
    }
}

/// A suspended step or a rollout batch waiting for approval: someone must resume it.
pub fn waits_for_a_person(state: &WorkflowState) -> bool {
    state.phase == WorkflowPhase::Suspending
        || state
            .steps
            .values()
            .any(|step| step.phase == StepPhase::Suspending && !step.resumed)
        || state
            .rollouts
            .values()
            .any(|rollout| rollout.awaits_approval())
}

fn changed_objects(app_plan: &AppPlan) -> String {
    let changed: Vec<String> = app_plan
        .changes
        .iter()
        .filter(|change| change.action != Action::Unchanged)
        .map(|change| format!("{} {}", change.action.as_str(), change.object))
        .collect();
    let shown = changed
        .iter()
        .take(3)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if changed.len() > 3 {
        format!("{shown} and {} more", changed.len() - 3)
    } else {
        shown
    }
}
