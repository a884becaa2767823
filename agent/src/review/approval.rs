//! Approvals of held plans by digest, stored in the cluster so every agent replica sees them:
//! one ConfigMap per app in the tracker namespace, `driftless-plan-approval.<namespace>.<name>`,
//! written by `driftless approve APP --digest D`. An approval names one plan digest: it
//! covers that plan only, never a later one (a new commit, or a live object that moved again).

use std::collections::BTreeMap;

use analyzer::AppRef;
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::tracker_store::{ConfigMapStore, RecordError};

/// The label every approval ConfigMap carries.
pub const LABEL: &str = "driftless.dev/plan-approval";
const DATA_KEY: &str = "approval.json";

/// The ConfigMap of `app`'s approval.
pub fn record_name(app: &AppRef) -> String {
    format!("driftless-plan-approval.{}.{}", app.namespace, app.name)
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireApproval {
    digest: String,
}

/// The digest approved for `app`, if any.
///
/// # Errors
/// The read failed, or the stored approval is not valid (then nothing is approved).
pub async fn read(
    cluster: &Cluster,
    namespace: &str,
    app: &AppRef,
) -> Result<Option<String>, String> {
    let store = ConfigMapStore::new(cluster, namespace, LABEL, DATA_KEY);
    let Some(stored) = store.read(&record_name(app)).await? else {
        return Ok(None);
    };
    let wire: WireApproval = serde_json::from_str(&stored.text)
        .map_err(|error| format!("approval {} is not valid: {error}", record_name(app)))?;
    Ok(Some(wire.digest))
}

/// Stores the approval of `app`'s plan with `digest`, replacing an earlier one.
///
/// # Errors
/// The write failed (a conflict: someone approved meanwhile; run again).
pub async fn write(
    cluster: &Cluster,
    namespace: &str,
    app: &AppRef,
    digest: &str,
) -> Result<(), String> {
    let store = ConfigMapStore::new(cluster, namespace, LABEL, DATA_KEY);
    let name = record_name(app);
    let current = store.read(&name).await?;
    let text = serde_json::to_string(&WireApproval {
        digest: digest.trim().to_ascii_lowercase(),
    })
    .map_err(|error| error.to_string())?;
    let resource_version = current.and_then(|stored| stored.resource_version);
    match store
        .write(&name, text, BTreeMap::new(), resource_version.as_deref())
        .await
    {
        Ok(_) => Ok(()),
        Err(RecordError::Conflict) => Err(format!(
            "approval {name} was changed by someone else meanwhile; run the command again"
        )),
        Err(RecordError::Failed(message)) => Err(message),
    }
}
