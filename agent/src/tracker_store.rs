//! Reading and writing resource trackers in a cluster (the storage decided in `tracker`): one
//! ConfigMap per app in the tracker namespace, written with optimistic concurrency.

use std::collections::BTreeMap;

use analyzer::AppRef;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};

use crate::cluster::{Cluster, describe_error, has_status};
use crate::tracker::{DATA_KEY, LABEL_TRACKER, TrackerRecord, tracker_name};

/// A tracker could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TrackerError {
    #[error("reading resource tracker {name}: {message}")]
    TrackerReadFailed { name: String, message: String },
    #[error("writing resource tracker {name}: {message}")]
    TrackerWriteFailed { name: String, message: String },
    #[error(
        "resource tracker {name} was changed by someone else meanwhile (another agent applying the same app?)"
    )]
    TrackerConflict { name: String },
    #[error("resource tracker {name} is not valid: {message}")]
    TrackerInvalid { name: String, message: String },
}

/// The trackers of one cluster.
pub struct TrackerStore<'a> {
    cluster: &'a Cluster,
    namespace: String,
}

impl<'a> TrackerStore<'a> {
    pub fn new(cluster: &'a Cluster, namespace: &str) -> TrackerStore<'a> {
        TrackerStore {
            cluster,
            namespace: namespace.to_owned(),
        }
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.cluster.client().clone(), &self.namespace)
    }

    /// The tracker of an app; `None` when it has none yet.
    ///
    /// # Errors
    ///
    /// The read failed, or the stored record does not parse.
    pub async fn read(&self, app: &AppRef) -> Result<Option<TrackerRecord>, TrackerError> {
        let name = tracker_name(app);
        self.cluster.throttle().await;
        let config_map = match self.api().get_opt(&name).await {
            Ok(config_map) => config_map,
            // The namespace itself not existing yet means no tracker either.
            Err(error) if has_status(&error, 404) => None,
            Err(error) => {
                return Err(TrackerError::TrackerReadFailed {
                    name,
                    message: describe_error(&error),
                });
            }
        };
        config_map
            .map(|config_map| parse(&name, &config_map))
            .transpose()
    }

    /// Every tracker in the namespace, by app.
    ///
    /// # Errors
    ///
    /// The list failed, or a stored record does not parse.
    pub async fn list(&self) -> Result<BTreeMap<AppRef, TrackerRecord>, TrackerError> {
        self.cluster.throttle().await;
        let params = ListParams::default().labels(&format!("{LABEL_TRACKER}=true"));
        let list = match self.api().list(&params).await {
            Ok(list) => list,
            Err(error) if has_status(&error, 404) => return Ok(BTreeMap::new()),
            Err(error) => {
                return Err(TrackerError::TrackerReadFailed {
                    name: format!("{}/*", self.namespace),
                    message: describe_error(&error),
                });
            }
        };
        let mut trackers = BTreeMap::new();
        for config_map in list.items {
            let name = config_map.metadata.name.clone().unwrap_or_default();
            let record = parse(&name, &config_map)?;
            if let Some(app) = record.app.clone() {
                trackers.insert(app, record);
            }
        }
        Ok(trackers)
    }

    /// Stores the record: a create when it has no resourceVersion, otherwise a replace
    /// conditioned on it. On success the record carries the new resourceVersion.
    ///
    /// # Errors
    ///
    /// [`TrackerError::TrackerConflict`] when the tracker changed since it was read (409);
    /// [`TrackerError::TrackerWriteFailed`] for any other failure.
    pub async fn write(
        &self,
        app: &AppRef,
        record: &mut TrackerRecord,
    ) -> Result<(), TrackerError> {
        let name = tracker_name(app);
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    LABEL_TRACKER.to_owned(),
                    "true".to_owned(),
                )])),
                resource_version: record.resource_version.clone(),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(DATA_KEY.to_owned(), record.to_json())])),
            ..ConfigMap::default()
        };
        self.cluster.throttle().await;
        let written = match &record.resource_version {
            None => match self.api().create(&PostParams::default(), &config_map).await {
                // The tracker namespace does not exist yet: create it and retry once. Trying
                // the ConfigMap first keeps the common case free of cluster-scoped writes,
                // which a namespace-scoped agent may not be allowed.
                Err(error) if has_status(&error, 404) => {
                    self.ensure_namespace().await.map_err(|message| {
                        TrackerError::TrackerWriteFailed {
                            name: name.clone(),
                            message,
                        }
                    })?;
                    self.cluster.throttle().await;
                    self.api().create(&PostParams::default(), &config_map).await
                }
                other => other,
            },
            Some(_) => {
                self.api()
                    .replace(&name, &PostParams::default(), &config_map)
                    .await
            }
        };
        match written {
            Ok(written) => {
                record.resource_version = written.metadata.resource_version;
                Ok(())
            }
            Err(error) if has_status(&error, 409) => Err(TrackerError::TrackerConflict { name }),
            Err(error) => Err(TrackerError::TrackerWriteFailed {
                name,
                message: describe_error(&error),
            }),
        }
    }

    /// Deletes an app's tracker (once every object it listed is gone), conditioned on its
    /// resourceVersion.
    ///
    /// # Errors
    ///
    /// The delete failed for another reason than the tracker being gone already.
    pub async fn delete(&self, app: &AppRef, record: &TrackerRecord) -> Result<(), TrackerError> {
        let name = tracker_name(app);
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version: record.resource_version.clone(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        self.cluster.throttle().await;
        match self.api().delete(&name, &params).await {
            Ok(_) => Ok(()),
            Err(error) if has_status(&error, 404) => Ok(()),
            Err(error) if has_status(&error, 409) => Err(TrackerError::TrackerConflict { name }),
            Err(error) => Err(TrackerError::TrackerWriteFailed {
                name,
                message: describe_error(&error),
            }),
        }
    }

    /// Creates the tracker namespace when it does not exist (server-side apply, idempotent).
    async fn ensure_namespace(&self) -> Result<(), String> {
        let namespaces: Api<Namespace> = Api::all(self.cluster.client().clone());
        let namespace = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.namespace},
        });
        self.cluster.throttle().await;
        namespaces
            .patch(
                &self.namespace,
                &PatchParams::apply(crate::apply::FIELD_MANAGER),
                &Patch::Apply(&namespace),
            )
            .await
            .map(drop)
            .map_err(|error| describe_error(&error))
    }
}

fn parse(name: &str, config_map: &ConfigMap) -> Result<TrackerRecord, TrackerError> {
    let json = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(DATA_KEY))
        .ok_or_else(|| TrackerError::TrackerInvalid {
            name: name.to_owned(),
            message: format!("no {DATA_KEY} key"),
        })?;
    TrackerRecord::from_json(name, json, config_map.metadata.resource_version.clone()).map_err(
        |error| TrackerError::TrackerInvalid {
            name: name.to_owned(),
            message: error.source.to_string(),
        },
    )
}
