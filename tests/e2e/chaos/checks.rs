//! The three checks of a chaos trial, read from the cluster (never from the agent):
//! - **no orphan**: every live object carrying our owner mark (and not made by a controller) is
//!   listed in the tracker of the app the mark names;
//! - **no wrong prune**: every object that must survive the trial (bystanders, objects of another
//!   source, objects Git keeps) still exists with the same uid, and the bystanders are untouched
//!   (same resourceVersion);
//! - **convergence**: the cluster holds what Git says, and nothing of what Git removed.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ApiResource;

use agent::plan::ObjectRef;
use agent::tracker::{DATA_KEY, DEFAULT_NAMESPACE, TrackerRecord, tracker_name};

use super::scenarios::{ROLLOUT_REPLICAS, State};
use crate::support::cluster::TestCluster;

const OWNER: &str = "driftless.dev/owner";

/// The kinds the scenarios render, each as (apiVersion, resource).
fn kinds() -> [(String, ApiResource); 3] {
    [
        ("v1".to_owned(), ApiResource::erase::<ConfigMap>(&())),
        ("apps/v1".to_owned(), ApiResource::erase::<Deployment>(&())),
        ("v1".to_owned(), ApiResource::erase::<Service>(&())),
    ]
}

/// The app's tracker, `None` when it has none.
async fn tracker(cluster: &TestCluster, app: &analyzer::AppRef) -> Result<Option<TrackerRecord>> {
    let trackers: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), DEFAULT_NAMESPACE);
    let name = tracker_name(app);
    let Some(config_map) = trackers.get_opt(&name).await? else {
        return Ok(None);
    };
    let text = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(DATA_KEY))
        .with_context(|| format!("tracker {name} has no {DATA_KEY}"))?;
    Ok(Some(TrackerRecord::from_json(&name, text, None)?))
}

/// Objects in `namespace` that carry our owner mark, are not a controller's (no owner
/// reference), and are not listed in the tracker of the app their mark names.
pub async fn orphans(cluster: &TestCluster, namespace: &str) -> Result<Vec<String>> {
    let mut orphans = Vec::new();
    let mut trackers: BTreeMap<String, Option<TrackerRecord>> = BTreeMap::new();
    for (api_version, resource) in kinds() {
        let api: Api<DynamicObject> =
            Api::namespaced_with(cluster.client.clone(), namespace, &resource);
        for object in api.list(&ListParams::default()).await?.items {
            let metadata = &object.metadata;
            let owned_by_controller = metadata
                .owner_references
                .as_ref()
                .is_some_and(|references| !references.is_empty());
            let Some(owner) = metadata
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(OWNER))
            else {
                continue;
            };
            if owned_by_controller {
                continue;
            }
            let Some((app_namespace, app_name)) = owner.split_once('/') else {
                orphans.push(format!(
                    "{} {owner:?}: unreadable owner mark",
                    resource.kind
                ));
                continue;
            };
            let app = analyzer::AppRef {
                namespace: app_namespace.to_owned(),
                name: app_name.to_owned(),
            };
            if !trackers.contains_key(owner) {
                trackers.insert(owner.clone(), tracker(cluster, &app).await?);
            }
            let object_ref = ObjectRef {
                api_version: api_version.clone(),
                kind: resource.kind.clone(),
                namespace: Some(namespace.to_owned()),
                name: metadata.name.clone().unwrap_or_default(),
            };
            let listed = trackers
                .get(owner)
                .and_then(Option::as_ref)
                .is_some_and(|record| record.entries.contains_key(&object_ref));
            if !listed {
                orphans.push(format!("{object_ref} (owner {owner})"));
            }
        }
    }
    Ok(orphans)
}

/// Identity of an object that must survive: its uid, and its resourceVersion when it must not
/// even be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survivor {
    pub uid: String,
    pub resource_version: Option<String>,
}

/// The ConfigMaps and Deployments of `namespace` by `kind/name`, for [`wrong_prunes`]: those
/// in `untouchable` keep their resourceVersion too.
pub async fn survivors(
    cluster: &TestCluster,
    namespace: &str,
    keep: impl Fn(&str) -> bool,
    untouchable: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, Survivor>> {
    let mut found = BTreeMap::new();
    for (_, resource) in kinds() {
        let api: Api<DynamicObject> =
            Api::namespaced_with(cluster.client.clone(), namespace, &resource);
        for object in api.list(&ListParams::default()).await?.items {
            let name = object.metadata.name.clone().unwrap_or_default();
            let key = format!("{}/{name}", resource.kind);
            if !keep(&key) {
                continue;
            }
            found.insert(
                key.clone(),
                Survivor {
                    uid: object.metadata.uid.clone().unwrap_or_default(),
                    resource_version: untouchable(&key)
                        .then(|| object.metadata.resource_version.clone())
                        .flatten(),
                },
            );
        }
    }
    Ok(found)
}

/// Survivors recorded before the trial that are gone, replaced (new uid) or, when untouchable,
/// written since.
pub async fn wrong_prunes(
    cluster: &TestCluster,
    namespace: &str,
    before: &BTreeMap<String, Survivor>,
) -> Result<Vec<String>> {
    let now = survivors(cluster, namespace, |key| before.contains_key(key), |_| true).await?;
    let mut wrong = Vec::new();
    for (key, was) in before {
        match now.get(key) {
            None => wrong.push(format!("{key} was deleted")),
            Some(is) if is.uid != was.uid => wrong.push(format!("{key} was deleted and recreated")),
            Some(is)
                if was.resource_version.is_some()
                    && is.resource_version != was.resource_version =>
            {
                wrong.push(format!("{key} (not ours) was written"));
            }
            Some(_) => {}
        }
    }
    Ok(wrong)
}

/// What still differs from what Git says; empty once converged.
pub async fn differences(
    cluster: &TestCluster,
    state: &State,
    removed: &[String],
) -> Result<Vec<String>> {
    let namespace = &state.namespace;
    let mut differences = Vec::new();
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), namespace);
    let expected = state.config_maps();
    for (name, app) in &expected {
        match config_maps.get_opt(name).await? {
            None => differences.push(format!("ConfigMap {name} is missing")),
            Some(config_map) => {
                let color = config_map.data.as_ref().and_then(|data| data.get("color"));
                if color != Some(&state.color) {
                    differences.push(format!(
                        "ConfigMap {name} has color {color:?}, not {}",
                        state.color
                    ));
                }
                let owner = config_map
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(OWNER));
                if owner != Some(&format!("{namespace}/{app}")) {
                    differences.push(format!("ConfigMap {name} has owner {owner:?}"));
                }
            }
        }
    }
    // Every ConfigMap of ours that Git does not render is gone.
    for config_map in config_maps.list(&ListParams::default()).await?.items {
        let name = config_map.metadata.name.clone().unwrap_or_default();
        let ours = config_map
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(OWNER));
        if ours && !expected.contains_key(&name) && !name.starts_with("neighbour") {
            differences.push(format!("ConfigMap {name} should have been pruned"));
        }
    }
    for app in removed {
        let app_ref = analyzer::AppRef {
            namespace: namespace.clone(),
            name: app.clone(),
        };
        if tracker(cluster, &app_ref).await?.is_some() {
            differences.push(format!("the tracker of removed app {app} is still there"));
        }
    }
    if let Some(image) = &state.rollout {
        differences.extend(rollout_differences(cluster, namespace, image).await?);
    }
    Ok(differences)
}

/// The rollout app converged: `web` runs `image` with every replica ready, and no other
/// Deployment of ours is left (the new revision's extra one was garbage-collected).
async fn rollout_differences(
    cluster: &TestCluster,
    namespace: &str,
    image: &str,
) -> Result<Vec<String>> {
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), namespace);
    let mut differences = Vec::new();
    for deployment in deployments.list(&ListParams::default()).await?.items {
        let name = deployment.metadata.name.clone().unwrap_or_default();
        if name != "web" {
            differences.push(format!("Deployment {name} is still there"));
            continue;
        }
        let spec = deployment.spec.as_ref();
        let images: Vec<String> = spec
            .and_then(|spec| spec.template.spec.as_ref())
            .map(|pod| {
                pod.containers
                    .iter()
                    .filter_map(|c| c.image.clone())
                    .collect()
            })
            .unwrap_or_default();
        if images != [image.to_owned()] {
            differences.push(format!("Deployment web runs {images:?}, not {image}"));
        }
        let replicas = spec.and_then(|spec| spec.replicas);
        let ready = deployment
            .status
            .as_ref()
            .and_then(|status| status.ready_replicas);
        if replicas != Some(ROLLOUT_REPLICAS) || ready != Some(ROLLOUT_REPLICAS) {
            differences.push(format!(
                "Deployment web has {replicas:?} replicas, {ready:?} ready, not {ROLLOUT_REPLICAS}"
            ));
        }
    }
    if deployments.get_opt("web").await?.is_none() {
        differences.push("Deployment web is missing".to_owned());
    }
    Ok(differences)
}
