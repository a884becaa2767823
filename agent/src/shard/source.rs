//! One source's share of the apps on this replica: which apps it owns under the current view
//! of the members, and the claims it holds on them.
//!
//! The source worker asks, on each deploy, for the apps it owns ([`SourceShard::rebalance`]) and
//! keeps of the apps it plans to apply only those whose claim it holds ([`SourceShard::claim`]).
//! A claim another live replica holds is not taken: the app waits, and is tried again on the
//! next tick ([`SourceShard::changed`]), by when the old owner has given it up.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use analyzer::{AppRef, AppRender, CachedApp};
use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use tokio::sync::watch;

use super::lease::{self, Acquired, LeaseId};
use super::results;
use super::{APP_ANNOTATION, ROLE_LABEL, Shards, View, assign};
use crate::forge::StatusState;

/// Claims taken at once: each is a read and a write.
const CLAIMS_IN_FLIGHT: usize = 8;

/// Apps that changed owner in one rebalance.
#[derive(Debug, Default)]
pub struct Moved {
    /// Now this replica's: plan them again.
    pub gained: Vec<AppRef>,
    /// No longer this replica's: forget them (their claims are given up already).
    pub lost: Vec<AppRef>,
}

/// One source's apps on this replica.
#[derive(Debug)]
pub struct SourceShard {
    shards: Shards,
    source: String,
    view: watch::Receiver<View>,
    /// The apps this replica owns under the last view it assigned with.
    owned: BTreeSet<AppRef>,
    /// The claims held, as last stored.
    claims: BTreeMap<AppRef, Lease>,
    /// Owned apps whose claim another replica still holds.
    waiting: BTreeSet<AppRef>,
    /// When each gained app was gained, until its claim is held (the handover time).
    gained_at: BTreeMap<AppRef, Instant>,
    /// The results last published: the commit and the states of the apps owned.
    published: Option<(String, BTreeMap<AppRef, StatusState>)>,
    /// The summary status last written (leader), by commit.
    summarized: Option<(String, StatusState, String)>,
    /// The leader waits for other replicas' results to summarise the deployed commit.
    summary_pending: bool,
}

impl SourceShard {
    #[must_use]
    pub fn new(shards: Shards, source: &str) -> SourceShard {
        SourceShard {
            view: shards.subscribe(),
            shards,
            source: source.to_owned(),
            owned: BTreeSet::new(),
            claims: BTreeMap::new(),
            waiting: BTreeSet::new(),
            gained_at: BTreeMap::new(),
            published: None,
            summarized: None,
            summary_pending: false,
        }
    }

    /// Resolves when the view of the members changed, or after a tick while some owned app
    /// waits for its claim. Never resolves once the membership task stopped.
    pub async fn changed(&mut self) {
        let tick = self.shards.tick();
        if self.waiting.is_empty() && !self.summary_pending {
            if self.view.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        } else {
            tokio::select! {
                _ = self.view.changed() => {}
                () = tokio::time::sleep(tick) => {}
            }
        }
    }

    /// Whether `app` is this replica's under the last assignment.
    #[must_use]
    pub fn owns(&self, app: &AppRef) -> bool {
        self.owned.contains(app)
    }

    /// Publishes this replica's results at `commit` (`states`: the apps it owns) when they
    /// changed, and, on the leader, returns the commit's summary status once every app of
    /// `apps` (the whole render) has a result and the summary differs from the last returned.
    pub async fn share_results(
        &mut self,
        commit: &str,
        states: BTreeMap<AppRef, StatusState>,
        apps: &[&AppRef],
    ) -> Option<(StatusState, String)> {
        let fresh = Some((commit.to_owned(), states));
        if self.published != fresh {
            let (_, states) = fresh.as_ref().expect("just set");
            match results::publish(&self.shards, &self.source, commit, states).await {
                Ok(()) => self.published = fresh,
                Err(error) => {
                    tracing::warn!(%error, "publishing this replica's app results failed; trying again later")
                }
            }
        }
        let view = self.view.borrow().clone();
        self.summary_pending = view.leader;
        if !view.leader {
            return None;
        }
        match results::summary(&self.shards, &self.source, commit, apps, &view.members).await {
            Ok(Some((state, description))) => {
                self.summary_pending = false;
                let summary = (commit.to_owned(), state, description.clone());
                if self.summarized.as_ref() == Some(&summary) {
                    return None;
                }
                self.summarized = Some(summary);
                Some((state, description))
            }
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "reading the replicas' app results failed; trying again later");
                None
            }
        }
    }

    /// Whether some owned app waits for its claim.
    #[must_use]
    pub fn is_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Whether this replica holds the leader Lease.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.view.borrow().leader
    }

    /// Whether this replica is a live member (and may own apps).
    #[must_use]
    pub fn is_member(&self) -> bool {
        self.view.borrow().includes(self.shards.me())
    }

    /// Assigns `apps` (every app of the source's render) to the members as seen now, and gives
    /// up the claims of the apps this replica no longer owns.
    pub async fn rebalance<'a>(&mut self, apps: impl Iterator<Item = &'a AppRef>) -> Moved {
        let view = self.view.borrow_and_update().clone();
        let me = self.shards.me().to_owned();
        let apps: Vec<&AppRef> = apps.collect();
        let keys: Vec<String> = apps.iter().map(|app| app.to_string()).collect();
        let owners = assign::bounded(&view.members, &keys, self.shards.config().epsilon);
        let mut owned = BTreeSet::new();
        let mut assignment = BTreeMap::new();
        for ((app, key), owner) in apps.iter().zip(keys).zip(owners) {
            let Some(owner) = owner.map(|member_idx| view.members[member_idx].clone()) else {
                continue;
            };
            if owner == me {
                owned.insert((*app).clone());
            }
            assignment.insert(key, owner);
        }
        self.shards.record_assignment(&self.source, assignment);
        let gained: Vec<AppRef> = owned.difference(&self.owned).cloned().collect();
        let lost: Vec<AppRef> = self.owned.difference(&owned).cloned().collect();
        let now = Instant::now();
        for app in &gained {
            self.gained_at.insert(app.clone(), now);
        }
        self.gained_at.retain(|app, _| owned.contains(app));
        self.waiting.retain(|app| owned.contains(app));
        let unowned: Vec<AppRef> = self
            .claims
            .keys()
            .filter(|app| !owned.contains(*app))
            .cloned()
            .collect();
        for app in unowned {
            self.give_up(&app).await;
        }
        if !gained.is_empty() || !lost.is_empty() {
            tracing::info!(source = %self.source, gained = gained.len(), lost = lost.len(), owned = owned.len(), "apps moved");
            self.shards
                .metrics()
                .record_moves(&self.source, gained.len(), lost.len());
        }
        self.owned = owned;
        Moved { gained, lost }
    }

    /// Of `apps`, those this replica owns and holds the claim of (taken now where needed), and
    /// the owned ones whose claim another replica still holds (to plan again later).
    pub async fn claim(&mut self, apps: &[CachedApp]) -> (Vec<CachedApp>, Vec<AppRef>) {
        if !self.is_member() {
            return (Vec::new(), Vec::new());
        }
        let members = self.view.borrow().members.clone();
        let mine: Vec<&CachedApp> = apps
            .iter()
            .filter(|app| self.owned.contains(app.app()))
            .collect();
        let to_take: Vec<AppRef> = mine
            .iter()
            .filter(|app| !self.claims.contains_key(app.app()))
            .map(|app| app.app().clone())
            .collect();
        let shards = &self.shards;
        let source = self.source.as_str();
        let members = &members;
        let taken: Vec<(AppRef, Result<Acquired, kube::Error>)> = futures::stream::iter(to_take)
            .map(|app| async move {
                let acquired = take_claim(shards, source, &app, members).await;
                (app, acquired)
            })
            .buffer_unordered(CLAIMS_IN_FLIGHT)
            .collect()
            .await;
        for (app, acquired) in taken {
            match acquired {
                Ok(Acquired::Held(lease)) => {
                    if let Some(gained_at) = self.gained_at.remove(&app) {
                        self.shards.metrics().observe_handover(gained_at.elapsed());
                    }
                    self.waiting.remove(&app);
                    self.claims.insert(app, *lease);
                }
                Ok(Acquired::HeldBy(holder)) => {
                    tracing::info!(app = %app, holder = %holder, "app claimed by another replica; waiting for it to give it up");
                    self.waiting.insert(app);
                }
                Err(error) => {
                    tracing::warn!(app = %app, %error, "taking the app's claim failed; trying again later");
                    self.waiting.insert(app);
                }
            }
        }
        let claimed = mine
            .into_iter()
            .filter(|app| self.claims.contains_key(app.app()))
            .cloned()
            .collect();
        (claimed, self.waiting.iter().cloned().collect())
    }

    /// Gives up every claim (the replica is stopping, after its last step).
    pub async fn leave(&mut self) {
        let apps: Vec<AppRef> = self.claims.keys().cloned().collect();
        for app in apps {
            self.give_up(&app).await;
        }
        self.owned.clear();
    }

    async fn give_up(&mut self, app: &AppRef) {
        let Some(claim) = self.claims.remove(app) else {
            return;
        };
        let namespace = &self.shards.config().namespace;
        if let Err(error) = lease::release(self.shards.cluster(), namespace, &claim).await {
            tracing::warn!(app = %app, %error, "giving up the app's claim failed; it passes on when this replica's membership expires");
        }
    }
}

/// The claim Lease's name: a hash of the source and app, as names must be DNS labels.
#[must_use]
pub fn claim_name(source: &str, app: &AppRef) -> String {
    format!(
        "driftless-claim-{:016x}",
        assign::stable_hash(&format!("{source}\n{app}"))
    )
}

async fn take_claim(
    shards: &Shards,
    source: &str,
    app: &AppRef,
    members: &[String],
) -> Result<Acquired, kube::Error> {
    let name = claim_name(source, app);
    let labels = BTreeMap::from([(ROLE_LABEL.to_owned(), "claim".to_owned())]);
    let annotations = BTreeMap::from([(APP_ANNOTATION.to_owned(), format!("{source} {app}"))]);
    let id = LeaseId {
        namespace: &shards.config().namespace,
        name: &name,
        labels: &labels,
        annotations: &annotations,
    };
    let is_live = |member: &str| members.iter().any(|live| live == member);
    lease::acquire(
        shards.cluster(),
        &id,
        shards.me(),
        shards.config().lease_duration,
        is_live,
    )
    .await
}
