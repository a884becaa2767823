//! Scale-out settings: `sharding` as written ([`ShardingFile`]) and checked
//! ([`ShardingConfig`]). With a `sharding` section, replicas of the agent share each source's
//! apps through Leases (`agent::shard`); without it, one agent deploys every app.
//!
//! ```yaml
//! sharding:
//!   replicaId: driftless-0      # default: $POD_NAME; `--replica-id` overrides
//!   namespace: driftless-system # where the member and claim Leases live; default: $POD_NAMESPACE
//!   leaseDuration: 15s          # a replica silent this long is gone
//!   epsilon: 0.25               # no replica holds more than ⌈(1 + ε) × average⌉ apps
//! ```

use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Checker, is_dns_label, parse_duration};

/// The Lease namespace when neither the file nor `$POD_NAMESPACE` names one.
const DEFAULT_NAMESPACE: &str = "driftless-system";
const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// `sharding` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShardingFile {
    pub replica_id: Option<Spanned<String>>,
    pub namespace: Option<Spanned<String>>,
    pub lease_duration: Option<Spanned<String>>,
    pub epsilon: Option<Spanned<f64>>,
}

/// The checked scale-out settings.
#[derive(Debug, Clone)]
pub struct ShardingConfig {
    /// This replica's name among the members: unique per running replica (a pod name).
    pub replica_id: String,
    pub namespace: String,
    pub lease_duration: Duration,
    pub epsilon: f64,
}

impl ShardingConfig {
    /// The settings with defaults for everything but the replica's name (`--replica-id`
    /// without a `sharding` section).
    #[must_use]
    pub fn with_defaults(replica_id: String) -> ShardingConfig {
        ShardingConfig {
            replica_id,
            namespace: DEFAULT_NAMESPACE.to_owned(),
            lease_duration: DEFAULT_LEASE_DURATION,
            epsilon: crate::shard::assign::DEFAULT_EPSILON,
        }
    }
}

pub(super) fn check_sharding(
    checker: &mut Checker<'_>,
    sharding: ShardingFile,
) -> Option<ShardingConfig> {
    let pod_name = checker
        .env
        .var("POD_NAME")
        .map(|value| value.expose().to_owned());
    let pod_namespace = (checker.env.var("POD_NAMESPACE")).map(|value| value.expose().to_owned());
    let replica_id = match sharding.replica_id {
        Some(id) if !is_dns_label(&id.value) => {
            checker.problem(
                "sharding.replicaId",
                &id,
                format!(
                    "{:?} is not a DNS label (lowercase letters, digits, '-')",
                    id.value
                ),
            );
            return None;
        }
        Some(id) => id.value,
        // `--replica-id` may still name it; the binary checks that one is set.
        None => pod_name.unwrap_or_default(),
    };
    let namespace = match sharding.namespace {
        Some(namespace) if !is_dns_label(&namespace.value) => {
            checker.problem(
                "sharding.namespace",
                &namespace,
                "not a valid namespace name",
            );
            return None;
        }
        Some(namespace) => namespace.value,
        None => pod_namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()),
    };
    let lease_duration = match &sharding.lease_duration {
        None => DEFAULT_LEASE_DURATION,
        Some(text) => match parse_duration(&text.value) {
            Some(duration) if duration >= Duration::from_secs(1) => duration,
            _ => {
                checker.problem(
                    "sharding.leaseDuration",
                    text,
                    "a duration of at least 1s, like 15s",
                );
                return None;
            }
        },
    };
    let epsilon = match sharding.epsilon {
        None => crate::shard::assign::DEFAULT_EPSILON,
        Some(epsilon) if !(epsilon.value.is_finite() && epsilon.value >= 0.0) => {
            checker.problem(
                "sharding.epsilon",
                &epsilon,
                "a number of at least 0, like 0.25",
            );
            return None;
        }
        Some(epsilon) => epsilon.value,
    };
    Some(ShardingConfig {
        replica_id,
        namespace,
        lease_duration,
        epsilon,
    })
}
