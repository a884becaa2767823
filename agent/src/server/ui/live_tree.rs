//! The app page's objects tree, read live when the page is asked for: each rendered object
//! with its health (`agent::health`), and under a workload the ReplicaSets and Pods it owns.
//!
//! Reads only, bounded in time; a Secret's contents are never kept (only its identity and
//! health reach the page).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::Value;

use super::state::TreeObject;
use crate::cluster::Cluster;
use crate::health::{Health, health_of};
use crate::plan::ObjectRef;

/// How long the reads of one page may take.
pub const READ_BUDGET: Duration = Duration::from_secs(4);
/// Children listed per namespace and kind.
const LIST_LIMIT: u32 = 500;

/// One object of the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveNode {
    /// `web · workload`, `web · trait gateway`, `ReplicaSet`, `Pod`.
    pub label: String,
    pub object: ObjectRef,
    pub health: Option<Health>,
    /// Planned but not in the cluster.
    pub missing: bool,
    pub children: Vec<LiveNode>,
}

/// The tree of `objects` as the cluster has them now.
///
/// # Errors
///
/// A sentence for the page when the reads did not finish in [`READ_BUDGET`].
pub async fn read(cluster: &Cluster, objects: &[TreeObject]) -> Result<Vec<LiveNode>, String> {
    tokio::time::timeout(READ_BUDGET, read_all(cluster, objects))
        .await
        .map_err(|_| {
            format!(
                "The cluster did not answer within {}s; reload to try again.",
                READ_BUDGET.as_secs()
            )
        })
}

async fn read_all(cluster: &Cluster, objects: &[TreeObject]) -> Vec<LiveNode> {
    let mut children = Children::default();
    let mut nodes = Vec::with_capacity(objects.len());
    for tree_object in objects {
        let object = &tree_object.object;
        let label = match &tree_object.trait_type {
            None => format!("{} · workload", tree_object.component),
            Some(trait_type) => format!("{} · {trait_type}", tree_object.component),
        };
        let live = read_object(cluster, object).await;
        let mut node = LiveNode {
            label,
            object: object.clone(),
            health: live.as_ref().and_then(health_of),
            missing: live.is_none(),
            children: Vec::new(),
        };
        if let (Some(live), Some(namespace)) = (&live, &object.namespace)
            && owns_pods(object)
        {
            let uid = live
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            node.children = children.of(cluster, namespace, uid).await;
        }
        nodes.push(node);
    }
    nodes
}

fn owns_pods(object: &ObjectRef) -> bool {
    matches!(
        (object.group(), object.kind.as_str()),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet") | ("batch", "Job")
    )
}

async fn read_object(cluster: &Cluster, object: &ObjectRef) -> Option<Value> {
    let resolved = cluster
        .resolve(&object.api_version, &object.kind)
        .await
        .ok()??;
    let api = cluster.api(&resolved, object).await;
    let mut live = api.get_opt(&object.name).await.ok()??;
    live.metadata.managed_fields = None;
    let mut value = serde_json::to_value(live).ok()?;
    // Health reads status; a Secret's values are dropped before anything else sees them.
    if let Some(fields) = value.as_object_mut() {
        fields.remove("data");
        fields.remove("stringData");
    }
    Some(value)
}

/// The ReplicaSets and Pods of the namespaces read so far, listed once per page.
#[derive(Default)]
struct Children {
    listed: BTreeMap<String, (Vec<Value>, Vec<Value>)>,
}

impl Children {
    /// The ReplicaSets (with their Pods) and Pods owned by the object with `uid`.
    async fn of(&mut self, cluster: &Cluster, namespace: &str, uid: &str) -> Vec<LiveNode> {
        if !self.listed.contains_key(namespace) {
            let replica_sets = list::<ReplicaSet>(cluster, namespace).await;
            let pods = list::<Pod>(cluster, namespace).await;
            self.listed
                .insert(namespace.to_owned(), (replica_sets, pods));
        }
        let Some((replica_sets, pods)) = self.listed.get(namespace) else {
            return Vec::new();
        };
        let mut nodes = Vec::new();
        for replica_set in replica_sets.iter().filter(|object| owned_by(object, uid)) {
            let mut node = node_of("ReplicaSet", replica_set);
            let replica_set_uid = replica_set
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            node.children = pods
                .iter()
                .filter(|pod| owned_by(pod, replica_set_uid))
                .map(|pod| node_of("Pod", pod))
                .collect();
            // Old ReplicaSets scaled to zero say little; keep those with pods or replicas.
            let replicas = replica_set
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if replicas > 0 || !node.children.is_empty() {
                nodes.push(node);
            }
        }
        nodes.extend(
            pods.iter()
                .filter(|pod| owned_by(pod, uid))
                .map(|pod| node_of("Pod", pod)),
        );
        nodes
    }
}

async fn list<K>(cluster: &Cluster, namespace: &str) -> Vec<Value>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    cluster.throttle().await;
    let api: Api<K> = Api::namespaced(cluster.client().clone(), namespace);
    match api.list(&ListParams::default().limit(LIST_LIMIT)).await {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|item| serde_json::to_value(item).ok())
            .collect(),
        Err(error) => {
            tracing::debug!(%error, namespace, "listing children for the UI failed");
            Vec::new()
        }
    }
}

fn owned_by(object: &Value, uid: &str) -> bool {
    !uid.is_empty()
        && object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|owners| {
                owners
                    .iter()
                    .any(|owner| owner.get("uid").and_then(Value::as_str) == Some(uid))
            })
}

fn node_of(label: &str, live: &Value) -> LiveNode {
    let object = ObjectRef::from_object(live).unwrap_or_else(|_| ObjectRef {
        api_version: String::new(),
        kind: label.to_owned(),
        namespace: None,
        name: String::new(),
    });
    LiveNode {
        label: label.to_owned(),
        object,
        health: health_of(live),
        missing: false,
        children: Vec::new(),
    }
}
