//! Leases (`coordination.k8s.io/v1`) as the replicas' locks: a replica's membership, a per-app
//! claim, the leader. A Lease names its holder and when it was last renewed; every write is
//! conditioned on the resourceVersion read (`writer::write_lease`), so of two replicas racing
//! for one Lease exactly one wins and the other gets a 409.
//!
//! A replica takes a Lease another replica holds only when both hold: the holder is not a live
//! member (its member Lease stopped moving for a Lease duration, timed by this replica's own
//! clock, so clock skew between machines cannot shorten it), and the Lease itself was not
//! renewed for a Lease duration. A holder gives a Lease up by deleting it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::Api;

use crate::cluster::{Cluster, has_status};

/// What this replica may do with a Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Ours already: renew it.
    Renew,
    /// Free, or its holder is gone and it expired: take it.
    Take,
    /// Another replica holds it.
    HeldBy(String),
}

/// Decides what `me` may do with `lease` at `now`; `is_live` tells whether a holder is a live
/// member.
pub(crate) fn decide(
    lease: &Lease,
    me: &str,
    now: Timestamp,
    is_live: impl Fn(&str) -> bool,
) -> Decision {
    let spec = lease.spec.as_ref();
    let holder = spec
        .and_then(|spec| spec.holder_identity.as_deref())
        .unwrap_or("");
    if holder == me {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Take;
    }
    let duration = SignedDuration::from_secs(i64::from(
        spec.and_then(|spec| spec.lease_duration_seconds)
            .unwrap_or(0),
    ));
    let renewed = spec
        .and_then(|spec| spec.renew_time.as_ref().or(spec.acquire_time.as_ref()))
        .map(|time| time.0);
    let expired = renewed.is_none_or(|renewed| now.duration_since(renewed) > duration);
    if expired && !is_live(holder) {
        Decision::Take
    } else {
        Decision::HeldBy(holder.to_owned())
    }
}

/// The Lease `name` held by `me` for `duration`, as it would be written after `current`.
pub(crate) fn held(
    current: Option<&Lease>,
    name: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    me: &str,
    duration: Duration,
    now: Timestamp,
) -> Lease {
    let previous = current.and_then(|lease| lease.spec.as_ref());
    let previous_holder = previous.and_then(|spec| spec.holder_identity.as_deref());
    let transitions = previous
        .and_then(|spec| spec.lease_transitions)
        .unwrap_or(0);
    let ours = previous_holder == Some(me);
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels.clone()),
            annotations: Some(annotations.clone()),
            resource_version: current.and_then(|lease| lease.metadata.resource_version.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(me.to_owned()),
            lease_duration_seconds: Some(
                i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: if ours {
                previous.and_then(|spec| spec.acquire_time.clone())
            } else {
                Some(MicroTime(now))
            },
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(if ours || current.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..LeaseSpec::default()
        }),
    }
}

/// What [`acquire`] got.
#[derive(Debug, Clone)]
pub(crate) enum Acquired {
    /// Ours now, as stored.
    Held(Box<Lease>),
    /// Another replica holds it (or won the race for it).
    HeldBy(String),
}

/// The Lease's fixed parts.
#[derive(Debug, Clone)]
pub(crate) struct LeaseId<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
}

/// Takes or renews a Lease for `me`: read it, [`decide`], and write it conditioned on what was
/// read.
///
/// # Errors
/// The apiserver could not be read or written (a lost race is [`Acquired::HeldBy`], not an error).
pub(crate) async fn acquire(
    cluster: &Cluster,
    id: &LeaseId<'_>,
    me: &str,
    duration: Duration,
    is_live: impl Fn(&str) -> bool,
) -> Result<Acquired, kube::Error> {
    let api: Api<Lease> = Api::namespaced(cluster.client().clone(), id.namespace);
    let current = api.get_opt(id.name).await?;
    let now = Timestamp::now();
    if let Some(current) = &current {
        match decide(current, me, now, is_live) {
            Decision::HeldBy(holder) => return Ok(Acquired::HeldBy(holder)),
            Decision::Renew | Decision::Take => {}
        }
    }
    let lease = held(
        current.as_ref(),
        id.name,
        id.labels,
        id.annotations,
        me,
        duration,
        now,
    );
    match crate::writer::write_lease(cluster, id.namespace, &lease).await {
        Ok(stored) => Ok(Acquired::Held(Box::new(stored))),
        // Another replica wrote it between our read and our write: theirs this time.
        Err(error) if has_status(&error, 409) => Ok(Acquired::HeldBy(String::new())),
        Err(error) => Err(error),
    }
}

/// Gives up a Lease this replica holds, as last stored: deleted, unless another replica wrote it
/// since (then it is not ours to delete).
///
/// # Errors
/// The apiserver refused the delete for another reason than a 404 or a 409.
pub(crate) async fn release(
    cluster: &Cluster,
    namespace: &str,
    lease: &Lease,
) -> Result<(), kube::Error> {
    let (Some(name), Some(version)) = (&lease.metadata.name, &lease.metadata.resource_version)
    else {
        return Ok(());
    };
    match crate::writer::delete_lease(cluster, namespace, name, version).await {
        Err(error) if has_status(&error, 409) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed_secs_ago: i64, duration_secs: i32, now: Timestamp) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.to_owned()),
                lease_duration_seconds: Some(duration_secs),
                renew_time: Some(MicroTime(now - SignedDuration::from_secs(renewed_secs_ago))),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_lease_is_taken_only_when_expired_and_its_holder_is_gone() {
        let now = Timestamp::now();
        let live = |member: &str| member == "b";
        assert_eq!(
            decide(&lease("a", 1, 5, now), "a", now, live),
            Decision::Renew
        );
        assert_eq!(
            decide(&lease("", 100, 5, now), "a", now, live),
            Decision::Take
        );
        // Expired, holder gone.
        assert_eq!(
            decide(&lease("c", 10, 5, now), "a", now, live),
            Decision::Take
        );
        // Expired, but its holder is still a live member (our view may lag): not taken.
        assert_eq!(
            decide(&lease("b", 10, 5, now), "a", now, live),
            Decision::HeldBy("b".to_owned())
        );
        // Holder gone but the Lease still fresh (a slow clock here, or it just renewed).
        assert_eq!(
            decide(&lease("c", 2, 5, now), "a", now, live),
            Decision::HeldBy("c".to_owned())
        );
    }

    #[test]
    fn taking_counts_a_transition_and_renewing_keeps_the_acquire_time() {
        let now = Timestamp::now();
        let labels = BTreeMap::new();
        let taken = held(
            Some(&lease("c", 10, 5, now)),
            "x",
            &labels,
            &labels,
            "a",
            Duration::from_secs(5),
            now,
        );
        let spec = taken.spec.clone().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_transitions, Some(1));
        let later = now + SignedDuration::from_secs(2);
        let renewed = held(
            Some(&taken),
            "x",
            &labels,
            &labels,
            "a",
            Duration::from_secs(5),
            later,
        );
        let renewed_spec = renewed.spec.unwrap();
        assert_eq!(renewed_spec.acquire_time, spec.acquire_time);
        assert_eq!(renewed_spec.renew_time, Some(MicroTime(later)));
        assert_eq!(renewed_spec.lease_transitions, Some(1));
    }
}
