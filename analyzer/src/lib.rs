//! Everything knowable from a Git tree alone: the Application model, loading with positions,
//! rendering with KubeVela's semantics, checks and diagnostics.
//!
//! The crate does no I/O. It takes a [`Snapshot`] (the files of one repository at one commit)
//! and returns plain data: rendered objects per app and [`Diagnostic`]s. A problem in the
//! user's repository is a diagnostic, never an `Err`: an app with an error is blocked while the
//! other apps still render.
//!
//! Entry point: [`render_snapshot`].

mod definitions;
mod diagnostic;
mod load;
pub mod model;
mod render;
mod snapshot;

pub use definitions::{BUILTIN_PREFIX, Definitions};
pub use diagnostic::{Diagnostic, Label, Severity};
pub use model::{Definition, DefinitionKind};
pub use snapshot::{Embedding, Location, Snapshot, SourceFile, SourceMap};

/// An app's identity: `(namespace, name)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for AppRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The render of every app in a snapshot.
#[derive(Debug, Clone, Default)]
pub struct RenderOutput {
    /// One entry per Application found, sorted by [`AppRef`].
    pub apps: Vec<RenderedApp>,
    /// Diagnostics not tied to one app (a YAML file that does not parse, a broken definition).
    pub diagnostics: Vec<Diagnostic>,
}

/// One Application, rendered.
#[derive(Debug, Clone)]
pub struct RenderedApp {
    pub app: AppRef,
    /// The file that declares the Application.
    pub file: cue::FileId,
    /// The rendered objects, in KubeVela's order: per component (in `spec.components` order),
    /// the workload, then the auxiliary objects (component `outputs`, then trait `outputs`).
    /// Empty when the app has an error diagnostic: a broken app is never partially rendered.
    pub objects: Vec<RenderedObject>,
    /// Errors and warnings for this app. Any error blocks the app.
    pub diagnostics: Vec<Diagnostic>,
    /// SHA-256 over the app's inputs (its manifest and the definitions it uses), hex. Equal
    /// hashes mean equal renders, so unchanged apps can be skipped.
    pub input_hash: String,
}

impl RenderedApp {
    /// True when any diagnostic is an error.
    pub fn is_blocked(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|diagnostic| diagnostic.severity == Severity::Error)
    }
}

/// One rendered Kubernetes object and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedObject {
    /// The component that produced it.
    pub component: String,
    /// `None` for the component's workload; `Some("AuxiliaryWorkload")` for a component
    /// `outputs` entry; `Some(trait type)` for a trait's `outputs` entry (KubeVela's
    /// `trait.oam.dev/type` label).
    pub trait_type: Option<String>,
    /// The `outputs` key for auxiliary objects (KubeVela's `trait.oam.dev/resource` label).
    pub output_name: Option<String>,
    /// The object as JSON, with KubeVela's labels and annotations added.
    pub object: serde_json::Value,
}
