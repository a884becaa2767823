//! The example repository as a new user meets it: `driftless apply examples/repo` against two
//! fresh local clusters (`local` and `staging`, each a cluster of this test's own).
//!
//! 1. The apply creates the missing app namespaces (marked as Driftless's), every app is
//!    applied and healthy, and `team-a/orders` is deployed to both clusters (staging in its
//!    topology's namespace, production with its override).
//! 2. A second plan has no change, and every rendered object passes the analyzer.
//! 3. An apply given only the `local` cluster, of the repository without team-b's apps (the
//!    prune approved: it is over the prune budget): the
//!    staging placement is a warning that blocks nothing (and leaves staging's objects alone),
//!    team-b's apps are pruned, and the namespace Driftless created for them stays.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use crate::support::cli::expect_success;
use crate::support::cluster::{OwnedCluster, TestCluster};

const APPS: [&str; 4] = [
    "team-a/orders",
    "team-a/storefront",
    "team-b/reporting",
    "team-b/search",
];

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/repo")
}

/// `driftless ARGS`, with one source identity for every run so a repository copy without some
/// apps prunes them.
fn driftless(args: &[&str]) -> Result<Output> {
    Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(args)
        .output()
        .context("running driftless")
}

/// `driftless apply` of `repo` to `local` (and `staging` when given); `extra` are further flags.
fn apply(
    repo: &Path,
    local: &TestCluster,
    staging: Option<&TestCluster>,
    extra: &[&str],
) -> Result<String> {
    let staging_arg = staging.map(|staging| format!("staging={}", staging.kubeconfig.display()));
    let mut args = vec![
        "apply",
        repo.to_str().context("utf-8 path")?,
        "--yes",
        "--source",
        "examples",
        "--kubeconfig",
        local.kubeconfig.to_str().context("utf-8 path")?,
    ];
    if let Some(staging_arg) = &staging_arg {
        args.extend(["--cluster", staging_arg]);
    }
    args.extend(extra);
    let output = driftless(&args)?;
    expect_success(&output, "driftless apply")?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Asserts the Namespace exists and is marked as created by Driftless.
async fn expect_created_namespace(cluster: &TestCluster, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let namespace = namespaces
        .get_opt(name)
        .await?
        .with_context(|| format!("namespace {name} on {} was not created", cluster.name))?;
    let labels = namespace.metadata.labels.unwrap_or_default();
    ensure!(
        labels
            .get(agent::namespaces::LABEL_CREATED)
            .map(String::as_str)
            == Some("true"),
        "namespace {name} is not marked as created by Driftless: {labels:?}"
    );
    let annotations = namespace.metadata.annotations.unwrap_or_default();
    ensure!(
        annotations.contains_key(agent::namespaces::ANNOTATION_CREATED_FOR),
        "namespace {name} does not say which app it was created for: {annotations:?}"
    );
    Ok(())
}

async fn replicas(cluster: &TestCluster, namespace: &str, name: &str) -> Result<Option<i32>> {
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), namespace);
    Ok(deployments
        .get_opt(name)
        .await?
        .map(|deployment| deployment.spec.and_then(|spec| spec.replicas).unwrap_or(1)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_repository_applies_healthy_to_fresh_clusters_and_replans_to_no_change()
-> Result<()> {
    let local = OwnedCluster::up("e2e-examples-local").await?;
    let staging = OwnedCluster::up("e2e-examples-staging").await?;
    let (on_local, on_staging) = (&local.cluster, &staging.cluster);

    // 1. Both clusters.
    let text = apply(&examples(), on_local, Some(on_staging), &[])?;
    for app in ["team-a/storefront", "team-b/reporting", "team-b/search"] {
        ensure!(
            text.contains(&format!("app {app}: applied")),
            "{app} was not applied:\n{text}"
        );
    }
    ensure!(
        text.contains("app team-a/orders: workflow succeeded"),
        "orders' workflow did not succeed:\n{text}"
    );
    let health = text
        .split("\nHealth:\n")
        .nth(1)
        .with_context(|| format!("no health section:\n{text}"))?;
    for app in APPS {
        ensure!(
            health.contains(&format!("  {app}: healthy\n")),
            "{app} is not healthy:\n{text}"
        );
    }
    ensure!(
        !text.contains("warning:"),
        "a warning with both clusters:\n{text}"
    );
    for namespace in ["team-a", "team-b"] {
        expect_created_namespace(on_local, namespace).await?;
    }
    expect_created_namespace(on_staging, "team-a-staging").await?;
    ensure!(
        replicas(on_staging, "team-a-staging", "orders-api").await? == Some(2),
        "orders-api on staging is not the plain render"
    );
    ensure!(
        replicas(on_local, "team-a", "orders-api").await? == Some(4),
        "orders-api on local lacks the production-capacity override"
    );

    // 2. Nothing left to change, and nothing the analyzer calls an error.
    let replan = driftless(&[
        "plan",
        examples().to_str().context("utf-8 path")?,
        "--source",
        "examples",
        "-o",
        "json",
        "--kubeconfig",
        on_local.kubeconfig.to_str().context("utf-8 path")?,
    ])?;
    expect_success(&replan, "the second plan (exit 0: no change)")?;
    let plan: serde_json::Value = serde_json::from_slice(&replan.stdout)?;
    for action in ["create", "update", "delete", "conflict"] {
        ensure!(
            plan["summary"][action] == 0,
            "the second plan has a {action}: {}",
            plan["summary"]
        );
    }
    ensure!(plan["apps"].as_array().map(Vec::len) == Some(APPS.len()));
    let analysis = driftless(&[
        "analyze",
        examples().to_str().context("utf-8 path")?,
        "-o",
        "json",
    ])?;
    expect_success(&analysis, "driftless analyze (exit 0: no error)")?;
    let diagnostics: Vec<serde_json::Value> = serde_json::from_slice(&analysis.stdout)?;
    let errors: Vec<&serde_json::Value> = diagnostics
        .iter()
        .filter(|diagnostic| diagnostic["severity"] == "error")
        .collect();
    ensure!(errors.is_empty(), "analyzer errors: {errors:#?}");

    // 3. Only `local`, and team-b's apps gone from the repository.
    let without_team_b = tempfile::tempdir()?;
    copy_dir(&examples(), without_team_b.path())?;
    std::fs::remove_dir_all(without_team_b.path().join("apps/team-b"))?;
    // Two whole apps go: more than the prune budget lets through unapproved.
    // Deleting search-api's Deployment makes the disruption controller write its
    // PodDisruptionBudget's status at once: the prune of the budget must read it again rather
    // than fail on the version it planned with.
    let text = apply(without_team_b.path(), on_local, None, &["--approve-prune"])?;
    ensure!(
        text.contains(
            "app team-a/orders: warning: deploy step \"deploy-staging\": topology policy \"staging\" places the app on cluster \"staging\", which is not registered"
        ),
        "no warning for the staging placement:\n{text}"
    );
    ensure!(
        text.contains("app team-a/orders: workflow succeeded"),
        "the unreachable placement blocked orders:\n{text}"
    );
    ensure!(
        replicas(on_staging, "team-a-staging", "orders-api").await? == Some(2),
        "orders' objects on the unregistered staging cluster were touched"
    );
    ensure!(
        replicas(on_local, "team-b", "search-api").await?.is_none(),
        "team-b's apps were not pruned:\n{text}"
    );
    expect_created_namespace(on_local, "team-b").await?;

    local.down()?;
    staging.down()?;
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
