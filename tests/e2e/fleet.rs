//! `driftless agent` placing apps over its cluster registry (`clusters:` of `driftless.yaml`):
//! the shared cluster as `hub` (the agent's own, KubeVela's `local`) and an own kwok cluster
//! `edge` selected by its label. One app moves between them commit by commit:
//!
//! 1. a step group whose deploy sub-steps place it on `hub` (by name, `local`) and on every
//!    `tier: edge` cluster (by selector, into another namespace); an app whose topology names
//!    an unknown cluster has that placement skipped with a warning, so nothing of it is applied;
//! 2. deployed to `hub` only: its objects on `edge` are pruned through `edge`'s tracker, an
//!    unowned ConfigMap beside them stays;
//! 3. deployed to `edge` only: the app leaves `local` entirely and is pruned there;
//! 4. back to `hub` while `edge` is down: nothing can be pruned there, and the deploy's result
//!    says so, naming the cluster.
//!
//! Waiting is bounded polling of the agent's result pages and the clusters, never sleeps.

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;

use crate::support::agent::{AgentProcess, WorkTree, free_port, wait_for};
use crate::support::cluster::{OwnedCluster, TestCluster, TestNamespace};

/// The app: one ConfigMap, the `hub` and `edges` topologies, and `steps` as its workflow.
fn web_app(hub_namespace: &str, edge_namespace: &str, steps: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: web
  namespace: {hub_namespace}
spec:
  components:
    - name: settings
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: web-settings
            data:
              color: blue
  policies:
    - name: hub
      type: topology
      properties:
        clusters: [local]
    - name: edges
      type: topology
      properties:
        clusterLabelSelector: {{tier: edge}}
        namespace: {edge_namespace}
  workflow:
    steps:
{steps}"
    )
}

/// A deploy step with the given policies.
fn deploy(policies: &str) -> String {
    format!(
        "      - name: rollout
        type: deploy
        properties:
          policies: [{policies}]
"
    )
}

/// An app whose topology names a cluster the registry does not have.
fn misplaced_app(namespace: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: misplaced
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
              name: misplaced-settings
  policies:
    - name: far
      type: topology
      properties:
        clusters: [mars]
"
    )
}

async fn exists(config_maps: &Api<ConfigMap>, name: &str) -> Result<bool> {
    Ok(config_maps.get_opt(name).await?.is_some())
}

/// Waits until ConfigMap `name` exists (or not) as `wanted`.
async fn wait_exists(config_maps: &Api<ConfigMap>, name: &str, wanted: bool) -> Result<()> {
    let what = format!(
        "ConfigMap {name} to be {}",
        if wanted { "there" } else { "gone" }
    );
    wait_for(&what, || async {
        Ok((exists(config_maps, name).await? == wanted).then_some(()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_places_apps_over_its_registry_and_collects_the_clusters_they_leave() -> Result<()>
{
    let hub = TestCluster::shared().await?;
    let edge = OwnedCluster::up("e2e-fleet").await?;
    let hub_namespace = TestNamespace::new(&hub, "fleet").await?;
    let edge_namespace = TestNamespace::new(&edge.cluster, "fleet-edge").await?;
    let (hub_ns, edge_ns) = (hub_namespace.name.clone(), edge_namespace.name.clone());
    let (hub_ns, edge_ns) = (hub_ns.as_str(), edge_ns.as_str());
    let on_hub: Api<ConfigMap> = Api::namespaced(hub.client.clone(), hub_ns);
    let on_edge: Api<ConfigMap> = Api::namespaced(edge.cluster.client.clone(), edge_ns);
    // Not the app's: a prune on `edge` must leave it alone.
    let bystander: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bystander"},
        "data": {"owner": "someone else"},
    }))?;
    on_edge.create(&PostParams::default(), &bystander).await?;

    let repo = WorkTree::new("file-source".to_owned())?;
    let step_group = "      - name: everywhere
        type: step-group
        subSteps:
          - name: to-hub
            type: deploy
            properties:
              policies: [hub]
          - name: to-edges
            type: deploy
            properties:
              policies: [edges]
";
    repo.write("apps/web.yaml", &web_app(hub_ns, edge_ns, step_group))?;
    repo.write("apps/misplaced.yaml", &misplaced_app(hub_ns))?;
    let first = repo.commit_all("web on hub and edges")?;

    let work = tempfile::tempdir()?;
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    // Polled every second: commits are picked up without a forge's webhook.
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: fleet
    url: file://{repo}
    pollInterval: 1s
clusters:
  - name: hub
    kubeconfig: {hub_kubeconfig}
  - name: edge
    kubeconfig: {edge_kubeconfig}
    labels: {{tier: edge}}
server: {{ listen: '127.0.0.1:{port}', apiToken: {{ env: E2E_API_TOKEN }} }}
cacheDir: {cache}
",
            repo = repo.dir.path().display(),
            hub_kubeconfig = hub.kubeconfig.display(),
            edge_kubeconfig = edge.cluster.kubeconfig.display(),
            cache = work.path().join("cache").display(),
        ),
    )?;
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

    // 1. Both clusters, through the step group's sub-steps; the misplaced app's only placement
    // is skipped with a warning.
    let body = page(first).await?;
    let placed = async {
        wait_exists(&on_hub, "web-settings", true).await?;
        wait_exists(&on_edge, "web-settings", true).await
    };
    placed.await.with_context(|| {
        format!(
            "result page:\n{body}\nagent log:\n{}",
            agent.log_text().unwrap_or_default()
        )
    })?;
    ensure!(
        !exists(&on_hub, "misplaced-settings").await?,
        "an app placed on an unknown cluster was applied"
    );
    ensure!(
        body.contains("mars"),
        "the warning does not name the cluster:\n{body}"
    );

    // 2. Hub only: the edge copy is pruned, the bystander stays.
    repo.write("apps/web.yaml", &web_app(hub_ns, edge_ns, &deploy("hub")))?;
    let second = repo.commit_all("web on hub only")?;
    page(second).await?;
    wait_exists(&on_edge, "web-settings", false).await?;
    ensure!(exists(&on_hub, "web-settings").await?);
    ensure!(
        exists(&on_edge, "bystander").await?,
        "the prune on edge deleted an object the app does not own"
    );

    // 3. Edges only: the app leaves the agent's own cluster entirely.
    repo.write("apps/web.yaml", &web_app(hub_ns, edge_ns, &deploy("edges")))?;
    let third = repo.commit_all("web on edges only")?;
    page(third).await?;
    wait_exists(&on_hub, "web-settings", false).await?;
    ensure!(exists(&on_edge, "web-settings").await?);

    // 4. Back to hub with edge unreachable: no prune there, and the result names it.
    drop(edge_namespace);
    edge.down()?;
    repo.write("apps/web.yaml", &web_app(hub_ns, edge_ns, &deploy("hub")))?;
    let fourth = repo.commit_all("web back on hub, edge down")?;
    let body = page(fourth).await?;
    ensure!(exists(&on_hub, "web-settings").await?, "{body}");
    ensure!(
        body.contains("garbage collection") && body.contains("edge"),
        "the result does not say that edge could not be collected:\n{body}\nagent log:\n{}",
        agent.log_text()?
    );
    agent.stop_checked(&[])?;
    Ok(())
}
