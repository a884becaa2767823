//! The forge outbox: statuses and comments are queued here and sent by one background task, so
//! the agent loop never waits on the forge.
//!
//! - **Persisted.** With a store (the cache directory's `forge-outbox.json`), the queue is
//!   written as soon as operations arrive and, while sending, at most every second, and at
//!   shutdown; the next run starts from it. A crash loses nothing queued; it may send a
//!   delivered status again, which the forge takes as the same status.
//! - **Newest wins.** One entry per commit and status context, and per pull-request comment:
//!   a newer state replaces a queued one in its place (a status that never went out is
//!   superseded; users see the commit's current state).
//! - **Bounded.** Beyond [`OutboxConfig::capacity`] entries the oldest are dropped, logged.
//! - **Retries.** While the forge is down or rate limiting us, nothing is sent until it comes
//!   back: exponential backoff (capped), or exactly the wait it asked for (`Retry-After`,
//!   GitHub's rate-limit headers). A call that fails on its own (a server error for one
//!   commit) backs off alone, and the rest of the queue goes on. Errors that retrying cannot
//!   fix (401, 404, 422) are logged once and dropped.

mod store;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{CommitStatus, Forge, ForgeError, fit_comment};
use crate::backoff::Backoff;
use crate::config::RepoSlug;
use crate::metrics::{ApiTarget, Metrics};
use crate::source::git::CommitId;

use store::Store;

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
    /// Open (with this title and body) or close (`body` `None`) the issue carrying `marker`.
    Issue {
        repo: RepoSlug,
        marker: String,
        title: String,
        body: Option<String>,
    },
}

/// What makes two operations supersede each other: the newer one replaces the older.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum OpKey {
    Status(RepoSlug, CommitId, String),
    Comment(RepoSlug, u64, String),
    Issue(RepoSlug, String),
}

impl ForgeOp {
    fn key(&self) -> OpKey {
        match self {
            ForgeOp::Status {
                repo,
                commit,
                status,
            } => OpKey::Status(repo.clone(), commit.clone(), status.context.clone()),
            ForgeOp::Comment {
                repo, pull, marker, ..
            } => OpKey::Comment(repo.clone(), *pull, marker.clone()),
            ForgeOp::Issue { repo, marker, .. } => OpKey::Issue(repo.clone(), marker.clone()),
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

/// How the outbox retries, where it keeps its queue and how long the queue may grow.
#[derive(Debug, Clone)]
pub struct OutboxConfig {
    pub retry: RetryPolicy,
    /// The file the queue is kept in; `None` keeps it in memory only (lost on restart).
    pub store: Option<PathBuf>,
    /// Entries kept at most; beyond it the oldest are dropped.
    pub capacity: usize,
}

impl OutboxConfig {
    /// The queue file's name in the cache directory.
    pub const FILE_NAME: &'static str = "forge-outbox.json";
    /// Far more than the statuses of a few commits of a large fleet (one per app and commit,
    /// newest per context kept), small enough to load in milliseconds.
    pub const DEFAULT_CAPACITY: usize = 20_000;

    /// A queue kept in memory only.
    pub fn in_memory() -> OutboxConfig {
        OutboxConfig {
            retry: RetryPolicy::default(),
            store: None,
            capacity: OutboxConfig::DEFAULT_CAPACITY,
        }
    }

    /// A queue kept in [`OutboxConfig::FILE_NAME`] under `cache_dir`.
    pub fn in_cache_dir(cache_dir: &Path) -> OutboxConfig {
        OutboxConfig {
            store: Some(cache_dir.join(OutboxConfig::FILE_NAME)),
            ..OutboxConfig::in_memory()
        }
    }
}

impl Outbox {
    /// Starts the sender task, with the operations a previous run left in the store. It runs
    /// until every [`Outbox`] handle is dropped and the queue is empty, or until `shutdown`
    /// turns true (then it makes one last attempt per queued op, unless the forge is known to
    /// be down, and saves what is left).
    pub fn start(
        forge: Arc<dyn Forge>,
        metrics: Arc<Metrics>,
        config: OutboxConfig,
        shutdown: watch::Receiver<bool>,
    ) -> (Outbox, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (pending_tx, pending) = watch::channel(0);
        let sender = Sender {
            forge,
            metrics,
            retry: config.retry,
            capacity: config.capacity.max(1),
            store: config.store.map(Store::new),
            queue: IndexMap::new(),
            paused_until: None,
            forge_backoff: Backoff::new(config.retry.base, config.retry.cap),
            dirty: false,
            saved_at: Instant::now(),
        };
        let task = tokio::spawn(sender.run(rx, pending_tx, shutdown));
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

/// One queued operation and its own retry state.
#[derive(Debug)]
struct Queued {
    op: ForgeOp,
    /// Failures of this operation alone (not the forge's as a whole).
    backoff: Backoff,
    not_before: Option<Instant>,
}

/// Saves made while sending are at most this often (new operations are saved at once).
const SAVE_INTERVAL: Duration = Duration::from_secs(1);

/// The sender task's state.
struct Sender {
    forge: Arc<dyn Forge>,
    metrics: Arc<Metrics>,
    retry: RetryPolicy,
    capacity: usize,
    store: Option<Store>,
    queue: IndexMap<OpKey, Queued>,
    /// No call before this: the forge is down or rate limiting us.
    paused_until: Option<Instant>,
    forge_backoff: Backoff,
    /// The queue changed since it was last saved.
    dirty: bool,
    saved_at: Instant,
}

impl Sender {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<ForgeOp>,
        pending_tx: watch::Sender<usize>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        if let Some(store) = &self.store {
            let saved = store.load();
            if !saved.is_empty() {
                tracing::info!(operations = saved.len(), path = %store.path().display(), "resuming the forge outbox of the last run");
            }
            for op in saved {
                self.enqueue(op);
            }
        }
        let mut open = true;
        loop {
            let mut received = false;
            while let Ok(op) = rx.try_recv() {
                self.enqueue(op);
                received = true;
            }
            if received {
                self.save();
            }
            let _ = pending_tx.send(self.queue.len());
            if *shutdown.borrow() {
                self.last_attempts().await;
                self.save();
                let _ = pending_tx.send(0);
                return;
            }
            let now = Instant::now();
            let due = self.next_due(now);
            let Some(op) = due else {
                if self.queue.is_empty() && !open {
                    self.save_if_dirty();
                    return;
                }
                self.save_if_dirty();
                let wake = self.next_wake();
                tokio::select! {
                    received = rx.recv(), if open => match received {
                        Some(op) => {
                            self.enqueue(op);
                            self.save();
                        }
                        None => open = false,
                    },
                    _ = shutdown.changed() => {}
                    _ = sleep_until(wake) => {}
                }
                continue;
            };
            let result = deliver(self.forge.as_ref(), &self.metrics, &op).await;
            self.settle(op, result);
            if self.dirty && self.saved_at.elapsed() >= SAVE_INTERVAL {
                self.save();
            }
        }
    }

    /// Adds `op`, replacing a queued one with the same key in its place; drops the oldest
    /// entry beyond the capacity.
    fn enqueue(&mut self, op: ForgeOp) {
        let queued = Queued {
            op,
            backoff: Backoff::new(self.retry.base, self.retry.cap),
            not_before: None,
        };
        self.queue.insert(queued.op.key(), queued);
        while self.queue.len() > self.capacity {
            if let Some((_, dropped)) = self.queue.shift_remove_index(0) {
                tracing::error!(capacity = self.capacity, op = ?dropped.op, "the forge outbox is full; dropping its oldest update");
            }
        }
        self.dirty = true;
    }

    /// The first operation in queue order that may be tried now.
    fn next_due(&self, now: Instant) -> Option<ForgeOp> {
        if self.paused_until.is_some_and(|until| until > now) {
            return None;
        }
        self.queue
            .values()
            .find(|queued| queued.not_before.is_none_or(|at| at <= now))
            .map(|queued| queued.op.clone())
    }

    /// When something may next be tried (`None`: nothing is waiting for a time).
    fn next_wake(&self) -> Option<Instant> {
        let earliest_op = self
            .queue
            .values()
            .filter_map(|queued| queued.not_before)
            .min();
        match (self.paused_until, earliest_op) {
            (Some(paused), Some(op)) => Some(paused.max(op)),
            (Some(paused), None) if !self.queue.is_empty() => Some(paused),
            (_, op) => op,
        }
    }

    /// Records the outcome of sending `op`.
    fn settle(&mut self, op: ForgeOp, result: Result<(), ForgeError>) {
        let key = op.key();
        match result {
            Ok(()) => {
                self.forge_backoff.succeed();
                self.paused_until = None;
                // Remove only if it was not replaced by a newer op while we were sending.
                if self.queue.get(&key).is_some_and(|queued| queued.op == op) {
                    self.queue.shift_remove(&key);
                    self.dirty = true;
                }
            }
            Err(error) if error.is_retryable() && error.affects_every_call() => {
                let wait = error
                    .retry_after()
                    .unwrap_or_else(|| self.forge_backoff.fail());
                self.paused_until = Some(Instant::now() + wait);
                tracing::warn!(
                    error = %error,
                    retry_in_ms = wait.as_millis() as u64,
                    queued = self.queue.len(),
                    "forge unavailable; will retry"
                );
            }
            Err(error) if error.is_retryable() => {
                // This call's own failure: it backs off alone, the others go on.
                if let Some(queued) = self.queue.get_mut(&key)
                    && queued.op == op
                {
                    let wait = queued.backoff.fail();
                    queued.not_before = Some(Instant::now() + wait);
                    tracing::warn!(
                        error = %error,
                        retry_in_ms = wait.as_millis() as u64,
                        "forge update failed; will retry it, the others go on"
                    );
                }
            }
            Err(error) => {
                tracing::error!(error = %error, "forge rejected an update; dropping it");
                if self.queue.get(&key).is_some_and(|queued| queued.op == op) {
                    self.queue.shift_remove(&key);
                    self.dirty = true;
                }
            }
        }
    }

    /// At shutdown: one attempt per queued operation, unless the forge is known to be down
    /// (then what is queued is saved for the next run without waiting on it).
    async fn last_attempts(&mut self) {
        if self
            .paused_until
            .is_some_and(|until| until > Instant::now())
        {
            return;
        }
        let ops: Vec<ForgeOp> = self
            .queue
            .values()
            .map(|queued| queued.op.clone())
            .collect();
        for op in ops {
            let result = deliver(self.forge.as_ref(), &self.metrics, &op).await;
            let stop = result.as_ref().is_err_and(ForgeError::affects_every_call);
            self.settle(op, result);
            if stop {
                break;
            }
        }
        if !self.queue.is_empty() {
            let saved = if self.store.is_some() {
                "saved for the next run"
            } else {
                "lost (no cache directory)"
            };
            tracing::warn!(
                queued = self.queue.len(),
                "forge updates not delivered at shutdown: {saved}"
            );
        }
    }

    fn save(&mut self) {
        if let Some(store) = &self.store {
            store.save(self.queue.values().map(|queued| &queued.op));
        }
        self.dirty = false;
        self.saved_at = Instant::now();
    }

    fn save_if_dirty(&mut self) {
        if self.dirty {
            self.save();
        }
    }
}

/// Sleeps until `wake`, or forever without one.
async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
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
        ForgeOp::Issue {
            repo,
            marker,
            title,
            body,
        } => {
            let body = body
                .as_ref()
                .map(|body| fit_comment(marker, body, forge.comment_limit()));
            let state = match &body {
                Some(body) => crate::forge::issues::IssueState::Open { title, body },
                None => crate::forge::issues::IssueState::Closed,
            };
            forge.sync_issue(repo, marker, state).await
        }
    };
    metrics.record_api_call(ApiTarget::Forge, result.is_ok());
    result
}

#[cfg(test)]
mod tests;
