//! Persisting [`WorkflowState`] in the cluster: one ConfigMap `driftless-workflow.<app ns>.<app
//! name>` per app in the tracker namespace, next to the resource tracker, holding the state as
//! JSON under `workflow.json`. Writes are conditioned on the read `resourceVersion`, so two
//! agents driving the same app cannot silently overwrite each other's progress. This is the
//! only part of `workflow` with effects; the scheduler never sees it.

use std::collections::BTreeMap;

use analyzer::AppRef;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use super::state::WorkflowState;
use crate::cluster::{Cluster, describe_error, has_status};

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
    cluster: &'a Cluster,
    namespace: String,
}

impl<'a> WorkflowStore<'a> {
    /// States in `namespace` (normally the tracker namespace).
    pub fn new(cluster: &'a Cluster, namespace: &str) -> WorkflowStore<'a> {
        WorkflowStore {
            cluster,
            namespace: namespace.to_owned(),
        }
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.cluster.client().clone(), &self.namespace)
    }

    /// The stored state of an app, if any.
    ///
    /// # Errors
    /// The read failed or the stored JSON does not parse.
    pub async fn read(&self, app: &AppRef) -> Result<Option<StoredWorkflow>, WorkflowStoreError> {
        let name = workflow_state_name(app);
        self.cluster.throttle().await;
        let config_map = match self.api().get_opt(&name).await {
            Ok(config_map) => config_map,
            Err(error) if has_status(&error, 404) => None,
            Err(error) => {
                return Err(WorkflowStoreError::WorkflowReadFailed {
                    name,
                    message: describe_error(&error),
                });
            }
        };
        let Some(config_map) = config_map else {
            return Ok(None);
        };
        let text = config_map
            .data
            .as_ref()
            .and_then(|data| data.get(DATA_KEY))
            .ok_or_else(|| WorkflowStoreError::WorkflowStateInvalid {
                name: name.clone(),
                message: format!("no {DATA_KEY} key"),
            })?;
        let state: WorkflowState = serde_json::from_str(text).map_err(|error| {
            WorkflowStoreError::WorkflowStateInvalid {
                name: name.clone(),
                message: error.to_string(),
            }
        })?;
        Ok(Some(StoredWorkflow {
            state,
            resource_version: config_map.metadata.resource_version,
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
        let write_failed = |message: String| WorkflowStoreError::WorkflowWriteFailed {
            name: name.clone(),
            message,
        };
        if stored.resource_version.is_none() {
            self.ensure_namespace().await.map_err(write_failed)?;
        }
        let json = serde_json::to_string_pretty(&stored.state)
            .map_err(|error| write_failed(error.to_string()))?;
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    LABEL_WORKFLOW.to_owned(),
                    "true".to_owned(),
                )])),
                annotations: Some(BTreeMap::from([
                    (
                        "driftless.dev/app-namespace".to_owned(),
                        app.namespace.clone(),
                    ),
                    ("driftless.dev/app-name".to_owned(), app.name.clone()),
                ])),
                resource_version: stored.resource_version.clone(),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(DATA_KEY.to_owned(), json)])),
            ..ConfigMap::default()
        };
        self.cluster.throttle().await;
        let written = match &stored.resource_version {
            None => self.api().create(&PostParams::default(), &config_map).await,
            Some(_) => {
                self.api()
                    .replace(&name, &PostParams::default(), &config_map)
                    .await
            }
        };
        match written {
            Ok(written) => {
                stored.resource_version = written.metadata.resource_version;
                Ok(())
            }
            Err(error) if has_status(&error, 409) => {
                Err(WorkflowStoreError::WorkflowConflict { name })
            }
            Err(error) => Err(write_failed(describe_error(&error))),
        }
    }

    /// Creates the namespace when missing (server-side apply, idempotent).
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
