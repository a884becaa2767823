//! One component: its template's `output` and `outputs`, then each trait in order
//! (kubevela-render-semantics.md §1-2), then export and the OAM contract.

use std::sync::Arc;

use cue::{Evaluator, Exported, Take};
use serde_json::{Map, Value};

use super::context::{component_context, context_json_read, go_json};
use super::errors::{PropertiesSite, Subject, with_path};
use super::instance::{Inputs, evaluate, missing_parameters};
use super::labels::{LabelContext, ObjectRole, apply_contract, trait_type_label};
use super::memo::{self, MemoKey, TraitResult};
use super::output_reads::{Reads, output_reads};
use super::patch::convert::{Concreteness, into_json};
use super::patch::{ConstraintCheck, apply_patch, unify_only};
use super::restart_hash::stamp_restart_hash;
use crate::load::application::LoadedApp;
use crate::model::{Component, Definition, TemplateReads};
use crate::{ClusterVersion, Diagnostic, RenderedObject};

/// The definitions one component needs, resolved.
pub(crate) struct ComponentDefinitions {
    pub(crate) component: Arc<Definition>,
    /// One per entry of `traits`, in order.
    pub(crate) traits: Vec<Arc<Definition>>,
}

/// An object of the component before export: the workload or an auxiliary.
struct Auxiliary {
    /// `AuxiliaryWorkload` for component outputs, else the trait type (label form).
    trait_type: String,
    name: String,
    value: Exported,
    workload_ref_path: Option<String>,
    /// For an output of a trait whose definition is `podDisruptive`: the definition's name,
    /// under which its hash goes onto the workload's pod template.
    pod_disruptive: Option<String>,
}

/// Auxiliary type label of component `outputs`.
const AUXILIARY_WORKLOAD: &str = "AuxiliaryWorkload";

/// Renders one component, declared at `component_pointer`; `components` is the JSON of every
/// effective component (the context's `components`).
///
/// # Errors
/// Every problem found; the component then contributes no object.
// Each argument is a different input of the one render (the app, where the component sits,
// its definitions, the evaluator, the cluster, the constraint check); a struct bundling them
// would exist for this call only.
#[allow(clippy::too_many_arguments)]
pub(crate) fn render_component(
    loaded: &LoadedApp,
    component_pointer: &str,
    component: &Component,
    components: &Value,
    definitions: &ComponentDefinitions,
    evaluator: &Evaluator,
    cluster_version: &ClusterVersion,
    check: ConstraintCheck<'_>,
) -> Result<Vec<RenderedObject>, Vec<Diagnostic>> {
    let positions = &loaded.document.positions;
    let component_pointer = component_pointer.to_owned();
    let properties_pointer = format!("{component_pointer}/properties");
    let definition = &definitions.component;
    let template = definition.template.as_deref().ok_or_else(|| {
        vec![Diagnostic::error(
            "unsupported-definition",
            format!(
                "component type `{}` has no CUE template; only CUE schematics can be rendered",
                definition.name
            ),
            Some(positions.value_span(&format!("{component_pointer}/type"))),
        )]
    })?;
    // The component context is also the traits' base: it holds what any of them can read.
    let reads =
        definitions
            .traits
            .iter()
            .fold(definition.template_reads, |reads, trait_definition| {
                let other = trait_definition.template_reads;
                TemplateReads {
                    context: reads.context || other.context,
                    output: reads.output || other.output,
                    components: reads.components || other.components,
                    parameter: reads.parameter || other.parameter,
                }
            });
    let context = component_context(loaded, component, components, cluster_version, reads);
    let empty = Value::Object(Map::new());
    let parameter = component.properties.as_ref().map_or(empty, go_json);
    let description = format!("component `{}`", component.name);
    let site = PropertiesSite {
        positions,
        pointer: &properties_pointer,
        owner_pointer: &component_pointer,
    };
    let subject = Subject {
        description: &description,
        definition,
        definition_span: definition.span,
    };
    let inputs = Inputs {
        parameter: Some(&parameter),
        parameter_span: positions.value_span(&properties_pointer),
        context: &context,
        context_span: positions.value_span(&component_pointer),
    };
    let mut parts = evaluate(
        evaluator,
        template,
        &inputs,
        &site,
        &subject,
        &[("output", Take::Export), ("outputs", Take::Fields)],
    )?;
    let Some((mut workload, _)) = parts.take_export("output") else {
        return Err(vec![Diagnostic::error(
            "cue-error",
            format!(
                "{description}: the template of component type `{}` has no `output`",
                definition.name
            ),
            Some(definition.span),
        )]);
    };
    let mut auxiliaries: Vec<Auxiliary> = parts
        .take_fields("outputs")
        .into_iter()
        .map(|(name, value)| Auxiliary {
            trait_type: AUXILIARY_WORKLOAD.to_owned(),
            name,
            value,
            workload_ref_path: None,
            pod_disruptive: None,
        })
        .collect();

    // The traits' context: the component's plus `componentType`, built once; a trait whose
    // template can read `context.output(s)` gets its own copy with them.
    let mut base_trait_context = context;
    if let Some(object) = base_trait_context.as_object_mut() {
        object.insert(
            "componentType".to_owned(),
            Value::String(component.component_type.clone()),
        );
    }
    for (trait_index, (component_trait, trait_definition)) in
        component.traits.iter().zip(&definitions.traits).enumerate()
    {
        // Pointers and the description are for evaluations and diagnostics: a remembered
        // result (most traits) needs neither, so they are made when needed.
        let trait_pointer = || format!("{component_pointer}/traits/{trait_index}");
        let Some(trait_template) = trait_definition.template.as_ref() else {
            return Err(vec![Diagnostic::error(
                "unsupported-definition",
                format!(
                    "trait type `{}` has no CUE template; only CUE schematics can be rendered",
                    trait_definition.name
                ),
                Some(positions.value_span(&format!("{}/type", trait_pointer()))),
            )]);
        };
        let type_label = trait_type_label(&component_trait.trait_type);
        let trait_description = || {
            format!(
                "trait `{}` of component `{}`",
                component_trait.trait_type, component.name
            )
        };
        let trait_parameter = component_trait.properties.as_ref().map(go_json);
        // `context.output(s)` is the workload (and auxiliaries) converted to JSON and then
        // built into the evaluation: left out for a template that cannot observe it (e.g.
        // `scaler`), which renders the same without it, and else reduced to what the template
        // can observe. Deviation: upstream injects the base as CUE text; JSON cannot carry a
        // value that is still non-concrete, so such fields are left out of `context.output`.
        let with_output = trait_definition.template_reads.output;
        let reads = with_output.then(|| output_reads(trait_template));
        let output_json = reads
            .as_ref()
            .and_then(|reads| reads.output.as_ref())
            .map(|reads| context_json_read(&workload, reads));
        let outputs_json = reads
            .as_ref()
            .and_then(|reads| reads.outputs.as_ref())
            .filter(|_| !auxiliaries.is_empty())
            .map(|reads| outputs_json(&auxiliaries, reads));
        // A template that reads no context field but these renders the same for the same
        // properties and the same observed parts (`labels`: whether the workload has a pod
        // template): remembered under them.
        let memo_key = match &reads {
            Some(reads) if !reads.other_context => MemoKey::with_outputs(
                trait_definition,
                trait_parameter.as_ref(),
                output_json.as_ref(),
                outputs_json.as_ref(),
            ),
            _ => MemoKey::new(trait_definition, trait_parameter.as_ref()),
        };
        let remembered = memo_key.as_ref().and_then(memo::lookup);
        let trait_result = match remembered {
            Some(result) => result,
            None => {
                // When needed the observed parts go into the shared trait context for this one
                // evaluation and come out right after, instead of into a copy of the whole
                // context (`components` included).
                if let Some(object) = base_trait_context.as_object_mut() {
                    if let Some(json) = output_json {
                        object.insert("output".to_owned(), json);
                    }
                    if let Some(json) = outputs_json {
                        object.insert("outputs".to_owned(), json);
                    }
                }
                let trait_pointer = trait_pointer();
                let trait_properties_pointer = format!("{trait_pointer}/properties");
                let trait_description = trait_description();
                let trait_site = PropertiesSite {
                    positions,
                    pointer: &trait_properties_pointer,
                    owner_pointer: &trait_pointer,
                };
                let trait_subject = Subject {
                    description: &trait_description,
                    definition: trait_definition,
                    definition_span: trait_definition.span,
                };
                let trait_inputs = Inputs {
                    parameter: trait_parameter.as_ref(),
                    parameter_span: positions.value_span(&trait_properties_pointer),
                    context: &base_trait_context,
                    context_span: positions.value_span(&trait_pointer),
                };
                let mut trait_parts = evaluate(
                    evaluator,
                    trait_template,
                    &trait_inputs,
                    &trait_site,
                    &trait_subject,
                    TraitResult::REQUESTED,
                )?;
                if with_output && let Some(object) = base_trait_context.as_object_mut() {
                    // The component context has neither key, so these were appended last
                    // (the order a copy of the context with them inserted had), and removing
                    // them restores it.
                    object.shift_remove("outputs");
                    object.shift_remove("output");
                }
                let result = TraitResult::of(&mut trait_parts);
                if let Some(key) = memo_key {
                    memo::remember(key, &result);
                }
                result
            }
        };
        // Outputs are appended before the patch is applied (upstream order).
        let TraitResult {
            outputs,
            patch,
            patch_outputs,
        } = trait_result;
        for (name, value) in outputs {
            auxiliaries.push(Auxiliary {
                trait_type: type_label.clone(),
                name,
                value,
                workload_ref_path: trait_definition.trait_attributes.workload_ref_path.clone(),
                pod_disruptive: trait_definition
                    .trait_attributes
                    .pod_disruptive
                    .then(|| trait_definition.name.clone()),
            });
        }
        let conflict = |message: String| {
            vec![
                Diagnostic::error(
                    "patch-conflict",
                    message,
                    Some(positions.value_span(&format!("{}/type", trait_pointer()))),
                )
                .with_label(trait_definition.span, "trait defined here"),
            ]
        };
        if let Some((patch_value, patch_doc)) = patch {
            workload = apply_patch(workload, patch_value, &patch_doc, check).map_err(|error| {
                conflict(format!(
                    "{}: invalid patch trait {type_label} into workload: {error}",
                    trait_description()
                ))
            })?;
        }
        for (name, mut patch_value) in patch_outputs {
            let matching = auxiliaries
                .iter()
                .filter(|auxiliary| auxiliary.name == name)
                .count();
            for (seen, auxiliary) in auxiliaries
                .iter_mut()
                .filter(|auxiliary| auxiliary.name == name)
                .enumerate()
            {
                // Unifying consumes the patch: the last output of that name takes it, any
                // earlier one a copy.
                let patch = if seen + 1 == matching {
                    std::mem::replace(&mut patch_value, Exported::Bottom(Vec::new()))
                } else {
                    patch_value.clone()
                };
                let value = std::mem::replace(&mut auxiliary.value, Exported::Bottom(Vec::new()));
                auxiliary.value = unify_only(value, patch, check).map_err(|error| {
                    conflict(format!(
                        "{}: invalid patch trait {type_label} into output {name}: {error}",
                        trait_description()
                    ))
                })?;
            }
        }
    }

    let export_error =
        |what: &str, errors: Vec<super::patch::convert::ExportError>| -> Vec<Diagnostic> {
            // Incomplete values are reported in the user's terms when a required parameter was
            // not given (computed only on this error path: it evaluates the template again,
            // with the component's context as it was, and walks the whole `parameter`).
            let context = component_context(loaded, component, components, cluster_version, reads);
            let inputs = Inputs {
                parameter: Some(&parameter),
                parameter_span: positions.value_span(&properties_pointer),
                context: &context,
                context_span: positions.value_span(&component_pointer),
            };
            let missing = missing_parameters(evaluator, template, &inputs);
            if !missing.is_empty() {
                return missing
                    .iter()
                    .map(|name| {
                        Diagnostic::error(
                            "invalid-properties",
                            format!("{description}: missing required property `{name}`"),
                            Some(positions.value_span(&properties_pointer)),
                        )
                    })
                    .collect();
            }
            errors
                .into_iter()
                .map(|error| {
                    let path = error.path.join(".");
                    let mut diagnostic = Diagnostic::error(
                        "cue-error",
                        format!("{description}: {what}: {path}: {}", error.message),
                        Some(
                            error
                                .causes
                                .first()
                                .and_then(cue::Error::span)
                                .unwrap_or(definition.span),
                        ),
                    );
                    for cause in error.causes.iter().skip(1) {
                        if let Some(span) = cause.span() {
                            diagnostic = diagnostic.with_label(span, with_path(cause));
                        }
                    }
                    diagnostic
                })
                .collect()
        };
    // The exported values are not needed after this: moved into the JSON, not copied.
    let mut workload_json = into_json(workload, Concreteness::Required)
        .map_err(|errors| export_error("cannot export the workload", errors))?;
    let mut auxiliary_json = Vec::with_capacity(auxiliaries.len());
    for auxiliary in &mut auxiliaries {
        let value = std::mem::replace(&mut auxiliary.value, Exported::Bottom(Vec::new()));
        let json = into_json(value, Concreteness::Required).map_err(|errors| {
            export_error(
                &format!("cannot export output `{}`", auxiliary.name),
                errors,
            )
        })?;
        auxiliary_json.push(json);
    }

    let app = &loaded.app;
    let label_context = LabelContext {
        app_name: &loaded.app_ref.name,
        app_namespace: &loaded.app_ref.namespace,
        app_labels: &app.metadata.labels,
        app_annotations: &app.metadata.annotations,
        component: &component.name,
        component_type: &component.component_type,
        app_revision: super::context::app_revision(loaded),
    };
    apply_contract(&mut workload_json, &label_context, &ObjectRole::Workload);
    let mut objects = Vec::with_capacity(1 + auxiliaries.len());
    for (auxiliary, mut json) in auxiliaries.iter().zip(auxiliary_json) {
        let role = ObjectRole::Auxiliary {
            trait_type: &auxiliary.trait_type,
            resource: &auxiliary.name,
            workload_ref: auxiliary
                .workload_ref_path
                .as_deref()
                .map(|path| (path, &workload_json)),
        };
        apply_contract(&mut json, &label_context, &role);
        // After each output's contract, like `SetOAMContract`: the hash covers the final object.
        if let Some(trait_type) = &auxiliary.pod_disruptive {
            stamp_restart_hash(&mut workload_json, trait_type, &json);
        }
        objects.push(RenderedObject {
            component: component.name.clone(),
            trait_type: Some(auxiliary.trait_type.clone()),
            output_name: Some(auxiliary.name.clone()),
            object: json,
        });
    }
    objects.insert(
        0,
        RenderedObject {
            component: component.name.clone(),
            trait_type: None,
            output_name: None,
            object: workload_json,
        },
    );
    Ok(objects)
}

/// `context.outputs`: the auxiliaries so far by name (a later one of the same name wins),
/// keys sorted, each as much as `reads` can observe of it.
fn outputs_json(auxiliaries: &[Auxiliary], reads: &Reads) -> Value {
    let mut outputs = Map::new();
    for auxiliary in auxiliaries {
        let observed = match reads {
            Reads::All => Some(&Reads::All),
            Reads::Exists => None,
            Reads::Fields(fields) => fields.get(&auxiliary.name),
        };
        if let Some(observed) = observed {
            outputs.insert(
                auxiliary.name.clone(),
                context_json_read(&auxiliary.value, observed),
            );
        }
    }
    outputs.sort_keys();
    Value::Object(outputs)
}
