//! Bulk reads: one paged LIST per (kind, namespace) instead of one GET per object, taken from
//! the watch cache where it may serve them (see the parent module's doc).

use std::collections::BTreeMap;

use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::TypeMeta;

use super::{Cluster, describe_error};
use crate::plan::{ObjectRef, Scope};
use crate::watch_cache::CollectionKey;

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

impl Cluster {
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
    pub(super) fn take_from_cache(
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
