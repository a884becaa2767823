//! Secrets and boundaries end to end, against the real Gitea and the shared local cluster:
//!
//! - a pull request that adds, changes and removes Secrets: its plan comment, statuses and
//!   plan page show key names and masks, never a value (desired or live), and a plan page
//!   asked for without credentials is refused;
//! - a pull request from a fork is not previewed: no comment, no status, no page;
//! - a source restricted to its namespaces: an app writing into another namespace, and one
//!   creating a ClusterRoleBinding, are refused in the preview and at deploy, and at apply even
//!   when the analysis did not check the boundary;
//! - a source applying as a ServiceAccount (the library's impersonating cluster, and the agent
//!   with `serviceAccount`): what its RBAC forbids is refused by the apiserver, reported (plan
//!   diagnostics, the app's failure status), and nothing of that app is applied.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{
    ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::json;

use crate::support::agent::{WorkTree, free_port, wait_for};
use crate::support::apps::config_map_app;
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::Gitea;
use crate::support::gitea_agent::{AgentLines, new_repo, start_agent, write_config};

/// Every Secret value the tests write, plain and base64: none may appear anywhere.
const VALUES: &[&str] = &[
    "hunter2",
    "aHVudGVyMg",
    "oldtoken-value-1",
    "b2xkdG9rZW4tdmFsdWUtMQ",
    "swordfish-value-2",
    "c3dvcmRmaXNoLXZhbHVlLTI",
    "letmein-value-3",
    "bGV0bWVpbi12YWx1ZS0z",
];

fn assert_no_value(what: &str, text: &str) {
    for value in VALUES {
        assert!(
            !text.contains(value),
            "{what} shows a Secret value ({value}):\n{text}"
        );
    }
}

/// An app `vault` of `k8s-objects`: a ConfigMap and the given objects (YAML list items).
fn objects_app(name: &str, ns: &str, objects: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {ns}
spec:
  components:
    - name: objects
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}-settings
            data:
              color: blue
{objects}"
    )
}

/// The latest `driftless` summary status of `commit` once it is final.
async fn final_summary(gitea: &Gitea, repo: &str, commit: &str) -> Result<(String, String)> {
    wait_for("the final summary status", || async {
        let latest = gitea.latest_statuses(repo, commit).await?;
        Ok(latest
            .get("driftless")
            .filter(|(state, _)| state != "pending")
            .cloned())
    })
    .await
}

/// A work tree on main of `repo`.
fn tree_on_main(gitea: &Gitea, repo: &str) -> Result<WorkTree> {
    let tree = WorkTree::new(gitea.push_url(repo))?;
    tree.git(&["fetch", "-q", &gitea.push_url(repo), "main"])?;
    tree.git(&["reset", "-q", "--hard", "FETCH_HEAD"])?;
    Ok(tree)
}

/// The plan comment of `source` on a pull request, once there is one.
async fn plan_comment(gitea: &Gitea, repo: &str, source: &str, pull: u64) -> Result<String> {
    let marker = format!("<!-- driftless:plan source={source} -->");
    wait_for("the plan comment", || async {
        let comments = gitea.comments(repo, pull).await?;
        Ok(comments
            .into_iter()
            .map(|(_, body)| body)
            .find(|body| body.starts_with(&marker)))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_changing_secrets_shows_keys_and_never_a_value() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "secrets").await?;
    let ns = namespace.name.as_str();
    let (repo, source) = new_repo(&gitea, "secrets").await?;

    // Deployed: Secret `db` (data) and Secret `old` (stringData).
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write(
        "apps/vault.yaml",
        &objects_app(
            "vault",
            ns,
            "          - apiVersion: v1
            kind: Secret
            metadata: { name: db }
            data: { password: aHVudGVyMg== }
          - apiVersion: v1
            kind: Secret
            metadata: { name: old }
            stringData: { token: oldtoken-value-1 }
",
        ),
    )?;
    let first = tree.commit_and_push("two secrets", "main")?;
    let port = free_port()?;
    let work = tempfile::tempdir()?;
    let config = write_config(
        &gitea,
        &cluster,
        (&repo, &source),
        &AgentLines::default(),
        port,
        work.path(),
    )?;
    let agent = start_agent(&gitea, &config, port, &[])?;
    let (state, description) = final_summary(&gitea, &repo, &first).await?;
    assert_eq!(state, "success", "{description}");
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), ns);
    secrets
        .get("old")
        .await
        .context("the old Secret was deployed")?;

    // The deploy's plan page: refused without credentials; with them, keys and no value.
    let anonymous = reqwest::get(format!("{}/plans/{first}", agent.base)).await?;
    assert_eq!(anonymous.status(), 401);
    assert_no_value("the 401 body", &anonymous.text().await?);
    let page = agent
        .plan_page(&first)
        .await?
        .context("the deploy's page")?;
    assert_no_value("the deploy's plan page", &page);
    assert!(page.contains("password: ++++++++"), "{page}");

    // The pull request: `db` changes, `old` is removed, `new` is added.
    let feature = tree_on_main(&gitea, &repo)?;
    feature.write(
        "apps/vault.yaml",
        &objects_app(
            "vault",
            ns,
            "          - apiVersion: v1
            kind: Secret
            metadata: { name: db }
            stringData: { password: swordfish-value-2 }
          - apiVersion: v1
            kind: Secret
            metadata: { name: new }
            data: { api-key: bGV0bWVpbi12YWx1ZS0z }
",
        ),
    )?;
    let head = feature.commit_and_push("change, add and remove secrets", "rotate")?;
    let pull = gitea.open_pull(&repo, "rotate", "rotate").await?;
    let comment = plan_comment(&gitea, &repo, &source, pull).await?;
    assert_no_value("the plan comment", &comment);
    // Key names and Argo CD's masks: the changed value shows as changed.
    for shown in ["password", "api-key", "token", "++++++++", "+++++++++"] {
        assert!(comment.contains(shown), "{shown} in:\n{comment}");
    }
    assert!(comment.contains("Secret"), "{comment}");
    final_summary(&gitea, &repo, &head).await?;
    for (context, _, description) in gitea.statuses(&repo, &head).await? {
        assert_no_value(&format!("status {context}"), &description);
    }
    let preview_page = agent
        .plan_page(&head)
        .await?
        .context("the preview's page")?;
    assert_no_value("the preview's plan page", &preview_page);
    assert!(preview_page.contains("api-key"), "{preview_page}");

    // Nothing was applied by the preview.
    assert!(secrets.get("old").await.is_ok());
    let mut leaks: Vec<&str> = VALUES.to_vec();
    leaks.push(&gitea.token);
    agent.stop_checked(&leaks)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_from_a_fork_is_not_previewed() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "fork").await?;
    let ns = namespace.name.as_str();
    let (repo, source) = new_repo(&gitea, "forked").await?;
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write("apps/app.yaml", &config_map_app("app", ns, "blue"))?;
    let first = tree.commit_and_push("one app", "main")?;
    let port = free_port()?;
    let work = tempfile::tempdir()?;
    let config = write_config(
        &gitea,
        &cluster,
        (&repo, &source),
        &AgentLines::default(),
        port,
        work.path(),
    )?;
    let agent = start_agent(&gitea, &config, port, &[])?;
    final_summary(&gitea, &repo, &first).await?;

    // A second user forks the repository and opens a pull request from the fork (the admin
    // token acts as that user with Gitea's `Sudo` header, and may push to the fork).
    let forker = format!("forker-{}", source.trim_start_matches("forked-"));
    gitea
        .api(
            reqwest::Method::POST,
            "/admin/users",
            Some(json!({
                "username": forker,
                "email": format!("{forker}@example.invalid"),
                "password": "forker-password-123",
                "must_change_password": false,
            })),
        )
        .await?;
    let as_forker = |method: reqwest::Method, path: String, body: serde_json::Value| {
        reqwest::Client::new()
            .request(method, format!("{}/api/v1{path}", gitea.url))
            .header("authorization", format!("token {}", gitea.token))
            .header("sudo", forker.as_str())
            .json(&body)
            .send()
    };
    let forked = as_forker(
        reqwest::Method::POST,
        format!("/repos/{}/{repo}/forks", gitea.user),
        json!({}),
    )
    .await?;
    anyhow::ensure!(
        forked.status().is_success(),
        "fork: {}",
        forked.text().await?
    );
    let host = gitea.url.trim_start_matches("http://");
    let fork_push = format!(
        "http://{}:{}@{host}/{forker}/{repo}.git",
        gitea.user, gitea.token
    );
    let fork_tree = tree_on_main(&gitea, &repo)?;
    fork_tree.write("apps/app.yaml", &config_map_app("app", ns, "stolen-red"))?;
    let commit = fork_tree.commit_all("from the fork")?;
    fork_tree.git(&["push", "-q", "-f", &fork_push, "HEAD:refs/heads/evil"])?;
    let pull = wait_for("the pull request from the fork", || async {
        let response = as_forker(
            reqwest::Method::POST,
            format!("/repos/{}/{repo}/pulls", gitea.user),
            json!({"head": format!("{forker}:evil"), "base": "main", "title": "from a fork"}),
        )
        .await?;
        if !response.status().is_success() {
            return Ok(None);
        }
        let pull: serde_json::Value = response.json().await?;
        Ok(pull["number"].as_u64())
    })
    .await?;

    // The agent sees it and says why it does not preview it; nothing is posted or stored.
    wait_for("the agent to pass over the fork's pull request", || async {
        let log = agent.log_text()?;
        Ok(log
            .lines()
            .any(|line| {
                line.contains("pull request not previewed")
                    && line.contains(&format!("pull={pull}"))
                    && line.contains("fork")
            })
            .then_some(()))
    })
    .await?;
    assert!(gitea.comments(&repo, pull).await?.is_empty());
    assert!(gitea.statuses(&repo, &commit).await?.is_empty());
    assert_eq!(agent.plan_page(&commit).await?, None);
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let live = config_maps.get("app-settings").await?;
    assert_eq!(
        live.data
            .unwrap_or_default()
            .get("color")
            .map(String::as_str),
        Some("blue")
    );
    agent.stop_checked(&[&gitea.token])?;
    Ok(())
}

/// Items of `objects_app`: a ConfigMap in namespace `elsewhere`.
fn config_map_in(name: &str, elsewhere: &str) -> String {
    format!(
        "          - apiVersion: v1
            kind: ConfigMap
            metadata: {{ name: {name}, namespace: {elsewhere} }}
            data: {{ color: red }}
"
    )
}

/// Items of `objects_app`: a ClusterRoleBinding of `cluster-admin` to the default account.
fn cluster_admin_binding(name: &str, ns: &str) -> String {
    format!(
        "          - apiVersion: rbac.authorization.k8s.io/v1
            kind: ClusterRoleBinding
            metadata: {{ name: {name} }}
            roleRef: {{ apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin }}
            subjects: [{{ kind: ServiceAccount, name: default, namespace: {ns} }}]
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_boundary_refuses_other_namespaces_and_cluster_role_bindings() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "bounded").await?;
    let other = TestNamespace::new(&cluster, "outside").await?;
    let ns = namespace.name.as_str();
    let (repo, source) = new_repo(&gitea, "bounded").await?;
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write("apps/fine.yaml", &config_map_app("fine", ns, "blue"))?;
    let first = tree.commit_and_push("one app inside", "main")?;
    let port = free_port()?;
    let work = tempfile::tempdir()?;
    let boundary = format!("    boundary: {{ namespaces: ['{ns}'] }}\n");
    let config = write_config(
        &gitea,
        &cluster,
        (&repo, &source),
        &AgentLines {
            source: boundary,
            ..AgentLines::default()
        },
        port,
        work.path(),
    )?;
    let agent = start_agent(&gitea, &config, port, &[])?;
    assert_eq!(final_summary(&gitea, &repo, &first).await?.0, "success");

    // The pull request adds an app writing into another namespace and one binding
    // cluster-admin: the preview shows both refused.
    let binding = format!("{ns}-admin");
    let feature = tree_on_main(&gitea, &repo)?;
    feature.write(
        "apps/sneaky.yaml",
        &objects_app(
            "sneaky",
            ns,
            &config_map_in("sneaky-elsewhere", &other.name),
        ),
    )?;
    feature.write(
        "apps/escalate.yaml",
        &objects_app("escalate", ns, &cluster_admin_binding(&binding, ns)),
    )?;
    let head = feature.commit_and_push("leave the lane", "escalate")?;
    let pull = gitea.open_pull(&repo, "escalate", "escalate").await?;
    let comment = plan_comment(&gitea, &repo, &source, pull).await?;
    assert!(comment.contains("source-boundary"), "{comment}");
    assert!(
        comment.contains(&format!("namespace `{}` is outside source", other.name)),
        "{comment}"
    );
    assert!(comment.contains("ClusterRoleBinding"), "{comment}");
    assert_eq!(final_summary(&gitea, &repo, &head).await?.0, "failure");

    // Merged: the deploy refuses both apps whole; the app inside deploys as before.
    feature.git(&[
        "push",
        "-q",
        "-f",
        &gitea.push_url(&repo),
        "HEAD:refs/heads/main",
    ])?;
    let (state, _) = final_summary(&gitea, &repo, &head).await?;
    let latest = wait_for("the deploy's app statuses", || async {
        let latest = gitea.latest_statuses(&repo, &head).await?;
        let done = |app: &str| {
            latest
                .get(&format!("driftless/{ns}/{app}"))
                .is_some_and(|(state, _)| state != "pending")
        };
        Ok((done("sneaky") && done("escalate")).then_some(latest))
    })
    .await?;
    assert_eq!(state, "failure");
    for app in ["sneaky", "escalate"] {
        let (state, description) = &latest[&format!("driftless/{ns}/{app}")];
        assert_eq!(state, "failure", "{app}: {description}");
        assert!(
            description.contains("source-boundary"),
            "{app}: {description}"
        );
    }
    let elsewhere: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &other.name);
    assert!(elsewhere.get_opt("sneaky-elsewhere").await?.is_none());
    let inside: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    assert!(
        inside.get_opt("sneaky-settings").await?.is_none(),
        "nothing partial"
    );
    assert!(
        inside.get_opt("escalate-settings").await?.is_none(),
        "nothing partial"
    );
    let bindings: Api<ClusterRoleBinding> = Api::all(cluster.client.clone());
    assert!(bindings.get_opt(&binding).await?.is_none());
    agent.stop_checked(&[&gitea.token])?;
    Ok(())
}

/// Renders `files` (path, text) without the analysis: no `source-boundary` rule runs.
fn render(files: Vec<(String, String)>) -> (analyzer::RenderOutput, analyzer::SourceMap) {
    let snapshot = analyzer::Snapshot {
        commit: None,
        files: files
            .into_iter()
            .map(|(path, contents)| analyzer::SourceFile { path, contents })
            .collect(),
    };
    analyzer::render_snapshot(
        &snapshot,
        &analyzer::Definitions::builtin(),
        &analyzer::RenderOptions {
            cluster_version: analyzer::ClusterVersion::release(1, 34),
            ..analyzer::RenderOptions::default()
        },
    )
}

fn live_options(tracker_namespace: &str, source: &str) -> agent::sync::LiveOptions {
    let mut options = agent::sync::LiveOptions {
        tracker_namespace: tracker_namespace.to_owned(),
        ..agent::sync::LiveOptions::default()
    };
    options.apply.source = Some(source.to_owned());
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boundary_is_enforced_at_apply_even_without_the_analysis() -> Result<()> {
    use agent::apply::ApplyOutcome;
    use analyzer::boundary::{Globs, SourceBoundary};

    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "apply-bound").await?;
    let other = TestNamespace::new(&cluster, "apply-outside").await?;
    let trackers = TestNamespace::new(&cluster, "apply-trackers").await?;
    let ns = namespace.name.as_str();
    let (output, _) = render(vec![(
        "apps/sneaky.yaml".into(),
        objects_app(
            "sneaky",
            ns,
            &config_map_in("sneaky-elsewhere", &other.name),
        ),
    )]);
    assert!(!output.apps[0].is_blocked(), "no rule ran: {output:?}");
    let policies = agent::live::policies(&output);
    let mut options = live_options(&trackers.name, &format!("e2e-{ns}"));
    options.apply.boundary = Some(std::sync::Arc::new(SourceBoundary {
        source: "team".into(),
        namespaces: Some(Globs::new(&[ns.to_owned()]).map_err(|e| anyhow::anyhow!("{e:?}"))?),
        cluster_scoped_kinds: Some(Vec::new()),
        reserved_namespaces: vec![trackers.name.clone()],
        ..SourceBoundary::default()
    }));
    let agent_cluster = agent::cluster::Cluster::connect(
        &cluster.kubeconfig,
        None,
        &agent::cluster::ClusterOptions::default(),
    )
    .await?;
    let plan = agent::sync::plan_live(&agent_cluster, &output, &policies, None, &options).await;
    let reports = agent::sync::apply_live(&agent_cluster, &plan, &options).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    match &reports[0].outcome {
        ApplyOutcome::Failed(message) => assert!(
            message.contains("refused by the source boundary") && message.contains(&other.name),
            "{message}"
        ),
        other => panic!("expected the boundary to refuse the app, got {other:?}"),
    }
    let elsewhere: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &other.name);
    assert!(elsewhere.get_opt("sneaky-elsewhere").await?.is_none());
    let inside: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    assert!(
        inside.get_opt("sneaky-settings").await?.is_none(),
        "nothing partial"
    );
    Ok(())
}

/// A ServiceAccount `deployer` in `ns` that may manage ConfigMaps there, and nothing else.
#[allow(clippy::disallowed_methods)] // arranging the cluster by hand
async fn config_map_deployer(cluster: &TestCluster, ns: &str) -> Result<()> {
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(ns.to_owned()),
        ..ObjectMeta::default()
    };
    let create = PostParams::default();
    Api::<ServiceAccount>::namespaced(cluster.client.clone(), ns)
        .create(
            &create,
            &ServiceAccount {
                metadata: meta("deployer"),
                ..ServiceAccount::default()
            },
        )
        .await?;
    Api::<Role>::namespaced(cluster.client.clone(), ns)
        .create(
            &create,
            &Role {
                metadata: meta("config-maps"),
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
    Api::<RoleBinding>::namespaced(cluster.client.clone(), ns)
        .create(
            &create,
            &RoleBinding {
                metadata: meta("deployer-config-maps"),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".to_owned(),
                    kind: "Role".to_owned(),
                    name: "config-maps".to_owned(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: "deployer".to_owned(),
                    namespace: Some(ns.to_owned()),
                    ..Subject::default()
                }]),
            },
        )
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_lets_the_apiserver_refuse_what_the_account_may_not_do() -> Result<()> {
    use agent::apply::ApplyOutcome;

    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "impersonate").await?;
    let trackers = TestNamespace::new(&cluster, "impersonate-trackers").await?;
    let ns = namespace.name.as_str();
    config_map_deployer(&cluster, ns).await?;
    let (output, _) = render(vec![
        (
            "apps/allowed.yaml".into(),
            config_map_app("allowed", ns, "blue"),
        ),
        (
            "apps/forbidden.yaml".into(),
            objects_app(
                "forbidden",
                ns,
                "          - apiVersion: v1
            kind: Secret
            metadata: { name: forbidden-credentials }
            stringData: { password: hunter2 }
",
            ),
        ),
    ]);
    let policies = agent::live::policies(&output);
    let options = live_options(&trackers.name, &format!("e2e-{ns}"));
    let cluster_options = agent::cluster::ClusterOptions::default();
    let own = agent::cluster::Cluster::connect(&cluster.kubeconfig, None, &cluster_options).await?;
    let deployer = own.impersonating(
        &format!("system:serviceaccount:{ns}:deployer"),
        vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{ns}"),
        ],
        &cluster_options,
    )?;
    let plan = agent::sync::plan_live(&deployer, &output, &policies, None, &options).await;
    let forbidden_plan = plan
        .plan
        .apps
        .iter()
        .find(|app| app.app.name == "forbidden")
        .context("the forbidden app is planned")?;
    let reported: Vec<&str> = forbidden_plan
        .diagnostics
        .iter()
        .map(|diagnostic| diagnostic.message.as_str())
        .collect();
    assert!(
        reported
            .iter()
            .any(|message| message.contains("Secret") && message.contains("forbidden")),
        "the apiserver's refusal is reported: {reported:?}"
    );
    assert_no_value("the plan's diagnostics", &reported.join("\n"));
    let reports = agent::sync::apply_live(&deployer, &plan, &options).await;
    for report in &reports {
        match report.app.name.as_str() {
            "allowed" => assert_eq!(report.outcome, ApplyOutcome::Applied, "{report:?}"),
            _ => assert_ne!(report.outcome, ApplyOutcome::Applied, "{report:?}"),
        }
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    assert!(config_maps.get_opt("allowed-settings").await?.is_some());
    assert!(
        config_maps.get_opt("forbidden-settings").await?.is_none(),
        "nothing partial: the app's permitted ConfigMap is not applied either"
    );
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), ns);
    assert!(secrets.get_opt("forbidden-credentials").await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_source_applying_as_a_service_account_reports_what_rbac_refuses() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "sa-source").await?;
    let ns = namespace.name.as_str();
    config_map_deployer(&cluster, ns).await?;
    let (repo, source) = new_repo(&gitea, "sa-source").await?;
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write("apps/allowed.yaml", &config_map_app("allowed", ns, "blue"))?;
    tree.write(
        "apps/forbidden.yaml",
        &objects_app(
            "forbidden",
            ns,
            "          - apiVersion: v1
            kind: Secret
            metadata: { name: forbidden-credentials }
            stringData: { password: hunter2 }
",
        ),
    )?;
    let first = tree.commit_and_push("one app the account may deploy, one it may not", "main")?;
    let port = free_port()?;
    let work = tempfile::tempdir()?;
    let account = format!("    serviceAccount: {{ namespace: {ns}, name: deployer }}\n");
    let config = write_config(
        &gitea,
        &cluster,
        (&repo, &source),
        &AgentLines {
            source: account,
            ..AgentLines::default()
        },
        port,
        work.path(),
    )?;
    let agent = start_agent(&gitea, &config, port, &[])?;
    let latest = wait_for("both apps' statuses", || async {
        let latest = gitea.latest_statuses(&repo, &first).await?;
        let done = |app: &str| {
            latest
                .get(&format!("driftless/{ns}/{app}"))
                .is_some_and(|(state, _)| state != "pending")
        };
        Ok((done("allowed") && done("forbidden")).then_some(latest))
    })
    .await?;
    let (state, description) = &latest[&format!("driftless/{ns}/allowed")];
    assert_eq!(state, "success", "{description}");
    let (state, description) = &latest[&format!("driftless/{ns}/forbidden")];
    assert_eq!(state, "failure", "{description}");
    assert!(description.contains("forbidden"), "{description}");
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    assert!(config_maps.get_opt("allowed-settings").await?.is_some());
    assert!(
        config_maps.get_opt("forbidden-settings").await?.is_none(),
        "nothing partial"
    );
    let mut leaks: Vec<&str> = VALUES.to_vec();
    leaks.push(&gitea.token);
    agent.stop_checked(&leaks)?;
    Ok(())
}
