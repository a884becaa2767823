//! `driftless apply` running Application workflows against the real local cluster: a `suspend`
//! step stops the workflow until `driftless resume`, also across separate apply processes; a
//! step that times out fails the workflow with its name and reason; DAG `dependsOn` decides
//! the order objects are applied in; invalid workflows are refused before anything is applied;
//! two clusters (the shared one and an own kwok cluster) get the replicas and images their
//! deploy steps' overrides declare.
//!
//! Each test owns a namespace holding the apps' objects, trackers and workflow states, and a
//! temporary repository whose path is its source identity.

use std::collections::BTreeSet;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;

use crate::support::cli::{Repo, config_map_names, driftless};
use crate::support::cluster::{TestCluster, TestNamespace};

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

/// A Driftless-only `rollout` trait for the test repository: KubeVela's rollout trait drives a
/// separate controller; here the workflow driver reads the plan, so the trait renders nothing.
pub(crate) const ROLLOUT_TRAIT: &str = r#"// Test repository: a rollout plan the workflow driver executes (renders nothing).
rollout: {
	type: "trait"
	annotations: {}
	description: "Rolls the workload out in batches."
	attributes: {
		podDisruptive: false
		appliesToWorkloads: ["deployments.apps"]
	}
}
template: {
	parameter: {
		// +usage=Replicas once every batch is done
		targetSize: int
		// +usage=Replicas each batch adds
		rolloutBatches?: [...{replicas: int | string}]
		// +usage=Number of equal batches
		numBatches?: int
		// +usage=Roll out only up to this batch index
		batchPartition?: int
		// +usage=Hold before the next batch
		paused?: bool
		// +usage=Time a batch may take to become healthy
		gateTimeout?: string
		// +usage=Restore the previous revision when a gate fails
		rollbackOnFailure?: bool
	}
}
"#;

fn rollout_app(namespace: &str, partition: Option<u32>) -> String {
    let partition = partition
        .map(|index| format!("            batchPartition: {index}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: rolled
  namespace: {namespace}
spec:
  components:
    - name: web
      type: webservice
      properties:
        image: nginx:1.25
        port: 80
      traits:
        - type: scaler
          properties:
            replicas: 10
        - type: rollout
          properties:
            targetSize: 10
            rolloutBatches:
              - replicas: 2
              - replicas: 3
              - replicas: 5
{partition}  workflow:
    steps:
      - name: web
        type: apply-component
        properties:
          component: web
"
    )
}

/// `(spec.replicas, status.updatedReplicas, status.readyReplicas)` of the Deployment.
async fn replica_counts(cluster: &TestCluster, namespace: &str) -> Result<(i32, i32, i32)> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.client.clone(), namespace);
    let deployment = deployments.get("web").await?;
    let spec = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.replicas)
        .unwrap_or(0);
    let status = deployment.status.unwrap_or_default();
    Ok((
        spec,
        status.updated_replicas.unwrap_or(0),
        status.ready_replicas.unwrap_or(0),
    ))
}

#[tokio::test]
async fn a_deployment_rolls_out_in_batches_gated_on_health() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-rollout").await?;
    let repo = rollout_repo(&ns)?;

    // Each run holds after a batch (batchPartition), so the test sees every boundary; a
    // batch is held only once its replicas are updated and ready (the health gate).
    for (partition, target) in [(Some(0), 2), (Some(1), 5), (None, 10)] {
        repo.write_app("rolled", &rollout_app(&ns.name, partition))?;
        let (ok, text) = apply_waiting(&cluster, &repo, &ns, "60")?;
        ensure!(
            ok,
            "apply with batchPartition {partition:?} failed:\n{text}"
        );
        let counts = replica_counts(&cluster, &ns.name).await?;
        ensure!(
            counts == (target, target, target),
            "after batchPartition {partition:?}: (spec, updated, ready) = {counts:?}, want all {target}:\n{text}"
        );
        match partition {
            Some(_) => ensure!(
                text.contains("held after batch") && text.contains("workflow still running"),
                "the rollout holds at the boundary:\n{text}"
            ),
            None => ensure!(text.contains("workflow succeeded"), "{text}"),
        }
    }
    Ok(())
}

/// [`apply`] with a given `--workflow-wait`.
fn apply_waiting(
    cluster: &TestCluster,
    repo: &Repo,
    ns: &TestNamespace,
    wait: &str,
) -> Result<(bool, String)> {
    let path = repo.path_str()?;
    let output = driftless(
        cluster,
        &[
            "apply",
            path,
            "--yes",
            "--workflow-wait",
            wait,
            "--tracker-namespace",
            &ns.name,
        ],
    )?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let text = format!(
        "{stdout}\n--- stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.success(), text))
}

/// Two deploy steps, one topology each (the shared cluster as `local`, a second cluster as
/// `edge`), each with its own override of replicas and image, as KubeVela's multi-environment
/// example does.
fn two_cluster_app(namespace: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: spread
  namespace: {namespace}
spec:
  components:
    - name: web
      type: webservice
      properties:
        image: nginx:1.25
      traits:
        - type: scaler
          properties:
            replicas: 1
  policies:
    - name: on-local
      type: topology
      properties:
        clusters: [local]
    - name: on-edge
      type: topology
      properties:
        clusters: [edge]
    - name: local-size
      type: override
      properties:
        components:
          - name: web
            properties:
              image: nginx:1.26
            traits:
              - type: scaler
                properties:
                  replicas: 2
    - name: edge-size
      type: override
      properties:
        components:
          - name: web
            properties:
              image: nginx:1.27
            traits:
              - type: scaler
                properties:
                  replicas: 3
  workflow:
    steps:
      - name: deploy-local
        type: deploy
        properties:
          policies: [on-local, local-size]
      - name: deploy-edge
        type: deploy
        properties:
          policies: [on-edge, edge-size]
"
    )
}

/// `(spec.replicas, first container image)` of Deployment `web`.
async fn replicas_and_image(cluster: &TestCluster, namespace: &str) -> Result<(i32, String)> {
    replicas_and_image_of(cluster, namespace, "web").await
}

/// `(spec.replicas, first container image)` of Deployment `name`.
async fn replicas_and_image_of(
    cluster: &TestCluster,
    namespace: &str,
    name: &str,
) -> Result<(i32, String)> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.client.clone(), namespace);
    let deployment = deployments.get(name).await?;
    let spec = deployment.spec.context("Deployment without spec")?;
    let image = spec
        .template
        .spec
        .and_then(|pod| pod.containers.into_iter().next())
        .and_then(|container| container.image)
        .unwrap_or_default();
    Ok((spec.replicas.unwrap_or(0), image))
}

#[tokio::test]
async fn topology_and_override_deploy_different_replicas_and_images_per_cluster() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let edge = crate::support::cluster::OwnedCluster::up("e2e-edge").await?;
    let ns = TestNamespace::new(&cluster, "wf-multi").await?;
    // The same namespace on the edge cluster, for the app's objects and its tracker there.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(edge.cluster.client.clone());
    let namespace = k8s_openapi::api::core::v1::Namespace {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(ns.name.clone()),
            ..Default::default()
        },
        ..k8s_openapi::api::core::v1::Namespace::default()
    };
    namespaces
        .create(&kube::api::PostParams::default(), &namespace)
        .await?;
    let repo = Repo::new(&ns)?;
    repo.write_app("spread", &two_cluster_app(&ns.name))?;
    let path = repo.path_str()?;
    let edge_entry = format!("edge={}", edge.cluster.kubeconfig.display());
    let output = driftless(
        &cluster,
        &[
            "apply",
            path,
            "--yes",
            "--workflow-wait",
            "120",
            "--tracker-namespace",
            &ns.name,
            "--cluster",
            &edge_entry,
        ],
    )?;
    let text = format!(
        "{}\n--- stderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(output.status.success(), "apply failed:\n{text}");
    ensure!(text.contains("workflow succeeded"), "{text}");
    let local = replicas_and_image(&cluster, &ns.name).await?;
    ensure!(
        local == (2, "nginx:1.26".to_owned()),
        "local cluster: {local:?}\n{text}"
    );
    let remote = replicas_and_image(&edge.cluster, &ns.name).await?;
    ensure!(
        remote == (3, "nginx:1.27".to_owned()),
        "edge cluster: {remote:?}\n{text}"
    );
    // Each cluster tracks the app in its own tracker.
    let trackers: Api<ConfigMap> = Api::namespaced(edge.cluster.client.clone(), &ns.name);
    let tracked = trackers
        .list(&ListParams::default().labels("driftless.dev/tracker"))
        .await?
        .items
        .len();
    ensure!(tracked == 1, "edge trackers: {tracked}\n{text}");
    edge.down()
}

/// A cluster of the test's own registered as `name`, with the test's namespace created there
/// (for the app's objects and its tracker in that cluster).
async fn own_cluster(
    name: &str,
    ns: &TestNamespace,
) -> Result<crate::support::cluster::OwnedCluster> {
    let owned = crate::support::cluster::OwnedCluster::up(name).await?;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(owned.cluster.client.clone());
    let namespace = k8s_openapi::api::core::v1::Namespace {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(ns.name.clone()),
            ..Default::default()
        },
        ..k8s_openapi::api::core::v1::Namespace::default()
    };
    namespaces
        .create(&kube::api::PostParams::default(), &namespace)
        .await?;
    Ok(owned)
}

/// An app placed on `canary` and `local` by one topology, whose deploy step rolls out over
/// the clusters in batches: the canary first, then (implied) the rest. `workload` is the
/// component list; `rollout` the extra lines of the step's `rollout`.
fn placement_rollout_app(name: &str, namespace: &str, workload: &str, rollout: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
{workload}  policies:
    - name: everywhere
      type: topology
      properties:
        clusters: [local, canary]
  workflow:
    steps:
      - name: deploy
        type: deploy
        properties:
          policies: [everywhere]
          parallelism: 2
          rollout:
            batches:
              - clusters: [canary]
{rollout}"
    )
}

/// Ready replicas of Deployment `name`, `None` when it does not exist.
async fn ready_replicas(cluster: &TestCluster, namespace: &str, name: &str) -> Result<Option<i32>> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.client.clone(), namespace);
    Ok(deployments.get_opt(name).await?.map(|deployment| {
        deployment
            .status
            .and_then(|status| status.ready_replicas)
            .unwrap_or(0)
    }))
}

#[tokio::test]
async fn a_deploy_rolls_out_over_clusters_canary_first_with_approval_and_a_failed_gate_rolls_back()
-> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-canary").await?;
    let canary = own_cluster("e2e-canary", &ns).await?;
    let canary_entry = format!("canary={}", canary.cluster.kubeconfig.display());
    let extra = ["--cluster", canary_entry.as_str()];

    // 1. The canary batch, gated on health, then a hold until approved.
    let repo = Repo::new(&ns)?;
    let web = "    - name: web
      type: webservice
      properties:
        image: nginx:1.25
      traits:
        - type: scaler
          properties:
            replicas: 2
";
    repo.write_app(
        "canaried",
        &placement_rollout_app(
            "canaried",
            &ns.name,
            web,
            "            pauseBetweenBatches: true\n            gateTimeout: 60s\n",
        ),
    )?;
    let (ok, text) = apply_with(&cluster, &repo, &ns, &extra)?;
    ensure!(ok, "first apply failed:\n{text}");
    ensure!(
        text.contains("held after batch 0 (cluster canary): batch 1 waits for approval")
            && text.contains("workflow still running"),
        "the rollout holds after the canary batch:\n{text}"
    );
    ensure!(
        ready_replicas(&canary.cluster, &ns.name, "web").await? == Some(2),
        "the canary batch passed its health gate before the hold:\n{text}"
    );
    ensure!(
        ready_replicas(&cluster, &ns.name, "web").await?.is_none(),
        "the next batch is not touched before approval:\n{text}"
    );

    // A new process finds the held batch in the stored state and does not pass it.
    let (ok, text) = apply_with(&cluster, &repo, &ns, &extra)?;
    ensure!(ok, "second apply failed:\n{text}");
    ensure!(text.contains("waits for approval"), "{text}");
    ensure!(ready_replicas(&cluster, &ns.name, "web").await?.is_none());

    let output = driftless(
        &cluster,
        &[
            "resume",
            "canaried",
            "-n",
            &ns.name,
            "--tracker-namespace",
            &ns.name,
        ],
    )?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success() && stdout.contains("deploy (batch 1 approved)"),
        "resume approves the next batch: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let (ok, text) = apply_with(&cluster, &repo, &ns, &extra)?;
    ensure!(ok, "apply after approval failed:\n{text}");
    ensure!(text.contains("workflow succeeded"), "{text}");
    ensure!(
        ready_replicas(&cluster, &ns.name, "web").await? == Some(2),
        "the second batch (local) is deployed and healthy:\n{text}"
    );

    // 2. A new revision whose canary never becomes ready (no node matches its selector, so
    // its pod stays Pending): the gate times out, the rollout stops at batch 0 with the
    // reason, the canary's Deployment is rolled back to its previous revision, and the other
    // cluster is never touched.
    let broken_repo = Repo::new(&ns)?;
    let stuck = |image: &str, broken: bool| {
        let selector = if broken {
            "                  nodeSelector: {no-such-node: here}\n"
        } else {
            ""
        };
        format!(
            "    - name: stuck
      type: k8s-objects
      properties:
        objects:
          - apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: stuck
            spec:
              replicas: 1
              selector:
                matchLabels: {{app: stuck}}
              template:
                metadata:
                  labels: {{app: stuck}}
                spec:
{selector}                  containers:
                    - name: main
                      image: {image}
"
        )
    };
    broken_repo.write_app(
        "stuck",
        &placement_rollout_app("stuck", &ns.name, &stuck("nginx:1.25", false), ""),
    )?;
    apply_succeeding(&cluster, &broken_repo, &ns, &extra, "the good revision")?;
    broken_repo.write_app(
        "stuck",
        &placement_rollout_app(
            "stuck",
            &ns.name,
            &stuck("nginx:1.26", true),
            "            gateTimeout: 3s\n            rollbackOnFailure: true\n",
        ),
    )?;
    let (ok, text) = apply_with(&cluster, &broken_repo, &ns, &extra)?;
    ensure!(!ok, "a failed gate exits non-zero:\n{text}");
    ensure!(
        text.contains(
            "workflow failed at step deploy: RolloutGateFailed: batch 0 (cluster canary): batch 0 not healthy after 3s"
        ) && text.contains("rolled back Deployment stuck in cluster canary to revision 1"),
        "the failure names the step, the batch, the reason and the rollback:\n{text}"
    );
    ensure!(
        replicas_and_image_of(&cluster, &ns.name, "stuck").await? == (1, "nginx:1.25".to_owned()),
        "the batch after a failed gate is never applied:\n{text}"
    );
    wait_until(
        "the canary coming back to the previous revision",
        || async {
            Ok((
                replicas_and_image_of(&canary.cluster, &ns.name, "stuck").await?,
                ready_pods_by_image(&canary.cluster, &ns.name, "app=stuck").await?,
            ))
        },
        |seen| {
            *seen
                == (
                    (1, "nginx:1.25".to_owned()),
                    image_counts(&[("nginx:1.25", 1)]),
                )
        },
    )
    .await?;
    canary.down()
}

#[tokio::test]
async fn invalid_rollouts_are_refused_before_anything_is_applied() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-bad-rollout").await?;
    let repo = rollout_repo(&ns)?;
    let deploy = |name: &str, properties: &str| {
        let policies = "  policies:
    - name: here
      type: topology
      properties:
        clusters: [local]
";
        let mut manifest = application(
            name,
            &ns.name,
            &[&format!("{name}-cm")],
            &format!(
                "    steps:
      - name: deploy
        type: deploy
        properties:
          policies: [here]
{properties}"
            ),
        );
        manifest.push_str(policies);
        manifest
    };
    let with_plan = |plan: &str| {
        let mut manifest = rollout_app(&ns.name, None);
        manifest = manifest.replace(
            "            rolloutBatches:
              - replicas: 2
              - replicas: 3
              - replicas: 5
",
            plan,
        );
        manifest
    };
    let cases = [
        (
            "sum",
            with_plan(
                "            rolloutBatches:\n              - replicas: 2\n              - replicas: 3\n",
            ),
            "invalid-rollout",
            "rollout batches add up to 5 replicas, not targetSize 10",
        ),
        (
            "partition",
            with_plan("            numBatches: 2\n            batchPartition: 2\n"),
            "invalid-rollout",
            "batchPartition 2 is past the last batch (2 batches)",
        ),
        (
            "cluster",
            deploy(
                "cluster",
                "          rollout:\n            batches:\n              - clusters: [moon]\n",
            ),
            "unknown-cluster",
            "rollout batch names cluster \"moon\"",
        ),
        (
            "batch",
            deploy(
                "batch",
                "          rollout:\n            batches:\n              - percent: 150\n",
            ),
            "invalid-rollout",
            "rollout.batches[0] is none of",
        ),
        (
            "parallelism",
            deploy("parallelism", "          parallelism: 0\n"),
            "invalid-parallelism",
            "parallelism 0 is not a positive integer",
        ),
    ];
    for (name, manifest, _, _) in &cases {
        // The plan cases share the rollout app; each gets its own name.
        let manifest = manifest.replace("name: rolled\n", &format!("name: {name}\n"));
        repo.write_app(name, &manifest)?;
    }
    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(!ok, "invalid rollouts exit non-zero:\n{text}");
    for (name, _, rule, message) in &cases {
        ensure!(
            text.contains(&format!(
                "app {}/{name}: workflow not valid, nothing applied:",
                ns.name
            )),
            "{name} is not refused:\n{text}"
        );
        ensure!(
            text.lines()
                .any(|line| line.contains(&format!("error[{rule}]")) && line.contains(message)),
            "{name} is not reported as {rule} with {message:?}:\n{text}"
        );
    }
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.client.clone(), &ns.name);
    let deployed = deployments.list(&ListParams::default()).await?.items.len();
    ensure!(
        deployed == 0 && config_map_names(&cluster, &ns.name).await?.is_empty(),
        "objects of invalid rollouts were applied:\n{text}"
    );
    Ok(())
}

/// A 4-pod StatefulSet (`db`) at `image` under a rollout plan of batches [1, 1, 2]. A
/// `broken` revision's pods select no node, so they stay Pending (never ready), and its plan
/// fails a batch after 3 s and rolls back.
fn statefulset_app(namespace: &str, image: &str, partition: Option<u32>, broken: bool) -> String {
    let mut partition = partition
        .map(|index| format!("            batchPartition: {index}\n"))
        .unwrap_or_default();
    let mut pod = String::new();
    if broken {
        partition.push_str("            gateTimeout: 3s\n            rollbackOnFailure: true\n");
        pod.push_str("                  nodeSelector: {no-such-node: here}\n");
    }
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: stateful
  namespace: {namespace}
spec:
  components:
    - name: db
      type: k8s-objects
      properties:
        objects:
          - apiVersion: apps/v1
            kind: StatefulSet
            metadata:
              name: db
            spec:
              replicas: 4
              serviceName: db
              podManagementPolicy: Parallel
              selector:
                matchLabels: {{app: db}}
              template:
                metadata:
                  labels: {{app: db}}
                spec:
{pod}                  containers:
                    - name: main
                      image: {image}
      traits:
        - type: rollout
          properties:
            targetSize: 4
            rolloutBatches:
              - replicas: 1
              - replicas: 1
              - replicas: 2
{partition}  workflow:
    steps:
      - name: db
        type: apply-component
        properties:
          component: db
"
    )
}

/// A test repository holding the test's `rollout` trait definition.
fn rollout_repo(ns: &TestNamespace) -> Result<Repo> {
    let repo = Repo::new(ns)?;
    std::fs::create_dir_all(repo.path().join("definitions/traits"))?;
    std::fs::write(
        repo.path().join("definitions/traits/rollout.cue"),
        ROLLOUT_TRAIT,
    )?;
    Ok(repo)
}

/// Expected pods per image, in the shape `pods_by_image` returns.
fn image_counts(pairs: &[(&str, usize)]) -> std::collections::BTreeMap<String, usize> {
    pairs
        .iter()
        .map(|(image, count)| ((*image).to_owned(), *count))
        .collect()
}

/// Per image, how many of the StatefulSet's pods run it and are ready, and how many revisions
/// (`controller-revision-hash`) the pods are spread over.
async fn pods_by_image(
    cluster: &TestCluster,
    namespace: &str,
) -> Result<(std::collections::BTreeMap<String, usize>, usize)> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(cluster.client.clone(), namespace);
    let mut images = std::collections::BTreeMap::new();
    let mut revisions = BTreeSet::new();
    for pod in pods
        .list(&ListParams::default().labels("app=db"))
        .await?
        .items
    {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let ready = pod
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|condition| condition.type_ == "Ready" && condition.status == "True")
            });
        if !ready {
            continue;
        }
        if let Some(hash) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get("controller-revision-hash"))
        {
            revisions.insert(hash.clone());
        }
        let image = pod
            .spec
            .and_then(|spec| spec.containers.into_iter().next())
            .and_then(|container| container.image)
            .unwrap_or_default();
        *images.entry(image).or_insert(0) += 1;
    }
    Ok((images, revisions.len()))
}

#[tokio::test]
async fn a_statefulset_rolls_out_by_partition_with_both_revisions_side_by_side() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-sts").await?;
    let repo = rollout_repo(&ns)?;

    repo.write_app(
        "stateful",
        &statefulset_app(&ns.name, "nginx:1.25", None, false),
    )?;
    let text = apply_succeeding(&cluster, &repo, &ns, &[], "first rollout")?;
    let pods = pods_by_image(&cluster, &ns.name).await?;
    ensure!(
        pods == (image_counts(&[("nginx:1.25", 4)]), 1),
        "{pods:?}\n{text}"
    );

    // A new image held by batchPartition after each batch: the updated pods (highest
    // ordinals first) run the new revision next to the old one, every pod ready.
    for (partition, new) in [(0, 1), (1, 2)] {
        repo.write_app(
            "stateful",
            &statefulset_app(&ns.name, "nginx:1.26", Some(partition), false),
        )?;
        let (ok, text) = apply(&cluster, &repo, &ns)?;
        ensure!(ok, "apply with batchPartition {partition} failed:\n{text}");
        ensure!(
            text.contains(&format!("held after batch {partition}"))
                && text.contains("workflow still running"),
            "the rollout holds after batch {partition}:\n{text}"
        );
        let pods = pods_by_image(&cluster, &ns.name).await?;
        ensure!(
            pods == (
                image_counts(&[("nginx:1.25", 4 - new), ("nginx:1.26", new)]),
                2
            ),
            "after batch {partition}: ready pods by image and revisions {pods:?}\n{text}"
        );
    }

    // Unpaused in Git: the last batch finishes the rollout.
    repo.write_app(
        "stateful",
        &statefulset_app(&ns.name, "nginx:1.26", None, false),
    )?;
    let text = apply_succeeding(&cluster, &repo, &ns, &[], "last batch")?;
    let pods = pods_by_image(&cluster, &ns.name).await?;
    ensure!(
        pods == (image_counts(&[("nginx:1.26", 4)]), 1),
        "{pods:?}\n{text}"
    );

    // A revision whose first batch never becomes ready: the gate times out, the workflow
    // fails with the batch and the reason, and the previous revision comes back.
    repo.write_app(
        "stateful",
        &statefulset_app(&ns.name, "nginx:1.27", None, true),
    )?;
    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(!ok, "a failed gate exits non-zero:\n{text}");
    ensure!(
        text.contains("workflow failed at step db: RolloutGateFailed: StatefulSet")
            && text.contains("batch 0: batch 0 not healthy after 3s")
            && text.contains("rolled back to revision db-"),
        "the failure names the batch, the reason and the rollback:\n{text}"
    );
    // The controller replaces the Pending pod with the previous revision's.
    wait_until(
        "the previous revision coming back",
        || pods_by_image(&cluster, &ns.name),
        |pods| *pods == (image_counts(&[("nginx:1.26", 4)]), 1),
    )
    .await?;
    Ok(())
}

/// A 4-replica Deployment (`web`) at `image` under a rollout plan of batches [1, 1, 2],
/// `paused` or not; a `broken` revision's pods select no node (Pending, never ready) and its
/// plan fails a batch after 3 s and rolls back.
fn revision_app(namespace: &str, image: &str, paused: bool, broken: bool) -> String {
    let mut plan = if paused {
        "            paused: true\n".to_owned()
    } else {
        String::new()
    };
    let mut pod = String::new();
    if broken {
        plan.push_str("            gateTimeout: 3s\n            rollbackOnFailure: true\n");
        pod.push_str("                  nodeSelector: {no-such-node: here}\n");
    }
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: revised
  namespace: {namespace}
spec:
  components:
    - name: web
      type: k8s-objects
      properties:
        objects:
          - apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: web
            spec:
              replicas: 4
              selector:
                matchLabels: {{app: web}}
              template:
                metadata:
                  labels: {{app: web}}
                spec:
{pod}                  containers:
                    - name: main
                      image: {image}
      traits:
        - type: rollout
          properties:
            targetSize: 4
            rolloutBatches:
              - replicas: 1
              - replicas: 1
              - replicas: 2
{plan}  workflow:
    steps:
      - name: web
        type: apply-component
        properties:
          component: web
"
    )
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

/// Deployment name → (spec.replicas, image) in the namespace.
async fn deployments_of(
    cluster: &TestCluster,
    namespace: &str,
) -> Result<std::collections::BTreeMap<String, (i32, String)>> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.client.clone(), namespace);
    Ok(deployments
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|deployment| deployment.metadata.deletion_timestamp.is_none())
        .map(|deployment| {
            let spec = deployment.spec.unwrap_or_default();
            let image = spec
                .template
                .spec
                .and_then(|pod| pod.containers.into_iter().next())
                .and_then(|container| container.image)
                .unwrap_or_default();
            (
                deployment.metadata.name.unwrap_or_default(),
                (spec.replicas.unwrap_or(0), image),
            )
        })
        .collect())
}

#[tokio::test]
async fn a_new_deployment_revision_runs_side_by_side_in_batches_and_a_failed_gate_rolls_back()
-> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "wf-revision").await?;
    let repo = rollout_repo(&ns)?;

    repo.write_app(
        "revised",
        &revision_app(&ns.name, "nginx:1.25", false, false),
    )?;
    apply_succeeding(&cluster, &repo, &ns, &[], "first rollout")?;

    // A new image, paused: held after batch 0 with one pod of the new revision (its own Deployment), three
    // of the previous one, all ready.
    repo.write_app(
        "revised",
        &revision_app(&ns.name, "nginx:1.26", true, false),
    )?;
    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(
        ok && text.contains("held after batch 0: the rollout is paused")
            && text.contains("workflow still running"),
        "the rollout holds after batch 0:\n{text}"
    );
    let pods = ready_pods_by_image(&cluster, &ns.name, "app=web").await?;
    ensure!(
        pods == image_counts(&[("nginx:1.25", 3), ("nginx:1.26", 1)]),
        "both revisions side by side: {pods:?}\n{text}"
    );
    let deployments = deployments_of(&cluster, &ns.name).await?;
    let new_revision: Vec<&String> = deployments
        .iter()
        .filter(|(name, spec)| name.starts_with("web-") && **spec == (1, "nginx:1.26".to_owned()))
        .map(|(name, _)| name)
        .collect();
    ensure!(
        deployments.get("web") == Some(&(3, "nginx:1.25".to_owned()))
            && new_revision.len() == 1
            && deployments.len() == 2,
        "the previous Deployment keeps its template at 3, the new revision's has 1: {deployments:?}"
    );

    // Unpaused in Git: the rollout finishes, `web` takes the new template, and the new
    // revision's Deployment is collected.
    repo.write_app(
        "revised",
        &revision_app(&ns.name, "nginx:1.26", false, false),
    )?;
    let text = apply_succeeding(&cluster, &repo, &ns, &[], "last batches")?;
    let deployments = deployments_of(&cluster, &ns.name).await?;
    ensure!(
        deployments.len() == 1 && deployments.get("web") == Some(&(4, "nginx:1.26".to_owned())),
        "{deployments:?}\n{text}"
    );

    // A revision that never becomes ready: the gate times out, the workflow fails with the
    // batch and the reason, the previous revision is back at full size and the new
    // revision's Deployment is removed.
    repo.write_app(
        "revised",
        &revision_app(&ns.name, "nginx:1.27", false, true),
    )?;
    let (ok, text) = apply(&cluster, &repo, &ns)?;
    ensure!(!ok, "a failed gate exits non-zero:\n{text}");
    ensure!(
        text.contains("workflow failed at step web: RolloutGateFailed: Deployment")
            && text.contains("batch 0: batch 0 not healthy after 3s")
            && text.contains("rolled back to revision"),
        "the failure names the batch, the reason and the rollback:\n{text}"
    );
    wait_until(
        "the previous revision coming back at full size",
        || async {
            Ok((
                deployments_of(&cluster, &ns.name).await?,
                ready_pods_by_image(&cluster, &ns.name, "app=web").await?,
            ))
        },
        |(deployments, pods)| {
            deployments.len() == 1
                && deployments.get("web") == Some(&(4, "nginx:1.26".to_owned()))
                && *pods == image_counts(&[("nginx:1.26", 4)])
        },
    )
    .await?;
    Ok(())
}
