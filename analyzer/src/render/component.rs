//! One component: its template's `output` and `outputs`, then each trait in order
//! (kubevela-render-semantics.md §1-2), then export and the OAM contract.
//!
//! [`render_component`] runs the steps in that order: [`ComponentRender::evaluate_template`],
//! [`ComponentRender::apply_trait`] per trait (its result remembered or evaluated by
//! [`ComponentRender::trait_result`]), [`ComponentRender::export`] and
//! [`ComponentRender::objects`].

use std::sync::Arc;

use cue::{Evaluator, Exported, Take};
use serde_json::{Map, Value};

use super::context::{component_context, context_json_read, go_json};
use super::errors::{PropertiesSite, Subject, with_path};
use super::instance::{Inputs, evaluate, missing_parameters};
use super::labels::{LabelContext, ObjectRole, apply_contract, trait_type_label};
use super::memo::{self, MemoKey, TraitResult};
use super::output_reads::{Reads, output_reads};
use super::patch::convert::{Concreteness, ExportError, into_json};
use super::patch::{ConstraintCheck, apply_patch, unify_only};
use super::restart_hash::stamp_restart_hash;
use crate::load::application::LoadedApp;
use crate::model::{Component, Definition, TemplateReads, Trait};
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
// its definitions, the evaluator, the cluster, the constraint check); they are bundled into
// the [`ComponentRender`] its steps share.
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
    let definition = &definitions.component;
    let template = definition.template.as_deref().ok_or_else(|| {
        vec![Diagnostic::error(
            "unsupported-definition",
            format!(
                "component type `{}` has no CUE template; only CUE schematics can be rendered",
                definition.name
            ),
            Some(
                loaded
                    .document
                    .positions
                    .value_span(&format!("{component_pointer}/type")),
            ),
        )]
    })?;
    let empty = Value::Object(Map::new());
    let render = ComponentRender {
        loaded,
        component_pointer: component_pointer.to_owned(),
        properties_pointer: format!("{component_pointer}/properties"),
        component,
        components,
        definitions,
        evaluator,
        cluster_version,
        check,
        template,
        reads: context_reads(definitions),
        description: format!("component `{}`", component.name),
        parameter: component.properties.as_ref().map_or(empty, go_json),
    };
    // The component context is also the traits' base: it holds what any of them can read.
    let context = render.context();
    let (mut workload, mut auxiliaries) = render.evaluate_template(&context)?;

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
        let step = TraitStep {
            index: trait_index,
            component_trait,
            definition: trait_definition,
        };
        workload =
            render.apply_trait(&step, &mut base_trait_context, workload, &mut auxiliaries)?;
    }

    let (workload_json, auxiliary_json) = render.export(workload, &mut auxiliaries)?;
    Ok(render.objects(workload_json, &auxiliaries, auxiliary_json))
}

/// What the component's template and all its traits' templates can read: the component
/// context is built with all of it.
fn context_reads(definitions: &ComponentDefinitions) -> TemplateReads {
    definitions.traits.iter().fold(
        definitions.component.template_reads,
        |reads, trait_definition| {
            let other = trait_definition.template_reads;
            TemplateReads {
                context: reads.context || other.context,
                output: reads.output || other.output,
                components: reads.components || other.components,
                parameter: reads.parameter || other.parameter,
            }
        },
    )
}

/// The inputs of one component's render, shared by its steps.
struct ComponentRender<'r> {
    loaded: &'r LoadedApp,
    component_pointer: String,
    properties_pointer: String,
    component: &'r Component,
    components: &'r Value,
    definitions: &'r ComponentDefinitions,
    evaluator: &'r Evaluator,
    cluster_version: &'r ClusterVersion,
    check: ConstraintCheck<'r>,
    /// The component definition's template.
    template: &'r cue::ast::File,
    /// What the component's and its traits' templates can read of the context.
    reads: TemplateReads,
    /// ``component `name` ``, how diagnostics name the component.
    description: String,
    /// The component's properties as JSON: the template's `parameter`.
    parameter: Value,
}

/// One trait of the component, with where it sits and its definition.
struct TraitStep<'r> {
    index: usize,
    component_trait: &'r Trait,
    definition: &'r Arc<Definition>,
}

impl ComponentRender<'_> {
    /// The component's `context`.
    fn context(&self) -> Value {
        component_context(
            self.loaded,
            self.component,
            self.components,
            self.cluster_version,
            self.reads,
        )
    }

    /// The template's inputs: the component's properties and `context`.
    fn inputs<'i>(&'i self, context: &'i Value) -> Inputs<'i> {
        let positions = &self.loaded.document.positions;
        Inputs {
            parameter: Some(&self.parameter),
            parameter_span: positions.value_span(&self.properties_pointer),
            context,
            context_span: positions.value_span(&self.component_pointer),
        }
    }

    /// Evaluates the component's template: its `output` (the workload) and its `outputs`.
    fn evaluate_template(
        &self,
        context: &Value,
    ) -> Result<(Exported, Vec<Auxiliary>), Vec<Diagnostic>> {
        let definition = &self.definitions.component;
        let site = PropertiesSite {
            positions: &self.loaded.document.positions,
            pointer: &self.properties_pointer,
            owner_pointer: &self.component_pointer,
        };
        let subject = Subject {
            description: &self.description,
            definition,
            definition_span: definition.span,
        };
        let mut parts = evaluate(
            self.evaluator,
            self.template,
            &self.inputs(context),
            &site,
            &subject,
            &[("output", Take::Export), ("outputs", Take::Fields)],
        )?;
        let Some((workload, _)) = parts.take_export("output") else {
            return Err(vec![Diagnostic::error(
                "cue-error",
                format!(
                    "{}: the template of component type `{}` has no `output`",
                    self.description, definition.name
                ),
                Some(definition.span),
            )]);
        };
        let auxiliaries = parts
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
        Ok((workload, auxiliaries))
    }

    /// Applies one trait: its outputs join the auxiliaries, then its patches go into the
    /// workload and into the outputs they name. Returns the patched workload.
    fn apply_trait(
        &self,
        step: &TraitStep<'_>,
        base_trait_context: &mut Value,
        mut workload: Exported,
        auxiliaries: &mut Vec<Auxiliary>,
    ) -> Result<Exported, Vec<Diagnostic>> {
        let positions = &self.loaded.document.positions;
        let trait_definition = step.definition;
        let Some(trait_template) = trait_definition.template.as_ref() else {
            return Err(vec![Diagnostic::error(
                "unsupported-definition",
                format!(
                    "trait type `{}` has no CUE template; only CUE schematics can be rendered",
                    trait_definition.name
                ),
                Some(positions.value_span(&format!("{}/type", self.trait_pointer(step)))),
            )]);
        };
        let type_label = trait_type_label(&step.component_trait.trait_type);
        let trait_result = self.trait_result(
            step,
            trait_template,
            base_trait_context,
            &workload,
            auxiliaries,
        )?;
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
                    Some(positions.value_span(&format!("{}/type", self.trait_pointer(step)))),
                )
                .with_label(trait_definition.span, "trait defined here"),
            ]
        };
        if let Some((patch_value, patch_doc)) = patch {
            workload =
                apply_patch(workload, patch_value, &patch_doc, self.check).map_err(|error| {
                    conflict(format!(
                        "{}: invalid patch trait {type_label} into workload: {error}",
                        self.trait_description(step)
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
                auxiliary.value = unify_only(value, patch, self.check).map_err(|error| {
                    conflict(format!(
                        "{}: invalid patch trait {type_label} into output {name}: {error}",
                        self.trait_description(step)
                    ))
                })?;
            }
        }
        Ok(workload)
    }

    // Pointers and the description are for evaluations and diagnostics: a remembered result
    // (most traits) needs neither, so they are made when needed.

    /// Where the trait is declared in the Application.
    fn trait_pointer(&self, step: &TraitStep<'_>) -> String {
        format!("{}/traits/{}", self.component_pointer, step.index)
    }

    /// ``trait `type` of component `name` ``, how diagnostics name the trait.
    fn trait_description(&self, step: &TraitStep<'_>) -> String {
        format!(
            "trait `{}` of component `{}`",
            step.component_trait.trait_type, self.component.name
        )
    }

    /// What the trait's template gives (its outputs and patches): remembered when the same
    /// inputs were evaluated before, else evaluated (and remembered if it can be).
    fn trait_result(
        &self,
        step: &TraitStep<'_>,
        trait_template: &Arc<cue::ast::File>,
        base_trait_context: &mut Value,
        workload: &Exported,
        auxiliaries: &[Auxiliary],
    ) -> Result<TraitResult, Vec<Diagnostic>> {
        let trait_definition = step.definition;
        let trait_parameter = step.component_trait.properties.as_ref().map(go_json);
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
            .map(|reads| context_json_read(workload, reads));
        let outputs_json = reads
            .as_ref()
            .and_then(|reads| reads.outputs.as_ref())
            .filter(|_| !auxiliaries.is_empty())
            .map(|reads| outputs_json(auxiliaries, reads));
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
        if let Some(result) = memo_key.as_ref().and_then(memo::lookup) {
            return Ok(result);
        }
        // When needed the observed parts go into the shared trait context for this one
        // evaluation and come out right after, instead of into a copy of the whole context
        // (`components` included).
        if let Some(object) = base_trait_context.as_object_mut() {
            if let Some(json) = output_json {
                object.insert("output".to_owned(), json);
            }
            if let Some(json) = outputs_json {
                object.insert("outputs".to_owned(), json);
            }
        }
        let positions = &self.loaded.document.positions;
        let trait_pointer = self.trait_pointer(step);
        let trait_properties_pointer = format!("{trait_pointer}/properties");
        let trait_description = self.trait_description(step);
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
            context: &*base_trait_context,
            context_span: positions.value_span(&trait_pointer),
        };
        let mut trait_parts = evaluate(
            self.evaluator,
            trait_template,
            &trait_inputs,
            &trait_site,
            &trait_subject,
            TraitResult::REQUESTED,
        )?;
        if with_output && let Some(object) = base_trait_context.as_object_mut() {
            // The component context has neither key, so these were appended last (the order a
            // copy of the context with them inserted had), and removing them restores it.
            object.shift_remove("outputs");
            object.shift_remove("output");
        }
        let result = TraitResult::of(&mut trait_parts);
        if let Some(key) = memo_key {
            memo::remember(key, &result);
        }
        Ok(result)
    }

    /// Exports the workload and the auxiliaries to JSON. The exported values are not needed
    /// after this: moved into the JSON, not copied.
    fn export(
        &self,
        workload: Exported,
        auxiliaries: &mut [Auxiliary],
    ) -> Result<(Value, Vec<Value>), Vec<Diagnostic>> {
        let workload_json = into_json(workload, Concreteness::Required)
            .map_err(|errors| self.export_error("cannot export the workload", errors))?;
        let mut auxiliary_json = Vec::with_capacity(auxiliaries.len());
        for auxiliary in auxiliaries.iter_mut() {
            let value = std::mem::replace(&mut auxiliary.value, Exported::Bottom(Vec::new()));
            let json = into_json(value, Concreteness::Required).map_err(|errors| {
                self.export_error(
                    &format!("cannot export output `{}`", auxiliary.name),
                    errors,
                )
            })?;
            auxiliary_json.push(json);
        }
        Ok((workload_json, auxiliary_json))
    }

    /// The diagnostics of a value that cannot be exported.
    fn export_error(&self, what: &str, errors: Vec<ExportError>) -> Vec<Diagnostic> {
        let positions = &self.loaded.document.positions;
        let description = &self.description;
        // Incomplete values are reported in the user's terms when a required parameter was not
        // given (computed only on this error path: it evaluates the template again, with the
        // component's context as it was, and walks the whole `parameter`).
        let context = self.context();
        let missing = missing_parameters(self.evaluator, self.template, &self.inputs(&context));
        if !missing.is_empty() {
            return missing
                .iter()
                .map(|name| {
                    Diagnostic::error(
                        "invalid-properties",
                        format!("{description}: missing required property `{name}`"),
                        Some(positions.value_span(&self.properties_pointer)),
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
                            .unwrap_or(self.definitions.component.span),
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
    }

    /// The rendered objects, the workload first, each with the OAM contract's labels and
    /// annotations.
    fn objects(
        &self,
        mut workload_json: Value,
        auxiliaries: &[Auxiliary],
        auxiliary_json: Vec<Value>,
    ) -> Vec<RenderedObject> {
        let loaded = self.loaded;
        let component = self.component;
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
            // After each output's contract, like `SetOAMContract`: the hash covers the final
            // object.
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
        objects
    }
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
