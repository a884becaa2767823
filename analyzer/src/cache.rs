//! The incremental analysis cache: an app whose inputs did not change since the previous
//! analysis reuses that analysis's per-app result (its [`RenderedApp`] with the per-app rules'
//! diagnostics) instead of being rendered and checked again.
//!
//! It is plain data owned by the caller (the agent keeps one per source, across commits) and
//! does no I/O. [`analyze_snapshot_incremental`] gives exactly what [`crate::analyze_snapshot`]
//! gives for the same snapshot, whatever the cache holds. What a commit that changes one app
//! among N costs:
//! - loading parses only the files whose path, id and content changed (`cache/files.rs`);
//!   the others' parses are shared (`Arc`), after a byte comparison of each file's text;
//! - render and per-app rules run for the changed apps only (this file);
//! - `duplicate-object` updates its object index for the changed apps only
//!   ([`crate::check::ObjectIndex`]) and then looks at the objects rendered by two apps;
//! - `parameter` schemas are evaluated when a rule first asks for one and kept while the
//!   definition's source is unchanged (`check/unknown_property.rs`);
//! - still per app, but O(1) each: the cache lookup (one map lookup; the app's parse is the
//!   cached one by pointer, and while the definitions are those of the last analysis their
//!   digests are not compared app by app), a reference count per reused result, and one
//!   pointer per app in the output's lists and the source map. Only apps gone from the
//!   snapshot make the cache walk its entries.
//!
//! An app's inputs, and so its cache key:
//! - its manifest: the file's path and content digest (git blob ids would do as well, but the
//!   snapshot carries text) under the app's identity, the namespace included;
//! - the definitions it names (component, trait, policy and workflow step types) and those its
//!   render used, each by kind, name and source digest, or its absence;
//! - what every app reads (a change drops the whole cache): the render and analysis options,
//!   the set of definition names, every `WorkloadDefinition`, the standalone `Workflow` and
//!   `Policy` objects and the repository's CRDs (the schemas of `schema-violation`).
//!
//! Apps with loading problems (`duplicate-app` labels point into another app's file) are never
//! cached: they are rare and re-rendered every time.
//!
//! Diagnostics carry [`FileId`]s, which depend on the files a snapshot holds (a file added
//! before an app's file shifts its id). A reused result is re-pointed at the new snapshot's ids
//! by file identity (path, and the position of an embedded template in its file); a result
//! whose file cannot be found again is rendered afresh.
//!
//! Beside this file: `cache/keys.rs` computes the keys and file identities above,
//! `cache/slim.rs` slims analysed apps and parses them again for a render, `cache/files.rs`
//! keeps the parses, `cache/chunked.rs` the per-app lists, `cache/output.rs` the output shared
//! with the cache.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cue::FileId;

pub(crate) use chunked::Chunked;
pub(crate) use files::FileCache;
pub(crate) use output::Analysis;
pub use output::SharedOutput;
pub(crate) use slim::full_app;

use keys::{
    FileKey, builtins_digest, definitions_digest, file_ids, file_key_is, file_keys, global_digest,
    manifest_digest, referenced,
};

use crate::check::{AppObjects, ObjectIndex, SchemaMemo};
use crate::load::application::LoadedApp;
use crate::load::{Loaded, ParsedDocument, ParsedFile};
use crate::model::{Definition, DefinitionKind};
use crate::packed::ConvertForm;
use crate::{
    AnalysisOptions, Definitions, Diagnostic, ObjectsForm, PackedApp, PackedObjects, RenderOutput,
    RenderedApp, RenderedObject, Snapshot, SourceMap,
};

/// Loads, renders and checks every Application of `snapshot` like
/// [`crate::analyze_snapshot`], reusing from `cache` the per-app results of apps whose inputs
/// are unchanged, and leaving in `cache` the results of this snapshot (and nothing of apps no
/// longer in it).
///
/// Never fails; the output is identical to [`crate::analyze_snapshot`]'s for the same
/// arguments. [`AnalysisCache::last_run`] says how many apps were reused.
pub fn analyze_snapshot_incremental(
    snapshot: &Snapshot,
    definitions: &Definitions,
    options: &AnalysisOptions,
    cache: &mut AnalysisCache,
) -> (RenderOutput, SourceMap) {
    let (output, sources) =
        crate::check::analyze::<PackedObjects>(snapshot, None, definitions, options, Some(cache));
    (output.into_output(), sources)
}

/// [`analyze_snapshot_incremental`] without copying the apps reused from the cache: each app
/// of the output is shared with the cache (`Arc`), so a commit that changes one app among
/// 10,000 copies one app's result, not 10,000. An app that a cross-app rule
/// reports on is a copy of its own. The apps' objects are compact JSON text
/// ([`CachedApp`]), as the cache keeps them: packed once when the app is analysed.
///
/// Never fails; [`SharedOutput::into_output`] is what [`analyze_snapshot_incremental`] returns.
pub fn analyze_snapshot_shared(
    snapshot: &Snapshot,
    definitions: &Definitions,
    options: &AnalysisOptions,
    cache: &mut AnalysisCache,
) -> (SharedOutput, SourceMap) {
    let (analysis, sources) =
        crate::check::analyze::<PackedObjects>(snapshot, None, definitions, options, Some(cache));
    (analysis.into(), sources)
}

/// The identity of a file's text: its git blob id (or any 20-byte digest of the text).
pub type BlobId = [u8; 20];

/// [`analyze_snapshot_shared`] for a snapshot whose files come with their blob ids
/// (`blob_ids[i]` is the id of `snapshot.files[i]`'s text, ignored unless there is one per
/// file): a file whose id is the cached one is unchanged without comparing its text, so a
/// commit reads only the changed files' texts. The agent knows the ids from its git
/// tree walk. Same output as [`analyze_snapshot_shared`].
pub fn analyze_snapshot_shared_with_ids(
    snapshot: &Snapshot,
    blob_ids: &[BlobId],
    definitions: &Definitions,
    options: &AnalysisOptions,
    cache: &mut AnalysisCache,
) -> (SharedOutput, SourceMap) {
    let (analysis, sources) = crate::check::analyze::<PackedObjects>(
        snapshot,
        Some(blob_ids),
        definitions,
        options,
        Some(cache),
    );
    (analysis.into(), sources)
}

/// One file changed since the snapshot of the cache's last analysis, for
/// [`analyze_changes`].
#[derive(Debug, Clone)]
pub struct FileChange {
    /// Relative to the repository root, with `/`.
    pub path: String,
    /// The new text; `None` when the file was removed.
    pub contents: Option<String>,
    /// The new text's blob id, when known: an unchanged id is an unchanged file.
    pub blob_id: Option<BlobId>,
}

/// The analysis of the cache's last snapshot with `changes` applied, costing what changed
/// rather than what exists: only the changed files are parsed and their apps
/// rendered and checked; every other file and app is the last analysis's, not visited at all
/// (the output shares them in chunks). `changes` must name every file whose text
/// differs from that snapshot (a git tree-to-tree diff does; other paths are ignored as the
/// loader ignores them).
///
/// `None`, with the cache as it was, when the changes cannot be patched in: nothing analysed
/// yet, other options or built-in definitions, a file added or removed, a definition, CRD or
/// other non-Application document changed, an app added, removed or renamed in a file, a
/// problem while loading (now or in the last analysis) or a broken definition. The caller then
/// analyses the whole snapshot ([`analyze_snapshot_shared_with_ids`]). Otherwise the same
/// output as [`analyze_snapshot_shared`] of the new snapshot.
pub fn analyze_changes(
    changes: &[FileChange],
    definitions: &Definitions,
    options: &AnalysisOptions,
    cache: &mut AnalysisCache,
) -> Option<(SharedOutput, SourceMap)> {
    let patched = cache.patch(changes, definitions, options)?;
    crate::check::analyze_patch(&patched, options, cache)
}

/// The form of the objects an analysis outputs ([`ObjectsForm`]): with a cache, packed (the
/// cache's own form, shared with the output); without, values (nothing keeps them: the CLI
/// does not pay for packing). Either converts to the other, so any pairing is correct.
pub(crate) trait Form: ObjectsForm {
    /// A cached result in this form.
    fn from_cached(app: &Arc<PackedApp>) -> Arc<RenderedApp<Self>>;
    /// A result in the cache's form.
    fn to_cached(app: &Arc<RenderedApp<Self>>) -> Arc<PackedApp>;
    /// An output in the cache's form (sharing its chunks when it is in that form).
    fn to_cached_list(apps: &Chunked<Arc<RenderedApp<Self>>>) -> Chunked<Arc<PackedApp>>;
}

impl Form for PackedObjects {
    fn from_cached(app: &Arc<PackedApp>) -> Arc<PackedApp> {
        app.clone()
    }
    fn to_cached(app: &Arc<PackedApp>) -> Arc<PackedApp> {
        app.clone()
    }
    fn to_cached_list(apps: &Chunked<Arc<PackedApp>>) -> Chunked<Arc<PackedApp>> {
        apps.clone()
    }
}

impl Form for Vec<RenderedObject> {
    fn from_cached(app: &Arc<PackedApp>) -> Arc<RenderedApp> {
        Arc::new(app.to_values())
    }
    fn to_cached(app: &Arc<RenderedApp>) -> Arc<PackedApp> {
        Arc::new(RenderedApp::clone(app).into_form())
    }
    fn to_cached_list(apps: &Chunked<Arc<RenderedApp>>) -> Chunked<Arc<PackedApp>> {
        apps.iter().map(Self::to_cached).collect::<Vec<_>>().into()
    }
}

/// Per-app analysis results from an earlier snapshot, for [`analyze_snapshot_incremental`].
#[derive(Debug, Default)]
pub struct AnalysisCache {
    /// Digest of what every app reads; when it changes, nothing is reused.
    global: Option<[u8; 32]>,
    /// Digest of every definition (kind, name, source digest) of the last analysis: while it
    /// is unchanged, every entry's dependencies are (each was checked or made against it), so
    /// a lookup need not look them up one by one.
    definitions: Option<[u8; 32]>,
    /// Set by [`AnalysisCache::begin`]: the definitions are those of the last analysis.
    definitions_unchanged: bool,
    /// One per cacheable app of the last analysis, in its app order (sorted by [`AppRef`](crate::AppRef)).
    entries: Vec<Entry>,
    /// Per app of the analysis in progress (set by [`AnalysisCache::begin`]): the index of
    /// its entry, if any.
    matches: Vec<Option<usize>>,
    /// Every app of the analysis in progress has the entry of the same index: the entries
    /// can be updated in place.
    aligned: bool,
    /// The new snapshot's file ids by identity: built by the first lookup that needs it (a
    /// file added or removed in front of a cached app's file shifted its id).
    file_ids: OnceLock<HashMap<FileKey, FileId>>,
    /// The `parameter` schemas evaluated so far, by definition digest.
    schemas: SchemaMemo,
    /// What loading made of each file of the last snapshot.
    files: FileCache,
    /// The object identities each app of the last snapshot renders (`duplicate-object`).
    objects: ObjectIndex,
    /// The last analysis's loaded state and output, when [`analyze_changes`] can patch it.
    last: Option<LastAnalysis>,
    last_run: CacheStats,
}

/// What [`analyze_changes`] patches: the last analysis as loaded (every app cached, in
/// `entries` order) and as output.
#[derive(Debug)]
pub(crate) struct LastAnalysis {
    pub(crate) loaded: Loaded,
    /// [`builtins_digest`] of the built-in definitions it was made with.
    builtins: [u8; 32],
    /// The output's apps (after the cross-app rule).
    pub(crate) output: Chunked<Arc<PackedApp>>,
    /// The output-wide diagnostics (after the settings).
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// The apps the cross-app rule reported on (copies in `output`).
    pub(crate) crossed: Vec<usize>,
}

/// What one analysis did with the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Apps whose earlier result was reused.
    pub reused: usize,
    /// Apps rendered and checked (new, changed, or not cacheable).
    pub analyzed: usize,
    /// Entries dropped because their app left the snapshot.
    pub evicted: usize,
    /// Files whose earlier parse was reused (not parsed again).
    pub files_reused: usize,
}

/// One app's cached result.
#[derive(Debug)]
struct Entry {
    /// The app as loaded: the same `Arc` again when its file was not parsed again (same path,
    /// text and file id), which proves the manifest unchanged without hashing it.
    app: Arc<LoadedApp>,
    manifest: [u8; 32],
    /// Every definition the result depends on, with its digest then (`None`: it did not exist).
    dependencies: Vec<(DefinitionKind, String, Option<[u8; 32]>)>,
    /// The definitions the render used (for the "unused broken definition" report).
    used: Vec<(DefinitionKind, String)>,
    /// The identity of every file id `rendered` refers to.
    files: Vec<(FileId, FileKey)>,
    /// After the per-app rules and the settings (severities, suppressions, a blocked app's
    /// objects dropped), before cross-app rules; objects packed once, when analysed. Shared
    /// with the outputs.
    rendered: Arc<PackedApp>,
}

/// A per-app result as the analysis pipeline passes it on: the app (after per-app rules and
/// settings; objects in the form `O`), the definitions it used, and whether it came from the
/// cache.
pub(crate) type Analyzed<O = PackedObjects> = (Arc<RenderedApp<O>>, Vec<Arc<Definition>>, Reused);

/// Whether a per-app result was taken from the cache.
#[derive(Debug)]
pub(crate) enum Reused {
    Yes,
    /// Analyzed now; with the identities of the objects it rendered (for `duplicate-object`).
    No(AppObjects),
}

impl AnalysisCache {
    /// An empty cache.
    pub fn new() -> AnalysisCache {
        AnalysisCache::default()
    }

    /// What the last analysis with this cache did.
    pub fn last_run(&self) -> CacheStats {
        self.last_run
    }

    /// The number of apps cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The per-file load cache, for [`crate::load::load_snapshot_cached`].
    pub(crate) fn files(&mut self) -> &mut FileCache {
        &mut self.files
    }

    /// The object index of `duplicate-object`, as the last analysis left it.
    pub(crate) fn objects(&mut self) -> &mut ObjectIndex {
        &mut self.objects
    }

    /// The `parameter` schemas kept from earlier analyses, for this one.
    pub(crate) fn take_schemas(&mut self) -> SchemaMemo {
        std::mem::take(&mut self.schemas)
    }

    /// Keeps this analysis's `parameter` schemas for the next.
    pub(crate) fn keep_schemas(&mut self, schemas: SchemaMemo) {
        self.schemas = schemas;
    }

    /// Keeps the state of the analysis just stored, for [`analyze_changes`], when it can be
    /// patched: no loading problem or broken definition (`patchable`) and every app cached.
    /// Every cached app is kept without its YAML value from here on ([`AnalysisCache::slim`]).
    pub(crate) fn keep_last(
        &mut self,
        mut loaded: Loaded,
        builtins: &Definitions,
        patchable: bool,
        output: Chunked<Arc<PackedApp>>,
        diagnostics: &[Diagnostic],
        crossed: Vec<usize>,
    ) {
        self.slim(&mut loaded.apps, &loaded.sources);
        self.last = (patchable && self.entries.len() == loaded.apps.len()).then(|| LastAnalysis {
            loaded,
            builtins: builtins_digest(builtins),
            output,
            diagnostics: diagnostics.to_vec(),
            crossed,
        });
    }

    pub(crate) fn take_last(&mut self) -> Option<LastAnalysis> {
        self.last.take()
    }

    /// Keeps a patched analysis for the next patch, its new apps slimmed as in
    /// [`AnalysisCache::keep_last`].
    pub(crate) fn put_last(&mut self, mut last: LastAnalysis) {
        self.slim(&mut last.loaded.apps, &last.loaded.sources);
        self.last = Some(last);
    }

    /// The cached result of app `index` of the last analysis (before cross-app rules).
    pub(crate) fn rendered(&self, index: usize) -> Option<&Arc<PackedApp>> {
        self.entries.get(index).map(|entry| &entry.rendered)
    }

    /// Patches the last analysis's loaded state with `changes` (see [`analyze_changes`]) and
    /// returns the indices of the apps to analyse again; `None`, changing nothing, when it
    /// cannot.
    fn patch(
        &mut self,
        changes: &[FileChange],
        builtins: &Definitions,
        options: &AnalysisOptions,
    ) -> Option<Vec<usize>> {
        struct FilePatch<'a> {
            path: &'a str,
            file: FileId,
            text: &'a str,
            blob_id: Option<BlobId>,
            parsed: Arc<ParsedFile>,
            apps: Vec<(usize, Arc<LoadedApp>)>,
        }
        let last = self.last.as_ref()?;
        // The options (namespace rules included) and definitions of the last analysis.
        if last.builtins != builtins_digest(builtins)
            || self.global != Some(global_digest(&last.loaded, options))
        {
            return None;
        }
        let namespaces = crate::load::application::NamespaceRules {
            forced: options.render.forced_namespace.as_deref(),
            default: &options.render.default_namespace,
        };
        let mut patches: Vec<FilePatch<'_>> = Vec::new();
        for change in changes {
            let path = change.path.trim_start_matches("./");
            match crate::load::loaded_as(path) {
                None => continue,
                Some(false) => return None,
                Some(true) => {}
            }
            let text = change.contents.as_deref()?;
            let (file, blob_id, old) = self.files.get(path)?;
            if blob_id.is_some() && blob_id == change.blob_id {
                continue;
            }
            if patches.iter().any(|patch| patch.path == path)
                || last.loaded.sources.path(file) != path
                || last.loaded.sources.embedding(file).is_some()
            {
                return None;
            }
            let parsed = Arc::new(crate::load::parse_yaml_file(file, path, text, &namespaces));
            let (old_apps, new_apps) = (apps_only(old)?, apps_only(&parsed)?);
            if old_apps.len() != new_apps.len() {
                return None;
            }
            let mut apps = Vec::with_capacity(new_apps.len());
            for (old, new) in old_apps.into_iter().zip(new_apps) {
                if old.app_ref != new.app_ref || !new.diagnostics.is_empty() {
                    return None;
                }
                let index = last
                    .loaded
                    .apps
                    .binary_search_by(|app| app.app_ref.cmp(&old.app_ref))
                    .ok()
                    .filter(|&index| {
                        last.loaded
                            .apps
                            .get(index)
                            .is_some_and(|app| Arc::ptr_eq(app, old))
                    })?;
                apps.push((index, new.clone()));
            }
            patches.push(FilePatch {
                path,
                file,
                text,
                blob_id: change.blob_id,
                parsed,
                apps,
            });
        }
        // Checked: from here on the patch is applied whole.
        let last = self.last.as_mut()?;
        let mut patched = Vec::new();
        for patch in &patches {
            let Some(source) = last
                .loaded
                .sources
                .replace(patch.file, patch.text.to_owned())
            else {
                // Cannot happen (checked above); trust nothing of the last state then.
                self.last = None;
                return None;
            };
            self.files.update(
                patch.path,
                patch.file,
                patch.blob_id,
                source,
                patch.parsed.clone(),
            );
            for (index, app) in &patch.apps {
                if let Some(slot) = last.loaded.apps.get_mut(*index) {
                    *slot = app.clone();
                    patched.push(*index);
                }
            }
        }
        patched.sort_unstable();
        patched.dedup();
        self.files
            .set_reused(self.files.len().saturating_sub(patches.len()));
        Some(patched)
    }

    /// Records the results of a patched analysis (`analyzed`: app index and result) in the
    /// entries, which are in app order, one per app.
    pub(crate) fn store_patch(&mut self, loaded: &Loaded, analyzed: &[(usize, Analyzed)]) {
        for (index, (rendered, used, _)) in analyzed {
            let (Some(entry), Some(app)) = (self.entries.get_mut(*index), loaded.apps.get(*index))
            else {
                continue;
            };
            *entry = new_entry(app, loaded, rendered, used);
        }
        self.last_run = CacheStats {
            reused: loaded.apps.len().saturating_sub(analyzed.len()),
            analyzed: analyzed.len(),
            evicted: 0,
            files_reused: self.files.reused(),
        };
    }

    /// Prepares a lookup pass over `loaded`: drops everything when a global input changed.
    /// O(definitions), not O(apps).
    pub(crate) fn begin(&mut self, loaded: &Loaded, options: &AnalysisOptions) {
        let global = global_digest(loaded, options);
        if self.global != Some(global) {
            self.entries.clear();
            self.global = Some(global);
        }
        let definitions = definitions_digest(loaded);
        self.definitions_unchanged = self.definitions == Some(definitions);
        self.definitions = Some(definitions);
        self.file_ids = OnceLock::new();
        // Each app's entry: a merge walk of two lists sorted by app. An app whose parse is the
        // cached one is its entry by pointer, so unchanged apps compare no names.
        self.matches.clear();
        self.matches.reserve(loaded.apps.len());
        let mut next = 0;
        for app in &loaded.apps {
            let same = self
                .entries
                .get(next)
                .is_some_and(|entry| Arc::ptr_eq(&entry.app, app));
            if !same {
                while self
                    .entries
                    .get(next)
                    .is_some_and(|entry| entry.app.app_ref < app.app_ref)
                {
                    next += 1;
                }
            }
            match self.entries.get(next) {
                Some(entry) if same || entry.app.app_ref == app.app_ref => {
                    self.matches.push(Some(next));
                    next += 1;
                }
                _ => self.matches.push(None),
            }
        }
        self.aligned = self.entries.len() == loaded.apps.len()
            && self
                .matches
                .iter()
                .enumerate()
                .all(|(index, found)| *found == Some(index));
    }

    /// The cached result of `app`, re-pointed at this snapshot's file ids, when its inputs are
    /// unchanged. With `used`, the definitions its render used (otherwise none: the caller
    /// does not need them). O(1) for an app whose file was not parsed again, bar the map
    /// lookup.
    pub(crate) fn lookup(
        &self,
        index: usize,
        app: &Arc<LoadedApp>,
        loaded: &Loaded,
        used: bool,
    ) -> Option<Analyzed> {
        if !app.diagnostics.is_empty() {
            return None;
        }
        let entry = self.entries.get((*self.matches.get(index)?)?)?;
        // A render cut off by its deadline depends on how busy the machine was: tried again.
        if entry
            .rendered
            .diagnostics
            .iter()
            .any(|diagnostic| diagnostic.rule == "render-deadline")
        {
            return None;
        }
        // The same parse: same path, text and file id, so the same manifest.
        let same_parse = Arc::ptr_eq(&entry.app, app);
        if !same_parse && entry.manifest != manifest_digest(app, &loaded.sources) {
            return None;
        }
        let unchanged = self.definitions_unchanged
            || entry.dependencies.iter().all(|(kind, name, digest)| {
                loaded
                    .definitions
                    .get(*kind, name)
                    .map(|definition| definition.source_digest)
                    == *digest
            });
        if !unchanged {
            return None;
        }
        // Each file the result points into, at its id in this snapshot: the same id unless a
        // file was added or removed in front of it.
        let mut remap: Vec<(FileId, FileId)> = Vec::new();
        for (old, key) in &entry.files {
            let moved = if same_parse && *old == app.file {
                false
            } else {
                !file_key_is(&loaded.sources, *old, key)
            };
            if moved {
                let new = *self
                    .file_ids
                    .get_or_init(|| file_ids(&loaded.sources))
                    .get(key)?;
                remap.push((*old, new));
            }
        }
        let used = if used {
            let mut found = Vec::with_capacity(entry.used.len());
            for (kind, name) in &entry.used {
                found.push(loaded.definitions.get(*kind, name)?.clone());
            }
            found
        } else {
            Vec::new()
        };
        let mut rendered = entry.rendered.clone();
        if !remap.is_empty() {
            // A copy, re-pointed; `store` keeps it so the next lookup needs none.
            let rendered = Arc::make_mut(&mut rendered);
            let new_id = |old: FileId| {
                remap
                    .iter()
                    .find(|(from, _)| *from == old)
                    .map_or(old, |(_, to)| *to)
            };
            rendered.file = new_id(rendered.file);
            for diagnostic in &mut rendered.diagnostics {
                if let Some(span) = &mut diagnostic.span {
                    span.file = new_id(span.file);
                }
                for label in &mut diagnostic.labels {
                    label.span.file = new_id(label.span.file);
                }
            }
        }
        Some((rendered, used, Reused::Yes))
    }

    /// Records this pass's results (`analyzed` is in `loaded.apps` order) and forgets apps no
    /// longer in the snapshot. When the snapshot has the same apps as the last one (the usual
    /// commit), in place: an unchanged app costs nothing here.
    pub(crate) fn store<O: Form>(&mut self, loaded: &Loaded, analyzed: &[Analyzed<O>]) {
        let mut stats = CacheStats::default();
        let results = loaded.apps.iter().zip(analyzed);
        let in_place = self.aligned
            && results.clone().all(|(app, (_, _, reused))| {
                matches!(reused, Reused::Yes) || app.diagnostics.is_empty()
            });
        if in_place {
            for (entry, (app, (rendered, used, reused))) in self.entries.iter_mut().zip(results) {
                match reused {
                    Reused::Yes => {
                        stats.reused += 1;
                        refresh(entry, app, &O::to_cached(rendered), &loaded.sources);
                    }
                    Reused::No(_) => {
                        stats.analyzed += 1;
                        *entry = new_entry(app, loaded, &O::to_cached(rendered), used);
                    }
                }
            }
        } else {
            let mut old: Vec<Option<Entry>> = std::mem::take(&mut self.entries)
                .into_iter()
                .map(Some)
                .collect();
            let mut entries = Vec::with_capacity(loaded.apps.len());
            for (index, (app, (rendered, used, reused))) in results.enumerate() {
                let previous = self
                    .matches
                    .get(index)
                    .copied()
                    .flatten()
                    .and_then(|found| old.get_mut(found))
                    .and_then(Option::take);
                match reused {
                    Reused::Yes => {
                        stats.reused += 1;
                        if let Some(mut entry) = previous {
                            refresh(&mut entry, app, &O::to_cached(rendered), &loaded.sources);
                            entries.push(entry);
                        }
                    }
                    Reused::No(_) => {
                        stats.analyzed += 1;
                        if app.diagnostics.is_empty() {
                            entries.push(new_entry(app, loaded, &O::to_cached(rendered), used));
                        }
                    }
                }
            }
            // Entries no app of this snapshot took: their apps are gone.
            stats.evicted = old.iter().filter(|entry| entry.is_some()).count();
            self.entries = entries;
        }
        self.matches.clear();
        self.file_ids = OnceLock::new();
        stats.files_reused = self.files.reused();
        self.last_run = stats;
    }
}

/// Brings a reused entry up to this snapshot: a re-pointed result (a new `Arc`) with its
/// files, and the app's new parse when its file was parsed again with the same manifest.
fn refresh(
    entry: &mut Entry,
    app: &Arc<LoadedApp>,
    rendered: &Arc<PackedApp>,
    sources: &SourceMap,
) {
    if !Arc::ptr_eq(&entry.rendered, rendered) {
        entry.files = file_keys(rendered, sources);
        entry.rendered = rendered.clone();
    }
    if !Arc::ptr_eq(&entry.app, app) {
        entry.app = app.clone();
    }
}

fn new_entry(
    app: &Arc<LoadedApp>,
    loaded: &Loaded,
    rendered: &Arc<PackedApp>,
    used: &[Arc<Definition>],
) -> Entry {
    let mut names: Vec<(DefinitionKind, String)> = referenced(&app.app);
    names.extend(
        used.iter()
            .map(|definition| (definition.kind, definition.name.clone())),
    );
    names.sort();
    names.dedup();
    let dependencies = names
        .into_iter()
        .map(|(kind, name)| {
            let digest = loaded
                .definitions
                .get(kind, &name)
                .map(|definition| definition.source_digest);
            (kind, name, digest)
        })
        .collect();
    Entry {
        app: app.clone(),
        manifest: manifest_digest(app, &loaded.sources),
        dependencies,
        used: used
            .iter()
            .map(|definition| (definition.kind, definition.name.clone()))
            .collect(),
        files: file_keys(rendered, &loaded.sources),
        rendered: rendered.clone(),
    }
}

/// The apps of a parsed file, when it holds nothing else (no other document, no error).
fn apps_only(parsed: &ParsedFile) -> Option<Vec<&Arc<LoadedApp>>> {
    let ParsedFile::Yaml(documents) = parsed else {
        return None;
    };
    documents
        .iter()
        .map(|document| match document {
            ParsedDocument::App(Ok(app)) => Some(app),
            _ => None,
        })
        .collect()
}

mod chunked;
mod files;
mod keys;
mod output;
mod slim;
#[cfg(test)]
mod tests;
