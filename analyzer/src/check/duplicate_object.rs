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
/// so that a commit updates it for the apps it changed only, instead of indexing
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
        let first = First::new(&loaded[first_app], first_component);
        for (app_ref, objects) in owners {
            let Some(app_index) = position(app_ref) else {
                continue;
            };
            for (object_index, component) in objects {
                let diagnostic = first.finding(&loaded[app_index], key, component);
                found.push((app_index, *object_index, diagnostic));
            }
        }
    }
    in_app_order(found)
}

/// [`check`] for an analysis without a cache, whose index would be built only to be read once
/// and dropped: `objects` holds the identities of each app of `loaded` (same order), and the
/// shared keys are found from one sort of key hashes (the index's maps cost ~9 K instructions
/// per object on the serial path, ~0.1 s of CPU at 10,000 apps). Same findings in the same
/// order (`tests`).
pub(crate) fn check_fresh(
    loaded: &[Arc<LoadedApp>],
    objects: &[&AppObjects],
) -> Vec<(usize, Diagnostic)> {
    check_fresh_with(loaded, objects, hash_key)
}

fn check_fresh_with(
    loaded: &[Arc<LoadedApp>],
    objects: &[&AppObjects],
    hash: impl Fn(&ObjectKey) -> u64 + Sync,
) -> Vec<(usize, Diagnostic)> {
    use rayon::prelude::*;
    // `(hash, app index, position in the app's objects)`: hashed on every core, then one sort
    // of plain integers; equal hashes are then told apart by their keys.
    let mut rows: Vec<(u64, u32, u32)> = objects
        .par_iter()
        .enumerate()
        .flat_map_iter(|(app_index, app_objects)| {
            let hash = &hash;
            app_objects
                .iter()
                .enumerate()
                .map(move |(slot, (key, ..))| (hash(key), app_index as u32, slot as u32))
        })
        .collect();
    rows.par_sort_unstable();
    let entry = |&(_, app_index, slot): &(u64, u32, u32)| {
        objects
            .get(app_index as usize)
            .and_then(|app_objects| app_objects.get(slot as usize))
            .map(|(key, object_index, component)| {
                (app_index as usize, key, *object_index, component)
            })
    };
    let mut found: Vec<(usize, usize, Diagnostic)> = Vec::new();
    for same_hash in rows.chunk_by(|a, b| a.0 == b.0) {
        // Rows of one app only cannot be a finding (the common case: a lone key).
        if same_hash.first().map(|row| row.1) == same_hash.last().map(|row| row.1) {
            continue;
        }
        // In app order, then object order; a stable sort by key keeps that within each key.
        let mut entries: Vec<_> = same_hash.iter().filter_map(entry).collect();
        entries.sort_by(|a, b| a.1.cmp(b.1));
        for same_key in entries.chunk_by(|a, b| a.1 == b.1) {
            let Some(&(first_app, key, _, first_component)) = same_key.first() else {
                continue;
            };
            let Some(first_loaded) = loaded.get(first_app) else {
                continue;
            };
            let first = First::new(first_loaded, first_component);
            for &(app_index, _, object_index, component) in same_key {
                let Some(app) = loaded.get(app_index).filter(|_| app_index != first_app) else {
                    continue;
                };
                found.push((app_index, object_index, first.finding(app, key, component)));
            }
        }
    }
    in_app_order(found)
}

/// The first app (in app order) that renders a key, and where.
struct First<'a> {
    app_ref: &'a AppRef,
    span: cue::Span,
}

impl<'a> First<'a> {
    fn new(app: &'a LoadedApp, component: &str) -> First<'a> {
        First {
            app_ref: &app.app_ref,
            span: component_span(app, component),
        }
    }

    /// The finding for `app`'s object of `key` rendered by `component`.
    fn finding(&self, app: &LoadedApp, key: &ObjectKey, component: &str) -> Diagnostic {
        let (_, kind, namespace, name) = key;
        let first_ref = self.app_ref;
        let diagnostic = Diagnostic::error(
            "duplicate-object",
            format!("{kind} {namespace}/{name} is also rendered by app {first_ref}"),
            Some(component_span(app, component)),
        )
        .for_app(&app.app_ref)
        .with_label(self.span, format!("rendered by app {first_ref} here"));
        if app
            .app
            .spec
            .components
            .iter()
            .any(|candidate| candidate.name == *component)
        {
            diagnostic.for_component(component)
        } else {
            diagnostic
        }
    }
}

/// `(app index, diagnostic)` in app order, each app's in object order.
fn in_app_order(mut found: Vec<(usize, usize, Diagnostic)>) -> Vec<(usize, Diagnostic)> {
    found.sort_by_key(|(app_index, object_index, _)| (*app_index, *object_index));
    found
        .into_iter()
        .map(|(app_index, _, diagnostic)| (app_index, diagnostic))
        .collect()
}

/// A fixed hash of a key (SipHash with zero keys: the same in every run; only equality of
/// keys is read from it, never an order that reaches the output).
fn hash_key(key: &ObjectKey) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
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

    /// Apps `a/one`, `a/two`, `b/one` and `b/zero` loaded from YAML (components `web`, `svc`,
    /// `cfg`), for the checks that read spans and components.
    fn loaded_apps() -> Vec<Arc<LoadedApp>> {
        let manifest = |namespace: &str, name: &str| {
            format!(
                "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata:\n  name: {name}\n  \
                 namespace: {namespace}\nspec:\n  components:\n    - name: web\n      type: webservice\n    \
                 - name: svc\n      type: webservice\n    - name: cfg\n      type: webservice\n"
            )
        };
        let snapshot = crate::Snapshot {
            commit: None,
            files: [("a", "one"), ("a", "two"), ("b", "one"), ("b", "zero")]
                .iter()
                .map(|(namespace, name)| crate::SourceFile {
                    path: format!("apps/{namespace}-{name}.yaml"),
                    contents: manifest(namespace, name),
                })
                .collect(),
        };
        let namespaces = crate::load::application::NamespaceRules {
            forced: None,
            default: "default",
        };
        crate::load::load_snapshot(&snapshot, &crate::Definitions::empty(), &namespaces).apps
    }

    /// Without a cache the findings come from a sort of key hashes instead of the index: the
    /// same findings in the same order, also when every key's hash collides.
    #[test]
    fn the_fresh_check_finds_what_the_index_finds() {
        let loaded = loaded_apps();
        let refs: Vec<AppRef> = loaded.iter().map(|app| app.app_ref.clone()).collect();
        assert_eq!(
            refs,
            [
                app("a", "one"),
                app("a", "two"),
                app("b", "one"),
                app("b", "zero")
            ]
        );
        let objects: Vec<AppObjects> = vec![
            vec![
                (key("Deployment", "web"), 0, "web".to_owned()),
                (key("Service", "web"), 1, "web".to_owned()),
                (key("Deployment", "web"), 2, "svc".to_owned()),
            ],
            vec![
                (key("Service", "web"), 0, "svc".to_owned()),
                (key("ConfigMap", "c"), 1, "svc".to_owned()),
                // Two objects of one key in the first app: no finding.
                (key("ConfigMap", "c"), 2, "cfg".to_owned()),
            ],
            Vec::new(),
            vec![
                (key("ConfigMap", "c"), 3, "cfg".to_owned()),
                (key("Deployment", "web"), 0, "web".to_owned()),
                (key("Secret", "s"), 1, "cfg".to_owned()),
                // A policy's object: no such component, the finding has none either.
                (key("ConfigMap", "c"), 4, "policy".to_owned()),
            ],
        ];
        let mut index = ObjectIndex::default();
        // Per-app inserts, the cache's path (the first app alone builds the index).
        index.update(refs[..1].iter(), refs[..1].iter().zip(&objects[..1]));
        index.update(refs.iter(), refs[1..].iter().zip(&objects[1..]));
        let expected = check(&loaded, &index);
        let found: Vec<String> = expected
            .iter()
            .map(|(app_index, diagnostic)| {
                format!(
                    "{app_index} {} {:?}",
                    diagnostic.message, diagnostic.component
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                "1 Service ns/web is also rendered by app a/one Some(\"svc\")",
                "3 Deployment ns/web is also rendered by app a/one Some(\"web\")",
                "3 ConfigMap ns/c is also rendered by app a/two Some(\"cfg\")",
                "3 ConfigMap ns/c is also rendered by app a/two None",
            ]
        );
        let object_refs: Vec<&AppObjects> = objects.iter().collect();
        let debug = |found: &[(usize, Diagnostic)]| format!("{found:?}");
        assert_eq!(debug(&check_fresh(&loaded, &object_refs)), debug(&expected));
        assert_eq!(
            debug(&check_fresh_with(&loaded, &object_refs, |_| 7)),
            debug(&expected)
        );
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
