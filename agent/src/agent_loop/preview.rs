//! Plan-only previews of open pull requests into the tracked branch: a summary status on the
//! head commit and one plan comment, edited in place on new pushes.

use std::collections::BTreeMap;

use analyzer::AppRef;
use tracing::Instrument;

use super::pass::Pass;
use super::statuses::{app_results_plan_only, change_counts, page_rows, plan_digest_note};
use super::{SUMMARY_CONTEXT, Selected, SourceWorker};
use crate::config::RepoSlug;
use crate::forge::outbox::ForgeOp;
use crate::forge::{PullRequest, StatusState};
use crate::metrics::ApiTarget;
use crate::metrics::ErrorKind;
use crate::report::{MarkdownOptions, plan_human, plan_markdown};
use crate::server::ui::record as ui_record;
use crate::source::git::GitSource;

impl SourceWorker {
    /// Plan-only previews of open pull requests into the tracked branch (by the leader when
    /// replicas share the apps).
    pub(super) async fn preview_pulls(&mut self) {
        if self.shard.as_ref().is_some_and(|shard| !shard.is_leader()) {
            return;
        }
        let (Some(forge), Some(repo)) = (self.shared.forge.clone(), self.config.forge_repo.clone())
        else {
            return;
        };
        let pulls = match forge.open_pulls(&repo).await {
            Ok(pulls) => {
                self.shared.metrics.record_api_call(ApiTarget::Forge, true);
                pulls
            }
            Err(error) => {
                self.shared.metrics.record_api_call(ApiTarget::Forge, false);
                self.shared.metrics.record_error(ErrorKind::Forge);
                tracing::warn!(error = %error, "listing pull requests failed; previews wait for the next poll");
                return;
            }
        };
        self.previewed
            .retain(|number, _| pulls.iter().any(|pull| pull.number == *number));
        for pull in pulls {
            if pull.base_branch != self.config.branch
                || self.previewed.get(&pull.number) == Some(&pull.head_commit)
            {
                continue;
            }
            if let Err(refusal) = self.config.previews.admits(&pull.author, pull.from_fork) {
                // Nothing of an untrusted pull request is rendered or planned.
                tracing::info!(pull = pull.number, author = %pull.author, %refusal, "pull request not previewed");
                self.previewed.insert(pull.number, pull.head_commit.clone());
                continue;
            }
            let has_head =
                |git: &GitSource| git.repo().has_commit(&pull.head_commit).unwrap_or(false);
            if !has_head(&self.git) {
                // Only open pull requests' heads are fetched, when they are to be previewed.
                if let Err(error) = self.git.fetch_pull(pull.number).await {
                    tracing::warn!(pull = pull.number, error = %error, "fetching the pull request head failed");
                }
            }
            if !has_head(&self.git) {
                // Pushed after our fetch (or from a fork we cannot fetch): the next poll tries
                // again.
                tracing::debug!(pull = pull.number, "pull request head not fetched yet");
                continue;
            }
            self.preview(&repo, &pull).await;
            self.previewed.insert(pull.number, pull.head_commit.clone());
        }
    }

    pub(super) async fn preview(&mut self, repo: &RepoSlug, pull: &PullRequest) {
        let commit = &pull.head_commit;
        let span = tracing::info_span!("preview", source = %self.config.name, pull = pull.number, commit = %commit, revision = commit.short());
        async {
            self.status(
                commit,
                SUMMARY_CONTEXT,
                StatusState::Pending,
                "planning (preview, nothing is applied)",
            );
            let rendered = match self.render(commit).await {
                Ok(rendered) => rendered,
                Err(message) => {
                    self.status(commit, SUMMARY_CONTEXT, StatusState::Error, &message);
                    return;
                }
            };
            // Only what differs from the deployed revision: that is what the pull request changes.
            let selection = self.select(&rendered.output, false);
            let selected = Selected {
                output: selection.output,
                sources: rendered.sources.clone(),
                source_objects: rendered.output.object_count(),
            };
            let pass = self
                .sync_pass(&selected, commit, &selection.orphans, Pass::Preview)
                .await;
            let plan = &pass.synced.plan;
            self.review
                .reviewed
                .record_preview(pull.number, commit, plan);
            let limit = self
                .shared
                .forge
                .as_ref()
                .map_or(60_000, |forge| forge.comment_limit())
                .saturating_sub(200);
            let markdown =
                plan_markdown(plan, &rendered.sources, MarkdownOptions { max_len: limit });
            if let Some(outbox) = &self.shared.outbox {
                outbox.send(ForgeOp::Comment {
                    repo: repo.clone(),
                    pull: pull.number,
                    marker: crate::forge::plan_comment_marker(&self.config.name),
                    body: markdown,
                });
            }
            let results = app_results_plan_only(plan, "preview");
            ui_record::preview(&self.shared.ui.fleet, &self.config.name, pull, plan);
            let (state, description) = if plan.has_errors() {
                let n_blocked = results
                    .values()
                    .filter(|(state, _)| *state != StatusState::Success)
                    .count();
                (
                    StatusState::Failure,
                    format!("plan has errors: {n_blocked} app(s) blocked"),
                )
            } else {
                (
                    StatusState::Success,
                    format!("plan: {}{}", change_counts(plan), plan_digest_note(plan)),
                )
            };
            self.status(commit, SUMMARY_CONTEXT, state, &description);
            self.store_page(
                commit,
                &format!("preview of pull request #{}", pull.number),
                &page_rows(&results),
                &plan_human(plan),
            );
            tracing::info!(pull = pull.number, %description, "previewed");
        }
        .instrument(span)
        .await;
    }
}

/// Drops every `take-over` policy.
pub(super) fn without_take_over(policies: &mut BTreeMap<AppRef, Vec<analyzer::model::Policy>>) {
    for app_policies in policies.values_mut() {
        app_policies.retain(|policy| policy.policy_type != "take-over");
    }
}
