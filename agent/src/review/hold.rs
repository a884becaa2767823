//! Per-app holds: a hold pauses apply and drift correction of one app until it expires or is
//! released; previews, plans and drift reports go on.
//!
//! Storage: one ConfigMap per held app in the tracker namespace,
//! `driftless-hold.<namespace>.<name>`, labelled [`LABEL`]. The tracker namespace because every
//! agent replica already reads it (its RBAC covers ConfigMaps there, its trackers live there)
//! and a ConfigMap because every cluster serves it with optimistic concurrency: a hold set on
//! one replica is seen by all at their next pass: one GET per app for a pass over a few apps
//! with none gone from Git (a commit), else one LIST (a drift check, a first deploy, a pass
//! that may prune: a held app's prune waits too). Expiry is a time in the
//! record: an expired hold is ignored, so it lifts itself without anyone deleting it.
//!
//! Fail closed: when the holds cannot be read, every app counts as held for that pass.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::AppRef;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::forge::StatusState;
use crate::metrics::Metrics;
use crate::tracker_store::{ConfigMapStore, RecordError, StoredRecord};

/// The label every hold ConfigMap carries.
pub const LABEL: &str = "driftless.dev/hold";
const DATA_KEY: &str = "hold.json";

/// One app's hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub app: AppRef,
    pub reason: String,
    pub until: DateTime<Utc>,
    /// Who set it (`driftless hold`, `reviewed-plan`).
    pub set_by: String,
}

impl Hold {
    /// A hold of `app` from now for `duration`.
    ///
    /// # Errors
    /// The duration is too long to add to the clock.
    pub fn expiring_in(
        app: AppRef,
        reason: &str,
        duration: std::time::Duration,
        set_by: &str,
    ) -> Result<Hold, String> {
        let duration = chrono::Duration::from_std(duration)
            .map_err(|_| "the hold's duration is too long".to_owned())?;
        let until = Utc::now()
            .checked_add_signed(duration)
            .ok_or_else(|| "the hold's duration is too long".to_owned())?;
        Ok(Hold {
            app,
            reason: reason.to_owned(),
            until,
            set_by: set_by.to_owned(),
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireHold {
    namespace: String,
    name: String,
    reason: String,
    until: String,
    set_by: String,
}

/// The holds in force for one pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holds {
    /// Unexpired holds, by app.
    pub active: BTreeMap<AppRef, Hold>,
    /// Why the holds could not be read: then every app is held.
    pub unreadable: Option<String>,
}

impl Holds {
    /// Why `app` is held, or `None`.
    pub fn reason(&self, app: &AppRef) -> Option<String> {
        if let Some(error) = &self.unreadable {
            return Some(format!("holds could not be read ({error}); retrying"));
        }
        self.active.get(app).map(|hold| {
            format!(
                "held until {} by {}: {}",
                hold.until.format("%Y-%m-%dT%H:%M:%SZ"),
                hold.set_by,
                hold.reason
            )
        })
    }

    /// Whether any app is held.
    pub fn any(&self) -> bool {
        self.unreadable.is_some() || !self.active.is_empty()
    }
}

/// The ConfigMap name of `app`'s hold.
pub fn record_name(app: &AppRef) -> String {
    format!("driftless-hold.{}.{}", app.namespace, app.name)
}

/// A pass over at most this many apps reads their holds one by one; a larger one lists them.
const READ_ONE_BY_ONE: usize = 20;

/// The unexpired holds at `now` of `apps`, the apps a pass may apply (`None`: every app). One
/// GET per app when they are few, so a commit that changed a few apps does not LIST the
/// tracker namespace (which also holds a tracker per app: 10,000 ConfigMaps for 10,000 apps);
/// else [`read`]. Holds of other apps may be left out. The GETs bypass the plan's prefetched
/// snapshot: a hold set since must be seen. A failed read or a record that does not parse
/// makes [`Holds::unreadable`] say why.
pub async fn read_for(
    cluster: &Cluster,
    namespace: &str,
    apps: Option<&[&AppRef]>,
    now: DateTime<Utc>,
) -> Holds {
    let Some(apps) = apps.filter(|apps| apps.len() <= READ_ONE_BY_ONE) else {
        return read(cluster, namespace, now).await;
    };
    let store = ConfigMapStore::new(cluster, namespace, LABEL, DATA_KEY);
    let mut records = Vec::new();
    for app in apps {
        match store.read_fresh(&record_name(app)).await {
            Ok(record) => records.extend(record),
            Err(error) => {
                return Holds {
                    active: BTreeMap::new(),
                    unreadable: Some(error),
                };
            }
        }
    }
    unexpired(records, now)
}

/// The unexpired holds at `now` (one LIST). A failed read or a record that does not parse
/// makes [`Holds::unreadable`] say why.
async fn read(cluster: &Cluster, namespace: &str, now: DateTime<Utc>) -> Holds {
    let store = ConfigMapStore::new(cluster, namespace, LABEL, DATA_KEY);
    let records = match store.list().await {
        Ok(records) => records,
        Err(error) => {
            return Holds {
                active: BTreeMap::new(),
                unreadable: Some(error),
            };
        }
    };
    unexpired(records, now)
}

/// The holds of `records` unexpired at `now`.
fn unexpired(records: Vec<StoredRecord>, now: DateTime<Utc>) -> Holds {
    let mut holds = Holds::default();
    for record in records {
        match parse(&record.text) {
            Ok(hold) if hold.until > now => {
                holds.active.insert(hold.app.clone(), hold);
            }
            Ok(_) => {}
            Err(error) => {
                holds.unreadable = Some(format!("hold {} is not valid: {error}", record.name));
            }
        }
    }
    holds
}

/// Stores `hold`, replacing an earlier hold of the same app.
///
/// # Errors
/// The write failed (a conflict: someone changed the hold meanwhile; run again).
pub async fn write(cluster: &Cluster, namespace: &str, hold: &Hold) -> Result<(), String> {
    let store = ConfigMapStore::new(cluster, namespace, LABEL, DATA_KEY);
    let name = record_name(&hold.app);
    let current = store.read(&name).await?;
    let text = serde_json::to_string(&WireHold {
        namespace: hold.app.namespace.clone(),
        name: hold.app.name.clone(),
        reason: hold.reason.clone(),
        until: hold.until.to_rfc3339(),
        set_by: hold.set_by.clone(),
    })
    .map_err(|error| error.to_string())?;
    let resource_version = current.and_then(|stored| stored.resource_version);
    match store
        .write(&name, text, BTreeMap::new(), resource_version.as_deref())
        .await
    {
        Ok(_) => Ok(()),
        Err(RecordError::Conflict) => Err(format!(
            "hold {name} was changed by someone else meanwhile; run the command again"
        )),
        Err(RecordError::Failed(message)) => Err(message),
    }
}

/// Deletes `app`'s hold; no hold is fine. Returns whether there was one.
///
/// # Errors
/// The delete failed.
pub async fn release(cluster: &Cluster, namespace: &str, app: &AppRef) -> Result<bool, String> {
    let store = ConfigMapStore::new(cluster, namespace, LABEL, DATA_KEY);
    let name = record_name(app);
    let Some(current) = store.read(&name).await? else {
        return Ok(false);
    };
    match store
        .delete(&name, current.resource_version.as_deref())
        .await
    {
        Ok(()) => Ok(true),
        Err(RecordError::Conflict) => Err(format!(
            "hold {name} was changed by someone else meanwhile; run the command again"
        )),
        Err(RecordError::Failed(message)) => Err(message),
    }
}

/// The drift status of a correction: failed for the apps whose correction failed; not
/// corrected while some drifted app is held; else corrected.
pub fn drift_corrected(
    results: &BTreeMap<AppRef, (StatusState, String)>,
    held: &BTreeSet<AppRef>,
    drifted: &[String],
) -> (StatusState, String) {
    let still_failing: Vec<String> = results
        .iter()
        .filter(|(_, (state, _))| !matches!(state, StatusState::Success | StatusState::Pending))
        .map(|(app, _)| app.to_string())
        .collect();
    let held_drifted: Vec<String> = held
        .iter()
        .map(ToString::to_string)
        .filter(|app| drifted.contains(app))
        .collect();
    if !held_drifted.is_empty() && still_failing.is_empty() {
        let note = format!(
            "drift not corrected in held app(s): {}",
            held_drifted.join(", ")
        );
        tracing::info!("{note}");
        (StatusState::Failure, note)
    } else if still_failing.is_empty() {
        (
            StatusState::Success,
            format!(
                "corrected drift in {} app(s): {}",
                drifted.len(),
                drifted.join(", ")
            ),
        )
    } else {
        (
            StatusState::Failure,
            format!("correcting drift failed for: {}", still_failing.join(", ")),
        )
    }
}

/// Gives each held app of `results` its hold as status (pending: it waits, nothing failed)
/// and sets every app's `driftless_app_held` gauge. Returns the held apps.
pub fn mark_held(
    results: &mut BTreeMap<AppRef, (StatusState, String)>,
    held: &[AppRef],
    holds: &Holds,
    metrics: &Metrics,
    source: &str,
) -> BTreeSet<AppRef> {
    for (app, result) in results.iter_mut() {
        let reason = held.contains(app).then(|| holds.reason(app)).flatten();
        metrics.set_held(source, &app.namespace, &app.name, reason.is_some());
        if let Some(reason) = reason {
            *result = (StatusState::Pending, format!("not applied: {reason}"));
        }
    }
    held.iter().cloned().collect()
}

/// A sentence naming the held apps, for summaries (`""` when none).
pub fn summary_note(held: &BTreeSet<AppRef>) -> String {
    if held.is_empty() {
        return String::new();
    }
    let names: Vec<String> = held.iter().map(ToString::to_string).collect();
    format!("; {} app(s) held: {}", held.len(), names.join(", "))
}

/// The apps of `held` whose hold `holds` no longer has (expired or released).
pub fn lifted(held: &BTreeSet<AppRef>, holds: &Holds) -> Vec<AppRef> {
    held.iter()
        .filter(|app| holds.reason(app).is_none())
        .cloned()
        .collect()
}

fn parse(text: &str) -> Result<Hold, String> {
    let wire: WireHold = serde_json::from_str(text).map_err(|error| error.to_string())?;
    let until = DateTime::parse_from_rfc3339(&wire.until)
        .map_err(|error| format!("until: {error}"))?
        .with_timezone(&Utc);
    Ok(Hold {
        app: AppRef {
            namespace: wire.namespace,
            name: wire.name,
        },
        reason: wire.reason,
        until,
        set_by: wire.set_by,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_name_their_expiry_and_reason_and_an_unreadable_store_holds_all() {
        let app = AppRef {
            namespace: "team".into(),
            name: "web".into(),
        };
        let other = AppRef {
            namespace: "team".into(),
            name: "api".into(),
        };
        let until = DateTime::parse_from_rfc3339("2026-01-01T10:00:00Z")
            .expect("valid time")
            .with_timezone(&Utc);
        let mut holds = Holds::default();
        holds.active.insert(
            app.clone(),
            Hold {
                app: app.clone(),
                reason: "incident 42".into(),
                until,
                set_by: "driftless hold".into(),
            },
        );
        assert_eq!(
            holds.reason(&app).as_deref(),
            Some("held until 2026-01-01T10:00:00Z by driftless hold: incident 42")
        );
        assert_eq!(holds.reason(&other), None);
        let held = BTreeSet::from([app.clone(), other.clone()]);
        assert_eq!(lifted(&held, &holds), vec![other.clone()]);
        holds.unreadable = Some("forbidden".into());
        assert!(holds.reason(&other).is_some());
    }

    #[test]
    fn records_round_trip() {
        let text = r#"{"namespace":"team","name":"web","reason":"r","until":"2026-01-01T10:00:00+00:00","setBy":"x"}"#;
        let hold = parse(text).expect("valid hold");
        assert_eq!(hold.app.name, "web");
        assert!(parse(r#"{"namespace":"team"}"#).is_err());
    }
}
