//! `duplicate-object` (error): two Applications render the same Kubernetes object (same API
//! group, kind, namespace and name).
//!
//! Each app's apply would overwrite the other's, and each prune would delete it. The first
//! app (in app order: namespace, then name) keeps the object; the later one is blocked, with
//! a label at the first app's component.
//!
//! ```yaml
//! # apps/a.yaml and apps/b.yaml, both in namespace `shop`:
//! components:
//!   - name: web               # error in the second app: Deployment shop/web is also rendered by app shop/a
//!     type: webservice
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::load::application::LoadedApp;
use crate::{AppRef, Diagnostic, RenderedApp, RenderedObject};

/// `(group, kind, namespace, name)`.
type ObjectKey = (String, String, String, String);

/// The apps that render one key, each with `(object index, component)` of its objects that
/// have it.
type Owners = BTreeMap<AppRef, Vec<(usize, String)>>;

/// The identities of the objects one app rendered: `(key, object index, component)`, taken
/// before severities apply (a blocked app's objects still count, as they did when this rule
/// scanned the apps directly).
pub(crate) type AppObjects = Vec<(ObjectKey, usize, String)>;

/// Which apps render which object identities, kept across analyses by the incremental cache
/// so that a commit updates it for the apps it changed only (issue #9), instead of indexing
/// every object of every app again. The uncached analysis fills a fresh one with every app:
/// one code path, so both give the same diagnostics.
#[derive(Debug, Default)]
pub(crate) struct ObjectIndex {
    /// Per app, the keys it renders.
    by_app: BTreeMap<AppRef, Vec<Arc<ObjectKey>>>,
    /// Per key, the apps that render it (in app order).
    by_key: BTreeMap<Arc<ObjectKey>, Owners>,
    /// The keys rendered by more than one app.
    shared: BTreeSet<Arc<ObjectKey>>,
}

/// The identities of `app`'s objects, for [`ObjectIndex::update`].
pub(crate) fn objects_of(app: &RenderedApp) -> AppObjects {
    app.objects
        .iter()
        .enumerate()
        .filter_map(|(object_index, object)| {
            key_of(object, &app.app.namespace)
                .map(|key| (key, object_index, object.component.clone()))
        })
        .collect()
}

impl ObjectIndex {
    /// Brings the index up to an analysis whose apps are `apps` (sorted, as the analysis
    /// orders them): apps not among them are dropped, and each app of `changed` (new or
    /// re-rendered) is indexed again with its objects. The index holds every app it was given
    /// (with or without objects), so apps are gone only when it holds more than `apps`: only
    /// then are they walked.
    pub(crate) fn update<'a>(
        &mut self,
        apps: impl ExactSizeIterator<Item = &'a AppRef>,
        changed: impl Iterator<Item = (&'a AppRef, &'a AppObjects)>,
    ) {
        let n_apps = apps.len();
        let changed = if self.by_app.is_empty() {
            // A fresh index (every uncached analysis, a cache's first): built in one pass.
            self.build(changed);
            None
        } else {
            Some(changed)
        };
        for (app, objects) in changed.into_iter().flatten() {
            self.remove(app);
            let mut keys: BTreeMap<&ObjectKey, Vec<(usize, String)>> = BTreeMap::new();
            for (key, object_index, component) in objects {
                keys.entry(key)
                    .or_default()
                    .push((*object_index, component.clone()));
            }
            let mut entries = Vec::with_capacity(keys.len());
            for (key, objects) in keys {
                let key = Arc::new(key.clone());
                let owners = self.by_key.entry(key.clone()).or_default();
                owners.insert(app.clone(), objects);
                if owners.len() > 1 {
                    self.shared.insert(key.clone());
                }
                entries.push(key);
            }
            self.by_app.insert(app.clone(), entries);
        }
        if self.by_app.len() == n_apps {
            return;
        }
        // Apps gone since the last update: a merge walk over two sorted lists.
        let mut gone: Vec<AppRef> = Vec::new();
        let mut current = apps.peekable();
        for indexed in self.by_app.keys() {
            while current.next_if(|app| *app < indexed).is_some() {}
            if current.peek() != Some(&indexed) {
                gone.push(indexed.clone());
            }
        }
        for app in &gone {
            self.remove(app);
        }
    }

    /// Fills an empty index with `changed`: what [`Self::update`]'s per-app inserts give, from
    /// one stable sort of every object by key and maps built from sorted runs (on the serial
    /// path of every analysis: at 10,000 apps the inserts one by one were ~0.2 G instructions).
    fn build<'a>(&mut self, changed: impl Iterator<Item = (&'a AppRef, &'a AppObjects)>) {
        let mut app_refs: Vec<&AppRef> = Vec::new();
        // `(key, app, object index, component)`, apps in the order given, objects in theirs.
        let mut rows: Vec<(&ObjectKey, usize, usize, &String)> = Vec::new();
        for (app, objects) in changed {
            let app_index = app_refs.len();
            app_refs.push(app);
            rows.extend(
                objects.iter().map(|(key, object_index, component)| {
                    (key, app_index, *object_index, component)
                }),
            );
        }
        // Stable: within one key, the rows stay in app order, then object order.
        rows.sort_by(|a, b| a.0.cmp(b.0));
        let mut per_app: Vec<Vec<Arc<ObjectKey>>> = vec![Vec::new(); app_refs.len()];
        let mut by_key = Vec::new();
        let mut shared = Vec::new();
        for same_key in rows.chunk_by(|a, b| a.0 == b.0) {
            let Some(&(key, ..)) = same_key.first() else {
                continue;
            };
            let key = Arc::new(key.clone());
            let mut owners = Owners::new();
            for same_app in same_key.chunk_by(|a, b| a.1 == b.1) {
                let Some((&(_, app_index, ..), app)) = same_app
                    .first()
                    .and_then(|row| Some((row, app_refs.get(row.1)?)))
                else {
                    continue;
                };
                let objects = same_app
                    .iter()
                    .map(|(_, _, object_index, component)| (*object_index, (*component).clone()))
                    .collect();
                owners.insert((*app).clone(), objects);
                if let Some(keys) = per_app.get_mut(app_index) {
                    keys.push(key.clone());
                }
            }
            if owners.len() > 1 {
                shared.push(key.clone());
            }
            by_key.push((key, owners));
        }
        // Sorted runs: the maps are built in bulk, not by repeated descent.
        self.by_key = by_key.into_iter().collect();
        self.shared = shared.into_iter().collect();
        self.by_app = app_refs
            .into_iter()
            .zip(per_app)
            .map(|(app, keys)| (app.clone(), keys))
            .collect();
    }

    fn remove(&mut self, app: &AppRef) {
        let Some(keys) = self.by_app.remove(app) else {
            return;
        };
        for key in keys {
            let Some(owners) = self.by_key.get_mut(&key) else {
                continue;
            };
            owners.remove(app);
            if owners.len() < 2 {
                self.shared.remove(&key);
            }
            if owners.is_empty() {
                self.by_key.remove(&key);
            }
        }
    }
}

/// Every object that an earlier app (in app order) also renders, as `(app index,
/// diagnostic)`, each app's in object order: from `index` brought up to `loaded` (see
/// [`ObjectIndex::update`]), so the work is in the number of shared objects, not of apps.
pub(crate) fn check(loaded: &[Arc<LoadedApp>], index: &ObjectIndex) -> Vec<(usize, Diagnostic)> {
    let position = |app: &AppRef| {
        loaded
            .binary_search_by(|loaded| loaded.app_ref.cmp(app))
            .ok()
    };
    let mut found: Vec<(usize, usize, Diagnostic)> = Vec::new();
    for key in &index.shared {
        let Some(owners) = index.by_key.get(key) else {
            continue;
        };
        let mut owners = owners.iter();
        let Some((first_ref, first_objects)) = owners.next() else {
            continue;
        };
        let (Some(first_app), Some((_, first_component))) =
            (position(first_ref), first_objects.first())
        else {
            continue;
        };
        let first_span = component_span(&loaded[first_app], first_component);
        let (_, kind, namespace, name) = key.as_ref();
        for (app_ref, objects) in owners {
            let Some(app_index) = position(app_ref) else {
                continue;
            };
            let app = &loaded[app_index];
            for (object_index, component) in objects {
                let span = component_span(app, component);
                let mut diagnostic = Diagnostic::error(
                    "duplicate-object",
                    format!("{kind} {namespace}/{name} is also rendered by app {first_ref}"),
                    Some(span),
                )
                .for_app(app_ref)
                .with_label(first_span, format!("rendered by app {first_ref} here"));
                if app
                    .app
                    .spec
                    .components
                    .iter()
                    .any(|candidate| candidate.name == *component)
                {
                    diagnostic = diagnostic.for_component(component);
                }
                found.push((app_index, *object_index, diagnostic));
            }
        }
    }
    found.sort_by_key(|(app_index, object_index, _)| (*app_index, *object_index));
    found
        .into_iter()
        .map(|(app_index, _, diagnostic)| (app_index, diagnostic))
        .collect()
}

fn key_of(object: &RenderedObject, app_namespace: &str) -> Option<ObjectKey> {
    let value = &object.object;
    let api_version = value.get("apiVersion")?.as_str()?;
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = value.get("kind")?.as_str()?;
    // `get` rather than `pointer`: serde_json's pointer allocates a string per segment.
    let metadata = value.get("metadata")?;
    let name = metadata.get("name")?.as_str()?;
    let namespace = metadata
        .get("namespace")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(app_namespace);
    Some((
        group.to_owned(),
        kind.to_owned(),
        namespace.to_owned(),
        name.to_owned(),
    ))
}

fn component_span(loaded: &LoadedApp, component: &str) -> cue::Span {
    let positions = &loaded.document.positions;
    match loaded
        .app
        .spec
        .components
        .iter()
        .position(|candidate| candidate.name == component)
    {
        Some(index) => positions.value_span(&format!("/spec/components/{index}/name")),
        None => positions.value_span("/metadata/name"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(namespace: &str, name: &str) -> AppRef {
        AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    fn key(kind: &str, name: &str) -> ObjectKey {
        (
            "apps".to_owned(),
            kind.to_owned(),
            "ns".to_owned(),
            name.to_owned(),
        )
    }

    /// The one-pass build of a fresh index equals the per-app inserts on top of an index that
    /// already holds the first app: same keys per app, same owners in the same object order,
    /// same shared keys.
    #[test]
    fn a_fresh_index_built_in_one_pass_equals_per_app_inserts() {
        let apps = [
            app("a", "one"),
            app("a", "two"),
            app("b", "one"),
            app("b", "zero"),
        ];
        let objects: Vec<AppObjects> = vec![
            // Two objects of one key in one app, one key shared with every other app.
            vec![
                (key("Deployment", "web"), 0, "web".to_owned()),
                (key("Service", "web"), 1, "web".to_owned()),
                (key("Deployment", "web"), 2, "extra".to_owned()),
            ],
            vec![
                (key("Service", "web"), 0, "svc".to_owned()),
                (key("ConfigMap", "c"), 1, "svc".to_owned()),
            ],
            Vec::new(),
            vec![
                (key("ConfigMap", "c"), 3, "cfg".to_owned()),
                (key("Deployment", "web"), 0, "web".to_owned()),
                (key("Secret", "s"), 1, "cfg".to_owned()),
            ],
        ];
        let mut built = ObjectIndex::default();
        built.update(apps.iter(), apps.iter().zip(&objects));
        let mut inserted = ObjectIndex::default();
        inserted.update(apps[..1].iter(), apps[..1].iter().zip(&objects[..1]));
        inserted.update(apps.iter(), apps[1..].iter().zip(&objects[1..]));
        assert_eq!(format!("{built:?}"), format!("{inserted:?}"));
        assert_eq!(built.by_app.len(), 4);
        assert_eq!(built.shared.len(), 3);
        let owners = &built.by_key[&key("Deployment", "web")];
        assert_eq!(
            owners[&app("a", "one")],
            [(0, "web".to_owned()), (2, "extra".to_owned())]
        );
    }
}
