//! Fail closed: nothing is deleted on incomplete information. `driftless apply` and the agent
//! against the real cluster (the agent with the real Gitea), each case ending with no object of
//! another app touched and nothing pruned that must stay.
//!
//! Each test shares one repository and one first apply between its cases: a case breaks the
//! repository, checks that nothing was pruned, and repairs it for the next.

use std::collections::BTreeMap;
use std::process::Output;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::support::agent::wait_for;
use crate::support::apps::config_map_app;
use crate::support::cli::{Repo, driftless};
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::Gitea;
use crate::support::gitea_agent::{AgentLines, GiteaAgent};

/// A repository definition: a component rendering one ConfigMap `<component>-map`.
const SETTINGS_MAP_DEFINITION: &str = r#""settings-map": {
	type: "component"
	description: "One ConfigMap holding a color"
	attributes: workload: definition: {
		apiVersion: "v1"
		kind:       "ConfigMap"
	}
}
template: {
	output: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: context.name + "-map"
		data: color: parameter.color
	}
	parameter: color: string
}
"#;

/// The app `name` in `namespace` with one `settings-map` component (the repository's own
/// definition).
fn settings_map_app(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
    - name: {name}
      type: settings-map
      properties:
        color: blue
"
    )
}

/// `manifest` with a tab put into the indentation of its `spec:` block: not YAML any more.
fn with_tab(manifest: &str) -> String {
    let broken = manifest.replacen("\n  components:", "\n\tcomponents:", 1);
    assert_ne!(broken, manifest, "the manifest has a components block");
    broken
}

/// Name → resourceVersion of the app ConfigMaps of the namespace (trackers aside).
async fn config_map_versions(
    cluster: &TestCluster,
    namespace: &str,
) -> Result<BTreeMap<String, String>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), namespace);
    Ok(config_maps
        .list(&ListParams::default().labels("!driftless.dev/tracker"))
        .await?
        .items
        .into_iter()
        .filter_map(|config_map| {
            let name = config_map.metadata.name?;
            (name != "kube-root-ca.crt").then_some((name, config_map.metadata.resource_version?))
        })
        .collect())
}

fn apply(cluster: &TestCluster, repo: &Repo) -> Result<Output> {
    driftless(
        cluster,
        &[
            "apply",
            repo.path_str()?,
            "--yes",
            "--tracker-namespace",
            &repo.tracker_namespace,
        ],
    )
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The apply failed (an app is blocked), said why, and left every ConfigMap as it was.
async fn expect_held(
    cluster: &TestCluster,
    repo: &Repo,
    namespace: &str,
    before: &BTreeMap<String, String>,
    says: &[&str],
) -> Result<()> {
    let output = apply(cluster, repo)?;
    let text = text(&output);
    ensure!(
        !output.status.success(),
        "a blocked apply must fail:\n{text}"
    );
    for expected in says {
        ensure!(
            text.contains(expected),
            "the apply should say {expected:?}:\n{text}"
        );
    }
    let after = config_map_versions(cluster, namespace).await?;
    ensure!(
        &after == before,
        "objects were pruned or touched: before {before:?}, after {after:?}\n{text}"
    );
    Ok(())
}

/// `driftless apply` prunes nothing on incomplete information: a file with a tab in its
/// indentation (the headline bug: its app was pruned), an app whose render starts failing, a
/// removed definition, and a definition that no longer loads while another app leaves Git.
/// Then, with every file loading again, a deleted file's app is pruned as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_prunes_nothing_on_incomplete_information() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "failclosed-cli").await?;
    let ns = namespace.name.as_str();
    let repo = Repo::new(&namespace)?;
    let definitions = repo.path().join("definitions");
    std::fs::create_dir_all(&definitions)?;
    let definition = definitions.join("settings-map.cue");
    std::fs::write(&definition, SETTINGS_MAP_DEFINITION)?;
    let alpha = config_map_app("alpha", ns, "blue");
    let beta = config_map_app("beta", ns, "blue");
    repo.write_app("alpha", &alpha)?;
    repo.write_app("beta", &beta)?;
    repo.write_app("gamma", &settings_map_app("gamma", ns))?;
    let first = apply(&cluster, &repo)?;
    ensure!(first.status.success(), "first apply:\n{}", text(&first));
    let deployed = config_map_versions(&cluster, ns).await?;
    assert_eq!(
        deployed.keys().map(String::as_str).collect::<Vec<_>>(),
        ["alpha-settings", "beta-settings", "gamma-map"]
    );

    // A broken YAML file: its app is kept, blocked, and the file is named.
    repo.write_app("alpha", &with_tab(&alpha))?;
    expect_held(
        &cluster,
        &repo,
        ns,
        &deployed,
        &["apps/alpha.yaml did not load", "prune-held"],
    )
    .await?;
    repo.write_app("alpha", &alpha)?;

    // An app whose render starts failing: blocked, its objects stay.
    repo.write_app(
        "beta",
        &beta.replace("type: k8s-objects", "type: no-such-type"),
    )?;
    expect_held(&cluster, &repo, ns, &deployed, &["no-such-type"]).await?;
    repo.write_app("beta", &beta)?;

    // A removed definition: the app using it is blocked, its objects stay.
    std::fs::remove_file(&definition)?;
    expect_held(&cluster, &repo, ns, &deployed, &["settings-map"]).await?;

    // A definition that no longer loads holds every prune of the pass, even of an app whose
    // file was deleted meanwhile.
    std::fs::write(
        &definition,
        SETTINGS_MAP_DEFINITION.replace("data: color:", "data: ) color:"),
    )?;
    std::fs::remove_file(repo.path().join("apps/beta.yaml"))?;
    expect_held(
        &cluster,
        &repo,
        ns,
        &deployed,
        &["definitions/settings-map.cue did not load"],
    )
    .await?;

    // Every file loads again: the deleted file's app is pruned, and only it.
    std::fs::write(&definition, SETTINGS_MAP_DEFINITION)?;
    let last = apply(&cluster, &repo)?;
    ensure!(last.status.success(), "last apply:\n{}", text(&last));
    let mut expected = deployed.clone();
    expected.remove("beta-settings");
    assert_eq!(config_map_versions(&cluster, ns).await?, expected);
    Ok(())
}

/// The agent prunes nothing on a commit whose files do not load: a tab put into one app's
/// file keeps that app's objects and fails its commit status, naming the file; the other app
/// is untouched. A commit whose app fails to render keeps its objects too. A commit that
/// deletes the file then prunes the app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_prunes_nothing_for_a_broken_commit() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "failclosed-agent").await?;
    let ns = namespace.name.as_str();
    let agent = GiteaAgent::start(
        &gitea,
        &cluster,
        "failclosed-agent",
        &AgentLines::default(),
        &[],
    )
    .await?;
    let tree = &agent.tree;
    let alpha = config_map_app("alpha", ns, "blue");
    let beta = config_map_app("beta", ns, "blue");
    tree.write("apps/alpha.yaml", &alpha)?;
    tree.write("apps/beta.yaml", &beta)?;
    let first = tree.commit_and_push("two apps", "main")?;
    let (first_summary, _) = agent.summary(&first).await?;
    assert_eq!(first_summary.0, "success", "{first_summary:?}");
    let deployed = config_map_versions(&cluster, ns).await?;
    assert_eq!(
        deployed.keys().map(String::as_str).collect::<Vec<_>>(),
        ["alpha-settings", "beta-settings"]
    );

    // A tab in alpha's indentation: alpha is kept and its status names the file.
    tree.write("apps/alpha.yaml", &with_tab(&alpha))?;
    let broken = tree.commit_and_push("a tab in alpha", "main")?;
    let ((state, description), statuses) = agent.summary(&broken).await?;
    assert_eq!(state, "failure", "{description}");
    let alpha_status = statuses
        .get(&format!("driftless/{ns}/alpha"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(alpha_status.0, "failure", "{statuses:?}");
    assert!(
        alpha_status.1.contains("apps/alpha.yaml did not load"),
        "{alpha_status:?}"
    );
    assert_eq!(config_map_versions(&cluster, ns).await?, deployed);

    // Repaired, then beta's render fails: beta is kept.
    tree.write("apps/alpha.yaml", &alpha)?;
    tree.write(
        "apps/beta.yaml",
        &beta.replace("type: k8s-objects", "type: no-such-type"),
    )?;
    let failing = tree.commit_and_push("beta fails to render", "main")?;
    let ((state, description), _) = agent.summary(&failing).await?;
    assert_eq!(state, "failure", "{description}");
    assert_eq!(config_map_versions(&cluster, ns).await?, deployed);

    // Positive evidence: beta's file is deleted, every file loads. Beta goes, alpha stays.
    std::fs::remove_file(tree.dir.path().join("apps/beta.yaml"))?;
    let removed = tree.commit_and_push("beta leaves", "main")?;
    let ((state, description), _) = agent.summary(&removed).await?;
    assert_eq!(state, "success", "{description}");
    let mut expected = deployed.clone();
    expected.remove("beta-settings");
    assert_eq!(config_map_versions(&cluster, ns).await?, expected);
    agent.stop()?;
    Ok(())
}

/// `driftless apply` holds a mass prune: removing 9 of 12 apps prunes nothing, fails and says
/// how to approve; `--approve-prune` then prunes them, and only them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_holds_a_mass_prune_until_approved() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "failclosed-budget").await?;
    let ns = namespace.name.as_str();
    let repo = Repo::new(&namespace)?;
    for index in 0..12 {
        let name = format!("app-{index}");
        repo.write_app(&name, &config_map_app(&name, ns, "blue"))?;
    }
    let first = apply(&cluster, &repo)?;
    ensure!(first.status.success(), "first apply:\n{}", text(&first));
    let deployed = config_map_versions(&cluster, ns).await?;
    assert_eq!(deployed.len(), 12);
    for index in 3..12 {
        std::fs::remove_file(repo.path().join(format!("apps/app-{index}.yaml")))?;
    }
    expect_held(
        &cluster,
        &repo,
        ns,
        &deployed,
        &[
            "9 prune(s) held by the prune budget (75% of 12 objects",
            "driftless apply --approve-prune",
        ],
    )
    .await?;
    let approved = driftless(
        &cluster,
        &[
            "apply",
            repo.path_str()?,
            "--yes",
            "--approve-prune",
            "--tracker-namespace",
            &repo.tracker_namespace,
        ],
    )?;
    ensure!(
        approved.status.success(),
        "approved apply:\n{}",
        text(&approved)
    );
    let kept: BTreeMap<String, String> = deployed
        .into_iter()
        .filter(|(name, _)| {
            ["app-0-settings", "app-1-settings", "app-2-settings"].contains(&name.as_str())
        })
        .collect();
    assert_eq!(config_map_versions(&cluster, ns).await?, kept);
    Ok(())
}

/// The agent holds a commit that removes 90% of a source's apps: nothing is pruned, the
/// commit's summary status fails naming the count, and `driftless approve-prune` (stored in
/// the cluster) lets the agent prune them, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_holds_a_mass_prune_until_approved() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "failclosed-approve").await?;
    let ns = namespace.name.as_str();
    let agent = GiteaAgent::start(
        &gitea,
        &cluster,
        "failclosed-approve",
        &AgentLines::default(),
        &[],
    )
    .await?;
    for index in 0..10 {
        let name = format!("app-{index}");
        agent.tree.write(
            &format!("apps/{name}.yaml"),
            &config_map_app(&name, ns, "blue"),
        )?;
    }
    let first = agent.tree.commit_and_push("ten apps", "main")?;
    let (summary, _) = agent.summary(&first).await?;
    assert_eq!(summary.0, "success", "{summary:?}");
    let deployed = config_map_versions(&cluster, ns).await?;
    assert_eq!(deployed.len(), 10);

    for index in 1..10 {
        std::fs::remove_file(agent.tree.dir.path().join(format!("apps/app-{index}.yaml")))?;
    }
    let mass = agent.tree.commit_and_push("nine apps leave", "main")?;
    let ((state, description), _) = agent.summary(&mass).await?;
    assert_eq!(state, "failure", "{description}");
    assert!(
        description.starts_with("9 prune(s) held by the prune budget (90% of 10 objects"),
        "{description}"
    );
    assert!(
        description.contains("approved with `driftless approve-prune"),
        "{description}"
    );
    assert_eq!(config_map_versions(&cluster, ns).await?, deployed);

    let approve = driftless(
        &cluster,
        &[
            "approve-prune",
            "--source",
            &agent.source,
            "--revision",
            &mass,
            "--objects",
            "9",
        ],
    )?;
    ensure!(
        approve.status.success(),
        "approve-prune:\n{}",
        text(&approve)
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    wait_for("the approved prunes", || async {
        let left = config_maps
            .list(&ListParams::default().labels("!driftless.dev/tracker"))
            .await?
            .items
            .len();
        // app-0's ConfigMap and the root CA.
        Ok((left == 2).then_some(()))
    })
    .await?;
    let kept: BTreeMap<String, String> = deployed
        .into_iter()
        .filter(|(name, _)| name == "app-0-settings")
        .collect();
    assert_eq!(config_map_versions(&cluster, ns).await?, kept);
    let (summary, _) = agent.summary(&mass).await?;
    assert_eq!(summary.0, "success", "{summary:?}");
    agent.stop()?;
    Ok(())
}

/// The app `name` in `namespace` rendering `objects` (YAML list items, indented for
/// `k8s-objects`), with `policies` (YAML, indented under `spec:`; may be empty).
fn objects_app(name: &str, namespace: &str, objects: &str, policies: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
    - name: {name}
      type: k8s-objects
      properties:
        objects:
{objects}{policies}"
    )
}

/// Deletes namespaces a test made besides its `TestNamespace` (best effort).
async fn delete_namespaces(cluster: &TestCluster, names: &[&str]) {
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    for name in names {
        let _ = namespaces.delete(name, &DeleteParams::background()).await;
    }
}

/// Protected objects and the reserved tracker namespace, with `driftless apply`: a Namespace the
/// app's policy lets it prune is not deleted while it holds an object the app does not own (the
/// app's own object in it is pruned; the foreign one is untouched); a Namespace without such a
/// policy is never pruned; an app writing into the tracker namespace is refused as a plan error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_namespaces_and_the_reserved_tracker_namespace() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "failclosed-protect").await?;
    let ns = namespace.name.as_str();
    let tenant_ns = format!("{ns}-tenant");
    let plain_ns = format!("{ns}-plain");
    let result = async {
        let repo = Repo::new(&namespace)?;
        repo.write_app("base", &config_map_app("base", ns, "blue"))?;
        let tenant_objects = format!(
            "          - apiVersion: v1
            kind: Namespace
            metadata:
              name: {tenant_ns}
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: tenant-settings
              namespace: {tenant_ns}
            data:
              color: blue
"
        );
        let collect_namespaces = "  policies:
    - name: collect
      type: garbage-collect
      properties:
        rules:
          - selector:
              resourceTypes: [Namespace]
            strategy: onAppUpdate
";
        repo.write_app(
            "tenant",
            &objects_app("tenant", ns, &tenant_objects, collect_namespaces),
        )?;
        let plain_objects = format!(
            "          - apiVersion: v1
            kind: Namespace
            metadata:
              name: {plain_ns}
"
        );
        repo.write_app("plain", &objects_app("plain", ns, &plain_objects, ""))?;
        let first = apply(&cluster, &repo)?;
        ensure!(first.status.success(), "first apply:\n{}", text(&first));
        let base_before = config_map_versions(&cluster, ns).await?;

        // Someone else keeps an object in the tenant's Namespace.
        let tenant_config_maps: Api<ConfigMap> =
            Api::namespaced(cluster.client.clone(), &tenant_ns);
        let foreign: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "foreign"},
            "data": {"owner": "someone else"},
        }))?;
        tenant_config_maps
            .create(&PostParams::default(), &foreign)
            .await?;
        std::fs::remove_file(repo.path().join("apps/tenant.yaml"))?;
        std::fs::remove_file(repo.path().join("apps/plain.yaml"))?;
        let removed = apply(&cluster, &repo)?;
        let removed_text = text(&removed);
        ensure!(!removed.status.success(), "{removed_text}");
        ensure!(
            removed_text.contains("holds objects app")
                && removed_text.contains("ConfigMap/foreign"),
            "the refusal names the foreign object:\n{removed_text}"
        );
        let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
        for kept in [&tenant_ns, &plain_ns] {
            let live = namespaces.get(kept).await?;
            ensure!(
                live.metadata.deletion_timestamp.is_none(),
                "namespace {kept} is being deleted:\n{removed_text}"
            );
        }
        ensure!(
            tenant_config_maps
                .get_opt("tenant-settings")
                .await?
                .is_none(),
            "{removed_text}"
        );
        let foreign = tenant_config_maps.get("foreign").await?;
        assert_eq!(
            foreign
                .data
                .as_ref()
                .and_then(|data| data.get("owner"))
                .map(String::as_str),
            Some("someone else")
        );
        assert_eq!(config_map_versions(&cluster, ns).await?, base_before);

        // An app of another namespace writing into the tracker namespace: a plan error, nothing
        // written.
        let intruder_objects = format!(
            "          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: intruder
              namespace: {ns}
            data:
              color: red
"
        );
        repo.write_app(
            "intruder",
            &objects_app("intruder", &tenant_ns, &intruder_objects, ""),
        )?;
        let refused = apply(&cluster, &repo)?;
        let refused_text = text(&refused);
        ensure!(!refused.status.success(), "{refused_text}");
        ensure!(
            refused_text.contains("reserved-namespace")
                && refused_text.contains(&format!("ConfigMap/{ns}/intruder")),
            "{refused_text}"
        );
        assert_eq!(config_map_versions(&cluster, ns).await?, base_before);
        anyhow::Ok(())
    }
    .await;
    delete_namespaces(&cluster, &[&tenant_ns, &plain_ns]).await;
    result
}

/// The same app in a second source: its apply is a conflict naming the first source, and the
/// first source's objects are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_app_in_a_second_source_is_a_conflict() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "failclosed-sources").await?;
    let ns = namespace.name.as_str();
    let first = Repo::new(&namespace)?;
    first.write_app("shared", &config_map_app("shared", ns, "blue"))?;
    let applied = apply(&cluster, &first)?;
    ensure!(applied.status.success(), "{}", text(&applied));
    let before = config_map_versions(&cluster, ns).await?;
    let second = Repo::new(&namespace)?;
    second.write_app("shared", &config_map_app("shared", ns, "green"))?;
    second.write_app("other", &config_map_app("other", ns, "green"))?;
    let conflict = apply(&cluster, &second)?;
    let conflict_text = text(&conflict);
    ensure!(!conflict.status.success(), "{conflict_text}");
    ensure!(
        conflict_text.contains("source-conflict")
            && conflict_text.contains(&format!("app {ns}/shared is deployed from source")),
        "{conflict_text}"
    );
    let after = config_map_versions(&cluster, ns).await?;
    assert_eq!(after.get("shared-settings"), before.get("shared-settings"));
    // The second source's other app is applied.
    assert!(after.contains_key("other-settings"), "{after:?}");
    Ok(())
}

/// An object planned as absent and created by someone else before the apply: the apply reports
/// a conflict and never takes it over; the other objects of the pass are applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_created_between_plan_and_apply_is_not_taken_over() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "failclosed-race").await?;
    let ns = namespace.name.as_str();
    let repo = Repo::new(&namespace)?;
    repo.write_app("racing", &config_map_app("racing", ns, "blue"))?;
    repo.write_app("calm", &config_map_app("calm", ns, "blue"))?;
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
        &analyzer::RenderOptions::default(),
    );
    let policies = agent::live::policies(&output);
    let mut options = agent::sync::LiveOptions {
        tracker_namespace: repo.tracker_namespace.clone(),
        ..agent::sync::LiveOptions::default()
    };
    options.apply.source = Some(format!("race-{ns}"));
    let live_plan = agent::sync::plan_live(&live_cluster, &output, &policies, None, &options).await;

    // Between the plan and the apply, someone else creates racing's ConfigMap.
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let theirs: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "racing-settings"},
        "data": {"color": "theirs"},
    }))?;
    config_maps.create(&PostParams::default(), &theirs).await?;
    let reports = agent::sync::apply_live(&live_cluster, &live_plan, &options).await;
    let racing = reports
        .iter()
        .find(|report| report.app.name == "racing")
        .context("racing's report")?;
    match &racing.outcome {
        agent::apply::ApplyOutcome::Failed(message) => {
            ensure!(message.contains("created by someone else"), "{message}")
        }
        other => anyhow::bail!("racing was not refused: {other:?}"),
    }
    let live = config_maps.get("racing-settings").await?;
    assert_eq!(
        live.data
            .as_ref()
            .and_then(|data| data.get("color"))
            .map(String::as_str),
        Some("theirs")
    );
    assert!(
        live.metadata
            .annotations
            .as_ref()
            .is_none_or(|annotations| !annotations.contains_key("driftless.dev/owner")),
        "taken over: {:?}",
        live.metadata
    );
    let calm = reports
        .iter()
        .find(|report| report.app.name == "calm")
        .context("calm's report")?;
    assert_eq!(calm.outcome, agent::apply::ApplyOutcome::Applied);
    assert!(config_maps.get_opt("calm-settings").await?.is_some());
    Ok(())
}
