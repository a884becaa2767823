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

use analyzer::{AppRef, DefinitionKind, Definitions};
use serde_json::{Map, Value, json};

use super::{Health, HealthStatus};
use crate::plan::ObjectRef;

/// The `status` CUE of one definition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusRules {
    /// `spec.status.healthPolicy`: sets `isHealth`.
    pub health_policy: Option<String>,
    /// `spec.status.customStatus`: sets `message`.
    pub custom_status: Option<String>,
}

/// What one component's health depends on besides its live objects: its type's and traits'
/// status CUE and the properties they read as `parameter`.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentStatus {
    pub name: String,
    pub component_type: String,
    /// The component's `properties` (`{}` when absent).
    pub parameter: Value,
    pub rules: StatusRules,
    pub traits: Vec<TraitStatus>,
}

/// One trait of a component, for its status CUE.
#[derive(Debug, Clone, PartialEq)]
pub struct TraitStatus {
    pub trait_type: String,
    pub parameter: Value,
    pub rules: StatusRules,
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

/// The component statuses of every app, read from the Application manifests (the render output
/// does not carry properties) with each type's status CUE looked up in `definitions`. A type
/// without a definition here simply has no rules.
pub fn from_application(application: &Value, definitions: &Definitions) -> Vec<ComponentStatus> {
    let rules = |kind, name: &str| {
        definitions
            .get(kind, name)
            .map(|definition| StatusRules {
                health_policy: non_empty(definition.health_policy.as_deref()),
                custom_status: non_empty(definition.custom_status.as_deref()),
            })
            .unwrap_or_default()
    };
    let parameter = |value: &Value| match value.get("properties") {
        Some(properties @ Value::Object(_)) => properties.clone(),
        _ => Value::Object(Map::new()),
    };
    let components = application
        .pointer("/spec/components")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    components
        .iter()
        .filter_map(|component| {
            let name = component.get("name")?.as_str()?;
            let component_type = component.get("type")?.as_str()?;
            let traits = component
                .get("traits")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|item| {
                    let trait_type = item.get("type")?.as_str()?;
                    Some(TraitStatus {
                        trait_type: trait_type.to_owned(),
                        parameter: parameter(item),
                        rules: rules(DefinitionKind::Trait, trait_type),
                    })
                })
                .collect();
            Some(ComponentStatus {
                name: name.to_owned(),
                component_type: component_type.to_owned(),
                parameter: parameter(component),
                rules: rules(DefinitionKind::Component, component_type),
                traits,
            })
        })
        .collect()
}

/// The component statuses of every rendered app, read from the Application manifests in the
/// sources. A manifest that does not parse here has already been reported by the render.
pub fn from_sources(
    output: &analyzer::RenderOutput,
    sources: &analyzer::SourceMap,
    definitions: &Definitions,
) -> BTreeMap<AppRef, Vec<ComponentStatus>> {
    let mut by_file: BTreeMap<cue::FileId, Vec<&AppRef>> = BTreeMap::new();
    for app in &output.apps {
        by_file.entry(app.file).or_default().push(&app.app);
    }
    let mut found = BTreeMap::new();
    for (file, apps) in by_file {
        found.extend(from_manifest_text(sources.text(file), &apps, definitions));
    }
    found
}

/// Per app, the component statuses found in the YAML documents of `text` (an Application
/// manifest file), for the apps listed in `apps`.
pub fn from_manifest_text(
    text: &str,
    apps: &[&AppRef],
    definitions: &Definitions,
) -> BTreeMap<AppRef, Vec<ComponentStatus>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_default();
    let mut found = BTreeMap::new();
    for document in documents {
        if document.get("kind").and_then(Value::as_str) != Some("Application") {
            continue;
        }
        let name = document.pointer("/metadata/name").and_then(Value::as_str);
        // The app's namespace may come from the render's rules (default or forced), so match
        // by name among the apps rendered from this file.
        for app in apps.iter().filter(|app| Some(app.name.as_str()) == name) {
            found.insert((*app).clone(), from_application(&document, definitions));
        }
    }
    found
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
    if let Some(workload) = workload {
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
    for trait_status in &status.traits {
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
    policy: &str,
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
    custom_status: &str,
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
    mut context: Map<String, Value>,
    parameter: &Value,
    what: &str,
    parts: &mut Vec<(String, Health)>,
    messages: &mut Vec<String>,
) {
    let healthy = match &rules.health_policy {
        None => true,
        Some(policy) => {
            let context = Value::Object(context.clone());
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
        context.insert("status".to_owned(), json!({ "healthy": healthy }));
        let context = Value::Object(context);
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
    snippet: &str,
    field: &str,
    context: &Value,
    parameter: &Value,
) -> Result<Value, String> {
    let parsed = cue::parse_file(cue::FileId(0), snippet);
    if let Some(error) = parsed.errors.first() {
        return Err(error.to_string());
    }
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

fn non_empty(text: Option<&str>) -> Option<String> {
    text.map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
