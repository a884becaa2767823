//! The forge outbox: statuses and comments are queued here and sent by one background task, so
//! the agent loop never waits on the forge. While the forge is down, the head of the queue is
//! retried with exponential backoff (capped) and nothing is dropped. Statuses go out in order,
//! every state of a context included (users see `pending` before `success`, even when the forge
//! lagged behind); only an exact repeat (same commit, context and state) replaces a queued one.
//! A newer plan comment for the same pull request replaces a queued older one in place, because
//! only the latest plan matters. Errors that retrying cannot fix (401, 404, 422) are logged once
//! and dropped.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use tokio::sync::{mpsc, watch};

use super::{CommitStatus, Forge, ForgeError, fit_comment};
use crate::backoff::Backoff;
use crate::config::RepoSlug;
use crate::metrics::{ApiTarget, Metrics};
use crate::source::git::CommitId;

/// One queued forge write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForgeOp {
    Status {
        repo: RepoSlug,
        commit: CommitId,
        status: CommitStatus,
    },
    /// Create or update the comment carrying `marker` on a pull request.
    Comment {
        repo: RepoSlug,
        pull: u64,
        marker: String,
        body: String,
    },
}

/// What makes two operations supersede each other.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum OpKey {
    Status(RepoSlug, CommitId, String, super::StatusState),
    Comment(RepoSlug, u64, String),
}

impl ForgeOp {
    fn key(&self) -> OpKey {
        match self {
            ForgeOp::Status {
                repo,
                commit,
                status,
            } => OpKey::Status(
                repo.clone(),
                commit.clone(),
                status.context.clone(),
                status.state,
            ),
            ForgeOp::Comment {
                repo, pull, marker, ..
            } => OpKey::Comment(repo.clone(), *pull, marker.clone()),
        }
    }
}

/// The sending side of the outbox; cheap to clone.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<ForgeOp>,
    pending: watch::Receiver<usize>,
}

/// Retry timing for the outbox.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(120),
        }
    }
}

impl Outbox {
    /// Starts the sender task. It runs until every [`Outbox`] handle is dropped and the queue
    /// is empty, or until `shutdown` turns true (then it makes one last attempt per queued op).
    pub fn start(
        forge: Arc<dyn Forge>,
        metrics: Arc<Metrics>,
        retry: RetryPolicy,
        shutdown: watch::Receiver<bool>,
    ) -> (Outbox, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (pending_tx, pending) = watch::channel(0);
        let task = tokio::spawn(run(forge, metrics, retry, rx, pending_tx, shutdown));
        (Outbox { tx, pending }, task)
    }

    /// Queues an operation. Never blocks; a no-op after the sender task stopped.
    pub fn send(&self, op: ForgeOp) {
        if self.tx.send(op).is_err() {
            tracing::warn!("forge outbox is closed; dropping a forge update");
        }
    }

    /// Operations queued and not yet delivered (or dropped).
    pub fn pending(&self) -> usize {
        *self.pending.borrow()
    }

    /// Waits until the queue is empty.
    pub async fn flushed(&self) {
        let mut pending = self.pending.clone();
        // A closed channel means the task ended, which it only does with an empty queue.
        let _ = pending.wait_for(|n| *n == 0).await;
    }
}

async fn run(
    forge: Arc<dyn Forge>,
    metrics: Arc<Metrics>,
    retry: RetryPolicy,
    mut rx: mpsc::UnboundedReceiver<ForgeOp>,
    pending_tx: watch::Sender<usize>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut queue: IndexMap<OpKey, ForgeOp> = IndexMap::new();
    let mut backoff = Backoff::new(retry.base, retry.cap);
    let mut open = true;
    let enqueue = |queue: &mut IndexMap<OpKey, ForgeOp>, op: ForgeOp| {
        // `insert` on an existing key keeps its position: the newer state goes out in the old
        // one's place, so a queue of per-app statuses stays in order.
        queue.insert(op.key(), op);
    };
    loop {
        // Take everything that is already waiting, without blocking.
        while let Ok(op) = rx.try_recv() {
            enqueue(&mut queue, op);
        }
        let _ = pending_tx.send(queue.len());
        if *shutdown.borrow() {
            for (_, op) in queue.drain(..) {
                if let Err(error) = deliver(forge.as_ref(), &metrics, &op).await {
                    tracing::error!(error = %error, "forge update lost at shutdown");
                }
            }
            let _ = pending_tx.send(0);
            return;
        }
        let Some((_, op)) = queue.first() else {
            if !open {
                return;
            }
            tokio::select! {
                received = rx.recv() => match received {
                    Some(op) => enqueue(&mut queue, op),
                    None => open = false,
                },
                _ = shutdown.changed() => {}
            }
            continue;
        };
        let op = op.clone();
        match deliver(forge.as_ref(), &metrics, &op).await {
            Ok(()) => {
                backoff.succeed();
                // Remove only if it was not replaced by a newer op while we were sending.
                if queue.get(&op.key()) == Some(&op) {
                    queue.shift_remove(&op.key());
                }
            }
            Err(error) if error.is_retryable() => {
                let wait = backoff.fail();
                tracing::warn!(
                    error = %error,
                    retry_in_ms = wait.as_millis() as u64,
                    queued = queue.len(),
                    "forge unavailable; will retry"
                );
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => {}
                }
            }
            Err(error) => {
                tracing::error!(error = %error, "forge rejected an update; dropping it");
                queue.shift_remove(&op.key());
            }
        }
    }
}

async fn deliver(forge: &dyn Forge, metrics: &Metrics, op: &ForgeOp) -> Result<(), ForgeError> {
    let result = match op {
        ForgeOp::Status {
            repo,
            commit,
            status,
        } => forge.set_status(repo, commit, status).await,
        ForgeOp::Comment {
            repo,
            pull,
            marker,
            body,
        } => {
            let body = fit_comment(marker, body, forge.comment_limit());
            forge
                .upsert_comment(repo, *pull, marker, &body)
                .await
                .map(drop)
        }
    };
    metrics.record_api_call(ApiTarget::Forge, result.is_ok());
    result
}

#[cfg(test)]
mod tests {
    //! The retry and coalescing logic, over a forge that is down for its first calls. (The
    //! HTTP side is covered against a real Gitea in `tests/e2e/agent.rs`; what is tested here is
    //! the queue, so the stand-in only counts calls.)

    use std::sync::Mutex;

    use futures::future::BoxFuture;

    use super::*;
    use crate::forge::{CommentId, PullRequest, StatusState};

    #[derive(Debug, Default)]
    struct DownThenUp {
        failures_left: Mutex<u32>,
        delivered: Mutex<Vec<(String, StatusState)>>,
    }

    impl Forge for DownThenUp {
        fn set_status<'a>(
            &'a self,
            _repo: &'a RepoSlug,
            _commit: &'a CommitId,
            status: &'a CommitStatus,
        ) -> BoxFuture<'a, Result<(), ForgeError>> {
            Box::pin(async move {
                let mut failures_left = self.failures_left.lock().unwrap();
                if *failures_left > 0 {
                    *failures_left -= 1;
                    return Err(ForgeError::Unreachable {
                        method: "POST",
                        path: "/statuses".into(),
                        message: "connection refused".into(),
                    });
                }
                self.delivered
                    .lock()
                    .unwrap()
                    .push((status.context.clone(), status.state));
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
    }

    fn status_op(context: &str, state: StatusState) -> ForgeOp {
        ForgeOp::Status {
            repo: RepoSlug::parse("o/r").unwrap(),
            commit: CommitId::parse(&"a".repeat(40)).unwrap(),
            status: CommitStatus::new(context, state, "d", None),
        }
    }

    #[tokio::test]
    async fn retries_while_down_and_loses_nothing() {
        let forge = Arc::new(DownThenUp {
            failures_left: Mutex::new(3),
            ..DownThenUp::default()
        });
        let metrics = Arc::new(Metrics::new());
        let (_stop, shutdown) = watch::channel(false);
        let retry = RetryPolicy {
            base: Duration::from_millis(5),
            cap: Duration::from_millis(20),
        };
        let (outbox, task) = Outbox::start(forge.clone(), metrics.clone(), retry, shutdown);
        outbox.send(status_op("driftless/a/one", StatusState::Pending));
        outbox.send(status_op("driftless/a/two", StatusState::Pending));
        outbox.send(status_op("driftless/a/one", StatusState::Success));
        // An exact repeat of a queued status is not sent twice.
        outbox.send(status_op("driftless/a/two", StatusState::Pending));
        tokio::time::timeout(Duration::from_secs(10), outbox.flushed())
            .await
            .unwrap();
        drop(outbox);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        let delivered = forge.delivered.lock().unwrap().clone();
        // Every status arrives, in order, pending before success.
        assert_eq!(
            delivered,
            vec![
                ("driftless/a/one".to_owned(), StatusState::Pending),
                ("driftless/a/two".to_owned(), StatusState::Pending),
                ("driftless/a/one".to_owned(), StatusState::Success),
            ]
        );
        let text = metrics.encode();
        assert!(
            text.contains("driftless_api_calls_total{target=\"Forge\",outcome=\"Error\"} 3"),
            "{text}"
        );
    }
}
