//! Applying exactly what was reviewed: plan digests ([`digest`]), reviewed-plan mode
//! ([`reviewed`], [`approval`]), per-app holds stored in the cluster ([`hold`]), drift issues on
//! the forge ([`drift_issues`]), commit-to-live time ([`live_time`]). The agent loop keeps one
//! [`SourceReview`] per source and calls in here with a few lines per hook; the logic lives in
//! these modules.

pub mod approval;
pub use reconcile::digest;
pub mod drift_issues;
pub mod hold;
pub mod live_time;
pub mod reviewed;

use std::collections::BTreeSet;

use analyzer::AppRef;
use chrono::{DateTime, Utc};

use crate::cluster::Cluster;
use crate::metrics::Metrics;
use crate::source::git::{CommitId, GitRepo};
use crate::sync::LivePlan;

/// What a source's worker remembers for these features between passes.
#[derive(Debug, Default)]
pub struct SourceReview {
    /// The apps a hold kept from the last deploy: deployed again once their hold lifts.
    pub held: BTreeSet<AppRef>,
    /// When the last webhook woke the source.
    pub webhook_at: Option<DateTime<Utc>>,
    /// The last deploy, while its apps are not all healthy yet.
    pub pending_live: Option<live_time::PendingLive>,
    /// Reviewed-plan mode's digests and approvals.
    pub reviewed: reviewed::Reviewed,
    /// The forge issues of drifted apps (report mode).
    pub drift_issues: drift_issues::DriftIssues,
    /// The last commit-to-live figure taken, until the web UI takes it.
    pub live: Option<(CommitId, std::time::Duration)>,
}

impl SourceReview {
    /// After a successful deploy of `commit`: its commit-to-live figure when its apps are
    /// healthy already (recorded in the metric), else a note that it waits for them (checked
    /// again by [`SourceReview::poll_live`]). Returns what to append to the summary.
    #[allow(clippy::too_many_arguments)]
    pub async fn deployed(
        &mut self,
        cluster: &Cluster,
        repo: &GitRepo,
        commit: &CommitId,
        probe: Option<LivePlan>,
        summary: &str,
        metrics: &Metrics,
        source: &str,
    ) -> String {
        self.pending_live = None;
        let webhook_at = self.webhook_at.take();
        let Some(started) = live_time::start_of(repo, commit, webhook_at) else {
            return String::new();
        };
        match live_time::live_after(cluster, started, probe.as_ref()).await {
            Some(elapsed) => {
                metrics.observe_commit_to_live(source, elapsed);
                self.live = Some((commit.clone(), elapsed));
                format!("; {}", live_time::describe(elapsed))
            }
            None => {
                if let Some(probe) = probe {
                    self.pending_live = Some(live_time::PendingLive::new(
                        commit.clone(),
                        started,
                        probe,
                        summary.to_owned(),
                    ));
                }
                "; waiting for the apps to be healthy".to_owned()
            }
        }
    }

    /// The commit and its summary with the commit-to-live figure, once the last deploy's
    /// apps are all healthy (then recorded in the metric); `None` otherwise.
    pub async fn poll_live(
        &mut self,
        cluster: &Cluster,
        metrics: &Metrics,
        source: &str,
    ) -> Option<(CommitId, String)> {
        let pending = self.pending_live.as_ref()?;
        let elapsed = pending.check(cluster).await?;
        let pending = self.pending_live.take()?;
        metrics.observe_commit_to_live(source, elapsed);
        self.live = Some((pending.commit.clone(), elapsed));
        Some((
            pending.commit,
            format!("{}; {}", pending.summary, live_time::describe(elapsed)),
        ))
    }
}
