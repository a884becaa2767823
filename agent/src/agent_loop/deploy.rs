//! A deploy of a commit of the tracked branch: render, select the apps that changed, sync them
//! through the deploy pass, then the statuses, records, notifications and plan page it leaves;
//! and the reviewed-plan and hold checks that call for a deploy again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Instant, SystemTime};

use analyzer::model::Application;
use analyzer::{AppRef, AppRender, Severity, SharedOutput, SourceMap};
use tracing::Instrument;

use super::pass::{Pass, PassOutcome};
use super::render::Rendered;
use super::select::Selection;
use super::statuses::{
    app_results_from_sync, apps_with_own_status, failed_apps, own_status_note, page_rows, summarize,
};
use super::{
    AppRecord, AppResults, Deployed, SUMMARY_CONTEXT, Selected, SourceWorker, app_context,
    note_memory,
};
use crate::forge::StatusState;
use crate::forge::outbox::ForgeOp;
use crate::metrics::ErrorKind;
use crate::plan::Plan;
use crate::prune_guard;
use crate::report::plan_human;
use crate::server::ui::record as ui_record;
use crate::source::git::CommitId;
use crate::sync::{self, LivePlan, Orphans};

/// What a deploy's plan page shows besides the plan.
struct DeployPage<'a> {
    summary: &'a str,
    results: &'a AppResults,
    warnings: &'a [String],
    n_unchanged: usize,
}

/// What a deploy's sync left to report: the results per app, the plan, and what the deploy
/// pass kept besides.
struct Deployment {
    results: AppResults,
    plan: Plan,
    /// The workflows' warnings, for the plan page.
    warnings: Vec<String>,
    /// The apps deployed through their workflow.
    workflows: BTreeMap<AppRef, Application>,
    /// The desired objects of the apps applied as a whole, to time their going live.
    probe: Option<LivePlan>,
}

impl SourceWorker {
    /// Deploys a commit of the tracked branch: plans and applies the apps whose render changed
    /// (see [`SourceWorker::select`]); the others keep their last result.
    pub(super) async fn deploy(&mut self, commit: CommitId) {
        let span = tracing::info_span!("deploy", source = %self.config.name, commit = %commit, revision = commit.short());
        let started = Instant::now();
        async {
            let Some(rendered) = self.render_to_deploy(&commit).await else {
                return;
            };
            let n_apps = rendered.output.len();
            let selection = self.select_to_deploy(&commit, &rendered).await;
            let scanned = !matches!(selection.orphans, Orphans::Skip);
            let selected = Selected {
                output: selection.output.clone(),
                sources: rendered.sources.clone(),
                source_objects: rendered.output.object_count(),
            };
            // Apps with a workflow are applied step by step by it (agent::workflow), the rest
            // as a whole (the plan already dropped what that apply does not read).
            let pass = (self.sync_pass(&selected, &commit, &selection.orphans, Pass::Deploy)).await;
            note_memory("apply");
            let deployment = self.deployment(&commit, pass, started);
            let failed = self.report_apps(&commit, &deployment.results, n_apps);
            self.keep_records(&rendered.output, &selection, &deployment, scanned);
            let Deployment {
                results,
                plan: whole_plan,
                warnings,
                probe,
                ..
            } = deployment;
            let summary =
                (self.summarize_deploy(&commit, &results, &failed, &whole_plan, &selection, probe))
                    .await;
            self.post_merge_plan(&whole_plan, &rendered.sources);
            let page = DeployPage {
                summary: &summary,
                results: &results,
                warnings: &warnings,
                n_unchanged: selection.n_unchanged,
            };
            self.store_deploy_page(&commit, page, whole_plan);
            note_memory("deploy");
            tracing::info!(
                apps = n_apps,
                planned = selection.output.apps.len(),
                failed = failed.len(),
                "deployed"
            );
            self.deployed = Some(Deployed {
                commit,
                output: rendered.output,
                sources: rendered.sources,
            });
            self.share_results().await;
        }
        .instrument(span)
        .await;
    }

    /// Renders `commit` for a deploy; `None`, with the commit's status and a notification,
    /// when the render failed or found no Application (applying it would prune every app).
    async fn render_to_deploy(&mut self, commit: &CommitId) -> Option<Rendered> {
        if self.shard.is_none() {
            self.status(
                commit,
                SUMMARY_CONTEXT,
                StatusState::Pending,
                "rendering and planning",
            );
        }
        let rendered = match self.render(commit).await {
            Ok(rendered) => rendered,
            Err(message) => {
                tracing::error!(error = %message, "render failed");
                self.refuse(commit, StatusState::Error, &message);
                return None;
            }
        };
        note_memory("render");
        let n_apps = rendered.output.len();
        self.shared.metrics.set_apps(&self.config.name, n_apps);
        if n_apps == 0 {
            let message = no_apps_message(&rendered.output);
            tracing::error!("{message}");
            self.status(commit, SUMMARY_CONTEXT, StatusState::Failure, &message);
            self.store_page(commit, "deploy (refused)", &[], &message);
            self.notify_refused(commit, &message);
            return None;
        }
        Some(rendered)
    }

    /// A deploy of `commit` that did not start: its summary status and a notification.
    fn refuse(&self, commit: &CommitId, state: StatusState, message: &str) {
        self.status(commit, SUMMARY_CONTEXT, state, message);
        self.notify_refused(commit, message);
    }

    fn notify_refused(&self, commit: &CommitId, message: &str) {
        let page = self.page_url(commit);
        (self.shared.notifier).deploy_refused(&self.config.name, commit.as_str(), message, page);
    }

    /// The apps of `rendered` this deploy plans (those that changed, of this replica's share),
    /// each with a pending status.
    async fn select_to_deploy(&mut self, commit: &CommitId, rendered: &Rendered) -> Selection {
        self.share(&rendered.output).await;
        let mut selection = self.select(&rendered.output, true);
        self.narrow(&mut selection).await;
        // Pending statuses only where every app will get its own result (see
        // `apps_with_own_status`).
        if selection.output.apps.len() > self.shared.app_status_limit {
            return selection;
        }
        for app in &selection.output.apps {
            self.status(
                commit,
                &app_context(app.app()),
                StatusState::Pending,
                "planning",
            );
        }
        selection
    }

    /// The results per app of a deploy's sync, with its holds marked, recorded for the web UI.
    fn deployment(&mut self, commit: &CommitId, pass: PassOutcome, started: Instant) -> Deployment {
        let PassOutcome {
            synced,
            workflows,
            holds,
            probe,
        } = pass;
        let (fleet, source) = (&self.shared.ui.fleet, &self.config.name);
        ui_record::workflows(fleet, source, synced.workflow_results());
        let warnings = sync::workflow_warnings(synced.workflow_results());
        let mut results = app_results_from_sync(&synced);
        let held = synced.held();
        let whole_plan = synced.plan;
        let metrics = &self.shared.metrics;
        self.review.held =
            crate::review::hold::mark_held(&mut results, &held, &holds, metrics, source);
        self.review
            .reviewed
            .fail_held(&mut results, &mut self.review.held);
        ui_record::deploy(
            fleet,
            &ui_record::Deploy {
                source,
                cluster: self.cluster.name(),
                commit: &ui_record::commit_info(self.git.repo(), commit),
                plan: &whole_plan,
                results: &results,
                held: &self.review.held,
                finished_at: SystemTime::now(),
                duration: started.elapsed(),
            },
        );
        Deployment {
            results,
            plan: whole_plan,
            warnings,
            workflows,
            probe,
        }
    }

    /// Logs each app's result and sets its commit status; returns the apps that failed, which
    /// are notified.
    fn report_apps(&self, commit: &CommitId, results: &AppResults, n_apps: usize) -> Vec<String> {
        let mut failed = Vec::new();
        let own_status: BTreeSet<&AppRef> =
            apps_with_own_status(results, self.shared.app_status_limit)
                .into_iter()
                .collect();
        for (app, (state, description)) in results {
            let span = tracing::info_span!("reconcile", app.namespace = %app.namespace, app.name = %app.name, revision = commit.short(), commit = %commit);
            let _entered = span.enter();
            match state {
                StatusState::Success => tracing::info!(%description, "app reconciled"),
                StatusState::Pending => tracing::info!(%description, "app held"),
                _ => {
                    self.shared.metrics.record_error(ErrorKind::Apply);
                    tracing::warn!(%description, "app failed");
                    self.shared.events.deploy_failed(app, description);
                    failed.push(app.to_string());
                }
            }
            if own_status.contains(app) {
                self.status(commit, &app_context(app), *state, description);
            }
        }
        self.shared.notifier.deploy_failed(
            &self.config.name,
            commit.as_str(),
            n_apps,
            failed_apps(results),
            self.page_url(commit),
        );
        failed
    }

    /// Keeps each rendered app's result for the next deploy's selection, and whether the next
    /// deploy must look for apps removed from Git again.
    fn keep_records(
        &mut self,
        output: &SharedOutput,
        selection: &Selection,
        deployment: &Deployment,
        scanned: bool,
    ) {
        let results = &deployment.results;
        // Apps that left Git and whose deletion completed are forgotten; a deletion that
        // failed, or a tracker list that failed, makes the next deploy look again. The
        // render is sorted by app: a binary search, not a set of every app per commit.
        let in_render = |app: &AppRef| output.position(app).is_some();
        let listing_failed = deployment
            .plan
            .diagnostics
            .iter()
            .any(|diagnostic| diagnostic.rule == "cluster-error");
        let gc_failed = results
            .iter()
            .any(|(app, (state, _))| !in_render(app) && *state != StatusState::Success);
        if scanned {
            self.gc_pending = listing_failed || gc_failed;
        } else if gc_failed {
            self.gc_pending = true;
        }
        // Records are kept for rendered apps only: with no app removed, none to drop.
        if selection.removed {
            self.records.retain(|app, _| in_render(app));
            self.unsettled.retain(|app| in_render(app));
        }
        for (app, (state, _)) in results {
            if in_render(app) {
                let record = AppRecord {
                    state: *state,
                    uses_workflow: deployment.workflows.contains_key(app),
                };
                if record.state == StatusState::Success && !record.uses_workflow {
                    self.unsettled.remove(app);
                } else {
                    self.unsettled.insert(app.clone());
                }
                self.records.insert(app.clone(), record);
            }
        }
        // A planned app without a result has no record: planned again next time.
        for app in &selection.output.apps {
            if !results.contains_key(app.app()) {
                self.unsettled.insert(app.app().clone());
            }
        }
    }

    /// The deploy's summary (set as the commit's summary status without sharding): the
    /// results, or the prune budget that held the pass (which then waits for an approval), with
    /// the apps left unchanged, the holds and the commit-to-live time.
    async fn summarize_deploy(
        &mut self,
        commit: &CommitId,
        results: &AppResults,
        failed: &[String],
        whole_plan: &Plan,
        selection: &Selection,
        probe: Option<LivePlan>,
    ) -> String {
        let (mut summary_state, mut summary) = summarize(results, failed);
        // A pass held by its prune budget says so on the commit, with the count, and waits
        // for an approval (polled, see `poll_step`).
        self.awaiting_approval = None;
        if let Some(held) = whole_plan
            .diagnostics
            .iter()
            .find(|diagnostic| diagnostic.rule == prune_guard::RULE_PRUNE_BUDGET)
        {
            summary_state = StatusState::Failure;
            summary = held.message.clone();
            let page = self.page_url(commit);
            (self.shared.notifier).prune_held(
                &self.config.name,
                commit.as_str(),
                &held.message,
                page,
            );
            self.shared.events.prunes_held(whole_plan, &held.message);
            let seen = self.stored_approval().await;
            self.awaiting_approval = Some((commit.clone(), seen));
        }
        if selection.n_unchanged > 0 {
            summary = format!(
                "{summary}; {} app(s) unchanged, not planned",
                selection.n_unchanged
            );
        }
        summary.push_str(&crate::review::hold::summary_note(&self.review.held));
        if let Some(note) = own_status_note(results, self.shared.app_status_limit) {
            summary.push_str(&note);
        }
        if summary_state == StatusState::Success {
            let (metrics, source) = (&self.shared.metrics, &self.config.name);
            let note = (self.review)
                .deployed(
                    &self.cluster,
                    self.git.repo(),
                    commit,
                    probe,
                    &summary,
                    metrics,
                    source,
                )
                .await;
            summary.push_str(&note);
            ui_record::commit_to_live(&self.shared.ui.fleet, self.review.live.take());
        }
        // Replicas sharing the apps summarise from all their results (`share_results`).
        if self.shard.is_none() {
            self.status(commit, SUMMARY_CONTEXT, summary_state, &summary);
        }
        summary
    }

    /// Stores the deploy's plan page; the plan is dropped before the page is stored.
    fn store_deploy_page(&self, commit: &CommitId, page: DeployPage<'_>, whole_plan: Plan) {
        let rows = page_rows(page.results);
        let mut body = format!("{}\n\n{}", page.summary, plan_human(&whole_plan));
        if !page.warnings.is_empty() {
            body = format!("{}\n\n{body}", page.warnings.join("\n"));
        }
        if page.n_unchanged > 0 {
            body = format!(
                "{} app(s) unchanged since their last deploy: not planned (the drift schedule checks them).\n\n{body}",
                page.n_unchanged
            );
        }
        drop(whole_plan);
        self.store_page(
            commit,
            &format!("deploy of {}", self.config.branch),
            &rows,
            &body,
        );
    }

    /// Reviewed-plan mode: the held apps' new plan, posted on their pull request.
    pub(super) fn post_merge_plan(&self, plan: &Plan, sources: &SourceMap) {
        let (Some(mode), Some(outbox), Some(repo)) = (
            &self.config.reviewed_plan,
            &self.shared.outbox,
            &self.config.forge_repo,
        ) else {
            return;
        };
        let limit = self
            .shared
            .forge
            .as_ref()
            .map_or(60_000, |forge| forge.comment_limit());
        if let Some((pull, marker, body)) =
            self.review
                .reviewed
                .comment(plan, sources, &mode.approvers, limit)
        {
            outbox.send(ForgeOp::Comment {
                repo: repo.clone(),
                pull,
                marker,
                body,
            });
        }
    }

    /// Reviewed-plan mode: the commit to deploy again once a held plan is approved.
    pub(super) async fn plan_approved(&mut self) -> Option<CommitId> {
        let mode = self.config.reviewed_plan.as_ref()?;
        let forge = self.shared.forge.as_deref();
        let (repo, cluster) = (self.config.forge_repo.as_ref(), &self.shared.cluster);
        self.review
            .reviewed
            .approval(forge, repo, cluster, &mode.approvers)
            .await
    }

    /// The deployed commit, when a hold that kept some of its apps has lifted since.
    pub(super) async fn hold_lifted(&self) -> Option<CommitId> {
        let deployed = self.deployed.as_ref()?;
        if self.review.held.is_empty() {
            return None;
        }
        let holds = self.holds(None).await;
        let lifted = crate::review::hold::lifted(&self.review.held, &holds);
        (!lifted.is_empty()).then(|| deployed.commit.clone())
    }
}

fn no_apps_message(output: &SharedOutput) -> String {
    let first_problem = output
        .diagnostics
        .iter()
        .find(|diagnostic| diagnostic.severity == Severity::Error)
        .map(|diagnostic| format!(" (first problem: {})", diagnostic.message))
        .unwrap_or_default();
    format!(
        "no Applications found under the source's paths; refusing to apply (it would prune every app){first_problem}"
    )
}
