//! Notifications end to end: the agent, deploying to the real cluster, tells a local HTTP
//! receiver (standing in for Slack and a generic webhook) about a failed deploy and about
//! drift made by hand, with no Secret value, channel URL or token in any message or log line.
//! The same run checks the per-app sync metrics, the apiserver requests counted by verb and
//! code, and the Kubernetes Events about the apps: one for the failed deploy and one for the
//! drift, which repeated drift checks aggregate rather than repeat, with no Secret value.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use axum::http::HeaderMap;
use k8s_openapi::api::core::v1::{Event, Secret};
use kube::Api;
use serde_json::{Value, json};

use crate::support::agent::{AgentProcess, WorkTree, free_port, wait_for};
use crate::support::apps::config_map_app;
use crate::support::cluster::{TestCluster, TestNamespace};

/// The path part of the channels' URLs: a credential in a Slack or Teams URL.
const URL_SECRET: &str = "T0000-B0000-url-secret-path";
const WEBHOOK_TOKEN: &str = "webhook-bearer-token-e2e";
const SECRET_VALUE: &str = "notify-secret-value-in-git";
const HAND_SET_VALUE: &str = "notify-secret-value-set-by-hand";

/// One request the receiver got: its path, `Authorization` header and JSON body.
type Received = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

/// A local receiver for every channel (`/slack/...`, `/webhook/...`); returns its base URL.
async fn receiver() -> Result<(String, Received)> {
    let received: Received = Arc::default();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/{kind}/{secret}",
        axum::routing::post(
            move |uri: axum::http::Uri, headers: HeaderMap, axum::Json(body): axum::Json<Value>| {
                let sink = sink.clone();
                async move {
                    let authorization = headers
                        .get("authorization")
                        .and_then(|value| value.to_str().ok())
                        .map(str::to_owned);
                    sink.lock().expect("the receiver's lock").push((
                        uri.path().to_owned(),
                        authorization,
                        body,
                    ));
                    "ok"
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((format!("http://{address}"), received))
}

/// The requests received on channel `kind` whose body mentions `needle`.
fn received_on(received: &Received, kind: &str, needle: &str) -> Vec<(Option<String>, Value)> {
    received
        .lock()
        .expect("the receiver's lock")
        .iter()
        .filter(|(path, _, body)| {
            path.starts_with(&format!("/{kind}/")) && body.to_string().contains(needle)
        })
        .map(|(_, authorization, body)| (authorization.clone(), body.clone()))
        .collect()
}

fn secret_app(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
    - name: credentials
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: Secret
            metadata:
              name: {name}-credentials
            stringData:
              password: {SECRET_VALUE}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_deploys_and_drift_are_notified_without_secrets() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "notify").await?;
    let ns = namespace.name.as_str();
    let (base, received) = receiver().await?;

    let repo = WorkTree::new("file-source".to_owned())?;
    repo.write("apps/vault.yaml", &secret_app("vault", ns))?;
    repo.write("apps/good.yaml", &config_map_app("good", ns, "blue"))?;
    // An unknown component type: the app is blocked, which is a failed deploy.
    repo.write(
        "apps/broken.yaml",
        &format!(
            "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: broken
  namespace: {ns}
spec:
  components:
    - name: thing
      type: no-such-component-type
      properties: {{}}
"
        ),
    )?;
    repo.commit_all("three apps, one broken")?;

    let work = tempfile::tempdir()?;
    let port = free_port()?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() & 0xffff_ffff;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: notify-{nanos:x}
    url: file://{repo}
    pollInterval: 1h
clusters:
  - name: local
    kubeconfig: {kubeconfig}
drift: {{ schedule: '*/2 * * * * *', mode: report }}
server: {{ listen: '127.0.0.1:{port}', apiToken: {{ env: E2E_API_TOKEN }} }}
notifications:
  - {{ name: chat, kind: slack, url: {{ env: E2E_SLACK_URL }} }}
  - {{ name: pager, kind: webhook, url: {{ env: E2E_WEBHOOK_URL }}, token: {{ env: E2E_WEBHOOK_TOKEN }} }}
cacheDir: {cache}
",
            repo = repo.dir.path().display(),
            kubeconfig = cluster.kubeconfig.display(),
            cache = work.path().join("cache").display(),
        ),
    )?;
    let slack_url = format!("{base}/slack/{URL_SECRET}");
    let webhook_url = format!("{base}/webhook/{URL_SECRET}");
    let agent = AgentProcess::start(
        &config,
        &[
            ("E2E_SLACK_URL", &slack_url),
            ("E2E_WEBHOOK_URL", &webhook_url),
            ("E2E_WEBHOOK_TOKEN", WEBHOOK_TOKEN),
        ],
        port,
    )?;

    // The failed deploy, on both channels, naming the broken app.
    let broken = format!("{ns}/broken");
    let failed = wait_for("the failed deploy's webhook notification", || async {
        let found = received_on(&received, "webhook", "deployFailed");
        Ok(found
            .into_iter()
            .find(|(_, body)| body.to_string().contains(&broken)))
    })
    .await?;
    assert_eq!(
        failed.0.as_deref(),
        Some(format!("Bearer {WEBHOOK_TOKEN}").as_str())
    );
    let failed_apps: Vec<&str> = failed.1["apps"]
        .as_array()
        .context("the payload's apps")?
        .iter()
        .filter_map(|app| app["app"].as_str())
        .collect();
    assert_eq!(failed_apps, [broken.as_str()], "{}", failed.1);
    assert!(
        failed.1["pageUrl"]
            .as_str()
            .is_some_and(|url| url.contains("/plans/")),
        "{}",
        failed.1
    );
    let slack = wait_for("the failed deploy's Slack notification", || async {
        Ok(received_on(&received, "slack", "Deploy failed")
            .into_iter()
            .next())
    })
    .await?;
    assert_eq!(slack.0, None, "a Slack channel gets no token");
    let text = slack.1["text"].as_str().context("Slack's text")?;
    assert!(text.contains(&broken), "{text}");

    // No drift yet: the first clean drift check happens before any drift notification.
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), ns);
    wait_for("the Secret app to be deployed", || async {
        Ok(secrets.get_opt("vault-credentials").await?.map(drop))
    })
    .await?;
    ensure!(
        received_on(&received, "webhook", "driftFound").is_empty(),
        "drift notified before any drift was made"
    );
    // Drift by hand: a new value in the Secret.
    let hack = json!({"stringData": {"password": HAND_SET_VALUE}});
    secrets
        .patch(
            "vault-credentials",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&hack),
        )
        .await?;
    let vault = format!("{ns}/vault");
    let drift = wait_for("the drift notification", || async {
        let found = received_on(&received, "webhook", "driftFound");
        Ok(found
            .into_iter()
            .find(|(_, body)| body.to_string().contains(&vault)))
    })
    .await?;
    assert_eq!(drift.1["event"], "driftFound");
    wait_for("the drift's Slack notification", || async {
        Ok(received_on(&received, "slack", "Drift found")
            .into_iter()
            .next())
    })
    .await?;

    // Kubernetes Events about the apps, in their namespace.
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), ns);
    let events_of = |app: &'static str, reason: &'static str| {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await?;
            Ok::<_, anyhow::Error>(
                list.items
                    .into_iter()
                    .filter(|event| {
                        event.involved_object.kind.as_deref() == Some("Application")
                            && event.involved_object.name.as_deref() == Some(app)
                            && event.reason.as_deref() == Some(reason)
                    })
                    .collect::<Vec<Event>>(),
            )
        }
    };
    let failed_event = wait_for("a DeployFailed Event about the broken app", || async {
        Ok(events_of("broken", "DeployFailed")
            .await?
            .into_iter()
            .next())
    })
    .await?;
    let message = failed_event.message.unwrap_or_default();
    ensure!(
        message.contains("no-such-component-type"),
        "the Event does not say why: {message}"
    );
    wait_for("a DriftFound Event about the vault app", || async {
        Ok(events_of("vault", "DriftFound").await?.into_iter().next())
    })
    .await?;

    // The same agent's metrics: per-app sync state (the drifted and the blocked app out of
    // sync, the untouched one in sync) and the apiserver requests by verb and code.
    let source = format!("notify-{nanos:x}");
    let app_series = |app: &str, value: u8| {
        format!(
            "driftless_app_in_sync{{source=\"{source}\",namespace=\"{ns}\",app=\"{app}\"}} {value}"
        )
    };
    let text = wait_for("the per-app sync metrics", || async {
        let text = agent.metrics().await?;
        Ok(
            (text.contains(&app_series("good", 1)) && text.contains(&app_series("vault", 0)))
                .then_some(text),
        )
    })
    .await?;
    ensure!(text.contains(&app_series("broken", 0)), "{text}");
    ensure!(
        text.contains(&format!(
            "driftless_apps_by_sync{{source=\"{source}\",state=\"drifted\"}} 1"
        )),
        "{text}"
    );
    for verb in ["get", "list", "watch", "patch"] {
        let prefix = format!(
            "driftless_kube_requests_total{{cluster=\"local\",verb=\"{verb}\",code=\"200\"}} "
        );
        ensure!(
            text.contains(&prefix),
            "no {verb} request answered 200 counted:\n{text}"
        );
    }

    // Several drift checks later, still one drift Event: repeats are aggregated.
    wait_for("three drift checks finding the drift", || async {
        Ok((agent.log_text()?.matches("drift found").count() >= 3).then_some(()))
    })
    .await?;
    let drift_events = events_of("vault", "DriftFound").await?;
    ensure!(
        drift_events.len() == 1,
        "repeated drift made {} Events: {drift_events:#?}",
        drift_events.len()
    );
    for event in events.list(&Default::default()).await?.items {
        let text = serde_json::to_string(&event)?;
        for secret in [SECRET_VALUE, HAND_SET_VALUE] {
            ensure!(
                !text.contains(secret),
                "an Event holds a Secret value: {text}"
            );
        }
    }

    let log = agent.stop_checked(&[URL_SECRET, WEBHOOK_TOKEN, SECRET_VALUE, HAND_SET_VALUE])?;
    ensure!(
        log.contains("drift found"),
        "the agent's log has no drift line"
    );
    let everything = received.lock().expect("the receiver's lock").clone();
    for (path, _, body) in &everything {
        let text = body.to_string();
        for secret in [URL_SECRET, WEBHOOK_TOKEN, SECRET_VALUE, HAND_SET_VALUE] {
            ensure!(
                !text.contains(secret),
                "a notification on {path} holds a secret: {text}"
            );
        }
    }
    // Each piece of news once per channel: a drift check every 2 s does not repeat it.
    let drift_messages = everything
        .iter()
        .filter(|(path, _, body)| path.starts_with("/webhook/") && body["event"] == "driftFound")
        .count();
    assert_eq!(drift_messages, 1, "{everything:#?}");
    Ok(())
}
