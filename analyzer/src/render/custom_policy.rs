//! Custom policies (kubevela-render-semantics.md §4.3): a policy whose type is not one of
//! KubeVela's built-in policy types is rendered like a component from its PolicyDefinition's
//! template, after all components, with `context.name` = the policy name and
//! `context.artifacts` = the rendered components. Built-in policy types produce no objects.

use cue::{Evaluator, Take};
use serde_json::{Map, Value, json};

use super::context::go_json;
use super::errors::{PropertiesSite, Subject};
use super::instance::{Inputs, evaluate};
use super::labels::apply_policy_labels;
use super::patch::convert::{Concreteness, to_json};
use crate::definitions::Definitions;
use crate::load::application::LoadedApp;
use crate::model::{Definition, DefinitionKind, Policy};
use crate::{Diagnostic, RenderedObject};

/// Policy types KubeVela handles itself; they never render objects.
const BUILTIN_POLICY_TYPES: &[&str] = &[
    "garbage-collect",
    "apply-once",
    "shared-resource",
    "take-over",
    "read-only",
    "resource-update",
    "env-binding",
    "topology",
    "replication",
    "override",
    "debug",
];

/// `trait_type` of objects rendered by a custom policy.
pub(crate) const POLICY_OBJECT: &str = "Policy";

/// Renders the custom policies of an app; `objects` are the components' objects so far.
///
/// # Errors
/// Problems found; the app then renders nothing.
pub(crate) fn render_custom_policies(
    loaded: &LoadedApp,
    definitions: &Definitions,
    evaluator: &Evaluator,
    objects: &[RenderedObject],
    used: &mut Vec<std::sync::Arc<Definition>>,
) -> Result<Vec<RenderedObject>, Vec<Diagnostic>> {
    let positions = &loaded.document.positions;
    let mut rendered = Vec::new();
    let mut problems = Vec::new();
    for (index, policy) in loaded.app.spec.policies.iter().enumerate() {
        if policy.policy_type.is_empty()
            || BUILTIN_POLICY_TYPES.contains(&policy.policy_type.as_str())
        {
            continue;
        }
        let pointer = format!("/spec/policies/{index}");
        let Some(definition) = definitions.get(DefinitionKind::Policy, &policy.policy_type) else {
            problems.push(Diagnostic::error(
                "unknown-policy-type",
                format!(
                    "policy `{}` has unknown type `{}`",
                    policy.name, policy.policy_type
                ),
                Some(positions.value_span(&format!("{pointer}/type"))),
            ));
            continue;
        };
        if !used.iter().any(|u| std::sync::Arc::ptr_eq(u, definition)) {
            used.push(definition.clone());
        }
        problems.extend(definition.errors.iter().cloned());
        if let Some(reason) = &definition.unsupported {
            problems.push(Diagnostic::error(
                "unsupported-definition",
                reason.clone(),
                Some(positions.value_span(&format!("{pointer}/type"))),
            ));
            continue;
        }
        let (objects_rendered, policy_problems) =
            render_policy(loaded, evaluator, objects, policy, &pointer, definition);
        rendered.extend(objects_rendered);
        problems.extend(policy_problems);
    }
    if problems.is_empty() {
        Ok(rendered)
    } else {
        Err(problems)
    }
}

/// Evaluates one custom policy's template with its properties and the app's context: its
/// `output` and `outputs` objects, labelled as the policy's, and the problems found.
fn render_policy(
    loaded: &LoadedApp,
    evaluator: &Evaluator,
    objects: &[RenderedObject],
    policy: &Policy,
    pointer: &str,
    definition: &Definition,
) -> (Vec<RenderedObject>, Vec<Diagnostic>) {
    let positions = &loaded.document.positions;
    let mut rendered = Vec::new();
    let mut problems = Vec::new();
    let Some(template) = definition.template.as_deref() else {
        return (rendered, problems);
    };
    let properties_pointer = format!("{pointer}/properties");
    let parameter = policy
        .properties
        .as_ref()
        .map_or_else(|| json!({}), go_json);
    let context = go_json(&json!({
        "name": policy.name,
        "namespace": loaded.app_ref.namespace,
        "appName": loaded.app_ref.name,
        "appRevision": "",
        "appRevisionNum": 0,
        "appLabels": loaded.app.metadata.labels,
        "appAnnotations": loaded.app.metadata.annotations,
        "artifacts": artifacts(objects),
    }));
    let description = format!("policy `{}`", policy.name);
    let site = PropertiesSite {
        positions,
        pointer: &properties_pointer,
        owner_pointer: pointer,
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
        context_span: positions.value_span(pointer),
    };
    let requested = [("output", Take::Export), ("outputs", Take::Fields)];
    let mut parts = match evaluate(evaluator, template, &inputs, &site, &subject, &requested) {
        Ok(parts) => parts,
        Err(errors) => {
            problems.extend(errors);
            return (rendered, problems);
        }
    };
    let mut exported = Vec::new();
    if let Some((output, _)) = parts.take_export("output") {
        exported.push(output);
    }
    exported.extend(
        parts
            .take_fields("outputs")
            .into_iter()
            .map(|(_, value)| value),
    );
    for value in exported {
        match to_json(&value, Concreteness::Required) {
            Ok(mut json) => {
                apply_policy_labels(
                    &mut json,
                    &loaded.app_ref.name,
                    &loaded.app_ref.namespace,
                    &policy.name,
                );
                rendered.push(RenderedObject {
                    component: policy.name.clone(),
                    trait_type: Some(POLICY_OBJECT.to_owned()),
                    output_name: None,
                    object: json,
                });
            }
            Err(errors) => problems.extend(errors.into_iter().map(|error| {
                Diagnostic::error(
                    "cue-error",
                    format!(
                        "{description}: cannot export: {}: {}",
                        error.path.join("."),
                        error.message
                    ),
                    Some(
                        error
                            .causes
                            .first()
                            .and_then(cue::Error::span)
                            .unwrap_or(definition.span),
                    ),
                )
            })),
        }
    }
    (rendered, problems)
}

/// `context.artifacts`: `{<component>: {workload, traits: {<type>: {<resource>: object}}}}`.
fn artifacts(objects: &[RenderedObject]) -> Value {
    let mut artifacts = Map::new();
    for object in objects {
        let entry = artifacts
            .entry(object.component.clone())
            .or_insert_with(|| json!({"traits": {}}));
        match (&object.trait_type, &object.output_name) {
            (None, _) => {
                entry["workload"] = object.object.clone();
            }
            (Some(trait_type), Some(name)) => {
                let traits = &mut entry["traits"];
                if traits.get(trait_type).is_none() {
                    traits[trait_type] = json!({});
                }
                traits[trait_type][name] = object.object.clone();
            }
            (Some(_), None) => {}
        }
    }
    Value::Object(artifacts)
}
