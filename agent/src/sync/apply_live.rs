//! Apply a plan app by app: apps that write cluster-scoped objects first, in plan order, the
//! rest several at a time. An app that fails stops alone.

use std::collections::BTreeMap;

use analyzer::AppRef;
use futures::future::BoxFuture;
use tokio::sync::Semaphore;

use super::{LiveOptions, LivePlan};
use crate::apply::{self, AppApplyReport};
use crate::cluster::Cluster;
use crate::observe::{AppObservation, OrphanObservation};
use crate::plan::AppPlan;
use crate::tracker_store::TrackerStore;

/// Applies a live plan app by app. Each app stops at its first error; the others go on.
pub async fn apply_live(
    cluster: &Cluster,
    live_plan: &LivePlan,
    options: &LiveOptions,
) -> Vec<AppApplyReport> {
    apply_filtered(cluster, live_plan, options, &|_| true).await
}

/// Apps applied at once by [`apply_live`] (each still one request at a time, all within the
/// cluster's QPS budget): on a local or fast apiserver the budget is not the limit, the round
/// trips of 10,000 apps one after the other are.
const APPLY_CONCURRENCY: usize = 8;

/// A plan's observations and orphans by app, indexed once: a scan per app is quadratic in the
/// apps.
type ByApp<'a> = (
    BTreeMap<&'a AppRef, &'a AppObservation>,
    BTreeMap<&'a AppRef, &'a OrphanObservation>,
);

fn by_app(live_plan: &LivePlan) -> ByApp<'_> {
    let observations = live_plan
        .observations
        .iter()
        .map(|observation| (&observation.desired.app, observation))
        .collect();
    let orphans = live_plan
        .orphans
        .iter()
        .map(|orphan| (&orphan.app, orphan))
        .collect();
    (observations, orphans)
}

pub(super) async fn apply_filtered(
    cluster: &Cluster,
    live_plan: &LivePlan,
    options: &LiveOptions,
    wanted: &(dyn Fn(&AppRef) -> bool + Sync),
) -> Vec<AppApplyReport> {
    use futures::StreamExt as _;

    let store = TrackerStore::new(cluster, &options.tracker_namespace);
    let (observations, orphans) = by_app(live_plan);
    // Apps that write or delete cluster-scoped objects (Namespaces, CRDs, ...) go first, one
    // at a time in plan order: other apps' objects may live in them. The rest, whose changes
    // are all inside namespaces, are independent of each other and go several at a time.
    let (ordered, independent): (Vec<(usize, &AppPlan)>, Vec<_>) = live_plan
        .plan
        .apps
        .iter()
        .enumerate()
        .filter(|(_, app_plan)| wanted(&app_plan.app))
        .partition(|(_, app_plan)| {
            app_plan.changes.iter().any(|change| {
                change.object.namespace.is_none() && change.action != crate::plan::Action::Unchanged
            })
        });
    let mut reports: Vec<(usize, AppApplyReport)> = Vec::new();
    let store = &store;
    let observations = &observations;
    let orphans = &orphans;
    for (index, app_plan) in ordered {
        let observation = observations.get(&app_plan.app).copied();
        let orphan = orphans.get(&app_plan.app).copied();
        if let Some(report) =
            apply_one(cluster, store, options, observation, orphan, app_plan).await
        {
            reports.push((index, report));
        }
    }
    // The futures are built in a loop, not by a closure in the stream: closures there make the
    // agent's tasks fail to be provably `Send` (rust-lang/rust#110338).
    let mut pending = Vec::with_capacity(independent.len());
    for (index, app_plan) in independent {
        let observation = observations.get(&app_plan.app).copied();
        let orphan = orphans.get(&app_plan.app).copied();
        pending.push(apply_indexed(
            index,
            apply_one(cluster, store, options, observation, orphan, app_plan),
        ));
    }
    let concurrent: Vec<(usize, Option<AppApplyReport>)> = futures::stream::iter(pending)
        .buffer_unordered(APPLY_CONCURRENCY)
        .collect()
        .await;
    reports.extend(
        concurrent
            .into_iter()
            .filter_map(|(index, report)| report.map(|report| (index, report))),
    );
    // Reports in plan order, whatever order the apps finished in.
    reports.sort_by_key(|(index, _)| *index);
    reports.into_iter().map(|(_, report)| report).collect()
}

async fn apply_indexed(
    index: usize,
    applied: impl std::future::Future<Output = Option<AppApplyReport>>,
) -> (usize, Option<AppApplyReport>) {
    (index, applied.await)
}

/// Applies one app of a plan (or deletes an orphan); `None` when the plan's app was neither
/// observed nor an orphan.
async fn apply_one(
    cluster: &Cluster,
    store: &TrackerStore<'_>,
    options: &LiveOptions,
    observation: Option<&AppObservation>,
    orphan: Option<&OrphanObservation>,
    app_plan: &AppPlan,
) -> Option<AppApplyReport> {
    match (observation, orphan) {
        (Some(observation), _) => {
            Some(apply::apply_app(cluster, store, observation, app_plan, &options.apply).await)
        }
        (None, Some(orphan)) => Some(apply::delete_app(cluster, store, orphan, app_plan).await),
        (None, None) => None,
    }
}

/// [`apply_live`] of the `wanted` apps, each app on its own once it holds one of `permits`
/// (shared with the caller's other work, so a process applies at most that many apps at
/// once); the reports come back in the plan's app order.
///
/// Boxed as `Send` with concrete lifetimes, so the agent's source tasks stay provably `Send`
/// (rust-lang/rust#110338).
pub(super) fn apply_bounded<'a>(
    cluster: &'a Cluster,
    live_plan: &'a LivePlan,
    options: &'a LiveOptions,
    wanted: &'a (dyn Fn(&AppRef) -> bool + Sync),
    permits: &'a Semaphore,
) -> BoxFuture<'a, Vec<AppApplyReport>> {
    Box::pin(async move {
        let store = TrackerStore::new(cluster, &options.tracker_namespace);
        let (observations, orphans) = by_app(live_plan);
        let store = &store;
        // The futures are built in a loop, not by a closure (see `apply_filtered`).
        let mut tasks: Vec<BoxFuture<'_, Option<AppApplyReport>>> = Vec::new();
        for app_plan in live_plan.plan.apps.iter().filter(|app| wanted(&app.app)) {
            let observation = observations.get(&app_plan.app).copied();
            let orphan = orphans.get(&app_plan.app).copied();
            tasks.push(Box::pin(async move {
                // Boxed when it starts (after its permit), not up front: an unpolled future
                // takes its whole state machine's size (~9 KB), so every app's apply held at
                // once was ~90 MB at 10,000 apps.
                Box::pin(apply_one(
                    cluster,
                    store,
                    options,
                    observation,
                    orphan,
                    app_plan,
                ))
                .await
            }));
        }
        run_bounded(tasks, permits)
            .await
            .into_iter()
            .flatten()
            .collect()
    })
}

/// Runs every task, each holding one of `permits` while it runs, and returns the results in
/// task order. (Boxed tasks and a plain loop, not a closure: a closure returning a borrowing
/// future makes the source task's future fail `Send` for all lifetimes.)
fn run_bounded<'a, R: Send + 'a>(
    tasks: Vec<BoxFuture<'a, R>>,
    permits: &'a Semaphore,
) -> BoxFuture<'a, Vec<R>> {
    let mut guarded: Vec<BoxFuture<'a, R>> = Vec::with_capacity(tasks.len());
    for task in tasks {
        guarded.push(Box::pin(async move {
            // The semaphore is never closed; `ok()` only avoids an unwrap.
            let _permit = permits.acquire().await.ok();
            task.await
        }));
    }
    Box::pin(futures::future::join_all(guarded))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// The most tasks seen running at once under `n_permits`, and the results' order.
    async fn max_in_flight(n_permits: usize, n_items: usize) -> (usize, Vec<usize>) {
        let permits = Semaphore::new(n_permits);
        let in_flight = AtomicUsize::new(0);
        let max_seen = AtomicUsize::new(0);
        let mut tasks: Vec<BoxFuture<'_, usize>> = Vec::new();
        for item in 0..n_items {
            let (in_flight, max_seen) = (&in_flight, &max_seen);
            tasks.push(Box::pin(async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                max_seen.fetch_max(now, Ordering::SeqCst);
                // Yield a few times so the other tasks get to start if they are allowed to.
                for _ in 0..5 {
                    tokio::task::yield_now().await;
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
                item * 10
            }));
        }
        let results = run_bounded(tasks, &permits).await;
        (max_seen.load(Ordering::SeqCst), results)
    }

    #[tokio::test]
    async fn concurrency_bounds_the_tasks_in_flight() {
        let (max, results) = max_in_flight(2, 7).await;
        assert_eq!(max, 2);
        assert_eq!(results, vec![0, 10, 20, 30, 40, 50, 60]);
        let (max, _) = max_in_flight(1, 4).await;
        assert_eq!(max, 1);
        let (max, _) = max_in_flight(8, 3).await;
        assert_eq!(max, 3);
    }
}
