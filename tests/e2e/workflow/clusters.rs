//! Workflows over two clusters (the shared one and an own kwok cluster): deploy steps'
//! topologies and overrides, and a rollout over the clusters, canary first.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;

use super::{apply_succeeding, apply_with, image_counts, ready_pods_by_image, wait_until};
use crate::support::cli::{Repo, driftless};
use crate::support::cluster::{TestCluster, TestNamespace};

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
