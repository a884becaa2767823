//! The resource tracker: the cluster-side record of which objects an app owns.
//!
//! # Storage
//!
//! One ConfigMap per app in the agent's namespace (`driftless-system` by default), named
//! `<app namespace>.<app name>` (see [`tracker_name`]), labelled `driftless.dev/tracker: "true"`
//! and holding the record as JSON under the key `tracker.json`. A ConfigMap rather than a CRD of
//! our own: it needs no CRD installed before the first apply (a tracker CRD would itself need a
//! tracker), every cluster serves it, its `resourceVersion` gives optimistic concurrency for
//! free, and RBAC can be scoped to one namespace. One namespace for all trackers rather than the
//! app's namespace, because deleting an app namespace must not lose the record of the app's
//! cluster-scoped objects (KubeVela's ResourceTracker is cluster-scoped for the same reason), and
//! because finding apps that disappeared from Git is then a single labelled list.
//!
//! # Invariants
//!
//! 1. **Marks travel with the object.** Every applied body carries `app.oam.dev/name`,
//!    `app.oam.dev/namespace` and `driftless.dev/owner: <ns>/<app>` (`ownership::mark`), so an
//!    object we created never exists without our marks.
//! 2. **Intent before effect (write-ahead).** Before an apply pass touches any object, the tracker
//!    lists every object of the pass, new ones as [`EntryState::Pending`]. A crash at any point
//!    after that leaves every object we may have created listed, so no crash orphans an object.
//! 3. **Owned only once applied.** An entry becomes [`EntryState::Applied`] (with the desired hash
//!    and the resourceVersion the apiserver returned) only after its apply call succeeded. A failed
//!    apply never records the object as applied.
//! 4. **A prune needs both proofs.** An object is deleted only when the tracker lists it *and* the
//!    live object still carries our owner annotation naming this app; the delete is sent with a
//!    `uid` + `resourceVersion` precondition, so an object changed or replaced meanwhile is never
//!    deleted. An object without our marks is dropped from the tracker, never deleted.
//! 5. **Entries leave last.** An entry is removed only after its object is confirmed gone (404),
//!    or found without our marks, or, for a pending entry, never created.
//! 6. **Optimistic concurrency.** Every tracker write is a replace (or create) conditioned on the
//!    resourceVersion read; a 409 stops that app's apply (another agent is working on it).
//! 7. **No tracker, no prune.** A missing tracker means nothing is owned yet; ownership for
//!    deletion is never inferred from labels alone (labels only allow re-adoption for writing).
//! 8. **Errors stop the prune.** When any object of an app fails to apply, the app's apply stops
//!    and no prune runs for it in that pass.
//!
//! A rerun after a crash converges: pending entries whose object exists with our marks are
//! adopted (the plan sees them as ours), pending entries whose object does not exist are dropped,
//! and objects listed but no longer rendered are pruned under invariant 4.

use std::collections::BTreeMap;

use analyzer::AppRef;
use serde::{Deserialize, Serialize};

use crate::plan::ObjectRef;
use crate::policy::{GcStrategy, ObjectFacts, Propagation};

/// The ConfigMap data key holding the record.
pub const DATA_KEY: &str = "tracker.json";
/// The label every tracker ConfigMap carries, for listing them.
pub const LABEL_TRACKER: &str = "driftless.dev/tracker";
/// The default namespace of the tracker ConfigMaps.
pub const DEFAULT_NAMESPACE: &str = "driftless-system";

/// What the tracker knows about one app.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrackerRecord {
    pub app: Option<AppRef>,
    /// Which source (repository) last applied the app; apps that vanish from *this* source are
    /// garbage collected, apps of other sources are left alone.
    pub source: Option<String>,
    /// The git revision of the last apply pass that changed the app (an unchanged pass writes
    /// nothing, so it costs no tracker write).
    pub revision: Option<String>,
    /// Sorted by object reference.
    pub entries: BTreeMap<ObjectRef, TrackedEntry>,
    /// The ConfigMap's resourceVersion when read; `None` when no tracker is stored yet.
    pub resource_version: Option<String>,
}

/// One tracked object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedEntry {
    pub state: EntryState,
    /// SHA-256 of the desired object last applied (hex).
    pub hash: String,
    /// The object's resourceVersion returned by the apply.
    pub resource_version: Option<String>,
    pub component: String,
    pub component_type: Option<String>,
    pub trait_type: Option<String>,
    /// The garbage-collection strategy and propagation in force when it was applied, used when
    /// the whole app is deleted (its policies are gone with it).
    pub gc: GcStrategy,
    pub propagation: Propagation,
}

/// Whether an object was really applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// About to be applied (write-ahead); may or may not exist.
    Pending,
    /// Applied successfully.
    Applied,
}

/// A tracker payload that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("resource tracker {name} is not valid: {source}")]
pub struct TrackerParseError {
    pub name: String,
    #[source]
    pub source: serde_json::Error,
}

impl TrackedEntry {
    /// The facts garbage-collection rules select on.
    pub fn facts<'a>(&'a self, object: &'a ObjectRef) -> ObjectFacts<'a> {
        ObjectFacts {
            component: &self.component,
            component_type: self.component_type.as_deref(),
            trait_type: self.trait_type.as_deref(),
            kind: &object.kind,
            name: &object.name,
        }
    }
}

impl TrackerRecord {
    /// An empty record for an app.
    pub fn new(app: &AppRef) -> TrackerRecord {
        TrackerRecord {
            app: Some(app.clone()),
            ..TrackerRecord::default()
        }
    }

    /// The applied entry of an object, if any.
    pub fn applied(&self, object: &ObjectRef) -> Option<&TrackedEntry> {
        self.entries
            .get(object)
            .filter(|entry| entry.state == EntryState::Applied)
    }

    /// The JSON payload stored under [`DATA_KEY`]. Deterministic: entries are sorted.
    pub fn to_json(&self) -> String {
        let wire = WireRecord {
            app: self.app.as_ref().map(|app| WireApp {
                namespace: app.namespace.clone(),
                name: app.name.clone(),
            }),
            source: self.source.clone(),
            revision: self.revision.clone(),
            objects: self
                .entries
                .iter()
                .map(|(object, entry)| WireEntry {
                    api_version: object.api_version.clone(),
                    kind: object.kind.clone(),
                    namespace: object.namespace.clone(),
                    name: object.name.clone(),
                    state: match entry.state {
                        EntryState::Pending => "pending",
                        EntryState::Applied => "applied",
                    }
                    .to_owned(),
                    hash: entry.hash.clone(),
                    resource_version: entry.resource_version.clone(),
                    component: entry.component.clone(),
                    component_type: entry.component_type.clone(),
                    trait_type: entry.trait_type.clone(),
                    gc: match entry.gc {
                        GcStrategy::OnAppUpdate => "onAppUpdate",
                        GcStrategy::OnAppDelete => "onAppDelete",
                        GcStrategy::Never => "never",
                    }
                    .to_owned(),
                    propagation: match entry.propagation {
                        Propagation::Orphan => "orphan",
                        Propagation::Cascading => "cascading",
                    }
                    .to_owned(),
                })
                .collect(),
        };
        serde_json::to_string(&wire).expect("the tracker wire types always serialise")
    }

    /// Parses a payload read from the ConfigMap `name`.
    ///
    /// # Errors
    ///
    /// [`TrackerParseError`] when the payload is not a tracker record. Unknown states are read as
    /// pending (not applied) and unknown strategies as `never`: an unreadable detail must never
    /// make an object look more deletable than it is.
    pub fn from_json(
        name: &str,
        json: &str,
        resource_version: Option<String>,
    ) -> Result<TrackerRecord, TrackerParseError> {
        let wire: WireRecord = serde_json::from_str(json).map_err(|source| TrackerParseError {
            name: name.to_owned(),
            source,
        })?;
        let entries = wire
            .objects
            .into_iter()
            .map(|entry| {
                let object = ObjectRef {
                    api_version: entry.api_version,
                    kind: entry.kind,
                    namespace: entry.namespace,
                    name: entry.name,
                };
                let tracked = TrackedEntry {
                    state: if entry.state == "applied" {
                        EntryState::Applied
                    } else {
                        EntryState::Pending
                    },
                    hash: entry.hash,
                    resource_version: entry.resource_version,
                    component: entry.component,
                    component_type: entry.component_type,
                    trait_type: entry.trait_type,
                    gc: match entry.gc.as_str() {
                        "never" => GcStrategy::Never,
                        "onAppDelete" => GcStrategy::OnAppDelete,
                        "onAppUpdate" | "" => GcStrategy::OnAppUpdate,
                        _ => GcStrategy::Never,
                    },
                    propagation: match entry.propagation.as_str() {
                        "orphan" => Propagation::Orphan,
                        _ => Propagation::Cascading,
                    },
                };
                (object, tracked)
            })
            .collect();
        Ok(TrackerRecord {
            app: wire.app.map(|app| AppRef {
                namespace: app.namespace,
                name: app.name,
            }),
            source: wire.source,
            revision: wire.revision,
            entries,
            resource_version,
        })
    }
}

/// The tracker ConfigMap's name for an app: `<namespace>.<name>`. Namespaces are DNS labels (no
/// dots), so the first dot separates the two unambiguously; names too long for a ConfigMap are
/// cut and suffixed with a hash of the full identity.
pub fn tracker_name(app: &AppRef) -> String {
    let full = format!("{}.{}", app.namespace, app.name);
    if full.len() <= 253 {
        return full;
    }
    use sha2::Digest;
    let hash = hex::encode(sha2::Sha256::digest(full.as_bytes()));
    format!("{}.{}", &full[..200], &hash[..16])
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRecord {
    #[serde(default)]
    app: Option<WireApp>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    revision: Option<String>,
    #[serde(default)]
    objects: Vec<WireEntry>,
}

#[derive(Serialize, Deserialize)]
struct WireApp {
    namespace: String,
    name: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireEntry {
    api_version: String,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    name: String,
    state: String,
    #[serde(default)]
    hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resource_version: Option<String>,
    #[serde(default)]
    component: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    component_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trait_type: Option<String>,
    #[serde(default)]
    gc: String,
    #[serde(default)]
    propagation: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> AppRef {
        AppRef {
            namespace: "team".to_owned(),
            name: "shop".to_owned(),
        }
    }

    fn entry(state: EntryState) -> TrackedEntry {
        TrackedEntry {
            state,
            hash: "abc".to_owned(),
            resource_version: Some("7".to_owned()),
            component: "web".to_owned(),
            component_type: Some("webservice".to_owned()),
            trait_type: None,
            gc: GcStrategy::OnAppDelete,
            propagation: Propagation::Orphan,
        }
    }

    fn object(kind: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".to_owned(),
            kind: kind.to_owned(),
            namespace: Some("team".to_owned()),
            name: name.to_owned(),
        }
    }

    #[test]
    fn record_round_trips_through_json() {
        let mut record = TrackerRecord::new(&app());
        record.revision = Some("abc123".to_owned());
        record.source = Some("repo".to_owned());
        record
            .entries
            .insert(object("Service", "web"), entry(EntryState::Applied));
        record
            .entries
            .insert(object("ConfigMap", "cfg"), entry(EntryState::Pending));
        let json = record.to_json();
        let read = TrackerRecord::from_json("team.shop", &json, Some("9".to_owned())).unwrap();
        assert_eq!(read.resource_version.as_deref(), Some("9"));
        assert_eq!(
            TrackerRecord {
                resource_version: None,
                ..read
            },
            record
        );
        // Sorted by reference: ConfigMap before Service.
        assert!(json.find("ConfigMap").unwrap() < json.find("Service").unwrap());
    }

    #[test]
    fn only_applied_entries_count_as_applied() {
        let mut record = TrackerRecord::new(&app());
        record
            .entries
            .insert(object("ConfigMap", "cfg"), entry(EntryState::Pending));
        assert!(record.applied(&object("ConfigMap", "cfg")).is_none());
        record
            .entries
            .insert(object("ConfigMap", "cfg"), entry(EntryState::Applied));
        assert!(record.applied(&object("ConfigMap", "cfg")).is_some());
    }

    #[test]
    fn unknown_details_read_as_the_safe_choice() {
        let json = r#"{"objects":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","state":"weird","gc":"later"}]}"#;
        let read = TrackerRecord::from_json("t", json, None).unwrap();
        let entry = &read.entries[&ObjectRef {
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            namespace: None,
            name: "x".to_owned(),
        }];
        assert_eq!(entry.state, EntryState::Pending);
        assert_eq!(entry.gc, GcStrategy::Never);
        assert!(TrackerRecord::from_json("t", "not json", None).is_err());
    }

    #[test]
    fn tracker_names_are_unambiguous_and_bounded() {
        assert_eq!(tracker_name(&app()), "team.shop");
        let long = AppRef {
            namespace: "n".repeat(63),
            name: "a".repeat(253),
        };
        let name = tracker_name(&long);
        assert!(name.len() <= 253);
        assert_ne!(
            name,
            tracker_name(&AppRef {
                name: "a".repeat(252),
                ..long.clone()
            })
        );
    }
}
