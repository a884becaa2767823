//! Commit-to-live time: from a deployed commit's time (or the arrival of the webhook that
//! announced it) to its apps applied and healthy. Shown in the summary status and on the plan
//! page, and exported as `driftless_commit_to_live_seconds`.
//!
//! Health is read once right after the apply; apps still progressing are read again at each
//! poll until healthy, so the figure's resolution is the poll interval. An app nothing rates
//! (plain ConfigMaps) is live once applied.

use std::collections::BTreeMap;

use analyzer::AppRef;
use chrono::{DateTime, Utc};

use crate::cluster::Cluster;
use crate::health::HealthStatus;
use crate::observe::{AppObservation, ApplyNeeds};
use crate::planner::LiveObjects;
use crate::source::git::{CommitId, GitRepo};
use crate::sync::LivePlan;

/// Above this many applied apps, health is not re-read for the figure (a plan's copy of every
/// app's desired objects would double a large deploy's memory): the figure is then taken when
/// the apply finished.
const MAX_PROBED_APPS: usize = 500;

/// A deploy waiting for its apps to be healthy.
#[derive(Debug, Clone)]
pub struct PendingLive {
    pub commit: CommitId,
    started: DateTime<Utc>,
    /// The desired objects of the apps applied, to read their health again.
    probe: LivePlan,
    /// The summary status posted without the figure, to post again with it.
    pub summary: String,
}

/// When the clock of `commit` starts: its committer time, or the arrival of the webhook that
/// woke the deploy when that is later (the forge announced it late, or the clocks differ).
pub fn start_of(
    repo: &GitRepo,
    commit: &CommitId,
    webhook_at: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    // The later of the two: a webhook about something else (a pull request) that woke an
    // earlier poll must not start the clock of a commit made after it.
    let committed = repo
        .commit_summary(commit)
        .ok()
        .and_then(|(_, _, seconds)| DateTime::from_timestamp(seconds, 0));
    committed.max(webhook_at)
}

/// The desired objects of the apps of `plan` that are `applied` as a whole, kept to read their
/// health after the apply; `None` for a deploy too large to probe.
pub fn probe(plan: &LivePlan, applied: &dyn Fn(&AppRef) -> bool) -> Option<LivePlan> {
    let observations = || {
        plan.observations
            .iter()
            .filter(|observation| applied(&observation.desired.app))
    };
    if observations().count() > MAX_PROBED_APPS {
        return None;
    }
    Some(LivePlan {
        plan: crate::plan::Plan {
            target: plan.plan.target.clone(),
            apps: Vec::new(),
            diagnostics: Vec::new(),
        },
        observations: observations()
            .map(|observation| AppObservation {
                desired: observation.desired.clone(),
                live: LiveObjects::default(),
                tracker: None,
                tracker_error: None,
                apply: ApplyNeeds::Nothing,
            })
            .collect(),
        orphans: Vec::new(),
        health: BTreeMap::new(),
        statuses: plan
            .statuses
            .iter()
            .filter(|(app, _)| applied(app))
            .map(|(app, statuses)| (app.clone(), statuses.clone()))
            .collect(),
    })
}

/// How long `commit` took to go live, when every probed app is healthy now; `None` while some
/// app is still on its way.
pub async fn live_after(
    cluster: &Cluster,
    started: DateTime<Utc>,
    probe: Option<&LivePlan>,
) -> Option<std::time::Duration> {
    if let Some(probe) = probe {
        let health = crate::sync::read_health(cluster, probe).await;
        if health
            .values()
            .any(|app| app.health.status != HealthStatus::Healthy)
        {
            return None;
        }
    }
    Some((Utc::now() - started).to_std().unwrap_or_default())
}

impl PendingLive {
    pub fn new(
        commit: CommitId,
        started: DateTime<Utc>,
        probe: LivePlan,
        summary: String,
    ) -> PendingLive {
        PendingLive {
            commit,
            started,
            probe,
            summary,
        }
    }

    /// How long it took, once every app is healthy.
    pub async fn check(&self, cluster: &Cluster) -> Option<std::time::Duration> {
        live_after(cluster, self.started, Some(&self.probe)).await
    }
}

/// `live 14s after the commit`, in whole seconds (minutes past 10 minutes).
pub fn describe(elapsed: std::time::Duration) -> String {
    let seconds = elapsed.as_secs();
    if seconds < 600 {
        format!("live {seconds}s after the commit")
    } else {
        format!("live {}m after the commit", seconds / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_seconds_then_minutes() {
        assert_eq!(
            describe(std::time::Duration::from_secs(14)),
            "live 14s after the commit"
        );
        assert_eq!(
            describe(std::time::Duration::from_secs(3600)),
            "live 60m after the commit"
        );
    }
}
