//! Applying exactly what was reviewed, end to end with the real Gitea and the shared cluster:
//! per-app holds (`driftless hold`) stop drift correction and lift themselves when they expire,
//! and keep a commit from a held app until `driftless release`;
//! the commit-to-live figure reaches the summary status, the plan page and the metrics;
//! reviewed-plan mode applies a merged pull request whose plan is the one reviewed, and holds
//! (with a new plan posted and a failure status naming why) one whose merge brought changes
//! or whose live object moved, until a `/driftless apply` comment or `driftless approve`.
//!
//! Each test keeps its waits short: drift checks every 2 seconds, holds of seconds.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::json;

use crate::agent::{color, single_source_config};
use crate::support::agent::{AgentProcess, free_port, wait_for};
use crate::support::apps::config_map_app;
use crate::support::cli::{Repo, driftless, expect_config_maps, expect_success};
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
    let hold = [
        "hold",
        &app,
        "--for",
        "30s",
        "--reason",
        "incident rollback",
    ];
    run_cli(&cluster, &hold)?;
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

/// A commit to a held app is not applied (the summary names the hold, the live object stays),
/// and once `driftless release` lifts the hold the agent applies it without a new commit. A
/// commit of a few apps reads their holds by name, so this is the path a hold set after the
/// agent's last plan must not slip through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_to_a_held_app_waits_for_its_release() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "heldpush").await?;
    let ns = namespace.name.as_str();
    let agent = deployed_blue(&gitea, &cluster, "heldpush", ns, &["app"]).await?;
    let app = format!("{ns}/app");
    run_cli(
        &cluster,
        &["hold", &app, "--for", "10m", "--reason", "freeze"],
    )?;
    agent
        .tree
        .write("apps/app.yaml", &config_map_app("app", ns, "green"))?;
    let second = agent.tree.commit_and_push("green", "main")?;
    let ((_, description), _) = agent.summary(&second).await?;
    ensure!(
        description.contains("1 app(s) held") && description.contains(&app),
        "{description}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let live = config_maps.get("app-settings").await?;
    ensure!(color(&live) == Some("blue"), "a held app was applied");

    run_cli(&cluster, &["release", &app])?;
    wait_for("the released app's commit to be applied", || async {
        let live = config_maps.get("app-settings").await?;
        Ok((color(&live) == Some("green")).then_some(()))
    })
    .await?;
    agent.stop()?;
    Ok(())
}

/// A held app removed from Git is not pruned while held (its prune is part of what the hold
/// pauses); released, it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_app_removed_from_git_is_pruned_only_after_its_release() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "heldgone").await?;
    let ns = namespace.name.as_str();
    let agent = deployed_blue(&gitea, &cluster, "heldgone", ns, &["app", "gone"]).await?;
    let gone = format!("{ns}/gone");
    run_cli(
        &cluster,
        &["hold", &gone, "--for", "10m", "--reason", "keep it"],
    )?;
    std::fs::remove_file(agent.tree.dir.path().join("apps/gone.yaml"))?;
    let second = agent.tree.commit_and_push("remove gone", "main")?;
    let ((_, description), _) = agent.summary(&second).await?;
    ensure!(description.contains(&gone), "{description}");
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    ensure!(
        config_maps.get_opt("gone-settings").await?.is_some(),
        "a held app was pruned"
    );

    run_cli(&cluster, &["release", &gone])?;
    wait_for("the released app to be pruned", || async {
        Ok(config_maps
            .get_opt("gone-settings")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    agent.stop()?;
    Ok(())
}

/// The agent over a new repository holding one blue ConfigMap app per name, deployed.
async fn deployed_blue<'a>(
    gitea: &'a Gitea,
    cluster: &TestCluster,
    prefix: &str,
    ns: &str,
    names: &[&str],
) -> Result<GiteaAgent<'a>> {
    let agent = GiteaAgent::start(gitea, cluster, prefix, &AgentLines::default(), &[]).await?;
    for name in names {
        let manifest = config_map_app(name, ns, "blue");
        agent.tree.write(&format!("apps/{name}.yaml"), &manifest)?;
    }
    let commit = agent.tree.commit_and_push("apps", "main")?;
    let ((state, description), _) = agent.summary(&commit).await?;
    ensure!(state == "success", "{description}");
    Ok(agent)
}

/// Runs `driftless ARGS` against the cluster; it must succeed.
fn run_cli(cluster: &TestCluster, args: &[&str]) -> Result<()> {
    let output = driftless(cluster, args)?;
    let command = args.first().copied().unwrap_or_default();
    expect_success(&output, &format!("driftless {command}"))
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

/// Reviewed-plan mode with direct pushes applied and the Gitea user as approver.
fn reviewed_lines(gitea: &Gitea) -> AgentLines {
    AgentLines {
        source: format!(
            "    applyReviewedPlan: true\n    reviewedPlan: {{ directPushes: apply, approvers: [{}] }}\n",
            gitea.user
        ),
        ..AgentLines::default()
    }
}

/// One app whose ConfigMap has a `color` and, a few lines further, a `size` (so a change to
/// each merges cleanly).
fn two_field_app(namespace: &str, color: &str, size: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: app
  namespace: {namespace}
spec:
  components:
    - name: settings
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: app-settings
            data:
              color: {color}
              a: '1'
              b: '2'
              c: '3'
              size: {size}
"
    )
}

/// The app deployed from `main`, then a pull request from `feature` setting its color to
/// green, previewed (its plan comment carries the digests). Returns the pull request number.
async fn deployed_then_pull(agent: &GiteaAgent<'_>, ns: &str) -> Result<u64> {
    let (gitea, repo) = (agent.gitea, &agent.repo);
    agent
        .tree
        .write("apps/app.yaml", &two_field_app(ns, "blue", "small"))?;
    let first = agent.tree.commit_and_push("blue", "main")?;
    let ((state, description), _) = agent.summary(&first).await?;
    ensure!(state == "success", "{description}");
    agent.tree.git(&["checkout", "-q", "-b", "feature"])?;
    agent
        .tree
        .write("apps/app.yaml", &two_field_app(ns, "green", "small"))?;
    let head = agent.tree.commit_and_push("green", "feature")?;
    agent.tree.git(&["checkout", "-q", "main"])?;
    let number = gitea.open_pull(repo, "feature", "make it green").await?;
    let digests = format!("<!-- driftless:digests {ns}/app=");
    wait_for("the plan comment with its digests", || async {
        let comments = gitea.comments(repo, number).await?;
        Ok(comments
            .into_iter()
            .find(|(_, body)| body.contains(&digests)))
    })
    .await?;
    let ((state, description), _) = agent.summary(&head).await?;
    ensure!(
        description.contains("plan digest"),
        "{state}: {description}"
    );
    Ok(number)
}

/// Merges the pull request with a merge commit; returns the merge commit.
async fn merge(agent: &GiteaAgent<'_>, number: u64) -> Result<String> {
    let (gitea, repo) = (agent.gitea, &agent.repo);
    let path = format!("/repos/{}/{repo}/pulls/{number}", gitea.user);
    // Gitea checks mergeability in the background after the base moves, refusing meanwhile.
    wait_for("Gitea to merge the pull request", || async {
        let (merge_path, merge) = (format!("{path}/merge"), Some(json!({"Do": "merge"})));
        let merged = gitea.api(reqwest::Method::POST, &merge_path, merge).await;
        Ok(merged.ok().map(drop))
    })
    .await?;
    let merged = gitea.api(reqwest::Method::GET, &path, None).await?;
    let commit = merged["merge_commit_sha"]
        .as_str()
        .context("merge commit")?;
    agent
        .tree
        .git(&["pull", "-q", &gitea.push_url(repo), "main"])?;
    Ok(commit.to_owned())
}

async fn data(config_maps: &Api<ConfigMap>, key: &str) -> Result<Option<String>> {
    let live = config_maps.get("app-settings").await?;
    Ok(live.data.and_then(|data| data.get(key).cloned()))
}

/// A merged pull request whose plan is the one reviewed is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewed_plan_a_matching_merge_is_applied() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "reviewed-match").await?;
    let ns = namespace.name.as_str();
    let agent = GiteaAgent::start(&gitea, &cluster, "match", &reviewed_lines(&gitea), &[]).await?;
    let number = deployed_then_pull(&agent, ns).await?;
    let commit = merge(&agent, number).await?;
    let ((state, description), statuses) = agent.summary(&commit).await?;
    ensure!(state == "success", "{description}");
    let (app_state, app_description) = &statuses[&format!("driftless/{ns}/app")];
    ensure!(
        app_state == "success" && app_description.contains("digest"),
        "{app_description}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    ensure!(data(&config_maps, "color").await?.as_deref() == Some("green"));
    agent.stop()?;
    Ok(())
}

/// A merge that brought changes the pull request did not show is held: a failure status says
/// why, the new plan is posted on the pull request, and an approver's `/driftless apply`
/// comment applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewed_plan_a_merge_with_extra_changes_waits_for_an_approval_comment() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "reviewed-extra").await?;
    let ns = namespace.name.as_str();
    let agent = GiteaAgent::start(&gitea, &cluster, "extra", &reviewed_lines(&gitea), &[]).await?;
    let number = deployed_then_pull(&agent, ns).await?;
    // After the review, main changes the same app (a direct push, applied).
    agent
        .tree
        .write("apps/app.yaml", &two_field_app(ns, "blue", "large"))?;
    let direct = agent.tree.commit_and_push("large", "main")?;
    let ((state, description), _) = agent.summary(&direct).await?;
    ensure!(state == "success", "{description}");

    let commit = merge(&agent, number).await?;
    let ((state, _), statuses) = agent.summary(&commit).await?;
    let (app_state, app_description) = &statuses[&format!("driftless/{ns}/app")];
    ensure!(
        state == "failure" && app_state == "failure",
        "{app_description}"
    );
    ensure!(
        app_description.contains("merge brought changes"),
        "{app_description}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    ensure!(
        data(&config_maps, "color").await?.as_deref() == Some("blue"),
        "applied unreviewed"
    );
    let marker = format!("<!-- driftless:merge-plan commit={commit}");
    let (_, body) = wait_for("the new plan on the pull request", || async {
        let comments = gitea.comments(&agent.repo, number).await?;
        Ok(comments
            .into_iter()
            .find(|(_, body)| body.starts_with(&marker)))
    })
    .await?;
    ensure!(
        body.contains("/driftless apply") && body.contains("large"),
        "{body}"
    );

    let comments_path = format!(
        "/repos/{}/{}/issues/{number}/comments",
        gitea.user, agent.repo
    );
    let approval = json!({"body": "/driftless apply"});
    (gitea.api(reqwest::Method::POST, &comments_path, Some(approval))).await?;
    wait_for("the approved plan to be applied", || async {
        let color = data(&config_maps, "color").await?;
        let size = data(&config_maps, "size").await?;
        Ok((color.as_deref() == Some("green") && size.as_deref() == Some("large")).then_some(()))
    })
    .await?;
    agent.stop()?;
    Ok(())
}

/// A live object changed between the review and the merge holds its app; `driftless approve`
/// with the digest its status names applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewed_plan_a_live_change_after_the_review_holds_the_app() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "reviewed-live").await?;
    let ns = namespace.name.as_str();
    let agent = GiteaAgent::start(&gitea, &cluster, "live", &reviewed_lines(&gitea), &[]).await?;
    let number = deployed_then_pull(&agent, ns).await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let touch = json!({"metadata": {"annotations": {"touched-by": "a human"}}});
    let patch = kube::api::Patch::Merge(&touch);
    config_maps
        .patch("app-settings", &Default::default(), &patch)
        .await?;

    let commit = merge(&agent, number).await?;
    let (_, statuses) = agent.summary(&commit).await?;
    let (app_state, app_description) = &statuses[&format!("driftless/{ns}/app")];
    ensure!(app_state == "failure", "{app_description}");
    ensure!(
        app_description.contains("a live object moved"),
        "{app_description}"
    );
    ensure!(
        data(&config_maps, "color").await?.as_deref() == Some("blue"),
        "applied unreviewed"
    );

    let digest = app_description
        .rsplit("digest ")
        .next()
        .context("a digest in the status")?;
    let approved = driftless(
        &cluster,
        &["approve", &format!("{ns}/app"), "--digest", digest],
    )?;
    expect_success(&approved, "driftless approve")?;
    wait_for("the approved plan to be applied", || async {
        Ok((data(&config_maps, "color").await?.as_deref() == Some("green")).then_some(()))
    })
    .await?;
    agent.stop()?;
    Ok(())
}

/// The drift issues of `repo` (title, state, body), any state.
async fn issues(gitea: &Gitea, repo: &str) -> Result<Vec<(String, String, String)>> {
    let path = format!("/repos/{}/{repo}/issues?state=all&type=issues", gitea.user);
    let listed = gitea.api(reqwest::Method::GET, &path, None).await?;
    let text = |issue: &serde_json::Value, field: &str| {
        issue[field].as_str().unwrap_or_default().to_owned()
    };
    Ok(listed
        .as_array()
        .map(|issues| {
            let fields = |issue| {
                (
                    text(issue, "title"),
                    text(issue, "state"),
                    text(issue, "body"),
                )
            };
            issues.iter().map(fields).collect()
        })
        .unwrap_or_default())
}

/// In report mode a drifted app gets one forge issue with the (masked) diff, and the issue
/// closes itself once the drift is corrected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_app_gets_an_issue_that_closes_once_corrected() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "drift-issue").await?;
    let ns = namespace.name.as_str();
    let lines = AgentLines {
        top: "drift: { schedule: '*/2 * * * * *', mode: report }\n".to_owned(),
        ..AgentLines::default()
    };
    let agent = GiteaAgent::start(&gitea, &cluster, "driftissue", &lines, &[]).await?;
    (agent.tree).write("apps/app.yaml", &config_map_app("app", ns, "blue"))?;
    let commit = agent.tree.commit_and_push("one app", "main")?;
    let ((state, description), _) = agent.summary(&commit).await?;
    ensure!(state == "success", "{description}");

    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let set_color = |color: &str| json!({"data": {"color": color}});
    let (hacked, blue) = (set_color("hacked"), set_color("blue"));
    let params = Default::default();
    config_maps
        .patch("app-settings", &params, &kube::api::Patch::Merge(&hacked))
        .await?;
    let title = format!("Drift in {ns}/app");
    let (_, _, body) = wait_for("an open drift issue", || async {
        let found = issues(&gitea, &agent.repo).await?;
        Ok(found
            .into_iter()
            .find(|(t, state, _)| *t == title && state == "open"))
    })
    .await?;
    ensure!(body.contains("hacked") && body.contains("blue"), "{body}");
    ensure!(!body.contains(&gitea.token), "the issue leaked the token");

    config_maps
        .patch("app-settings", &params, &kube::api::Patch::Merge(&blue))
        .await?;
    wait_for("the drift issue to close", || async {
        let found = issues(&gitea, &agent.repo).await?;
        let ours: Vec<_> = found.iter().filter(|(t, _, _)| *t == title).collect();
        Ok((ours.len() == 1 && ours[0].1 == "closed").then_some(()))
    })
    .await?;
    agent.stop()?;
    Ok(())
}

/// `driftless apply --plan-digest D` applies only the plan with that digest: a digest from
/// another plan applies nothing, the digest `driftless plan` printed applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_with_a_plan_digest_applies_only_that_plan() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "plan-digest").await?;
    let repo = Repo::new(&namespace)?;
    repo.write_app("app", &config_map_app("app", &namespace.name, "blue"))?;
    let (path, trackers) = (repo.path_str()?, repo.tracker_namespace.as_str());
    let tracker_args = ["--tracker-namespace", trackers];
    let planned = driftless(
        &cluster,
        &[&["plan", path, "-o", "json"][..], &tracker_args].concat(),
    )?;
    let plan: serde_json::Value = serde_json::from_slice(&planned.stdout)?;
    let digest = plan["digest"].as_str().context("a plan digest")?.to_owned();

    let apply = |digest: &str| {
        let args = ["apply", path, "--yes", "--plan-digest", digest];
        driftless(&cluster, &[&args[..], &tracker_args].concat())
    };
    let refused = apply("0123456789ab")?;
    ensure!(!refused.status.success(), "a foreign digest was applied");
    ensure!(String::from_utf8_lossy(&refused.stderr).contains("nothing was applied"));
    expect_config_maps(&cluster, &namespace.name, &[]).await?;
    expect_success(&apply(&digest)?, "apply with the plan's digest")?;
    expect_config_maps(&cluster, &namespace.name, &["app-settings"]).await?;
    Ok(())
}
