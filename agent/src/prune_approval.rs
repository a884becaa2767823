//! Approvals of prunes over a source's budget, stored in the cluster so the agent sees them:
//! one ConfigMap per source in the tracker namespace, `driftless-prune-approval.<source>`,
//! written by `driftless approve-prune` and read by the agent before each deploy. An approval
//! names one commit and the most objects it lets that commit's pass prune
//! ([`Approval::Revision`]): it never covers a later commit, nor a larger deletion.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::prune_guard::Approval;
use crate::tracker_store::{ConfigMapStore, RecordError};

/// The label every approval ConfigMap carries.
pub const LABEL: &str = "driftless.dev/prune-approval";
/// The ConfigMap data key holding the approval.
const DATA_KEY: &str = "approval.json";

/// The ConfigMap of a source's approval.
pub fn record_name(source: &str) -> String {
    format!("driftless-prune-approval.{source}")
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireApproval {
    revision: String,
    objects: usize,
}

/// The approval stored for `source`; [`Approval::None`] when there is none.
///
/// # Errors
/// The read failed, or the stored approval is not valid (then nothing is approved).
pub async fn read(cluster: &Cluster, namespace: &str, source: &str) -> Result<Approval, String> {
    let store = ConfigMapStore::new(cluster, namespace, LABEL, DATA_KEY);
    let Some(stored) = store.read(&record_name(source)).await? else {
        return Ok(Approval::None);
    };
    let wire: WireApproval = serde_json::from_str(&stored.text).map_err(|error| {
        format!(
            "prune approval {} is not valid: {error}",
            record_name(source)
        )
    })?;
    Ok(Approval::Revision {
        revision: wire.revision,
        objects: wire.objects,
    })
}

/// Stores the approval of up to `objects` prunes in the pass of `revision` of `source`,
/// replacing an earlier one.
///
/// # Errors
/// The write failed (a conflict: someone approved meanwhile; run again).
pub async fn write(
    cluster: &Cluster,
    namespace: &str,
    source: &str,
    revision: &str,
    objects: usize,
) -> Result<(), String> {
    let store = ConfigMapStore::new(cluster, namespace, LABEL, DATA_KEY);
    let name = record_name(source);
    let current = store.read(&name).await?;
    let text = serde_json::to_string(&WireApproval {
        revision: revision.to_owned(),
        objects,
    })
    .map_err(|error| error.to_string())?;
    let resource_version = current.and_then(|stored| stored.resource_version);
    match store
        .write(&name, text, BTreeMap::new(), resource_version.as_deref())
        .await
    {
        Ok(_) => Ok(()),
        Err(RecordError::Conflict) => Err(format!(
            "prune approval {name} was changed by someone else meanwhile; run the command again"
        )),
        Err(RecordError::Failed(message)) => Err(message),
    }
}
