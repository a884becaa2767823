//! One target cluster: a kube client built from a kubeconfig and context, held to a QPS/burst
//! budget, plus a discovery cache that maps rendered kinds to API resources and scopes.
//!
//! Every API call of `observe`, `writer` and the tracker store goes through [`Cluster::api`] or
//! [`Cluster::throttle`], so the budget covers them all. Discovery is per group-version and only
//! for the group-versions a plan renders, not the whole cluster; a group-version is forgotten
//! when a CRD that serves it is applied.
//!
//! A plan over many apps reads its objects in bulk first ([`Cluster::prefetch`]): one paged LIST
//! per (kind, namespace) instead of one GET per object, because at 10,000 apps per-object GETs are
//! ~45,000 requests, which the QPS budget turns into half an hour. Reads then take their object
//! from that snapshot ([`Cluster::take_prefetched`]) and fall back to a GET for anything not in it.
//!
//! A long-running agent also keeps a watch cache ([`Cluster::with_watch_cache`],
//! [`crate::watch_cache`]): `prefetch` then takes the objects the cache may serve from memory and
//! reads only the rest from the cluster. The cache never answers "absent" (see its invariant), so
//! the plan reads the same objects with or without it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{GroupVersion, TypeMeta};
use kube::discovery::{self, ApiCapabilities, ApiResource};
use kube::{Client, Config};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::plan::{ObjectRef, Scope};
use crate::watch_cache::{CollectionKey, WatchCache, WatchStats, Written};

/// How a cluster is reached and how hard it may be pushed.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterOptions {
    /// The cluster's name in plans (`local` for the default cluster).
    pub name: String,
    /// Sustained requests per second.
    pub qps: f64,
    /// Requests allowed in a burst above the sustained rate.
    pub burst: u32,
    /// Connect and read timeout of each request.
    pub timeout: Duration,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            name: "local".to_owned(),
            // client-go's defaults are 5/10; a GitOps agent applying whole apps needs more, and
            // the apiserver's priority-and-fairness protects itself.
            qps: 20.0,
            burst: 40,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Connecting to a cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("reading kubeconfig {path}")]
    KubeconfigReadFailed {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("loading kubeconfig {path} (context {context})")]
    KubeconfigLoadFailed {
        path: PathBuf,
        context: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("building the client for cluster {cluster}")]
    ClientBuildFailed {
        cluster: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "cluster {cluster} was connected without a client configuration; impersonation needs one"
    )]
    ImpersonationUnavailable { cluster: String },
}

/// A connected cluster.
pub struct Cluster {
    name: String,
    client: Client,
    /// The client object reads and writes go through when a source applies as a
    /// ServiceAccount ([`Cluster::impersonating`]): the apiserver's RBAC for that account then
    /// decides. Trackers, discovery and lists stay with `client`, the agent's own identity.
    object_client: Option<Client>,
    /// How `client` was built, kept so that an impersonating client can be built from it.
    config: Option<kube::Config>,
    limiter: RateLimiter,
    /// Per `apiVersion`: the resources it serves, or `None` when the group-version is not served.
    discovery: Mutex<BTreeMap<String, Option<ServedResources>>>,
    /// Objects read in bulk by [`Cluster::prefetch`], as compact JSON text (parsed when taken:
    /// a namespace of 1,000 apps is ~3,500 live objects, several times larger as
    /// `serde_json::Value`s than as text): `None` when the listed collection did not
    /// hold the object. Each entry is taken at most once, so a later read asks the cluster again.
    prefetched: std::sync::Mutex<BTreeMap<ObjectRef, Option<Box<str>>>>,
    /// Requests made so far (every one takes a token first), for tests and benchmarks that
    /// check a plan's reads do not grow with the apps.
    requests: std::sync::atomic::AtomicU64,
    /// The watch cache, for an agent ([`Cluster::with_watch_cache`]).
    watch: Option<WatchCache>,
    /// The client's read timeout ([`ClusterOptions::timeout`]): a watch must end before it.
    timeout: Duration,
    /// Where requests are counted by verb and code ([`Cluster::counting_requests`]).
    kube_requests: Option<crate::kube_requests::KubeRequests>,
}

/// A client for `config`, its requests counted into `requests` when given.
fn build_client(
    config: kube::Config,
    cluster: &str,
    requests: Option<&crate::kube_requests::KubeRequests>,
) -> Result<Client, ClusterError> {
    let failed = |source| ClusterError::ClientBuildFailed {
        cluster: cluster.to_owned(),
        source,
    };
    match requests {
        None => Client::try_from(config).map_err(failed),
        Some(requests) => Ok(kube::client::ClientBuilder::try_from(config)
            .map_err(failed)?
            .with_layer(&requests.layer(cluster))
            .build()),
    }
}

/// A collection is listed instead of read object by object from this many wanted objects on:
/// below it, GETs cost fewer bytes than a LIST of a namespace that holds other things too.
const PREFETCH_MIN_OBJECTS: usize = 4;

/// Objects per LIST page: bounds the memory of one response at 10,000 apps.
const PREFETCH_PAGE: u32 = 500;

/// Collections [`Cluster::prefetch`] lists at once.
const PREFETCH_CONCURRENCY: usize = 4;

/// One page of a LIST response, its items kept as JSON.
#[derive(Debug, serde::Deserialize)]
struct ListPage {
    #[serde(default)]
    items: Vec<serde_json::Value>,
    #[serde(default)]
    metadata: kube::core::ListMeta,
}

/// A listed item as a GET would return it, by name: `apiVersion` and `kind` first (list items
/// come without them), without `metadata.managedFields` (nothing downstream reads them, diffs
/// drop them, and at 10,000 apps they are a large share of every live object held for the
/// plan). `None` for an item that is not an object with a name.
fn listed_object(item: serde_json::Value, types: &TypeMeta) -> Option<(String, serde_json::Value)> {
    let serde_json::Value::Object(mut fields) = item else {
        return None;
    };
    let metadata = fields.get_mut("metadata")?.as_object_mut()?;
    metadata.remove("managedFields");
    let name = metadata.get("name")?.as_str()?.to_owned();
    let mut object = serde_json::Map::with_capacity(fields.len() + 2);
    object.insert(
        "apiVersion".to_owned(),
        serde_json::Value::String(types.api_version.clone()),
    );
    object.insert(
        "kind".to_owned(),
        serde_json::Value::String(types.kind.clone()),
    );
    for (key, value) in fields {
        if key != "apiVersion" && key != "kind" {
            object.insert(key, value);
        }
    }
    Some((name, serde_json::Value::Object(object)))
}

/// What [`Cluster::prefetch`] did, for logs and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefetchStats {
    /// Collections (kind, namespace) listed.
    pub lists: usize,
    /// LIST requests, pages included.
    pub requests: usize,
    /// Wanted objects now answered from the snapshot (present or absent).
    pub objects: usize,
    /// Of those, taken from the watch cache.
    pub cached: usize,
}

/// The resources one group-version serves.
type ServedResources = Vec<(ApiResource, ApiCapabilities)>;

/// A kind resolved by discovery.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub resource: ApiResource,
    pub scope: Scope,
}

/// A token bucket in front of every API call.
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Cluster {
    /// Connects with a kubeconfig file and an optional context (the current context otherwise).
    ///
    /// # Errors
    ///
    /// [`ClusterError`] when the kubeconfig cannot be read or loaded, or the client not built.
    /// No request is made here: an unreachable apiserver shows up per object later.
    pub async fn connect(
        kubeconfig: &Path,
        context: Option<&str>,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        let file = Kubeconfig::read_from(kubeconfig).map_err(|source| {
            ClusterError::KubeconfigReadFailed {
                path: kubeconfig.to_owned(),
                source,
            }
        })?;
        Cluster::connect_kubeconfig(file, kubeconfig, context, options).await
    }

    /// [`Cluster::connect`] with a kubeconfig already read (or merged from several files, as
    /// `$KUBECONFIG` lists them); `path` names it in errors.
    ///
    /// # Errors
    ///
    /// See [`Cluster::connect`].
    pub async fn connect_kubeconfig(
        file: Kubeconfig,
        kubeconfig: &Path,
        context: Option<&str>,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        let kube_options = KubeConfigOptions {
            context: context.map(str::to_owned),
            ..KubeConfigOptions::default()
        };
        let mut config = Config::from_custom_kubeconfig(file, &kube_options)
            .await
            .map_err(|source| ClusterError::KubeconfigLoadFailed {
                path: kubeconfig.to_owned(),
                context: context.unwrap_or("current").to_owned(),
                source,
            })?;
        config.connect_timeout = Some(options.timeout);
        config.read_timeout = Some(options.timeout);
        config.write_timeout = Some(options.timeout);
        Cluster::from_config(config, options)
    }

    /// Connects with a client configuration (kubeconfig or in-cluster), keeping it so that
    /// [`Cluster::impersonating`] can build a client from it.
    ///
    /// # Errors
    ///
    /// [`ClusterError::ClientBuildFailed`] when the client cannot be built.
    pub fn from_config(
        config: kube::Config,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        let client = build_client(config.clone(), &options.name, None)?;
        let mut cluster = Cluster::from_client(client, options);
        cluster.config = Some(config);
        Ok(cluster)
    }

    /// The same cluster, with object reads and writes made as `user` through impersonation
    /// (`system:serviceaccount:<namespace>:<name>`), so that the apiserver's RBAC for that
    /// account bounds what is applied. The agent's own identity needs the `impersonate` verb
    /// on that ServiceAccount. No watch cache: every object read asks the apiserver as `user`.
    ///
    /// # Errors
    ///
    /// [`ClusterError::ImpersonationUnavailable`] when this cluster was not built from a
    /// configuration, [`ClusterError::ClientBuildFailed`] when the client cannot be built.
    pub fn impersonating(
        &self,
        user: &str,
        groups: Vec<String>,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        let Some(config) = &self.config else {
            return Err(ClusterError::ImpersonationUnavailable {
                cluster: self.name.clone(),
            });
        };
        let mut impersonated = config.clone();
        impersonated.auth_info.impersonate = Some(user.to_owned());
        impersonated.auth_info.impersonate_groups = Some(groups);
        let object_client = build_client(impersonated, &self.name, self.kube_requests.as_ref())?;
        let mut cluster = Cluster::from_client(self.client.clone(), options);
        cluster.kube_requests = self.kube_requests.clone();
        cluster.object_client = Some(object_client);
        cluster.config = Some(config.clone());
        Ok(cluster)
    }

    /// A cluster no request can reach (connections refused at once): every request counts,
    /// and fails. For tests that must show a path makes no request.
    #[cfg(test)]
    pub(crate) fn offline() -> Cluster {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a valid URL"));
        Cluster::from_client(
            Client::try_from(config).expect("a client for a plain-HTTP URL"),
            &ClusterOptions::default(),
        )
    }

    /// Wraps an existing client.
    pub fn from_client(client: Client, options: &ClusterOptions) -> Cluster {
        Cluster {
            name: options.name.clone(),
            client,
            object_client: None,
            config: None,
            limiter: RateLimiter::new(options.qps, options.burst),
            discovery: Mutex::new(BTreeMap::new()),
            prefetched: std::sync::Mutex::new(BTreeMap::new()),
            requests: std::sync::atomic::AtomicU64::new(0),
            watch: None,
            timeout: options.timeout,
            kube_requests: None,
        }
    }

    /// The same cluster with its requests, and those of the clients made from it by
    /// [`Cluster::impersonating`], counted into `requests` by verb and code (the agent's
    /// `/metrics`). Call before the first request; a cluster not built from a configuration
    /// is returned as it is.
    ///
    /// # Errors
    ///
    /// [`ClusterError::ClientBuildFailed`] when the client cannot be built again.
    pub fn counting_requests(
        mut self,
        requests: crate::kube_requests::KubeRequests,
    ) -> Result<Cluster, ClusterError> {
        if let Some(config) = &self.config {
            self.client = build_client(config.clone(), &self.name, Some(&requests))?;
            self.kube_requests = Some(requests);
        }
        Ok(self)
    }

    /// Keeps a watch cache of the collections plans read (for a long-running agent; a one-shot
    /// CLI run would only pay its lists). Its watchers run on the current tokio runtime.
    #[must_use]
    pub fn with_watch_cache(mut self) -> Cluster {
        self.watch = Some(WatchCache::new(self.timeout));
        self
    }

    /// What the watch cache holds; `None` without one.
    pub fn watch_stats(&self) -> Option<WatchStats> {
        self.watch.as_ref().map(WatchCache::stats)
    }

    /// Records one of our own writes of `object` for the watch cache, which then does not serve
    /// it until its watch shows the write (no-op without a cache). Only `writer` calls it (clippy
    /// `disallowed-methods`), after every create, apply, replace or delete, also a failed one
    /// (see [`written`]).
    pub fn wrote(&self, object: &ObjectRef, expect: Written) {
        if let Some(watch) = &self.watch {
            watch.wrote(object, expect);
        }
    }

    /// The objects of a collection the watch cache may serve (starting its watch if needed),
    /// as GETs return them, in name order; `None` when there is no cache, the kind is not
    /// served, or the collection is not synced yet. Objects with an own write the watch has not
    /// shown are left out: a missing object is not evidence of absence.
    pub async fn cached_collection(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Option<Vec<serde_json::Value>> {
        let watch = self.watch.as_ref()?;
        let key = CollectionKey {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
        };
        let state = self.watched(watch, &key).await?;
        let state = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let servable = state.servable()?;
        Some(
            servable
                .filter_map(|(_, json)| serde_json::from_str(json).ok())
                .collect(),
        )
    }

    /// The watched state of `key`, starting its watch when it is not watched yet.
    async fn watched(
        &self,
        watch: &WatchCache,
        key: &CollectionKey,
    ) -> Option<std::sync::Arc<std::sync::Mutex<crate::watch_cache::CollectionState>>> {
        if let Some(state) = watch.collection(key) {
            return Some(state);
        }
        let Ok(Some(resolved)) = self.resolve(&key.api_version, &key.kind).await else {
            return None;
        };
        let api: Api<DynamicObject> = match (&resolved.scope, &key.namespace) {
            (Scope::Namespaced, Some(namespace)) => {
                Api::namespaced_with(self.client.clone(), namespace, &resolved.resource)
            }
            (Scope::Cluster, None) => Api::all_with(self.client.clone(), &resolved.resource),
            _ => return None,
        };
        watch.watch(key, api)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits for a request token. Call before every API request not made through [`Cluster::api`].
    pub async fn throttle(&self) {
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.limiter.acquire().await;
    }

    /// How many requests this client has made (tokens taken) since it was connected.
    pub fn requests(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The client, for requests the caller throttles itself.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Resolves a kind to its API resource and scope; `Ok(None)` when the cluster does not serve
    /// it (an unknown group-version or kind: a CRD not installed).
    ///
    /// # Errors
    ///
    /// The discovery request failed for another reason than the group-version not existing.
    pub async fn resolve(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Resolved>, kube::Error> {
        let mut cache = self.discovery.lock().await;
        if !cache.contains_key(api_version) {
            let group_version: GroupVersion = api_version
                .parse()
                .unwrap_or_else(|_| GroupVersion::gv("", api_version));
            self.throttle().await;
            let served = match discovery::pinned_group(&self.client, &group_version).await {
                Ok(group) => Some(group.versioned_resources(&group_version.version)),
                Err(kube::Error::Api(status)) if status.code == 404 => None,
                Err(error) => return Err(error),
            };
            cache.insert(api_version.to_owned(), served);
        }
        let resolved = cache
            .get(api_version)
            .and_then(Option::as_ref)
            .and_then(|resources| {
                resources
                    .iter()
                    .find(|(resource, _)| resource.kind == kind)
                    .map(|(resource, capabilities)| Resolved {
                        resource: resource.clone(),
                        scope: match capabilities.scope {
                            discovery::Scope::Cluster => Scope::Cluster,
                            discovery::Scope::Namespaced => Scope::Namespaced,
                        },
                    })
            });
        Ok(resolved)
    }

    /// Reads the wanted objects in bulk: one paged LIST per (kind, namespace) that holds at least
    /// [`PREFETCH_MIN_OBJECTS`] of them. Collections below that, kinds the cluster does not
    /// serve, and LISTs that fail (RBAC may allow `get` but not `list`) are left to per-object
    /// reads, so the result of a plan never depends on whether its objects were prefetched.
    pub async fn prefetch(&self, wanted: Vec<ObjectRef>) -> PrefetchStats {
        let mut collections: BTreeMap<(String, String, Option<String>), Vec<ObjectRef>> =
            BTreeMap::new();
        for object in wanted {
            collections
                .entry((
                    object.api_version.clone(),
                    object.kind.clone(),
                    object.namespace.clone(),
                ))
                .or_default()
                .push(object);
        }
        // Collections are listed a few at a time (each still within the QPS budget): a page
        // of 500 objects costs the apiserver a large fraction of a second, and at 10,000 apps
        // one after the other was most of a plan's wall time.
        let mut pending = Vec::new();
        let mut cached = 0;
        for ((api_version, kind, namespace), mut objects) in collections {
            if let Some(watch) = &self.watch {
                let key = CollectionKey {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                };
                if let Some(state) = self.watched(watch, &key).await {
                    let served = self.take_from_cache(&state, &mut objects);
                    cached += served;
                }
            }
            if objects.len() < PREFETCH_MIN_OBJECTS {
                continue;
            }
            pending.push(self.prefetch_collection(api_version, kind, namespace, objects));
        }
        let listed: Vec<Option<(usize, usize)>> = futures::stream::iter(pending)
            .buffer_unordered(PREFETCH_CONCURRENCY)
            .collect()
            .await;
        let mut stats = PrefetchStats {
            cached,
            objects: cached,
            ..PrefetchStats::default()
        };
        for (requests, objects) in listed.into_iter().flatten() {
            stats.lists += 1;
            stats.requests += requests;
            stats.objects += objects;
        }
        stats
    }

    /// Moves into the snapshot the wanted `objects` the watch cache may serve (present, synced,
    /// no own write pending) and leaves the others in `objects`, for the cluster to answer.
    /// Returns how many were served.
    fn take_from_cache(
        &self,
        state: &std::sync::Mutex<crate::watch_cache::CollectionState>,
        objects: &mut Vec<ObjectRef>,
    ) -> usize {
        let state = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !state.synced() {
            return 0;
        }
        let mut snapshot = self
            .prefetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = objects.len();
        objects.retain(|object| {
            if snapshot.contains_key(object) {
                return false;
            }
            let Some(live) = state.get(&object.name) else {
                return true;
            };
            // Kept as the cache's text; parsed (once) when taken.
            snapshot.insert(object.clone(), Some(live.into()));
            false
        });
        before - objects.len()
    }

    /// Lists one collection for [`Cluster::prefetch`] and keeps the wanted `objects` of it;
    /// `Some((requests, objects))` when it was listed.
    async fn prefetch_collection(
        &self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        objects: Vec<ObjectRef>,
    ) -> Option<(usize, usize)> {
        let Ok(Some(resolved)) = self.resolve(&api_version, &kind).await else {
            return None;
        };
        let api: Api<DynamicObject> = match (&resolved.scope, &namespace) {
            (Scope::Namespaced, Some(namespace)) => {
                Api::namespaced_with(self.client.clone(), namespace, &resolved.resource)
            }
            (Scope::Cluster, None) => Api::all_with(self.client.clone(), &resolved.resource),
            // A scope mismatch is reported by the per-object path; do not guess here.
            _ => return None,
        };
        let types = TypeMeta { api_version, kind };
        let (mut listed, requests) = self.list_all(&api, &types).await?;
        let wanted = objects.len();
        let mut snapshot = self
            .prefetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for object in objects {
            // Moved out, not copied; an object wanted twice (two apps render it) keeps the
            // entry of its first mention.
            if snapshot.contains_key(&object) {
                continue;
            }
            let live = listed.remove(&object.name);
            snapshot.insert(object, live);
        }
        Some((requests, wanted))
    }

    /// Every object of a collection by name, LISTed page by page (each page throttled), with the
    /// `apiVersion` and `kind` a GET would return (list items come without them); `None` when a
    /// page fails. Also returns the number of requests made.
    ///
    /// Pages are read straight into JSON values ([`ListPage`]) rather than typed objects that
    /// are then converted: at 10,000 apps that copy of ~35,000 objects was seconds of a plan.
    /// Each page's objects are kept as compact text as soon as it is read, so a list holds one
    /// page of values at a time.
    async fn list_all(
        &self,
        api: &Api<DynamicObject>,
        types: &TypeMeta,
    ) -> Option<(BTreeMap<String, Box<str>>, usize)> {
        let mut objects = BTreeMap::new();
        let mut params = ListParams::default().limit(PREFETCH_PAGE);
        let mut requests = 0;
        loop {
            self.throttle().await;
            requests += 1;
            let page = match self.list_page(api, &params).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::debug!(error = %describe_error(&error), "bulk read failed; reading objects one by one");
                    return None;
                }
            };
            for item in page.items {
                if let Some((name, object)) = listed_object(item, types) {
                    let text =
                        serde_json::to_string(&object).expect("a JSON value always serialises");
                    objects.insert(name, text.into_boxed_str());
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return Some((objects, requests)),
            }
        }
    }

    /// One LIST page of `api`'s collection, as [`Api::list`] requests it.
    async fn list_page(
        &self,
        api: &Api<DynamicObject>,
        params: &ListParams,
    ) -> Result<ListPage, kube::Error> {
        crate::writer::list_page::<ListPage>(self, api.resource_url(), params).await
    }

    /// The object as the last [`Cluster::prefetch`] found it: `Some(None)` when it was absent,
    /// `None` when it was not prefetched (or already taken): read it from the cluster then.
    pub fn take_prefetched(&self, object: &ObjectRef) -> Option<Option<serde_json::Value>> {
        let taken = self
            .prefetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(object)?;
        match taken {
            None => Some(None),
            // Text this process wrote from a value or a watch event; one that does not parse is
            // read from the cluster, as if it had not been prefetched.
            Some(text) => serde_json::from_str(&text).ok().map(Some),
        }
    }

    /// Drops whatever the last prefetch read and nobody took: reads after a plan (health after
    /// an apply, the next plan) must see the cluster as it is then.
    pub fn clear_prefetched(&self) {
        self.prefetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    /// Forgets what discovery knew about a group-version (after applying a CRD serving it).
    pub async fn forget(&self, api_version: &str) {
        self.discovery.lock().await.remove(api_version);
    }

    /// A throttled handle on one object's resource.
    pub async fn api(&self, resolved: &Resolved, object: &ObjectRef) -> Api<DynamicObject> {
        self.throttle().await;
        let client = self.object_client.as_ref().unwrap_or(&self.client).clone();
        match (&resolved.scope, &object.namespace) {
            (Scope::Namespaced, Some(namespace)) => {
                Api::namespaced_with(client, namespace, &resolved.resource)
            }
            _ => Api::all_with(client, &resolved.resource),
        }
    }
}

impl RateLimiter {
    /// A bucket holding `burst` tokens, refilled at `qps` per second. A non-positive rate means
    /// no limit.
    pub fn new(qps: f64, burst: u32) -> RateLimiter {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            qps,
            burst,
            state: Mutex::new(Bucket {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Takes one token, waiting for it when the bucket is empty. Waiters are served in order:
    /// the lock is held while waiting.
    pub async fn acquire(&self) {
        if self.qps <= 0.0 {
            return;
        }
        let mut bucket = self.state.lock().await;
        let now = Instant::now();
        let refill = now.duration_since(bucket.last).as_secs_f64() * self.qps;
        bucket.tokens = (bucket.tokens + refill).min(self.burst);
        bucket.last = now;
        if bucket.tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - bucket.tokens) / self.qps);
            tokio::time::sleep(wait).await;
            bucket.tokens = 1.0;
            bucket.last = Instant::now();
        }
        bucket.tokens -= 1.0;
    }
}

/// What the watch cache should expect after one of our writes that answered `result`: what
/// `expect` reads from a success (the written object's resourceVersion, or its absence when a
/// delete answered with a status); nothing for a definite refusal (an HTTP status below 500
/// changed nothing); unknown for anything else (a timeout may have written).
pub fn written<T>(
    result: &Result<T, kube::Error>,
    expect: impl FnOnce(&T) -> Written,
) -> Option<Written> {
    match result {
        Ok(value) => Some(expect(value)),
        Err(kube::Error::Api(status)) if status.code < 500 => None,
        Err(_) => Some(Written::Unknown),
    }
}

/// A clear, one-line description of a failed API call, for per-object errors in plans.
pub fn describe_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let what = match status.code {
                401 => "unauthorized",
                403 => "forbidden (RBAC)",
                404 => "not found",
                409 => "conflict",
                422 => "rejected as invalid (validation or admission)",
                400 => "bad request (admission or validation)",
                429 => "throttled by the apiserver",
                500..=599 => "apiserver error",
                _ => "request failed",
            };
            let message = if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            };
            format!("{what} ({}): {message}", status.code)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            format!("apiserver unreachable or timed out: {}", error_chain(error))
        }
        other => error_chain(other),
    }
}

/// What [`describe_error`] writes for failures that pass by themselves: the apiserver
/// unreachable or timing out, answering 5xx or 429, or a write losing a race (409).
const TRANSIENT: [&str; 5] = [
    "apiserver unreachable or timed out",
    "apiserver error (5",
    "throttled by the apiserver (429)",
    "conflict (409)",
    // A resource tracker written by someone else between our read and our write.
    "was changed by someone else meanwhile",
];

/// True when a failure's description (made by [`describe_error`], possibly within a longer
/// message) says it may pass by itself, so the work is worth trying again later.
pub fn is_transient(description: &str) -> bool {
    TRANSIENT.iter().any(|marker| description.contains(marker))
}

/// True when the apiserver answered with this HTTP status.
pub fn has_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_a_burst_then_the_rate() {
        let limiter = RateLimiter::new(10.0, 3);
        let start = Instant::now();
        for _ in 0..3 {
            limiter.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst is free");
        for _ in 0..5 {
            limiter.acquire().await;
        }
        // Five more tokens at 10 per second take half a second of (paused, virtual) time.
        let elapsed = start.elapsed().as_secs_f64();
        assert!((0.49..0.52).contains(&elapsed), "{elapsed}");
    }

    #[test]
    fn listed_items_read_as_a_get_would_return_them_without_managed_fields() {
        let page: ListPage = serde_json::from_str(
            r#"{"kind": "ConfigMapList", "apiVersion": "v1",
                "metadata": {"resourceVersion": "42", "continue": "next"},
                "items": [
                  {"metadata": {"name": "a", "namespace": "team", "resourceVersion": "7",
                                "managedFields": [{"manager": "driftless"}]},
                   "data": {"k": "v"}},
                  {"metadata": {"namespace": "team"}},
                  "not an object"
                ]}"#,
        )
        .unwrap();
        assert_eq!(page.metadata.continue_.as_deref(), Some("next"));
        let types = TypeMeta {
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
        };
        let listed: Vec<(String, serde_json::Value)> = page
            .items
            .into_iter()
            .filter_map(|item| listed_object(item, &types))
            .collect();
        assert_eq!(
            listed.len(),
            1,
            "items without a name are skipped: {listed:?}"
        );
        let (name, object) = &listed[0];
        assert_eq!(name, "a");
        assert_eq!(
            serde_json::to_string(object).unwrap(),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"team","resourceVersion":"7"},"data":{"k":"v"}}"#
        );
    }

    #[test]
    fn api_errors_say_what_went_wrong() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: message.to_owned(),
                ..kube::core::Status::default()
            }))
        };
        assert_eq!(
            describe_error(&status(403, "configmaps is forbidden")),
            "forbidden (RBAC) (403): configmaps is forbidden"
        );
        assert!(
            describe_error(&status(422, "spec.replicas: Invalid"))
                .starts_with("rejected as invalid")
        );
        assert!(has_status(&status(409, "x"), 409));
    }

    #[test]
    fn outages_throttling_and_races_are_transient_and_refusals_are_not() {
        let status = |code: u16| {
            describe_error(&kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: "m".to_owned(),
                ..kube::core::Status::default()
            })))
        };
        let unreachable = describe_error(&kube::Error::Service("connection refused".into()));
        for transient in [
            status(500),
            status(503),
            status(429),
            status(409),
            unreachable,
        ] {
            assert!(
                is_transient(&format!("v1/ConfigMap x: {transient}")),
                "{transient}"
            );
        }
        for refusal in [status(400), status(403), status(404), status(422)] {
            assert!(!is_transient(&refusal), "{refusal}");
        }
    }
}

#[cfg(test)]
mod watch_cache_tests {
    use super::*;
    use crate::watch_cache::{Change, CollectionState};

    fn config_map(name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            namespace: Some("team".to_owned()),
            name: name.to_owned(),
        }
    }

    #[tokio::test]
    async fn the_cache_answers_only_present_objects_and_leaves_absence_to_the_cluster() {
        let cluster = Cluster::offline();
        let state = std::sync::Mutex::new(CollectionState::default());
        let mut wanted = vec![config_map("held"), config_map("missing")];
        assert_eq!(
            cluster.take_from_cache(&state, &mut wanted),
            0,
            "not synced: nothing served"
        );
        assert_eq!(wanted.len(), 2);

        {
            let mut state = state.lock().unwrap();
            state.apply(Change::ListStart { writes_before: 0 });
            state.apply(Change::Listed {
                name: "held".to_owned(),
                version: "3".to_owned(),
                json: r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held"}}"#.into(),
            });
            state.apply(Change::ListDone);
        }
        assert_eq!(cluster.take_from_cache(&state, &mut wanted), 1);
        assert_eq!(
            wanted,
            [config_map("missing")],
            "an object the cache does not hold is read from the cluster"
        );
        let taken = cluster.take_prefetched(&config_map("held"));
        assert_eq!(
            taken.flatten().unwrap()["metadata"]["name"],
            serde_json::json!("held")
        );
        assert_eq!(
            cluster.take_prefetched(&config_map("missing")),
            None,
            "never recorded as absent"
        );
    }

    #[test]
    fn writes_are_recorded_by_their_answer() {
        let ok: Result<String, kube::Error> = Ok("5".to_owned());
        assert_eq!(
            written(&ok, |version| Written::Version(version.clone())),
            Some(Written::Version("5".to_owned()))
        );
        let status = |code: u16| {
            Err::<String, _>(kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..kube::core::Status::default()
            })))
        };
        assert_eq!(
            written(&status(409), |_| Written::Gone),
            None,
            "refused: nothing written"
        );
        assert_eq!(
            written(&status(503), |_| Written::Gone),
            Some(Written::Unknown)
        );
    }

    #[tokio::test]
    #[allow(clippy::disallowed_methods, reason = "a test of the note itself")]
    async fn without_a_cache_writes_and_cached_reads_are_no_ops() {
        let cluster = Cluster::offline();
        cluster.wrote(&config_map("a"), Written::Gone);
        assert_eq!(cluster.watch_stats(), None);
        assert_eq!(
            cluster
                .cached_collection("v1", "ConfigMap", Some("team"))
                .await,
            None
        );
        assert_eq!(cluster.requests(), 0);
    }
}
