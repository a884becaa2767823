//! Kubernetes Events on failures: a failed deploy, prunes held for approval, drift found and
//! degraded health are recorded as core/v1 Events about the app (`involvedObject` kind
//! `Application`, in the app's namespace), so `kubectl get events` and `kubectl describe` show
//! them beside the app's objects, and alerting on Events works.
//!
//! Repeats are aggregated and rate limited as kubectl's event recorder does: the same app,
//! reason and message make one Event whose `count` and `lastTimestamp` grow, patched at most
//! once per [`REPEAT_INTERVAL`] (a drift check every few seconds does not patch every time;
//! the next patch carries the count so far). All writes share one token bucket
//! ([`BURST`], refilled one per [`REFILL`]); an Event beyond it is dropped and logged at debug.
//! Writes run in their own tasks: recording never waits on the apiserver.
//!
//! Messages are the texts commit statuses show (already free of Secret values: plan texts are
//! masked where they are made, and statuses name objects, never values), cut to
//! [`MAX_MESSAGE`] bytes. A write that fails (the app's namespace does not exist yet, RBAC) is
//! logged at debug and forgotten, so the next occurrence tries again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use analyzer::AppRef;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::ObjectMeta;

use crate::cluster::{Cluster, describe_error};
use crate::health::HealthStatus;
use crate::plan::{Action, Plan};

/// A repeated Event is patched at most this often.
pub const REPEAT_INTERVAL: Duration = Duration::from_secs(60);
/// Event writes allowed at once before the bucket limits them.
pub const BURST: f64 = 25.0;
/// One more write allowed per this long.
pub const REFILL: Duration = Duration::from_secs(1);
/// Longest message written (the apiserver's events.k8s.io limit; core/v1 has none).
pub const MAX_MESSAGE: usize = 1024;
/// Distinct (app, reason, message) remembered for aggregation; beyond it the oldest go.
const MAX_REMEMBERED: usize = 10_000;

/// The component named in `source` and `reportingController`.
const COMPONENT: &str = "driftless";

/// Why an Event is recorded (its `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    DeployFailed,
    PruneHeld,
    DriftFound,
    HealthDegraded,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::DeployFailed => "DeployFailed",
            Reason::PruneHeld => "PruneHeld",
            Reason::DriftFound => "DriftFound",
            Reason::HealthDegraded => "HealthDegraded",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    app: AppRef,
    reason: Reason,
    message: String,
}

#[derive(Debug)]
struct Seen {
    name: String,
    count: i32,
    first: Time,
    last_written: Instant,
    last_occurred: Instant,
}

#[derive(Debug)]
struct Correlator {
    seen: HashMap<Key, Seen>,
    tokens: f64,
    refilled: Instant,
}

impl Correlator {
    fn take_token(&mut self, now: Instant) -> bool {
        let earned = now.duration_since(self.refilled).as_secs_f64() / REFILL.as_secs_f64();
        self.tokens = (self.tokens + earned).min(BURST);
        self.refilled = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// Records Events on the agent's own cluster; cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    cluster: Arc<Cluster>,
    /// `reportingInstance`: the replica.
    instance: String,
    correlator: Arc<Mutex<Correlator>>,
}

impl EventRecorder {
    pub fn new(cluster: Arc<Cluster>, instance: &str) -> EventRecorder {
        EventRecorder {
            cluster,
            instance: instance.to_owned(),
            correlator: Arc::new(Mutex::new(Correlator {
                seen: HashMap::new(),
                tokens: BURST,
                refilled: Instant::now(),
            })),
        }
    }

    /// A deploy failed for `app`; `why` is its status description.
    pub fn deploy_failed(&self, app: &AppRef, why: &str) {
        self.record(app, Reason::DeployFailed, why);
    }

    /// Every app of `plan` whose prunes the pass held (`budget` says why).
    pub fn prunes_held(&self, plan: &Plan, budget: &str) {
        for app_plan in &plan.apps {
            let held = app_plan
                .diagnostics
                .iter()
                .find(|diagnostic| diagnostic.rule == reconcile::prune_guard::RULE_PRUNE_HELD);
            if let Some(held) = held {
                self.record(
                    &app_plan.app,
                    Reason::PruneHeld,
                    &format!(
                        "{} ({budget}; approve with `driftless approve-prune`)",
                        held.message
                    ),
                );
            }
        }
    }

    /// A drift check of `revision`: drift and degraded health, per app.
    pub fn drift_checked(&self, plan: &Plan, revision: &str) {
        for app_plan in &plan.apps {
            let drifted: Vec<String> = (app_plan.changes.iter())
                .filter(|change| change.action != Action::Unchanged)
                .map(|change| format!("{} {}", change.action.as_str(), change.object))
                .collect();
            if !drifted.is_empty() {
                self.record(
                    &app_plan.app,
                    Reason::DriftFound,
                    &format!(
                        "live objects differ from revision {revision}: {}",
                        drifted.join(", ")
                    ),
                );
            }
            if let Some(health) = &app_plan.health
                && health.health.status == HealthStatus::Degraded
            {
                self.record(
                    &app_plan.app,
                    Reason::HealthDegraded,
                    &health.health.message,
                );
            }
        }
    }

    /// Records one occurrence: a new Event, a count patch when due, or nothing (counted, or
    /// over the rate limit).
    pub fn record(&self, app: &AppRef, reason: Reason, message: &str) {
        let key = Key {
            app: app.clone(),
            reason,
            message: truncate(message, MAX_MESSAGE).to_owned(),
        };
        let now = Instant::now();
        let wall = Time(k8s_openapi::jiff::Timestamp::now());
        let (name, count, first, repeat) = {
            let mut correlator = self.lock();
            if let Some(seen) = correlator.seen.get_mut(&key) {
                seen.count = seen.count.saturating_add(1);
                seen.last_occurred = now;
                if now.duration_since(seen.last_written) < REPEAT_INTERVAL {
                    return;
                }
                let (name, count, first) = (seen.name.clone(), seen.count, seen.first.clone());
                if !correlator.take_token(now) {
                    return;
                }
                if let Some(seen) = correlator.seen.get_mut(&key) {
                    seen.last_written = now;
                }
                (name, count, first, true)
            } else {
                if !correlator.take_token(now) {
                    tracing::debug!(app = %app, reason = reason.as_str(), "event dropped by the rate limit");
                    return;
                }
                forget_oldest(&mut correlator.seen);
                let name = format!("{}.{:x}", app.name, wall.0.as_nanosecond());
                correlator.seen.insert(
                    key.clone(),
                    Seen {
                        name: name.clone(),
                        count: 1,
                        first: wall.clone(),
                        last_written: now,
                        last_occurred: now,
                    },
                );
                (name, 1, wall.clone(), false)
            }
        };
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(app.namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("core.oam.dev/v1beta1".to_owned()),
                kind: Some("Application".to_owned()),
                name: Some(app.name.clone()),
                namespace: Some(app.namespace.clone()),
                ..ObjectReference::default()
            },
            reason: Some(reason.as_str().to_owned()),
            message: Some(key.message.clone()),
            type_: Some("Warning".to_owned()),
            count: Some(count),
            first_timestamp: Some(first),
            last_timestamp: Some(wall.clone()),
            event_time: None::<MicroTime>,
            source: Some(EventSource {
                component: Some(COMPONENT.to_owned()),
                host: None,
            }),
            reporting_component: Some(COMPONENT.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        };
        let recorder = self.clone();
        tokio::spawn(async move {
            if let Err(error) = crate::writer::event(&recorder.cluster, &event, repeat).await {
                tracing::debug!(app = %key.app, reason = key.reason.as_str(), error = %describe_error(&error), "event not recorded");
                recorder.lock().seen.remove(&key);
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Correlator> {
        // The map only aggregates: after a panic elsewhere it is still usable.
        self.correlator
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Keeps the map under [`MAX_REMEMBERED`] by forgetting the least recent occurrences.
fn forget_oldest(seen: &mut HashMap<Key, Seen>) {
    if seen.len() < MAX_REMEMBERED {
        return;
    }
    let mut ages: Vec<Instant> = seen.values().map(|seen| seen.last_occurred).collect();
    ages.sort_unstable();
    let cutoff = ages[ages.len() / 2];
    seen.retain(|_, seen| seen.last_occurred > cutoff);
}

/// `text` cut to at most `max` bytes on a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_bucket_allows_a_burst_then_one_per_refill() {
        let start = Instant::now();
        let mut correlator = Correlator {
            seen: HashMap::new(),
            tokens: BURST,
            refilled: start,
        };
        let allowed = (0..100).filter(|_| correlator.take_token(start)).count();
        assert_eq!(allowed, BURST as usize);
        assert!(!correlator.take_token(start));
        assert!(correlator.take_token(start + REFILL));
        assert!(!correlator.take_token(start + REFILL));
    }

    #[test]
    fn messages_are_cut_on_a_character_boundary() {
        let text = "é".repeat(600);
        let cut = truncate(&text, MAX_MESSAGE);
        assert!(cut.len() <= MAX_MESSAGE);
        assert_eq!(cut.chars().count(), MAX_MESSAGE / 2);
        assert_eq!(truncate("short", MAX_MESSAGE), "short");
    }
}
