//! Reading and writing small JSON records in ConfigMaps, with optimistic concurrency: the one
//! store behind both the resource trackers (the storage decided in `tracker`) and the workflow
//! states (`workflow::store`). Each record is one ConfigMap in the tracker namespace, its JSON
//! under one data key, and every write is conditioned on the resourceVersion it was read at,
//! so two agents driving the same app cannot silently overwrite each other. The writes
//! themselves are the cluster writer's (`writer::write_record`, `writer::delete_record`).

use std::collections::BTreeMap;
use std::sync::PoisonError;

use analyzer::AppRef;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta};

use crate::cluster::{Cluster, describe_error, has_status};
use crate::tracker::{DATA_KEY, LABEL_TRACKER, TrackerRecord, tracker_name};

/// Records per LIST page: 10,000 trackers are ~10 MB of JSON, which one response should not hold.
const LIST_PAGE: u32 = 500;

/// Why a ConfigMap record could not be read or written (the callers add what the record is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// The API call failed; the message says why.
    Failed(String),
    /// The record changed since it was read (409).
    Conflict,
}

/// One stored record: its JSON text and the resourceVersion it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub name: String,
    pub text: String,
    pub resource_version: Option<String>,
    pub annotations: BTreeMap<String, String>,
}

/// The JSON-in-ConfigMap records of one kind (one label, one data key) in one namespace.
pub struct ConfigMapStore<'a> {
    cluster: &'a Cluster,
    namespace: String,
    /// The label (value `"true"`) every record of this kind carries, for listing them.
    label: &'static str,
    data_key: &'static str,
}

impl<'a> ConfigMapStore<'a> {
    pub fn new(
        cluster: &'a Cluster,
        namespace: &str,
        label: &'static str,
        data_key: &'static str,
    ) -> ConfigMapStore<'a> {
        ConfigMapStore {
            cluster,
            namespace: namespace.to_owned(),
            label,
            data_key,
        }
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.cluster.client().clone(), &self.namespace)
    }

    /// The record `name`; `None` when it does not exist (nor its namespace). A ConfigMap
    /// without the data key comes back with an empty text, which the caller's parse reports.
    ///
    /// # Errors
    /// The read failed.
    pub async fn read(&self, name: &str) -> Result<Option<StoredRecord>, String> {
        // A plan over many apps lists the records in bulk first (`Cluster::prefetch`).
        let object_ref = self.object_ref(name);
        if let Some(prefetched) = self.cluster.take_prefetched(&object_ref) {
            let parsed = prefetched
                .map(serde_json::from_value::<ConfigMap>)
                .transpose();
            if let Ok(config_map) = parsed {
                return Ok(config_map.map(|config_map| self.record(config_map)));
            }
        }
        self.read_fresh(name).await
    }

    /// The record `name` as the cluster has it now (one GET), never from a plan's prefetched
    /// snapshot: for records another process may have written since that snapshot (holds).
    ///
    /// # Errors
    /// The read failed.
    pub async fn read_fresh(&self, name: &str) -> Result<Option<StoredRecord>, String> {
        self.cluster.throttle().await;
        match self.api().get_opt(name).await {
            Ok(config_map) => Ok(config_map.map(|config_map| self.record(config_map))),
            // The namespace itself not existing yet means no record either.
            Err(error) if has_status(&error, 404) => Ok(None),
            Err(error) => Err(describe_error(&error)),
        }
    }

    /// Every record of this kind in the namespace, in name order.
    ///
    /// # Errors
    /// The list failed.
    pub async fn list(&self) -> Result<Vec<StoredRecord>, String> {
        let mut params = ListParams::default()
            .labels(&format!("{}=true", self.label))
            .limit(LIST_PAGE);
        let mut records = Vec::new();
        loop {
            self.cluster.throttle().await;
            let page = match self.api().list(&params).await {
                Ok(page) => page,
                Err(error) if has_status(&error, 404) => return Ok(Vec::new()),
                Err(error) => return Err(describe_error(&error)),
            };
            records.extend(
                page.items
                    .into_iter()
                    .map(|config_map| self.record(config_map)),
            );
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(records)
    }

    fn record(&self, config_map: ConfigMap) -> StoredRecord {
        StoredRecord {
            name: config_map.metadata.name.clone().unwrap_or_default(),
            text: config_map
                .data
                .as_ref()
                .and_then(|data| data.get(self.data_key))
                .cloned()
                .unwrap_or_default(),
            resource_version: config_map.metadata.resource_version,
            annotations: config_map.metadata.annotations.unwrap_or_default(),
        }
    }

    /// Stores `text` as record `name`: a create when `resource_version` is `None`, else a
    /// replace conditioned on it. Returns the new resourceVersion.
    ///
    /// # Errors
    /// [`RecordError::Conflict`] when it changed since it was read, else
    /// [`RecordError::Failed`].
    pub async fn write(
        &self,
        name: &str,
        text: String,
        annotations: BTreeMap<String, String>,
        resource_version: Option<&str>,
    ) -> Result<Option<String>, RecordError> {
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(self.label.to_owned(), "true".to_owned())])),
                annotations: (!annotations.is_empty()).then_some(annotations),
                resource_version: resource_version.map(str::to_owned),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(self.data_key.to_owned(), text)])),
            ..ConfigMap::default()
        };
        let written = crate::writer::write_record(
            self.cluster,
            &self.namespace,
            &config_map,
            resource_version,
        )
        .await;
        match written {
            Ok(written) => Ok(written.metadata.resource_version),
            Err(error) if has_status(&error, 409) => Err(RecordError::Conflict),
            Err(error) => Err(RecordError::Failed(describe_error(&error))),
        }
    }

    /// Deletes record `name`, conditioned on `resource_version`; a record already gone is fine.
    ///
    /// # Errors
    /// The delete failed for another reason, or the record changed meanwhile.
    pub async fn delete(
        &self,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), RecordError> {
        let deleted =
            crate::writer::delete_record(self.cluster, &self.namespace, name, resource_version)
                .await;
        match deleted {
            Ok(()) => Ok(()),
            Err(error) if has_status(&error, 409) => Err(RecordError::Conflict),
            Err(error) => Err(RecordError::Failed(describe_error(&error))),
        }
    }

    fn object_ref(&self, name: &str) -> crate::plan::ObjectRef {
        crate::plan::ObjectRef {
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            namespace: Some(self.namespace.clone()),
            name: name.to_owned(),
        }
    }

    /// The records of this kind the cluster's watch cache may serve, in name order; `None`
    /// without a synced cache. Records with an own write the watch has not shown yet are left
    /// out, so a record missing here must still be read from the cluster.
    pub async fn list_cached(&self) -> Option<Vec<StoredRecord>> {
        let objects = self
            .cluster
            .cached_collection("v1", "ConfigMap", Some(&self.namespace))
            .await?;
        let mut records: Vec<StoredRecord> = objects
            .into_iter()
            .filter_map(|object| serde_json::from_value::<ConfigMap>(object).ok())
            .filter(|config_map| {
                config_map
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(self.label))
                    .is_some_and(|value| value == "true")
            })
            .map(|config_map| self.record(config_map))
            .collect();
        records.sort_by(|a, b| a.name.cmp(&b.name));
        Some(records)
    }
}

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
    store: ConfigMapStore<'a>,
    /// Every tracker by name, as [`TrackerStore::list_and_keep`] listed them: reads answer from
    /// it instead of asking the cluster again. A read takes its record out (`None` left behind):
    /// a plan reads each app's tracker once, and the texts of every tracker held through the
    /// whole plan were ~12 MB at 10,000 apps. A tracker read again after that is
    /// read from the cluster.
    listed: Option<std::sync::Mutex<BTreeMap<String, Option<StoredRecord>>>>,
    /// The listed trackers came from the watch cache, which leaves out trackers with a write it
    /// has not shown yet: a tracker not listed is then read from the cluster, not taken as absent.
    listed_partial: bool,
}

impl<'a> TrackerStore<'a> {
    pub fn new(cluster: &'a Cluster, namespace: &str) -> TrackerStore<'a> {
        TrackerStore {
            store: ConfigMapStore::new(cluster, namespace, LABEL_TRACKER, DATA_KEY),
            listed: None,
            listed_partial: false,
        }
    }

    /// True once [`TrackerStore::list_and_keep`] listed the trackers: reads need no request.
    pub fn has_listed(&self) -> bool {
        self.listed.is_some()
    }

    /// The tracker of an app; `None` when it has none yet.
    ///
    /// # Errors
    ///
    /// The read failed, or the stored record does not parse.
    pub async fn read(&self, app: &AppRef) -> Result<Option<TrackerRecord>, TrackerError> {
        let name = tracker_name(app);
        if let Some(listed) = &self.listed {
            let taken = {
                let mut listed = listed.lock().unwrap_or_else(PoisonError::into_inner);
                match listed.get_mut(&name) {
                    Some(slot) => slot.take(),
                    // Listed moments ago by this plan: a tracker not in a complete list does
                    // not exist.
                    None if !self.listed_partial => return Ok(None),
                    None => None,
                }
            };
            if let Some(stored) = taken {
                return parse(&stored).map(Some);
            }
        }
        let stored =
            self.store
                .read(&name)
                .await
                .map_err(|message| TrackerError::TrackerReadFailed {
                    name: name.clone(),
                    message,
                })?;
        stored.map(|stored| parse(&stored)).transpose()
    }

    /// [`TrackerStore::list`], keeping what it read so the reads of this store that follow
    /// take their tracker from it: a plan that looks for removed apps lists every tracker
    /// anyway, and reading them again (one LIST of the namespace, or a GET per app) doubled
    /// its tracker traffic. An unreadable list keeps nothing; reads then ask the cluster.
    ///
    /// # Errors
    ///
    /// The list failed, or a stored record does not parse (the records are kept all the same:
    /// the read of the app whose tracker is invalid fails alone).
    pub async fn list_and_keep(&mut self) -> Result<BTreeMap<AppRef, TrackerRecord>, TrackerError> {
        // From the watch cache when it is synced: no request. Trackers it leaves out (written
        // by us, not shown by the watch yet) are not orphan candidates this time, and their
        // apps' reads ask the cluster.
        let (records, partial) = match self.store.list_cached().await {
            Some(records) => (records, true),
            None => (self.list_records().await?, false),
        };
        self.listed_partial = partial;
        let trackers = by_app(&records);
        self.listed = Some(std::sync::Mutex::new(
            records
                .into_iter()
                .map(|record| (record.name.clone(), Some(record)))
                .collect(),
        ));
        trackers
    }

    /// Every tracker in the namespace, by app.
    ///
    /// # Errors
    ///
    /// The list failed, or a stored record does not parse.
    pub async fn list(&self) -> Result<BTreeMap<AppRef, TrackerRecord>, TrackerError> {
        let records = self.list_records().await?;
        by_app(&records)
    }

    /// Every stored tracker record in the namespace, unparsed.
    async fn list_records(&self) -> Result<Vec<StoredRecord>, TrackerError> {
        self.store
            .list()
            .await
            .map_err(|message| TrackerError::TrackerReadFailed {
                name: "*".to_owned(),
                message,
            })
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
        let written = self
            .store
            .write(
                &name,
                record.to_json(),
                BTreeMap::new(),
                record.resource_version.as_deref(),
            )
            .await;
        match written {
            Ok(resource_version) => {
                record.resource_version = resource_version;
                Ok(())
            }
            Err(RecordError::Conflict) => Err(TrackerError::TrackerConflict { name }),
            Err(RecordError::Failed(message)) => {
                Err(TrackerError::TrackerWriteFailed { name, message })
            }
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
        match self
            .store
            .delete(&name, record.resource_version.as_deref())
            .await
        {
            Ok(()) => Ok(()),
            Err(RecordError::Conflict) => Err(TrackerError::TrackerConflict { name }),
            Err(RecordError::Failed(message)) => {
                Err(TrackerError::TrackerWriteFailed { name, message })
            }
        }
    }
}

/// Parsed trackers by the app they record; the first invalid one is the error.
fn by_app(records: &[StoredRecord]) -> Result<BTreeMap<AppRef, TrackerRecord>, TrackerError> {
    let mut trackers = BTreeMap::new();
    for stored in records {
        let record = parse(stored)?;
        if let Some(app) = record.app.clone() {
            trackers.insert(app, record);
        }
    }
    Ok(trackers)
}

fn parse(stored: &StoredRecord) -> Result<TrackerRecord, TrackerError> {
    if stored.text.is_empty() {
        return Err(TrackerError::TrackerInvalid {
            name: stored.name.clone(),
            message: format!("no {DATA_KEY} key"),
        });
    }
    TrackerRecord::from_json(&stored.name, &stored.text, stored.resource_version.clone()).map_err(
        |error| TrackerError::TrackerInvalid {
            name: stored.name.clone(),
            message: error.source.to_string(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &str) -> AppRef {
        AppRef {
            namespace: "team".to_owned(),
            name: name.to_owned(),
        }
    }

    #[tokio::test]
    async fn a_listed_tracker_answers_one_read_then_the_cluster_does() {
        let cluster = Cluster::offline();
        let mut store = TrackerStore::new(&cluster, crate::tracker::DEFAULT_NAMESPACE);
        let shop = app("shop");
        let record = TrackerRecord::new(&shop);
        let stored = StoredRecord {
            name: tracker_name(&shop),
            text: record.to_json(),
            resource_version: Some("7".to_owned()),
            annotations: BTreeMap::new(),
        };
        store.listed = Some(std::sync::Mutex::new(BTreeMap::from([(
            stored.name.clone(),
            Some(stored),
        )])));

        let read = store.read(&shop).await.unwrap().unwrap();
        assert_eq!(read.app, Some(shop.clone()));
        assert_eq!(read.resource_version.as_deref(), Some("7"));
        // A complete list proves the absence of the trackers it does not hold.
        assert_eq!(store.read(&app("other")).await.unwrap(), None);
        assert_eq!(cluster.requests(), 0);

        // The listed text was taken by the first read: a second read asks the cluster.
        assert!(store.read(&shop).await.is_err());
        assert_eq!(cluster.requests(), 1);
    }
}
