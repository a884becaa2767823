//! `driftless apply` running Application workflows against the real local cluster: a `suspend`
//! step stops the workflow until `driftless resume`, also across separate apply processes; a
//! step that times out fails the workflow with its name and reason; DAG `dependsOn` decides
//! the order objects are applied in; invalid workflows are refused before anything is applied.
//! Rollouts are in `rollout.rs`, workflows over two clusters in `clusters.rs`.
//!
//! Each test owns a namespace holding the apps' objects, trackers and workflow states, and a
//! temporary repository whose path is its source identity.

use std::collections::BTreeSet;

use anyhow::{Result, bail, ensure};
use kube::Api;
use kube::api::ListParams;

use crate::support::cli::{Repo, config_map_names, driftless};
use crate::support::cluster::{TestCluster, TestNamespace};

mod clusters;
mod rollout;

pub(crate) use rollout::ROLLOUT_TRAIT;

/// A component rendering one ConfigMap named like the component.
fn config_map_component(name: &str) -> String {
    format!(
        "    - name: {name}
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}
            data:
              from: {name}
"
    )
}

fn application(name: &str, namespace: &str, components: &[&str], workflow: &str) -> String {
    let components: String = components
        .iter()
        .map(|component| config_map_component(component))
        .collect();
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
{components}  workflow:
{workflow}"
    )
}

/// One `driftless apply` process (each call is a fresh process: nothing survives in memory).
fn apply(cluster: &TestCluster, repo: &Repo, ns: &TestNamespace) -> Result<(bool, String)> {
    apply_with(cluster, repo, ns, &[])
}

/// [`apply`] with `extra` arguments (`--cluster NAME=KUBECONFIG`); returns whether it
/// succeeded and its stdout and stderr.
fn apply_with(
    cluster: &TestCluster,
    repo: &Repo,
    ns: &TestNamespace,
    extra: &[&str],
) -> Result<(bool, String)> {
    let path = repo.path_str()?;
    let mut args = vec![
        "apply",
        path,
        "--yes",
        "--workflow-wait",
        "90",
        "--tracker-namespace",
        &ns.name,
    ];
    args.extend_from_slice(extra);
    let output = driftless(cluster, &args)?;
    let text = format!(
        "{}\n--- stderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.success(), text))
}

/// [`apply_with`], expecting the workflow to succeed; returns the output.
fn apply_succeeding(
    cluster: &TestCluster,
    repo: &Repo,
    ns: &TestNamespace,
    extra: &[&str],
    what: &str,
) -> Result<String> {
    let (ok, text) = apply_with(cluster, repo, ns, extra)?;
    ensure!(ok && text.contains("workflow succeeded"), "{what}:\n{text}");
    Ok(text)
}

/// Polls `observe` until `done` holds for what it saw, for at most 90 s; the error names
/// `what` and shows the last observation.
async fn wait_until<T, F, Fut>(what: &str, mut observe: F, done: impl Fn(&T) -> bool) -> Result<T>
where
    T: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let seen = observe().await?;
        if done(&seen) {
            return Ok(seen);
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "{what}: still {seen:?} after 90 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|name| (*name).to_owned()).collect()
}

#[tokio::test]
async fn suspend_stops_the_workflow_until_resume_also_across_restarts() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-suspend").await?;
    let repo = Repo::new(&ns)?;
    let workflow = "    steps:
      - name: first
        type: apply-component
        properties:
          component: before
      - name: approve
        type: suspend
      - name: second
        type: apply-component
        properties:
          component: after
";
    repo.write_app(
        "gated",
        &application("gated", &ns.name, &["before", "after"], workflow),
    )?;

    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(ok, "first apply failed:\n{text}");
    ensure!(
        text.contains("workflow suspended"),
        "not suspended:\n{text}"
    );
    ensure!(
        config_map_names(&cluster, &ns.name).await? == names(&["before"]),
        "only the step before the suspension is applied:\n{text}"
    );

    // A new process (the restarted agent or apply) finds the suspension in the cluster.
    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(ok, "second apply failed:\n{text}");
    ensure!(text.contains("step approve: suspending"), "{text}");
    ensure!(
        config_map_names(&cluster, &ns.name).await? == names(&["before"]),
        "a restart does not pass the suspension:\n{text}"
    );

    let output = driftless(
        &cluster,
        &[
            "resume",
            "gated",
            "-n",
            &ns.name,
            "--tracker-namespace",
            &ns.name,
        ],
    )?;
    ensure!(
        output.status.success(),
        "resume failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(String::from_utf8_lossy(&output.stdout).contains("resumed step approve"));
    // Resume only marks the state; nothing is applied until the next pass.
    ensure!(config_map_names(&cluster, &ns.name).await? == names(&["before"]));

    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(ok, "apply after resume failed:\n{text}");
    ensure!(text.contains("workflow succeeded"), "{text}");
    ensure!(
        config_map_names(&cluster, &ns.name).await? == names(&["before", "after"]),
        "the step after the suspension ran:\n{text}"
    );

    // A second resume has nothing to resume.
    let output = driftless(
        &cluster,
        &[
            "resume",
            "gated",
            "-n",
            &ns.name,
            "--tracker-namespace",
            &ns.name,
        ],
    )?;
    ensure!(
        !output.status.success(),
        "resume of a finished workflow succeeded"
    );
    Ok(())
}

#[tokio::test]
async fn a_step_that_times_out_fails_the_workflow_with_its_name_and_reason() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-timeout").await?;
    let repo = Repo::new(&ns)?;
    // The app it waits for is never deployed, so the step can only time out.
    let workflow = "    steps:
      - name: wait-for-database
        type: depends-on-app
        timeout: 3s
        properties:
          name: no-such-database
      - name: web
        type: apply-component
        properties:
          component: web
";
    repo.write_app("waits", &application("waits", &ns.name, &["web"], workflow))?;
    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(!ok, "a timed-out workflow exits non-zero:\n{text}");
    ensure!(
        text.contains("workflow failed at step wait-for-database: Timeout"),
        "the failure names the step and the reason:\n{text}"
    );
    ensure!(
        text.contains("step web: skipped"),
        "the step after it does not run:\n{text}"
    );
    ensure!(config_map_names(&cluster, &ns.name).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn dag_depends_on_decides_the_order_of_applies() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-dag").await?;
    let repo = Repo::new(&ns)?;
    // Declared backwards: in DAG mode only dependsOn orders them.
    let workflow = "    mode:
      steps: DAG
    steps:
      - name: step-c
        type: apply-component
        dependsOn: [step-b]
        properties:
          component: cm-c
      - name: step-b
        type: apply-component
        dependsOn: [step-a]
        properties:
          component: cm-b
      - name: step-a
        type: apply-component
        properties:
          component: cm-a
";
    repo.write_app(
        "ordered",
        &application("ordered", &ns.name, &["cm-c", "cm-b", "cm-a"], workflow),
    )?;
    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(ok, "apply failed:\n{text}");
    ensure!(text.contains("workflow succeeded"), "{text}");
    // The apply lines, in the order the objects were written.
    let order: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" create ConfigMap/") && line.ends_with(": ok"))
        .filter_map(|line| line.trim().strip_prefix('['))
        .filter_map(|line| line.split(']').next())
        .collect();
    ensure!(
        order == ["step-a", "step-b", "step-c"],
        "applied in order {order:?}:\n{text}"
    );
    ensure!(config_map_names(&cluster, &ns.name).await? == names(&["cm-a", "cm-b", "cm-c"]));
    Ok(())
}

#[tokio::test]
async fn invalid_workflows_are_refused_before_anything_is_applied() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-invalid").await?;
    let repo = Repo::new(&ns)?;
    let cases = [
        (
            "unknown-type",
            "    steps:
      - name: one
        type: apply-component
        properties:
          component: unknown-type-cm
      - name: two
        type: deploy-to-the-moon
",
            "unknown-workflow-step-type",
        ),
        (
            "cycle",
            "    mode:
      steps: DAG
    steps:
      - name: one
        type: apply-component
        dependsOn: [two]
        properties:
          component: cycle-cm
      - name: two
        type: suspend
        dependsOn: [one]
",
            "dependency-cycle",
        ),
        (
            "unknown-component",
            "    steps:
      - name: one
        type: apply-component
        properties:
          component: not-declared
",
            "unknown-component",
        ),
        (
            "bad-if",
            "    steps:
      - name: one
        type: apply-component
        if: 'status.one.phase =='
        properties:
          component: bad-if-cm
",
            "invalid-if",
        ),
        (
            "unknown-policy",
            "    steps:
      - name: one
        type: deploy
        properties:
          policies: [nowhere]
",
            "unknown-policy",
        ),
    ];
    for (name, workflow, _) in &cases {
        let component = format!("{name}-cm");
        // A topology naming an unregistered cluster is no longer refused but skipped with a
        // warning (tests/e2e/examples.rs).
        let manifest = application(name, &ns.name, &[&component], workflow);
        repo.write_app(name, &manifest)?;
    }
    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(!ok, "invalid workflows exit non-zero:\n{text}");
    for (name, _, rule) in &cases {
        let refused = format!(
            "app {}/{name}: workflow not valid, nothing applied:",
            ns.name
        );
        ensure!(text.contains(&refused), "{name} is not refused:\n{text}");
        ensure!(
            text.contains(&format!("error[{rule}]")),
            "{name} is not reported as {rule}:\n{text}"
        );
    }
    let applied = config_map_names(&cluster, &ns.name).await?;
    if !applied.is_empty() {
        bail!("objects of invalid workflows were applied: {applied:?}\n{text}");
    }
    Ok(())
}

/// Expected pods per image, in the shape `pods_by_image` returns.
fn image_counts(pairs: &[(&str, usize)]) -> std::collections::BTreeMap<String, usize> {
    pairs
        .iter()
        .map(|(image, count)| ((*image).to_owned(), *count))
        .collect()
}

/// Ready, not terminating pods labelled `selector`, counted per image.
async fn ready_pods_by_image(
    cluster: &TestCluster,
    namespace: &str,
    selector: &str,
) -> Result<std::collections::BTreeMap<String, usize>> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(cluster.client.clone(), namespace);
    let mut images = std::collections::BTreeMap::new();
    for pod in pods
        .list(&ListParams::default().labels(selector))
        .await?
        .items
    {
        let ready = pod.metadata.deletion_timestamp.is_none()
            && pod
                .status
                .as_ref()
                .and_then(|status| status.conditions.as_ref())
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|condition| condition.type_ == "Ready" && condition.status == "True")
                });
        if ready {
            let image = pod
                .spec
                .and_then(|spec| spec.containers.into_iter().next())
                .and_then(|container| container.image)
                .unwrap_or_default();
            *images.entry(image).or_insert(0) += 1;
        }
    }
    Ok(images)
}
