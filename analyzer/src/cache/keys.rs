//! What a cache entry is keyed by: the digests of an app's manifest, of the definitions and
//! of the inputs every app reads, the definitions an Application names, and the identity of
//! a source map's files independent of their ids ([`FileKey`]).

use std::collections::HashMap;

use cue::FileId;
use sha2::Digest;

use crate::load::Loaded;
use crate::load::application::LoadedApp;
use crate::model::{Application, DefinitionKind, WorkflowStep};
use crate::{AnalysisOptions, Definitions, PackedApp, SourceMap};

/// A file of a source map, independent of its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct FileKey {
    path: String,
    /// `(first line, indentation)` of an embedded template in `path`.
    embedded: Option<(u32, u32)>,
}

/// The identity of every file `rendered` refers to.
pub(super) fn file_keys(rendered: &PackedApp, sources: &SourceMap) -> Vec<(FileId, FileKey)> {
    let mut ids: Vec<FileId> = vec![rendered.file];
    for diagnostic in &rendered.diagnostics {
        ids.extend(diagnostic.span.map(|span| span.file));
        ids.extend(diagnostic.labels.iter().map(|label| label.span.file));
    }
    ids.sort_by_key(|id| id.0);
    ids.dedup();
    ids.into_iter()
        .map(|id| (id, file_key(sources, id)))
        .collect()
}

/// The definitions an Application names, by kind.
pub(super) fn referenced(app: &Application) -> Vec<(DefinitionKind, String)> {
    fn steps(found: &mut Vec<(DefinitionKind, String)>, list: &[WorkflowStep]) {
        for step in list {
            found.push((DefinitionKind::WorkflowStep, step.step_type.clone()));
            steps(found, &step.sub_steps);
        }
    }
    let mut found = Vec::new();
    for component in &app.spec.components {
        found.push((DefinitionKind::Component, component.component_type.clone()));
        for component_trait in &component.traits {
            found.push((DefinitionKind::Trait, component_trait.trait_type.clone()));
        }
    }
    for policy in &app.spec.policies {
        found.push((DefinitionKind::Policy, policy.policy_type.clone()));
    }
    if let Some(workflow) = &app.spec.workflow {
        steps(&mut found, &workflow.steps);
    }
    found
}

/// The app's file (path and content) and identity.
pub(super) fn manifest_digest(app: &LoadedApp, sources: &SourceMap) -> [u8; 32] {
    let mut hasher = sha2::Sha256::new();
    for part in [
        sources.path(app.file),
        app.app_ref.namespace.as_str(),
        app.app_ref.name.as_str(),
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.update(app.file_digest);
    hasher.finalize().into()
}

/// Everything every app's result may depend on.
pub(super) fn global_digest(loaded: &Loaded, options: &AnalysisOptions) -> [u8; 32] {
    let mut hasher = sha2::Sha256::new();
    // Debug output of plain option structs: deterministic (no hash maps in them), and any new
    // field is covered without touching this function.
    hasher.update(format!("{options:?}").as_bytes());
    for definition in loaded.definitions.iter() {
        hasher.update([0]);
        hasher.update(definition.kind.cr_kind().as_bytes());
        hasher.update(definition.name.as_bytes());
        if definition.kind == DefinitionKind::Workload {
            hasher.update(definition.source_digest);
        }
    }
    hasher.update(format!("{:?}", loaded.standalone).as_bytes());
    for crd in &loaded.crds {
        hasher.update([0]);
        hasher.update(crd.to_string().as_bytes());
    }
    hasher.finalize().into()
}

/// Every file of `sources` by identity (the first id of each).
pub(super) fn file_ids(sources: &SourceMap) -> HashMap<FileKey, FileId> {
    let mut ids = HashMap::with_capacity(sources.len());
    for index in 0..sources.len() {
        let id = FileId(index as u32);
        ids.entry(file_key(sources, id)).or_insert(id);
    }
    ids
}

/// True when `file` of `sources` is the file `key` names, without building a key.
pub(super) fn file_key_is(sources: &SourceMap, file: FileId, key: &FileKey) -> bool {
    sources.path(file) == key.path
        && sources
            .embedding(file)
            .map(|embedding| (embedding.first_line, embedding.indent))
            == key.embedded
}

/// Every definition by kind, name and source digest.
pub(super) fn definitions_digest(loaded: &Loaded) -> [u8; 32] {
    let mut hasher = sha2::Sha256::new();
    for definition in loaded.definitions.iter() {
        hasher.update(definition.kind.cr_kind().as_bytes());
        hasher.update([0]);
        hasher.update(definition.name.as_bytes());
        hasher.update([0]);
        hasher.update(definition.source_digest);
    }
    hasher.finalize().into()
}

fn file_key(sources: &SourceMap, file: FileId) -> FileKey {
    FileKey {
        path: sources.path(file).to_owned(),
        embedded: sources
            .embedding(file)
            .map(|embedding| (embedding.first_line, embedding.indent)),
    }
}

/// Every built-in definition by kind, name and source digest, and their problems.
pub(super) fn builtins_digest(builtins: &Definitions) -> [u8; 32] {
    let mut hasher = sha2::Sha256::new();
    for definition in builtins.iter() {
        hasher.update(definition.kind.cr_kind().as_bytes());
        hasher.update([0]);
        hasher.update(definition.name.as_bytes());
        hasher.update([0]);
        hasher.update(definition.source_digest);
    }
    hasher.update(format!("{:?}", builtins.diagnostics()).as_bytes());
    hasher.finalize().into()
}
