//! The agent's watch cache against the real cluster: once synced, a plan of unchanged
//! apps makes no request at all (no LIST, no GET); an out-of-band change is seen as drift
//! through the watch; an object deleted out of band is reported, its absence read from the
//! apiserver (the cache never answers "absent"). Small, so it runs in seconds.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};

use agent::cluster::{Cluster, ClusterOptions};

use agent::plan::Action;
use agent::sync::{LiveOptions, LivePlan, apply_live, plan_live};
use analyzer::{ClusterVersion, Definitions, RenderOptions, Snapshot};

use crate::support::apps::config_map_apps;
use crate::support::cluster::{TestCluster, TestNamespace};

const APPS: usize = 5;

/// Generous: the 2-core machine may be loaded by other builds and a 10k-app cluster.
const DEADLINE: Duration = Duration::from_secs(90);

/// The agent client's read timeout in this test (the default is 30 s).
const READ_TIMEOUT: Duration = Duration::from_secs(8);

fn snapshot(namespace: &str) -> Snapshot {
    config_map_apps(namespace, APPS, "blue")
}

/// The actions of app `index`'s changes.
fn actions(plan: &LivePlan, index: usize) -> Vec<Action> {
    let name = format!("app-{index}");
    plan.plan
        .apps
        .iter()
        .filter(|app| app.app.name == name)
        .flat_map(|app| app.changes.iter().map(|change| change.action))
        .collect()
}

fn all_unchanged(plan: &LivePlan) -> bool {
    plan.plan
        .apps
        .iter()
        .flat_map(|app| &app.changes)
        .all(|change| change.action == Action::Unchanged)
}

#[tokio::test]
async fn the_watch_cache_plans_unchanged_apps_without_requests_and_sees_out_of_band_changes()
-> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "watch-cache").await?;
    let (output, _) = analyzer::render_snapshot(
        &snapshot(&ns.name),
        &Definitions::builtin(),
        &RenderOptions {
            cluster_version: ClusterVersion::release(1, 34),
            ..RenderOptions::default()
        },
    );
    let policies = agent::live::policies(&output);
    let mut options = LiveOptions {
        tracker_namespace: ns.name.clone(),
        ..LiveOptions::default()
    };
    options.apply.source = Some(format!("e2e-{}", ns.name));

    // The agent's client: its first plan starts the watches (and LISTs, as without a cache),
    // its apply writes through the same client, so the cache knows of those writes.
    // A short read timeout: a watch that outlived it would break and list again (the cache
    // ends each watch request before it; checked below after a quiet spell longer than it).
    let client_options = ClusterOptions {
        timeout: READ_TIMEOUT,
        ..ClusterOptions::default()
    };
    let agent = Cluster::connect(&cluster.kubeconfig, None, &client_options)
        .await?
        .with_watch_cache();
    let first = plan_live(&agent, &output, &policies, None, &options).await;
    assert!(!first.plan.has_errors(), "{:?}", first.plan);
    for report in apply_live(&agent, &first, &options).await {
        assert_eq!(
            report.outcome,
            agent::apply::ApplyOutcome::Applied,
            "{report:?}"
        );
    }

    // Synced and caught up with our own writes: then a plan of the unchanged apps is memory only.
    let deadline = Instant::now() + DEADLINE;
    let requests = loop {
        let before = agent.requests();
        let plan = plan_live(&agent, &output, &policies, None, &options).await;
        let requests = agent.requests() - before;
        assert!(all_unchanged(&plan), "{:?}", plan.plan);
        if requests == 0 {
            break requests;
        }
        if Instant::now() > deadline {
            bail!(
                "the plan still made {requests} requests after {DEADLINE:?}: {:?}",
                agent.watch_stats()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(requests, 0);
    // A quiet spell longer than the client's read timeout: the watch is renewed, not broken.
    tokio::time::sleep(READ_TIMEOUT + Duration::from_secs(3)).await;
    let before = agent.requests();
    let plan = plan_live(&agent, &output, &policies, None, &options).await;
    assert!(all_unchanged(&plan), "{:?}", plan.plan);
    assert_eq!(agent.requests() - before, 0, "{:?}", agent.watch_stats());
    let stats = agent.watch_stats().unwrap_or_default();
    // One collection: the ConfigMaps of the namespace, which holds the trackers too, listed
    // once.
    assert_eq!(
        (stats.collections, stats.synced, stats.pending, stats.lists),
        (1, 1, 0, 1),
        "{stats:?}"
    );
    assert!(stats.objects >= 2 * APPS, "{stats:?}");

    // Out of band: a kubectl-style patch of app 1's ConfigMap, and app 3's deleted.
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    config_maps
        .patch(
            "app-1-settings",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"color": "red"}})),
        )
        .await?;
    config_maps
        .delete("app-3-settings", &DeleteParams::default())
        .await?;

    let deadline = Instant::now() + DEADLINE;
    loop {
        let before = agent.requests();
        let plan = plan_live(&agent, &output, &policies, None, &options).await;
        let requests = agent.requests() - before;
        let (patched, deleted) = (actions(&plan, 1), actions(&plan, 3));
        if patched == [Action::Update] && deleted == [Action::Create] {
            // The drift of app 1 came from the watch (its dry run is the one request it
            // needs); the absence of app 3's object from a GET, not from the cache; and the
            // create it plans asks whether its namespace exists (a missing one is created).
            assert_eq!(requests, 3, "a dry run, a GET and the namespace's GET");
            for index in [0, 2, 4] {
                assert_eq!(actions(&plan, index), [Action::Unchanged]);
            }
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "out-of-band changes not seen after {DEADLINE:?}: app-1 {patched:?}, app-3 {deleted:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
