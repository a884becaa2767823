//! The drift schedule's check: re-plans the deployed revision against the cluster and reports
//! drift (status, metric, issues, notifications) or corrects it.

use std::sync::Arc;

use tracing::Instrument;

use super::pass::Pass;
use super::statuses::app_results_from_sync;
use super::{DRIFT_CONTEXT, Selected, SourceWorker};
use crate::config::DriftMode;
use crate::forge::StatusState;
use crate::plan::Action;
use crate::server::ui::record as ui_record;
use crate::sync::{Orphans, SharedApps};

impl SourceWorker {
    /// Re-plans the deployed revision against the cluster; reports or corrects drift.
    pub(super) async fn drift_check(&mut self) {
        let (Some(deployed), Some(drift)) = (&self.deployed, self.shared.drift.clone()) else {
            return;
        };
        let commit = deployed.commit.clone();
        // Drift checks plan every app, shared with the deployed render (no copy).
        let mut rendered = Selected {
            output: Arc::new(SharedApps {
                apps: deployed.output.apps().collect(),
                diagnostics: deployed.output.diagnostics.clone(),
            }),
            sources: deployed.sources.clone(),
            source_objects: deployed.output.object_count(),
        };
        let mut orphans = Orphans::NotRendered;
        if let Some(shard) = &mut self.shard {
            // Only the apps this replica owns and has claimed; orphans are the leader's.
            let (claimed, _) = shard.claim(&rendered.output.apps).await;
            rendered.output = Arc::new(SharedApps {
                apps: claimed,
                diagnostics: rendered.output.diagnostics.clone(),
            });
            if !shard.is_leader() {
                orphans = Orphans::Skip;
            }
        }
        let span = tracing::info_span!("drift", source = %self.config.name, commit = %commit, revision = commit.short());
        async {
            // Every app, and every orphan: drift checks are what covers the unchanged apps.
            // Only a correction applies: a report keeps nothing of the observations.
            let pass = match drift.mode {
                DriftMode::Correct => Pass::DriftCorrect,
                DriftMode::Report => Pass::DriftReport,
            };
            let outcome = self.sync_pass(&rendered, &commit, &orphans, pass).await;
            let synced = &outcome.synced;
            let source = &self.config.name;
            ui_record::drift(&self.shared.ui.fleet, source, commit.as_str(), &synced.plan);
            self.shared
                .events
                .drift_checked(&synced.plan, commit.short());
            let mut drifted = Vec::new();
            for app_plan in &synced.plan.apps {
                let has_drift = app_plan
                    .changes
                    .iter()
                    .any(|change| change.action != Action::Unchanged);
                let app = &app_plan.app;
                (self.shared.metrics).set_drifted(source, &app.namespace, &app.name, has_drift);
                if has_drift {
                    drifted.push(app_plan.app.to_string());
                }
            }
            if let (DriftMode::Report, Some(outbox), Some(repo)) =
                (drift.mode, &self.shared.outbox, &self.config.forge_repo)
            {
                (self.review.drift_issues).sync(
                    outbox,
                    repo,
                    source,
                    &commit,
                    &synced.plan,
                    &rendered.sources,
                );
            }
            if drifted.is_empty() {
                self.shared.notifier.drift_cleared(source);
                tracing::info!("no drift");
                self.status(&commit, DRIFT_CONTEXT, StatusState::Success, "no drift");
                return;
            }
            tracing::warn!(apps = ?drifted, mode = ?drift.mode, "drift found");
            let page = self.page_url(&commit);
            self.shared
                .notifier
                .drift_found(source, commit.as_str(), &drifted, page);
            let (state, description) = match drift.mode {
                DriftMode::Report => (
                    StatusState::Failure,
                    format!("drift in {} app(s): {}", drifted.len(), drifted.join(", ")),
                ),
                DriftMode::Correct => {
                    let mut results = app_results_from_sync(synced);
                    let metrics = &self.shared.metrics;
                    let held = crate::review::hold::mark_held(
                        &mut results,
                        &synced.held(),
                        &outcome.holds,
                        metrics,
                        source,
                    );
                    ui_record::corrected(&self.shared.ui.fleet, source, &results);
                    let corrected = crate::review::hold::drift_corrected(&results, &held, &drifted);
                    if corrected.0 == StatusState::Success {
                        for app_plan in &synced.plan.apps {
                            let app = &app_plan.app;
                            metrics.set_drifted(source, &app.namespace, &app.name, false);
                        }
                    }
                    corrected
                }
            };
            self.status(&commit, DRIFT_CONTEXT, state, &description);
        }
        .instrument(span)
        .await;
    }
}
