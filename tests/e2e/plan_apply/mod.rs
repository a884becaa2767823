//! `driftless plan --kubeconfig` and `driftless apply` against the real local cluster: a second
//! plan after an apply is clean, a changed property is exactly one changed field, two apps never
//! fight over one object, out-of-band edits show as drift and are restored, custom resources wait
//! for their CRD, and health follows kwok. Pruning is in `prune.rs`, failures during apply in
//! `failures.rs`.
//!
//! Each test owns a namespace (the apps' namespace) and a temporary repository whose absolute
//! path is its source identity, so garbage collection of vanished apps never reaches another
//! test's apps.

use std::process::Output;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::await_condition;
use serde_json::Value;

use crate::support::cli::{Repo, driftless, expect_config_maps, expect_success};
use crate::support::cluster::{TestCluster, TestNamespace, WAIT};

mod failures;
mod prune;

/// A component rendering one raw ConfigMap (`k8s-objects`).
fn config_map_component(component: &str, name: &str, color: &str) -> String {
    format!(
        "    - name: {component}
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}
            data:
              color: {color}
"
    )
}

/// A webservice component (a Deployment).
fn webservice_component(component: &str, image: &str) -> String {
    format!(
        "    - name: {component}
      type: webservice
      properties:
        image: {image}
        port: 80
"
    )
}

/// One component rendering raw objects given as YAML list items (indented for `objects:`).
fn raw_component(component: &str, objects_yaml: &str) -> String {
    format!(
        "    - name: {component}
      type: k8s-objects
      properties:
        objects:
{objects_yaml}"
    )
}

fn application(name: &str, namespace: &str, components: &[String]) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
{}",
        components.concat()
    )
}

fn apply(cluster: &TestCluster, repo: &Repo) -> Result<Output> {
    let path = repo.path_str()?;
    driftless(
        cluster,
        &[
            "apply",
            path,
            "--yes",
            "--tracker-namespace",
            &repo.tracker_namespace,
        ],
    )
}

/// `plan -o json`, parsed, with its exit code.
fn plan(cluster: &TestCluster, repo: &Repo) -> Result<(i32, Value)> {
    let path = repo.path_str()?;
    let output = driftless(
        cluster,
        &[
            "plan",
            path,
            "-o",
            "json",
            "--tracker-namespace",
            &repo.tracker_namespace,
        ],
    )?;
    let json: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "plan output is not JSON:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    Ok((output.status.code().unwrap_or(-1), json))
}

/// `(action, kind/name, changedFields, reason)` of every change that is not `unchanged`.
fn changes(plan: &Value) -> Vec<Change> {
    plan["apps"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|app| app["changes"].as_array().into_iter().flatten())
        .filter(|change| change["action"] != "unchanged")
        .map(|change| {
            (
                change["action"].as_str().unwrap_or_default().to_owned(),
                format!(
                    "{}/{}",
                    change["kind"].as_str().unwrap_or_default(),
                    change["name"].as_str().unwrap_or_default()
                ),
                change["changedFields"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|field| field.as_str().map(str::to_owned))
                    .collect(),
                change["reason"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// One change as [`changes`] lists it.
type Change = (String, String, Vec<String>, Option<String>);

/// An update of `object` (`Kind/name`) changing exactly `fields`.
fn update(object: &str, fields: &[&str]) -> Change {
    let fields = fields.iter().map(|field| (*field).to_owned()).collect();
    ("update".to_owned(), object.to_owned(), fields, None)
}

/// The deletion of `object` (`Kind/name`).
fn delete(object: &str) -> Change {
    ("delete".to_owned(), object.to_owned(), vec![], None)
}

/// Plans `repo` and asserts that it would make exactly the `expected` changes, in any order,
/// with the matching exit code (2 for changes, 0 for none). Returns the plan.
fn expect_plan(cluster: &TestCluster, repo: &Repo, mut expected: Vec<Change>) -> Result<Value> {
    let (code, planned) = plan(cluster, repo)?;
    let mut actual = changes(&planned);
    actual.sort();
    expected.sort();
    assert_eq!(actual, expected, "{planned:#}");
    assert_eq!(code, if expected.is_empty() { 0 } else { 2 }, "{planned:#}");
    Ok(planned)
}

#[tokio::test]
async fn apply_then_plan_is_clean_and_a_changed_property_is_one_field() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-clean").await?;
    let repo = Repo::new(&ns)?;
    let components = |color: &str| {
        vec![
            config_map_component("cfg", "settings", color),
            webservice_component("web", "registry.invalid/web:1"),
        ]
    };
    repo.write_app("shop", &application("shop", &ns.name, &components("blue")))?;

    let (code, first) = plan(&cluster, &repo)?;
    assert_eq!(code, 2, "{first:#}");
    let mut created: Vec<String> = changes(&first).into_iter().map(|c| c.1).collect();
    created.sort();
    assert_eq!(created, vec!["ConfigMap/settings", "Deployment/web"]);

    expect_success(&apply(&cluster, &repo)?, "apply")?;
    // The apiserver defaulted dozens of Deployment fields; none of them is a change.
    expect_plan(&cluster, &repo, vec![])?;

    repo.write_app("shop", &application("shop", &ns.name, &components("green")))?;
    expect_plan(
        &cluster,
        &repo,
        vec![update("ConfigMap/settings", &["data.color"])],
    )?;
    Ok(())
}

#[tokio::test]
async fn two_apps_rendering_one_object_conflict_and_the_second_applies_nothing() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-conflict").await?;
    let first = Repo::new(&ns)?;
    first.write_app(
        "blog",
        &application(
            "blog",
            &ns.name,
            &[config_map_component("cfg", "shared", "blue")],
        ),
    )?;
    expect_success(&apply(&cluster, &first)?, "apply of blog")?;

    let second = Repo::new(&ns)?;
    second.write_app(
        "shop",
        &application(
            "shop",
            &ns.name,
            &[
                config_map_component("own", "shop-own", "x"),
                config_map_component("cfg", "shared", "red"),
            ],
        ),
    )?;
    let (_, planned) = plan(&cluster, &second)?;
    let conflict = changes(&planned)
        .into_iter()
        .find(|change| change.0 == "conflict")
        .context("the plan has no conflict")?;
    assert_eq!(conflict.1, "ConfigMap/shared");
    let reason = conflict.3.unwrap_or_default();
    assert!(reason.contains(&format!("{}/blog", ns.name)), "{reason}");

    let output = apply(&cluster, &second)?;
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("not applied: conflict on ConfigMap"),
        "{stdout}"
    );
    // Nothing of the second app was applied, and the shared object is untouched.
    expect_config_maps(&cluster, &ns.name, &["shared"]).await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let shared = config_maps.get("shared").await?;
    assert_eq!(
        shared
            .data
            .unwrap_or_default()
            .get("color")
            .map(String::as_str),
        Some("blue")
    );
    Ok(())
}

#[tokio::test]
async fn an_out_of_band_edit_is_drift_and_apply_restores_it() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-drift").await?;
    let repo = Repo::new(&ns)?;
    repo.write_app(
        "shop",
        &application(
            "shop",
            &ns.name,
            &[
                config_map_component("cfg", "settings", "blue"),
                webservice_component("web", "registry.invalid/web:1"),
            ],
        ),
    )?;
    expect_success(&apply(&cluster, &repo)?, "apply")?;

    // Someone edits both objects by hand, as `kubectl edit` would (another field manager).
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    config_maps
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"color": "red"}})),
        )
        .await?;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), &ns.name);
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            // Strategic merge: containers merge by name, so only the image changes.
            &Patch::Strategic(
                serde_json::json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "web", "image": "registry.invalid/web:hacked"}
                ]}}}}),
            ),
        )
        .await?;

    expect_plan(
        &cluster,
        &repo,
        vec![
            update("ConfigMap/settings", &["data.color"]),
            update(
                "Deployment/web",
                &["spec.template.spec.containers[0].image"],
            ),
        ],
    )?;
    expect_success(&apply(&cluster, &repo)?, "apply restoring")?;
    let restored = config_maps.get("settings").await?;
    assert_eq!(
        restored
            .data
            .unwrap_or_default()
            .get("color")
            .map(String::as_str),
        Some("blue")
    );
    expect_plan(&cluster, &repo, vec![])?;
    Ok(())
}

#[tokio::test]
async fn health_turns_healthy_once_kwok_makes_the_pods_ready() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-health").await?;
    let repo = Repo::new(&ns)?;
    repo.write_app(
        "shop",
        &application(
            "shop",
            &ns.name,
            &[webservice_component("web", "registry.invalid/web:1")],
        ),
    )?;
    expect_success(&apply(&cluster, &repo)?, "apply")?;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), &ns.name);
    let available = |deployment: Option<&Deployment>| {
        deployment
            .and_then(|deployment| deployment.status.as_ref())
            .and_then(|status| status.available_replicas)
            == Some(1)
    };
    tokio::time::timeout(WAIT, await_condition(deployments, "web", available))
        .await
        .context("timed out waiting for the deployment to become available")??;
    // Nothing to change: apply only reports, including the health of the live objects.
    let output = apply(&cluster, &repo)?;
    expect_success(&output, "second apply")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("{}/shop: healthy", ns.name)),
        "{stdout}"
    );
    // The webservice definition's customStatus, evaluated against the live Deployment.
    assert!(stdout.contains("component web: Ready:1/1"), "{stdout}");
    // `plan` reports the same health, per app and per component.
    let (code, planned) = plan(&cluster, &repo)?;
    assert_eq!(code, 0, "{planned:#}");
    assert_eq!(
        planned["apps"][0]["health"],
        serde_json::json!({
            "status": "healthy",
            "message": "",
            "components": [
                {"name": "web", "status": "healthy", "message": "", "customStatus": "Ready:1/1"}
            ]
        })
    );
    Ok(())
}

#[tokio::test]
async fn an_unreachable_apiserver_is_a_clear_error() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-down").await?;
    let repo = Repo::new(&ns)?;
    repo.write_app(
        "shop",
        &application(
            "shop",
            &ns.name,
            &[config_map_component("cfg", "c", "blue")],
        ),
    )?;
    // The same credentials, pointed at a port nothing listens on.
    let kubeconfig = std::fs::read_to_string(&cluster.kubeconfig)?;
    let server_line = kubeconfig
        .lines()
        .find(|line| line.trim_start().starts_with("server:"))
        .context("kubeconfig has no server")?;
    let dead = kubeconfig.replace(server_line, "    server: https://127.0.0.1:1");
    let dead_path = repo.path().join("dead-kubeconfig");
    std::fs::write(&dead_path, dead)?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "plan",
            repo.path().to_str().context("utf-8 path")?,
            "--kubeconfig",
        ])
        .arg(&dead_path)
        .output()?;
    assert_eq!(output.status.code(), Some(1));
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("apiserver unreachable or timed out"),
        "{text}"
    );
    Ok(())
}

#[tokio::test]
async fn a_custom_resource_waits_for_the_crd_its_app_creates() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-crd").await?;
    // A group unique to this test run: CRDs are cluster-scoped and outlive the namespace.
    let group = format!("{}.driftless.test", ns.name);
    let crd = format!(
        "          - apiVersion: apiextensions.k8s.io/v1
            kind: CustomResourceDefinition
            metadata:
              name: gadgets.{group}
            spec:
              group: {group}
              scope: Namespaced
              names:
                kind: Gadget
                plural: gadgets
                singular: gadget
              versions:
                - name: v1
                  served: true
                  storage: true
                  schema:
                    openAPIV3Schema:
                      type: object
                      x-kubernetes-preserve-unknown-fields: true
"
    );
    let gadget = format!(
        "          - apiVersion: {group}/v1
            kind: Gadget
            metadata:
              name: g1
            spec:
              size: 3
"
    );
    let repo = Repo::new(&ns)?;
    // The custom resource comes first in the render; the CRD must still be applied first.
    repo.write_app(
        "gadgets",
        &application(
            "gadgets",
            &ns.name,
            &[raw_component("gadget", &gadget), raw_component("crd", &crd)],
        ),
    )?;
    let (code, planned) = plan(&cluster, &repo)?;
    assert_eq!(code, 2, "{planned:#}");
    let order: Vec<String> = changes(&planned)
        .into_iter()
        .map(|change| change.1)
        .collect();
    assert_eq!(
        order,
        vec![
            format!("CustomResourceDefinition/gadgets.{group}"),
            "Gadget/g1".to_owned()
        ]
    );
    let result = apply(&cluster, &repo);
    // Remove the CRD whatever happened: it is cluster-scoped.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(cluster.client.clone());
    let output = result?;
    let gadgets_after = plan(&cluster, &repo);
    let _ = crds
        .delete(
            &format!("gadgets.{group}"),
            &kube::api::DeleteParams::default(),
        )
        .await;
    expect_success(&output, "apply")?;
    let (code, clean) = gadgets_after?;
    assert_eq!((code, changes(&clean)), (0, vec![]));
    Ok(())
}

#[tokio::test]
async fn live_renders_see_the_clusters_own_version() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-version").await?;
    let repo = Repo::new(&ns)?;
    std::fs::create_dir_all(repo.path().join("definitions"))?;
    std::fs::write(
        repo.path().join("definitions/cluster-info.cue"),
        r#""cluster-info": {
	type: "component"
	description: "A ConfigMap recording the cluster version the render saw."
	attributes: workload: definition: {apiVersion: "v1", kind: "ConfigMap"}
}
template: {
	output: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: context.name
		data: {
			gitVersion: context.clusterVersion.gitVersion
			minor:      "\(context.clusterVersion.minor)"
		}
	}
	parameter: {}
}
"#,
    )?;
    repo.write_app(
        "info",
        &format!(
            "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: info
  namespace: {}
spec:
  components:
    - name: seen
      type: cluster-info
",
            ns.name
        ),
    )?;
    let version = cluster.client.apiserver_version().await?;
    let (code, planned) = plan(&cluster, &repo)?;
    assert_eq!(code, 2, "{planned:#}");
    let diff = planned["apps"][0]["changes"][0]["diff"]
        .as_str()
        .context("a create has a diff")?;
    assert!(
        diff.contains(&format!("gitVersion: {}", version.git_version)),
        "{diff}"
    );
    // The apply renders for the same version.
    expect_success(&apply(&cluster, &repo)?, "apply")?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let data = config_maps.get("seen").await?.data.unwrap_or_default();
    assert_eq!(data.get("gitVersion"), Some(&version.git_version));
    assert_eq!(
        data.get("minor").map(String::as_str),
        Some(version.minor.trim_end_matches('+'))
    );
    Ok(())
}
