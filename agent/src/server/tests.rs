//! Tests of the HTTP server over a real socket.

use std::time::Duration;

use super::*;
use crate::forge::StatusState;
use crate::source::git::CommitId;

struct Running {
    base: String,
    state: ServerState,
    notify: Arc<Notify>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), ServerError>>,
}

const API_TOKEN: &str = "plan-page-token-0123456789";

fn authorized(url: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new().get(url).bearer_auth(API_TOKEN)
}

async fn start(secret: Option<&str>) -> Running {
    let notify = Arc::new(Notify::new());
    let state = ServerState {
        metrics: Arc::new(Metrics::new()),
        shards: None,
        readiness: Arc::new(SourceReadiness::new(["platform"])),
        webhook_secret: secret.map(Secret::new),
        triggers: Arc::new(vec![SourceTrigger {
            source: "platform".into(),
            url: "http://127.0.0.1:3000/team/apps.git".into(),
            forge_repo: RepoSlug::parse("team/apps"),
            notify: notify.clone(),
        }]),
        plans: PlanStore::default(),
        auth: ApiAuth {
            token: Some(Secret::new(API_TOKEN)),
            trusted_header: Some(axum::http::HeaderName::from_static("x-forwarded-user")),
            ..ApiAuth::default()
        },
        ui: crate::server::ui::UiState::default(),
    };
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, state.clone(), async move {
        let _ = stopped.await;
    }));
    Running {
        base,
        state,
        notify,
        stop: Some(stop),
        task,
    }
}

impl Running {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

const PUSH: &str = r#"{"ref":"refs/heads/main","repository":{"full_name":"team/apps","clone_url":"http://127.0.0.1:3000/team/apps.git"}}"#;

#[tokio::test]
async fn health_readiness_and_metrics() {
    let server = start(None).await;
    let client = reqwest::Client::new();
    let get = |path: &str| client.get(format!("{}{path}", server.base)).send();
    assert_eq!(get("/healthz").await.unwrap().status(), 200);
    let readyz = get("/readyz").await.unwrap();
    assert_eq!(readyz.status(), 503);
    assert_eq!(
        readyz.text().await.unwrap(),
        "not ready\nsource platform: waiting for its first fetch\n"
    );
    server.state.readiness.fetched("platform");
    assert_eq!(get("/readyz").await.unwrap().status(), 200);
    server.state.metrics.set_apps("platform", 2);
    let text = get("/metrics").await.unwrap().text().await.unwrap();
    assert!(
        text.contains("driftless_apps{source=\"platform\"} 2"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn webhooks_verify_signatures_and_wake_the_source() {
    let server = start(Some("s3cr3t")).await;
    let client = reqwest::Client::new();
    let post = |path: &str, signature: (&'static str, String), body: &'static str| {
        client
            .post(format!("{}{path}", server.base))
            .header(signature.0, signature.1)
            .header("x-gitea-event", "push")
            .header("x-github-event", "push")
            .body(body)
            .send()
    };
    let secret = Secret::new("s3cr3t");
    let good = webhook::sign(&secret, PUSH.as_bytes());

    let bad = post(
        "/webhooks/gitea",
        ("x-gitea-signature", "00".repeat(32)),
        PUSH,
    )
    .await
    .unwrap();
    assert_eq!(bad.status(), 401);
    // The bad request woke nothing.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), server.notify.notified())
            .await
            .is_err(),
        "a rejected webhook must not trigger a poll"
    );
    let missing = client
        .post(format!("{}/webhooks/gitea", server.base))
        .body(PUSH)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 401);

    let accepted = post("/webhooks/gitea", ("x-gitea-signature", good.clone()), PUSH)
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);
    tokio::time::timeout(Duration::from_secs(5), server.notify.notified())
        .await
        .unwrap();

    let github = post(
        "/webhooks/github",
        ("x-hub-signature-256", format!("sha256={good}")),
        PUSH,
    )
    .await
    .unwrap();
    assert_eq!(github.status(), 202);
    tokio::time::timeout(Duration::from_secs(5), server.notify.notified())
        .await
        .unwrap();

    const OTHER: &str = r#"{"repository":{"full_name":"team/other"}}"#;
    let other = post(
        "/webhooks/gitea",
        (
            "x-gitea-signature",
            webhook::sign(&secret, OTHER.as_bytes()),
        ),
        OTHER,
    )
    .await
    .unwrap();
    assert_eq!(other.status(), 404);
    let metrics = server.state.metrics.encode();
    assert!(
        metrics.contains("driftless_errors_total{kind=\"Webhook\"} 2"),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn webhooks_are_off_without_a_secret() {
    let server = start(None).await;
    let response = reqwest::Client::new()
        .post(format!("{}/webhooks/gitea", server.base))
        .body(PUSH)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    server.stop().await;
}

#[tokio::test]
async fn plan_pages_are_served_escaped() {
    let server = start(None).await;
    let commit = CommitId::parse(&"ab".repeat(20)).unwrap();
    let url = format!("{}/plans/{commit}", server.base);
    assert_eq!(authorized(&url).send().await.unwrap().status(), 404);
    server.state.plans.insert(PlanPage {
        source: "platform".into(),
        commit: commit.clone(),
        title: "deploy of main".into(),
        apps: vec![PageApp {
            app: "team-a/web".into(),
            state: StatusState::Success,
            description: "applied 2 changes".into(),
        }],
        body: "<img src=x onerror=alert(1)>".into(),
    });
    let response = authorized(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    let html = response.text().await.unwrap();
    assert!(html.contains("team-a/web"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!html.contains("<img"));
    server.stop().await;
}

#[tokio::test]
async fn plan_pages_need_credentials_and_probes_do_not() {
    let server = start(None).await;
    let commit = CommitId::parse(&"cd".repeat(20)).unwrap();
    server.state.plans.insert(PlanPage {
        source: "platform".into(),
        commit: commit.clone(),
        title: "deploy of main".into(),
        apps: Vec::new(),
        body: "the plan".into(),
    });
    let url = format!("{}/plans/{commit}", server.base);
    let anonymous = reqwest::get(&url).await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.headers()["www-authenticate"], "Bearer");
    assert!(!anonymous.text().await.unwrap().contains("the plan"));
    let wrong = reqwest::Client::new()
        .get(&url)
        .bearer_auth("not-the-token")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(authorized(&url).send().await.unwrap().status(), 200);
    let proxied = reqwest::Client::new()
        .get(&url)
        .header("x-forwarded-user", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(proxied.status(), 200);
    for open in ["healthz", "readyz", "metrics"] {
        let status = reqwest::get(format!("{}/{open}", server.base))
            .await
            .unwrap()
            .status();
        assert_ne!(status, 401, "/{open} stays open");
    }
    server.stop().await;
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused() {
    let server = start(Some("hook-secret")).await;
    let response = reqwest::Client::new()
        .post(format!("{}/webhooks/gitea", server.base))
        .body(vec![b'x'; BODY_LIMIT + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    server.stop().await;
}
