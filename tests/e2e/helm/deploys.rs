//! The chart's agent at work: `helm install` of `deploy/helm/driftless` into the shared cluster,
//! with values pointing its source at a Gitea repository holding `examples/repo`, and then the
//! real `driftless` binary run as that chart's container, which deploys the example apps.
//!
//! What is real: the chart as helm renders and installs it; the Deployment, ReplicaSet and Pod
//! the controller manager makes of it; the pod's container args, environment (`envFrom` the
//! chart's Secret, the downward API's `POD_NAME`/`POD_NAMESPACE`), its mounted ConfigMap
//! (`driftless.yaml`) and emptyDir cache; the ServiceAccount token, requested through the
//! TokenRequest API bound to that pod, so every request the agent makes is judged by the
//! apiserver's authorizer against the chart's RBAC (ClusterRole, the shards Role for Leases);
//! Gitea, git over HTTP with the token from the chart's Secret, and the cluster the apps land in.
//!
//! What is simulated: the kubelet, since kwok nodes run no containers. This test plays it for one
//! of the chart's pods: it writes each mounted volume's keys into a temporary root at the mount
//! path the container would see, and spawns the binary the image's entrypoint runs with the
//! container's args and resolved environment. Three things differ from a container:
//! - the mounts live under that root, so the args and the mounted ConfigMap text (`--config`,
//!   `cacheDir`) have their mount paths rewritten to it;
//! - in a pod the agent reads the projected token as in-cluster config at a fixed path; here
//!   the same projected token and CA are written into a kubeconfig (`$KUBECONFIG`), which the
//!   agent's client loading (`kube::Config::infer`) reads before the in-cluster files;
//! - the chart's `server.listen` is set to a free local port (a pod owns its port 8080), and the
//!   test probes the container's readiness path there, as the kubelet would.
//!
//! `examples/repo` is pushed unchanged but for its apps' namespaces (`team-a`, `team-b`), which
//! become namespaces of this test so that it can share the cluster. Its `staging` cluster is a
//! cluster of this test's own, registered with a kubeconfig from the chart's `filesSecret`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};
use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, ServiceAccount, Volume};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::config::{AuthInfo, Kubeconfig, NamedAuthInfo, NamedContext};

use super::{CHART, Helm};
use crate::support::agent::{AgentProcess, WorkTree, free_port, wait_for};
use crate::support::cluster::{OwnedCluster, TestCluster, TestNamespace};
use crate::support::gitea::Gitea;
use crate::support::gitea_agent::new_repo;

/// The example apps (namespace, name) and the Deployments (namespace, name) each renders, by
/// their namespaces in `examples/repo`, on the local cluster.
type ExampleApp = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);
const APPS: [ExampleApp; 4] = [
    (
        "team-a",
        "orders",
        &[("team-a", "orders-api"), ("team-a", "orders-worker")],
    ),
    (
        "team-a",
        "storefront",
        &[("team-a", "storefront-web"), ("team-a", "cart")],
    ),
    ("team-b", "reporting", &[("team-b", "report-mailer")]),
    (
        "team-b",
        "search",
        &[("team-b", "search-api"), ("team-b", "search-indexer")],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_agent_deploys_the_example_repository_from_gitea() -> Result<()> {
    let Some(helm) = Helm::find("the_charts_agent_deploys_the_example_repository_from_gitea")?
    else {
        return Ok(());
    };
    let cluster = TestCluster::shared().await?;
    let gitea = Gitea::shared()?;
    let namespace = TestNamespace::new(&cluster, "helm-agent").await?;
    let ns = namespace.name.as_str();
    let teams = vec![
        ("team-a", TestNamespace::new(&cluster, "helm-team-a").await?),
        ("team-b", TestNamespace::new(&cluster, "helm-team-b").await?),
    ];
    let staging = OwnedCluster::up("e2e-helm-staging").await?;
    let team = |name: &str| {
        (teams.iter())
            .find(|(example, _)| *example == name)
            .map(|(_, team)| team.name.clone())
    };

    let (repo, source) = new_repo(&gitea, "helm-agent").await?;
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/repo");
    copy_with_namespaces(&examples, tree.dir.path(), &teams)?;
    tree.commit_and_push("examples/repo", "main")?;

    let port = free_port()?;
    let release = format!("dla-{}", &ns[ns.len().saturating_sub(8)..]);
    let values = helm.home.path().join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "config:
  sources:
    - name: {source}
      url: {url}
      branch: main
      pollInterval: 1s
      credentials:
        token: {{ env: GIT_TOKEN }}
  clusters:
    - name: local
    - name: staging
      kubeconfig: /etc/driftless/files/staging.kubeconfig
  server:
    listen: 127.0.0.1:{port}
  # Health is read by the drift checks: every 2 seconds, rather than the chart's 15 minutes.
  drift:
    schedule: '*/2 * * * * *'
filesSecret: {release}-files
secret:
  values:
    GIT_TOKEN: {token}
",
            url = gitea.clone_url(&repo),
            token = gitea.token,
        ),
    )?;
    let kubeconfig = cluster.kubeconfig.to_string_lossy().into_owned();
    let values = values.to_string_lossy().into_owned();
    let namespaced = ["--kubeconfig", &kubeconfig, "--namespace", ns];
    helm.run(
        &[
            &["install", &release, CHART, "--values", &values],
            &namespaced[..],
        ]
        .concat(),
    )?;

    let staging_kubeconfig = self_contained(&staging.cluster.kubeconfig)?;
    let files = Secret {
        metadata: ObjectMeta {
            name: Some(format!("{release}-files")),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([(
            "staging.kubeconfig".to_owned(),
            staging_kubeconfig,
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(cluster.client.clone(), ns)
        .create(&PostParams::default(), &files)
        .await?;

    let pod = running_pod(&cluster, ns, &release).await?;
    let root = tempfile::tempdir()?;
    let (agent, pod_token) = run_as_container(&cluster, &pod, root.path(), port).await?;
    let container = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.containers.first())
        .context("the chart's pod has no container")?;
    let readiness = container
        .readiness_probe
        .as_ref()
        .and_then(|probe| probe.http_get.as_ref())
        .and_then(|get| get.path.clone())
        .context("the agent container has no HTTP readiness probe")?;
    wait_for("the agent's readiness probe to pass", || async {
        let response = reqwest::get(format!("{}{readiness}", agent.base)).await?;
        Ok(response.status().is_success().then_some(()))
    })
    .await?;

    let healthy_and_in_sync = |namespace: &str, app: &str| {
        [
            format!(
                "driftless_app_healthy{{source=\"{source}\",namespace=\"{namespace}\",app=\"{app}\"}} 1"
            ),
            format!(
                "driftless_app_in_sync{{source=\"{source}\",namespace=\"{namespace}\",app=\"{app}\"}} 1"
            ),
        ]
    };
    for (example_namespace, app, deployments) in APPS {
        let namespace = team(example_namespace).context("a team namespace")?;
        let lines = healthy_and_in_sync(&namespace, app);
        wait_for(
            &format!("{namespace}/{app} to be deployed, healthy and in sync"),
            || async {
                let metrics = agent.metrics().await?;
                Ok(lines
                    .iter()
                    .all(|line| metrics.contains(line))
                    .then_some(()))
            },
        )
        .await
        .with_context(|| format!("agent log:\n{}", agent.log_text().unwrap_or_default()))?;
        for (example_namespace, name) in deployments.iter() {
            let deployment_namespace = team(example_namespace).context("a team namespace")?;
            let deployment =
                Api::<Deployment>::namespaced(cluster.client.clone(), &deployment_namespace)
                    .get(name)
                    .await?;
            let owner = deployment
                .metadata
                .annotations
                .unwrap_or_default()
                .get(agent::ownership::ANNOTATION_OWNER)
                .cloned();
            ensure!(
                owner.as_deref() == Some(format!("{namespace}/{app}").as_str()),
                "Deployment {deployment_namespace}/{name} is not marked as {app}'s: {owner:?}"
            );
        }
    }
    // orders reached production only after its staging placement was healthy.
    let staged = Api::<Deployment>::namespaced(staging.cluster.client.clone(), "team-a-staging")
        .get("orders-api")
        .await?;
    ensure!(
        staged
            .metadata
            .annotations
            .unwrap_or_default()
            .get(agent::ownership::ANNOTATION_OWNER)
            == Some(&format!("{}/orders", team("team-a").context("team-a")?)),
        "orders-api on the staging cluster is not marked as orders'"
    );
    let log = agent.stop_checked(&[&gitea.token, &pod_token])?;
    ensure!(
        !log.contains("Forbidden"),
        "the chart's RBAC refused one of the agent's requests:\n{log}"
    );
    helm.run(&[&["uninstall", &release, "--wait"], &namespaced[..]].concat())?;
    staging.down()?;
    Ok(())
}

/// Does for `pod`'s container what its kubelet would, under `root`, and starts the agent it
/// runs (serving on `port`); returns it with the pod's ServiceAccount token.
async fn run_as_container(
    cluster: &TestCluster,
    pod: &Pod,
    root: &Path,
    port: u16,
) -> Result<(AgentProcess, String)> {
    let kubelet = Kubelet {
        client: cluster.client.clone(),
        root: root.to_owned(),
        pod,
    };
    let container = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.containers.first())
        .context("the chart's pod has no container")?;
    let service_account_dir = kubelet.mount(container).await?;
    let environment = kubelet.environment(container).await?;
    let pod_token = std::fs::read_to_string(service_account_dir.join("token"))?;
    let agent_kubeconfig = root.join("agent.kubeconfig");
    let ca = service_account_dir.join("ca.crt");
    std::fs::write(
        &agent_kubeconfig,
        token_kubeconfig(&cluster.kubeconfig, &pod_token, &ca)?,
    )?;

    // The image's entrypoint is `driftless`; the pod gives only args.
    let mut command = Command::new(env!("CARGO_BIN_EXE_driftless"));
    let args = container.args.clone().unwrap_or_default();
    command
        .args(args.iter().map(|arg| kubelet.under_root(container, arg)))
        .env_clear()
        .envs(&environment)
        .env("KUBECONFIG", &agent_kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(root.join("agent.log"))?);
    let agent = AgentProcess::spawn(command, root.join("agent.log"), port)?;
    Ok((agent, pod_token.trim().to_owned()))
}

/// One of the chart's pods once the controller manager made it and a kwok node runs it.
async fn running_pod(cluster: &TestCluster, ns: &str, release: &str) -> Result<Pod> {
    let deployment = Api::<Deployment>::namespaced(cluster.client.clone(), ns);
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), ns);
    wait_for("a running pod of the chart's Deployment", || async {
        let selector = deployment
            .get(release)
            .await?
            .spec
            .and_then(|spec| spec.selector.match_labels)
            .context("the chart's Deployment has no selector")?;
        let selector: Vec<String> = selector
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        let list = pods
            .list(&ListParams::default().labels(&selector.join(",")))
            .await?;
        Ok(list.items.into_iter().find(|pod| {
            let phase = pod
                .status
                .as_ref()
                .and_then(|status| status.phase.as_deref());
            phase == Some("Running") && pod.metadata.deletion_timestamp.is_none()
        }))
    })
    .await
}

/// Copies `from` into `to`, moving the apps from each key of `teams` to its test namespace
/// (orders' `team-a-staging` stays: it is on the staging cluster).
fn copy_with_namespaces(from: &Path, to: &Path, teams: &[(&str, TestNamespace)]) -> Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_with_namespaces(&entry.path(), &target, teams)?;
            continue;
        }
        let mut text = std::fs::read_to_string(entry.path())?;
        for (example, test) in teams {
            text = text.replace(
                &format!("namespace: {example}\n"),
                &format!("namespace: {}\n", test.name),
            );
        }
        std::fs::write(target, text)?;
    }
    Ok(())
}

/// What the kubelet does for the chart's container, under a temporary root.
struct Kubelet<'a> {
    client: kube::Client,
    root: PathBuf,
    pod: &'a Pod,
}

impl Kubelet<'_> {
    /// `path` inside the container, where it lives under the root.
    fn host_path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// `text` with every outermost mount path of `container` moved under the root.
    fn under_root(&self, container: &Container, text: &str) -> String {
        let mounts: Vec<&str> = (container.volume_mounts.iter().flatten())
            .map(|mount| mount.mount_path.as_str())
            .collect();
        let outermost = mounts.iter().filter(|path| {
            !mounts
                .iter()
                .any(|other| other != *path && path.starts_with(&format!("{other}/")))
        });
        outermost.fold(text.to_owned(), |text, path| {
            text.replace(path, &self.host_path(path).to_string_lossy())
        })
    }

    fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// Writes every volume `container` mounts; returns where the ServiceAccount's projected
    /// token, CA and namespace were written.
    async fn mount(&self, container: &Container) -> Result<PathBuf> {
        let volumes: BTreeMap<&str, &Volume> = (self.pod.spec.iter())
            .flat_map(|spec| spec.volumes.iter().flatten())
            .map(|volume| (volume.name.as_str(), volume))
            .collect();
        let mut service_account_dir = None;
        let mut mounts: Vec<_> = container.volume_mounts.iter().flatten().collect();
        mounts.sort_by_key(|mount| mount.mount_path.len());
        for mount in mounts {
            let dir = self.host_path(&mount.mount_path);
            std::fs::create_dir_all(&dir)?;
            let volume = volumes
                .get(mount.name.as_str())
                .with_context(|| format!("the pod has no volume {}", mount.name))?;
            for (path, contents) in self.volume_files(container, volume).await? {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().context("a file in a directory")?)?;
                std::fs::write(file, contents)?;
            }
            if volume.projected.is_some() {
                service_account_dir = Some(dir);
            }
        }
        service_account_dir.context("the pod mounts no projected ServiceAccount token")
    }

    /// The files of one volume, by path within it.
    async fn volume_files(
        &self,
        container: &Container,
        volume: &Volume,
    ) -> Result<Vec<(String, Vec<u8>)>> {
        let ns = self.namespace();
        if let Some(source) = &volume.config_map {
            let map = Api::<ConfigMap>::namespaced(self.client.clone(), ns)
                .get(&source.name)
                .await?;
            // The mounted config names paths inside mounts: they move under the root too.
            return Ok((map.data.unwrap_or_default().into_iter())
                .map(|(key, text)| (key, self.under_root(container, &text).into_bytes()))
                .collect());
        }
        if let Some(source) = &volume.secret {
            let name = source.secret_name.as_deref().unwrap_or_default();
            let secret = Api::<Secret>::namespaced(self.client.clone(), ns)
                .get(name)
                .await?;
            return Ok((secret.data.unwrap_or_default().into_iter())
                .map(|(key, value)| (key, value.0))
                .collect());
        }
        if volume.empty_dir.is_some() {
            return Ok(Vec::new());
        }
        let Some(projected) = &volume.projected else {
            bail!(
                "volume {}: this kubelet mounts configMap, secret, emptyDir and projected volumes",
                volume.name
            );
        };
        let mut files = Vec::new();
        for source in projected.sources.iter().flatten() {
            if let Some(token) = &source.service_account_token {
                files.push((
                    token.path.clone(),
                    self.token(token.audience.clone(), token.expiration_seconds)
                        .await?
                        .into_bytes(),
                ));
            }
            if let Some(map) = &source.config_map {
                let data = Api::<ConfigMap>::namespaced(self.client.clone(), ns)
                    .get(&map.name)
                    .await?
                    .data
                    .unwrap_or_default();
                for item in map.items.iter().flatten() {
                    let value = data
                        .get(&item.key)
                        .with_context(|| format!("ConfigMap {} has no {}", map.name, item.key))?;
                    files.push((item.path.clone(), value.clone().into_bytes()));
                }
            }
            for item in source
                .downward_api
                .iter()
                .flat_map(|api| api.items.iter().flatten())
            {
                let field = item
                    .field_ref
                    .as_ref()
                    .context("downward API item without fieldRef")?;
                files.push((
                    item.path.clone(),
                    self.field(&field.field_path)?.into_bytes(),
                ));
            }
        }
        Ok(files)
    }

    /// A token of the pod's ServiceAccount bound to the pod, as the kubelet requests it.
    async fn token(&self, audience: Option<String>, expiration: Option<i64>) -> Result<String> {
        let spec = self.pod.spec.as_ref().context("the pod has a spec")?;
        let account = spec.service_account_name.as_deref().unwrap_or("default");
        let spec = TokenRequestSpec {
            audiences: audience.into_iter().collect(),
            expiration_seconds: expiration,
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: self.pod.metadata.name.clone(),
                uid: self.pod.metadata.uid.clone(),
            }),
        };
        token(&self.client, self.namespace(), account, spec).await
    }

    /// A downward API field of the pod (`metadata.name`, `spec.serviceAccountName`, ...).
    fn field(&self, path: &str) -> Result<String> {
        let pod = serde_json::to_value(self.pod)?;
        let pointer = format!("/{}", path.replace('.', "/"));
        pod.pointer(&pointer)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .with_context(|| format!("the pod has no field {path}"))
    }

    /// The container's environment: `envFrom` Secrets and ConfigMaps, then `env`.
    async fn environment(&self, container: &Container) -> Result<BTreeMap<String, String>> {
        let ns = self.namespace();
        let mut environment = BTreeMap::new();
        for from in container.env_from.iter().flatten() {
            if let Some(secret) = &from.secret_ref {
                let data = Api::<Secret>::namespaced(self.client.clone(), ns)
                    .get(&secret.name)
                    .await?
                    .data
                    .unwrap_or_default();
                for (key, value) in data {
                    environment.insert(key, String::from_utf8(value.0)?);
                }
            }
            if let Some(map) = &from.config_map_ref {
                let data = Api::<ConfigMap>::namespaced(self.client.clone(), ns)
                    .get(&map.name)
                    .await?
                    .data
                    .unwrap_or_default();
                environment.extend(data);
            }
        }
        for variable in container.env.iter().flatten() {
            let value = match (&variable.value, &variable.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    let field = from.field_ref.as_ref().with_context(|| {
                        format!("env {}: this kubelet resolves only fieldRef", variable.name)
                    })?;
                    self.field(&field.field_path)?
                }
                (None, None) => String::new(),
            };
            environment.insert(variable.name.clone(), value);
        }
        Ok(environment)
    }
}

/// A token of ServiceAccount `ns/account` through the TokenRequest API.
async fn token(
    client: &kube::Client,
    ns: &str,
    account: &str,
    spec: TokenRequestSpec,
) -> Result<String> {
    let request = TokenRequest {
        spec,
        ..TokenRequest::default()
    };
    let response = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a token for ServiceAccount {ns}/{account}"))?;
    Ok(response
        .status
        .context("the TokenRequest has no status")?
        .token)
}

/// A kubeconfig for the server in the cluster's `admin` kubeconfig with `token`, trusting the CA
/// file `ca`.
fn token_kubeconfig(admin: &Path, token: &str, ca: &Path) -> Result<String> {
    let admin = Kubeconfig::read_from(admin)?;
    let mut cluster = admin
        .clusters
        .first()
        .cloned()
        .context("the cluster's kubeconfig names no cluster")?;
    let config = cluster.cluster.as_mut().context("a cluster entry")?;
    config.certificate_authority = Some(ca.to_string_lossy().into_owned());
    let kubeconfig = Kubeconfig {
        current_context: Some("agent".to_owned()),
        contexts: vec![NamedContext {
            name: "agent".to_owned(),
            context: Some(kube::config::Context {
                cluster: cluster.name.clone(),
                user: Some("agent".to_owned()),
                ..kube::config::Context::default()
            }),
            other: BTreeMap::new(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "agent".to_owned(),
            auth_info: Some(AuthInfo {
                token: Some(token.trim().to_owned().into()),
                ..AuthInfo::default()
            }),
            other: BTreeMap::new(),
        }],
        clusters: vec![cluster],
        ..Kubeconfig::default()
    };
    Ok(serde_json::to_string(&kubeconfig)?)
}

/// The kubeconfig at `path` with the files it names (CA, client certificate and key) embedded,
/// as a kubeconfig handed over in a Secret must be.
fn self_contained(path: &Path) -> Result<String> {
    let mut kubeconfig = Kubeconfig::read_from(path)?;
    let embed = |file: &mut Option<String>, data: &mut Option<String>| -> Result<()> {
        if let Some(file) = file.take() {
            *data = Some(
                BASE64_STANDARD
                    .encode(std::fs::read(&file).with_context(|| format!("reading {file}"))?),
            );
        }
        Ok(())
    };
    for cluster in kubeconfig
        .clusters
        .iter_mut()
        .filter_map(|named| named.cluster.as_mut())
    {
        embed(
            &mut cluster.certificate_authority,
            &mut cluster.certificate_authority_data,
        )?;
    }
    for user in kubeconfig
        .auth_infos
        .iter_mut()
        .filter_map(|named| named.auth_info.as_mut())
    {
        embed(
            &mut user.client_certificate,
            &mut user.client_certificate_data,
        )?;
        let mut key = None;
        embed(&mut user.client_key, &mut key)?;
        user.client_key_data = key.map(Into::into);
    }
    Ok(serde_json::to_string(&kubeconfig)?)
}
