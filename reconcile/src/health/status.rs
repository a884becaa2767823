//! Definitions' health and status CUE evaluated against live objects, as KubeVela's controller
//! does it (`pkg/cue/definition/health`): each snippet (`spec.status.healthPolicy`,
//! `spec.status.customStatus`) is evaluated on its own with `context` (the component or trait
//! context, with the *live* objects as `output` / `outputs`) and `parameter` (the component's
//! or trait's properties).
//!
//! KubeVela's rules, kept here: an empty policy is healthy; `isHealth` must be a concrete bool
//! (a default is taken); a policy that does not compile or evaluate counts as not healthy.
//! `message` must be a concrete string; a failing custom status gives no message.
//! `context.status.healthy` is set before the custom status is evaluated. Traits see only their
//! own `outputs`, no `context.output`.
//!
//! Unlike KubeVela, a component is healthy only when its live objects' built-in kind health is
//! healthy *and* its definition's and traits' policies say so: a Deployment whose template
//! policy forgets a condition still shows its rollout.

use std::collections::BTreeMap;

use analyzer::model::{Application, Component};
use analyzer::{AppRef, DefinitionKind, Definitions};
use serde_json::{Map, Value, json};

use super::{Health, HealthStatus};
use crate::plan::ObjectRef;

pub use analyzer::status::{ComponentStatus, Snippet, StatusRules, TraitStatus};

/// The status rules of each definition: a lookup in `definitions`, whose snippets every app of
/// a type shares (each parsed once, see [`Snippet`]).
pub struct StatusCatalog<'a> {
    definitions: &'a Definitions,
}

impl<'a> StatusCatalog<'a> {
    pub fn new(definitions: &'a Definitions) -> StatusCatalog<'a> {
        StatusCatalog { definitions }
    }

    /// The rules of definition `name` of `kind`; none when there is no such definition.
    pub fn rules(&self, kind: DefinitionKind, name: &str) -> StatusRules {
        StatusRules::of(self.definitions, kind, name)
    }
}

/// One live object of a component, as health sees it.
#[derive(Debug, Clone, Copy)]
pub struct LiveOutput<'a> {
    pub object: &'a ObjectRef,
    pub component: &'a str,
    /// `None` for the workload, `Some("AuxiliaryWorkload")` for a component output, the trait
    /// type for a trait's output.
    pub trait_type: Option<&'a str>,
    /// The `outputs` key.
    pub output_name: Option<&'a str>,
    /// The live object; `None` when it does not exist (yet).
    pub live: Option<&'a Value>,
}

/// One component's health: its objects' built-in health combined with its definitions'
/// policies, and the custom status message (the workload's, then the traits', joined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentHealth {
    pub component: String,
    pub health: Health,
    /// `customStatus` messages, `None` when no definition has one (or none gave a message).
    pub message: Option<String>,
}

/// The component statuses of one app, from its Application manifest as JSON (the render
/// output does not carry properties) with each type's status CUE looked up in `definitions`. A
/// type without a definition here simply has no rules.
pub fn from_application(application: &Value, definitions: &Definitions) -> Vec<ComponentStatus> {
    let components = application
        .pointer("/spec/components")
        .cloned()
        .and_then(|components| serde_json::from_value::<Vec<Component>>(components).ok())
        .unwrap_or_default();
    analyzer::status::component_statuses(&components, definitions)
}

/// The component statuses of one app from its loaded Application, with the status CUE of
/// `catalog` (shared by every app of a plan).
pub fn from_model(application: &Application, catalog: &StatusCatalog<'_>) -> Vec<ComponentStatus> {
    analyzer::status::component_statuses(&application.spec.components, catalog.definitions)
}

/// The component statuses of every app of `applications`, each definition's status CUE
/// shared by all its apps (parsed once).
pub fn of_applications(
    applications: &BTreeMap<AppRef, Application>,
    definitions: &Definitions,
) -> BTreeMap<AppRef, Vec<ComponentStatus>> {
    let catalog = StatusCatalog::new(definitions);
    applications
        .iter()
        .map(|(app, application)| (app.clone(), from_model(application, &catalog)))
        .collect()
}

/// The health of one component from its live objects: every object's built-in health, the
/// component definition's policy over the workload (and component outputs), and each trait's
/// policy over its outputs. `None` when nothing rates the component (no object kind with a
/// health rule, no policy, no custom status).
pub fn component_health(
    evaluator: &cue::Evaluator,
    app: &AppRef,
    status: &ComponentStatus,
    objects: &[LiveOutput<'_>],
) -> Option<ComponentHealth> {
    let mut parts: Vec<(String, Health)> = Vec::new();
    for object in objects {
        let health = match object.live {
            Some(live) => super::health_of(live),
            None => Some(Health::progressing("not created yet")),
        };
        if let Some(health) = health {
            parts.push((object.object.to_string(), health));
        }
    }
    let mut messages = Vec::new();
    let workload = objects
        .iter()
        .find(|object| object.trait_type.is_none())
        .and_then(|object| object.live);
    let outputs_of = |trait_type: &str| {
        let mut outputs = Map::new();
        for object in objects {
            if let (Some(name), Some(live), Some(kind)) =
                (object.output_name, object.live, object.trait_type)
                && kind == trait_type
            {
                outputs.insert(name.to_owned(), live.clone());
            }
        }
        outputs
    };
    // The component's rules need the live workload: before it exists, its objects' built-in
    // health ("not created yet") already says enough.
    if let Some(workload) = workload
        && !status.rules.is_empty()
    {
        let mut context = base_context(app, &status.name, &status.parameter);
        context.insert("output".to_owned(), workload.clone());
        context.insert(
            "outputs".to_owned(),
            Value::Object(outputs_of("AuxiliaryWorkload")),
        );
        let what = format!("component type {}", status.component_type);
        evaluate_rules(
            evaluator,
            &status.rules,
            context,
            &status.parameter,
            &what,
            &mut parts,
            &mut messages,
        );
    }
    // Traits without status CUE have nothing to evaluate: their live objects are not copied.
    for trait_status in status.traits.iter().filter(|t| !t.rules.is_empty()) {
        let outputs = outputs_of(&trait_status.trait_type);
        let expected = objects
            .iter()
            .filter(|object| object.trait_type == Some(trait_status.trait_type.as_str()))
            .count();
        if outputs.len() < expected {
            continue;
        }
        let mut context = base_context(app, &status.name, &trait_status.parameter);
        context.insert("outputs".to_owned(), Value::Object(outputs));
        let what = format!("trait {}", trait_status.trait_type);
        evaluate_rules(
            evaluator,
            &trait_status.rules,
            context,
            &trait_status.parameter,
            &what,
            &mut parts,
            &mut messages,
        );
    }
    if parts.is_empty() && messages.is_empty() {
        return None;
    }
    let mut worst = HealthStatus::Healthy;
    let mut reasons = Vec::new();
    for (what, health) in &parts {
        worst = worst.max(health.status);
        if health.status != HealthStatus::Healthy {
            reasons.push(format!("{what}: {}", health.message));
        }
    }
    Some(ComponentHealth {
        component: status.name.clone(),
        health: Health {
            status: worst,
            message: reasons.join("; "),
        },
        message: (!messages.is_empty()).then(|| messages.join("; ")),
    })
}

/// Evaluates `policy` (a `healthPolicy` snippet): the concrete bool `isHealth`.
///
/// # Errors
///
/// A message when the snippet does not parse, does not evaluate, or leaves `isHealth` missing
/// or not a concrete bool.
pub fn evaluate_health_policy(
    evaluator: &cue::Evaluator,
    policy: &Snippet,
    context: &Value,
    parameter: &Value,
) -> Result<bool, String> {
    match evaluate_field(evaluator, policy, "isHealth", context, parameter)? {
        Value::Bool(healthy) => Ok(healthy),
        other => Err(format!("isHealth is not a bool: {other}")),
    }
}

/// Evaluates `custom_status` (a `customStatus` snippet): the concrete string `message`.
///
/// # Errors
///
/// A message when the snippet does not parse, does not evaluate, or leaves `message` missing
/// or not a concrete string.
pub fn evaluate_custom_status(
    evaluator: &cue::Evaluator,
    custom_status: &Snippet,
    context: &Value,
    parameter: &Value,
) -> Result<String, String> {
    match evaluate_field(evaluator, custom_status, "message", context, parameter)? {
        Value::String(message) => Ok(message),
        other => Err(format!("message is not a string: {other}")),
    }
}

fn evaluate_rules(
    evaluator: &cue::Evaluator,
    rules: &StatusRules,
    context: Map<String, Value>,
    parameter: &Value,
    what: &str,
    parts: &mut Vec<(String, Health)>,
    messages: &mut Vec<String>,
) {
    // One context value for both snippets (no copy of the live objects in it per snippet).
    let mut context = Value::Object(context);
    let healthy = match &rules.health_policy {
        None => true,
        Some(policy) => {
            match evaluate_health_policy(evaluator, policy, &context, parameter) {
                Ok(true) => true,
                Ok(false) => {
                    parts.push((
                        format!("healthPolicy of {what}"),
                        Health::progressing("not healthy yet"),
                    ));
                    false
                }
                Err(error) => {
                    // KubeVela counts a policy that cannot be evaluated as not healthy; the
                    // reason is kept for people.
                    parts.push((
                        format!("healthPolicy of {what}"),
                        Health::unknown(format!("cannot evaluate: {error}")),
                    ));
                    false
                }
            }
        }
    };
    if let Some(custom_status) = &rules.custom_status {
        if let Value::Object(fields) = &mut context {
            fields.insert("status".to_owned(), json!({ "healthy": healthy }));
        }
        // A failing custom status only loses its message, as in KubeVela.
        if let Ok(message) = evaluate_custom_status(evaluator, custom_status, &context, parameter)
            && !message.is_empty()
        {
            messages.push(message);
        }
    }
}

fn evaluate_field(
    evaluator: &cue::Evaluator,
    snippet: &Snippet,
    field: &str,
    context: &Value,
    parameter: &Value,
) -> Result<Value, String> {
    let parsed = snippet.parsed()?;
    let span = cue::Span::default();
    let value = evaluator.evaluate(
        &[&parsed.file],
        &[
            cue::Injection {
                field: "context",
                value: context,
                span,
            },
            cue::Injection {
                field: "parameter",
                value: parameter,
                span,
            },
        ],
    );
    let found = value
        .lookup(&[field])
        .ok_or_else(|| format!("{field} is not set"))?;
    found.to_json().map_err(|errors| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// The context every snippet sees: KubeVela's `getTemplateContext` without `appRevision`
/// (application revisions are a controller concept Driftless does not have).
fn base_context(app: &AppRef, component: &str, parameter: &Value) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert("name".to_owned(), Value::String(component.to_owned()));
    context.insert("appName".to_owned(), Value::String(app.name.clone()));
    context.insert("namespace".to_owned(), Value::String(app.namespace.clone()));
    context.insert("parameter".to_owned(), parameter.clone());
    context.insert("status".to_owned(), Value::Object(Map::new()));
    context
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
