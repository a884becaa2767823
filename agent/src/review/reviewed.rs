//! Reviewed-plan mode (`applyReviewedPlan: true`): a merged pull request's apps are applied
//! only when their plan digest is the one last posted on the pull request.
//!
//! - Each preview records the digests it posted, by the pull request's head commit (the same
//!   digests open its plan comment, `digest::comment_line`).
//! - A deploy finds the pull request it merges by the merge commit's parents (a merge commit's
//!   second parent is the head that was previewed). A commit that merged no previewed head is
//!   a direct push (squash and rebase merges are too): the source's `directPushes` applies it
//!   or holds it.
//! - An app whose digest differs is held (failure status naming the reason: the merge brought
//!   changes, or a live object moved), its new plan is posted on the pull request, and it waits
//!   for an approval: a `/driftless apply` comment from an approver after that plan, or
//!   `driftless approve APP --digest D` (`approval`). An approval covers that digest only; the
//!   deploy runs again and applies the apps whose plan is still the approved one.
//!
//! What the agent recorded lives in its memory: after a restart a merged head's digests are
//! unknown, and its apps are held (never applied unreviewed).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

use analyzer::{AppRef, SourceMap};

use crate::cluster::Cluster;
use crate::config::RepoSlug;
use crate::config::reviewed::{DirectPushes, ReviewedPlan};
use crate::forge::{Forge, StatusState};
use crate::plan::{Action, Plan};
use crate::review::digest::{self, AppDigest};
use crate::review::hold::{Hold, Holds};
use crate::source::git::{CommitId, GitRepo};

/// How many previewed heads are remembered per source.
const REMEMBERED_HEADS: usize = 256;

/// Who sets the holds of this mode.
const SET_BY: &str = "reviewed-plan mode";

/// The reviewed-plan state of one source.
#[derive(Debug, Default)]
pub struct Reviewed {
    /// The digests posted per previewed head commit, with its pull request and when (a
    /// counter: the oldest are forgotten first). Written by previews, which borrow the
    /// worker shared.
    posted: Mutex<BTreeMap<CommitId, Posted>>,
    /// The deploy waiting for approval.
    awaiting: Option<Awaiting>,
    /// Digests approved per app, applied when a deploy plans exactly them.
    approved: BTreeMap<AppRef, String>,
}

#[derive(Debug, Clone)]
struct Posted {
    pull: u64,
    order: u64,
    digests: BTreeMap<String, AppDigest>,
}

/// A deploy held for approval.
#[derive(Debug, Clone)]
struct Awaiting {
    commit: CommitId,
    pull: Option<u64>,
    /// Per held app: its plan's digest now, and why it is held.
    apps: BTreeMap<AppRef, (AppDigest, String)>,
    /// The marker of the comment carrying the new plan.
    marker: String,
}

impl Reviewed {
    /// Records the digests a preview of `head` posted on `pull`.
    pub fn record_preview(&self, pull: u64, head: &CommitId, plan: &Plan) {
        let digests = plan
            .apps
            .iter()
            .filter_map(|app| Some((app.app.to_string(), app.digest.clone()?)))
            .collect();
        let mut posted = self.posted.lock().unwrap_or_else(PoisonError::into_inner);
        let order = posted
            .values()
            .map(|posted| posted.order + 1)
            .max()
            .unwrap_or(0);
        posted.insert(
            head.clone(),
            Posted {
                pull,
                order,
                digests,
            },
        );
        while posted.len() > REMEMBERED_HEADS {
            let oldest = posted
                .iter()
                .min_by_key(|(_, posted)| posted.order)
                .map(|(commit, _)| commit.clone());
            match oldest {
                Some(commit) => posted.remove(&commit),
                None => break,
            };
        }
    }

    /// Before a deploy of `commit` applies `plan`: adds a hold to `holds` for each app whose
    /// plan is not the reviewed (or approved) one, and remembers them as awaiting approval.
    pub fn check(
        &mut self,
        mode: &ReviewedPlan,
        repo: &GitRepo,
        commit: &CommitId,
        plan: &Plan,
        holds: &mut Holds,
    ) {
        self.awaiting = None;
        let parents = repo.parents(commit).unwrap_or_default();
        let posted = self.posted.lock().unwrap_or_else(PoisonError::into_inner);
        let reviewed = parents
            .iter()
            .skip(1)
            .find_map(|parent| posted.get(parent))
            .cloned();
        drop(posted);
        if reviewed.is_none() && mode.direct_pushes == DirectPushes::Apply {
            return;
        }
        let mut apps = BTreeMap::new();
        for app_plan in &plan.apps {
            let Some(now) = &app_plan.digest else {
                continue;
            };
            let changes = app_plan
                .changes
                .iter()
                .any(|change| change.action != Action::Unchanged);
            if !changes || self.approved.get(&app_plan.app) == Some(&now.full) {
                continue;
            }
            let reason = match &reviewed {
                None => "a direct push: no pull request's plan was reviewed".to_owned(),
                Some(posted) => match posted.digests.get(&app_plan.app.to_string()) {
                    Some(seen) if seen.full == now.full => continue,
                    Some(seen) if seen.desired != now.desired => {
                        "the merge brought changes the pull request's plan did not show".to_owned()
                    }
                    Some(_) => "a live object moved since the pull request's plan".to_owned(),
                    None => "the pull request's plan did not show this app".to_owned(),
                },
            };
            apps.insert(app_plan.app.clone(), (now.clone(), reason));
        }
        if apps.is_empty() {
            return;
        }
        for (app, (_, reason)) in &apps {
            holds.active.insert(
                app.clone(),
                Hold {
                    app: app.clone(),
                    reason: reason.clone(),
                    until: chrono::DateTime::<chrono::Utc>::MAX_UTC,
                    set_by: SET_BY.to_owned(),
                },
            );
        }
        let digests: Vec<&str> = apps
            .values()
            .map(|(digest, _)| digest.full.as_str())
            .collect();
        let marker = format!(
            "<!-- driftless:merge-plan commit={commit} digests={} -->",
            digest::short(&crate::review::digest::sha256_text(&digests.join(",")))
        );
        self.awaiting = Some(Awaiting {
            commit: commit.clone(),
            pull: reviewed.map(|posted| posted.pull),
            apps,
            marker,
        });
    }

    /// Holds the apps awaiting approval in `holds` (for a drift correction, which must not
    /// apply an unreviewed plan either).
    pub fn hold_awaiting(&self, holds: &mut Holds) {
        let Some(awaiting) = &self.awaiting else {
            return;
        };
        for (app, (_, reason)) in &awaiting.apps {
            let hold = Hold {
                app: app.clone(),
                reason: format!("{reason}; waiting for approval"),
                until: chrono::DateTime::<chrono::Utc>::MAX_UTC,
                set_by: SET_BY.to_owned(),
            };
            holds.active.insert(app.clone(), hold);
        }
    }

    /// After the deploy: the apps held for approval get a failure status naming the reason
    /// and how to approve, and leave `held` (they wait for an approval, not for a hold to
    /// lift).
    pub fn fail_held(
        &self,
        results: &mut BTreeMap<AppRef, (StatusState, String)>,
        held: &mut BTreeSet<AppRef>,
    ) {
        let Some(awaiting) = &self.awaiting else {
            return;
        };
        for (app, (digest, reason)) in &awaiting.apps {
            held.remove(app);
            if let Some(result) = results.get_mut(app) {
                let posted = awaiting
                    .pull
                    .map_or_else(String::new, |pull| format!("; new plan on #{pull}"));
                *result = (
                    StatusState::Failure,
                    format!(
                        "held: {reason}{posted}; digest {}",
                        digest::short(&digest.full)
                    ),
                );
            }
        }
    }

    /// The pull request and the comment (marker, body) that post the held apps' new plan.
    pub fn comment(
        &self,
        plan: &Plan,
        sources: &SourceMap,
        approvers: &[String],
        limit: usize,
    ) -> Option<(u64, String, String)> {
        let awaiting = self.awaiting.as_ref()?;
        let pull = awaiting.pull?;
        let mut body = format!(
            "### Driftless: merge commit `{}` was not applied\n\nIts plan is not the one reviewed on this pull request:\n\n",
            awaiting.commit.short()
        );
        for (app, (digest, reason)) in &awaiting.apps {
            body.push_str(&format!("- `{app}`: {reason}; digest now `{digest}`\n"));
        }
        let who = if approvers.is_empty() {
            "no approvers are configured".to_owned()
        } else {
            format!("approvers: {}", approvers.join(", "))
        };
        body.push_str(&format!(
            "\nReply `/driftless apply` ({who}) to apply the plan below, or run `driftless approve APP --digest D` per app.\n\n"
        ));
        let held_plan = Plan {
            target: plan.target.clone(),
            apps: plan
                .apps
                .iter()
                .filter(|app| awaiting.apps.contains_key(&app.app))
                .cloned()
                .collect(),
            diagnostics: Vec::new(),
        };
        let options = crate::report::MarkdownOptions {
            max_len: limit.saturating_sub(body.len() + awaiting.marker.len() + 200),
        };
        body.push_str(&crate::report::plan_markdown(&held_plan, sources, options));
        Some((pull, awaiting.marker.clone(), body))
    }

    /// The commit to deploy again once some held app is approved: by a `/driftless apply`
    /// comment from an approver after the new plan's comment (approving every held app), or
    /// by `driftless approve APP --digest D` naming an app's digest now.
    pub async fn approval(
        &mut self,
        forge: Option<&dyn Forge>,
        repo: Option<&RepoSlug>,
        cluster: &Cluster,
        approvers: &[String],
    ) -> Option<CommitId> {
        let awaiting = self.awaiting.as_ref()?;
        let mut approved: Vec<(AppRef, String)> = Vec::new();
        if let (Some(forge), Some(repo), Some(pull)) = (forge, repo, awaiting.pull) {
            match forge.comments(repo, pull).await {
                Ok(comments) => {
                    let ours = comments
                        .iter()
                        .find(|comment| comment.body.starts_with(&awaiting.marker))
                        .map(|comment| comment.id);
                    let by_approver = comments.iter().any(|comment| {
                        ours.is_some_and(|ours| comment.id > ours)
                            && comment.body.trim().starts_with("/driftless apply")
                            && approvers.contains(&comment.author)
                    });
                    if by_approver {
                        approved.extend(
                            awaiting
                                .apps
                                .iter()
                                .map(|(app, (digest, _))| (app.clone(), digest.full.clone())),
                        );
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, pull, "reading the pull request's comments failed; approvals wait for the next poll");
                }
            }
        }
        for (app, (digest, _)) in &awaiting.apps {
            let namespace = crate::tracker::DEFAULT_NAMESPACE;
            match crate::review::approval::read(cluster, namespace, app).await {
                Ok(Some(given)) if digest::matches(&digest.full, &given) => {
                    approved.push((app.clone(), digest.full.clone()));
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, %app, "reading the plan approval failed"),
            }
        }
        if approved.is_empty() {
            return None;
        }
        let commit = awaiting.commit.clone();
        tracing::info!(apps = ?approved.iter().map(|(app, _)| app.to_string()).collect::<Vec<_>>(), commit = %commit, "held plans approved; deploying again");
        self.approved.extend(approved);
        self.awaiting = None;
        Some(commit)
    }
}
