//! The per-file load cache: what loading made of each file of the previous snapshot (its
//! source-map entry with the line index, its YAML documents with positions, its Applications
//! decoded, its `.cue` definition parsed), reused for a file whose path, text and file id are
//! unchanged, so a commit that changes one file of 10,000 parses one file. The text
//! is recognised by its blob id when the caller gives one (the agent knows each file's git
//! blob id), otherwise by a byte comparison.
//!
//! The key includes the [`FileId`] because every span of a parse result carries it: a file added
//! or removed before another in path order shifts that file's id, and the shifted file is parsed
//! again rather than re-pointed (correct, and rare next to edits in place). It also holds the
//! namespace rules the parses were made with, since an app's namespace is decided while
//! parsing.
//!
//! Plain data, no I/O; it keeps the results of one snapshot (the last) at most.

use std::collections::HashMap;
use std::sync::Arc;

use cue::FileId;

use crate::BlobId;
use crate::load::application::LoadedApp;
use crate::load::application::NamespaceRules;
use crate::load::{ParsedDocument, ParsedFile};
use crate::snapshot::SharedSource;

/// Parse results of the last snapshot's files, by path.
#[derive(Debug, Default)]
pub(crate) struct FileCache {
    /// `(forced, default)` namespaces of the parses held; other rules drop them all.
    namespaces: Option<(Option<String>, String)>,
    // Looked up by path only, never iterated into output: a HashMap's order does not matter.
    files: HashMap<String, CachedFile>,
    /// Parses reused by the last load.
    reused: usize,
}

#[derive(Debug)]
struct CachedFile {
    file: FileId,
    /// The text's blob id, when the snapshot's caller gave one.
    blob_id: Option<BlobId>,
    /// The source-map entry: the text the parse was made from, and its line index.
    source: SharedSource,
    parsed: Arc<ParsedFile>,
}

impl FileCache {
    /// Prepares a load with `namespaces`: forgets every parse made with other rules.
    pub(crate) fn begin(&mut self, namespaces: &NamespaceRules<'_>) {
        let rules = (
            namespaces.forced.map(str::to_owned),
            namespaces.default.to_owned(),
        );
        if self.namespaces.as_ref() != Some(&rules) {
            self.files.clear();
            self.namespaces = Some(rules);
        }
    }

    /// The earlier source-map entry of `path` when its text was `text`, with the earlier
    /// parse when the file also had the id `file` then. With a blob id for both texts the ids
    /// are compared (equal ids are equal texts); otherwise the bytes, exactly.
    pub(crate) fn source(
        &self,
        path: &str,
        text: &str,
        blob_id: Option<&BlobId>,
        file: FileId,
    ) -> Option<(SharedSource, Option<Arc<ParsedFile>>)> {
        let cached = self.files.get(path)?;
        let same_text = match (&cached.blob_id, blob_id) {
            (Some(cached_id), Some(blob_id)) => cached_id == blob_id,
            _ => cached.source.text() == text,
        };
        if !same_text {
            return None;
        }
        let parsed = (cached.file == file).then(|| cached.parsed.clone());
        Some((cached.source.clone(), parsed))
    }

    /// Replaces the cache with this load's files: `(path, id, blob id, source entry, parse,
    /// reused)`.
    /// In place: a reused file's entry is already the one it would get, so only new and
    /// re-parsed files are written, and the paths are compared only when some file is gone.
    pub(crate) fn replace<'a>(
        &mut self,
        loaded: impl Iterator<
            Item = (
                &'a str,
                FileId,
                Option<BlobId>,
                SharedSource,
                &'a Arc<ParsedFile>,
                bool,
            ),
        >,
    ) {
        let mut reused = 0;
        let mut paths: Vec<&'a str> = Vec::with_capacity(self.files.len());
        for (path, file, blob_id, source, parsed, was_reused) in loaded {
            paths.push(path);
            if was_reused {
                reused += 1;
                continue;
            }
            let cached = CachedFile {
                file,
                blob_id,
                source,
                parsed: parsed.clone(),
            };
            match self.files.get_mut(path) {
                Some(entry) => *entry = cached,
                None => {
                    self.files.insert(path.to_owned(), cached);
                }
            }
        }
        if self.files.len() > paths.len() {
            let kept: std::collections::HashSet<&str> = paths.into_iter().collect();
            self.files.retain(|path, _| kept.contains(path.as_str()));
        }
        self.reused = reused;
    }

    /// The id, blob id and parse of `path` in the last load.
    pub(crate) fn get(&self, path: &str) -> Option<(FileId, Option<BlobId>, &Arc<ParsedFile>)> {
        self.files
            .get(path)
            .map(|cached| (cached.file, cached.blob_id, &cached.parsed))
    }

    /// Records a file of the last load changed in place (same path and id): its new text's
    /// entry and parse.
    pub(crate) fn update(
        &mut self,
        path: &str,
        file: FileId,
        blob_id: Option<BlobId>,
        source: SharedSource,
        parsed: Arc<ParsedFile>,
    ) {
        let cached = CachedFile {
            file,
            blob_id,
            source,
            parsed,
        };
        match self.files.get_mut(path) {
            Some(entry) => *entry = cached,
            None => {
                self.files.insert(path.to_owned(), cached);
            }
        }
    }

    /// Replaces, in the parse of `path`, every app found in `slimmed` (by address) by its
    /// slim copy (`AnalysisCache::slim`); the other documents stay as they are.
    pub(crate) fn slim_apps(
        &mut self,
        path: &str,
        slimmed: &HashMap<*const LoadedApp, Arc<LoadedApp>>,
    ) {
        let Some(cached) = self.files.get_mut(path) else {
            return;
        };
        let ParsedFile::Yaml(documents) = cached.parsed.as_ref() else {
            return;
        };
        let documents = documents
            .iter()
            .map(|document| match document {
                ParsedDocument::App(Ok(app)) => {
                    ParsedDocument::App(Ok(slimmed.get(&Arc::as_ptr(app)).unwrap_or(app).clone()))
                }
                ParsedDocument::App(Err(diagnostic)) => {
                    ParsedDocument::App(Err(diagnostic.clone()))
                }
                ParsedDocument::Other(document) => ParsedDocument::Other(document.clone()),
                ParsedDocument::Warning(diagnostic) => ParsedDocument::Warning(diagnostic.clone()),
            })
            .collect();
        cached.parsed = Arc::new(ParsedFile::Yaml(documents));
    }

    /// The number of files held.
    pub(crate) fn len(&self) -> usize {
        self.files.len()
    }

    /// Sets what [`FileCache::reused`] says (a patched load reuses all but the changed files).
    pub(crate) fn set_reused(&mut self, reused: usize) {
        self.reused = reused;
    }

    /// How many files the last load took from the cache.
    pub(crate) fn reused(&self) -> usize {
        self.reused
    }
}
