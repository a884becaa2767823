//! The web UI in a real browser (Debian's Chromium through chromedriver), against the agent
//! deploying from the real Gitea to the shared cluster:
//!
//! - the apps list shows an app's health after its deploy, and the app turns "drifted" when
//!   its object is changed by hand, without a reload;
//! - a suspended workflow is resumed from the app page by an operator, while a viewer gets no
//!   button and is refused when posting anyway;
//! - a Secret's values appear nowhere in the pages' source, even when its drift is planned.
//!
//! The tests take the screenshots the README shows: into `docs/screenshots/` with
//! `DRIFTLESS_UPDATE_SCREENSHOTS=1`, otherwise under the target directory.

use anyhow::{Result, ensure};
use fantoccini::Locator;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use serde_json::json;

use crate::support::agent::{API_TOKEN, wait_for};
use crate::support::browser::Browser;
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::Gitea;
use crate::support::gitea_agent::{AgentLines, GiteaAgent};

const OPERATOR_TOKEN: &str = "e2e-operator-token-5d2b9e71";

/// The agent's extra settings: an operator token, and a drift check every 2 seconds.
fn ui_lines() -> AgentLines {
    AgentLines {
        server: "  operatorToken: { env: E2E_OPERATOR_TOKEN }\n".to_owned(),
        top: "drift: { schedule: '*/2 * * * * *', mode: report }\n".to_owned(),
        ..AgentLines::default()
    }
}

async fn start_agent<'a>(
    gitea: &'a Gitea,
    cluster: &TestCluster,
    prefix: &str,
) -> Result<GiteaAgent<'a>> {
    GiteaAgent::start(
        gitea,
        cluster,
        prefix,
        &ui_lines(),
        &[("E2E_OPERATOR_TOKEN", OPERATOR_TOKEN)],
    )
    .await
}

/// An app of `k8s-objects` in `ns` holding `objects` (YAML list items at indent 10).
fn objects_app(name: &str, ns: &str, objects: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {ns}
spec:
  components:
    - name: {name}
      type: k8s-objects
      properties:
        objects:
{objects}"
    )
}

fn web_objects(name: &str) -> String {
    format!(
        "          - apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: {name}
            spec:
              replicas: 1
              selector:
                matchLabels: {{ app: {name} }}
              template:
                metadata:
                  labels: {{ app: {name} }}
                spec:
                  containers:
                    - name: web
                      image: nginx:1.27
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}-settings
            data:
              color: blue
"
    )
}

/// The list's row of `app` (`namespace/name`): its health and state words.
async fn row(browser: &Browser, app: &str) -> Result<(Option<String>, Option<String>)> {
    let row = format!("tr[data-app=\"{app}\"]");
    Ok((
        browser
            .attribute(&format!("{row} td.health .badge"), "data-health")
            .await?,
        browser
            .attribute(&format!("{row} td.state .badge"), "data-state")
            .await?,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_list_shows_health_after_a_deploy_and_drift_without_a_reload() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "ui-list").await?;
    let ns = namespace.name.as_str();
    let agent = start_agent(&gitea, &cluster, "ui-list").await?;
    agent.tree.write(
        "apps/web.yaml",
        &objects_app("web", ns, &web_objects("web")),
    )?;
    agent.tree.write(
        "apps/cache.yaml",
        &objects_app("cache", ns, &web_objects("cache")),
    )?;
    let commit = agent.tree.commit_and_push("two apps", "main")?;
    agent.summary(&commit).await?;

    let browser = Browser::start().await?;
    let base = &agent.process.base;
    browser
        .sign_in(base, API_TOKEN, &format!("/ui/apps?namespace={ns}"))
        .await?;
    // The drift checks read the Deployments' rollout; the page follows without a reload.
    let web = format!("{ns}/web");
    let (health, state) = wait_for("the web app healthy and in sync", || async {
        let (health, state) = row(&browser, &web).await?;
        Ok(
            (health.as_deref() == Some("healthy") && state.as_deref() == Some("in-sync"))
                .then_some((health, state)),
        )
    })
    .await?;
    ensure!(health.as_deref() == Some("healthy") && state.as_deref() == Some("in-sync"));
    wait_for("the cache app healthy", || async {
        Ok(
            (row(&browser, &format!("{ns}/cache")).await?.0.as_deref() == Some("healthy"))
                .then_some(()),
        )
    })
    .await?;
    browser.screenshot("apps-list").await?;

    // Changed by hand: the open page turns "drifted" by itself (the marker set on this very
    // document survives, so nothing reloaded it).
    browser
        .client
        .execute("window.__notReloaded = true; return null;", vec![])
        .await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    config_maps
        .patch(
            "web-settings",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"data": {"color": "hacked"}})),
        )
        .await?;
    wait_for("the web app drifted on the open page", || async {
        Ok((row(&browser, &web).await?.1.as_deref() == Some("drifted")).then_some(()))
    })
    .await?;
    let same_document = browser
        .client
        .execute("return window.__notReloaded === true;", vec![])
        .await?;
    ensure!(same_document == json!(true), "the page was reloaded");
    ensure!(row(&browser, &format!("{ns}/cache")).await?.1.as_deref() == Some("in-sync"));
    // The state filter runs on the server.
    browser
        .client
        .goto(&format!("{base}/ui/apps?namespace={ns}&state=drifted"))
        .await?;
    let rows = browser
        .client
        .find_all(Locator::Css("table.apps tbody tr"))
        .await?;
    ensure!(rows.len() == 1, "{} rows for state=drifted", rows.len());
    browser.screenshot("apps-list-drifted").await?;
    // The app page's tree: the Deployment, its ReplicaSet and its Pod, each with its health.
    browser
        .client
        .goto(&format!("{base}/ui/apps/{ns}/web"))
        .await?;
    let pod = browser
        .wait_for_css("li[data-object^='Deployment/'] li[data-object^='ReplicaSet/'] li[data-object^='Pod/'] .badge")
        .await?;
    ensure!(pod.attr("data-health").await?.as_deref() == Some("healthy"));
    browser.screenshot("app-page-tree").await?;
    browser.client.set_window_size(390, 844).await?;
    browser
        .client
        .goto(&format!("{base}/ui/apps?namespace={ns}"))
        .await?;
    browser.screenshot("apps-list-phone").await?;
    browser.close().await?;
    agent.stop()?;
    Ok(())
}

fn gated_app(ns: &str) -> String {
    let component = |name: &str| {
        format!(
            "    - name: {name}
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}
            data:
              from: {name}
"
        )
    };
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: gated
  namespace: {ns}
spec:
  components:
{before}{after}  workflow:
    steps:
      - name: first
        type: apply-component
        properties:
          component: before
      - name: approve
        type: suspend
      - name: second
        type: apply-component
        properties:
          component: after
",
        before = component("before"),
        after = component("after"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_workflow_is_resumed_by_an_operator_and_refused_for_a_viewer() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "ui-resume").await?;
    let ns = namespace.name.as_str();
    let agent = start_agent(&gitea, &cluster, "ui-resume").await?;
    agent.tree.write("apps/gated.yaml", &gated_app(ns))?;
    let commit = agent.tree.commit_and_push("a gated app", "main")?;
    agent.summary(&commit).await?;
    let base = &agent.process.base;
    let page = format!("/ui/apps/{ns}/gated");
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);

    // A viewer sees the suspension but no button, and a post is refused.
    let browser = Browser::start().await?;
    browser.sign_in(base, API_TOKEN, &page).await?;
    wait_for("the approve step suspended", || async {
        let phase = browser
            .client
            .find(Locator::Css("tr[data-step=approve] td.phase"))
            .await;
        Ok(match phase {
            Ok(phase) => (phase.text().await? == "suspending").then_some(()),
            Err(_) => None,
        })
    })
    .await?;
    ensure!(
        browser
            .client
            .find_all(Locator::Css("form[action$='/resume'] button"))
            .await?
            .is_empty(),
        "a viewer is offered the resume button"
    );
    let refused = reqwest::Client::new()
        .post(format!("{base}{page}/resume"))
        .bearer_auth(API_TOKEN)
        .form(&[("step", "approve")])
        .send()
        .await?;
    ensure!(
        refused.status() == 403,
        "a viewer's resume got {}",
        refused.status()
    );
    ensure!(config_maps.get_opt("after").await?.is_none());

    // An operator resumes it from the page; the step after the suspension is applied.
    browser.sign_out().await?;
    browser.sign_in(base, OPERATOR_TOKEN, &page).await?;
    let button = browser
        .wait_for_css("tr[data-step=approve] form button.act")
        .await?;
    browser.screenshot("app-workflow-suspended").await?;
    button.click().await?;
    wait_for("the step after the suspension applied", || async {
        Ok(config_maps.get_opt("after").await?.map(drop))
    })
    .await?;
    wait_for("the page showing the workflow succeeded", || async {
        let phase = browser
            .client
            .find(Locator::Css("tr[data-step=second] td.phase"))
            .await;
        Ok(match phase {
            Ok(phase) => (phase.text().await? == "succeeded").then_some(()),
            Err(_) => None,
        })
    })
    .await?;
    browser.screenshot("app-page").await?;
    browser.close().await?;
    agent.stop()?;
    Ok(())
}

/// The Secret's values, plain and base64: none may reach a page.
const VALUES: &[&str] = &[
    "ui-hunter2-value",
    "dWktaHVudGVyMi12YWx1ZQ",
    "ui-swordfish-value",
    "dWktc3dvcmRmaXNoLXZhbHVl",
    "ui-drifted-value",
    "dWktZHJpZnRlZC12YWx1ZQ",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_value_appears_nowhere_in_the_page_source() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "ui-secret").await?;
    let ns = namespace.name.as_str();
    let agent = start_agent(&gitea, &cluster, "ui-secret").await?;
    let objects = "          - apiVersion: v1
            kind: Secret
            metadata:
              name: db
            stringData:
              password: ui-hunter2-value
            data:
              token: dWktc3dvcmRmaXNoLXZhbHVl
";
    agent
        .tree
        .write("apps/vault.yaml", &objects_app("vault", ns, objects))?;
    let commit = agent.tree.commit_and_push("a secret", "main")?;
    agent.summary(&commit).await?;
    // Drifted by hand, so the app's last plan carries the Secret's diff.
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), ns);
    secrets
        .patch(
            "db",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"stringData": {"password": "ui-drifted-value"}})),
        )
        .await?;

    let browser = Browser::start().await?;
    let base = &agent.process.base;
    let page = format!("/ui/apps/{ns}/vault");
    browser.sign_in(base, API_TOKEN, &page).await?;
    wait_for("the Secret's drift planned on the page", || async {
        let source = browser.client.source().await?;
        Ok(source.contains("data-state=\"drifted\"").then_some(()))
    })
    .await?;
    for details in browser.client.find_all(Locator::Css("details")).await? {
        details.find(Locator::Css("summary")).await?.click().await?;
    }
    let app_page = browser.client.source().await?;
    ensure!(
        app_page.contains("Secret/"),
        "the Secret is not listed:\n{app_page}"
    );
    ensure!(
        app_page.contains("++++++++"),
        "no masked value in the diff:\n{app_page}"
    );
    browser.screenshot("app-secret-masked").await?;
    browser
        .client
        .goto(&format!("{base}/ui/apps?namespace={ns}"))
        .await?;
    let list = browser.client.source().await?;
    let plan_page = agent.process.plan_page(&commit).await?.unwrap_or_default();
    for (what, text) in [
        ("app page", &app_page),
        ("apps list", &list),
        ("plan page", &plan_page),
    ] {
        for value in VALUES {
            ensure!(
                !text.contains(value),
                "the {what} shows a Secret value ({value})"
            );
        }
    }
    browser.close().await?;
    agent.stop()?;
    Ok(())
}
