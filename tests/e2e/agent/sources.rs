//! Sources that cannot deploy fail alone, reported (rejected token, refused remote, no
//! Applications), and `deploy/rbac.yaml` is enough for the agent to deploy as that
//! ServiceAccount.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::{Value, json};

use crate::support::agent::{AgentProcess, WorkTree, free_port, wait_for};
use crate::support::apps::config_map_app;
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::{Gitea, repo_with_one_app};

use super::{color, file_source_config};

/// Server-side applies every object of a `deploy/` manifest file as the test's admin.
pub(crate) async fn apply_manifest_file(cluster: &TestCluster, file: &str) -> Result<()> {
    use kube::api::{DynamicObject, Patch, PatchParams};
    use kube::discovery::{ApiResource, Scope};

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {file}"))?;
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(&text).with_context(|| format!("parsing {file}"))?;
    let discovery = kube::Discovery::new(cluster.client.clone()).run().await?;
    for document in documents {
        let object: DynamicObject = serde_json::from_value(document)?;
        let types = object
            .types
            .clone()
            .context("an object without apiVersion/kind")?;
        let (group, version) = types
            .api_version
            .split_once('/')
            .unwrap_or(("", types.api_version.as_str()));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &types.kind);
        let (resource, capabilities): (ApiResource, _) = discovery
            .resolve_gvk(&gvk)
            .with_context(|| format!("{} is not served", types.kind))?;
        let api: Api<DynamicObject> = match (capabilities.scope, &object.metadata.namespace) {
            (Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(cluster.client.clone(), ns, &resource)
            }
            _ => Api::all_with(cluster.client.clone(), &resource),
        };
        let name = object
            .metadata
            .name
            .clone()
            .context("an object without a name")?;
        api.patch(
            &name,
            &PatchParams::apply("driftless-e2e").force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("applying {} {name} from {file}", types.kind))?;
    }
    Ok(())
}

/// The in-cluster manifests are right: with `deploy/namespace.yaml` and `deploy/rbac.yaml`
/// applied, an agent acting as the `driftless` ServiceAccount (impersonated by the admin
/// kubeconfig) deploys a webservice app and a ConfigMap app from a `file://` source, including
/// its resource trackers, so the least-privilege role is still enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_manifests_rbac_is_enough_to_deploy() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    apply_manifest_file(&cluster, "deploy/namespace.yaml").await?;
    apply_manifest_file(&cluster, "deploy/rbac.yaml").await?;
    let namespace = TestNamespace::new(&cluster, "rbac").await?;
    let ns = namespace.name.as_str();
    let work = tempfile::tempdir()?;

    // The admin kubeconfig, acting as the ServiceAccount (`as:` makes kube send
    // Impersonate-User; the apiserver adds the ServiceAccount groups itself).
    let admin = std::fs::read_to_string(&cluster.kubeconfig)?;
    let mut impersonating = String::new();
    for line in admin.lines() {
        impersonating.push_str(line);
        impersonating.push('\n');
        if line.trim_start().starts_with("client-key") {
            let indent = &line[..line.len() - line.trim_start().len()];
            impersonating.push_str(&format!(
                "{indent}as: system:serviceaccount:driftless-system:driftless\n"
            ));
        }
    }
    ensure!(
        impersonating.contains("as: system:serviceaccount"),
        "the admin kubeconfig has no client-key line to attach `as:` to:\n{admin}"
    );
    let kubeconfig = work.path().join("agent-kubeconfig");
    std::fs::write(&kubeconfig, impersonating)?;

    // A local repository: nothing to push, so no push URL.
    let repo = WorkTree::new("file-source".to_owned())?;
    repo.write(
        "apps/settings.yaml",
        &config_map_app("settings", ns, "blue"),
    )?;
    repo.write(
        "apps/web.yaml",
        &format!(
            "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: web
  namespace: {ns}
spec:
  components:
    - name: web
      type: webservice
      properties:
        image: nginx:1.27
        port: 80
"
        ),
    )?;
    let commit = repo.commit_all("two apps")?;

    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        file_source_config("rbac", &repo, &kubeconfig, port, work.path(), "")?,
    )?;
    let agent = AgentProcess::start(&config, &[], port)?;
    // The plan page of the commit appears once its deploy has finished, failed apps included.
    let html = wait_for("the deploy to finish", || agent.plan_page(&commit)).await?;
    let log_path = config.with_extension("log");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    ensure!(
        !html.contains("class=\"failure\"") && !html.contains("class=\"error\""),
        "the ServiceAccount lacks a permission:\n{html}\nlog:\n{}",
        log()
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let settings = config_maps
        .get("settings-settings")
        .await
        .with_context(|| format!("the ConfigMap app was not deployed; page:\n{html}"))?;
    assert_eq!(color(&settings), Some("blue"));
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.client.clone(), ns);
    deployments
        .get("web")
        .await
        .with_context(|| format!("the webservice app was not deployed; page:\n{html}"))?;
    agent.stop_checked(&[])?;
    Ok(())
}

/// Broken sources fail alone: next to a good source (token read from a file), a source with a
/// rejected token, one whose remote refuses connections and one with no Applications are each
/// reported (log, error metric, a refused-deploy plan page) while the good one deploys, and the
/// token appears nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_sources_are_reported_without_blocking_the_others() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "sources").await?;
    let ns = namespace.name.as_str();
    let (repo, good, commit) = repo_with_one_app(&gitea, "good", ns).await?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() & 0xffff_ffff;
    let private = format!("private-{}-{nanos:x}", std::process::id());
    gitea
        .api(
            reqwest::Method::POST,
            "/user/repos",
            Some(json!({"name": private, "private": true, "auto_init": true, "default_branch": "main"})),
        )
        .await?;
    let work = tempfile::tempdir()?;
    let token_file = work.path().join("git-token");
    std::fs::write(&token_file, format!("{}\n", gitea.token))?;
    let empty = WorkTree::new("file-source".to_owned())?;
    empty.write("README.md", "no Applications here\n")?;
    let empty_commit = empty.commit_all("docs only")?;
    let closed_port = free_port()?;
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: {good}
    url: {good_url}
    pollInterval: 1h
    credentials: {{ token: {{ file: {token_file} }} }}
  - name: bad-token-{nanos:x}
    url: {private_url}
    pollInterval: 1h
    credentials: {{ token: {{ env: E2E_WRONG_TOKEN }} }}
  - name: unreachable-{nanos:x}
    url: http://127.0.0.1:{closed_port}/nobody/nothing.git
    pollInterval: 1h
  - name: empty-{nanos:x}
    url: file://{empty_dir}
    pollInterval: 1h
clusters:
  - name: local
    kubeconfig: {kubeconfig}
forge: {{ kind: gitea, baseUrl: '{gitea_url}', token: {{ env: E2E_FORGE_TOKEN }} }}
server: {{ listen: '127.0.0.1:{port}', apiToken: {{ env: E2E_API_TOKEN }} }}
cacheDir: {cache}
",
            good_url = gitea.clone_url(&repo),
            token_file = token_file.display(),
            private_url = gitea.clone_url(&private),
            empty_dir = empty.dir.path().display(),
            kubeconfig = cluster.kubeconfig.display(),
            gitea_url = gitea.url,
            cache = work.path().join("cache").display(),
        ),
    )?;
    let agent = AgentProcess::start(
        &config,
        &[
            ("E2E_FORGE_TOKEN", &gitea.token),
            ("E2E_WRONG_TOKEN", "not-the-token"),
        ],
        port,
    )?;

    let latest = wait_for("the good source's deploy", || async {
        let latest = gitea.latest_statuses(&repo, &commit).await?;
        Ok(latest
            .get("driftless")
            .filter(|(state, _)| state != "pending")
            .cloned())
    })
    .await?;
    assert_eq!(latest.0, "success", "{latest:?}");
    let page = wait_for("the refused deploy of the source with no apps", || {
        agent.plan_page(&empty_commit)
    })
    .await?;
    assert!(page.contains("no Applications found"), "{page}");
    let log_path = config.with_extension("log");
    let log = wait_for("both failing fetches in the log", || async {
        let log = std::fs::read_to_string(&log_path)?;
        Ok((log.contains(&format!("bad-token-{nanos:x}"))
            && log.contains(&format!("unreachable-{nanos:x}"))
            && log.contains("authenticating to"))
        .then_some(log))
    })
    .await?;
    let metrics = agent.metrics().await?;
    let fetch_errors: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("driftless_errors_total{kind=\"Fetch\"} "))
        .context("no fetch error metric")?
        .trim()
        .parse()?;
    assert!(fetch_errors >= 2.0, "{metrics}");
    assert!(!log.contains(&gitea.token), "the log leaked the token");
    assert!(
        !log.contains("not-the-token"),
        "the log leaked the wrong token"
    );
    assert!(!page.contains(&gitea.token) && !metrics.contains(&gitea.token));
    agent.stop_checked(&[&gitea.token, "not-the-token"])?;
    Ok(())
}
