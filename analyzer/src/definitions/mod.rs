//! The definition registry: every ComponentDefinition, TraitDefinition, PolicyDefinition,
//! WorkflowStepDefinition and WorkloadDefinition known for one snapshot, by kind and name.
//!
//! Built-ins are embedded in the binary (`definitions/**/*.cue`, see `build.rs`) and parsed
//! once by [`Definitions::builtin`]; the caller keeps that value and hands it to every render.
//! Repo-local definitions override built-ins of the same kind and name. Definitions are shared
//! behind `Arc`, so apps never re-parse a template.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::load::definition_cue::load_definition_file;
use crate::model::{Definition, DefinitionKind};
use crate::{Diagnostic, SourceMap};

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_definitions.rs"));
}

/// Path prefix under which built-in definitions appear in diagnostics.
pub const BUILTIN_PREFIX: &str = "<builtin>/definitions/";

/// A set of definitions by kind and name, plus the source texts their spans point into.
#[derive(Debug, Clone, Default)]
pub struct Definitions {
    /// By kind, then name: a lookup borrows the name (it runs for every component and trait of
    /// every app, so it must not allocate a key).
    by_name: BTreeMap<DefinitionKind, BTreeMap<String, Arc<Definition>>>,
    /// Source texts of these definitions. A snapshot's source map starts as a copy of this, so
    /// built-in spans stay valid in every render.
    sources: SourceMap,
    /// Problems loading the built-in files themselves.
    diagnostics: Vec<Diagnostic>,
}

impl Definitions {
    /// No definitions at all (for rendering with only the repository's own definitions).
    pub fn empty() -> Definitions {
        Definitions::default()
    }

    /// The built-in definitions embedded in the binary, parsed now. Call once and share.
    pub fn builtin() -> Definitions {
        let mut definitions = Definitions::default();
        for (relative, text) in builtin::BUILTIN_DEFINITIONS {
            let path = format!("{BUILTIN_PREFIX}{relative}");
            let file = definitions.sources.add(path.clone(), *text);
            match load_definition_file(file, text, &path, true) {
                Ok(definition) => definitions.insert(definition),
                Err(diagnostic) => definitions.diagnostics.push(diagnostic),
            }
        }
        definitions
    }

    /// Adds or replaces a definition (a later one of the same kind and name wins).
    pub fn insert(&mut self, definition: Definition) {
        self.by_name
            .entry(definition.kind)
            .or_default()
            .insert(definition.name.clone(), Arc::new(definition));
    }

    /// The definition of `kind` named `name`. A versioned reference `name@v2` resolves to
    /// `name` (definition revisions are a cluster concept; a repository holds one version).
    pub fn get(&self, kind: DefinitionKind, name: &str) -> Option<&Arc<Definition>> {
        let base = name.split_once('@').map_or(name, |(base, _)| base);
        self.by_name.get(&kind)?.get(base)
    }

    /// All definitions, ordered by kind and name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Definition>> {
        self.by_name.values().flat_map(BTreeMap::values)
    }

    /// Number of definitions.
    pub fn len(&self) -> usize {
        self.by_name.values().map(BTreeMap::len).sum()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.values().all(BTreeMap::is_empty)
    }

    /// Problems found loading the built-in definition files.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The source texts the definitions' spans point into.
    pub fn sources(&self) -> &SourceMap {
        &self.sources
    }
}
