//! `driftless agent` end to end, against a real Gitea (started by `hack/gitea.sh up --name e2e`,
//! built from its Go module) and the shared local cluster:
//!
//! - a push to the tracked branch is deployed: per-app statuses go pending then success, and a
//!   broken app gets a failure status with its error while the other app deploys;
//! - a pull request gets one plan comment and a status on its head commit, nothing changes in
//!   the cluster, and a second push edits the same comment in place;
//! - a webhook with a bad signature is rejected, and Gitea's own signed webhooks make the agent
//!   poll at once (the poll interval is an hour, so nothing else could);
//! - drift made by hand is reported (status + metric) in `report` mode and restored in `correct`
//!   mode;
//! - SIGTERM during a deploy lets it finish before the agent exits;
//! - a commit costs what changed: only the changed app is rendered again and planned, the
//!   others are neither re-rendered nor re-applied, and an app removed from Git is still
//!   garbage-collected.
//!
//! A forge outage is in `forge_outage.rs`; broken sources and the install's RBAC in
//! `sources.rs`.
//!
//! If Gitea cannot be started the test fails and says why; it never skips. Waiting is bounded
//! polling of Gitea's API and the cluster, never fixed sleeps.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::json;

use crate::support::agent::{AgentProcess, WorkTree, free_port, wait_for};
use crate::support::apps::{broken_app, config_map_app};
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::{Gitea, repo_with_one_app};

mod forge_outage;
mod sources;

pub(crate) use sources::apply_manifest_file;

const WEBHOOK_SECRET: &str = "e2e-webhook-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_deploys_previews_and_verifies_webhooks() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "agent").await?;
    let ns = namespace.name.as_str();
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let repo = format!("apps-{}-{nanos:x}", std::process::id());
    // The source name is the tracker's source identity: unique, so apps of earlier runs (in
    // namespaces long deleted) are never this run's orphans.
    let source = format!("e2e-{:x}", nanos & 0xffff_ffff);
    gitea
        .api(
            reqwest::Method::POST,
            "/user/repos",
            Some(json!({"name": repo, "private": true, "default_branch": "main"})),
        )
        .await?;

    // The first commit: one good app and one broken one.
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write("apps/good.yaml", &config_map_app("good", ns, "blue"))?;
    tree.write("apps/broken.yaml", &broken_app("broken", ns))?;
    let first = tree.commit_and_push("two apps, one broken", "main")?;

    let port = free_port()?;
    let work = tempfile::tempdir()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: {source}
    url: {clone_url}
    branch: main
    paths: {{ include: ['apps/**'] }}
    pollInterval: 1h
    credentials: {{ token: {{ env: E2E_GIT_TOKEN }} }}
clusters:
  - name: local
    kubeconfig: {kubeconfig}
forge:
  kind: gitea
  baseUrl: {gitea_url}
  token: {{ env: E2E_FORGE_TOKEN }}
server:
  listen: 127.0.0.1:{port}
  webhookSecret: {{ env: E2E_WEBHOOK_SECRET }}
  apiToken: {{ env: E2E_API_TOKEN }}
cacheDir: {cache}
",
            clone_url = gitea.clone_url(&repo),
            kubeconfig = cluster.kubeconfig.display(),
            gitea_url = gitea.url,
            cache = work.path().join("cache").display(),
        ),
    )?;
    let agent = AgentProcess::start(
        &config,
        &[
            ("E2E_GIT_TOKEN", &gitea.token),
            ("E2E_FORGE_TOKEN", &gitea.token),
            ("E2E_WEBHOOK_SECRET", WEBHOOK_SECRET),
        ],
        port,
    )?;

    // Gitea delivers push and pull-request events to the agent, signed with the secret.
    gitea
        .api(
            reqwest::Method::POST,
            &format!("/repos/{}/{repo}/hooks", gitea.user),
            Some(json!({
                "type": "gitea",
                "active": true,
                "events": ["push", "pull_request"],
                "config": {
                    "url": format!("{}/webhooks/gitea", agent.base),
                    "content_type": "json",
                    "secret": WEBHOOK_SECRET,
                },
            })),
        )
        .await?;

    // Deploy of the first commit: the good app succeeds, the broken one fails with its error.
    let good_context = format!("driftless/{ns}/good");
    let broken_context = format!("driftless/{ns}/broken");
    let latest = wait_for("final statuses on the first commit", || async {
        let latest = gitea.latest_statuses(&repo, &first).await?;
        let done = |context: &str| {
            latest
                .get(context)
                .is_some_and(|(state, _)| state != "pending")
        };
        Ok((done("driftless") && done(&good_context) && done(&broken_context)).then_some(latest))
    })
    .await?;
    assert_eq!(latest[&good_context].0, "success", "{latest:?}");
    assert_eq!(latest[&broken_context].0, "failure", "{latest:?}");
    assert!(
        latest[&broken_context].1.contains("no-such-component-type"),
        "the failure names the error: {latest:?}"
    );
    assert_eq!(latest["driftless"].0, "failure", "{latest:?}");
    let history = gitea.statuses(&repo, &first).await?;
    let good_states: Vec<&str> = history
        .iter()
        .filter(|(context, _, _)| *context == good_context)
        .map(|(_, state, _)| state.as_str())
        .collect();
    assert_eq!(good_states.first(), Some(&"pending"), "{history:?}");
    assert_eq!(good_states.last(), Some(&"success"), "{history:?}");
    for (_, _, description) in &history {
        assert!(description.chars().count() <= 140);
        assert!(
            !description.contains(&gitea.token),
            "a status leaked the token"
        );
    }

    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let deployed = config_maps
        .get("good-settings")
        .await
        .context("the good app was deployed")?;
    assert_eq!(
        deployed
            .data
            .as_ref()
            .and_then(|data| data.get("color"))
            .map(String::as_str),
        Some("blue")
    );

    // The plan page the statuses link to: refused without credentials, served with them.
    let anonymous = reqwest::get(format!("{}/plans/{first}", agent.base)).await?;
    assert_eq!(anonymous.status(), 401);
    let html = agent
        .plan_page(&first)
        .await?
        .context("the deploy's plan page")?;
    assert!(html.contains(&format!("{ns}/good")), "{html}");
    assert!(
        !html.contains(&gitea.token),
        "the plan page leaked the token"
    );

    // A webhook with a bad signature is refused.
    let body = json!({"repository": {"full_name": format!("{}/{repo}", gitea.user)}}).to_string();
    let rejected = reqwest::Client::new()
        .post(format!("{}/webhooks/gitea", agent.base))
        .header("x-gitea-event", "push")
        .header("x-gitea-signature", "00".repeat(32))
        .body(body)
        .send()
        .await?;
    assert_eq!(rejected.status(), 401);

    // A pull request: a plan comment and a status on its head; nothing changes in the cluster.
    let feature = WorkTree::new(gitea.push_url(&repo))?;
    feature.git(&["fetch", "-q", &gitea.push_url(&repo), "main"])?;
    feature.git(&["reset", "-q", "--hard", "FETCH_HEAD"])?;
    feature.write("apps/good.yaml", &config_map_app("good", ns, "green"))?;
    let head = feature.commit_and_push("green", "feature")?;
    let pull_number = gitea.open_pull(&repo, "feature", "make it green").await?;
    let marker = format!("<!-- driftless:plan source={source} -->");
    let marker = marker.as_str();
    let (comment_id, body) = wait_for("the plan comment", || async {
        let comments = gitea.comments(&repo, pull_number).await?;
        Ok(comments
            .into_iter()
            .find(|(_, body)| body.starts_with(marker) && body.contains("green")))
    })
    .await?;
    assert!(!body.contains(&gitea.token), "the comment leaked the token");
    wait_for("a status on the pull request head", || async {
        let latest = gitea.latest_statuses(&repo, &head).await?;
        Ok(latest
            .get("driftless")
            .filter(|(state, _)| state != "pending")
            .cloned())
    })
    .await?;
    let still = config_maps.get("good-settings").await?;
    assert_eq!(
        still
            .data
            .as_ref()
            .and_then(|data| data.get("color"))
            .map(String::as_str),
        Some("blue"),
        "a preview must not change the cluster"
    );

    // A second push to the pull request edits the same comment.
    feature.write("apps/good.yaml", &config_map_app("good", ns, "purple"))?;
    let second_head = feature.commit_and_push("purple", "feature")?;
    wait_for("the plan comment to be updated in place", || async {
        let comments = gitea.comments(&repo, pull_number).await?;
        let ours: Vec<&(u64, String)> = comments
            .iter()
            .filter(|(_, body)| body.starts_with(marker))
            .collect();
        ensure!(ours.len() <= 1, "more than one plan comment: {ours:?}");
        Ok(ours
            .first()
            .filter(|(id, body)| *id == comment_id && body.contains("purple"))
            .map(|_| ()))
    })
    .await?;
    wait_for("a status on the new pull request head", || async {
        let latest = gitea.latest_statuses(&repo, &second_head).await?;
        Ok(latest
            .get("driftless")
            .filter(|(state, _)| state != "pending")
            .cloned())
    })
    .await?;

    // A push to main is deployed at once: the poll interval is an hour, so only Gitea's signed
    // webhook can have triggered this poll.
    tree.write("apps/broken.yaml", &config_map_app("broken", ns, "red"))?;
    let fixed = tree.commit_and_push("fix the broken app", "main")?;
    let latest = wait_for("statuses on the fixed commit", || async {
        let latest = gitea.latest_statuses(&repo, &fixed).await?;
        Ok(latest
            .get("driftless")
            .filter(|(state, _)| state != "pending")
            .map(|_| latest.clone()))
    })
    .await?;
    assert_eq!(latest["driftless"].0, "success", "{latest:?}");
    assert_eq!(latest[&broken_context].0, "success", "{latest:?}");

    let metrics = agent.metrics().await?;
    assert!(
        metrics.contains(&format!("driftless_apps{{source=\"{source}\"}} 2")),
        "{metrics}"
    );
    assert!(!metrics.contains(&gitea.token));

    agent.stop_checked(&[&gitea.token])?;
    Ok(())
}

/// The agent config of the drift and outage tests: one source, one cluster, a Gitea forge at
/// `forge_url`, and a drift schedule every 2 seconds in `drift_mode` (none when `None`).
pub(crate) fn single_source_config(
    source: &str,
    clone_url: &str,
    cluster: &TestCluster,
    forge_url: &str,
    drift_mode: Option<&str>,
    port: u16,
    work: &Path,
) -> String {
    let drift = drift_mode
        .map(|mode| format!("drift: {{ schedule: '*/2 * * * * *', mode: {mode} }}\n"))
        .unwrap_or_default();
    format!(
        "sources:
  - name: {source}
    url: {clone_url}
    pollInterval: 1h
clusters:
  - name: local
    kubeconfig: {kubeconfig}
forge: {{ kind: gitea, baseUrl: '{forge_url}', token: {{ env: E2E_FORGE_TOKEN }} }}
{drift}server: {{ listen: '127.0.0.1:{port}', apiToken: {{ env: E2E_API_TOKEN }} }}
cacheDir: {cache}
",
        kubeconfig = cluster.kubeconfig.display(),
        cache = work.join("cache").display(),
    )
}

/// An agent config with one `file://` source (the repository of `repo`, named
/// `<prefix>-<random>`), one cluster, no forge, and `extra` top-level lines.
fn file_source_config(
    prefix: &str,
    repo: &WorkTree,
    kubeconfig: &Path,
    port: u16,
    work: &Path,
    extra: &str,
) -> Result<String> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() & 0xffff_ffff;
    Ok(format!(
        "sources:
  - name: {prefix}-{nanos:x}
    url: file://{repo}
    pollInterval: 1h
clusters:
  - name: local
    kubeconfig: {kubeconfig}
server: {{ listen: '127.0.0.1:{port}', apiToken: {{ env: E2E_API_TOKEN }} }}
{extra}cacheDir: {cache}
",
        repo = repo.dir.path().display(),
        kubeconfig = kubeconfig.display(),
        cache = work.join("cache").display(),
    ))
}

pub(crate) fn color(config_map: &ConfigMap) -> Option<&str> {
    config_map
        .data
        .as_ref()
        .and_then(|data| data.get("color"))
        .map(String::as_str)
}

/// Drift: a live object changed by hand is reported by the scheduled drift check, as a
/// `driftless/drift` failure status on the deployed commit and as the `driftless_app_drifted`
/// metric; an agent in `correct` mode then restores it and says so in the same context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_is_reported_then_corrected() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "drift").await?;
    let ns = namespace.name.as_str();
    let (repo, source, commit) = repo_with_one_app(&gitea, "drift", ns).await?;
    let work = tempfile::tempdir()?;
    let start_agent = |mode: &str| -> Result<AgentProcess> {
        let port = free_port()?;
        let config = work.path().join(format!("driftless-{mode}.yaml"));
        std::fs::write(
            &config,
            single_source_config(
                &source,
                &gitea.clone_url(&repo),
                &cluster,
                &gitea.url,
                Some(mode),
                port,
                work.path(),
            ),
        )?;
        AgentProcess::start(&config, &[("E2E_FORGE_TOKEN", &gitea.token)], port)
    };
    let drift_status = |wanted: &'static str| {
        let (gitea, repo, commit) = (&gitea, &repo, &commit);
        move || async move {
            let latest = gitea.latest_statuses(repo, commit).await?;
            Ok(latest
                .get("driftless/drift")
                .filter(|(state, _)| state == wanted)
                .cloned())
        }
    };

    let agent = start_agent("report")?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    wait_for("the app to be deployed", || async {
        Ok(config_maps.get_opt("app-settings").await?.map(drop))
    })
    .await?;
    wait_for("a no-drift status", drift_status("success")).await?;

    let hack = json!({"data": {"color": "hacked"}});
    let patch_params = kube::api::PatchParams::default();
    let hack_patch = kube::api::Patch::Merge(&hack);
    let patch_by_hand = || config_maps.patch("app-settings", &patch_params, &hack_patch);
    patch_by_hand().await?;
    let (_, description) = wait_for("a drift status", drift_status("failure")).await?;
    assert!(description.contains(&format!("{ns}/app")), "{description}");
    let metric =
        format!("driftless_app_drifted{{source=\"{source}\",namespace=\"{ns}\",app=\"app\"}} 1");
    wait_for("the drift metric", || async {
        let text = agent.metrics().await?;
        Ok(text.contains(&metric).then_some(()))
    })
    .await?;
    // Report mode never touches the cluster.
    let live = config_maps.get("app-settings").await?;
    assert_eq!(color(&live), Some("hacked"));
    agent.stop_checked(&[&gitea.token])?;

    // Correct mode. Its first deploy restores the object; wait for a clean drift check, then
    // drift it again: only the drift check can restore it now (the poll interval is an hour).
    let agent = start_agent("correct")?;
    wait_for("a no-drift status in correct mode", drift_status("success")).await?;
    patch_by_hand().await?;
    wait_for("the drift check to restore the object", || async {
        let live = config_maps.get("app-settings").await?;
        Ok((color(&live) == Some("blue")).then_some(()))
    })
    .await?;
    // Look at the whole history: the next drift check soon reports "no drift" again.
    let description = wait_for("a corrected-drift status", || async {
        let history = gitea.statuses(&repo, &commit).await?;
        Ok(history
            .into_iter()
            .find(|(context, state, description)| {
                context == "driftless/drift"
                    && state == "success"
                    && description.starts_with("corrected drift")
            })
            .map(|(_, _, description)| description))
    })
    .await?;
    assert!(description.contains(&format!("{ns}/app")), "{description}");
    agent.stop_checked(&[&gitea.token])?;
    Ok(())
}

/// SIGTERM during a deploy lets the deploy finish: the signal arrives once the agent logged
/// that the branch moved (the deploy of many apps, applied one at a time, has begun), and still
/// every app is applied before the agent exits cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_deploy_in_flight() -> Result<()> {
    const N_APPS: usize = 40;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "sigterm").await?;
    let ns = namespace.name.as_str();
    let repo = WorkTree::new("file-source".to_owned())?;
    for idx in 0..N_APPS {
        repo.write(
            &format!("apps/app-{idx}.yaml"),
            &config_map_app(&format!("app-{idx}"), ns, "blue"),
        )?;
    }
    repo.commit_all("many apps")?;
    let work = tempfile::tempdir()?;
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        file_source_config(
            "sigterm",
            &repo,
            &cluster.kubeconfig,
            port,
            work.path(),
            "concurrency: 1\n",
        )?,
    )?;
    let agent = AgentProcess::start(&config, &[], port)?;
    let log_path = config.with_extension("log");
    wait_for("the deploy to begin", || async {
        Ok(std::fs::read_to_string(&log_path)?
            .contains("branch moved")
            .then_some(()))
    })
    .await?;
    let log = agent.stop_checked(&[])?;
    let shutdown_at = log
        .find("shutting down")
        .context("the agent did not log its shutdown")?;
    let deployed_at = log
        .find("deployed")
        .with_context(|| format!("the deploy in flight did not finish; log:\n{log}"))?;
    assert!(
        shutdown_at < deployed_at,
        "the signal should arrive while the deploy runs; log:\n{log}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let names: Vec<String> = config_maps
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|config_map| config_map.metadata.name)
        .filter(|name| name.ends_with("-settings"))
        .collect();
    assert_eq!(names.len(), N_APPS, "{names:?}");
    Ok(())
}

/// The value of the one sample of counter `name` in a `/metrics` text (one source).
fn counter(metrics: &str, name: &str) -> Result<u64> {
    let prefix = format!("{name}{{");
    metrics
        .lines()
        .find(|line| line.starts_with(&prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .with_context(|| format!("no sample of {name} in:\n{metrics}"))
}

/// The render, plan and apply of a commit grow with what changed: after the first
/// deploy, a commit changing one app of five renders that app again and plans only it (the
/// render cache and plan metrics say so), the unchanged apps' objects are not written (same
/// resourceVersion), and a commit removing an app still deletes that app's objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_renders_and_plans_only_what_changed() -> Result<()> {
    const N_APPS: usize = 5;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "incremental").await?;
    let ns = namespace.name.as_str();
    let repo = WorkTree::new("file-source".to_owned())?;
    for idx in 0..N_APPS {
        repo.write(
            &format!("apps/app-{idx}.yaml"),
            &config_map_app(&format!("app-{idx}"), ns, "blue"),
        )?;
    }
    let first = repo.commit_all("five apps")?;
    let work = tempfile::tempdir()?;
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    // Polled every second: commits are picked up without a forge's webhook.
    let text = file_source_config(
        "incremental",
        &repo,
        &cluster.kubeconfig,
        port,
        work.path(),
        "",
    )?
    .replace("pollInterval: 1h", "pollInterval: 1s");
    std::fs::write(&config, text)?;
    let agent = AgentProcess::start(&config, &[], port)?;
    let page = |commit: String| {
        let agent = &agent;
        async move {
            wait_for(&format!("the result page of {commit}"), || {
                agent.plan_page(&commit)
            })
            .await
        }
    };
    let counts = || async {
        let metrics = agent.metrics().await?;
        Ok::<_, anyhow::Error>((
            counter(&metrics, "driftless_apps_rendered_total")?,
            counter(&metrics, "driftless_apps_reused_total")?,
            counter(&metrics, "driftless_apps_planned_total")?,
        ))
    };
    page(first).await?;
    // (rendered, reused, planned), cumulative.
    assert_eq!(counts().await?, (5, 0, 5));
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let untouched_version = config_maps
        .get("app-0-settings")
        .await?
        .metadata
        .resource_version;

    repo.write("apps/app-2.yaml", &config_map_app("app-2", ns, "green"))?;
    let second = repo.commit_all("app-2 turns green")?;
    let body = page(second).await?;
    assert_eq!(counts().await?, (6, 4, 6), "{body}");
    assert!(body.contains("app-2"), "{body}");
    assert_eq!(
        color(&config_maps.get("app-2-settings").await?),
        Some("green")
    );

    std::fs::remove_file(repo.dir.path().join("apps/app-4.yaml"))?;
    let third = repo.commit_all("app-4 leaves")?;
    page(third).await?;
    assert_eq!(counts().await?, (6, 8, 6));
    wait_for("app-4's ConfigMap to be garbage-collected", || async {
        Ok(config_maps
            .get_opt("app-4-settings")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    assert_eq!(
        config_maps
            .get("app-0-settings")
            .await?
            .metadata
            .resource_version,
        untouched_version,
        "an unchanged app was written again"
    );
    agent.stop_checked(&[])?;
    Ok(())
}
