//! What a component's health reads besides its live objects, taken when the Application and
//! its definitions are loaded: each definition's status CUE ([`StatusRules`]: KubeVela's
//! `spec.status.healthPolicy` and `spec.status.customStatus`), and per component of an app its
//! type's and traits' rules with the properties they read as `parameter` ([`ComponentStatus`]).
//! Evaluating them against live objects is `reconcile::health::status`.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use crate::model::Component;
use crate::{DefinitionKind, Definitions};

/// The `status` CUE of one definition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusRules {
    /// `spec.status.healthPolicy`: sets `isHealth`.
    pub health_policy: Option<Snippet>,
    /// `spec.status.customStatus`: sets `message`.
    pub custom_status: Option<Snippet>,
}

impl StatusRules {
    /// The rules of definition `name` of `kind` in `definitions`; none when there is no such
    /// definition. The snippets are the definition's own, shared (parsed once) by every app.
    pub fn of(definitions: &Definitions, kind: DefinitionKind, name: &str) -> StatusRules {
        definitions
            .get(kind, name)
            .map(|definition| StatusRules {
                health_policy: definition.health_policy.clone(),
                custom_status: definition.custom_status.clone(),
            })
            .unwrap_or_default()
    }

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

/// One status CUE snippet, parsed at most once however many apps and objects it rates: it is
/// loaded with its definition, and every app of a type shares it. Parsing the snippet again
/// per component was a large share of a plan of many apps; a shared parse also lets the
/// evaluator keep its per-file work (compile checks, untouched optional fields) across apps.
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

    /// A snippet of `text` unless it is absent or blank (KubeVela treats an empty policy as
    /// none).
    pub fn non_empty(text: Option<&str>) -> Option<Snippet> {
        text.map(str::trim)
            .filter(|text| !text.is_empty())
            .map(Snippet::new)
    }

    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// The parsed snippet, or its first syntax error.
    ///
    /// # Errors
    /// The snippet does not parse: its first syntax error.
    pub fn parsed(&self) -> Result<&cue::Parsed, String> {
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

/// What one component's health depends on besides its live objects: its type's and traits'
/// status CUE and the properties they read as `parameter`.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentStatus {
    pub name: String,
    pub component_type: String,
    /// The component's `properties`; `{}` when absent, and when no snippet of `rules` reads
    /// `parameter` ([`StatusRules::reads_parameter`]): every app's statuses are kept with its
    /// render, and copying properties no snippet reads was most of them.
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

/// The status inputs of `components` (an Application's, as written), with each type's and
/// trait's status CUE from `definitions`. A type without a definition there has no rules.
pub fn component_statuses(
    components: &[Component],
    definitions: &Definitions,
) -> Vec<ComponentStatus> {
    let parameter = |properties: &Option<Value>, rules: &StatusRules| match properties {
        Some(properties @ Value::Object(_)) if rules.reads_parameter() => properties.clone(),
        _ => Value::Object(Map::new()),
    };
    components
        .iter()
        .map(|component| {
            let rules = StatusRules::of(
                definitions,
                DefinitionKind::Component,
                &component.component_type,
            );
            ComponentStatus {
                name: component.name.clone(),
                component_type: component.component_type.clone(),
                parameter: parameter(&component.properties, &rules),
                rules,
                traits: component
                    .traits
                    .iter()
                    .map(|item| {
                        let rules =
                            StatusRules::of(definitions, DefinitionKind::Trait, &item.trait_type);
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
