//! Loading: from a [`crate::Snapshot`] to Applications and Definitions with positions.
//!
//! Which files are read:
//! - every `.yaml`/`.yml` file, all documents: `Application`s become apps, `*Definition` CRs
//!   become definitions; documents of other kinds are ignored, except under `apps/` where they
//!   are an `unknown-kind` warning (a typo in `kind:` would otherwise hide an app);
//! - every `.cue` file under a `definitions/` directory, as a KubeVela definition file;
//! - nothing in hidden directories (`.github/`, `.git/`), and not the agent's own
//!   `driftless.yaml`.
//!
//! A document that looks like a Kubernetes object (it has `apiVersion`, `metadata` or `spec`)
//! but has no `kind` is a `missing-field` error; other YAML (CI configs, Helm values) is
//! ignored.

pub(crate) mod application;
mod cue_upgrade;
pub(crate) mod definition_cue;
pub(crate) mod definition_yaml;
pub(crate) mod yaml;

use crate::definitions::Definitions;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{DefinitionKind, Policy, WorkflowStep};
use crate::{Diagnostic, Snapshot, SourceMap};
use application::{LoadedApp, NamespaceRules, load_application};

/// Standalone `Workflow` and `Policy` objects (`core.oam.dev/v1alpha1`), by namespace and name:
/// an Application's `workflow.ref` and its deploy steps' policy names resolve against them.
#[derive(Debug, Default)]
pub(crate) struct Standalone {
    pub(crate) workflows: BTreeMap<(String, String), Vec<WorkflowStep>>,
    pub(crate) policies: BTreeMap<(String, String), Policy>,
}

/// Everything loaded from one snapshot.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// Shared with the per-file load cache ([`crate::cache::FileCache`]).
    pub(crate) apps: Vec<Arc<LoadedApp>>,
    /// Built-ins overridden by the repository's own definitions.
    pub(crate) definitions: Definitions,
    /// Problems not tied to one app.
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) sources: SourceMap,
    pub(crate) standalone: Standalone,
    /// `CustomResourceDefinition` documents, for validating the custom resources apps render.
    pub(crate) crds: Vec<serde_json::Value>,
}

/// Files the agent itself reads; never treated as manifests.
const AGENT_CONFIG_FILES: &[&str] = &["driftless.yaml", "driftless.yml"];

/// Loads every app and definition of `snapshot`.
///
/// Three passes: files are registered in the [`SourceMap`] in path order (so file ids, and
/// everything ordered by them, are deterministic); YAML parsing with positions, Application
/// decoding and `.cue` definition parsing run per file in parallel (rayon; at 10,000 apps the
/// YAML work is the largest serial phase otherwise); then the results are merged in path order,
/// with the documents that need the shared `SourceMap` (definition CRs embed CUE text) handled
/// there.
pub(crate) fn load_snapshot(
    snapshot: &Snapshot,
    builtins: &Definitions,
    namespaces: &NamespaceRules<'_>,
) -> Loaded {
    load_snapshot_cached(snapshot, builtins, namespaces, None, None)
}

/// [`load_snapshot`], taking from `file_cache` the parse of every file whose path, id and
/// text are those of the earlier load (and its source-map entry when path and text are), and
/// leaving in it this load's (a commit that changes one file of 10,000 parses and
/// indexes one file). Same result as without a cache. `blob_ids`, one per file of the
/// snapshot when given, let the cache recognise an unchanged text by its id instead of
/// comparing bytes.
pub(crate) fn load_snapshot_cached(
    snapshot: &Snapshot,
    builtins: &Definitions,
    namespaces: &NamespaceRules<'_>,
    mut file_cache: Option<&mut crate::cache::FileCache>,
    blob_ids: Option<&[crate::BlobId]>,
) -> Loaded {
    use rayon::prelude::*;
    let mut sources = builtins.sources().clone();
    let mut definitions = builtins.clone();
    let mut apps = Vec::new();
    let mut diagnostics = Vec::new();
    let mut repo_definitions = Vec::new();
    let mut standalone = Standalone::default();
    let mut crds = Vec::new();
    if let Some(file_cache) = file_cache.as_deref_mut() {
        file_cache.begin(namespaces);
    }
    let (work, unchanged) = files_to_parse(snapshot, blob_ids, file_cache.as_deref(), &mut sources);
    let parsed: Vec<(Arc<ParsedFile>, bool)> = work
        .par_iter()
        .zip(unchanged)
        .map(|(work, reused)| match reused {
            Some(parsed) => (parsed, true),
            None => (Arc::new(parse_file(work, namespaces)), false),
        })
        .collect();
    if let Some(file_cache) = file_cache {
        file_cache.replace(
            work.iter()
                .zip(&parsed)
                .filter_map(|(work, (parsed, reused))| {
                    let source = sources.shared(work.file)?;
                    Some((work.path, work.file, work.blob_id, source, parsed, *reused))
                }),
        );
    }
    for (work, (parsed, _)) in work.iter().zip(&parsed) {
        match parsed.as_ref() {
            ParsedFile::YamlError(error) => diagnostics.push(Diagnostic::error(
                "yaml-syntax",
                format!("invalid YAML: {}", error.message),
                Some(error.span),
            )),
            ParsedFile::Yaml(documents) => {
                for document in documents {
                    match document {
                        ParsedDocument::App(Ok(app)) => apps.push(app.clone()),
                        ParsedDocument::App(Err(diagnostic))
                        | ParsedDocument::Warning(diagnostic) => {
                            diagnostics.push(diagnostic.clone())
                        }
                        ParsedDocument::Other(document) => load_yaml_document(
                            work,
                            document,
                            namespaces,
                            &mut sources,
                            &mut repo_definitions,
                            &mut standalone,
                            &mut crds,
                            &mut diagnostics,
                        ),
                    }
                }
            }
            ParsedFile::Cue(Ok(definition)) => repo_definitions.push(definition.clone()),
            ParsedFile::Cue(Err(diagnostic)) => diagnostics.push(diagnostic.clone()),
        }
    }
    // Files are visited in path order, so of two repo definitions with one name the later
    // path wins, deterministically.
    for definition in repo_definitions {
        definitions.insert(definition);
    }
    // Stable sort: of two apps with one identity, the one in the earlier path comes first.
    apps.sort_by(|a: &Arc<LoadedApp>, b: &Arc<LoadedApp>| a.app_ref.cmp(&b.app_ref));
    let apps = drop_duplicate_apps(apps, &mut diagnostics);
    Loaded {
        apps,
        definitions,
        diagnostics,
        sources,
        standalone,
        crds,
    }
}

/// The files of `snapshot` the loader reads (YAML anywhere, CUE under `definitions/`), in
/// path order, each registered in `sources`; with each, its cached parse when its path, text
/// and id are the cached ones.
fn files_to_parse<'s>(
    snapshot: &'s Snapshot,
    blob_ids: Option<&[crate::BlobId]>,
    file_cache: Option<&crate::cache::FileCache>,
    sources: &mut SourceMap,
) -> (Vec<FileWork<'s>>, Vec<Option<Arc<ParsedFile>>>) {
    let blob_ids = blob_ids.filter(|ids| ids.len() == snapshot.files.len());
    let mut files: Vec<(&crate::SourceFile, Option<&crate::BlobId>)> = snapshot
        .files
        .iter()
        .enumerate()
        .map(|(index, file)| (file, blob_ids.and_then(|ids| ids.get(index))))
        .collect();
    files.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    let mut work: Vec<FileWork<'_>> = Vec::with_capacity(files.len());
    // Per file: the cached parse, when its path, text and id are the cached ones.
    let mut unchanged: Vec<Option<Arc<ParsedFile>>> = Vec::with_capacity(files.len());
    for (source, blob_id) in files {
        let path = source.path.trim_start_matches("./");
        if is_ignored(path) {
            continue;
        }
        let is_yaml = path.ends_with(".yaml") || path.ends_with(".yml");
        if is_yaml || (path.ends_with(".cue") && is_under_definitions(path)) {
            let next = cue::FileId(sources.len() as u32);
            let cached = file_cache
                .and_then(|file_cache| file_cache.source(path, &source.contents, blob_id, next));
            let file = match cached {
                Some((shared, parsed)) => {
                    unchanged.push(parsed);
                    sources.add_shared(shared)
                }
                None => {
                    unchanged.push(None);
                    sources.add(path, source.contents.as_str())
                }
            };
            work.push(FileWork {
                file,
                path,
                text: &source.contents,
                is_yaml,
                blob_id: blob_id.copied(),
            });
        }
    }
    (work, unchanged)
}

/// Loads `snapshot` and does nothing else: the apps and load diagnostics counted. For
/// `benches/load.rs`, which measures loading apart from rendering; not part of the API.
#[doc(hidden)]
pub fn load_only(snapshot: &Snapshot, builtins: &Definitions) -> (usize, usize) {
    let namespaces = NamespaceRules {
        forced: None,
        default: "default",
    };
    let loaded = load_snapshot(snapshot, builtins, &namespaces);
    (loaded.apps.len(), loaded.diagnostics.len())
}

pub use cue::yaml_options;

/// Where the loader's YAML fast path and serde-saphyr disagree on `text`: `None` when they
/// agree or the fast path leaves the file to serde-saphyr, else both results. For the
/// `yaml_fast_path` fuzz target (FUZZING.md); not part of the API.
#[doc(hidden)]
pub fn yaml_fast_path_mismatch(text: &str) -> Option<String> {
    yaml::fast_path_mismatch(text)
}

/// A file to load, registered in the source map.
struct FileWork<'a> {
    file: cue::FileId,
    path: &'a str,
    text: &'a str,
    /// A YAML file; otherwise a `.cue` definition file.
    is_yaml: bool,
    /// The text's blob id, when the caller gave one (for the load cache).
    blob_id: Option<crate::BlobId>,
}

/// What the parallel pass makes of one file.
// One value per file, moved once into the merged lists: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum ParsedFile {
    Yaml(Vec<ParsedDocument>),
    YamlError(yaml::YamlError),
    Cue(Result<crate::model::Definition, Diagnostic>),
}

#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum ParsedDocument {
    App(Result<Arc<LoadedApp>, Diagnostic>),
    /// Any other document, classified in the serial pass.
    Other(yaml::YamlDocument),
    /// YAML that go-yaml reads but the spec rejects (`yaml-lenient`).
    Warning(Diagnostic),
}

/// Whether loading reads `path` (a YAML file, or a `.cue` file under a definitions folder, not
/// an ignored one), and as YAML. For the incremental analysis, which patches the last load
/// with the changed files alone (`cache.rs`).
pub(crate) fn loaded_as(path: &str) -> Option<bool> {
    let path = path.trim_start_matches("./");
    let is_yaml = path.ends_with(".yaml") || path.ends_with(".yml");
    (!is_ignored(path) && (is_yaml || (path.ends_with(".cue") && is_under_definitions(path))))
        .then_some(is_yaml)
}

/// What loading makes of the YAML file `path` registered as `file` (the incremental
/// analysis re-parses a changed file alone, `cache.rs`).
pub(crate) fn parse_yaml_file(
    file: cue::FileId,
    path: &str,
    text: &str,
    namespaces: &NamespaceRules<'_>,
) -> ParsedFile {
    let work = FileWork {
        file,
        path,
        text,
        is_yaml: true,
        blob_id: None,
    };
    parse_file(&work, namespaces)
}

/// The per-file work that needs no shared state: YAML with positions, Applications decoded,
/// `.cue` definition files parsed.
fn parse_file(work: &FileWork<'_>, namespaces: &NamespaceRules<'_>) -> ParsedFile {
    if !work.is_yaml {
        return ParsedFile::Cue(definition_cue::load_definition_file(
            work.file, work.text, work.path, false,
        ));
    }
    let (documents, warnings) = match yaml::parse_documents_with_warnings(work.file, work.text) {
        Ok(parsed) => parsed,
        Err(error) => return ParsedFile::YamlError(error),
    };
    let mut file_digest = None;
    let warnings = warnings.into_iter().map(|warning| {
        ParsedDocument::Warning(Diagnostic::warning(
            "yaml-lenient",
            warning.message,
            Some(warning.span),
        ))
    });
    let parsed = documents
        .into_iter()
        .map(|document| {
            if is_application(&document.value) {
                let digest = *file_digest.get_or_insert_with(|| definition_yaml::digest(work.text));
                ParsedDocument::App(
                    load_application(work.file, digest, document, namespaces).map(Arc::new),
                )
            } else {
                ParsedDocument::Other(document)
            }
        })
        .chain(warnings)
        .collect();
    ParsedFile::Yaml(parsed)
}

/// The `apiVersion` group of a document, `None` without a group (`v1`) or `apiVersion`.
fn api_group(object: &serde_json::Map<String, serde_json::Value>) -> Option<&str> {
    object
        .get("apiVersion")
        .and_then(serde_json::Value::as_str)
        .and_then(|api_version| api_version.split_once('/').map(|(group, _)| group))
}

/// A KubeVela `Application` document (an OAM or unversioned `apiVersion`).
fn is_application(value: &serde_json::Value) -> bool {
    let Some(object) = value.as_object() else {
        return false;
    };
    object.get("kind").and_then(serde_json::Value::as_str) == Some("Application")
        && api_group(object).is_none_or(|group| group == "core.oam.dev")
}

/// Two Applications with one namespace and name would overwrite each other in the cluster:
/// the first is kept but blocked, each later one is dropped with an error at its name.
fn drop_duplicate_apps(
    apps: Vec<Arc<LoadedApp>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Arc<LoadedApp>> {
    let mut kept: Vec<Arc<LoadedApp>> = Vec::with_capacity(apps.len());
    for app in apps {
        match kept.last_mut() {
            Some(first) if first.app_ref == app.app_ref => {
                let first_span = first.document.positions.value_span("/metadata/name");
                let span = app.document.positions.value_span("/metadata/name");
                let message = format!("duplicate Application `{}`", app.app_ref);
                diagnostics.push(
                    Diagnostic::error("duplicate-app", message.clone(), Some(span))
                        .for_app(&app.app_ref)
                        .with_label(first_span, "first declared here"),
                );
                if !first.diagnostics.iter().any(|d| d.rule == "duplicate-app") {
                    // Copies the shared app (the load cache holds it) for this rare case.
                    Arc::make_mut(first).diagnostics.push(
                        Diagnostic::error(
                            "duplicate-app",
                            format!("{message}: declared again elsewhere"),
                            Some(first_span),
                        )
                        .for_app(&app.app_ref)
                        .with_label(span, "declared again here"),
                    );
                }
            }
            _ => kept.push(app),
        }
    }
    kept
}

fn is_ignored(path: &str) -> bool {
    AGENT_CONFIG_FILES.contains(&path)
        || path
            .split('/')
            .any(|segment| segment.starts_with('.') && segment.len() > 1)
}

fn is_under_definitions(path: &str) -> bool {
    path.split('/')
        .rev()
        .skip(1)
        .any(|segment| segment == "definitions")
}

/// Classifies one document that is not an Application: definition CRs, standalone workflows
/// and policies, CRDs; under `apps/` anything else is an `unknown-kind` warning.
#[allow(clippy::too_many_arguments)]
fn load_yaml_document(
    work: &FileWork<'_>,
    document: &yaml::YamlDocument,
    namespaces: &NamespaceRules<'_>,
    sources: &mut SourceMap,
    definitions: &mut Vec<crate::model::Definition>,
    standalone: &mut Standalone,
    crds: &mut Vec<serde_json::Value>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let path = work.path;
    let Some(object) = document.value.as_object() else {
        return;
    };
    let Some(kind) = object.get("kind").and_then(serde_json::Value::as_str) else {
        if ["apiVersion", "metadata", "spec"]
            .iter()
            .any(|key| object.contains_key(*key))
        {
            diagnostics.push(Diagnostic::error(
                "missing-field",
                "Kubernetes document has no `kind`",
                Some(document.positions.value_span("")),
            ));
        }
        return;
    };
    let api_group = api_group(object);
    let is_oam = api_group.is_none_or(|group| group == "core.oam.dev");
    if let Some(definition_kind) = DefinitionKind::from_cr_kind(kind).filter(|_| is_oam) {
        match definition_yaml::load_definition_cr(
            definition_kind,
            work.file,
            document,
            work.text,
            sources,
            path,
        ) {
            Ok(definition) => definitions.push(definition),
            Err(diagnostic) => diagnostics.push(diagnostic),
        }
    } else if is_oam && (kind == "Workflow" || kind == "Policy") {
        load_standalone(kind, document, namespaces, standalone, diagnostics);
    } else if kind == "CustomResourceDefinition" && api_group == Some("apiextensions.k8s.io") {
        crds.push(document.value.clone());
    } else if path.starts_with("apps/") || path.contains("/apps/") {
        diagnostics.push(Diagnostic::warning(
            "unknown-kind",
            format!("`{kind}` is not an Application or a definition; ignored"),
            Some(document.positions.value_span("/kind")),
        ));
    }
}

/// A standalone `Workflow` (`steps` at the top level) or `Policy` (`type` and `properties` at
/// the top level), KubeVela's `core.oam.dev/v1alpha1` shapes.
fn load_standalone(
    kind: &str,
    document: &yaml::YamlDocument,
    namespaces: &NamespaceRules<'_>,
    standalone: &mut Standalone,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let value = &document.value;
    let name = value
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str);
    let Some(name) = name.filter(|name| !name.is_empty()) else {
        diagnostics.push(Diagnostic::error(
            "missing-field",
            format!("{kind} has no `metadata.name`"),
            Some(document.positions.key_span("/metadata/name")),
        ));
        return;
    };
    let namespace = namespaces
        .forced
        .or_else(|| {
            value
                .pointer("/metadata/namespace")
                .and_then(serde_json::Value::as_str)
        })
        .unwrap_or(namespaces.default)
        .to_owned();
    let key = (namespace, name.to_owned());
    let result = if kind == "Workflow" {
        let steps = value.get("steps").cloned().unwrap_or_default();
        application::from_json_with_path::<Vec<WorkflowStep>>(&steps)
            .map(|steps| {
                standalone.workflows.insert(key, steps);
            })
            .map_err(|(pointer, message)| (format!("/steps{pointer}"), message))
    } else {
        application::from_json_with_path::<Policy>(value).map(|mut policy| {
            policy.name = name.to_owned();
            standalone.policies.insert(key, policy);
        })
    };
    if let Err((pointer, message)) = result {
        diagnostics.push(Diagnostic::error(
            "invalid-field",
            format!("{kind} `{name}`: {message}"),
            Some(document.positions.value_span(&pointer)),
        ));
    }
}
