//! Pruning and ownership: a removed component or app is pruned and nothing else is (not a
//! similar unowned object, not what the app keeps), an object that lost our marks never is, and
//! a prune outlasts a controller that keeps writing the object.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};

use crate::support::cli::{Repo, expect_config_maps, expect_success};
use crate::support::cluster::{TestCluster, TestNamespace};

use super::failures::{plan_in_process, planned};
use super::{application, apply, config_map_component, delete, expect_plan, plan};

#[tokio::test]
async fn a_removed_component_is_pruned_and_a_similar_unowned_object_is_not() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-prune").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    // Same name prefix, same labels as ours would have, but no owner annotation: not ours.
    let bystander = ConfigMap {
        metadata: ObjectMeta {
            name: Some("extra-2".to_owned()),
            labels: Some(
                [
                    ("app.oam.dev/name".to_owned(), "shop".to_owned()),
                    ("app.oam.dev/component".to_owned(), "extra".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    config_maps
        .create(&PostParams::default(), &bystander)
        .await?;

    let repo = Repo::new(&ns)?;
    let both = vec![
        config_map_component("main", "main", "blue"),
        config_map_component("extra", "extra", "red"),
    ];
    repo.write_app("shop", &application("shop", &ns.name, &both))?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;
    expect_config_maps(&cluster, &ns.name, &["main", "extra", "extra-2"]).await?;

    repo.write_app("shop", &application("shop", &ns.name, &both[..1]))?;
    expect_plan(&cluster, &repo, vec![delete("ConfigMap/extra")])?;
    expect_success(&apply(&cluster, &repo)?, "second apply")?;
    expect_config_maps(&cluster, &ns.name, &["main", "extra-2"]).await?;
    expect_plan(&cluster, &repo, vec![])?;
    Ok(())
}

#[tokio::test]
async fn an_app_removed_from_the_source_is_deleted_except_what_it_keeps() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-gone").await?;
    let repo = Repo::new(&ns)?;
    repo.write_app(
        "stays",
        &application(
            "stays",
            &ns.name,
            &[config_map_component("cfg", "stays", "blue")],
        ),
    )?;
    let mut leaving = application(
        "leaves",
        &ns.name,
        &[
            config_map_component("cfg", "leaves", "blue"),
            config_map_component("keep", "leaves-kept", "blue"),
        ],
    );
    leaving.push_str(
        "  policies:
    - name: gc
      type: garbage-collect
      properties:
        rules:
          - selector:
              componentNames: [keep]
            strategy: never
",
    );
    repo.write_app("leaves", &leaving)?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;

    std::fs::remove_file(repo.path().join("apps/leaves.yaml"))?;
    expect_plan(&cluster, &repo, vec![delete("ConfigMap/leaves")])?;
    expect_success(&apply(&cluster, &repo)?, "apply after removal")?;
    expect_config_maps(&cluster, &ns.name, &["stays", "leaves-kept"]).await?;
    Ok(())
}

#[tokio::test]
async fn a_tracked_object_that_lost_our_marks_is_never_pruned() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-marks").await?;
    let repo = Repo::new(&ns)?;
    let both = vec![
        config_map_component("main", "main", "blue"),
        config_map_component("adopted", "adopted", "blue"),
    ];
    repo.write_app("shop", &application("shop", &ns.name, &both))?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;
    // Someone takes the object over by hand: our owner annotation is gone.
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    config_maps
        .patch(
            "adopted",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"annotations": {"driftless.dev/owner": null}}}),
            ),
        )
        .await?;

    repo.write_app("shop", &application("shop", &ns.name, &both[..1]))?;
    let (_, planned) = plan(&cluster, &repo)?;
    let adopted = planned["apps"][0]["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|change| change["name"] == "adopted")
        .context("the plan does not mention the object")?;
    assert_eq!(adopted["action"], "unchanged");
    assert!(
        adopted["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("no longer carries"),
        "{adopted:#}"
    );
    expect_success(&apply(&cluster, &repo)?, "second apply")?;
    expect_config_maps(&cluster, &ns.name, &["main", "adopted"]).await?;
    // It left the tracker: the next plan does not mention it at all.
    let (code, clean) = plan(&cluster, &repo)?;
    assert_eq!(code, 0);
    assert!(!clean.to_string().contains("\"adopted\""), "{clean:#}");
    Ok(())
}

/// A controller writing an object we prune (a PodDisruptionBudget's status moves each time one
/// of its pods goes) makes the delete's resourceVersion precondition fail: the prune reads the
/// object again and retries with pauses until the writes stop, instead of failing the app.
#[tokio::test]
async fn a_prune_outlasts_a_controller_busy_writing_the_object() -> Result<()> {
    const WRITERS: usize = 4;
    let burst = Duration::from_secs(1);
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-busy").await?;
    let repo = Repo::new(&ns)?;
    let both = vec![
        config_map_component("main", "main", "blue"),
        config_map_component("busy", "busy", "blue"),
    ];
    repo.write_app("shop", &application("shop", &ns.name, &both))?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;
    repo.write_app("shop", &application("shop", &ns.name, &both[..1]))?;
    let (live_cluster, live_plan, options) = plan_in_process(&cluster, &repo).await?;
    assert_eq!(planned(&live_plan, "shop"), vec!["delete busy"]);

    // Several writers at once, so every read-then-delete during the burst meets a newer version.
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let until = Instant::now() + burst;
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let config_maps = config_maps.clone();
            tokio::spawn(async move {
                let mut writes = 0_u32;
                while Instant::now() < until {
                    let status = serde_json::json!({
                        "metadata": {"annotations": {format!("writer-{writer}"): writes.to_string()}}
                    });
                    match config_maps
                        .patch("busy", &PatchParams::default(), &Patch::Merge(&status))
                        .await
                    {
                        Ok(_) => writes += 1,
                        Err(_) => break,
                    }
                }
                writes
            })
        })
        .collect();

    let reports = agent::sync::apply_live(&live_cluster, &live_plan, &options).await;
    let mut writes = 0;
    for writer in writers {
        writes += writer.await?;
    }
    assert!(writes >= 20, "the writers made only {writes} writes");
    let report = reports
        .iter()
        .find(|report| report.app.name == "shop")
        .context("no apply report for shop")?;
    assert_eq!(
        report.outcome,
        agent::apply::ApplyOutcome::Applied,
        "{:?}",
        report.objects
    );
    expect_config_maps(&cluster, &ns.name, &["main"]).await?;
    Ok(())
}
