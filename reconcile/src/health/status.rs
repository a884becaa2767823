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
use std::sync::{Arc, Mutex, OnceLock};

use analyzer::model::{Application, Component};
use analyzer::{AppRef, DefinitionKind, Definitions};
use serde_json::{Map, Value, json};

use super::{Health, HealthStatus};
use crate::plan::ObjectRef;

/// The `status` CUE of one definition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusRules {
    /// `spec.status.healthPolicy`: sets `isHealth`.
    pub health_policy: Option<Snippet>,
    /// `spec.status.customStatus`: sets `message`.
    pub custom_status: Option<Snippet>,
}

impl StatusRules {
    /// True when the definition has neither a health policy nor a custom status.
    pub fn is_empty(&self) -> bool {
        self.health_policy.is_none() && self.custom_status.is_none()
    }

    /// False when neither snippet can observe `parameter` (nor `context.parameter`): a
    /// reference to either spells the identifier, so a snippet without the word cannot read
    /// the properties, whatever they hold.
    pub fn reads_parameter(&self) -> bool {
        [&self.health_policy, &self.custom_status]
            .into_iter()
            .flatten()
            .any(|snippet| snippet.text().contains("parameter"))
    }
}

/// One status CUE snippet, parsed at most once however many apps and objects it rates: every
/// app of a type shares it ([`StatusCatalog`]). At 10,000 apps, parsing the snippet again per
/// component was a large share of a plan; a shared parse also lets the evaluator
/// keep its per-file work (compile checks, untouched optional fields) across apps.
#[derive(Clone)]
pub struct Snippet(Arc<SnippetInner>);

struct SnippetInner {
    text: String,
    parsed: OnceLock<Result<cue::Parsed, String>>,
}

impl Snippet {
    pub fn new(text: impl Into<String>) -> Snippet {
        Snippet(Arc::new(SnippetInner {
            text: text.into(),
            parsed: OnceLock::new(),
        }))
    }

    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// The parsed snippet, or its first syntax error.
    fn parsed(&self) -> Result<&cue::Parsed, String> {
        self.0
            .parsed
            .get_or_init(|| {
                let parsed = cue::parse_file(cue::FileId(0), &self.0.text);
                match parsed.errors.first() {
                    Some(error) => Err(error.to_string()),
                    None => Ok(parsed),
                }
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl std::ops::Deref for Snippet {
    type Target = str;
    fn deref(&self) -> &str {
        self.text()
    }
}

impl From<&str> for Snippet {
    fn from(text: &str) -> Snippet {
        Snippet::new(text)
    }
}

impl PartialEq for Snippet {
    fn eq(&self, other: &Snippet) -> bool {
        self.text() == other.text()
    }
}

impl Eq for Snippet {}

impl std::fmt::Debug for Snippet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Snippet").field(&self.text()).finish()
    }
}

/// The status rules of each definition, looked up once per definition and shared by every
/// app that uses it (so each snippet is parsed once per plan, see [`Snippet`]).
pub struct StatusCatalog<'a> {
    definitions: &'a Definitions,
    // Looked up by key only, never iterated into output.
    rules: Mutex<BTreeMap<(DefinitionKind, String), StatusRules>>,
}

impl<'a> StatusCatalog<'a> {
    pub fn new(definitions: &'a Definitions) -> StatusCatalog<'a> {
        StatusCatalog {
            definitions,
            rules: Mutex::new(BTreeMap::new()),
        }
    }

    /// The rules of definition `name` of `kind`; none when there is no such definition.
    pub fn rules(&self, kind: DefinitionKind, name: &str) -> StatusRules {
        let mut rules = self
            .rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        rules
            .entry((kind, name.to_owned()))
            .or_insert_with(|| {
                self.definitions
                    .get(kind, name)
                    .map(|definition| StatusRules {
                        health_policy: non_empty(definition.health_policy.as_deref()),
                        custom_status: non_empty(definition.custom_status.as_deref()),
                    })
                    .unwrap_or_default()
            })
            .clone()
    }
}

/// What one component's health depends on besides its live objects: its type's and traits'
/// status CUE and the properties they read as `parameter`.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentStatus {
    pub name: String,
    pub component_type: String,
    /// The component's `properties`; `{}` when absent, and when no snippet of `rules` reads
    /// `parameter` ([`StatusRules::reads_parameter`]): a plan holds every app's statuses, and
    /// copying properties no snippet reads was most of them.
    pub parameter: Value,
    pub rules: StatusRules,
    pub traits: Vec<TraitStatus>,
}

/// One trait of a component, for its status CUE.
#[derive(Debug, Clone, PartialEq)]
pub struct TraitStatus {
    pub trait_type: String,
    /// The trait's `properties`, kept as [`ComponentStatus::parameter`] is.
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

/// The component statuses of one app, from its Application manifest as JSON (the render
/// output does not carry properties) with each type's status CUE looked up in `definitions`. A
/// type without a definition here simply has no rules.
pub fn from_application(application: &Value, definitions: &Definitions) -> Vec<ComponentStatus> {
    let components = application
        .pointer("/spec/components")
        .cloned()
        .and_then(|components| serde_json::from_value::<Vec<Component>>(components).ok())
        .unwrap_or_default();
    of_components(&components, &StatusCatalog::new(definitions))
}

/// The component statuses of one app from its loaded Application, with the status CUE of
/// `catalog` (shared by every app of a plan).
pub fn from_model(application: &Application, catalog: &StatusCatalog<'_>) -> Vec<ComponentStatus> {
    of_components(&application.spec.components, catalog)
}

fn of_components(components: &[Component], catalog: &StatusCatalog<'_>) -> Vec<ComponentStatus> {
    let parameter = |properties: &Option<Value>, rules: &StatusRules| match properties {
        Some(properties @ Value::Object(_)) if rules.reads_parameter() => properties.clone(),
        _ => Value::Object(Map::new()),
    };
    components
        .iter()
        .map(|component| {
            let rules = catalog.rules(DefinitionKind::Component, &component.component_type);
            ComponentStatus {
                name: component.name.clone(),
                component_type: component.component_type.clone(),
                parameter: parameter(&component.properties, &rules),
                rules,
                traits: component
                    .traits
                    .iter()
                    .map(|item| {
                        let rules = catalog.rules(DefinitionKind::Trait, &item.trait_type);
                        TraitStatus {
                            trait_type: item.trait_type.clone(),
                            parameter: parameter(&item.properties, &rules),
                            rules,
                        }
                    })
                    .collect(),
            }
        })
        .collect()
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

fn non_empty(text: Option<&str>) -> Option<Snippet> {
    text.map(str::trim)
        .filter(|text| !text.is_empty())
        .map(Snippet::new)
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
