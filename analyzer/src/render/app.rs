//! One Application: resolve its definitions, render every component, and never leave a
//! partial render behind (any error empties `objects`).

use std::borrow::Cow;
use std::sync::Arc;

use cue::{Evaluator, Exported};
use sha2::Digest;

use super::component::{ComponentDefinitions, render_component};
use super::custom_policy::render_custom_policies;
use super::patch::ConstraintCheck;
use super::policies::{
    EffectiveComponent, PlacementComponents, effective_components, placement_components,
};
use crate::definitions::Definitions;
use crate::load::Standalone;
use crate::load::application::LoadedApp;
use crate::load::yaml::Positions;
use crate::model::{Component, Definition, DefinitionKind};
use crate::{ClusterVersion, Diagnostic, RenderOptions, RenderedApp, Severity};

/// Renders one app; a panic inside becomes an `internal-error` diagnostic for this app only.
pub(crate) fn render_app(
    loaded: &LoadedApp,
    definitions: &Definitions,
    standalone: &Standalone,
    evaluator: &Evaluator,
    options: &RenderOptions,
) -> (RenderedApp, Vec<Arc<Definition>>) {
    let document = document_hasher(loaded);
    let (mut rendered, used) = guarded(loaded, &document, || {
        let evaluator = within_limits(evaluator, options);
        let effective = effective_components(loaded, standalone);
        render_app_inner(
            loaded,
            &document,
            definitions,
            &evaluator,
            effective,
            &options.cluster_version,
        )
    });
    // From the manifest as written, as KubeVela reads policies and status: not the
    // components after overrides.
    rendered.inputs = crate::AppInputs::of(&loaded.app, definitions);
    (rendered, used)
}

/// `evaluator` with the budget of one app's render that starts now: its deadline is shared
/// by every template the app evaluates.
fn within_limits(evaluator: &Evaluator, options: &RenderOptions) -> Evaluator {
    evaluator.with_budget(options.limits.budget_from_now())
}

/// Renders every placement of one app separately (kubevela-render-semantics.md §4.2): one
/// render per topology of each deploy step, with that step's override policies, in `vela
/// dry-run`'s order; a single render with no topology when the app has no deploy step.
pub(crate) fn render_app_placements(
    loaded: &LoadedApp,
    definitions: &Definitions,
    standalone: &Standalone,
    evaluator: &Evaluator,
    options: &RenderOptions,
) -> Vec<(Option<String>, RenderedApp)> {
    // The app's own part of the input hash is the same for every placement: hashed once.
    let document = document_hasher(loaded);
    let placements = match placement_components(loaded, standalone) {
        Ok(placements) => placements,
        Err(problems) => {
            let (rendered, _) = guarded(loaded, &document, || {
                render_app_inner(
                    loaded,
                    &document,
                    definitions,
                    &within_limits(evaluator, options),
                    Err(problems),
                    &options.cluster_version,
                )
            });
            return vec![(None, rendered)];
        }
    };
    placements
        .into_iter()
        .map(
            |PlacementComponents {
                 topology,
                 components,
             }| {
                let (rendered, _) = guarded(loaded, &document, || {
                    render_app_inner(
                        loaded,
                        &document,
                        definitions,
                        &within_limits(evaluator, options),
                        Ok((components, Vec::new())),
                        &options.cluster_version,
                    )
                });
                (topology, rendered)
            },
        )
        .collect()
}

/// Runs one render; a panic inside becomes an `internal-error` diagnostic for this app only.
fn guarded(
    loaded: &LoadedApp,
    document: &sha2::Sha256,
    render: impl FnOnce() -> (RenderedApp, Vec<Arc<Definition>>),
) -> (RenderedApp, Vec<Arc<Definition>>) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(render));
    match result {
        Ok(result) => result,
        Err(payload) => {
            let detail = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let diagnostic = Diagnostic::error(
                "internal-error",
                format!(
                    "internal error while rendering this app ({detail}); this is a Driftless bug, \
                     please report it with the Application and the definitions it uses"
                ),
                Some(loaded.document.positions.value_span("")),
            )
            .for_app(&loaded.app_ref);
            let mut diagnostics = loaded.diagnostics.clone();
            diagnostics.push(diagnostic);
            (
                RenderedApp {
                    app: loaded.app_ref.clone(),
                    file: loaded.file,
                    objects: Vec::new(),
                    diagnostics,
                    input_hash: input_hash(document, &[]),
                    inputs: crate::AppInputs::default(),
                },
                Vec::new(),
            )
        }
    }
}

fn render_app_inner(
    loaded: &LoadedApp,
    document: &sha2::Sha256,
    definitions: &Definitions,
    evaluator: &Evaluator,
    effective: Result<(Vec<EffectiveComponent<'_>>, Vec<Diagnostic>), Vec<Diagnostic>>,
    cluster_version: &ClusterVersion,
) -> (RenderedApp, Vec<Arc<Definition>>) {
    let mut diagnostics = loaded.diagnostics.clone();
    let positions = &loaded.document.positions;
    let mut used: Vec<Arc<Definition>> = Vec::new();
    let effective = match effective {
        Ok((effective, warnings)) => {
            diagnostics.extend(warnings);
            effective
        }
        Err(problems) => {
            diagnostics.extend(problems);
            Vec::new()
        }
    };
    let components_json = components_json(loaded, &effective);
    let mut resolved: Vec<Option<ComponentDefinitions>> = Vec::new();
    for EffectiveComponent { component, pointer } in &effective {
        let (component_definition, traits, problems) =
            resolve_component(component, pointer, definitions, positions, &mut used);
        let ready = problems.is_empty() && traits.len() == component.traits.len();
        diagnostics.extend(problems);
        resolved.push(match component_definition {
            Some(component) if ready => Some(ComponentDefinitions { component, traits }),
            _ => None,
        });
    }

    let check_closure = |constraint: &cue::Constraint, value: &Exported| {
        check_constraint(evaluator, constraint, value)
    };
    let check: ConstraintCheck<'_> = &check_closure;
    let mut objects = Vec::new();
    // Components are rendered even when another part of the app has an error, so one run
    // reports every problem; the objects are dropped below anyway.
    {
        for (EffectiveComponent { component, pointer }, resolved) in effective.iter().zip(&resolved)
        {
            let Some(resolved) = resolved else { continue };
            match render_component(
                loaded,
                pointer,
                component,
                &components_json,
                resolved,
                evaluator,
                cluster_version,
                check,
            ) {
                Ok(mut rendered) => {
                    if let Some(key) = &component.replica_key {
                        super::policies::label_replica(&mut rendered, key);
                    }
                    objects.extend(rendered);
                }
                Err(problems) => diagnostics.extend(
                    problems
                        .into_iter()
                        .map(|problem| problem.for_component(&component.name)),
                ),
            }
        }
    }
    if effective
        .iter()
        .any(|effective| effective.component.replica_key.is_some())
    {
        diagnostics.extend(super::policies::replica_collisions(loaded, &objects));
    }
    if !diagnostics.iter().any(|d| d.severity == Severity::Error) {
        match render_custom_policies(loaded, definitions, evaluator, &objects, &mut used) {
            Ok(policy_objects) => objects.extend(policy_objects),
            Err(problems) => diagnostics.extend(problems),
        }
    }
    for diagnostic in &mut diagnostics {
        diagnostic.app = Some(loaded.app_ref.clone());
    }
    if diagnostics.iter().any(|d| d.severity == Severity::Error) {
        objects.clear();
    }
    let input_hash = input_hash(document, &used);
    (
        RenderedApp {
            app: loaded.app_ref.clone(),
            file: loaded.file,
            objects,
            diagnostics,
            input_hash,
            inputs: crate::AppInputs::default(),
        },
        used,
    )
}

/// The definitions a component's type and traits name, each looked up once (a name not
/// defined, or a definition with errors or unsupported, is a problem of the component), noted
/// in `used`.
fn resolve_component(
    component: &Component,
    pointer: &str,
    definitions: &Definitions,
    positions: &Positions,
    used: &mut Vec<Arc<Definition>>,
) -> (
    Option<Arc<Definition>>,
    Vec<Arc<Definition>>,
    Vec<Diagnostic>,
) {
    let mut problems = Vec::new();
    let component_definition = if component.component_type.is_empty() {
        None
    } else {
        match definitions.get(DefinitionKind::Component, &component.component_type) {
            Some(definition) => Some(definition.clone()),
            None => {
                problems.push(
                    Diagnostic::error(
                        "unknown-component-type",
                        format!(
                            "component `{}` has unknown type `{}`",
                            component.name, component.component_type
                        ),
                        Some(positions.value_span(&format!("{pointer}/type"))),
                    )
                    .for_component(&component.name),
                );
                None
            }
        }
    };
    let mut traits = Vec::new();
    for (trait_index, component_trait) in component.traits.iter().enumerate() {
        if component_trait.trait_type.is_empty() {
            continue;
        }
        match definitions.get(DefinitionKind::Trait, &component_trait.trait_type) {
            Some(definition) => traits.push(definition.clone()),
            None => problems.push(
                Diagnostic::error(
                    "unknown-trait-type",
                    format!(
                        "trait type `{}` of component `{}` is not defined",
                        component_trait.trait_type, component.name
                    ),
                    Some(positions.value_span(&format!("{pointer}/traits/{trait_index}/type"))),
                )
                .for_component(&component.name),
            ),
        }
    }
    for definition in component_definition.iter().chain(&traits) {
        if !used.iter().any(|u| Arc::ptr_eq(u, definition)) {
            used.push(definition.clone());
        }
        for error in &definition.errors {
            problems.push(error.clone().for_component(&component.name));
        }
        if let Some(reason) = &definition.unsupported {
            problems.push(
                Diagnostic::error(
                    "unsupported-definition",
                    reason.clone(),
                    Some(positions.value_span(&format!("{pointer}/type"))),
                )
                .for_component(&component.name)
                .with_label(definition.span, "definition declared here"),
            );
        }
    }
    (component_definition, traits, problems)
}

/// The context's `components`: the Application's own entries as written (borrowed from the
/// document), or, for components an override changed or added, their model re-encoded.
fn components_json<'a>(
    loaded: &'a LoadedApp,
    effective: &[EffectiveComponent<'_>],
) -> Cow<'a, serde_json::Value> {
    let original = loaded.app.spec.components.as_slice();
    let unchanged = effective.len() == original.len()
        && effective
            .iter()
            .zip(original)
            .all(|(e, o)| match &e.component {
                // Still the app's own component: equal without comparing.
                Cow::Borrowed(component) => std::ptr::eq(*component, o) || **component == *o,
                Cow::Owned(component) => component == o,
            });
    if unchanged {
        return loaded
            .document
            .value
            .pointer("/spec/components")
            .map_or_else(
                || Cow::Owned(serde_json::Value::Array(Vec::new())),
                Cow::Borrowed,
            );
    }
    Cow::Owned(serde_json::Value::Array(
        effective
            .iter()
            .map(|effective| {
                let component = &effective.component;
                let mut entry = serde_json::Map::new();
                entry.insert("name".to_owned(), component.name.clone().into());
                entry.insert("type".to_owned(), component.component_type.clone().into());
                if let Some(properties) = &component.properties {
                    entry.insert("properties".to_owned(), properties.clone());
                }
                if !component.traits.is_empty() {
                    let traits = component
                        .traits
                        .iter()
                        .map(|t| {
                            let mut item = serde_json::Map::new();
                            item.insert("type".to_owned(), t.trait_type.clone().into());
                            if let Some(properties) = &t.properties {
                                item.insert("properties".to_owned(), properties.clone());
                            }
                            serde_json::Value::Object(item)
                        })
                        .collect();
                    entry.insert("traits".to_owned(), serde_json::Value::Array(traits));
                }
                if !component.depends_on.is_empty() {
                    entry.insert("dependsOn".to_owned(), component.depends_on.clone().into());
                }
                if let Some(revision) = &component.external_revision {
                    entry.insert("externalRevision".to_owned(), revision.clone().into());
                }
                serde_json::Value::Object(entry)
            })
            .collect(),
    ))
}

/// The input hash's state after the app's own inputs: its resolved namespace, its file's
/// bytes and its document (as canonical JSON, which tells apart the documents of one file).
fn document_hasher(loaded: &LoadedApp) -> sha2::Sha256 {
    let mut hasher = sha2::Sha256::new();
    hasher.update(loaded.app_ref.namespace.as_bytes());
    hasher.update([0]);
    hasher.update(loaded.file_digest);
    // The document's compact JSON, written into the hash as it is produced (the same bytes as
    // `to_string`, without building the string).
    if serde_json::to_writer(HashWriter(&mut hasher), &loaded.document.value).is_err() {
        // Not reachable: a JSON value always serializes and the writer never fails.
        hasher.update(loaded.document.value.to_string().as_bytes());
    }
    hasher
}

/// SHA-256 over the app's own inputs ([`document_hasher`]) and the source of each definition
/// it uses.
fn input_hash(document: &sha2::Sha256, used: &[Arc<Definition>]) -> String {
    let mut hasher = document.clone();
    let mut digests: Vec<(DefinitionKind, &str, [u8; 32])> = used
        .iter()
        .map(|definition| {
            (
                definition.kind,
                definition.name.as_str(),
                definition.source_digest,
            )
        })
        .collect();
    digests.sort();
    for (kind, name, digest) in digests {
        hasher.update([0]);
        hasher.update(kind.cr_kind().as_bytes());
        hasher.update(name.as_bytes());
        hasher.update(digest);
    }
    hex::encode(hasher.finalize())
}

/// An `io::Write` that feeds a SHA-256 hasher.
struct HashWriter<'h>(&'h mut sha2::Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Checks a concrete value against a constraint with the evaluator: `(<constraint>) & <value>`.
fn check_constraint(
    evaluator: &Evaluator,
    constraint: &cue::Constraint,
    value: &Exported,
) -> Result<(), String> {
    let Exported::Scalar(scalar) = value else {
        return Ok(());
    };
    let source = format!("v: ({}) & {}\n", constraint.text, scalar);
    let parsed = cue::parse_file(cue::FileId(u32::MAX), &source);
    if let Some(error) = parsed.errors.first() {
        return Err(format!(
            "cannot check {} against {}: {}",
            scalar, constraint.text, error.message
        ));
    }
    let result = evaluator.evaluate(&[&parsed.file], &[]);
    match result.validate().first() {
        Some(error) => Err(error.message.clone()),
        None => Ok(()),
    }
}
