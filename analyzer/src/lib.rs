//! Everything knowable from a Git tree alone: the Application model, loading with positions,
//! rendering with KubeVela's semantics, checks and diagnostics.
//!
//! The crate does no I/O. It takes a [`Snapshot`] (the files of one repository at one commit)
//! and returns plain data: rendered objects per app and [`Diagnostic`]s. A problem in the
//! user's repository is a diagnostic, never an `Err`: an app with an error is blocked while the
//! other apps still render.
//!
//! Entry point: [`render_snapshot`]:
//!
//! ```
//! let builtins = analyzer::Definitions::builtin(); // parse once, share
//! let snapshot = analyzer::Snapshot {
//!     commit: None,
//!     files: vec![analyzer::SourceFile {
//!         path: "apps/demo.yaml".to_owned(),
//!         contents: "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: demo}\nspec:\n  components:\n  - {name: web, type: nope}\n".to_owned(),
//!     }],
//! };
//! let (output, sources) = analyzer::render_snapshot(&snapshot, &builtins, &analyzer::RenderOptions::default());
//! let app = &output.apps[0];
//! assert!(app.is_blocked());
//! let diagnostic = &app.diagnostics[0];
//! assert_eq!(diagnostic.rule, "unknown-component-type");
//! let location = sources.locate(diagnostic.span.unwrap());
//! assert_eq!((location.path.as_str(), location.line), ("apps/demo.yaml", 6));
//! ```
//!
//! The pipeline (modules in pipeline order):
//! - `load`: YAML documents with a position for every value (JSON pointer → span), the
//!   [`model`] types, `.cue` definition files and YAML definition CRs (their embedded templates
//!   map back to YAML lines through [`SourceMap`]);
//! - [`Definitions`]: built-ins embedded at build time (`definitions/**/*.cue`), overridden by
//!   the repository's definitions of the same kind and name; each parsed once, shared by `Arc`;
//! - `render`: per app in parallel (rayon), override/topology policies, component templates,
//!   traits (`patch` with KubeVela's strategies, `outputs`, `patchOutputs`), export, labels and
//!   the OAM contract, custom policies; a panic is caught per app (`internal-error`);
//! - [`rules`]: every diagnostic rule id with its severity and summary.
//!
//! Deliberate differences from `vela dry-run` (each marked `Deviation:` in the code):
//! - an app whose topologies apply different overrides renders only the local cluster's
//!   placement (`remote-placement` warning) — the output has no per-cluster placement yet;
//! - an unnamed trait output is named `<component>-<type>-<hash>` with a hash of its JSON, not
//!   of a go-spew dump;
//! - `context.output` for traits is the JSON of the workload with defaults taken; values that
//!   are still non-concrete are left out (upstream injects CUE text).

// A `Diagnostic` is the error value of loaders on purpose (problems in input are data); it is
// large but built once per problem, never on a hot path.
#![allow(clippy::result_large_err)]

mod app_inputs;
pub mod boundary;
mod cache;
mod check;
mod definitions;
mod diagnostic;
mod load;
pub mod model;
mod packed;
mod render;
pub mod rules;
pub mod schema;
mod snapshot;
pub mod status;

pub use app_inputs::AppInputs;
pub use cache::{
    AnalysisCache, BlobId, CacheStats, FileChange, SharedOutput, analyze_changes,
    analyze_snapshot_incremental, analyze_snapshot_shared, analyze_snapshot_shared_with_ids,
};
pub use check::{
    AnalysisConfig, AnalysisOptions, IGNORE_ANNOTATION, IgnoreRule, RuleLevel, analyze_snapshot,
};
pub use definitions::{BUILTIN_PREFIX, Definitions};
pub use diagnostic::{Diagnostic, Label, Severity};
#[doc(hidden)]
pub use load::{load_only, yaml_fast_path_mismatch, yaml_options};
pub use model::{Definition, DefinitionKind};
pub use packed::{AppRender, CachedApp};
pub(crate) use packed::{ObjectsForm, PackedApp, PackedObjects};
pub use snapshot::{Embedding, Location, Snapshot, SourceFile, SourceMap};

/// Options of a render.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// The namespace of apps whose manifest has none (`default`, like `vela dry-run`).
    pub default_namespace: String,
    /// Forces every app into this namespace, over `metadata.namespace` (`vela dry-run -n`).
    pub forced_namespace: Option<String>,
    /// The Kubernetes version templates see as `context.clusterVersion`. Templates branch on it
    /// (`gateway` emits `networking.k8s.io/v1beta1` below 1.19, `hpa` `autoscaling/v2beta2`
    /// below 1.23), so a render for a real cluster must carry that cluster's version.
    pub cluster_version: ClusterVersion,
    /// How much work one app's render may take; an app over a limit is blocked with a
    /// `render-budget` diagnostic and the other apps render as usual.
    pub limits: RenderLimits,
}

/// Limits on rendering one app, so that a hostile or broken definition costs only its own
/// app. The defaults are far above what real definitions need (see [`cue::Budget`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RenderLimits {
    /// Steps one template evaluation may take ([`cue::Budget::steps`]).
    pub steps: u64,
    /// Seconds one app's render may take, all its templates together.
    pub app_seconds: f64,
}

impl RenderLimits {
    /// An app's render time limit by default.
    pub const DEFAULT_APP_SECONDS: f64 = 10.0;

    /// The evaluator budget for one app's render that starts now.
    pub(crate) fn budget_from_now(&self) -> cue::Budget {
        let limit = std::time::Duration::try_from_secs_f64(self.app_seconds)
            .unwrap_or(std::time::Duration::MAX);
        cue::Budget {
            steps: self.steps,
            deadline: cue::Deadline::after(limit),
        }
    }

    /// The evaluator budget of work outside an app's render (rules' schema evaluations).
    pub(crate) fn budget(&self) -> cue::Budget {
        cue::Budget {
            steps: self.steps,
            deadline: None,
        }
    }
}

impl Default for RenderLimits {
    fn default() -> RenderLimits {
        RenderLimits {
            steps: cue::Budget::DEFAULT_STEPS,
            app_seconds: RenderLimits::DEFAULT_APP_SECONDS,
        }
    }
}

/// A Kubernetes version as KubeVela puts it into `context.clusterVersion`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterVersion {
    pub major: String,
    /// The minor version as a number (KubeVela trims `+` and other suffixes).
    pub minor: u32,
    pub git_version: String,
    pub platform: String,
}

impl ClusterVersion {
    /// What `vela dry-run --offline` uses: every field empty and `minor` 0, so templates take
    /// their legacy branches. Use it to compare with KubeVela's dry-run output.
    pub fn vela_offline() -> ClusterVersion {
        ClusterVersion::default()
    }

    /// A release such as 1.34, as the cluster's `/version` reports it.
    pub fn release(major: u32, minor: u32) -> ClusterVersion {
        ClusterVersion {
            major: major.to_string(),
            minor,
            git_version: format!("v{major}.{minor}.0"),
            platform: "linux/amd64".to_owned(),
        }
    }
}

impl Default for RenderOptions {
    fn default() -> RenderOptions {
        RenderOptions {
            default_namespace: "default".to_owned(),
            forced_namespace: None,
            cluster_version: ClusterVersion::vela_offline(),
            limits: RenderLimits::default(),
        }
    }
}

/// Loads and renders every Application of `snapshot`, with `definitions` (usually
/// [`Definitions::builtin`]) overridden by the repository's own definitions.
///
/// Never fails: problems are diagnostics, per app ([`RenderedApp::diagnostics`]) or global
/// ([`RenderOutput::diagnostics`]). The returned [`SourceMap`] resolves every diagnostic span
/// to file, line and column. Apps are rendered in parallel (rayon); the output is sorted by
/// [`AppRef`] and deterministic.
pub fn render_snapshot(
    snapshot: &Snapshot,
    definitions: &Definitions,
    options: &RenderOptions,
) -> (RenderOutput, SourceMap) {
    use rayon::prelude::*;
    let namespaces = load::application::NamespaceRules {
        forced: options.forced_namespace.as_deref(),
        default: &options.default_namespace,
    };
    let loaded = load::load_snapshot(snapshot, definitions, &namespaces);
    let evaluator = cue::Evaluator::new().with_budget(options.limits.budget());
    let rendered: Vec<(RenderedApp, Vec<std::sync::Arc<Definition>>)> = loaded
        .apps
        .par_iter()
        .map(|app| {
            render::render_app(
                app,
                &loaded.definitions,
                &loaded.standalone,
                &evaluator,
                options,
            )
        })
        .collect();
    let mut diagnostics = loaded.diagnostics;
    diagnostics.extend(definitions.diagnostics().iter().cloned());
    // Broken repo definitions that no app uses are still reported, once (only a definition
    // with errors is looked for among the apps' used ones).
    for definition in loaded
        .definitions
        .iter()
        .filter(|definition| !definition.errors.is_empty())
    {
        let used = rendered
            .iter()
            .any(|(_, used)| used.iter().any(|u| std::sync::Arc::ptr_eq(u, definition)));
        if !used {
            diagnostics.extend(definition.errors.iter().cloned());
        }
    }
    // The loaded apps (documents, positions, models) and the used-definition lists die here:
    // on every core rather than serially (~0.1 s of CPU at 10,000 apps).
    let (apps, ()) = rayon::join(
        || rendered.into_par_iter().map(|(app, _)| app).collect(),
        || loaded.apps.into_par_iter().for_each(drop),
    );
    (RenderOutput { apps, diagnostics }, loaded.sources)
}

/// Renders every Application of `snapshot` once per placement, like `vela dry-run`: one render
/// per topology policy of each deploy step, with that step's override policies applied (an app
/// without deploy step renders once, without its overrides). [`render_snapshot`] renders one
/// placement per app (the local cluster's); this shows what each cluster would get. Beyond
/// `vela dry-run`, as KubeVela's controller deploys: after the top-level deploy steps come the
/// deploy sub-steps of step groups, and a step's `replication` policies render the selected
/// components once per key (`context.replicaKey`, label `app.oam.dev/replicaKey`).
///
/// Never fails, like [`render_snapshot`]: problems are diagnostics of each placement's render.
pub fn render_placements(
    snapshot: &Snapshot,
    definitions: &Definitions,
    options: &RenderOptions,
) -> (Vec<AppPlacements>, SourceMap) {
    use rayon::prelude::*;
    let namespaces = load::application::NamespaceRules {
        forced: options.forced_namespace.as_deref(),
        default: &options.default_namespace,
    };
    let loaded = load::load_snapshot(snapshot, definitions, &namespaces);
    let evaluator = cue::Evaluator::new().with_budget(options.limits.budget());
    let apps = loaded
        .apps
        .par_iter()
        .map(|app| AppPlacements {
            app: app.app_ref.clone(),
            placements: render::render_app_placements(
                app,
                &loaded.definitions,
                &loaded.standalone,
                &evaluator,
                options,
            )
            .into_iter()
            .map(|(topology, rendered)| Placement { topology, rendered })
            .collect(),
        })
        .collect();
    (apps, loaded.sources)
}

/// The placements of one app (see [`render_placements`]).
#[derive(Debug, Clone)]
pub struct AppPlacements {
    pub app: AppRef,
    /// In `vela dry-run`'s order; never empty.
    pub placements: Vec<Placement>,
}

/// One placement's render of an app.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The topology policy that makes this placement; `None` for a deploy step without a
    /// topology, or for an app without deploy step.
    pub topology: Option<String>,
    pub rendered: RenderedApp,
}

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

/// Outputs with at least this many apps are dropped on every core ([`RenderOutput`]'s `Drop`).
const PARALLEL_DROP_MIN_APPS: usize = 256;

impl Drop for RenderOutput {
    /// A rendered object is a tree of small allocations (every map, key and string): freeing a
    /// large output on the caller's thread alone was serial work after a parallel analysis
    /// (~0.2 G instructions, ~0.1 s of CPU at 10,000 apps). Its apps are freed on every core
    /// instead. (So fields cannot be moved out of a `RenderOutput`: `std::mem::take` them.)
    fn drop(&mut self) {
        if self.apps.len() >= PARALLEL_DROP_MIN_APPS {
            use rayon::prelude::*;
            std::mem::take(&mut self.apps)
                .into_par_iter()
                .for_each(drop);
        }
    }
}

/// One Application, rendered. `O` is the form of its objects: JSON values (the default: what
/// the renderer and the rules make, and the CLI's output) or, inside this crate, compact JSON
/// text (what the analysis cache keeps and shares with the agent as [`CachedApp`]).
#[derive(Debug, Clone)]
pub struct RenderedApp<O = Vec<RenderedObject>> {
    pub app: AppRef,
    /// The file that declares the Application.
    pub file: cue::FileId,
    /// The rendered objects, in KubeVela's order: per component (in `spec.components` order),
    /// the workload, then the auxiliary objects (component `outputs`, then trait `outputs`).
    /// Empty when the app has an error diagnostic: a broken app is never partially rendered.
    pub objects: O,
    /// Errors and warnings for this app. Any error blocks the app.
    pub diagnostics: Vec<Diagnostic>,
    /// SHA-256 over the app's inputs (its manifest and the definitions it uses), hex. Equal
    /// hashes mean equal renders, so unchanged apps can be skipped.
    pub input_hash: String,
    /// What a plan reads of the manifest besides the objects (policies, status inputs, the
    /// workflow), taken when it was loaded. Empty in a placement's render
    /// ([`render_placements`]): its app's own render carries them.
    pub inputs: AppInputs,
}

impl<O> RenderedApp<O> {
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
    /// The component that produced it (for a custom policy's object: the policy name).
    pub component: String,
    /// `None` for the component's workload; `Some("AuxiliaryWorkload")` for a component
    /// `outputs` entry; `Some(trait type)` for a trait's `outputs` entry (KubeVela's
    /// `trait.oam.dev/type` label); `Some("Policy")` for an object rendered by a custom
    /// policy (after every component's objects, in `spec.policies` order).
    pub trait_type: Option<String>,
    /// The `outputs` key for auxiliary objects (KubeVela's `trait.oam.dev/resource` label).
    pub output_name: Option<String>,
    /// The object as JSON, with KubeVela's labels and annotations added.
    pub object: serde_json::Value,
}
