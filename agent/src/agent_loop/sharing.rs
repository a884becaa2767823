//! The source worker's side of sharing apps with other replicas (`crate::shard`): which apps
//! of a render this replica plans, what it does when the members change, and the results it
//! publishes for the leader's summary status.

use std::sync::Arc;

use analyzer::{AppRef, SharedOutput};

use super::select::Selection;
use super::{SUMMARY_CONTEXT, SourceWorker};
use crate::shard::source::SourceShard;
use crate::sync::{Orphans, SharedApps};

impl SourceWorker {
    /// The members changed: apps this replica gained are deployed now, at the deployed commit.
    pub(super) async fn rebalance(&mut self) {
        let Some(deployed) = &self.deployed else {
            return;
        };
        let (commit, output) = (deployed.commit.clone(), deployed.output.clone());
        if self.share(&output).await {
            self.deploy(commit).await;
        }
        self.share_results().await;
    }

    /// With replicas sharing the apps: publishes this replica's results at the deployed commit;
    /// the leader writes the commit's summary status once every app has one.
    pub(super) async fn share_results(&mut self) {
        let (Some(shard), Some(deployed)) = (&mut self.shard, &self.deployed) else {
            return;
        };
        let states = (self.records.iter())
            .filter(|(app, _)| shard.owns(app))
            .map(|(app, record)| (app.clone(), record.state))
            .collect();
        let apps: Vec<&AppRef> = deployed.output.app_refs().collect();
        let commit = deployed.commit.clone();
        if let Some((state, summary)) = shard.share_results(commit.as_str(), states, &apps).await {
            self.status(&commit, SUMMARY_CONTEXT, state, &summary);
        }
    }

    /// With replicas sharing the apps: assigns the render's apps to the members. Apps gained
    /// are planned again, apps lost forgotten. True when this replica gained apps or some of
    /// its apps wait for their claim.
    pub(super) async fn share(&mut self, output: &SharedOutput) -> bool {
        let Some(shard) = &mut self.shard else {
            return false;
        };
        let moved = shard.rebalance(output.app_refs()).await;
        for app in &moved.lost {
            self.records.remove(app);
            self.unsettled.remove(app);
        }
        for app in &moved.gained {
            self.records.remove(app);
            self.unsettled.insert(app.clone());
        }
        !moved.gained.is_empty() || shard.is_waiting()
    }

    /// With replicas sharing the apps: keeps of the selection the apps this replica owns and
    /// holds the claim of (an owned app claimed elsewhere is planned again later); only the
    /// leader looks for apps removed from Git.
    pub(super) async fn narrow(&mut self, selection: &mut Selection) {
        let Some(shard) = &mut self.shard else {
            return;
        };
        let (claimed, waiting) = shard.claim(&selection.output.apps).await;
        self.unsettled.extend(waiting);
        if !shard.is_leader() {
            selection.orphans = Orphans::Skip;
        }
        let diagnostics = selection.output.diagnostics.clone();
        selection.output = Arc::new(SharedApps {
            apps: claimed,
            diagnostics,
        });
    }
}

/// Resolves when the members changed (see [`SourceShard::changed`]); never without sharding.
pub(super) async fn shard_changed(shard: &mut Option<SourceShard>) {
    match shard {
        Some(shard) => shard.changed().await,
        None => std::future::pending().await,
    }
}
