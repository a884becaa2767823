//! A snapshot of a repository's files and the source map that turns spans into file, line and
//! column.

use cue::{FileId, LineCol, LineIndex, Span};

/// The files of one repository at one commit (or a work tree), as handed over by the agent.
/// Paths are relative to the repository root and use `/`.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The commit id, when the snapshot comes from git.
    pub commit: Option<String>,
    pub files: Vec<SourceFile>,
}

/// One file of a snapshot.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: String,
    pub contents: String,
}

/// Every source text the analyzer has seen, by [`FileId`]: repository files, built-in
/// definitions, and CUE templates embedded in YAML (which map back into their YAML file).
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    /// Shared entries: a snapshot's map starts as a clone of the built-in definitions' map, so
    /// cloning must not copy every built-in text; in chunks, so that the incremental analysis
    /// hands over a map of 10,000 files with one changed without copying 10,000 pointers.
    entries: crate::cache::Chunked<std::sync::Arc<SourceEntry>>,
}

#[derive(Debug, Clone)]
struct SourceEntry {
    path: String,
    text: String,
    /// Built on the first [`SourceMap::locate`]: loading registers every file of the snapshot
    /// in one serial pass, and only the few files with a diagnostic are ever located.
    index: std::sync::OnceLock<LineIndex>,
    /// For an embedded CUE template: where its first line sits in the enclosing file, and the
    /// indentation that the YAML block scalar stripped from each line.
    embedded_in: Option<Embedding>,
}

/// One registered file (path, text, line index), shareable between source maps: the
/// incremental analysis keeps the last snapshot's and registers an unchanged file's entry again
/// instead of copying its text and indexing its lines.
#[derive(Debug, Clone)]
pub(crate) struct SharedSource(std::sync::Arc<SourceEntry>);

impl SharedSource {
    pub(crate) fn text(&self) -> &str {
        &self.0.text
    }
}

/// Where an embedded text (a `spec.schematic.cue.template` block) sits in its YAML file.
#[derive(Debug, Clone, Copy)]
pub struct Embedding {
    pub parent: FileId,
    /// 1-based line of the embedded text's first line in the parent.
    pub first_line: u32,
    /// Columns of indentation stripped from every line.
    pub indent: u32,
}

/// A resolved position for humans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub path: String,
    pub line: u32,
    pub column: u32,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Registers a file and returns its id.
    pub fn add(&mut self, path: impl Into<String>, text: impl Into<String>) -> FileId {
        self.push(path.into(), text.into(), None)
    }

    /// Registers a text embedded in another file (a CUE template inside YAML).
    pub fn add_embedded(&mut self, text: impl Into<String>, embedding: Embedding) -> FileId {
        let path = self.path(embedding.parent).to_owned();
        self.push(path, text.into(), Some(embedding))
    }

    /// Registers a file of an earlier map again (never an embedded text: its parent's id may
    /// differ), and returns its id here.
    pub(crate) fn add_shared(&mut self, source: SharedSource) -> FileId {
        let id = FileId(self.entries.len() as u32);
        self.entries.push(source.0);
        id
    }

    /// The entry of a file of its own (`None` for an embedded text), to register again in a
    /// later map with [`SourceMap::add_shared`].
    pub(crate) fn shared(&self, file: FileId) -> Option<SharedSource> {
        self.entries
            .get(file.0 as usize)
            .filter(|entry| entry.embedded_in.is_none())
            .map(|entry| SharedSource(entry.clone()))
    }

    /// Registers `text` again under `file`, a file of its own with the same path (the
    /// incremental analysis patching one changed file); its entry, to keep, or `None` (and no
    /// change) when `file` is not such a file.
    pub(crate) fn replace(&mut self, file: FileId, text: String) -> Option<SharedSource> {
        let entry = self.entries.get(file.0 as usize)?;
        if entry.embedded_in.is_some() {
            return None;
        }
        let entry = std::sync::Arc::new(SourceEntry {
            path: entry.path.clone(),
            text,
            index: std::sync::OnceLock::new(),
            embedded_in: None,
        });
        self.entries
            .set(file.0 as usize, entry.clone())
            .then_some(SharedSource(entry))
    }

    fn push(&mut self, path: String, text: String, embedded_in: Option<Embedding>) -> FileId {
        let id = FileId(self.entries.len() as u32);
        self.entries.push(std::sync::Arc::new(SourceEntry {
            path,
            text,
            index: std::sync::OnceLock::new(),
            embedded_in,
        }));
        id
    }

    /// The path of the file a span belongs to (the enclosing YAML file for embedded texts).
    pub fn path(&self, file: FileId) -> &str {
        self.entries
            .get(file.0 as usize)
            .map_or("<unknown>", |entry| entry.path.as_str())
    }

    /// How many texts are registered (file ids are `0..len`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no text is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where an embedded text sits in its file; `None` for a file of its own.
    pub fn embedding(&self, file: FileId) -> Option<Embedding> {
        self.entries
            .get(file.0 as usize)
            .and_then(|entry| entry.embedded_in)
    }

    /// The source text registered under `file`.
    pub fn text(&self, file: FileId) -> &str {
        self.entries
            .get(file.0 as usize)
            .map_or("", |entry| entry.text.as_str())
    }

    /// File, line and column of a span's start, mapped through embeddings into the real file.
    pub fn locate(&self, span: Span) -> Location {
        let Some(entry) = self.entries.get(span.file.0 as usize) else {
            return Location {
                path: "<unknown>".to_owned(),
                line: 0,
                column: 0,
            };
        };
        let LineCol { line, column } = entry
            .index
            .get_or_init(|| LineIndex::new(&entry.text))
            .line_col(span.start);
        match entry.embedded_in {
            None => Location {
                path: entry.path.clone(),
                line,
                column,
            },
            Some(embedding) => Location {
                path: entry.path.clone(),
                line: embedding.first_line + line - 1,
                column: column + embedding.indent,
            },
        }
    }
}
