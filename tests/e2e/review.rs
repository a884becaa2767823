//! Applying exactly what was reviewed, end to end with the real Gitea and the shared cluster:
//! per-app holds (`driftless hold`) stop drift correction and lift themselves when they expire;
//! the commit-to-live figure reaches the summary status, the plan page and the metrics.
//!
//! Each test keeps its waits short: drift checks every 2 seconds, holds of seconds.

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::json;

use crate::agent::{color, single_source_config};
use crate::support::agent::{AgentProcess, free_port, wait_for};
use crate::support::apps::config_map_app;
use crate::support::cli::{driftless, expect_success};
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::{Gitea, repo_with_one_app};
use crate::support::gitea_agent::{AgentLines, GiteaAgent};

/// A hold stops the drift correction of its app (reported as held, the live edit kept, the
/// `driftless_app_held` metric at 1), then expires by itself and the next check restores Git.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_stops_drift_correction_and_expires_by_itself() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "hold").await?;
    let ns = namespace.name.as_str();
    let (repo, source, commit) = repo_with_one_app(&gitea, "hold", ns).await?;
    let work = tempfile::tempdir()?;
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    let text = single_source_config(
        &source,
        &gitea.clone_url(&repo),
        &cluster,
        &gitea.url,
        Some("correct"),
        port,
        work.path(),
    );
    std::fs::write(&config, text)?;
    let agent = AgentProcess::start(&config, &[("E2E_FORGE_TOKEN", &gitea.token)], port)?;
    let drift_status = |wanted: &'static str, containing: &'static str| {
        let (gitea, repo, commit) = (&gitea, &repo, &commit);
        move || async move {
            let latest = gitea.latest_statuses(repo, commit).await?;
            Ok(latest
                .get("driftless/drift")
                .filter(|(state, description)| state == wanted && description.contains(containing))
                .cloned())
        }
    };
    wait_for("a no-drift status", drift_status("success", "no drift")).await?;

    let app = format!("{ns}/app");
    let held = driftless(
        &cluster,
        &[
            "hold",
            &app,
            "--for",
            "12s",
            "--reason",
            "incident rollback",
        ],
    )?;
    expect_success(&held, "driftless hold")?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let hack = json!({"data": {"color": "hacked"}});
    let patch = kube::api::Patch::Merge(&hack);
    (config_maps.patch("app-settings", &Default::default(), &patch)).await?;

    let (_, description) = wait_for("a held-drift status", drift_status("failure", "held")).await?;
    ensure!(description.contains(&app), "{description}");
    let live = config_maps.get("app-settings").await?;
    ensure!(color(&live) == Some("hacked"), "a held app was corrected");
    let metric =
        format!("driftless_app_held{{source=\"{source}\",namespace=\"{ns}\",app=\"app\"}} 1");
    ensure!(agent.metrics().await?.contains(&metric), "no held metric");

    // No release: the hold expires and the next drift check restores the object.
    wait_for("the expired hold's app to be corrected", || async {
        let live = config_maps.get("app-settings").await?;
        Ok((color(&live) == Some("blue")).then_some(()))
    })
    .await?;
    wait_for("a clean drift status", drift_status("success", "")).await?;
    agent.stop_checked(&[&gitea.token])?;
    Ok(())
}

/// A deploy's summary status says how long after the commit its apps were live, and so do the
/// plan page and the `driftless_commit_to_live_seconds` histogram.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commit_to_live_time_is_in_the_summary_status() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "live").await?;
    let agent = GiteaAgent::start(&gitea, &cluster, "live", &AgentLines::default(), &[]).await?;
    (agent.tree).write(
        "apps/app.yaml",
        &config_map_app("app", &namespace.name, "blue"),
    )?;
    let commit = agent.tree.commit_and_push("one app", "main")?;
    let ((state, description), _) = agent.summary(&commit).await?;
    ensure!(state == "success", "{description}");
    ensure!(
        description.contains("s after the commit") && description.contains("; live "),
        "{description}"
    );
    let page = (agent.process.plan_page(&commit).await?).unwrap_or_default();
    ensure!(page.contains("s after the commit"), "{page}");
    let count = format!(
        "driftless_commit_to_live_seconds_count{{source=\"{}\"}} 1",
        agent.source
    );
    let metrics = agent.process.metrics().await?;
    ensure!(metrics.contains(&count), "{metrics}");
    agent.stop()?;
    Ok(())
}
