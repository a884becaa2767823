//! Scale-out: replicas of the agent share each source's apps, coordinated through Kubernetes
//! Leases (`coordination.k8s.io/v1`) in the agent's namespace and nothing else.
//!
//! - **Membership** ([`Shards`]): each replica holds a member Lease and renews it every third
//!   of the Lease duration. A member whose Lease has not moved for a Lease duration, timed by
//!   this replica's clock from when it saw the Lease change, is gone; a replica that leaves
//!   deletes its Lease. A replica whose own renewals failed for a Lease duration counts itself
//!   out, and so owns nothing, until it renews again.
//! - **Assignment** ([`assign`]): every replica renders every source and assigns its apps to
//!   the live members by consistent hashing with bounded loads. Every replica computes the same
//!   owners from the same members and render; no assignment is stored.
//! - **Claims** ([`source::SourceShard`]): before an app is planned to be applied, its owner
//!   takes the app's claim Lease. A claim held by a live member is never taken, so while two
//!   replicas' views of the members disagree during a handover, at most one applies an app. The
//!   old owner deletes its claims as soon as the apps move away.
//! - **Leader**: one replica holds the leader Lease. It alone looks for apps removed from Git
//!   and previews pull requests. Every replica publishes its apps' results in the cluster, and
//!   the leader writes a commit's summary status from them ([`results`]).
//!
//! - [`sim`]: the simulation comparing bounded hashing with round-robin and plain hashing.

pub mod assign;
pub(crate) mod lease;
pub(crate) mod results;
pub mod sim;
pub mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use tokio::sync::watch;

use crate::cluster::Cluster;
use crate::config::ShardingConfig;
use lease::{Acquired, LeaseId};

/// The label every Lease of the agent's replicas carries, with the Lease's role as value.
pub const ROLE_LABEL: &str = "driftless.dev/shard-role";
/// The annotation of a claim Lease naming its source and app (`source namespace/name`).
pub const APP_ANNOTATION: &str = "driftless.dev/app";
const LEADER_LEASE: &str = "driftless-leader";

/// The members as this replica sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Live members, sorted (this replica among them only while its own Lease is current).
    pub members: Arc<Vec<String>>,
    /// This replica holds the leader Lease.
    pub leader: bool,
    /// Bumped on every change, so a worker can tell whether it has seen this view.
    pub generation: u64,
}

impl View {
    /// Whether this view lets `me` own apps at all.
    #[must_use]
    pub fn includes(&self, me: &str) -> bool {
        self.members
            .binary_search_by(|member| member.as_str().cmp(me))
            .is_ok()
    }
}

/// One agent's membership: cheap to clone, shared by its source workers.
#[derive(Clone)]
pub struct Shards {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Shards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shards")
            .field("replica", &self.me())
            .field("view", &self.view())
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: ShardingConfig,
    cluster: Arc<Cluster>,
    view: watch::Sender<View>,
    /// Per source, its apps' owners as this replica last assigned them (for `/shards`).
    assignments: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    metrics: metrics::ShardMetrics,
}

pub mod metrics;
pub mod page;

impl Shards {
    /// Starts this replica's membership: joins at once, then renews on a timer until `stop`
    /// turns true. Registers the shard metrics in `registry`.
    #[must_use]
    pub fn start(
        config: ShardingConfig,
        cluster: Arc<Cluster>,
        registry: &mut prometheus_client::registry::Registry,
        stop: watch::Receiver<bool>,
    ) -> Shards {
        let (view, _) = watch::channel(View::default());
        let shards = Shards {
            inner: Arc::new(Inner {
                config,
                cluster,
                view,
                assignments: Mutex::new(BTreeMap::new()),
                metrics: metrics::ShardMetrics::register(registry),
            }),
        };
        tokio::spawn(shards.clone().membership_loop(stop));
        shards
    }

    /// This replica's name.
    #[must_use]
    pub fn me(&self) -> &str {
        &self.inner.config.replica_id
    }

    #[must_use]
    pub fn config(&self) -> &ShardingConfig {
        &self.inner.config
    }

    /// The members as seen now.
    #[must_use]
    pub fn view(&self) -> View {
        self.inner.view.borrow().clone()
    }

    /// A receiver that wakes on every change of the view.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<View> {
        self.inner.view.subscribe()
    }

    /// How often membership is renewed and claims waiting on another replica are tried again.
    #[must_use]
    pub fn tick(&self) -> Duration {
        (self.inner.config.lease_duration / 3).max(Duration::from_millis(300))
    }

    /// Leaves the members: deletes this replica's member Lease (and the leader Lease if held), so
    /// the others take its apps at their next tick instead of after a Lease duration. Call
    /// once every source worker stopped and gave up its claims.
    pub async fn leave(&self) {
        for name in [self.member_lease_name(), LEADER_LEASE.to_owned()] {
            let api: Api<Lease> = Api::namespaced(
                self.inner.cluster.client().clone(),
                &self.inner.config.namespace,
            );
            if let Ok(Some(lease)) = api.get_opt(&name).await
                && lease
                    .spec
                    .as_ref()
                    .and_then(|spec| spec.holder_identity.as_deref())
                    == Some(self.me())
                && let Err(error) =
                    lease::release(&self.inner.cluster, &self.inner.config.namespace, &lease).await
            {
                tracing::warn!(%error, lease = %name, "giving up a Lease failed; it expires instead");
            }
        }
        tracing::info!(replica = %self.me(), "left the members");
    }

    fn member_lease_name(&self) -> String {
        format!("driftless-member-{}", self.me())
    }

    fn record_assignment(&self, source: &str, owners: BTreeMap<String, String>) {
        let counts = owners
            .values()
            .fold(BTreeMap::<&str, usize>::new(), |mut counts, owner| {
                *counts.entry(owner.as_str()).or_default() += 1;
                counts
            });
        let mine = counts.get(self.me()).copied().unwrap_or(0);
        self.inner.metrics.set_owned(source, mine);
        let mut assignments = self
            .inner
            .assignments
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assignments.insert(source.to_owned(), owners);
    }

    /// Per source, app → owner, as this replica last assigned them.
    #[must_use]
    pub fn assignments(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.inner
            .assignments
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn metrics(&self) -> &metrics::ShardMetrics {
        &self.inner.metrics
    }

    pub(crate) fn cluster(&self) -> &Arc<Cluster> {
        &self.inner.cluster
    }

    async fn membership_loop(self, mut stop: watch::Receiver<bool>) {
        let mut observed: BTreeMap<String, (String, Instant)> = BTreeMap::new();
        let mut renewed_at: Option<Instant> = None;
        let mut generation = 0;
        loop {
            if *stop.borrow() {
                break;
            }
            let now = Instant::now();
            if self.renew_member().await {
                renewed_at = Some(now);
            }
            let members = match self.live_members(&mut observed, renewed_at).await {
                Ok(members) => members,
                Err(error) => {
                    tracing::warn!(%error, "listing the member Leases failed; keeping the last view");
                    self.wait(&mut stop).await;
                    continue;
                }
            };
            let leader = members.binary_search(&self.me().to_owned()).is_ok()
                && self.hold_leader(&members).await;
            let current = self.view();
            if *current.members != members || current.leader != leader {
                generation += 1;
                tracing::info!(replica = %self.me(), members = ?members, leader, "members changed");
                self.inner.metrics.set_members(members.len());
                self.inner.view.send_replace(View {
                    members: Arc::new(members),
                    leader,
                    generation,
                });
            }
            self.wait(&mut stop).await;
        }
    }

    async fn wait(&self, stop: &mut watch::Receiver<bool>) {
        tokio::select! {
            () = tokio::time::sleep(self.tick()) => {}
            _ = stop.wait_for(|stop| *stop) => {}
        }
    }

    /// Renews (or creates) this replica's member Lease; false when that failed.
    async fn renew_member(&self) -> bool {
        let name = self.member_lease_name();
        let labels = BTreeMap::from([(ROLE_LABEL.to_owned(), "member".to_owned())]);
        let id = LeaseId {
            namespace: &self.inner.config.namespace,
            name: &name,
            labels: &labels,
            annotations: &BTreeMap::new(),
        };
        // The member Lease is named after this replica: whoever holds it, it is ours.
        match lease::acquire(
            &self.inner.cluster,
            &id,
            self.me(),
            self.inner.config.lease_duration,
            |_| false,
        )
        .await
        {
            Ok(Acquired::Held(_)) => true,
            Ok(Acquired::HeldBy(_)) => false,
            Err(error) => {
                tracing::warn!(%error, "renewing this replica's member Lease failed");
                false
            }
        }
    }

    /// The live members: those whose member Lease changed within a Lease duration of now, as
    /// observed here, plus this replica while its own renewals are current.
    async fn live_members(
        &self,
        observed: &mut BTreeMap<String, (String, Instant)>,
        renewed_at: Option<Instant>,
    ) -> Result<Vec<String>, kube::Error> {
        let api: Api<Lease> = Api::namespaced(
            self.inner.cluster.client().clone(),
            &self.inner.config.namespace,
        );
        let leases = api
            .list(&ListParams::default().labels(&format!("{ROLE_LABEL}=member")))
            .await?;
        let now = Instant::now();
        let duration = self.inner.config.lease_duration;
        let mut seen = BTreeSet::new();
        for lease in leases {
            let Some(holder) = lease
                .spec
                .as_ref()
                .and_then(|spec| spec.holder_identity.clone())
            else {
                continue;
            };
            let version = lease.metadata.resource_version.clone().unwrap_or_default();
            let entry = observed
                .entry(holder.clone())
                .or_insert_with(|| (version.clone(), now));
            if entry.0 != version {
                *entry = (version, now);
            }
            seen.insert(holder);
        }
        // A deleted member Lease is a member that left.
        observed.retain(|member, _| seen.contains(member));
        let mut members: Vec<String> = observed
            .iter()
            .filter(|(member, (_, at))| {
                member.as_str() != self.me() && now.duration_since(*at) < duration
            })
            .map(|(member, _)| member.clone())
            .collect();
        if renewed_at.is_some_and(|at| now.duration_since(at) < duration) {
            members.push(self.me().to_owned());
        }
        members.sort();
        Ok(members)
    }

    /// Takes or renews the leader Lease; true while this replica holds it.
    async fn hold_leader(&self, members: &[String]) -> bool {
        let labels = BTreeMap::from([(ROLE_LABEL.to_owned(), "leader".to_owned())]);
        let id = LeaseId {
            namespace: &self.inner.config.namespace,
            name: LEADER_LEASE,
            labels: &labels,
            annotations: &BTreeMap::new(),
        };
        let is_live = |member: &str| members.iter().any(|live| live == member);
        match lease::acquire(
            &self.inner.cluster,
            &id,
            self.me(),
            self.inner.config.lease_duration,
            is_live,
        )
        .await
        {
            Ok(Acquired::Held(_)) => true,
            Ok(Acquired::HeldBy(_)) => false,
            Err(error) => {
                tracing::warn!(%error, "renewing the leader Lease failed");
                false
            }
        }
    }
}
