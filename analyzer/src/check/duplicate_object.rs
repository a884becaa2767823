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

/// Which apps render which object identities, kept across analyses by the incremental cache
/// so that a commit updates it for the apps it changed only (issue #9), instead of indexing
/// every object of every app again. The uncached analysis fills a fresh one with every app:
/// one code path, so both give the same diagnostics.
#[derive(Debug, Default)]
pub(crate) struct ObjectIndex {
    /// Per app, each key it renders with the indices of the objects that have it.
    by_app: BTreeMap<AppRef, Vec<(Arc<ObjectKey>, Vec<usize>)>>,
    /// Per key, the apps that render it (in app order) with their object indices.
    by_key: BTreeMap<Arc<ObjectKey>, BTreeMap<AppRef, Vec<usize>>>,
    /// The keys rendered by more than one app.
    shared: BTreeSet<Arc<ObjectKey>>,
}

impl ObjectIndex {
    /// Brings the index up to `apps` (sorted by app, as the analysis orders them), where
    /// `changed[i]` says whether `apps[i]` may render other objects than when last indexed
    /// (new, re-rendered); apps not in `apps` are dropped from the index.
    pub(crate) fn update(&mut self, apps: &[RenderedApp], changed: &[bool]) {
        // Apps gone since the last update: a merge walk over two sorted lists.
        let mut gone: Vec<AppRef> = Vec::new();
        let mut current = apps.iter().map(|app| &app.app).peekable();
        for indexed in self.by_app.keys() {
            while current.next_if(|app| *app < indexed).is_some() {}
            if current.peek() != Some(&indexed) {
                gone.push(indexed.clone());
            }
        }
        for app in &gone {
            self.remove(app);
        }
        for (app, _) in apps.iter().zip(changed).filter(|(_, changed)| **changed) {
            self.remove(&app.app);
            let mut keys: BTreeMap<ObjectKey, Vec<usize>> = BTreeMap::new();
            for (object_index, object) in app.objects.iter().enumerate() {
                if let Some(key) = key_of(object, &app.app.namespace) {
                    keys.entry(key).or_default().push(object_index);
                }
            }
            let mut entries = Vec::with_capacity(keys.len());
            for (key, objects) in keys {
                let key = Arc::new(key);
                let owners = self.by_key.entry(key.clone()).or_default();
                owners.insert(app.app.clone(), objects.clone());
                if owners.len() > 1 {
                    self.shared.insert(key.clone());
                }
                entries.push((key, objects));
            }
            self.by_app.insert(app.app.clone(), entries);
        }
    }

    fn remove(&mut self, app: &AppRef) {
        let Some(entries) = self.by_app.remove(app) else {
            return;
        };
        for (key, _) in entries {
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

/// Reports every object that an earlier app (in app order) also renders, from `index` brought
/// up to `apps` (see [`ObjectIndex::update`]): work in the number of shared objects, not of
/// apps.
pub(crate) fn check(loaded: &[Arc<LoadedApp>], apps: &mut [RenderedApp], index: &ObjectIndex) {
    let position = |app: &AppRef| apps.binary_search_by(|rendered| rendered.app.cmp(app)).ok();
    // (app index, object index, diagnostic): each app's in object order, as a scan of its
    // objects would find them.
    let mut found: Vec<(usize, usize, Diagnostic)> = Vec::new();
    for key in &index.shared {
        let Some(owners) = index.by_key.get(key) else {
            continue;
        };
        let mut owners = owners.iter();
        let Some((first_ref, first_objects)) = owners.next() else {
            continue;
        };
        let (Some(first_app), Some(&first_object)) = (position(first_ref), first_objects.first())
        else {
            continue;
        };
        let first = &apps[first_app];
        let first_span = component_span(&loaded[first_app], &first.objects[first_object]);
        let (_, kind, namespace, name) = key.as_ref();
        for (app_ref, objects) in owners {
            let Some(app_index) = position(app_ref) else {
                continue;
            };
            let app = &apps[app_index];
            for &object_index in objects {
                let object = &app.objects[object_index];
                let span = component_span(&loaded[app_index], object);
                let mut diagnostic = Diagnostic::error(
                    "duplicate-object",
                    format!(
                        "{kind} {namespace}/{name} is also rendered by app {}",
                        first.app
                    ),
                    Some(span),
                )
                .for_app(&app.app)
                .with_label(first_span, format!("rendered by app {} here", first.app));
                if loaded[app_index]
                    .app
                    .spec
                    .components
                    .iter()
                    .any(|component| component.name == object.component)
                {
                    diagnostic = diagnostic.for_component(&object.component);
                }
                found.push((app_index, object_index, diagnostic));
            }
        }
    }
    found.sort_by_key(|(app_index, object_index, _)| (*app_index, *object_index));
    for (app_index, _, diagnostic) in found {
        apps[app_index].diagnostics.push(diagnostic);
    }
}

fn key_of(object: &RenderedObject, app_namespace: &str) -> Option<ObjectKey> {
    let value = &object.object;
    let api_version = value.get("apiVersion")?.as_str()?;
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = value.get("kind")?.as_str()?;
    let name = value.pointer("/metadata/name")?.as_str()?;
    let namespace = value
        .pointer("/metadata/namespace")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(app_namespace);
    Some((
        group.to_owned(),
        kind.to_owned(),
        namespace.to_owned(),
        name.to_owned(),
    ))
}

fn component_span(loaded: &LoadedApp, object: &RenderedObject) -> cue::Span {
    let positions = &loaded.document.positions;
    match loaded
        .app
        .spec
        .components
        .iter()
        .position(|component| component.name == object.component)
    {
        Some(index) => positions.value_span(&format!("/spec/components/{index}/name")),
        None => positions.value_span("/metadata/name"),
    }
}
