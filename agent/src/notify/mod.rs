//! Notifications to Slack, Microsoft Teams and generic webhooks (`notifications[]` in
//! `driftless.yaml`) for a failed deploy, drift found and prunes held for approval.
//!
//! The agent loop never waits on a channel: [`Notifier::send`] queues the event for every
//! channel that subscribes to it, and one task per channel delivers its queue in order. A
//! channel that is down or rate limiting us is retried with capped exponential backoff (or
//! exactly the `Retry-After` it asked for), like forge statuses; one channel's outage never
//! holds up another's. A request the channel refuses for good (a 4xx other than 408/429) is
//! logged and dropped. The queue is in memory and bounded: beyond [`QUEUE_CAPACITY`] the oldest
//! event is dropped, logged; what is queued at shutdown gets one last attempt.
//!
//! Channel URLs and tokens are [`crate::config::Secret`]s: they reach only the request, and
//! errors are logged without the URL. Message texts carry no Secret value (see [`message`]).

pub mod events;
pub mod message;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

pub use message::Notification;

use crate::backoff::Backoff;
use crate::config::{NotificationChannel, NotificationEvent};
use crate::metrics::{ApiTarget, Metrics};

/// Events queued per channel at most.
pub const QUEUE_CAPACITY: usize = 1_000;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Retry timing for the channels.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(300),
        }
    }
}

/// The sending side; cheap to clone. With no channel configured, sending does nothing.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    channels: Vec<ChannelHandle>,
    /// Per source and event, the commit and apps last notified: the same news is not sent
    /// again (a drift check every few minutes would otherwise repeat it each time).
    last_sent: Arc<Mutex<LastSent>>,
}

/// Per source and event, the commit and apps last notified.
type LastSent = BTreeMap<(String, NotificationEvent), (String, BTreeSet<String>)>;

#[derive(Debug, Clone)]
struct ChannelHandle {
    events: BTreeSet<NotificationEvent>,
    tx: mpsc::UnboundedSender<Notification>,
}

impl Notifier {
    /// Starts one delivery task per channel. They run until every [`Notifier`] is dropped and
    /// their queues are empty, or until `shutdown` turns true (then one last attempt each).
    ///
    /// # Errors
    ///
    /// The HTTP client could not be built (no TLS backend).
    pub fn start(
        channels: &[NotificationChannel],
        metrics: Arc<Metrics>,
        retry: RetryPolicy,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Notifier, Vec<tokio::task::JoinHandle<()>>), reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("driftless/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let mut handles = Vec::new();
        let mut tasks = Vec::new();
        for channel in channels {
            let (tx, rx) = mpsc::unbounded_channel();
            handles.push(ChannelHandle {
                events: channel.events.clone(),
                tx,
            });
            let sender = ChannelSender {
                channel: channel.clone(),
                client: client.clone(),
                metrics: metrics.clone(),
                backoff: Backoff::new(retry.base, retry.cap),
                queue: VecDeque::new(),
            };
            tasks.push(tokio::spawn(sender.run(rx, shutdown.clone())));
        }
        Ok((
            Notifier {
                channels: handles,
                last_sent: Arc::default(),
            },
            tasks,
        ))
    }

    /// A deploy of `commit` had failed apps (`namespace/name` and why); nothing when none
    /// failed or the same apps already failed at this commit.
    pub fn deploy_failed(
        &self,
        source: &str,
        commit: &str,
        n_apps: usize,
        failed: Vec<(String, String)>,
        page_url: String,
    ) {
        if failed.is_empty() {
            return;
        }
        let summary = format!("{} of {n_apps} app(s) failed to deploy", failed.len());
        self.send_new(Notification {
            event: NotificationEvent::DeployFailed,
            source: source.to_owned(),
            commit: commit.to_owned(),
            summary,
            apps: failed,
            page_url: Some(page_url),
        });
    }

    /// A deploy of `commit` failed before any app was planned (the render, or no app found).
    pub fn deploy_refused(&self, source: &str, commit: &str, reason: &str, page_url: String) {
        self.send_new(Notification {
            event: NotificationEvent::DeployFailed,
            source: source.to_owned(),
            commit: commit.to_owned(),
            summary: reason.to_owned(),
            apps: Vec::new(),
            page_url: Some(page_url),
        });
    }

    /// A drift check of `commit` found `drifted` apps; only apps not already notified for
    /// this commit make news.
    pub fn drift_found(&self, source: &str, commit: &str, drifted: &[String], page_url: String) {
        if self.channels.is_empty() {
            return;
        }
        let key = (source.to_owned(), NotificationEvent::DriftFound);
        let apps: BTreeSet<String> = drifted.iter().cloned().collect();
        {
            let mut last_sent = self.lock();
            if let Some((last_commit, last_apps)) = last_sent.get(&key)
                && last_commit == commit
                && apps.is_subset(last_apps)
            {
                return;
            }
            last_sent.insert(key, (commit.to_owned(), apps));
        }
        self.send(Notification {
            event: NotificationEvent::DriftFound,
            source: source.to_owned(),
            commit: commit.to_owned(),
            summary: format!("{} app(s) differ from the deployed revision", drifted.len()),
            apps: drifted
                .iter()
                .map(|app| (app.clone(), String::new()))
                .collect(),
            page_url: Some(page_url),
        });
    }

    /// A drift check found no drift: the next drift is news again.
    pub fn drift_cleared(&self, source: &str) {
        self.lock()
            .remove(&(source.to_owned(), NotificationEvent::DriftFound));
    }

    /// A pass over `commit` held its prunes for approval; `message` says how many and how.
    pub fn prune_held(&self, source: &str, commit: &str, message: &str, page_url: String) {
        self.send_new(Notification {
            event: NotificationEvent::PruneHeld,
            source: source.to_owned(),
            commit: commit.to_owned(),
            summary: message.to_owned(),
            apps: Vec::new(),
            page_url: Some(page_url),
        });
    }

    /// Sends `notification` unless the same event, commit and apps were the last sent for its
    /// source.
    fn send_new(&self, notification: Notification) {
        if self.channels.is_empty() {
            return;
        }
        let key = (notification.source.clone(), notification.event);
        let news = (
            notification.commit.clone(),
            notification
                .apps
                .iter()
                .map(|(app, _)| app.clone())
                .collect::<BTreeSet<String>>(),
        );
        if self.lock().insert(key, news.clone()).as_ref() == Some(&news) {
            return;
        }
        self.send(notification);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LastSent> {
        // A panic while holding the map leaves it usable: it only remembers what was sent.
        self.last_sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `notification` for every channel subscribed to its event. Never blocks.
    pub fn send(&self, notification: Notification) {
        for channel in &self.channels {
            if channel.events.contains(&notification.event)
                && channel.tx.send(notification.clone()).is_err()
            {
                tracing::warn!("a notification channel is closed; dropping a notification");
            }
        }
    }
}

/// Why one delivery failed.
enum Failure {
    /// Worth trying again, after the wait the channel asked for when it said.
    Retry(String, Option<Duration>),
    /// The channel refused it for good.
    Drop(String),
}

struct ChannelSender {
    channel: NotificationChannel,
    client: reqwest::Client,
    metrics: Arc<Metrics>,
    backoff: Backoff,
    queue: VecDeque<Notification>,
}

impl ChannelSender {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Notification>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut open = true;
        loop {
            while let Ok(notification) = rx.try_recv() {
                self.enqueue(notification);
            }
            if *shutdown.borrow() {
                self.last_attempts().await;
                return;
            }
            let Some(next) = self.queue.front().cloned() else {
                if !open {
                    return;
                }
                tokio::select! {
                    received = rx.recv() => match received {
                        Some(notification) => self.enqueue(notification),
                        None => open = false,
                    },
                    _ = shutdown.changed() => {}
                }
                continue;
            };
            match self.deliver(&next).await {
                Ok(()) => {
                    self.backoff.succeed();
                    self.queue.pop_front();
                }
                Err(Failure::Drop(message)) => {
                    tracing::error!(channel = %self.channel.name, error = %message, event = next.event.as_str(), "the notification channel refused a notification; dropping it");
                    self.queue.pop_front();
                }
                Err(Failure::Retry(message, asked)) => {
                    let wait = asked.unwrap_or_else(|| self.backoff.fail());
                    tracing::warn!(channel = %self.channel.name, error = %message, retry_in_ms = wait.as_millis() as u64, queued = self.queue.len(), "notification not delivered; will retry");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = shutdown.changed() => {}
                    }
                }
            }
        }
    }

    fn enqueue(&mut self, notification: Notification) {
        self.queue.push_back(notification);
        while self.queue.len() > QUEUE_CAPACITY {
            if let Some(dropped) = self.queue.pop_front() {
                tracing::error!(channel = %self.channel.name, event = dropped.event.as_str(), capacity = QUEUE_CAPACITY, "the notification queue is full; dropping its oldest notification");
            }
        }
    }

    /// At shutdown: one attempt per queued notification, stopping at the first failure.
    async fn last_attempts(&mut self) {
        while let Some(next) = self.queue.front().cloned() {
            if self.deliver(&next).await.is_err() {
                tracing::warn!(channel = %self.channel.name, queued = self.queue.len(), "notifications not delivered at shutdown are lost");
                return;
            }
            self.queue.pop_front();
        }
    }

    async fn deliver(&self, notification: &Notification) -> Result<(), Failure> {
        let mut request = self
            .client
            .post(self.channel.url.expose())
            .json(&notification.body(self.channel.kind));
        if let Some(token) = &self.channel.token {
            request = request.bearer_auth(token.expose());
        }
        let result = match request.send().await {
            // The error's text would quote the URL, which is a credential for Slack and Teams.
            Err(error) => Err(Failure::Retry(error.without_url().to_string(), None)),
            Ok(response) => {
                let status = response.status();
                if status.is_success() {
                    Ok(())
                } else {
                    let asked = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|value| value.to_str().ok())
                        .and_then(|value| value.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let message = format!("HTTP {}", status.as_u16());
                    if status.is_server_error()
                        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT
                    {
                        Err(Failure::Retry(message, asked))
                    } else {
                        Err(Failure::Drop(message))
                    }
                }
            }
        };
        self.metrics
            .record_api_call(ApiTarget::Notification, result.is_ok());
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::http::{HeaderMap, StatusCode};
    use serde_json::Value;

    use super::*;
    use crate::config::{NotificationKind, Secret};

    /// A local receiver: answers `503` to the first `failures` requests, then records each
    /// body with its `Authorization` header and answers `200`.
    /// What the receiver got: each request's `Authorization` header and body.
    type Received = Arc<Mutex<Vec<(Option<String>, Value)>>>;

    async fn receiver(failures: usize) -> (String, Received) {
        let received: Received = Arc::default();
        let sink = received.clone();
        let attempts = Arc::new(AtomicUsize::new(0));
        let app = axum::Router::new().route(
            "/hook/{path_secret}",
            axum::routing::post(
                move |headers: HeaderMap, axum::Json(body): axum::Json<Value>| {
                    let (sink, attempts) = (sink.clone(), attempts.clone());
                    async move {
                        if attempts.fetch_add(1, Ordering::SeqCst) < failures {
                            return StatusCode::SERVICE_UNAVAILABLE;
                        }
                        let authorization = headers
                            .get("authorization")
                            .and_then(|value| value.to_str().ok())
                            .map(str::to_owned);
                        sink.lock().unwrap().push((authorization, body));
                        StatusCode::OK
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{address}/hook/T0-secret"), received)
    }

    fn channel(
        kind: NotificationKind,
        url: &str,
        events: &[NotificationEvent],
    ) -> NotificationChannel {
        NotificationChannel {
            name: "test".to_owned(),
            kind,
            url: Secret::new(url),
            token: (kind == NotificationKind::Webhook).then(|| Secret::new("bearer-value")),
            events: events.iter().copied().collect(),
        }
    }

    async fn wait_for_count(received: &Mutex<Vec<(Option<String>, Value)>>, count: usize) {
        tokio::time::timeout(Duration::from_secs(20), async {
            while received.lock().unwrap().len() < count {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the notifications arrive");
    }

    #[tokio::test]
    async fn a_channel_that_is_down_gets_the_notification_once_it_is_back() {
        let (url, received) = receiver(2).await;
        let (_stop, shutdown) = watch::channel(false);
        let retry = RetryPolicy {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(50),
        };
        let metrics = Arc::new(Metrics::new());
        let (notifier, _tasks) = Notifier::start(
            &[channel(
                NotificationKind::Webhook,
                &url,
                &NotificationEvent::ALL,
            )],
            metrics.clone(),
            retry,
            shutdown,
        )
        .unwrap();
        let failed = vec![("team-a/web".to_owned(), "apply failed".to_owned())];
        notifier.deploy_failed(
            "platform",
            "abc123",
            2,
            failed.clone(),
            "http://agent/plans/abc123".to_owned(),
        );
        // The same news again is not sent twice.
        notifier.deploy_failed(
            "platform",
            "abc123",
            2,
            failed,
            "http://agent/plans/abc123".to_owned(),
        );
        notifier.drift_found(
            "platform",
            "abc123",
            &["team-a/web".to_owned()],
            "p".to_owned(),
        );
        wait_for_count(&received, 2).await;
        let got = received.lock().unwrap().clone();
        assert_eq!(got[0].0.as_deref(), Some("Bearer bearer-value"));
        assert_eq!(got[0].1["event"], "deployFailed");
        assert_eq!(got[0].1["apps"][0]["detail"], "apply failed");
        assert_eq!(got[1].1["event"], "driftFound");
        // Two 503s were retried; the metrics count them as failed calls.
        let text = metrics.encode();
        assert!(
            text.contains("driftless_api_calls_total{target=\"Notification\",outcome=\"Error\"} 2"),
            "{text}"
        );
        // Drift already told for these apps at this commit is not repeated; after a clean
        // check it is news again.
        notifier.drift_found(
            "platform",
            "abc123",
            &["team-a/web".to_owned()],
            "p".to_owned(),
        );
        notifier.drift_cleared("platform");
        notifier.drift_found(
            "platform",
            "abc123",
            &["team-a/web".to_owned()],
            "p".to_owned(),
        );
        // A channel delivers in order: once this last one is in, nothing else was sent.
        notifier.prune_held("platform", "abc123", "12 prunes held", "p".to_owned());
        wait_for_count(&received, 4).await;
        let events: Vec<Value> = received
            .lock()
            .unwrap()
            .iter()
            .map(|(_, body)| body["event"].clone())
            .collect();
        assert_eq!(
            events,
            ["deployFailed", "driftFound", "driftFound", "pruneHeld"]
        );
    }

    #[tokio::test]
    async fn channels_get_only_their_events_in_their_shape() {
        let (url, received) = receiver(0).await;
        let (_stop, shutdown) = watch::channel(false);
        let (notifier, _tasks) = Notifier::start(
            &[channel(
                NotificationKind::Slack,
                &url,
                &[NotificationEvent::PruneHeld],
            )],
            Arc::new(Metrics::new()),
            RetryPolicy::default(),
            shutdown,
        )
        .unwrap();
        notifier.drift_found(
            "platform",
            "abc123",
            &["team-a/web".to_owned()],
            "p".to_owned(),
        );
        notifier.prune_held("platform", "abc123", "12 prunes held", "p".to_owned());
        wait_for_count(&received, 1).await;
        let got = received.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, None, "a Slack channel sends no token");
        let text = got[0].1["text"].as_str().unwrap();
        assert!(
            text.starts_with("*Prune held for approval: source platform"),
            "{text}"
        );
    }
}
