//! A watch cache of live objects for a long-running agent: one `kube::runtime`
//! watcher per (kind, namespace) a plan reads, each keeping its collection current, so the
//! agent's plans of every app (drift checks) read the cluster from memory instead of LISTing it.
//!
//! Objects are held compactly: one compact JSON text per object, `managedFields` stripped, with
//! the `apiVersion` and `kind` a GET returns. A plan parses only the objects it takes.
//!
//! **Invariant: the cache is never evidence of absence, nor older than our own writes.** It
//! answers only with objects it holds, from a collection that is synced (its initial list is
//! complete and its watch has not broken since), and never with an object this agent wrote
//! until the watch has delivered that write. Everything else — an object the cache does not
//! hold, a collection still listing or whose watch broke, an object with a write not yet seen —
//! is read from the cluster (LIST or GET) exactly as without a cache. Absence therefore always
//! comes from the apiserver itself, so a prune or a claim never rests on a lagging watch.
//!
//! The rules live in [`CollectionState`], a pure state machine fed [`Change`]s; the watcher
//! tasks only translate kube's events into them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, DynamicObject};
use kube::core::TypeMeta;
use kube::runtime::watcher;

use crate::plan::ObjectRef;

/// Watches started at most: a source spread over thousands of namespaces would otherwise open
/// a watch per namespace and kind; beyond this, collections are read as without a cache.
pub const MAX_WATCHES: usize = 512;

/// Objects per page of a watcher's initial list (bounds one response at 10,000 apps).
const LIST_PAGE: u32 = 500;

/// Delay before a broken watch starts over, doubled per consecutive failure up to the maximum.
const RESTART_DELAY: Duration = Duration::from_millis(500);
const RESTART_DELAY_MAX: Duration = Duration::from_secs(30);

/// A watched collection: a kind in one namespace (`None`: cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CollectionKey {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
}

impl CollectionKey {
    /// The collection holding `object`.
    pub fn of(object: &ObjectRef) -> CollectionKey {
        CollectionKey {
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
        }
    }
}

/// What the watch of a collection told us, in the order it happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A (re)list starts: the objects that follow, up to [`Change::ListDone`], replace the held
    /// ones. `writes_before` is the write sequence number at that moment: every own write
    /// recorded before it is reflected in the list.
    ListStart { writes_before: u64 },
    /// One object of the list.
    Listed {
        name: String,
        version: String,
        json: Box<str>,
    },
    /// The list is complete; the watch continues from it.
    ListDone,
    /// An object was created or changed.
    Applied {
        name: String,
        version: String,
        json: Box<str>,
    },
    /// An object was deleted.
    Deleted { name: String },
    /// The watch failed: nothing held can be trusted until the next list completes.
    Broken,
}

/// What we expect the watch to show after one of our own writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// The object at this resourceVersion (the write's response carried it).
    Version(String),
    /// The object gone (a delete answered without the object: removed at once).
    Gone,
    /// Unknown (the request failed without a clear answer): only a list started after it shows
    /// the truth.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    /// The write's sequence number ([`WatchCache`] numbers them in the order they completed).
    seq: u64,
    expect: Written,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    version: Box<str>,
    json: Box<str>,
}

/// One collection's objects and the rules for when they may answer a read.
#[derive(Debug, Default)]
pub struct CollectionState {
    objects: BTreeMap<String, Held>,
    /// The list in progress, replacing `objects` when done.
    listing: Option<BTreeMap<String, Held>>,
    /// The write sequence number at the start of the list in progress.
    list_writes_before: u64,
    /// A list completed and the watch has not broken since.
    synced: bool,
    /// Own writes the watch has not shown yet, by object name.
    pending: BTreeMap<String, Pending>,
    /// Lists completed (initial and after a broken watch), for stats.
    lists: u64,
    /// Watch events applied after a list, for stats.
    events: u64,
}

impl CollectionState {
    /// Applies one change of the watch.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::ListStart { writes_before } => {
                self.listing = Some(BTreeMap::new());
                self.list_writes_before = writes_before;
            }
            Change::Listed {
                name,
                version,
                json,
            } => {
                if let Some(listing) = &mut self.listing {
                    listing.insert(
                        name,
                        Held {
                            version: version.into(),
                            json,
                        },
                    );
                }
            }
            Change::ListDone => {
                if let Some(listing) = self.listing.take() {
                    self.objects = listing;
                    self.synced = true;
                    self.lists += 1;
                    // A list that started after a write shows its outcome, whatever it was.
                    let before = self.list_writes_before;
                    self.pending.retain(|_, pending| pending.seq >= before);
                    // A write seen in the list itself is settled too.
                    let objects = &self.objects;
                    self.pending
                        .retain(|name, pending| !settled_by(&pending.expect, objects.get(name)));
                }
            }
            Change::Applied {
                name,
                version,
                json,
            } => {
                self.events += 1;
                if self
                    .pending
                    .get(&name)
                    .is_some_and(|pending| pending.expect == Written::Version(version.clone()))
                {
                    self.pending.remove(&name);
                }
                self.objects.insert(
                    name,
                    Held {
                        version: version.into(),
                        json,
                    },
                );
            }
            Change::Deleted { name } => {
                self.events += 1;
                if self
                    .pending
                    .get(&name)
                    .is_some_and(|pending| pending.expect == Written::Gone)
                {
                    self.pending.remove(&name);
                }
                self.objects.remove(&name);
            }
            Change::Broken => {
                self.synced = false;
                self.listing = None;
            }
        }
    }

    /// Records one of our own writes (sequence number `seq`): the object is not served until
    /// the watch shows it.
    pub fn wrote(&mut self, name: &str, seq: u64, expect: Written) {
        if settled_by(&expect, self.objects.get(name)) && self.synced {
            // The watch was faster than the write's caller.
            self.pending.remove(name);
            return;
        }
        self.pending
            .insert(name.to_owned(), Pending { seq, expect });
    }

    /// True when the collection may answer reads.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// Whether an own write of this object waits for the watch.
    pub fn is_pending(&self, name: &str) -> bool {
        self.pending.contains_key(name)
    }

    /// The held object `name` as compact JSON, when it may answer a read: the collection is
    /// synced and no own write of it is pending. `None` means "ask the cluster", never "absent".
    pub fn get(&self, name: &str) -> Option<&str> {
        if !self.synced || self.pending.contains_key(name) {
            return None;
        }
        self.objects.get(name).map(|held| &*held.json)
    }

    /// Every held object that may answer a read, in name order; `None` when the collection is
    /// not synced. Objects with a pending write are left out: a caller treating the result as
    /// the whole collection must read those from the cluster.
    pub fn servable(&self) -> Option<impl Iterator<Item = (&str, &str)>> {
        self.synced.then(|| {
            self.objects
                .iter()
                .filter(|(name, _)| !self.pending.contains_key(*name))
                .map(|(name, held)| (name.as_str(), &*held.json))
        })
    }

    /// Bytes of JSON held (objects only), for stats.
    pub fn held_bytes(&self) -> usize {
        self.objects
            .iter()
            .map(|(name, held)| name.len() + held.version.len() + held.json.len())
            .sum()
    }
}

/// True when `held` is what a write expecting `expect` produced.
fn settled_by(expect: &Written, held: Option<&Held>) -> bool {
    match (expect, held) {
        (Written::Version(version), Some(held)) => *held.version == **version,
        (Written::Gone, None) => true,
        _ => false,
    }
}

/// What the cache holds and has done, for logs, metrics and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Collections watched.
    pub collections: usize,
    /// Of those, synced.
    pub synced: usize,
    /// Objects held.
    pub objects: usize,
    /// Bytes of JSON held.
    pub bytes: usize,
    /// Lists completed by the watchers (initial and after broken watches).
    pub lists: u64,
    /// Watch events applied.
    pub events: u64,
    /// Own writes not yet seen by the watch.
    pub pending: usize,
}

struct Watched {
    state: Arc<Mutex<CollectionState>>,
    /// The handle the watcher uses, kept to restart it.
    api: Api<DynamicObject>,
    task: tokio::task::JoinHandle<()>,
}

/// The watch cache of one cluster (see the module docs for its invariant).
pub struct WatchCache {
    /// Server-side timeout of each watch request (see [`WatchCache::new`]).
    watch_seconds: u32,
    collections: Mutex<BTreeMap<CollectionKey, Watched>>,
    /// Numbers own writes in the order they completed (see [`Change::ListStart`]).
    writes: Arc<AtomicU64>,
}

impl Drop for WatchCache {
    fn drop(&mut self) {
        for watched in lock(&self.collections).values() {
            watched.task.abort();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WatchCache {
    /// A cache whose watches run on a client with this read timeout. Each watch request asks
    /// the apiserver to end it a few seconds before that timeout (the watcher then resumes from
    /// the last resourceVersion, without listing again): a quiet collection would otherwise hit
    /// the client's read timeout, which breaks the watch and lists the collection again (seen at
    /// 10,000 apps: all 41 collections relisted every 30 s).
    pub fn new(read_timeout: Duration) -> WatchCache {
        let seconds = read_timeout.as_secs().saturating_sub(5).clamp(1, 290);
        WatchCache {
            watch_seconds: u32::try_from(seconds).unwrap_or(290),
            collections: Mutex::new(BTreeMap::new()),
            writes: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Starts watching `key` (served by `api`) unless it is watched already or the cache is
    /// full; must be called within a tokio runtime. Returns the collection's state when watched.
    pub fn watch(
        &self,
        key: &CollectionKey,
        api: Api<DynamicObject>,
    ) -> Option<Arc<Mutex<CollectionState>>> {
        let mut collections = lock(&self.collections);
        if let Some(watched) = collections.get(key) {
            return Some(watched.state.clone());
        }
        if collections.len() >= MAX_WATCHES {
            return None;
        }
        let state = Arc::new(Mutex::new(CollectionState::default()));
        let task = tokio::spawn(run(
            api.clone(),
            types_of(key),
            state.clone(),
            self.writes.clone(),
            self.watch_seconds,
        ));
        collections.insert(
            key.clone(),
            Watched {
                state: state.clone(),
                api,
                task,
            },
        );
        Some(state)
    }

    /// The state of a watched collection.
    pub fn collection(&self, key: &CollectionKey) -> Option<Arc<Mutex<CollectionState>>> {
        lock(&self.collections)
            .get(key)
            .map(|watched| watched.state.clone())
    }

    /// Records one of our own writes of `object` (after its response, or its failure): reads of
    /// it bypass the cache until the watch shows it. An unknown outcome restarts the collection's
    /// watch, whose fresh list then settles it.
    pub fn wrote(&self, object: &ObjectRef, expect: Written) {
        let key = CollectionKey::of(object);
        let seq = self.writes.fetch_add(1, Ordering::SeqCst);
        let mut collections = lock(&self.collections);
        let Some(watched) = collections.get_mut(&key) else {
            return;
        };
        let unknown = expect == Written::Unknown;
        {
            let mut state = lock(&watched.state);
            state.wrote(&object.name, seq, expect);
            if unknown {
                state.apply(Change::Broken);
            }
        }
        if unknown {
            // A fresh watcher lists again; the old one may hold a stream from before the write.
            watched.task.abort();
            watched.task = tokio::spawn(run(
                watched.api.clone(),
                types_of(&key),
                watched.state.clone(),
                self.writes.clone(),
                self.watch_seconds,
            ));
        }
    }

    /// Totals over every watched collection.
    pub fn stats(&self) -> WatchStats {
        let collections = lock(&self.collections);
        let mut stats = WatchStats {
            collections: collections.len(),
            ..WatchStats::default()
        };
        for watched in collections.values() {
            let state = lock(&watched.state);
            stats.synced += usize::from(state.synced);
            stats.objects += state.objects.len();
            stats.bytes += state.held_bytes();
            stats.lists += state.lists;
            stats.events += state.events;
            stats.pending += state.pending.len();
        }
        stats
    }
}

fn types_of(key: &CollectionKey) -> TypeMeta {
    TypeMeta {
        api_version: key.api_version.clone(),
        kind: key.kind.clone(),
    }
}

/// One collection's watcher, forever: kube's watcher events become [`Change`]s; any error marks
/// the collection broken and starts a new watcher (which lists again) after a growing delay.
async fn run(
    api: Api<DynamicObject>,
    types: TypeMeta,
    state: Arc<Mutex<CollectionState>>,
    writes: Arc<AtomicU64>,
    watch_seconds: u32,
) {
    let mut delay = RESTART_DELAY;
    loop {
        let config = watcher::Config::default()
            .page_size(LIST_PAGE)
            .timeout(watch_seconds);
        let mut events = std::pin::pin!(watcher(api.clone(), config));
        while let Some(event) = events.next().await {
            let change = match event {
                Ok(watcher::Event::Init) => Change::ListStart {
                    writes_before: writes.load(Ordering::SeqCst),
                },
                Ok(watcher::Event::InitApply(object)) => match held(object, &types) {
                    Some((name, version, json)) => Change::Listed {
                        name,
                        version,
                        json,
                    },
                    None => continue,
                },
                Ok(watcher::Event::InitDone) => {
                    delay = RESTART_DELAY;
                    Change::ListDone
                }
                Ok(watcher::Event::Apply(object)) => match held(object, &types) {
                    Some((name, version, json)) => Change::Applied {
                        name,
                        version,
                        json,
                    },
                    None => continue,
                },
                Ok(watcher::Event::Delete(object)) => match object.metadata.name {
                    Some(name) => Change::Deleted { name },
                    None => continue,
                },
                Err(error) => {
                    tracing::info!(kind = %types.kind, %error, "watch broke; listing again");
                    lock(&state).apply(Change::Broken);
                    break;
                }
            };
            lock(&state).apply(change);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RESTART_DELAY_MAX);
    }
}

/// An object as the cache holds it: name, resourceVersion and compact JSON as a GET returns it
/// (with `apiVersion` and `kind`), without `managedFields`. `None` without a name.
fn held(mut object: DynamicObject, types: &TypeMeta) -> Option<(String, String, Box<str>)> {
    object.metadata.managed_fields = None;
    object.types = Some(types.clone());
    let name = object.metadata.name.clone()?;
    let version = object.metadata.resource_version.clone().unwrap_or_default();
    let json = serde_json::to_string(&object).ok()?;
    Some((name, version, json.into_boxed_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(name: &str, version: &str) -> Box<str> {
        format!(r#"{{"metadata":{{"name":"{name}","resourceVersion":"{version}"}}}}"#).into()
    }

    fn listed(name: &str, version: &str) -> Change {
        Change::Listed {
            name: name.to_owned(),
            version: version.to_owned(),
            json: json(name, version),
        }
    }

    fn applied(name: &str, version: &str) -> Change {
        Change::Applied {
            name: name.to_owned(),
            version: version.to_owned(),
            json: json(name, version),
        }
    }

    fn version_of(state: &CollectionState, name: &str) -> Option<String> {
        let json: serde_json::Value = serde_json::from_str(state.get(name)?).unwrap();
        Some(json["metadata"]["resourceVersion"].as_str()?.to_owned())
    }

    /// A collection listed with `a` at version 1 and `b` at version 2.
    fn synced() -> CollectionState {
        let mut state = CollectionState::default();
        state.apply(Change::ListStart { writes_before: 0 });
        state.apply(listed("a", "1"));
        state.apply(listed("b", "2"));
        state.apply(Change::ListDone);
        state
    }

    #[test]
    fn nothing_is_served_before_the_initial_list_completes() {
        let mut state = CollectionState::default();
        assert!(state.servable().is_none());
        state.apply(Change::ListStart { writes_before: 0 });
        state.apply(listed("a", "1"));
        assert_eq!(state.get("a"), None, "the list is not complete yet");
        assert!(state.servable().is_none());
        state.apply(Change::ListDone);
        assert_eq!(version_of(&state, "a").as_deref(), Some("1"));
    }

    #[test]
    fn watch_events_keep_the_collection_current() {
        let mut state = synced();
        state.apply(applied("a", "3"));
        state.apply(applied("c", "4"));
        state.apply(Change::Deleted {
            name: "b".to_owned(),
        });
        assert_eq!(version_of(&state, "a").as_deref(), Some("3"));
        assert_eq!(version_of(&state, "c").as_deref(), Some("4"));
        assert_eq!(state.get("b"), None);
        let names: Vec<&str> = state.servable().unwrap().map(|(name, _)| name).collect();
        assert_eq!(names, ["a", "c"]);
    }

    #[test]
    fn a_broken_watch_serves_nothing_until_a_new_list_replaces_everything() {
        let mut state = synced();
        state.apply(Change::Broken);
        assert_eq!(state.get("a"), None);
        assert!(state.servable().is_none());
        // The relist finds `b` gone (deleted while the watch was down) and `a` changed.
        state.apply(Change::ListStart { writes_before: 0 });
        state.apply(listed("a", "5"));
        assert_eq!(state.get("a"), None, "still listing");
        state.apply(Change::ListDone);
        assert_eq!(version_of(&state, "a").as_deref(), Some("5"));
        assert_eq!(state.get("b"), None);
        assert_eq!(state.lists, 2);
    }

    #[test]
    fn an_own_write_is_not_served_until_the_watch_shows_its_version() {
        let mut state = synced();
        state.wrote("a", 0, Written::Version("7".to_owned()));
        assert_eq!(state.get("a"), None, "the cache still holds version 1");
        // An event from before our write (the watch lags) does not settle it.
        state.apply(applied("a", "6"));
        assert_eq!(state.get("a"), None);
        assert!(state.servable().unwrap().all(|(name, _)| name != "a"));
        state.apply(applied("a", "7"));
        assert_eq!(version_of(&state, "a").as_deref(), Some("7"));
        // Other objects of the collection were served all along.
        assert_eq!(version_of(&state, "b").as_deref(), Some("2"));
    }

    #[test]
    fn a_write_the_watch_already_showed_is_settled_at_once() {
        let mut state = synced();
        state.apply(applied("a", "7"));
        state.wrote("a", 0, Written::Version("7".to_owned()));
        assert!(!state.is_pending("a"));
        assert_eq!(version_of(&state, "a").as_deref(), Some("7"));
    }

    #[test]
    fn an_own_delete_is_settled_by_the_delete_event() {
        let mut state = synced();
        state.wrote("b", 0, Written::Gone);
        assert_eq!(state.get("b"), None);
        assert!(state.is_pending("b"));
        state.apply(applied("b", "8"));
        assert!(state.is_pending("b"), "a change is not the delete");
        state.apply(Change::Deleted {
            name: "b".to_owned(),
        });
        assert!(!state.is_pending("b"));
    }

    #[test]
    fn a_write_of_unknown_outcome_waits_for_a_list_started_after_it() {
        let mut state = synced();
        state.wrote("a", 4, Written::Unknown);
        state.apply(applied("a", "9"));
        assert!(state.is_pending("a"), "any event may predate the write");
        // A list that started before the write (sequence 4) does not settle it...
        state.apply(Change::ListStart { writes_before: 4 });
        state.apply(listed("a", "9"));
        state.apply(Change::ListDone);
        assert!(state.is_pending("a"));
        // ...one started after it does.
        state.apply(Change::ListStart { writes_before: 5 });
        state.apply(listed("a", "10"));
        state.apply(Change::ListDone);
        assert!(!state.is_pending("a"));
        assert_eq!(version_of(&state, "a").as_deref(), Some("10"));
    }

    #[test]
    fn a_list_showing_the_written_version_settles_the_write() {
        let mut state = synced();
        state.wrote("a", 4, Written::Version("11".to_owned()));
        state.apply(Change::Broken);
        // Started before the write was recorded, but it read the written version.
        state.apply(Change::ListStart { writes_before: 3 });
        state.apply(listed("a", "11"));
        state.apply(Change::ListDone);
        assert!(!state.is_pending("a"));
    }
}
