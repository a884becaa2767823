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
        for (app, objects) in changed {
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
