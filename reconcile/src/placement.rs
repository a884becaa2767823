//! Where a `deploy` step places an app: the `topology` policies it names, resolved against the
//! agent's cluster registry (`clusters:` of `driftless.yaml`).
//!
//! KubeVela's semantics (`pkg/policy/topology.go` `GetPlacementsFromTopologyPolicies`): a
//! topology with `clusters` places on exactly those (each must exist); otherwise one with
//! `clusterLabelSelector` (or its deprecated alias `clusterSelector`) places on every cluster
//! whose labels contain all the selector's pairs; otherwise on the local cluster. An empty
//! result is an error unless `allowEmpty`. `namespace` overrides the app's namespace.
//! Placements of several topologies are concatenated without duplicates, in order. With no
//! topology at all the app goes to the local cluster in its own namespace.
//!
//! Pure: the registry comes in as data.

use std::collections::BTreeMap;

use analyzer::model::Policy;

/// KubeVela's name for the cluster the control plane runs in. Unless the registry has a
/// cluster of that name, Driftless maps it to the registry's first cluster.
pub const LOCAL_CLUSTER: &str = "local";

/// A cluster of the registry as placement sees it: its name and labels (the agent's
/// `ClusterConfig` also knows how to connect to it, which placement does not need).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisteredCluster<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// One cluster and namespace an app is deployed to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Placement {
    pub cluster: String,
    pub namespace: String,
}

/// A topology that cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "topology policy {policy:?} names cluster {cluster:?}, which is not in the cluster registry"
    )]
    UnknownCluster { policy: String, cluster: String },
    #[error("topology policy {policy:?} selects no cluster")]
    NoClusterSelected { policy: String },
    #[error("the cluster registry is empty")]
    NoClusters,
}

/// Resolves the topology policies among `policies` into placements.
///
/// # Errors
/// A named cluster is not registered, a selector matches nothing without `allowEmpty`, or there
/// is no cluster to place on.
pub fn placements(
    policies: &[&Policy],
    registry: &[RegisteredCluster<'_>],
    app_namespace: &str,
) -> Result<Vec<Placement>, PlacementError> {
    let local = registry
        .first()
        .map(|cluster| cluster.name.to_owned())
        .ok_or(PlacementError::NoClusters)?;
    let topologies: Vec<&&Policy> = policies
        .iter()
        .filter(|policy| policy.policy_type == "topology")
        .collect();
    if topologies.is_empty() {
        return Ok(vec![Placement {
            cluster: local,
            namespace: app_namespace.to_owned(),
        }]);
    }
    let mut result: Vec<Placement> = Vec::new();
    for policy in topologies {
        let empty = serde_json::Value::Null;
        let properties = policy.properties.as_ref().unwrap_or(&empty);
        let namespace = properties
            .get("namespace")
            .and_then(|namespace| namespace.as_str())
            .filter(|namespace| !namespace.is_empty())
            .unwrap_or(app_namespace)
            .to_owned();
        let allow_empty = properties
            .get("allowEmpty")
            .and_then(|allow| allow.as_bool())
            .unwrap_or(false);
        let named: Vec<&str> = properties
            .get("clusters")
            .and_then(|clusters| clusters.as_array())
            .into_iter()
            .flatten()
            .filter_map(|cluster| cluster.as_str())
            .collect();
        let selector: Option<BTreeMap<String, String>> = properties
            .get("clusterLabelSelector")
            .or_else(|| properties.get("clusterSelector"))
            .and_then(|selector| selector.as_object())
            .map(|selector| {
                selector
                    .iter()
                    .map(|(key, value)| {
                        (key.clone(), value.as_str().unwrap_or_default().to_owned())
                    })
                    .collect()
            });
        let clusters: Vec<String> = if !named.is_empty() {
            let mut clusters = Vec::new();
            for cluster in named {
                if registry.iter().any(|known| known.name == cluster) {
                    clusters.push(cluster.to_owned());
                } else if cluster == LOCAL_CLUSTER {
                    clusters.push(local.clone());
                } else {
                    return Err(PlacementError::UnknownCluster {
                        policy: policy.name.clone(),
                        cluster: cluster.to_owned(),
                    });
                }
            }
            clusters
        } else if let Some(selector) = selector {
            registry
                .iter()
                .filter(|cluster| {
                    selector
                        .iter()
                        .all(|(key, value)| cluster.labels.get(key) == Some(value))
                })
                .map(|cluster| cluster.name.to_owned())
                .collect()
        } else {
            vec![local.clone()]
        };
        if clusters.is_empty() && !allow_empty {
            return Err(PlacementError::NoClusterSelected {
                policy: policy.name.clone(),
            });
        }
        for cluster in clusters {
            let placement = Placement {
                cluster,
                namespace: namespace.clone(),
            };
            if !result.contains(&placement) {
                result.push(placement);
            }
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str, labels: &[(&str, &str)]) -> (String, BTreeMap<String, String>) {
        let labels = labels
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        (name.to_owned(), labels)
    }

    fn topology(name: &str, properties: serde_json::Value) -> Policy {
        Policy {
            name: name.to_owned(),
            policy_type: "topology".to_owned(),
            properties: Some(properties),
        }
    }

    fn registry() -> Vec<(String, BTreeMap<String, String>)> {
        vec![
            cluster("hub", &[("env", "prod")]),
            cluster("east", &[("env", "prod"), ("region", "east")]),
            cluster("dev", &[("env", "dev")]),
        ]
    }

    fn resolve(policies: &[Policy]) -> Result<Vec<(String, String)>, PlacementError> {
        let refs: Vec<&Policy> = policies.iter().collect();
        let registry = registry();
        let registry: Vec<RegisteredCluster<'_>> = registry
            .iter()
            .map(|(name, labels)| RegisteredCluster { name, labels })
            .collect();
        placements(&refs, &registry, "app-ns").map(|placements| {
            placements
                .into_iter()
                .map(|placement| (placement.cluster, placement.namespace))
                .collect()
        })
    }

    fn pair(cluster: &str, namespace: &str) -> (String, String) {
        (cluster.to_owned(), namespace.to_owned())
    }

    #[test]
    fn named_clusters_with_namespace_override() {
        let policies = [topology(
            "t",
            serde_json::json!({"clusters": ["east", "local"], "namespace": "prod"}),
        )];
        assert_eq!(
            resolve(&policies),
            Ok(vec![pair("east", "prod"), pair("hub", "prod")])
        );
    }

    #[test]
    fn label_selector_and_alias() {
        let policies = [
            topology(
                "a",
                serde_json::json!({"clusterLabelSelector": {"env": "prod"}}),
            ),
            topology("b", serde_json::json!({"clusterSelector": {"env": "dev"}})),
        ];
        assert_eq!(
            resolve(&policies),
            Ok(vec![
                pair("hub", "app-ns"),
                pair("east", "app-ns"),
                pair("dev", "app-ns")
            ])
        );
    }

    #[test]
    fn empty_selection_needs_allow_empty() {
        let none = serde_json::json!({"clusterLabelSelector": {"env": "qa"}});
        assert_eq!(
            resolve(&[topology("t", none)]),
            Err(PlacementError::NoClusterSelected {
                policy: "t".to_owned()
            })
        );
        let allowed =
            serde_json::json!({"clusterLabelSelector": {"env": "qa"}, "allowEmpty": true});
        assert_eq!(resolve(&[topology("t", allowed)]), Ok(vec![]));
    }

    #[test]
    fn unknown_cluster_and_no_topology() {
        assert_eq!(
            resolve(&[topology("t", serde_json::json!({"clusters": ["mars"]}))]),
            Err(PlacementError::UnknownCluster {
                policy: "t".to_owned(),
                cluster: "mars".to_owned()
            })
        );
        assert_eq!(resolve(&[]), Ok(vec![pair("hub", "app-ns")]));
    }
}
