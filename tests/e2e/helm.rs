//! The Helm chart in `deploy/helm/driftless`, installed into the local cluster with the real
//! `helm` (`DRIFTLESS_HELM`, or the one `hack/build-helm.sh` built from its Go module):
//!
//! - every object it renders is accepted by the apiserver, the agent's Deployment becomes
//!   available (kwok runs no containers: its pod is scheduled and reported running, so this
//!   proves the pod spec is admitted, not that the agent serves), the ConfigMap holds a
//!   `driftless.yaml` the agent loads, the image is the chart's version, the agent may
//!   impersonate the ServiceAccount a source names and no other (asked of the apiserver's
//!   authorizer), and `helm uninstall` removes the cluster-scoped objects;
//! - the chart and the kustomize base in `deploy/` describe the same agent: the same pod spec,
//!   replicas and strategy, and the same ClusterRole rules;
//! - the installed chart's agent deploys `examples/repo` from the local Gitea ([`deploys`], which
//!   plays the kubelet for one of the chart's pods).
//!
//! Building helm takes minutes cold, so these tests build nothing: without a helm they pass
//! after saying so on stderr, and `hack/helm-e2e.sh` builds helm and runs them.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::runtime::wait::await_condition;
use serde_json::Value;

use crate::rbac::{Impersonation, may_impersonate};
use crate::support::agent::wait_for;
use crate::support::cluster::{TestCluster, TestNamespace, WAIT, hack_script};

mod deploys;

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/helm/driftless");

/// The `helm` binary: `DRIFTLESS_HELM`, or the one `hack/build-helm.sh` built into
/// `~/.cache/driftless`; `None` when neither exists (nothing is built here).
fn helm_binary() -> Result<Option<String>> {
    if let Ok(helm) = std::env::var("DRIFTLESS_HELM") {
        return Ok(Some(helm));
    }
    let stdout = hack_script("build-helm.sh", &["--if-built"])?;
    let path = stdout.lines().last().unwrap_or_default().trim().to_owned();
    if path.is_empty() {
        return Ok(None);
    }
    ensure!(
        Path::new(&path).is_file(),
        "hack/build-helm.sh printed a path that is no file: {path}"
    );
    Ok(Some(path))
}

/// Runs helm with its own config, cache and data directories (never the user's).
struct Helm {
    binary: String,
    home: tempfile::TempDir,
}

impl Helm {
    /// The helm to run, or `None` (said on stderr) when none is built.
    fn find(test: &str) -> Result<Option<Helm>> {
        let Some(binary) = helm_binary()? else {
            // Straight to stderr, past libtest's capture, so the skip is seen in every run.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: helm is not built; run hack/helm-e2e.sh (builds helm from its \
                 Go module into ~/.cache/driftless, then runs these tests) or set DRIFTLESS_HELM"
            );
            return Ok(None);
        };
        Ok(Some(Helm {
            binary,
            home: tempfile::tempdir()?,
        }))
    }

    fn run(&self, args: &[&str]) -> Result<String> {
        let home = self.home.path();
        let output = Command::new(&self.binary)
            .args(args)
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_DATA_HOME", home.join("data"))
            .output()
            .with_context(|| format!("running {}", self.binary))?;
        if !output.status.success() {
            bail!(
                "helm {} failed ({}):\n{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_chart_installs_and_its_agent_pod_is_admitted() -> Result<()> {
    let Some(helm) = Helm::find("the_helm_chart_installs_and_its_agent_pod_is_admitted")? else {
        return Ok(());
    };
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "helm").await?;
    let ns = namespace.name.as_str();
    let team = TestNamespace::new(&cluster, "helm-team").await?;
    // The chart's default source, applied as a ServiceAccount of the team's namespace.
    let values = helm.home.path().join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "config:
  sources:
    - name: platform
      url: https://git.example.com/platform/apps.git
      branch: main
      credentials:
        token: {{ env: GIT_TOKEN }}
      serviceAccount: {{ namespace: {}, name: deployer }}
",
            team.name
        ),
    )?;
    let values = values.to_string_lossy().into_owned();
    let release = format!("dl-{}", &ns[ns.len().saturating_sub(8)..]);
    let kubeconfig = cluster.kubeconfig.to_string_lossy().into_owned();
    helm.run(&[
        "install",
        &release,
        CHART,
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        ns,
        "--set",
        "secret.values.GIT_TOKEN=not-a-real-token",
        "--values",
        &values,
    ])?;
    let client = cluster.client.clone();

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    // Every replica the chart asks for (they share the apps through Leases).
    let available = |deployment: Option<&Deployment>| {
        deployment.is_some_and(|deployment| {
            let wanted = deployment.spec.as_ref().and_then(|spec| spec.replicas);
            let status = deployment.status.as_ref();
            wanted.is_some() && status.and_then(|status| status.available_replicas) == wanted
        })
    };
    tokio::time::timeout(
        WAIT,
        await_condition(deployments.clone(), &release, available),
    )
    .await
    .context("the chart's Deployment did not become available")??;
    let deployment = deployments.get(&release).await?;
    let pod = deployment
        .spec
        .and_then(|spec| spec.template.spec)
        .context("the Deployment has a pod spec")?;
    let image = pod
        .containers
        .first()
        .and_then(|container| container.image.clone());
    assert_eq!(
        image.as_deref(),
        Some(format!("driftless:{}", env!("CARGO_PKG_VERSION")).as_str())
    );
    assert_eq!(pod.service_account_name.as_deref(), Some(release.as_str()));

    let config = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(&format!("{release}-config"))
        .await?;
    let text = config
        .data
        .and_then(|data| data.get("driftless.yaml").cloned())
        .context("the ConfigMap holds driftless.yaml")?;
    let env = agent::config::Environment::from_pairs([("GIT_TOKEN", "not-a-real-token")]);
    agent::config::Config::parse(&text, "driftless.yaml".as_ref(), "/".as_ref(), &env)
        .map_err(|error| anyhow::anyhow!("the chart's driftless.yaml does not load: {error}"))?;

    Api::<Secret>::namespaced(client.clone(), ns)
        .get(&format!("{release}-credentials"))
        .await?;
    Api::<Service>::namespaced(client.clone(), ns)
        .get(&release)
        .await?;
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .get(&release)
        .await?;
    Api::<NetworkPolicy>::namespaced(client.clone(), ns)
        .get(&release)
        .await?;
    Api::<PodDisruptionBudget>::namespaced(client.clone(), ns)
        .get(&release)
        .await?;
    Api::<ClusterRole>::all(client.clone())
        .get(&release)
        .await?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .get(&release)
        .await?;

    let agent_may_impersonate = |namespace, name| {
        let (cluster, release) = (&cluster, &release);
        async move {
            let impersonation = Impersonation {
                resource: "serviceaccounts",
                namespace: Some(namespace),
                name,
            };
            may_impersonate(cluster, ns, release, &impersonation).await
        }
    };
    // The authorizer sees new bindings once its informer has: wait for the grant first.
    wait_for(
        "the chart's agent to be allowed to impersonate the ServiceAccount its source names",
        || async {
            Ok(agent_may_impersonate(&team.name, "deployer")
                .await?
                .then_some(()))
        },
    )
    .await?;
    ensure!(
        !agent_may_impersonate(&team.name, "default").await?,
        "the chart's agent may impersonate another ServiceAccount of the source's namespace"
    );
    ensure!(
        !agent_may_impersonate(ns, "deployer").await?,
        "the chart's agent may impersonate an account of that name in another namespace"
    );

    helm.run(&[
        "uninstall",
        &release,
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        ns,
        "--wait",
    ])?;
    ensure!(
        Api::<ClusterRole>::all(client.clone())
            .get_opt(&release)
            .await?
            .is_none(),
        "helm uninstall left the ClusterRole {release}"
    );
    ensure!(
        Api::<ClusterRoleBinding>::all(client)
            .get_opt(&release)
            .await?
            .is_none(),
        "helm uninstall left the ClusterRoleBinding {release}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_and_the_kustomize_base_describe_the_same_agent() -> Result<()> {
    let Some(helm) = Helm::find("the_chart_and_the_kustomize_base_describe_the_same_agent")? else {
        return Ok(());
    };
    // Released as `driftless` into `driftless-system`, the chart names everything as the
    // kustomize base does; a Secret value makes it mount the credentials Secret as the base does.
    let rendered = helm.run(&[
        "template",
        "driftless",
        CHART,
        "--namespace",
        "driftless-system",
        "--set",
        "secret.values.GIT_TOKEN=not-a-real-token",
    ])?;
    let chart: Vec<Value> = serde_saphyr::from_multiple(&rendered).context("helm's output")?;
    let mut base = Vec::new();
    for file in ["deploy/deployment.yaml", "deploy/rbac.yaml"] {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))?;
        let documents: Vec<Value> =
            serde_saphyr::from_multiple(&text).with_context(|| format!("parsing {file}"))?;
        base.extend(documents);
    }

    let chart_deployment = only(&chart, "Deployment", "the chart")?;
    let base_deployment = only(&base, "Deployment", "deploy/")?;
    for field in ["/spec/replicas", "/spec/strategy", "/spec/template/spec"] {
        assert_eq!(
            chart_deployment.pointer(field),
            base_deployment.pointer(field),
            "the chart's and deploy/'s Deployments differ at {field}"
        );
    }
    // deploy/ also has `driftless-impersonate`, whose per-source Roles the chart writes instead.
    let base_roles: Vec<Value> = base
        .iter()
        .filter(|object| {
            object.pointer("/metadata/name") != Some(&Value::from("driftless-impersonate"))
        })
        .cloned()
        .collect();
    let chart_role = only(&chart, "ClusterRole", "the chart")?;
    let base_role = only(&base_roles, "ClusterRole", "deploy/")?;
    assert_eq!(
        chart_role.get("rules"),
        base_role.get("rules"),
        "the chart's and deploy/'s ClusterRoles grant different rules"
    );
    Ok(())
}

/// The one object of `kind` among `objects`.
fn only<'a>(objects: &'a [Value], kind: &str, from: &str) -> Result<&'a Value> {
    let mut found = objects
        .iter()
        .filter(|object| object.get("kind").and_then(Value::as_str) == Some(kind));
    let first = found
        .next()
        .with_context(|| format!("{from} has no {kind}"))?;
    ensure!(found.next().is_none(), "{from} has more than one {kind}");
    Ok(first)
}
