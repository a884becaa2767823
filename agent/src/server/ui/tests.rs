//! The UI's handlers over HTTP, against a fleet state filled by hand: authentication, roles,
//! filters, escaping and the event stream. Browser tests of the running agent are in
//! `tests/e2e/ui.rs`.

use std::sync::Arc;

use analyzer::AppRef;
use tokio::sync::Notify;

use super::state::{FleetState, PlanView, PlannedChange, SyncState};
use super::{UiState, record};
use crate::config::{RepoSlug, Secret};
use crate::health::HealthStatus;
use crate::metrics::Metrics;
use crate::plan::{Action, ObjectRef};
use crate::server::{ApiAuth, PlanStore, ServerState, SourceReadiness, SourceTrigger, bind, serve};
use crate::workflow::{StepPhase, StepState, Timestamp, WorkflowPhase, WorkflowState};

const VIEWER: &str = "viewer-token-0123456789";
const OPERATOR: &str = "operator-token-0123456789";

struct Running {
    base: String,
    fleet: FleetState,
    client: reqwest::Client,
}

fn app(namespace: &str, name: &str) -> AppRef {
    AppRef {
        namespace: namespace.into(),
        name: name.into(),
    }
}

async fn start() -> Running {
    let fleet = FleetState::default();
    let state = ServerState {
        metrics: Arc::new(Metrics::new()),
        shards: None,
        readiness: Arc::new(SourceReadiness::new(["platform"])),
        webhook_secret: None,
        triggers: Arc::new(vec![SourceTrigger {
            source: "platform".into(),
            url: "http://127.0.0.1:3000/team/apps.git".into(),
            forge_repo: RepoSlug::parse("team/apps"),
            notify: Arc::new(Notify::new()),
        }]),
        plans: PlanStore::default(),
        auth: ApiAuth {
            token: Some(Secret::new(VIEWER)),
            operator_token: Some(Secret::new(OPERATOR)),
            ..ApiAuth::default()
        },
        ui: UiState::new(fleet.clone(), None, "driftless-system", "http://127.0.0.1"),
    };
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, state, std::future::pending()));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Running {
        base,
        fleet,
        client,
    }
}

fn fill(fleet: &FleetState) {
    fleet.update(&app("team-a", "web"), "platform", |view| {
        view.sync = SyncState::InSync;
        view.health = Some(HealthStatus::Healthy);
    });
    fleet.update(
        &app("team-b", "<script>alert(1)</script>"),
        "platform",
        |view| {
            view.sync = SyncState::Drifted;
            view.health = Some(HealthStatus::Degraded);
            view.message = "drift in <b>x</b>".into();
            view.plan = Some(PlanView {
                commit: "0".repeat(40),
                purpose: "drift check",
                changes: vec![PlannedChange {
                    action: Action::Update,
                    cluster: "local".into(),
                    object: ObjectRef {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        namespace: Some("team-b".into()),
                        name: "c".into(),
                    },
                    diff: "-  a: <old>\n+  a: <new>\n".into(),
                    reason: None,
                }],
                diagnostics: vec![],
                truncated: false,
            });
        },
    );
    fleet.update(&app("team-b", "flow"), "platform", |view| {
        view.sync = SyncState::Held;
        let mut state = WorkflowState {
            revision: "1".repeat(40),
            phase: WorkflowPhase::Suspending,
            started_at: Timestamp(0),
            finished_at: None,
            steps: Default::default(),
            outputs: Default::default(),
            failure: None,
            rollouts: Default::default(),
        };
        let mut approve = StepState::pending();
        approve.phase = StepPhase::Suspending;
        state.steps.insert("approve".into(), approve);
        view.workflow = Some(state);
    });
}

#[tokio::test]
async fn browsers_without_credentials_are_sent_to_sign_in_and_bad_tokens_refused() {
    let running = start().await;
    let response = running
        .client
        .get(format!("{}/ui/apps?state=drifted", running.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(
        response.headers()["location"],
        "/ui/login?next=/ui/apps%3Fstate%3Ddrifted"
    );
    let refused = running
        .client
        .post(format!("{}/ui/login", running.base))
        .form(&[("token", "wrong-token-0123456789"), ("next", "/ui/apps")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(refused.headers().get("set-cookie").is_none());
    let signed_in = running
        .client
        .post(format!("{}/ui/login", running.base))
        .form(&[("token", VIEWER), ("next", "https://evil.example/")])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    // Never a redirect off the agent.
    assert_eq!(signed_in.headers()["location"], "/ui/apps");
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(
        !cookie.contains(VIEWER),
        "the cookie holds a digest, not the token"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = running
        .client
        .get(format!("{}/ui/apps", running.base))
        .header("cookie", session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("signed in as viewer"));
}

#[tokio::test]
async fn the_list_filters_on_the_server_and_escapes_everything() {
    let running = start().await;
    fill(&running.fleet);
    let get = |query: &str| {
        running
            .client
            .get(format!("{}/ui/apps?{query}", running.base))
            .bearer_auth(VIEWER)
            .send()
    };
    let all = get("").await.unwrap();
    assert!(
        all.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let all = all.text().await.unwrap();
    assert!(all.contains("3 apps"), "{all}");
    assert!(!all.contains("<script>alert"), "{all}");
    assert!(all.contains("team-b/&lt;script&gt;alert(1)&lt;/script&gt;"));
    let drifted = get("state=drifted").await.unwrap().text().await.unwrap();
    assert!(drifted.contains("1 matching"), "{drifted}");
    assert!(!drifted.contains("data-app=\"team-a/web\""));
    let search = get("q=WEB&namespace=team-a")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(search.contains("data-app=\"team-a/web\""), "{search}");
    assert!(search.contains("1 matching"));
}

#[tokio::test]
async fn only_operators_get_resume_buttons_and_viewers_are_refused() {
    let running = start().await;
    fill(&running.fleet);
    let page = |token: &'static str| {
        running
            .client
            .get(format!("{}/ui/apps/team-b/flow", running.base))
            .bearer_auth(token)
            .send()
    };
    let as_viewer = page(VIEWER).await.unwrap().text().await.unwrap();
    assert!(as_viewer.contains("data-step=\"approve\""), "{as_viewer}");
    assert!(!as_viewer.contains("/resume\""), "{as_viewer}");
    let as_operator = page(OPERATOR).await.unwrap().text().await.unwrap();
    assert!(
        as_operator.contains("action=\"/ui/apps/team-b/flow/resume\""),
        "{as_operator}"
    );
    let refused = running
        .client
        .post(format!("{}/ui/apps/team-b/flow/resume", running.base))
        .bearer_auth(VIEWER)
        .form(&[("step", "approve")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("only operators may resume")
    );
    let cross_site = running
        .client
        .post(format!("{}/ui/apps/team-b/flow/resume", running.base))
        .bearer_auth(OPERATOR)
        .header("sec-fetch-site", "cross-site")
        .form(&[("step", "approve")])
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
    // Escaped diff lines on the drifted app's page.
    let drifted = running
        .client
        .get(format!(
            "{}/ui/apps/team-b/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
            running.base
        ))
        .bearer_auth(VIEWER)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        drifted.contains("<span class=\"add\">+  a: &lt;new&gt;</span>"),
        "{drifted}"
    );
    assert!(!drifted.contains("<new>"));
}

#[tokio::test]
async fn the_event_stream_announces_changes() {
    let running = start().await;
    let response = running
        .client
        .get(format!("{}/ui/events", running.base))
        .bearer_auth(VIEWER)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut response = response;
    running.fleet.update(&app("a", "b"), "platform", |view| {
        view.sync = SyncState::Drifted;
    });
    let chunk = tokio::time::timeout(std::time::Duration::from_secs(5), response.chunk())
        .await
        .expect("an event within 5s")
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&chunk);
    assert!(text.contains("event: change"), "{text}");
}

#[test]
fn a_deploy_records_state_history_and_removal() {
    let fleet = FleetState::default();
    let plan = crate::plan::Plan {
        target: crate::plan::PlanTarget::Clusters(vec!["local".into()]),
        apps: vec![crate::plan::AppPlan {
            app: app("team-a", "web"),
            revision: None,
            changes: vec![],
            diagnostics: vec![],
            health: None,
            digest: None,
        }],
        diagnostics: vec![],
    };
    let mut results = record::AppResults::new();
    results.insert(
        app("team-a", "web"),
        (crate::forge::StatusState::Success, "applied".into()),
    );
    let commit = super::state::CommitInfo {
        id: "a".repeat(40),
        author: "Ada".into(),
        summary: "bump".into(),
    };
    let deploy = record::Deploy {
        source: "platform",
        cluster: "local",
        commit: &commit,
        plan: &plan,
        results: &results,
        held: &Default::default(),
        finished_at: std::time::SystemTime::UNIX_EPOCH,
        duration: std::time::Duration::from_millis(1500),
    };
    record::deploy(&fleet, &deploy);
    let view = fleet.app(&app("team-a", "web")).unwrap();
    assert_eq!(view.sync, SyncState::InSync);
    assert_eq!(view.clusters, ["local"]);
    assert_eq!(view.history.len(), 1);
    assert_eq!(view.history[0].commit.author, "Ada");
    record::drift(&fleet, "platform", &commit.id, &{
        let mut drifted = plan.clone();
        drifted.apps[0].changes.push(crate::plan::Change {
            action: Action::Update,
            cluster: "local".into(),
            object: ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("team-a".into()),
                name: "c".into(),
            },
            diff: String::new(),
            changed_fields: vec![],
            reason: None,
        });
        drifted
    });
    assert_eq!(
        fleet.app(&app("team-a", "web")).unwrap().sync,
        SyncState::Drifted
    );
    record::drift(&fleet, "platform", &commit.id, &plan);
    assert_eq!(
        fleet.app(&app("team-a", "web")).unwrap().sync,
        SyncState::InSync
    );
}
