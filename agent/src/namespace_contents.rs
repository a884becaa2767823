//! What a Namespace holds that an app does not own: read before an app's Namespace is pruned,
//! because deleting a Namespace deletes everything in it, whoever owns it. A Namespace that
//! holds anything the app does not own is never deleted (the apply fails and names the
//! objects); the app's own objects in it are pruned before it, in the plan's order.

use analyzer::AppRef;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope, verbs};

use crate::cluster::{Cluster, describe_error};
use crate::ownership;

/// At most this many foreign objects are named.
const NAMED: usize = 5;

/// The objects in `namespace` that `app` does not own, as `Kind/name` (at most a few). Not
/// counted: objects carrying the app's marks, objects with an owner reference (dependents,
/// collected with their owner: a Deployment's ReplicaSets and Pods), and what Kubernetes puts
/// in every namespace or derives from other objects (the `kube-root-ca.crt` ConfigMap, the
/// `default` ServiceAccount, Events, Endpoints and EndpointSlices).
///
/// # Errors
/// Discovery or a list failed: the caller must then not delete the Namespace.
pub async fn foreign_objects(
    cluster: &Cluster,
    namespace: &str,
    app: &AppRef,
) -> Result<Vec<String>, String> {
    cluster.throttle().await;
    let discovery = Discovery::new(cluster.client().clone())
        .run()
        .await
        .map_err(|error| format!("discovering the cluster's kinds: {error}"))?;
    let mut foreign = Vec::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            if capabilities.scope != Scope::Namespaced
                || !capabilities.supports_operation(verbs::LIST)
                || matches!(
                    resource.kind.as_str(),
                    "Event" | "Endpoints" | "EndpointSlice"
                )
            {
                continue;
            }
            let api: Api<DynamicObject> =
                Api::namespaced_with(cluster.client().clone(), namespace, &resource);
            cluster.throttle().await;
            let listed = api
                .list(&ListParams::default().limit(100))
                .await
                .map_err(|error| {
                    format!(
                        "listing {} in namespace {namespace}: {}",
                        resource.plural,
                        describe_error(&error)
                    )
                })?;
            for object in listed.items {
                let name = object.metadata.name.clone().unwrap_or_default();
                let dependent = object
                    .metadata
                    .owner_references
                    .as_ref()
                    .is_some_and(|owners| !owners.is_empty());
                let built_in = matches!(
                    (resource.kind.as_str(), name.as_str()),
                    ("ConfigMap", "kube-root-ca.crt") | ("ServiceAccount", "default")
                );
                if dependent || built_in {
                    continue;
                }
                let value = serde_json::to_value(&object).map_err(|error| error.to_string())?;
                if !ownership::carries_marks_of(&value, app) {
                    foreign.push(format!("{}/{name}", resource.kind));
                    if foreign.len() >= NAMED {
                        return Ok(foreign);
                    }
                }
            }
        }
    }
    Ok(foreign)
}
