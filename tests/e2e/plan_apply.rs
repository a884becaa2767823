//! `driftless plan --kubeconfig` and `driftless apply` against the real local cluster: a second
//! plan after an apply is clean, a changed property is exactly one changed field, removed
//! components are pruned (and nothing else), two apps never fight over one object, out-of-band
//! edits show as drift and are restored, killed applies converge, and health follows kwok.
//!
//! Each test owns a namespace (the apps' namespace) and a temporary repository whose absolute
//! path is its source identity, so garbage collection of vanished apps never reaches another
//! test's apps.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::Value;

use crate::support::cli::{Repo, config_map_names, driftless, expect_config_maps, expect_success};
use crate::support::cluster::{TestCluster, TestNamespace, WAIT};

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
async fn a_removed_component_is_pruned_and_a_similar_unowned_object_is_not() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-prune").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    // Same name prefix, same labels as ours would have, but no owner annotation: not ours.
    let bystander = ConfigMap {
        metadata: ObjectMeta {
            name: Some("extra-2".to_owned()),
            labels: Some(
                [
                    ("app.oam.dev/name".to_owned(), "shop".to_owned()),
                    ("app.oam.dev/component".to_owned(), "extra".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    config_maps
        .create(&PostParams::default(), &bystander)
        .await?;

    let repo = Repo::new(&ns)?;
    let both = vec![
        config_map_component("main", "main", "blue"),
        config_map_component("extra", "extra", "red"),
    ];
    repo.write_app("shop", &application("shop", &ns.name, &both))?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;
    expect_config_maps(&cluster, &ns.name, &["main", "extra", "extra-2"]).await?;

    repo.write_app("shop", &application("shop", &ns.name, &both[..1]))?;
    expect_plan(&cluster, &repo, vec![delete("ConfigMap/extra")])?;
    expect_success(&apply(&cluster, &repo)?, "second apply")?;
    expect_config_maps(&cluster, &ns.name, &["main", "extra-2"]).await?;
    expect_plan(&cluster, &repo, vec![])?;
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

/// Seeded from the clock and printed, so a failing run can be replayed by hand.
struct Lcg(u64);

impl Lcg {
    fn next_below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

#[tokio::test]
async fn applies_killed_at_random_points_converge_without_orphans() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-kill").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let bystander = ConfigMap {
        metadata: ObjectMeta {
            name: Some("bystander".to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    config_maps
        .create(&PostParams::default(), &bystander)
        .await?;
    let seed = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
    eprintln!("kill test seed: {seed}");
    let mut random = Lcg(seed);

    let repo = Repo::new(&ns)?;
    let path = repo.path().to_str().context("utf-8 path")?.to_owned();
    // Two desired states that share some objects and differ in others, so that every pass both
    // creates and prunes.
    let states: [Vec<&str>; 2] = [vec!["a", "b", "c", "d"], vec!["c", "d", "e", "f"]];
    let write_state = |round: usize, state: usize| -> Result<Vec<String>> {
        let names = &states[state];
        let components: Vec<String> = names
            .iter()
            .map(|name| config_map_component(name, &format!("cm-{name}"), &format!("r{round}")))
            .collect();
        repo.write_app("shop", &application("shop", &ns.name, &components))?;
        Ok(names.iter().map(|name| format!("cm-{name}")).collect())
    };
    for round in 0..8 {
        // The killed apply works towards one state...
        write_state(round, round % 2)?;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
            .args([
                "apply",
                &path,
                "--yes",
                "--tracker-namespace",
                &ns.name,
                "--kubeconfig",
            ])
            .arg(&cluster.kubeconfig)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let delay = Duration::from_millis(random.next_below(800));
        tokio::select! {
            _ = child.wait() => {}
            () = tokio::time::sleep(delay) => {
                child.start_kill()?;
                child.wait().await?;
            }
        }

        // ...and the rerun towards the other, so objects the killed run may have created and
        // that are no longer rendered must be found through the tracker and pruned.
        let names = write_state(round, (round + 1) % 2)?;
        expect_success(&apply(&cluster, &repo)?, &format!("rerun of round {round}"))?;
        let (code, clean) = plan(&cluster, &repo)?;
        ensure!(
            code == 0 && changes(&clean).is_empty(),
            "round {round}: not converged: {clean:#}"
        );
        let mut expected: BTreeSet<String> = names.into_iter().collect();
        expected.insert("bystander".to_owned());
        assert_eq!(
            config_map_names(&cluster, &ns.name).await?,
            expected,
            "round {round} (seed {seed})"
        );
    }
    Ok(())
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

#[tokio::test]
async fn per_object_errors_stop_only_their_app_and_never_prune() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-faults").await?;
    let repo = Repo::new(&ns)?;
    repo.write_app(
        "good",
        &application(
            "good",
            &ns.name,
            &[config_map_component("cfg", "good-cfg", "blue")],
        ),
    )?;
    repo.write_app(
        "rejected",
        &application(
            "rejected",
            &ns.name,
            &[config_map_component("old", "rejected-old", "blue")],
        ),
    )?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;

    // `rejected` drops its old object and adds a Service the apiserver refuses (port 0), and a
    // third app renders a kind no CRD serves.
    let bad_service = "          - apiVersion: v1
            kind: Service
            metadata:
              name: broken
            spec:
              ports:
                - port: 0
";
    repo.write_app(
        "rejected",
        &application(
            "rejected",
            &ns.name,
            &[
                config_map_component("first", "rejected-first", "blue"),
                raw_component("svc", bad_service),
            ],
        ),
    )?;
    let widget = "          - apiVersion: example.invalid/v1
            kind: Widget
            metadata:
              name: w
";
    repo.write_app(
        "unknown",
        &application("unknown", &ns.name, &[raw_component("w", widget)]),
    )?;
    repo.write_app(
        "good",
        &application(
            "good",
            &ns.name,
            &[config_map_component("cfg", "good-cfg", "green")],
        ),
    )?;

    let output = apply(&cluster, &repo)?;
    assert_eq!(output.status.code(), Some(1));
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains(
            "kind Widget (example.invalid/v1) is not served by the cluster (CRD not installed?)"
        ),
        "{text}"
    );
    assert!(
        text.contains("Service/") && text.contains("rejected as invalid"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "app {}/rejected: apply stopped, nothing pruned",
            ns.name
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("app {}/good: applied", ns.name)),
        "{text}"
    );

    // The good app moved on; the rejected app applied what came before the error and pruned
    // nothing, so its dropped object is still there.
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let good = config_maps.get("good-cfg").await?;
    assert_eq!(
        good.data
            .unwrap_or_default()
            .get("color")
            .map(String::as_str),
        Some("green")
    );
    expect_config_maps(
        &cluster,
        &ns.name,
        &["good-cfg", "rejected-old", "rejected-first"],
    )
    .await?;
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
async fn an_app_removed_from_the_source_is_deleted_except_what_it_keeps() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-gone").await?;
    let repo = Repo::new(&ns)?;
    repo.write_app(
        "stays",
        &application(
            "stays",
            &ns.name,
            &[config_map_component("cfg", "stays", "blue")],
        ),
    )?;
    let mut leaving = application(
        "leaves",
        &ns.name,
        &[
            config_map_component("cfg", "leaves", "blue"),
            config_map_component("keep", "leaves-kept", "blue"),
        ],
    );
    leaving.push_str(
        "  policies:
    - name: gc
      type: garbage-collect
      properties:
        rules:
          - selector:
              componentNames: [keep]
            strategy: never
",
    );
    repo.write_app("leaves", &leaving)?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;

    std::fs::remove_file(repo.path().join("apps/leaves.yaml"))?;
    expect_plan(&cluster, &repo, vec![delete("ConfigMap/leaves")])?;
    expect_success(&apply(&cluster, &repo)?, "apply after removal")?;
    expect_config_maps(&cluster, &ns.name, &["stays", "leaves-kept"]).await?;
    Ok(())
}

#[tokio::test]
async fn a_tracked_object_that_lost_our_marks_is_never_pruned() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-marks").await?;
    let repo = Repo::new(&ns)?;
    let both = vec![
        config_map_component("main", "main", "blue"),
        config_map_component("adopted", "adopted", "blue"),
    ];
    repo.write_app("shop", &application("shop", &ns.name, &both))?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;
    // Someone takes the object over by hand: our owner annotation is gone.
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    config_maps
        .patch(
            "adopted",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"annotations": {"driftless.dev/owner": null}}}),
            ),
        )
        .await?;

    repo.write_app("shop", &application("shop", &ns.name, &both[..1]))?;
    let (_, planned) = plan(&cluster, &repo)?;
    let adopted = planned["apps"][0]["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|change| change["name"] == "adopted")
        .context("the plan does not mention the object")?;
    assert_eq!(adopted["action"], "unchanged");
    assert!(
        adopted["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("no longer carries"),
        "{adopted:#}"
    );
    expect_success(&apply(&cluster, &repo)?, "second apply")?;
    expect_config_maps(&cluster, &ns.name, &["main", "adopted"]).await?;
    // It left the tracker: the next plan does not mention it at all.
    let (code, clean) = plan(&cluster, &repo)?;
    assert_eq!(code, 0);
    assert!(!clean.to_string().contains("\"adopted\""), "{clean:#}");
    Ok(())
}

/// A kubeconfig for a ServiceAccount of `ns` that may only work with ConfigMaps there.
async fn configmaps_only_kubeconfig(
    cluster: &TestCluster,
    ns: &TestNamespace,
    dir: &Path,
) -> Result<std::path::PathBuf> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

    let client = cluster.client.clone();
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns.name);
    accounts
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: meta("limited"),
                ..ServiceAccount::default()
            },
        )
        .await?;
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns.name);
    roles
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta("configmaps"),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["configmaps".to_owned()]),
                    verbs: [
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ]
                    .map(str::to_owned)
                    .to_vec(),
                    ..PolicyRule::default()
                }]),
            },
        )
        .await?;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns.name);
    bindings
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta("configmaps"),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".to_owned(),
                    kind: "Role".to_owned(),
                    name: "configmaps".to_owned(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: "limited".to_owned(),
                    namespace: Some(ns.name.clone()),
                    ..Subject::default()
                }]),
            },
        )
        .await?;
    let token = accounts
        .create_token_request(
            "limited",
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![],
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            },
        )
        .await?
        .status
        .context("the token request has no status")?
        .token;
    let admin = std::fs::read_to_string(&cluster.kubeconfig)?;
    let line = |key: &str| {
        admin
            .lines()
            .find(|line| line.trim_start().starts_with(key))
            .map(str::trim)
            .with_context(|| format!("kubeconfig has no {key}"))
    };
    let kubeconfig = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    {}
    {}
users:
- name: limited
  user:
    token: {token}
contexts:
- name: limited
  context:
    cluster: e2e
    user: limited
current-context: limited
",
        line("server:")?,
        line("certificate-authority")?,
    );
    let path = dir.join("limited-kubeconfig");
    std::fs::write(&path, kubeconfig)?;
    Ok(path)
}

#[tokio::test]
async fn rbac_forbidden_is_a_per_object_error_of_its_app_only() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-rbac").await?;
    let repo = Repo::new(&ns)?;
    let kubeconfig = configmaps_only_kubeconfig(&cluster, &ns, repo.path()).await?;
    repo.write_app(
        "fine",
        &application(
            "fine",
            &ns.name,
            &[config_map_component("cfg", "fine-cfg", "blue")],
        ),
    )?;
    repo.write_app(
        "denied",
        &application(
            "denied",
            &ns.name,
            &[
                config_map_component("cfg", "denied-cfg", "blue"),
                webservice_component("web", "registry.invalid/web:1"),
            ],
        ),
    )?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "apply",
            repo.path().to_str().context("utf-8 path")?,
            "--yes",
        ])
        .args(["--tracker-namespace", &ns.name, "--kubeconfig"])
        .arg(&kubeconfig)
        .output()?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "Deployment/{}/web: forbidden (RBAC) (403)",
            ns.name
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("app {}/fine: applied", ns.name)),
        "{text}"
    );
    assert!(
        text.contains(&format!("app {}/denied: not applied", ns.name)),
        "{text}"
    );
    expect_config_maps(&cluster, &ns.name, &["fine-cfg"]).await?;
    Ok(())
}

/// A ConfigMap component whose manifest pins `metadata.resourceVersion` (as when a live object
/// is pasted into Git): the apiserver then applies it only over that very version.
fn pinned_config_map_component(component: &str, name: &str, color: &str, version: &str) -> String {
    raw_component(
        component,
        &format!(
            "          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}
              resourceVersion: \"{version}\"
            data:
              color: {color}
"
        ),
    )
}

/// Renders the repository and plans it in this process, so a test can act between the plan and
/// the apply.
async fn plan_in_process(
    cluster: &TestCluster,
    repo: &Repo,
) -> Result<(
    agent::cluster::Cluster,
    agent::sync::LivePlan,
    agent::sync::LiveOptions,
)> {
    let live_cluster = agent::cluster::Cluster::connect(
        &cluster.kubeconfig,
        None,
        &agent::cluster::ClusterOptions::default(),
    )
    .await?;
    let worktree = agent::source::worktree::read_worktree(repo.path())?;
    let (output, _) = analyzer::render_snapshot(
        &worktree.snapshot,
        &analyzer::Definitions::builtin(),
        &analyzer::RenderOptions {
            cluster_version: analyzer::ClusterVersion::release(1, 34),
            ..analyzer::RenderOptions::default()
        },
    );
    let policies = agent::live::policies(&output);
    let mut options = agent::sync::LiveOptions {
        tracker_namespace: repo.tracker_namespace.clone(),
        ..agent::sync::LiveOptions::default()
    };
    options.apply.source = Some(std::fs::canonicalize(repo.path())?.display().to_string());
    let live_plan = agent::sync::plan_live(&live_cluster, &output, &policies, None, &options).await;
    Ok((live_cluster, live_plan, options))
}

fn planned(live_plan: &agent::sync::LivePlan, app: &str) -> Vec<String> {
    live_plan
        .plan
        .apps
        .iter()
        .filter(|plan| plan.app.name == app)
        .flat_map(|plan| &plan.changes)
        .filter(|change| change.action != agent::plan::Action::Unchanged)
        .map(|change| format!("{} {}", change.action.as_str(), change.object.name))
        .collect()
}

#[tokio::test]
async fn conflicts_409_during_apply_stop_their_app_without_prune() -> Result<()> {
    use agent::apply::ApplyOutcome;
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-409").await?;
    let repo = Repo::new(&ns)?;
    let two = |app: &str| {
        application(
            app,
            &ns.name,
            &[
                config_map_component("keep", &format!("{app}-keep"), "blue"),
                config_map_component("old", &format!("{app}-old"), "blue"),
            ],
        )
    };
    repo.write_app("pinned", &two("pinned"))?;
    repo.write_app("raced", &two("raced"))?;
    repo.write_app(
        "bystander",
        &application(
            "bystander",
            &ns.name,
            &[config_map_component("main", "bystander", "blue")],
        ),
    )?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let version = config_maps
        .get("pinned-keep")
        .await?
        .metadata
        .resource_version
        .context("a live object has a resourceVersion")?;

    // Every app changes its kept object; `pinned` and `raced` also drop `old` (a prune).
    repo.write_app(
        "pinned",
        &application(
            "pinned",
            &ns.name,
            &[pinned_config_map_component(
                "keep",
                "pinned-keep",
                "green",
                &version,
            )],
        ),
    )?;
    repo.write_app(
        "raced",
        &application(
            "raced",
            &ns.name,
            &[config_map_component("keep", "raced-keep", "green")],
        ),
    )?;
    repo.write_app(
        "bystander",
        &application(
            "bystander",
            &ns.name,
            &[config_map_component("main", "bystander", "green")],
        ),
    )?;
    let (live_cluster, live_plan, options) = plan_in_process(&cluster, &repo).await?;
    assert_eq!(
        planned(&live_plan, "pinned"),
        vec!["delete pinned-old", "update pinned-keep"]
    );
    assert_eq!(
        planned(&live_plan, "raced"),
        vec!["delete raced-old", "update raced-keep"]
    );

    // Between the plan and the apply, someone else edits `pinned-keep` (its resourceVersion
    // moves on) and writes `raced`'s tracker (another agent on the same app).
    let edit = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"labels": {"edited-by": "someone-else"}}
    });
    config_maps
        .patch(
            "pinned-keep",
            &PatchParams::apply("someone-else"),
            &Patch::Merge(&edit),
        )
        .await?;
    let trackers: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &repo.tracker_namespace);
    trackers
        .patch(
            &format!("{}.raced", ns.name),
            &PatchParams::default(),
            &Patch::Merge(&edit),
        )
        .await?;

    let reports = agent::sync::apply_live(&live_cluster, &live_plan, &options).await;
    let report = |app: &str| {
        reports
            .iter()
            .find(|report| report.app.name == app)
            .with_context(|| format!("no apply report for {app}"))
    };
    // The object's 409 is its own error, named with the object.
    let pinned = report("pinned")?;
    let pinned_error = pinned
        .objects
        .iter()
        .find(|object| object.object.name == "pinned-keep")
        .and_then(|object| object.error.clone())
        .context("pinned-keep has an error")?;
    assert!(
        pinned_error.starts_with("conflict (409): "),
        "{pinned_error}"
    );
    assert!(
        matches!(&pinned.outcome, ApplyOutcome::Failed(reason)
            if reason.starts_with(&format!("ConfigMap/{}/pinned-keep: conflict (409)", ns.name))),
        "{:?}",
        pinned.outcome
    );
    // The tracker's 409 stops `raced` before any object is touched.
    let raced = report("raced")?;
    assert!(
        matches!(&raced.outcome, ApplyOutcome::Failed(reason)
            if reason.contains("was changed by someone else meanwhile")),
        "{:?}",
        raced.outcome
    );
    assert!(raced.objects.is_empty(), "{:?}", raced.objects);
    assert_eq!(report("bystander")?.outcome, ApplyOutcome::Applied);

    // Nothing pruned, nothing of the stopped apps written; the other app applied.
    let names = config_map_names(&cluster, &ns.name).await?;
    for name in ["pinned-old", "raced-old", "pinned-keep", "raced-keep"] {
        assert!(names.contains(name), "{name} missing: {names:?}");
    }
    let color = |name: &'static str| {
        let config_maps = config_maps.clone();
        async move {
            anyhow::Ok(
                config_maps
                    .get(name)
                    .await?
                    .data
                    .and_then(|data| data.get("color").cloned()),
            )
        }
    };
    assert_eq!(color("pinned-keep").await?.as_deref(), Some("blue"));
    assert_eq!(color("raced-keep").await?.as_deref(), Some("blue"));
    assert_eq!(color("bystander").await?.as_deref(), Some("green"));
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
