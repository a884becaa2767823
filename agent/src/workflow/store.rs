//! Persisting [`WorkflowState`] in the cluster: one ConfigMap `driftless-workflow.<app ns>.<app
//! name>` per app in the tracker namespace, next to the resource tracker, holding the state as
//! JSON under `workflow.json`. It is the same optimistic-concurrency ConfigMap store as the
//! trackers' ([`ConfigMapStore`]); this file only names and parses the records. This is the
//! only part of `workflow` with effects besides the driver; the scheduler never sees it.

use std::collections::BTreeMap;

use analyzer::AppRef;

use super::state::WorkflowState;
use crate::cluster::Cluster;
use crate::tracker_store::{ConfigMapStore, RecordError};

/// Key of the state in the ConfigMap's data.
pub const DATA_KEY: &str = "workflow.json";
/// Label on every workflow state ConfigMap, for listing them.
pub const LABEL_WORKFLOW: &str = "driftless.dev/workflow";

/// The workflow state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowStoreError {
    #[error("reading workflow state {name}: {message}")]
    WorkflowReadFailed { name: String, message: String },
    #[error("writing workflow state {name}: {message}")]
    WorkflowWriteFailed { name: String, message: String },
    #[error("workflow state {name} was changed by someone else meanwhile")]
    WorkflowConflict { name: String },
    #[error("workflow state {name} is not valid: {message}")]
    WorkflowStateInvalid { name: String, message: String },
}

/// A stored state and the resourceVersion it was read at (`None`: not stored yet).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredWorkflow {
    pub state: WorkflowState,
    pub resource_version: Option<String>,
}

/// The name of an app's workflow state ConfigMap. Names that would pass 253 characters become
/// the prefix and a hash of the tracker name, so distinct apps keep distinct names.
pub fn workflow_state_name(app: &AppRef) -> String {
    use sha2::Digest;
    let tracker = crate::tracker::tracker_name(app);
    let full = format!("driftless-workflow.{tracker}");
    if full.len() <= 253 {
        return full;
    }
    format!(
        "driftless-workflow.{}",
        hex::encode(sha2::Sha256::digest(tracker.as_bytes()))
    )
}

/// Workflow states of one cluster.
pub struct WorkflowStore<'a> {
    store: ConfigMapStore<'a>,
}

impl<'a> WorkflowStore<'a> {
    /// States in `namespace` (normally the tracker namespace).
    pub fn new(cluster: &'a Cluster, namespace: &str) -> WorkflowStore<'a> {
        WorkflowStore {
            store: ConfigMapStore::new(cluster, namespace, LABEL_WORKFLOW, DATA_KEY),
        }
    }

    /// The stored state of an app, if any.
    ///
    /// # Errors
    /// The read failed or the stored JSON does not parse.
    pub async fn read(&self, app: &AppRef) -> Result<Option<StoredWorkflow>, WorkflowStoreError> {
        let name = workflow_state_name(app);
        let stored = self.store.read(&name).await.map_err(|message| {
            WorkflowStoreError::WorkflowReadFailed {
                name: name.clone(),
                message,
            }
        })?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        if stored.text.is_empty() {
            return Err(WorkflowStoreError::WorkflowStateInvalid {
                name,
                message: format!("no {DATA_KEY} key"),
            });
        }
        let state: WorkflowState = serde_json::from_str(&stored.text).map_err(|error| {
            WorkflowStoreError::WorkflowStateInvalid {
                name: name.clone(),
                message: error.to_string(),
            }
        })?;
        Ok(Some(StoredWorkflow {
            state,
            resource_version: stored.resource_version,
        }))
    }

    /// Stores the state: a create when it was never stored, else a replace conditioned on the
    /// resourceVersion it was read at. On success `stored` carries the new resourceVersion.
    ///
    /// # Errors
    /// [`WorkflowStoreError::WorkflowConflict`] when it changed since it was read (409), else
    /// [`WorkflowStoreError::WorkflowWriteFailed`].
    pub async fn write(
        &self,
        app: &AppRef,
        stored: &mut StoredWorkflow,
    ) -> Result<(), WorkflowStoreError> {
        let name = workflow_state_name(app);
        let json = serde_json::to_string_pretty(&stored.state).map_err(|error| {
            WorkflowStoreError::WorkflowWriteFailed {
                name: name.clone(),
                message: error.to_string(),
            }
        })?;
        let annotations = BTreeMap::from([
            (
                "driftless.dev/app-namespace".to_owned(),
                app.namespace.clone(),
            ),
            ("driftless.dev/app-name".to_owned(), app.name.clone()),
        ]);
        match self
            .store
            .write(&name, json, annotations, stored.resource_version.as_deref())
            .await
        {
            Ok(resource_version) => {
                stored.resource_version = resource_version;
                Ok(())
            }
            Err(RecordError::Conflict) => Err(WorkflowStoreError::WorkflowConflict { name }),
            Err(RecordError::Failed(message)) => {
                Err(WorkflowStoreError::WorkflowWriteFailed { name, message })
            }
        }
    }
}
