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

use kube::api::{Api, DynamicObject};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersion;
use kube::discovery::{self, ApiCapabilities, ApiResource};
use kube::{Client, Config};
use tokio::sync::Mutex;

use crate::plan::{ObjectRef, Scope};
use crate::watch_cache::{CollectionKey, WatchCache, WatchStats, Written};

mod errors;
mod prefetch;
mod rate;

pub use errors::{describe_error, has_status, is_transient};
pub use prefetch::PrefetchStats;
pub use rate::RateLimiter;

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

/// The resources one group-version serves.
type ServedResources = Vec<(ApiResource, ApiCapabilities)>;

/// A kind resolved by discovery.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub resource: ApiResource,
    pub scope: Scope,
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
