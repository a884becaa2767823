//! Splitting a `deploy` step's placements into batches: a deploy's `rollout` property (a
//! Driftless extension; KubeVela's deploy step has none) lists batches, each either named
//! clusters (`{clusters: [canary]}`), a percentage of all placements (`{percent: 50}`,
//! rounded up, taken in placement order from those not yet placed), or the rest
//! (`{rest: true}`, also implied after the last batch). Empty batches are dropped.

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
