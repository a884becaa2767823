//! KubeVela's rollout plan (the `rollout` trait and `rolloutPlan`): how many replicas each
//! batch adds. `rolloutBatches[].replicas` takes a count or a percentage of `targetSize`
//! (`"20%"`); with `numBatches` instead, replicas are split evenly and the last batch takes the
//! remainder, as KubeVela's rollout controller does. Batches must add up to `targetSize`.
//! Two Driftless extensions: `gateTimeout` (a Go duration) fails a batch whose gate has not
//! passed in time, and `rollbackOnFailure: true` then restores the previous revision.

/// A rollout plan that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RolloutError {
    #[error("rollout plan has no targetSize")]
    MissingTargetSize,
    #[error("rollout plan needs numBatches or rolloutBatches")]
    NoBatches,
    #[error("rolloutBatches[{index}].replicas {value} is not a count or a percentage")]
    BadReplicas { index: usize, value: String },
    #[error("rollout batches add up to {sum} replicas, not targetSize {target}")]
    SumMismatch { sum: u32, target: u32 },
    #[error("batchPartition {partition} is past the last batch ({batches} batches)")]
    PartitionOutOfRange { partition: usize, batches: usize },
    #[error("gateTimeout: {0}")]
    BadGateTimeout(String),
}

/// A checked rollout plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutPlan {
    pub target_size: u32,
    /// Replicas each batch adds, in order.
    pub batch_sizes: Vec<u32>,
    /// Roll only up to this batch index (inclusive), then hold.
    pub batch_partition: Option<usize>,
    /// Hold before the next batch until unpaused.
    pub paused: bool,
    /// Restore the previous revision when a gate fails.
    pub rollback_on_failure: bool,
    /// Seconds a batch may take to pass its gate.
    pub gate_timeout_secs: Option<u64>,
}

impl RolloutPlan {
    /// Reads a plan from trait or policy properties.
    ///
    /// # Errors
    /// Missing or inconsistent sizes, see [`RolloutError`].
    pub fn from_properties(properties: &serde_json::Value) -> Result<RolloutPlan, RolloutError> {
        let target_size = properties
            .get("targetSize")
            .and_then(serde_json::Value::as_u64)
            .ok_or(RolloutError::MissingTargetSize)? as u32;
        let batch_sizes = match (
            properties
                .get("rolloutBatches")
                .and_then(|batches| batches.as_array()),
            properties
                .get("numBatches")
                .and_then(serde_json::Value::as_u64),
        ) {
            (Some(batches), _) if !batches.is_empty() => batches
                .iter()
                .enumerate()
                .map(|(index, batch)| replicas_of(index, batch.get("replicas"), target_size))
                .collect::<Result<Vec<u32>, RolloutError>>()?,
            (_, Some(count)) if count > 0 => {
                let count = count as u32;
                let each = target_size / count;
                let mut sizes = vec![each; count as usize];
                if let Some(last) = sizes.last_mut() {
                    *last += target_size - each * count;
                }
                sizes
            }
            _ => return Err(RolloutError::NoBatches),
        };
        let sum: u32 = batch_sizes.iter().sum();
        if sum != target_size {
            return Err(RolloutError::SumMismatch {
                sum,
                target: target_size,
            });
        }
        let batch_partition = properties
            .get("batchPartition")
            .and_then(serde_json::Value::as_u64)
            .map(|partition| partition as usize);
        if let Some(partition) = batch_partition
            && partition >= batch_sizes.len()
        {
            return Err(RolloutError::PartitionOutOfRange {
                partition,
                batches: batch_sizes.len(),
            });
        }
        let gate_timeout_secs = match properties.get("gateTimeout") {
            None => None,
            Some(value) => Some(
                crate::workflow::parse_duration(value.as_str().unwrap_or_default())
                    .map_err(|error| RolloutError::BadGateTimeout(error.to_string()))?
                    .as_secs(),
            ),
        };
        Ok(RolloutPlan {
            gate_timeout_secs,
            target_size,
            batch_sizes,
            batch_partition,
            paused: properties
                .get("paused")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            rollback_on_failure: properties
                .get("rollbackOnFailure")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// Updated replicas wanted once each batch is done (cumulative sums).
    pub fn cumulative_targets(&self) -> Vec<u32> {
        self.batch_sizes
            .iter()
            .scan(0u32, |total, size| {
                *total += size;
                Some(*total)
            })
            .collect()
    }

    /// Replicas of the new and the previous revision's Deployments while batch `batch` rolls
    /// (see the module doc of `rollout`): the new one holds the cumulative target, the old
    /// one the rest, so the total stays at `targetSize` (KubeVela's IncreaseFirst order: the
    /// caller scales the new one up before scaling the old one down).
    pub fn deployment_replicas(&self, batch: usize) -> (u32, u32) {
        let targets = self.cumulative_targets();
        let new = targets
            .get(batch)
            .or(targets.last())
            .copied()
            .unwrap_or(self.target_size);
        (new, self.target_size.saturating_sub(new))
    }

    /// StatefulSet partition for a cumulative target: pods with an ordinal at or above the
    /// partition are updated, so `targetSize - target` keeps the rest on the old revision.
    pub fn statefulset_partition(&self, target: u32) -> u32 {
        self.target_size.saturating_sub(target)
    }
}

fn replicas_of(
    index: usize,
    value: Option<&serde_json::Value>,
    target_size: u32,
) -> Result<u32, RolloutError> {
    let bad = |value: &serde_json::Value| RolloutError::BadReplicas {
        index,
        value: value.to_string(),
    };
    let Some(value) = value else {
        return Err(RolloutError::BadReplicas {
            index,
            value: "(missing)".to_owned(),
        });
    };
    if let Some(count) = value.as_u64() {
        return Ok(count as u32);
    }
    let percent = value
        .as_str()
        .and_then(|text| text.strip_suffix('%'))
        .and_then(|number| number.trim().parse::<u32>().ok())
        .filter(|percent| *percent <= 100)
        .ok_or_else(|| bad(value))?;
    // Rounded up, as Kubernetes rounds intstr percentages of surge.
    Ok((target_size * percent).div_ceil(100))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_batches_accumulate() {
        let plan = RolloutPlan::from_properties(&serde_json::json!({
            "targetSize": 10, "rolloutBatches": [{"replicas": 2}, {"replicas": 3}, {"replicas": "50%"}]
        }))
        .unwrap();
        assert_eq!(plan.cumulative_targets(), vec![2, 5, 10]);
        assert_eq!(plan.statefulset_partition(5), 5);
        assert_eq!(plan.deployment_replicas(0), (2, 8));
        assert_eq!(plan.deployment_replicas(1), (5, 5));
        assert_eq!(plan.deployment_replicas(2), (10, 0));
        assert_eq!(plan.deployment_replicas(7), (10, 0));
    }

    #[test]
    fn num_batches_split_evenly_with_remainder_last() {
        let plan =
            RolloutPlan::from_properties(&serde_json::json!({"targetSize": 10, "numBatches": 3}))
                .unwrap();
        assert_eq!(plan.batch_sizes, vec![3, 3, 4]);
        assert_eq!(plan.gate_timeout_secs, None);
        let timed = RolloutPlan::from_properties(
            &serde_json::json!({"targetSize": 2, "numBatches": 1, "gateTimeout": "1m30s"}),
        )
        .unwrap();
        assert_eq!(timed.gate_timeout_secs, Some(90));
    }

    #[test]
    fn inconsistent_plans_are_errors() {
        assert_eq!(
            RolloutPlan::from_properties(
                &serde_json::json!({"targetSize": 10, "rolloutBatches": [{"replicas": 2}]})
            ),
            Err(RolloutError::SumMismatch { sum: 2, target: 10 })
        );
        assert_eq!(
            RolloutPlan::from_properties(
                &serde_json::json!({"targetSize": 4, "numBatches": 2, "batchPartition": 2})
            ),
            Err(RolloutError::PartitionOutOfRange {
                partition: 2,
                batches: 2
            })
        );
        assert_eq!(
            RolloutPlan::from_properties(&serde_json::json!({"targetSize": 4})),
            Err(RolloutError::NoBatches)
        );
        assert!(matches!(
            RolloutPlan::from_properties(
                &serde_json::json!({"targetSize": 4, "numBatches": 2, "gateTimeout": "later"})
            ),
            Err(RolloutError::BadGateTimeout(_))
        ));
        assert!(matches!(
            RolloutPlan::from_properties(
                &serde_json::json!({"targetSize": 4, "rolloutBatches": [{"replicas": "x"}]})
            ),
            Err(RolloutError::BadReplicas { index: 0, .. })
        ));
    }
}
