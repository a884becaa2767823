//! The shard metrics, registered in the agent's registry (served at `/metrics`) when sharding
//! is on: apps this replica owns, live members, apps moved, and handover time.

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
enum Direction {
    Gained,
    Lost,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MoveLabels {
    source: String,
    direction: Direction,
}

/// The shard metrics of one replica.
#[derive(Debug, Clone)]
pub struct ShardMetrics {
    owned_apps: Family<SourceLabels, Gauge>,
    members: Gauge,
    moves: Family<MoveLabels, Counter>,
    handover_seconds: Histogram,
}

impl ShardMetrics {
    /// Registers the metrics (prefixed `shard_` within the agent's `driftless_` registry).
    pub fn register(registry: &mut Registry) -> ShardMetrics {
        let registry = registry.sub_registry_with_prefix("shard");
        let metrics = ShardMetrics {
            owned_apps: Family::default(),
            members: Gauge::default(),
            moves: Family::default(),
            handover_seconds: Histogram::new(exponential_buckets(0.1, 2.0, 12)),
        };
        registry.register(
            "owned_apps",
            "Apps of the source this replica owns under its current view of the members",
            metrics.owned_apps.clone(),
        );
        registry.register(
            "members",
            "Live members (replicas) this replica sees",
            metrics.members.clone(),
        );
        registry.register(
            "moves",
            "Apps this replica gained or lost on a change of membership or of the apps",
            metrics.moves.clone(),
        );
        registry.register(
            "handover_seconds",
            "From gaining an app to holding its claim (the old owner gave it up or expired)",
            metrics.handover_seconds.clone(),
        );
        metrics
    }

    pub(crate) fn set_owned(&self, source: &str, n_apps: usize) {
        let labels = SourceLabels {
            source: source.to_owned(),
        };
        (self.owned_apps.get_or_create(&labels)).set(i64::try_from(n_apps).unwrap_or(i64::MAX));
    }

    pub(crate) fn set_members(&self, n_members: usize) {
        self.members
            .set(i64::try_from(n_members).unwrap_or(i64::MAX));
    }

    pub(crate) fn record_moves(&self, source: &str, gained: usize, lost: usize) {
        for (direction, n_apps) in [(Direction::Gained, gained), (Direction::Lost, lost)] {
            let labels = MoveLabels {
                source: source.to_owned(),
                direction,
            };
            self.moves.get_or_create(&labels).inc_by(n_apps as u64);
        }
    }

    pub(crate) fn observe_handover(&self, elapsed: Duration) {
        self.handover_seconds.observe(elapsed.as_secs_f64());
    }
}
