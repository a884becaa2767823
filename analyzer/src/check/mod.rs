//! Static analysis: the rules that run after loading and rendering, and the pipeline that
//! applies the user's severity settings and suppressions to every diagnostic.
//!
//! Each rule is one module named after its id (`image_tag.rs` is `image-tag`); its `//!` doc
//! is the rule's user documentation (RULES.md is generated from it by a test). The rules see
//! an [`AppContext`]: the loaded Application with the position of every value, its rendered
//! objects, and the definitions. Rules on rendered objects point at the object and field in
//! the manifest when the app lists the object verbatim (`k8s-objects`), otherwise at the
//! component (or trait) that produced it; their messages name the object
//! (`Deployment team-a/web`).
//!
//! Order of work in [`analyze_snapshot`]: load and render (as [`crate::render_snapshot`]),
//! per-app rules in parallel, cross-app rules, definition rules, then severity overrides and
//! suppressions, and last: an app that now has an error loses its objects (a blocked app is
//! never partially applied).

mod api_lifecycle;
mod api_versions;
mod app_objects;
mod config;
mod container_security;
mod dangling_hpa;
mod dangling_ingress;
mod dangling_service;
mod dependency_cycle;
mod deprecated_api_version;
mod deprecated_service_account_field;
mod duplicate_object;
mod env_var_secret;
mod host_ipc;
mod host_network;
mod host_path;
mod host_pid;
mod image_tag;
mod invalid_name;
mod invalid_value;
mod missing_anti_affinity;
mod missing_kind;
mod missing_probes;
mod missing_property;
mod missing_resources;
mod missing_service_account;
mod net_raw_capability;
mod pdb_blocks_eviction;
mod pdb_unhealthy_eviction;
mod pod_spec;
mod privilege_escalation;
mod privileged_container;
mod probe_port;
mod property_constraints;
mod property_not_allowed;
mod property_out_of_range;
mod property_pattern;
mod property_type;
mod removed_api_version;
mod run_as_root;
mod schema_violation;
mod selector_mismatch;
mod sensitive_host_mount;
mod source_boundary;
mod ssh_port;
mod trait_conflict;
mod trait_not_applicable;
mod undocumented_parameter;
mod unknown_cluster;
mod unknown_dependency;
mod unknown_property;
mod unknown_workflow_step_type;
mod unsafe_sysctl;
mod unserved_api;
mod writable_root_filesystem;

use std::sync::Arc;

pub use config::{AnalysisConfig, IgnoreRule, RuleLevel};
pub(crate) use duplicate_object::{AppObjects, ObjectIndex};
pub(crate) use unknown_property::SchemaMemo;

use crate::definitions::Definitions;
use crate::load::application::LoadedApp;
use crate::packed::ConvertForm;
use crate::{Diagnostic, RenderOutput, RenderedApp, RenderedObject, Severity, Snapshot, SourceMap};

/// The annotation that suppresses rules for one Application: a comma-separated list of rule
/// ids, or `*` for every rule.
pub const IGNORE_ANNOTATION: &str = "driftless.dev/ignore";

/// Options of an analysis.
#[derive(Debug, Clone)]
pub struct AnalysisOptions {
    /// By default the render sees the target Kubernetes release (1.34) as
    /// `context.clusterVersion`, so templates pick the API versions that release serves.
    pub render: crate::RenderOptions,
    /// Severity overrides, suppressions and the cluster registry (from `driftless.yaml`).
    pub config: AnalysisConfig,
}

impl AnalysisOptions {
    /// The default options with `config` (from `driftless.yaml`), whose render limits, when
    /// set, replace the defaults.
    pub fn with_config(config: AnalysisConfig) -> AnalysisOptions {
        let mut options = AnalysisOptions::default();
        if let Some(limits) = config.limits {
            options.render.limits = limits;
        }
        options.config = config;
        options
    }
}

impl Default for AnalysisOptions {
    fn default() -> AnalysisOptions {
        let (major, minor) = api_versions::TARGET_VERSION;
        AnalysisOptions {
            render: crate::RenderOptions {
                cluster_version: crate::ClusterVersion::release(major, minor),
                ..crate::RenderOptions::default()
            },
            config: AnalysisConfig::default(),
        }
    }
}

/// Loads, renders and checks every Application of `snapshot`: all diagnostics of
/// [`crate::render_snapshot`] plus those of the analysis rules, with the configured severities
/// and suppressions applied.
///
/// Never fails: problems are diagnostics. An app with an error diagnostic (from any phase)
/// has no objects.
pub fn analyze_snapshot(
    snapshot: &Snapshot,
    definitions: &Definitions,
    options: &AnalysisOptions,
) -> (RenderOutput, SourceMap) {
    // Without a cache nothing keeps the objects: they stay values (no packing).
    let (output, sources) =
        analyze::<Vec<RenderedObject>>(snapshot, None, definitions, options, None);
    (output.into_output(), sources)
}

/// The pipeline of [`analyze_snapshot`]. With a `cache`, an app whose inputs are unchanged
/// takes its per-app result from it instead of rendering and checking again
/// ([`crate::analyze_snapshot_incremental`]); everything else runs as without. The output's
/// objects are in the form `O`: packed with a cache (its own form, so that the output shares
/// the cache's results), values without.
pub(crate) fn analyze<O: crate::cache::Form>(
    snapshot: &Snapshot,
    blob_ids: Option<&[crate::BlobId]>,
    definitions: &Definitions,
    options: &AnalysisOptions,
    mut cache: Option<&mut crate::cache::AnalysisCache>,
) -> (crate::cache::Analysis<O>, SourceMap) {
    use rayon::prelude::*;
    let namespaces = crate::load::application::NamespaceRules {
        forced: options.render.forced_namespace.as_deref(),
        default: &options.render.default_namespace,
    };
    let mut loaded = crate::load::load_snapshot_cached(
        snapshot,
        definitions,
        &namespaces,
        cache.as_deref_mut().map(crate::cache::AnalysisCache::files),
        blob_ids,
    );
    let evaluator = cue::Evaluator::new().with_budget(options.render.limits.budget());
    let parameter_schemas = unknown_property::ParameterSchemas::new(
        &loaded.definitions,
        &evaluator,
        cache
            .as_deref_mut()
            .map(crate::cache::AnalysisCache::take_schemas)
            .unwrap_or_default(),
    );
    let crd_schemas = crate::schema::SchemaSet::from_crds(&loaded.crds);
    // Only a definition with errors is reported when no app uses it: without one, which
    // definitions the reused apps used is not needed.
    let broken: Vec<&Arc<crate::model::Definition>> = loaded
        .definitions
        .iter()
        .filter(|definition| !definition.errors.is_empty())
        .collect();
    if let Some(cache) = cache.as_deref_mut() {
        cache.begin(&loaded, options);
    }
    // Settings and suppressions apply to every phase's diagnostics alike; per app they are
    // applied here, so that a cached result is stored (and shared) as the output has it.
    let settings = Settings::new(&options.config);
    let lookup = cache.as_deref();
    let per_app = AppAnalysis {
        loaded: &loaded,
        evaluator: &evaluator,
        parameter_schemas: &parameter_schemas,
        crd_schemas: &crd_schemas,
        settings: &settings,
        options,
    };
    let analyzed: Vec<crate::cache::Analyzed<O>> = loaded
        .apps
        .par_iter()
        .enumerate()
        .map(|(index, app)| {
            if let Some((rendered, used, reused)) =
                lookup.and_then(|cache| cache.lookup(index, app, &loaded, !broken.is_empty()))
            {
                return (O::from_cached(&rendered), used, reused);
            }
            // A cached parse is kept without its YAML value: parsed again to render it.
            per_app.analyze(&crate::cache::full_app(app, &loaded, &namespaces))
        })
        .collect();
    if let Some(cache) = cache.as_deref_mut() {
        cache.store(&loaded, &analyzed);
    }
    // Only a load without problems is patched later (`analyze_changes`).
    let load_clean = loaded.diagnostics.is_empty();
    let mut diagnostics = std::mem::take(&mut loaded.diagnostics);
    diagnostics.extend(definitions.diagnostics().iter().cloned());
    let no_broken = broken.is_empty();
    for definition in broken {
        let used = analyzed
            .iter()
            .any(|(_, used, _)| used.iter().any(|u| Arc::ptr_eq(u, definition)));
        if !used {
            diagnostics.extend(definition.errors.iter().cloned());
        }
    }
    diagnostics.extend(undocumented_parameter::check(
        &loaded.definitions,
        &parameter_schemas,
    ));
    let schema_memo = parameter_schemas.into_memo();
    if let Some(cache) = cache.as_deref_mut() {
        cache.keep_schemas(schema_memo);
    }
    let duplicates = duplicate_objects(cache.as_deref_mut(), &loaded, &analyzed);
    // The objects' identities and used definitions die here: on every core, not serially
    // (~35,000 identities of five strings each at 10,000 apps).
    let apps: Vec<Arc<RenderedApp<O>>> = analyzed.into_par_iter().map(|(app, _, _)| app).collect();
    let mut apps: crate::cache::Chunked<Arc<RenderedApp<O>>> = apps.into();
    let crossed = add_cross_app(&mut apps, duplicates, &loaded, &settings);
    settings.apply(&mut diagnostics, None, &loaded.sources);
    let sources = loaded.sources.clone();
    match cache {
        // The cache keeps the loaded state, to patch it with the next commit's changed files
        // alone when it can (`analyze_changes`).
        Some(cache) => cache.keep_last(
            loaded,
            definitions,
            load_clean && no_broken,
            O::to_cached_list(&apps),
            &diagnostics,
            crossed,
        ),
        // Without a cache to keep them, the loaded apps (documents, positions, models) die
        // here: dropped on every core rather than serially (~0.4 G instructions at 10,000
        // apps).
        None => loaded.apps.into_par_iter().for_each(drop),
    }
    (crate::cache::Analysis { apps, diagnostics }, sources)
}

/// The `duplicate-object` findings, `(app index, diagnostic)`: from the cache's object index,
/// updated for the apps analysed now only, or from every app's objects without a cache.
fn duplicate_objects<O>(
    cache: Option<&mut crate::cache::AnalysisCache>,
    loaded: &crate::load::Loaded,
    analyzed: &[crate::cache::Analyzed<O>],
) -> Vec<(usize, Diagnostic)> {
    use crate::cache::Reused;
    match cache {
        // The cache keeps the object index across analyses and updates it for changed apps
        // only.
        Some(cache) => {
            let object_index = cache.objects();
            object_index.update(
                loaded.apps.iter().map(|app| &app.app_ref),
                loaded
                    .apps
                    .iter()
                    .zip(analyzed)
                    .filter_map(|(app, (_, _, reused))| match reused {
                        Reused::No(objects) => Some((&app.app_ref, objects)),
                        Reused::Yes => None,
                    }),
            );
            duplicate_object::check(&loaded.apps, object_index)
        }
        // Without a cache every app was analysed here (none is `Reused::Yes`).
        None => {
            const NONE: &AppObjects = &Vec::new();
            let objects: Vec<&AppObjects> = analyzed
                .iter()
                .map(|(_, _, reused)| match reused {
                    Reused::No(objects) => objects,
                    Reused::Yes => NONE,
                })
                .collect();
            duplicate_object::check_fresh(&loaded.apps, &objects)
        }
    }
}

/// The analysis of a snapshot that differs from the cache's last one in the apps of
/// `patch.apps` only (`cache::analyze_changes` checked that, and patched the loaded state):
/// those apps are rendered and checked, the cross-app rule runs on its index, and every other
/// app and output-wide diagnostic is the last analysis's, unvisited (O(change)).
pub(crate) fn analyze_patch(
    patched: &[usize],
    options: &AnalysisOptions,
    cache: &mut crate::cache::AnalysisCache,
) -> Option<(crate::SharedOutput, SourceMap)> {
    use rayon::prelude::*;
    let mut last = cache.take_last()?;
    let loaded = &last.loaded;
    let evaluator = cue::Evaluator::new().with_budget(options.render.limits.budget());
    let parameter_schemas = unknown_property::ParameterSchemas::new(
        &loaded.definitions,
        &evaluator,
        cache.take_schemas(),
    );
    let crd_schemas = crate::schema::SchemaSet::from_crds(&loaded.crds);
    let settings = Settings::new(&options.config);
    let per_app = AppAnalysis {
        loaded,
        evaluator: &evaluator,
        parameter_schemas: &parameter_schemas,
        crd_schemas: &crd_schemas,
        settings: &settings,
        options,
    };
    let analyzed: Vec<(usize, crate::cache::Analyzed)> = patched
        .par_iter()
        .filter_map(|&index| Some((index, per_app.analyze(loaded.apps.get(index)?))))
        .collect();
    cache.keep_schemas(parameter_schemas.into_memo());
    cache.store_patch(loaded, &analyzed);
    let object_index = cache.objects();
    object_index.update(
        loaded.apps.iter().map(|app| &app.app_ref),
        analyzed
            .iter()
            .filter_map(|(index, (_, _, reused))| match reused {
                crate::cache::Reused::No(objects) => {
                    Some((&loaded.apps.get(*index)?.app_ref, objects))
                }
                crate::cache::Reused::Yes => None,
            }),
    );
    let duplicates = duplicate_object::check(&loaded.apps, object_index);
    // The last output but for the patched apps, and the apps the cross-app rule reported on
    // then (back to their own result before it runs again).
    let mut apps = last.output.clone();
    for (index, (rendered, _, _)) in &analyzed {
        apps.set(*index, rendered.clone());
    }
    for &index in &last.crossed {
        if let Some(rendered) = cache.rendered(index) {
            apps.set(index, rendered.clone());
        }
    }
    last.crossed = add_cross_app(&mut apps, duplicates, loaded, &settings);
    last.output = apps.clone();
    let sources = loaded.sources.clone();
    let diagnostics = last.diagnostics.clone();
    cache.put_last(last);
    Some((crate::SharedOutput { apps, diagnostics }, sources))
}

/// Adds the cross-app findings (`duplicate-object`, `(app index, diagnostic)`) to the apps they
/// are about, after the settings, each app a copy of its own; returns the indices of the apps
/// changed.
pub(crate) fn add_cross_app<O: crate::ObjectsForm>(
    apps: &mut crate::cache::Chunked<Arc<RenderedApp<O>>>,
    duplicates: Vec<(usize, Diagnostic)>,
    loaded: &crate::load::Loaded,
    settings: &Settings<'_>,
) -> Vec<usize> {
    let mut crossed = Vec::new();
    for (app_index, diagnostic) in duplicates {
        let Some(loaded_app) = loaded.apps.get(app_index) else {
            continue;
        };
        let mut found = vec![diagnostic];
        settings.apply(&mut found, Some(loaded_app), &loaded.sources);
        let Some(app) = apps.get_mut(app_index).filter(|_| !found.is_empty()) else {
            continue;
        };
        // A copy when the cache shares it: the cross-app finding is this output's only.
        let app = Arc::make_mut(app);
        app.diagnostics.extend(found);
        if app.is_blocked() {
            app.objects.clear();
        }
        crossed.push(app_index);
    }
    crossed.sort_unstable();
    crossed.dedup();
    crossed
}

/// Everything the analysis of one app reads: the render and the per-app rules of one app, as
/// the full analysis and the incremental one (`cache.rs`) run them.
pub(crate) struct AppAnalysis<'a> {
    pub(crate) loaded: &'a crate::load::Loaded,
    pub(crate) evaluator: &'a cue::Evaluator,
    pub(crate) parameter_schemas: &'a unknown_property::ParameterSchemas<'a>,
    pub(crate) crd_schemas: &'a crate::schema::SchemaSet,
    pub(crate) settings: &'a Settings<'a>,
    pub(crate) options: &'a AnalysisOptions,
}

impl AppAnalysis<'_> {
    /// Renders and checks `app`: its result after the per-app rules and the settings (objects
    /// in the form `O`: the rules read them as values, then they are packed when `O` says so),
    /// the definitions it used, and the objects it rendered (for `duplicate-object`).
    pub(crate) fn analyze<O: crate::ObjectsForm>(
        &self,
        app: &Arc<LoadedApp>,
    ) -> crate::cache::Analyzed<O> {
        let loaded = self.loaded;
        let (mut rendered, used) = crate::render::render_app(
            app,
            &loaded.definitions,
            &loaded.standalone,
            self.evaluator,
            &self.options.render,
        );
        let ctx = AppContext {
            loaded: app,
            objects: &rendered.objects,
            definitions: &loaded.definitions,
            config: &self.options.config,
            parameter_schemas: self.parameter_schemas,
            crd_schemas: self.crd_schemas,
        };
        let found = check_app(&ctx);
        property_constraints::classify(&ctx, &mut rendered.diagnostics);
        rendered.diagnostics.extend(found);
        // Before settings: the objects of an app blocked by them still count.
        let objects = duplicate_object::objects_of(&rendered);
        self.settings
            .apply(&mut rendered.diagnostics, Some(app), &loaded.sources);
        if rendered.is_blocked() {
            rendered.objects.clear();
        }
        (
            Arc::new(rendered.into_form()),
            used,
            crate::cache::Reused::No(objects),
        )
    }
}

/// What a per-app rule sees.
pub(crate) struct AppContext<'a> {
    pub(crate) loaded: &'a LoadedApp,
    pub(crate) objects: &'a [RenderedObject],
    pub(crate) definitions: &'a Definitions,
    pub(crate) config: &'a AnalysisConfig,
    pub(crate) parameter_schemas: &'a unknown_property::ParameterSchemas<'a>,
    /// The schemas of the repository's CustomResourceDefinitions.
    pub(crate) crd_schemas: &'a crate::schema::SchemaSet,
}

impl AppContext<'_> {
    /// The index of the component named `name` in `spec.components`.
    pub(crate) fn component_index(&self, name: &str) -> Option<usize> {
        self.loaded
            .app
            .spec
            .components
            .iter()
            .position(|component| component.name == name)
    }

    /// Where a rendered object came from: the object itself when the component lists it
    /// verbatim in its properties ([`AppContext::written_object`]), else the trait's `type`
    /// for a trait output, otherwise the component's `type`; the app's name when the component
    /// is not in the manifest (an object of a custom policy).
    pub(crate) fn object_span(&self, object: &RenderedObject) -> cue::Span {
        let positions = &self.loaded.document.positions;
        if let Some(pointer) = self.written_object(object) {
            return positions.value_span(&pointer);
        }
        let Some(index) = self.component_index(&object.component) else {
            return positions.value_span("/metadata/name");
        };
        let component = format!("/spec/components/{index}");
        if let Some(trait_type) = object.trait_type.as_deref() {
            let traits = &self.loaded.app.spec.components[index].traits;
            if let Some(trait_index) = traits.iter().position(|t| t.trait_type == trait_type) {
                return positions.value_span(&format!("{component}/traits/{trait_index}/type"));
            }
        }
        positions.value_span(&format!("{component}/type"))
    }

    /// The span of the field at `pointer` (a JSON pointer into the object) when the app lists
    /// the object verbatim, or of its nearest written ancestor; [`AppContext::object_span`]
    /// when the object is not written in the manifest.
    pub(crate) fn field_span(&self, object: &RenderedObject, pointer: &str) -> cue::Span {
        match self.written_object(object) {
            Some(base) => self
                .loaded
                .document
                .positions
                .value_span(&format!("{base}{pointer}")),
            None => self.object_span(object),
        }
    }

    /// The pointer of `object` in the manifest when its component lists it verbatim: the
    /// element of the component's `properties.objects` (as `k8s-objects` takes them) with the
    /// same `kind` and `metadata.name`.
    pub(crate) fn written_object(&self, object: &RenderedObject) -> Option<String> {
        if !matches!(
            object.trait_type.as_deref(),
            None | Some("AuxiliaryWorkload")
        ) {
            return None;
        }
        let index = self.component_index(&object.component)?;
        let listed = self.loaded.app.spec.components[index]
            .properties
            .as_ref()?
            .get("objects")?
            .as_array()?;
        let identity = |value: &serde_json::Value| {
            (
                value.get("kind").cloned(),
                value.pointer("/metadata/name").cloned(),
            )
        };
        let wanted = identity(&object.object);
        let position = listed
            .iter()
            .position(|written| identity(written) == wanted)?;
        Some(format!(
            "/spec/components/{index}/properties/objects/{position}"
        ))
    }

    /// The span of `properties.<name>` of the component that rendered `object`'s workload, when
    /// the manifest has it; [`AppContext::object_span`] otherwise.
    pub(crate) fn property_span(&self, object: &RenderedObject, name: &str) -> cue::Span {
        let positions = &self.loaded.document.positions;
        if object.trait_type.is_none()
            && let Some(index) = self.component_index(&object.component)
        {
            let pointer = format!("/spec/components/{index}/properties/{name}");
            if positions.contains(&pointer) {
                return positions.value_span(&pointer);
            }
        }
        self.object_span(object)
    }

    /// Where the field at `pointer` of `object` came from: the field itself when the app
    /// lists the object verbatim ([`AppContext::field_span`]), else the component's property
    /// `property` when it has one ([`AppContext::property_span`]), else the object's component.
    pub(crate) fn source_span(
        &self,
        object: &RenderedObject,
        pointer: &str,
        property: Option<&str>,
    ) -> cue::Span {
        if self.written_object(object).is_some() {
            return self.field_span(object, pointer);
        }
        match property {
            Some(name) => self.property_span(object, name),
            None => self.object_span(object),
        }
    }

    /// A diagnostic about a rendered object, attributed to its app and component.
    pub(crate) fn at_object(&self, object: &RenderedObject, diagnostic: Diagnostic) -> Diagnostic {
        let diagnostic = diagnostic.for_app(&self.loaded.app_ref);
        match self.component_index(&object.component) {
            Some(_) => diagnostic.for_component(&object.component),
            None => diagnostic,
        }
    }
}

/// Runs every per-app rule.
fn check_app(ctx: &AppContext<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    invalid_name::check(ctx, &mut out);
    unknown_workflow_step_type::check(ctx, &mut out);
    unknown_dependency::check(ctx, &mut out);
    dependency_cycle::check(ctx, &mut out);
    trait_not_applicable::check(ctx, &mut out);
    trait_conflict::check(ctx, &mut out);
    unknown_cluster::check(ctx, &mut out);
    source_boundary::check(ctx, &mut out);
    unknown_property::check(ctx, &mut out);
    let app_objects = app_objects::AppObjects::new(ctx.objects, &ctx.loaded.app_ref.namespace);
    for object in ctx.objects {
        dangling_service::check(ctx, &app_objects, object, &mut out);
        dangling_ingress::check(ctx, &app_objects, object, &mut out);
        dangling_hpa::check(ctx, &app_objects, object, &mut out);
        pdb_blocks_eviction::check(ctx, object, &mut out);
        pdb_unhealthy_eviction::check(ctx, object, &mut out);
        // The rules below all start from the object's `apiVersion` and `kind`: read once.
        let Some((api_version, kind)) = object_type(&object.object) else {
            // Without both, no rule below applies: no retired API, no schema, no pod.
            missing_kind::check(ctx, object, &mut out);
            continue;
        };
        let retired = api_versions::lookup(api_version, kind);
        let retired = retired.as_ref();
        unserved_api::check(ctx, object, api_version, kind, retired, &mut out);
        removed_api_version::check(ctx, object, retired, &mut out);
        deprecated_api_version::check(ctx, object, retired, &mut out);
        schema_violation::check(ctx, object, api_version, kind, &mut out);
        selector_mismatch::check(ctx, object, api_version, kind, &mut out);
        let pod_location = pod_spec::pod_spec_location(api_version, kind);
        invalid_value::check(
            ctx,
            object,
            api_version,
            kind,
            pod_location
                .as_ref()
                .map(|(pointer, workload)| (pointer.as_str(), *workload)),
            &mut out,
        );
        if let Some(pod) = pod_spec::PodTemplate::of(&object.object, api_version, kind) {
            image_tag::check(ctx, object, &pod, &mut out);
            missing_resources::check(ctx, object, &pod, &mut out);
            privileged_container::check(ctx, object, &pod, &mut out);
            host_network::check(ctx, object, &pod, &mut out);
            host_path::check(ctx, object, &pod, &mut out);
            missing_probes::check(ctx, object, &pod, &mut out);
            probe_port::check(ctx, object, &pod, &mut out);
            missing_anti_affinity::check(ctx, object, kind, &pod, &mut out);
            host_ipc::check(ctx, object, &pod, &mut out);
            host_pid::check(ctx, object, &pod, &mut out);
            run_as_root::check(ctx, object, &pod, &mut out);
            writable_root_filesystem::check(ctx, object, &pod, &mut out);
            privilege_escalation::check(ctx, object, &pod, &mut out);
            net_raw_capability::check(ctx, object, &pod, &mut out);
            sensitive_host_mount::check(ctx, object, &pod, &mut out);
            ssh_port::check(ctx, object, &pod, &mut out);
            unsafe_sysctl::check(ctx, object, &pod, &mut out);
            deprecated_service_account_field::check(ctx, object, &pod, &mut out);
            env_var_secret::check(ctx, object, &pod, &mut out);
            missing_service_account::check(ctx, &app_objects, object, &pod, &mut out);
        }
    }
    for diagnostic in &mut out {
        if diagnostic.app.is_none() {
            diagnostic.app = Some(ctx.loaded.app_ref.clone());
        }
    }
    out
}

/// An object's `apiVersion` and `kind`, when both are non-empty text.
fn object_type(object: &serde_json::Value) -> Option<(&str, &str)> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    (!api_version.is_empty() && !kind.is_empty()).then_some((api_version, kind))
}

/// How messages name an object: its kind, namespace and name (`Deployment team-a/web`;
/// `ClusterRole reader` without a namespace).
pub(crate) fn object_label(object: &serde_json::Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .filter(|text| !text.is_empty())
    };
    let kind = text("/kind").unwrap_or("object");
    let name = text("/metadata/name").unwrap_or("(unnamed)");
    match text("/metadata/namespace") {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Severity overrides and path suppressions, resolved once.
pub(crate) struct Settings<'a> {
    config: &'a AnalysisConfig,
    ignores: Vec<(globset::GlobSet, &'a [String])>,
}

impl<'a> Settings<'a> {
    pub(crate) fn new(config: &'a AnalysisConfig) -> Settings<'a> {
        let ignores = config
            .ignore
            .iter()
            .filter_map(|ignore| {
                let mut builder = globset::GlobSetBuilder::new();
                for pattern in &ignore.paths {
                    // Globs were checked when the config was parsed; one that still fails to
                    // compile matches nothing rather than everything.
                    if let Ok(glob) = globset::Glob::new(pattern) {
                        builder.add(glob);
                    }
                }
                builder
                    .build()
                    .ok()
                    .map(|set| (set, ignore.rules.as_slice()))
            })
            .collect();
        Settings { config, ignores }
    }

    /// Drops suppressed diagnostics and applies severity overrides. `app` supplies the
    /// per-app annotation.
    pub(crate) fn apply(
        &self,
        diagnostics: &mut Vec<Diagnostic>,
        app: Option<&LoadedApp>,
        sources: &SourceMap,
    ) {
        let annotation: Vec<&str> = app
            .and_then(|app| app.app.metadata.annotations.get(IGNORE_ANNOTATION))
            .map(|value| {
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|id| !id.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        diagnostics.retain_mut(|diagnostic| {
            // Internal errors are bugs to report, never silenced; an app over its render
            // budget has no objects, and must stay blocked rather than look empty.
            if matches!(
                diagnostic.rule,
                "internal-error" | "render-budget" | "render-deadline"
            ) {
                return true;
            }
            // The boundary holds back the app's author, who writes the annotation.
            if diagnostic.rule != "source-boundary"
                && annotation
                    .iter()
                    .any(|id| *id == "*" || *id == diagnostic.rule)
            {
                return false;
            }
            if let Some(span) = diagnostic.span {
                let path = sources.path(span.file);
                let suppressed = self.ignores.iter().any(|(set, rules)| {
                    set.is_match(path)
                        && (rules.is_empty() || rules.iter().any(|id| id == diagnostic.rule))
                });
                if suppressed {
                    return false;
                }
            }
            match self.config.rules.get(diagnostic.rule) {
                Some(RuleLevel::Off) => false,
                Some(RuleLevel::Error) => {
                    diagnostic.severity = Severity::Error;
                    true
                }
                Some(RuleLevel::Warning) => {
                    diagnostic.severity = Severity::Warning;
                    true
                }
                None => true,
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::RULES;

    /// RULES.md is generated from the rules table and each check module's `//!` doc; this
    /// test fails when they drift apart (`UPDATE_EXPECT=1` regenerates it).
    #[test]
    fn rules_md_is_generated_from_the_module_docs() {
        let check_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/check");
        let mut out = String::from(
            "# Rules\n\n\
             Every diagnostic Driftless reports has a stable rule id. Errors block the app \
             (it is not applied; the other apps are); warnings are reported only.\n\n\
             Severity is configurable per rule in `driftless.yaml`, and findings can be \
             suppressed per path with globs or per app with the `driftless.dev/ignore` \
             annotation (comma-separated ids, or `*`):\n\n\
             ```yaml\n\
             analysis:\n  \
               rules: { missing-probes: off, image-tag: error }\n  \
               ignore:\n    \
                 - paths: [\"apps/legacy/**\"]\n      \
                   rules: [missing-resources]   # empty: every rule\n\
             ```\n\n\
             `internal-error` is never suppressed. This file is generated from \
             `analyzer/src/rules.rs` and the `//!` docs of `analyzer/src/check/<rule>.rs` by \
             a test (`UPDATE_EXPECT=1 cargo test -p analyzer --lib rules_md`).\n\n\
             kube-linter's default checks map to these rules: `dangling-service`, \
             `dangling-ingress`, `dangling-hpa` (dangling-horizontalpodautoscaler), \
             `deprecated-service-account-field`, `sensitive-host-mount` (docker-sock, \
             sensitive-host-mounts), `net-raw-capability` (drop-net-raw-capability), \
             `env-var-secret`, `host-ipc`, `host-network`, `host-pid`, `invalid-value` \
             (invalid-target-ports), `image-tag` (latest-tag), `selector-mismatch` \
             (mismatching-selector), `removed-api-version` (no-extensions-v1beta), \
             `writable-root-filesystem` (no-read-only-root-fs), `missing-service-account` \
             (non-existent-service-account), `pdb-blocks-eviction` (pdb-max-unavailable, \
             pdb-min-available), `pdb-unhealthy-eviction` (pdb-unhealthy-pod-eviction-policy), \
             `probe-port` (liveness-port, readiness-port, startup-port), \
             `missing-anti-affinity` (no-anti-affinity), `privilege-escalation` (privilege-escalation-container), \
             `privileged-container`, `run-as-root` (run-as-non-root), `ssh-port`, \
             `unsafe-sysctl` (unsafe-sysctls), `missing-resources` (unset-cpu-requirements, \
             unset-memory-requirements): all of its default checks.\n\n\
             | id | default severity | summary |\n| --- | --- | --- |\n",
        );
        for rule in RULES {
            let severity = match rule.severity {
                crate::Severity::Error => "error",
                crate::Severity::Warning => "warning",
            };
            out.push_str(&format!(
                "| [`{0}`](#{0}) | {severity} | {1} |\n",
                rule.id, rule.summary
            ));
        }
        for rule in RULES {
            out.push_str(&format!("\n## {}\n\n", rule.id));
            let module = check_dir.join(format!("{}.rs", rule.id.replace('-', "_")));
            match std::fs::read_to_string(&module) {
                Ok(text) => {
                    let doc: Vec<&str> = text
                        .lines()
                        .take_while(|line| line.starts_with("//!"))
                        .map(|line| {
                            line.trim_start_matches("//!")
                                .strip_prefix(' ')
                                .unwrap_or(line.trim_start_matches("//!"))
                        })
                        .collect();
                    assert!(
                        doc.first()
                            .is_some_and(|first| first.contains(&format!("`{}`", rule.id))),
                        "{} must open its doc with the rule id",
                        module.display()
                    );
                    out.push_str(&doc.join("\n"));
                    out.push('\n');
                }
                // Rules reported while loading or rendering have no check module.
                Err(_) => out.push_str(&format!("{}.\n", capitalize(rule.summary))),
            }
        }
        expect_test::expect_file!["../../../RULES.md"].assert_eq(&out);
    }

    fn capitalize(text: &str) -> String {
        let mut chars = text.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => String::new(),
        }
    }
}
