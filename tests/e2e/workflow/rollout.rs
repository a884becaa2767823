//! Rollouts in batches gated on health: a Deployment and a StatefulSet rolled out batch by batch,
//! a new revision beside the old one, a failed gate rolled back, and invalid rollout plans
//! refused before anything is applied.

use std::collections::BTreeSet;

use anyhow::{Result, ensure};
use kube::Api;
use kube::api::ListParams;

use super::{application, apply, apply_succeeding, image_counts, ready_pods_by_image, wait_until};
use crate::support::cli::{Repo, config_map_names, driftless};
use crate::support::cluster::{TestCluster, TestNamespace};

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
