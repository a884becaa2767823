//! Pruning and ownership: a removed component or app is pruned and nothing else is (not a
//! similar unowned object, not what the app keeps), and an object that lost our marks never is.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};

use crate::support::cli::{Repo, expect_config_maps, expect_success};
use crate::support::cluster::{TestCluster, TestNamespace};

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
