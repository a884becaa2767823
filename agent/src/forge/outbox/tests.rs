//! The queue: retries, coalescing, persistence across runs, and per-call backoff, over forges
//! that fail on cue; and the rate-limit path over HTTP, against a local server answering as
//! GitHub does. (The Gitea side, with a real Gitea, is in `tests/e2e/agent/forge_outage.rs`.)

use std::collections::BTreeSet;
use std::sync::Mutex;

use futures::future::BoxFuture;

use super::*;
use crate::forge::{CommentId, PullRequest, StatusState};

/// A stand-in forge that records what it delivered and fails as scripted: while `down`, every
/// call is refused; a commit in `broken` gets a server error.
#[derive(Debug, Default)]
struct Scripted {
    failures_left: Mutex<u32>,
    down: Mutex<bool>,
    broken: Mutex<BTreeSet<CommitId>>,
    delivered: Mutex<Vec<(CommitId, String, StatusState)>>,
}

impl Forge for Scripted {
    fn set_status<'a>(
        &'a self,
        _repo: &'a RepoSlug,
        commit: &'a CommitId,
        status: &'a CommitStatus,
    ) -> BoxFuture<'a, Result<(), ForgeError>> {
        Box::pin(async move {
            let mut failures_left = self.failures_left.lock().unwrap();
            if *self.down.lock().unwrap() || *failures_left > 0 {
                *failures_left = failures_left.saturating_sub(1);
                return Err(ForgeError::Unreachable {
                    method: "POST",
                    path: "/statuses".into(),
                    message: "connection refused".into(),
                });
            }
            if self.broken.lock().unwrap().contains(commit) {
                return Err(ForgeError::RequestFailed {
                    method: "POST",
                    path: "/statuses".into(),
                    status: 500,
                    message: "internal error".into(),
                });
            }
            self.delivered.lock().unwrap().push((
                commit.clone(),
                status.context.clone(),
                status.state,
            ));
            Ok(())
        })
    }

    fn open_pulls<'a>(
        &'a self,
        _repo: &'a RepoSlug,
    ) -> BoxFuture<'a, Result<Vec<PullRequest>, ForgeError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn upsert_comment<'a>(
        &'a self,
        _repo: &'a RepoSlug,
        _pull: u64,
        _marker: &'a str,
        _body: &'a str,
    ) -> BoxFuture<'a, Result<CommentId, ForgeError>> {
        Box::pin(async { Ok(CommentId(1)) })
    }

    fn comment_limit(&self) -> usize {
        1000
    }

    fn sync_issue<'a>(
        &'a self,
        _repo: &'a RepoSlug,
        _marker: &'a str,
        _state: crate::forge::issues::IssueState<'a>,
    ) -> BoxFuture<'a, Result<(), ForgeError>> {
        Box::pin(async { Ok(()) })
    }

    fn comments<'a>(
        &'a self,
        _repo: &'a RepoSlug,
        _pull: u64,
    ) -> BoxFuture<'a, Result<Vec<crate::forge::Comment>, ForgeError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

impl Scripted {
    fn delivered(&self) -> Vec<(CommitId, String, StatusState)> {
        self.delivered.lock().unwrap().clone()
    }
}

fn commit(digit: char) -> CommitId {
    CommitId::parse(&digit.to_string().repeat(40)).unwrap()
}

fn status_on(commit: &CommitId, context: &str, state: StatusState) -> ForgeOp {
    ForgeOp::Status {
        repo: RepoSlug::parse("o/r").unwrap(),
        commit: commit.clone(),
        status: CommitStatus::new(context, state, "d", None),
    }
}

fn status_op(context: &str, state: StatusState) -> ForgeOp {
    status_on(&commit('a'), context, state)
}

fn fast(store: Option<PathBuf>) -> OutboxConfig {
    OutboxConfig {
        retry: RetryPolicy {
            base: Duration::from_millis(5),
            cap: Duration::from_millis(20),
        },
        store,
        capacity: OutboxConfig::DEFAULT_CAPACITY,
    }
}

async fn finish(outbox: Outbox, task: tokio::task::JoinHandle<()>) {
    tokio::time::timeout(Duration::from_secs(10), outbox.flushed())
        .await
        .unwrap();
    drop(outbox);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn retries_while_down_and_the_newest_state_wins() {
    let forge = Arc::new(Scripted {
        failures_left: Mutex::new(3),
        ..Scripted::default()
    });
    let metrics = Arc::new(Metrics::new());
    let (_stop, shutdown) = watch::channel(false);
    let (outbox, task) = Outbox::start(forge.clone(), metrics.clone(), fast(None), shutdown);
    outbox.send(status_op("driftless/a/one", StatusState::Pending));
    outbox.send(status_op("driftless/a/two", StatusState::Pending));
    outbox.send(status_op("driftless/a/one", StatusState::Success));
    outbox.send(status_op("driftless/a/two", StatusState::Pending));
    finish(outbox, task).await;
    // One status per commit and context, the newest, in the order the contexts first came.
    assert_eq!(
        forge.delivered(),
        vec![
            (
                commit('a'),
                "driftless/a/one".to_owned(),
                StatusState::Success
            ),
            (
                commit('a'),
                "driftless/a/two".to_owned(),
                StatusState::Pending
            ),
        ]
    );
    let text = metrics.encode();
    assert!(
        text.contains("driftless_api_calls_total{target=\"Forge\",outcome=\"Error\"} 3"),
        "{text}"
    );
}

#[tokio::test]
async fn one_failing_commit_does_not_block_the_others() {
    let forge = Arc::new(Scripted::default());
    forge.broken.lock().unwrap().insert(commit('a'));
    let (_stop, shutdown) = watch::channel(false);
    let metrics = Arc::new(Metrics::new());
    let (outbox, task) = Outbox::start(forge.clone(), metrics, fast(None), shutdown);
    outbox.send(status_on(&commit('a'), "driftless", StatusState::Success));
    outbox.send(status_on(&commit('b'), "driftless", StatusState::Success));
    outbox.send(status_on(&commit('c'), "driftless", StatusState::Failure));
    // The statuses behind the failing one arrive while it still fails.
    tokio::time::timeout(Duration::from_secs(10), async {
        while forge.delivered().len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(
        forge.delivered(),
        vec![
            (commit('b'), "driftless".to_owned(), StatusState::Success),
            (commit('c'), "driftless".to_owned(), StatusState::Failure),
        ]
    );
    assert_eq!(outbox.pending(), 1);
    // Once the forge takes it, the failing one follows.
    forge.broken.lock().unwrap().clear();
    finish(outbox, task).await;
    assert_eq!(forge.delivered().len(), 3);
    assert_eq!(forge.delivered()[2].0, commit('a'));
}

#[tokio::test]
async fn a_restart_while_the_forge_is_down_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join(OutboxConfig::FILE_NAME);
    let down = Arc::new(Scripted::default());
    *down.down.lock().unwrap() = true;
    let (stop, shutdown) = watch::channel(false);
    let metrics = Arc::new(Metrics::new());
    let (outbox, task) = Outbox::start(
        down.clone(),
        metrics.clone(),
        fast(Some(store.clone())),
        shutdown,
    );
    outbox.send(status_op("driftless", StatusState::Pending));
    outbox.send(status_op("driftless/ns/web", StatusState::Failure));
    outbox.send(ForgeOp::Comment {
        repo: RepoSlug::parse("o/r").unwrap(),
        pull: 3,
        marker: "<!-- m -->".to_owned(),
        body: "plan".to_owned(),
    });
    outbox.send(status_op("driftless", StatusState::Success));
    // Saved as soon as they arrive: a crash from here on loses nothing.
    tokio::time::timeout(Duration::from_secs(10), async {
        while store::Store::new(store.clone()).load().len() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert!(down.delivered().is_empty());

    // The next run, with the forge back and nothing sent to it, delivers the saved queue.
    let up = Arc::new(Scripted::default());
    let (_stop, shutdown) = watch::channel(false);
    let (outbox, task) = Outbox::start(up.clone(), metrics, fast(Some(store.clone())), shutdown);
    finish(outbox, task).await;
    assert_eq!(
        up.delivered(),
        vec![
            (commit('a'), "driftless".to_owned(), StatusState::Success),
            (
                commit('a'),
                "driftless/ns/web".to_owned(),
                StatusState::Failure
            ),
        ]
    );
    assert!(store::Store::new(store).load().is_empty());
}

#[tokio::test]
async fn the_queue_is_bounded_and_drops_the_oldest() {
    let forge = Arc::new(Scripted::default());
    *forge.down.lock().unwrap() = true;
    let (stop, shutdown) = watch::channel(false);
    let config = OutboxConfig {
        capacity: 2,
        ..fast(None)
    };
    let (outbox, task) = Outbox::start(forge.clone(), Arc::new(Metrics::new()), config, shutdown);
    for digit in ['a', 'b', 'c'] {
        outbox.send(status_on(&commit(digit), "driftless", StatusState::Success));
    }
    tokio::time::timeout(Duration::from_secs(10), async {
        while outbox.pending() != 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    *forge.down.lock().unwrap() = false;
    finish(outbox, task).await;
    drop(stop);
    let commits: Vec<CommitId> = forge.delivered().into_iter().map(|(c, _, _)| c).collect();
    assert_eq!(commits, vec![commit('b'), commit('c')]);
}

mod rate_limits {
    //! GitHub's secondary rate limit, over HTTP: a 403 with `Retry-After` is retried after
    //! the wait it asks for, not dropped.

    use std::time::Instant as StdInstant;

    use axum::extract::State;
    use axum::http::{HeaderValue, StatusCode};
    use axum::response::{IntoResponse, Response};

    use super::*;
    use crate::config::Secret;
    use crate::forge::github::GitHubForge;

    #[derive(Clone, Default)]
    struct Limited {
        seen: Arc<Mutex<Vec<(String, StdInstant)>>>,
    }

    async fn handle(State(server): State<Limited>, request: axum::extract::Request) -> Response {
        let path = request.uri().path().to_owned();
        let mut seen = server.seen.lock().unwrap();
        seen.push((path, StdInstant::now()));
        if seen.len() == 1 {
            let mut response = (
                StatusCode::FORBIDDEN,
                r#"{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}"#,
            )
                .into_response();
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            return response;
        }
        (StatusCode::CREATED, r#"{"id": 1}"#).into_response()
    }

    #[tokio::test]
    async fn a_403_with_retry_after_is_retried_after_the_wait() {
        let server = Limited::default();
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(server.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let forge = Arc::new(GitHubForge::new(&base, Secret::new("ghp-token")).unwrap());
        let metrics = Arc::new(Metrics::new());
        let (_stop, shutdown) = watch::channel(false);
        // Backoff alone would retry after 5 ms: only the header makes it wait a second.
        let (outbox, task) = Outbox::start(forge, metrics, fast(None), shutdown);
        outbox.send(status_op("driftless", StatusState::Success));
        finish(outbox, task).await;
        let seen = server.seen.lock().unwrap().clone();
        let path = format!("/repos/o/r/statuses/{}", commit('a'));
        assert_eq!(
            seen.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            vec![path.as_str(), path.as_str()],
            "sent, rate limited, sent again"
        );
        let waited = seen[1].1 - seen[0].1;
        assert!(
            waited >= Duration::from_millis(950),
            "retried after {waited:?}, before the 1 s the forge asked for"
        );
    }
}
