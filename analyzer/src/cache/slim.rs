//! Slimming: the cache keeps apps without their YAML value and properties once analysed, and
//! [`full_app`] parses such an app again when it must be rendered.

use std::collections::HashMap;
use std::sync::Arc;

use cue::FileId;

use super::AnalysisCache;
use crate::SourceMap;
use crate::load::application::LoadedApp;
use crate::load::yaml::YamlDocument;
use crate::load::{Loaded, ParsedDocument, ParsedFile};

impl AnalysisCache {
    /// Drops the YAML value (`document.value`) of every cached app that still has it, in the
    /// entries, in `apps` (the loaded state the cache keeps) and in the per-file parses: once
    /// an app is rendered and checked nothing reads it again but a new render of the same
    /// parse (a definition it uses changed), and that re-parses the file's text, which the
    /// source map holds anyway ([`full_app`]). At 10,000 apps these values are a
    /// `serde_json::Value` tree of every manifest held for the agent's lifetime.
    /// The positions and the decoded `Application` but for its properties stay: cross-app
    /// rules and settings read them for apps that did not change. Each app is slimmed once: a reused app costs a
    /// look at its value.
    pub(super) fn slim(&mut self, apps: &mut [Arc<LoadedApp>], sources: &SourceMap) {
        // A batch of entries at a time, each batch replaced everywhere before the next is
        // copied: a full app dies once its last holder has its slim copy, so the slim copies
        // and the full apps they replace overlap by one batch, not by every app (at 10,000
        // apps that overlap was ~36 MiB on top of the analysis).
        // One app per batch in tests: their few apps cross batches.
        const BATCH: usize = if cfg!(test) { 1 } else { 256 };
        let mut start = 0;
        while start < self.entries.len() {
            let end = (start + BATCH).min(self.entries.len());
            // By the address of the full app: each is replaced by the same slim `Arc`
            // everywhere, so a reused parse is its entry's app by pointer, as before. Looked
            // up, never iterated into output.
            let mut slimmed: HashMap<*const LoadedApp, Arc<LoadedApp>> = HashMap::new();
            for entry in &mut self.entries[start..end] {
                if is_slim(&entry.app) {
                    continue;
                }
                let slim = Arc::new(slim_copy(&entry.app));
                slimmed.insert(Arc::as_ptr(&entry.app), slim.clone());
                entry.app = slim;
            }
            start = end;
            if slimmed.is_empty() {
                continue;
            }
            let mut files: Vec<FileId> = Vec::new();
            for app in apps.iter_mut() {
                if let Some(slim) = slimmed.get(&Arc::as_ptr(app)) {
                    files.push(app.file);
                    *app = slim.clone();
                }
            }
            files.sort_unstable_by_key(|file| file.0);
            files.dedup();
            for file in files {
                self.files.slim_apps(sources.path(file), &slimmed);
            }
        }
    }
}

/// True when `app` was kept without its YAML value and properties ([`AnalysisCache::slim`]):
/// an Application document is a mapping, never null.
pub(super) fn is_slim(app: &LoadedApp) -> bool {
    app.document.value.is_null()
}

/// `app` without its YAML value, nor its components' and traits' properties (the bulk of the
/// decoded model; only a render reads them). Names, types, annotations and the rest of the
/// model stay: the cache's dependencies, cross-app rules and settings read them.
fn slim_copy(app: &LoadedApp) -> LoadedApp {
    let mut model = app.app.clone();
    for component in &mut model.spec.components {
        component.properties = None;
        for component_trait in &mut component.traits {
            component_trait.properties = None;
        }
    }
    LoadedApp {
        app: model,
        app_ref: app.app_ref.clone(),
        file: app.file,
        document: YamlDocument {
            value: serde_json::Value::Null,
            positions: app.document.positions.clone(),
        },
        file_digest: app.file_digest,
        diagnostics: app.diagnostics.clone(),
    }
}

/// `app` as loaded, with its YAML value: a slimmed app ([`AnalysisCache::slim`]) is parsed
/// again from its file's text in `loaded`'s source map, which is the text it was parsed from
/// (a parse is reused only for the same path, text and file id, under the same namespace
/// rules). For a render of a cached parse whose cached result cannot be reused.
pub(crate) fn full_app<'a>(
    app: &'a Arc<LoadedApp>,
    loaded: &Loaded,
    namespaces: &crate::load::application::NamespaceRules<'_>,
) -> std::borrow::Cow<'a, Arc<LoadedApp>> {
    use std::borrow::Cow;
    if !is_slim(app) {
        return Cow::Borrowed(app);
    }
    let parsed = crate::load::parse_yaml_file(
        app.file,
        loaded.sources.path(app.file),
        loaded.sources.text(app.file),
        namespaces,
    );
    let ParsedFile::Yaml(documents) = parsed else {
        return Cow::Borrowed(app);
    };
    documents
        .into_iter()
        .find_map(|document| match document {
            ParsedDocument::App(Ok(found)) if found.app_ref == app.app_ref => Some(found),
            _ => None,
        })
        .map_or(Cow::Borrowed(app), Cow::Owned)
}
