//! The web UI's apps list at 10,000 apps: the first page rendered by the handler's own
//! function (filters run over every app, one page of rows rendered), a filtered page (state and
//! name search), and a real `GET /ui/apps` over HTTP to the agent's server on loopback.
//!
//! ```sh
//! cargo bench -p agent --bench ui_apps
//! ```

// Bench code: a failed unwrap is a failed bench setup.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agent::forge::StatusState;
use agent::health::HealthStatus;
use agent::plan::{Action, ObjectRef};
use agent::server::ui::page::Viewer;
use agent::server::ui::state::{
    CommitInfo, DeployRecord, FleetState, PlanView, PlannedChange, SyncState, TreeObject,
};
use agent::server::ui::{ListQuery, UiState, render_apps};
use agent::server::{ApiAuth, PlanStore, ServerState, SourceReadiness};
use analyzer::AppRef;
use criterion::{Criterion, criterion_group, criterion_main};

// The binary's allocator (src/main.rs), so these figures match the agent's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const N_APPS: usize = 10_000;
const TOKEN: &str = "bench-token-0123456789abcdef";

/// 10,000 apps over 4 sources and 50 namespaces, each with a plan, objects and a deploy.
fn fleet() -> FleetState {
    let fleet = FleetState::default();
    let states = [
        SyncState::InSync,
        SyncState::InSync,
        SyncState::InSync,
        SyncState::Drifted,
        SyncState::Held,
        SyncState::Failed,
    ];
    for index in 0..N_APPS {
        let namespace = format!("team-{:02}", index % 50);
        let app = AppRef {
            namespace: namespace.clone(),
            name: format!("app-{index:05}"),
        };
        let object = |kind: &str, name: String| ObjectRef {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            namespace: Some(namespace.clone()),
            name,
        };
        fleet.update(&app, &format!("source-{}", index % 4), |view| {
            view.sync = states[index % states.len()];
            view.health = Some(if index % 7 == 0 {
                HealthStatus::Progressing
            } else {
                HealthStatus::Healthy
            });
            view.message = "applied: 0 create, 1 update, 0 delete, 0 conflict, 3 unchanged".into();
            view.clusters = vec!["local".into()];
            let commit = CommitInfo {
                id: format!("{index:040x}"),
                author: "Ada Lovelace".into(),
                summary: "bump the image of every service".into(),
            };
            view.commit = Some(commit.clone());
            view.last_apply = Some((SystemTime::UNIX_EPOCH, Duration::from_millis(1_200)));
            view.objects = vec![TreeObject {
                component: "web".into(),
                trait_type: None,
                cluster: "local".into(),
                object: object("Deployment", format!("app-{index:05}")),
            }];
            view.plan = Some(PlanView {
                commit: commit.id.clone(),
                purpose: "deploy",
                changes: vec![PlannedChange {
                    action: Action::Update,
                    cluster: "local".into(),
                    object: object("Deployment", format!("app-{index:05}")),
                    diff: "-  replicas: 2\n+  replicas: 3\n".into(),
                    reason: None,
                }],
                diagnostics: vec![],
                truncated: false,
            });
            view.push_history(DeployRecord {
                commit,
                finished_at: SystemTime::UNIX_EPOCH,
                duration: Duration::from_millis(1_200),
                result: StatusState::Success,
                message: "applied".into(),
            });
        });
    }
    fleet
}

fn bench_apps_list(c: &mut Criterion) {
    let fleet = fleet();
    let mut group = c.benchmark_group("ui_apps");
    group.bench_function("first_page_10000_apps", |b| {
        b.iter(|| render_apps(&fleet, &ListQuery::default(), Viewer::ReadOnly));
    });
    let filtered = ListQuery {
        q: "app-0".into(),
        state: "drifted".into(),
        ..ListQuery::default()
    };
    group.bench_function("filtered_page_10000_apps", |b| {
        b.iter(|| render_apps(&fleet, &filtered, Viewer::ReadOnly));
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let state = ServerState {
        metrics: Arc::new(agent::metrics::Metrics::new()),
        readiness: Arc::new(SourceReadiness::new(["source-0"])),
        webhook_secret: None,
        triggers: Arc::new(vec![]),
        plans: PlanStore::default(),
        auth: ApiAuth {
            token: Some(agent::config::Secret::new(TOKEN)),
            ..ApiAuth::default()
        },
        ui: UiState::new(fleet.clone(), None, "driftless-system", "http://127.0.0.1"),
        shards: None,
    };
    let base = runtime.block_on(async {
        let listener = agent::server::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(agent::server::serve(
            listener,
            state,
            std::future::pending(),
        ));
        base
    });
    let client = reqwest::Client::new();
    let url = format!("{base}/ui/apps");
    group.bench_function("http_get_first_page_10000_apps", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let response = client.get(&url).bearer_auth(TOKEN).send().await.unwrap();
                assert_eq!(response.status(), 200);
                response.bytes().await.unwrap()
            })
        });
    });
    group.finish();
}

criterion_group!(benches, bench_apps_list);
criterion_main!(benches);
