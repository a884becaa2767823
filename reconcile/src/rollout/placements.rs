//! Splitting a `deploy` step's placements into batches: a deploy's `rollout` property (a
//! Driftless extension; KubeVela's deploy step has none) lists batches, each either named
//! clusters (`{clusters: [canary]}`), a percentage of all placements (`{percent: 50}`,
//! rounded up, taken in placement order from those not yet placed), or the rest
//! (`{rest: true}`, also implied after the last batch). Empty batches are dropped.
//! `rollout.pauseBetweenBatches: true` holds after every batch until `driftless resume`
//! approves the next; `rollout.gateTimeout` (a Go duration) fails a batch that is not healthy
//! in time, and `rollout.rollbackOnFailure: true` then puts the Deployments of the batches
//! reached back on their previous ReplicaSet's template (as `kubectl rollout undo`).

use crate::placement::Placement;

/// One batch entry of a deploy's `rollout.batches`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementBatchSpec {
    Clusters(Vec<String>),
    Percent(u32),
    Rest,
}

impl PlacementBatchSpec {
    /// Reads `rollout.batches` entries; unknown shapes are skipped by the caller's validation.
    pub fn from_json(value: &serde_json::Value) -> Option<PlacementBatchSpec> {
        if let Some(clusters) = value
            .get("clusters")
            .and_then(|clusters| clusters.as_array())
        {
            return Some(PlacementBatchSpec::Clusters(
                clusters
                    .iter()
                    .filter_map(|cluster| cluster.as_str().map(str::to_owned))
                    .collect(),
            ));
        }
        if let Some(percent) = value.get("percent").and_then(serde_json::Value::as_u64) {
            return Some(PlacementBatchSpec::Percent(percent.min(100) as u32));
        }
        value
            .get("rest")
            .and_then(serde_json::Value::as_bool)
            .filter(|rest| *rest)
            .map(|_| PlacementBatchSpec::Rest)
    }
}

/// A deploy step's `rollout` property, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementRollout {
    pub batches: Vec<PlacementBatchSpec>,
    /// Hold after each batch until approved.
    pub pause_between_batches: bool,
    pub gate_timeout_secs: Option<u64>,
    pub rollback_on_failure: bool,
}

/// A deploy step's `rollout` property that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementRolloutError {
    #[error("rollout.batches must be a non-empty list")]
    NoBatches,
    #[error(
        "rollout.batches[{index}] is none of {{clusters: [...]}}, {{percent: 1-100}}, {{rest: true}}"
    )]
    BadBatch { index: usize },
    #[error("rollout.gateTimeout: {0}")]
    BadTimeout(String),
}

impl PlacementRollout {
    /// Reads a deploy step's properties; `Ok(None)` when the step has no `rollout`.
    ///
    /// # Errors
    /// A `rollout` whose batches or gate timeout cannot be used.
    pub fn from_step_properties(
        properties: &serde_json::Value,
    ) -> Result<Option<PlacementRollout>, PlacementRolloutError> {
        let Some(rollout) = properties.get("rollout") else {
            return Ok(None);
        };
        let entries = rollout
            .get("batches")
            .and_then(serde_json::Value::as_array)
            .filter(|entries| !entries.is_empty())
            .ok_or(PlacementRolloutError::NoBatches)?;
        let batches = entries
            .iter()
            .enumerate()
            .map(|(index, entry)| {
                let percent_ok = entry
                    .get("percent")
                    .is_none_or(|percent| percent.as_u64().is_some_and(|p| (1..=100).contains(&p)));
                PlacementBatchSpec::from_json(entry)
                    .filter(|_| percent_ok)
                    .ok_or(PlacementRolloutError::BadBatch { index })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let gate_timeout_secs = match rollout.get("gateTimeout") {
            None => None,
            Some(value) => {
                let text = value.as_str().unwrap_or_default();
                let duration = crate::workflow::parse_duration(text)
                    .map_err(|error| PlacementRolloutError::BadTimeout(error.to_string()))?;
                Some(duration.as_secs())
            }
        };
        Ok(Some(PlacementRollout {
            batches,
            pause_between_batches: rollout
                .get("pauseBetweenBatches")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            gate_timeout_secs,
            rollback_on_failure: rollout
                .get("rollbackOnFailure")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
        }))
    }

    /// The clusters the batches name explicitly, to check against the registry.
    pub fn named_clusters(&self) -> impl Iterator<Item = &str> {
        self.batches
            .iter()
            .flat_map(|batch| match batch {
                PlacementBatchSpec::Clusters(names) => names.as_slice(),
                _ => &[],
            })
            .map(String::as_str)
    }
}

/// Splits `placements` into batches following `specs` (see the module doc).
pub fn split_placements(
    placements: &[Placement],
    specs: &[PlacementBatchSpec],
) -> Vec<Vec<Placement>> {
    let total = placements.len() as u32;
    let mut remaining: Vec<Placement> = placements.to_vec();
    let mut batches = Vec::new();
    for spec in specs {
        let batch: Vec<Placement> = match spec {
            PlacementBatchSpec::Clusters(names) => {
                let (taken, kept) = remaining
                    .into_iter()
                    .partition(|placement| names.contains(&placement.cluster));
                remaining = kept;
                taken
            }
            PlacementBatchSpec::Percent(percent) => {
                let count = ((total * percent).div_ceil(100) as usize).min(remaining.len());
                remaining.drain(..count).collect()
            }
            PlacementBatchSpec::Rest => std::mem::take(&mut remaining),
        };
        if !batch.is_empty() {
            batches.push(batch);
        }
    }
    if !remaining.is_empty() {
        batches.push(remaining);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_properties_are_checked() {
        let rollout = PlacementRollout::from_step_properties(&serde_json::json!({
            "policies": ["all"],
            "rollout": {
                "batches": [{"clusters": ["canary"]}, {"percent": 50}],
                "pauseBetweenBatches": true,
                "gateTimeout": "2m",
            },
        }))
        .unwrap()
        .unwrap();
        assert_eq!(rollout.gate_timeout_secs, Some(120));
        assert!(rollout.pause_between_batches);
        assert_eq!(rollout.named_clusters().collect::<Vec<_>>(), vec!["canary"]);
        assert_eq!(
            PlacementRollout::from_step_properties(&serde_json::json!({})),
            Ok(None)
        );
        let bad = |rollout: serde_json::Value| {
            PlacementRollout::from_step_properties(&serde_json::json!({ "rollout": rollout }))
        };
        assert_eq!(
            bad(serde_json::json!({"batches": []})),
            Err(PlacementRolloutError::NoBatches)
        );
        assert_eq!(
            bad(serde_json::json!({"batches": [{"rest": true}, {"percent": 0}]})),
            Err(PlacementRolloutError::BadBatch { index: 1 })
        );
        assert_eq!(
            bad(serde_json::json!({"batches": [{"canary": "x"}]})),
            Err(PlacementRolloutError::BadBatch { index: 0 })
        );
        assert!(matches!(
            bad(serde_json::json!({"batches": [{"rest": true}], "gateTimeout": "soon"})),
            Err(PlacementRolloutError::BadTimeout(_))
        ));
    }

    fn placement(cluster: &str) -> Placement {
        Placement {
            cluster: cluster.to_owned(),
            namespace: "ns".to_owned(),
        }
    }

    #[test]
    fn canary_then_half_then_rest() {
        let placements: Vec<Placement> = ["a", "b", "c", "canary", "d"]
            .into_iter()
            .map(placement)
            .collect();
        let specs = [
            PlacementBatchSpec::from_json(&serde_json::json!({"clusters": ["canary"]})).unwrap(),
            PlacementBatchSpec::from_json(&serde_json::json!({"percent": 50})).unwrap(),
        ];
        let batches: Vec<Vec<String>> = split_placements(&placements, &specs)
            .into_iter()
            .map(|batch| {
                batch
                    .into_iter()
                    .map(|placement| placement.cluster)
                    .collect()
            })
            .collect();
        assert_eq!(
            batches,
            vec![
                vec!["canary".to_owned()],
                vec!["a".to_owned(), "b".to_owned(), "c".to_owned()],
                vec!["d".to_owned()],
            ]
        );
    }
}
