//! The resource policies of an Application that steer plan, apply and garbage collection:
//! `garbage-collect`, `shared-resource`, `take-over`, `read-only` and `apply-once`, parsed from
//! `spec.policies` with the parameter shapes of KubeVela's built-in policy definitions, and the
//! rule selector they share.
//!
//! Other policy types (`topology`, `override`, ...) are the renderer's and workflow's business and
//! are ignored here.

use analyzer::model::Policy;
use analyzer::{AppRef, Diagnostic};
use serde::Deserialize;

/// The resource policies of one app, ready to match objects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourcePolicies {
    pub garbage_collect: GarbageCollect,
    /// `shared-resource` rules: selected objects may be shared with other apps; the first app
    /// to apply one owns it, later apps read it and never write it.
    pub shared: Vec<ResourceSelector>,
    /// `take-over` rules: selected objects that exist without any owner are adopted.
    pub take_over: Vec<ResourceSelector>,
    /// `read-only` rules: selected objects are never written and must already exist.
    pub read_only: Vec<ResourceSelector>,
    pub apply_once: ApplyOnce,
}

/// The `garbage-collect` policy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GarbageCollect {
    /// Objects dropped from the render are kept (still tracked) instead of pruned on update.
    #[serde(default)]
    pub keep_legacy_resource: bool,
    /// The first matching rule decides an object's strategy.
    #[serde(default)]
    pub rules: Vec<GarbageCollectRule>,
}

/// One `garbage-collect` rule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GarbageCollectRule {
    pub selector: ResourceSelector,
    #[serde(default)]
    pub strategy: GcStrategy,
    #[serde(default)]
    pub propagation: Option<Propagation>,
}

/// When an object may be deleted by garbage collection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GcStrategy {
    /// Deleted when it leaves the render, and when the app is deleted (the default).
    #[default]
    OnAppUpdate,
    /// Kept when it leaves the render; deleted only with the app.
    OnAppDelete,
    /// Never deleted.
    Never,
}

/// How dependents of a deleted object are treated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Propagation {
    /// Dependents are left in place.
    Orphan,
    /// Dependents are deleted too (Kubernetes background propagation, the default).
    #[default]
    Cascading,
}

/// The `apply-once` policy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyOnce {
    /// With no rules: every object is created once and then left to drift.
    #[serde(default)]
    pub enable: bool,
    #[serde(default)]
    pub rules: Vec<ApplyOnceRule>,
}

/// One `apply-once` rule: which paths of which objects may drift.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyOnceRule {
    /// No selector selects every object.
    #[serde(default)]
    pub selector: Option<ResourceSelector>,
    pub strategy: ApplyOnceStrategy,
}

/// The drift an `apply-once` rule allows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyOnceStrategy {
    /// `onUpdate` (when the app's desired state changed), `onStateKeep` (when it did not), or
    /// empty for both.
    #[serde(default)]
    pub affect: Option<String>,
    /// Dotted field paths (`spec.replicas`) whose live value is kept; `*` is the whole object.
    pub path: Vec<String>,
}

/// KubeVela's `ResourcePolicyRuleSelector`: every non-empty list must contain the object's value
/// (the lists are ANDed, the entries of one list ORed); a selector with no lists matches nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSelector {
    #[serde(default)]
    pub component_names: Vec<String>,
    #[serde(default)]
    pub component_types: Vec<String>,
    /// `COMPONENT` (workloads) or `TRAIT` (auxiliary objects).
    #[serde(default)]
    pub oam_types: Vec<String>,
    #[serde(default)]
    pub trait_types: Vec<String>,
    /// Kinds (`Deployment`).
    #[serde(default)]
    pub resource_types: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// What a selector looks at in one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectFacts<'a> {
    pub component: &'a str,
    /// The component's type, known only for workloads (KubeVela reads it from the workload's
    /// `workload.oam.dev/type` label, so trait objects never match `componentTypes`).
    pub component_type: Option<&'a str>,
    /// `None` for the workload.
    pub trait_type: Option<&'a str>,
    pub kind: &'a str,
    pub name: &'a str,
}

/// When an `apply-once` strategy is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOnceMoment {
    /// The desired state changed since the last apply.
    Update,
    /// The desired state is the one last applied (drift correction).
    StateKeep,
}

impl ResourceSelector {
    /// True when the object is selected.
    pub fn matches(&self, facts: &ObjectFacts<'_>) -> bool {
        let is_workload = facts.trait_type.is_none();
        let oam_type = if is_workload { "COMPONENT" } else { "TRAIT" };
        let checks: [(&[String], Option<&str>); 6] = [
            (&self.component_names, Some(facts.component)),
            (&self.component_types, facts.component_type),
            (&self.oam_types, Some(oam_type)),
            (&self.trait_types, facts.trait_type),
            (&self.resource_types, Some(facts.kind)),
            (&self.resource_names, Some(facts.name)),
        ];
        let mut any_list = false;
        for (list, value) in checks {
            if list.is_empty() {
                continue;
            }
            any_list = true;
            let found = value.is_some_and(|value| {
                list.iter().any(|entry| {
                    // KubeVela's oamTypes say COMPONENT; its resourceType label says WORKLOAD.
                    entry == value || (value == "COMPONENT" && entry == "WORKLOAD")
                })
            });
            if !found {
                return false;
            }
        }
        any_list
    }
}

impl ResourcePolicies {
    /// Parses the resource policies among an app's `spec.policies`. A policy whose properties do
    /// not have the expected shape becomes an `invalid-policy` error diagnostic and is ignored.
    pub fn from_policies(app: &AppRef, policies: &[Policy]) -> (ResourcePolicies, Vec<Diagnostic>) {
        let mut parsed = ResourcePolicies::default();
        let mut diagnostics = Vec::new();
        for policy in policies {
            let properties = policy
                .properties
                .clone()
                .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()));
            let result = match policy.policy_type.as_str() {
                "garbage-collect" => serde_json::from_value::<GarbageCollect>(properties)
                    .map(|gc| parsed.garbage_collect = gc),
                "apply-once" => serde_json::from_value::<ApplyOnce>(properties)
                    .map(|apply_once| parsed.apply_once = apply_once),
                "shared-resource" => serde_json::from_value::<Rules>(properties)
                    .map(|rules| parsed.shared.extend(rules.selectors())),
                "take-over" => serde_json::from_value::<Rules>(properties)
                    .map(|rules| parsed.take_over.extend(rules.selectors())),
                "read-only" => serde_json::from_value::<Rules>(properties)
                    .map(|rules| parsed.read_only.extend(rules.selectors())),
                _ => Ok(()),
            };
            if let Err(error) = result {
                diagnostics.push(
                    Diagnostic::error(
                        "invalid-policy",
                        format!(
                            "policy {:?} of type {}: {error}",
                            policy.name, policy.policy_type
                        ),
                        None,
                    )
                    .for_app(app),
                );
            }
        }
        (parsed, diagnostics)
    }

    /// The garbage-collection strategy and propagation of an object: the first matching rule's,
    /// or the defaults.
    ///
    /// Deviation: KubeVela collects every kind alike. Here a Namespace, a PersistentVolumeClaim
    /// or a CustomResourceDefinition ([`is_protected_kind`]) holds data or other apps' objects,
    /// so without a rule of the app that selects it, its strategy is `never`: it is not pruned
    /// when it leaves the render, nor when the app is deleted (the strategy is recorded in the
    /// tracker when it is applied).
    pub fn gc_for(&self, facts: &ObjectFacts<'_>) -> (GcStrategy, Propagation) {
        match self
            .garbage_collect
            .rules
            .iter()
            .find(|rule| rule.selector.matches(facts))
        {
            Some(rule) => (rule.strategy, rule.propagation.unwrap_or_default()),
            None if is_protected_kind(facts.kind) => (GcStrategy::Never, Propagation::Cascading),
            None => (GcStrategy::OnAppUpdate, Propagation::Cascading),
        }
    }

    pub fn is_shared(&self, facts: &ObjectFacts<'_>) -> bool {
        self.shared.iter().any(|selector| selector.matches(facts))
    }

    pub fn may_take_over(&self, facts: &ObjectFacts<'_>) -> bool {
        self.take_over
            .iter()
            .any(|selector| selector.matches(facts))
    }

    pub fn is_read_only(&self, facts: &ObjectFacts<'_>) -> bool {
        self.read_only
            .iter()
            .any(|selector| selector.matches(facts))
    }

    /// The field paths whose live value is kept at this moment (`*` keeps the whole object).
    /// `apply-once` with `enable` and no rules keeps the whole object at every moment.
    pub fn drift_allowed(&self, facts: &ObjectFacts<'_>, moment: ApplyOnceMoment) -> Vec<String> {
        if !self.apply_once.enable {
            return Vec::new();
        }
        if self.apply_once.rules.is_empty() {
            return vec!["*".to_owned()];
        }
        let mut paths = Vec::new();
        for rule in &self.apply_once.rules {
            let selected = rule
                .selector
                .as_ref()
                .is_none_or(|selector| selector.matches(facts));
            let affects = match rule.strategy.affect.as_deref() {
                None | Some("") => true,
                Some("onUpdate") => moment == ApplyOnceMoment::Update,
                Some("onStateKeep") => moment == ApplyOnceMoment::StateKeep,
                Some(_) => false,
            };
            if selected && affects {
                paths.extend(rule.strategy.path.iter().cloned());
            }
        }
        paths
    }
}

/// The `{rules: [{selector}]}` shape shared by `shared-resource`, `take-over` and `read-only`.
#[derive(Debug, Deserialize)]
struct Rules {
    #[serde(default)]
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
struct Rule {
    selector: ResourceSelector,
}

impl Rules {
    fn selectors(self) -> impl Iterator<Item = ResourceSelector> {
        self.rules.into_iter().map(|rule| rule.selector)
    }
}

/// Kinds never pruned unless a `garbage-collect` rule of the app selects them (see
/// [`ResourcePolicies::gc_for`]).
pub fn is_protected_kind(kind: &str) -> bool {
    matches!(
        kind,
        "Namespace" | "PersistentVolumeClaim" | "CustomResourceDefinition"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app() -> AppRef {
        AppRef {
            namespace: "team".to_owned(),
            name: "shop".to_owned(),
        }
    }

    fn policy(policy_type: &str, properties: serde_json::Value) -> Policy {
        Policy {
            name: policy_type.to_owned(),
            policy_type: policy_type.to_owned(),
            properties: Some(properties),
        }
    }

    fn workload<'a>(component: &'a str, kind: &'a str, name: &'a str) -> ObjectFacts<'a> {
        ObjectFacts {
            component,
            component_type: Some("webservice"),
            trait_type: None,
            kind,
            name,
        }
    }

    #[test]
    fn protected_kinds_are_never_collected_unless_a_rule_selects_them() {
        let defaults = ResourcePolicies::default();
        for kind in [
            "Namespace",
            "PersistentVolumeClaim",
            "CustomResourceDefinition",
        ] {
            assert_eq!(
                defaults.gc_for(&workload("db", kind, "data")).0,
                GcStrategy::Never,
                "{kind}"
            );
        }
        assert_eq!(
            defaults.gc_for(&workload("web", "Deployment", "web")).0,
            GcStrategy::OnAppUpdate
        );
        let (policies, diagnostics) = ResourcePolicies::from_policies(
            &app(),
            &[policy(
                "garbage-collect",
                json!({"rules": [{"selector": {"resourceTypes": ["PersistentVolumeClaim"]}, "strategy": "onAppUpdate"}]}),
            )],
        );
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(
            policies
                .gc_for(&workload("db", "PersistentVolumeClaim", "data"))
                .0,
            GcStrategy::OnAppUpdate
        );
        assert_eq!(
            policies.gc_for(&workload("db", "Namespace", "data")).0,
            GcStrategy::Never
        );
    }

    #[test]
    fn selector_ands_lists_and_ors_entries() {
        let selector: ResourceSelector = serde_json::from_value(json!({
            "componentNames": ["web", "api"],
            "resourceTypes": ["Deployment"],
        }))
        .unwrap();
        assert!(selector.matches(&workload("api", "Deployment", "api")));
        assert!(!selector.matches(&workload("api", "Service", "api")));
        assert!(!selector.matches(&workload("db", "Deployment", "db")));
        assert!(!ResourceSelector::default().matches(&workload("web", "Deployment", "web")));
    }

    #[test]
    fn oam_types_tell_workloads_from_traits() {
        let selector: ResourceSelector =
            serde_json::from_value(json!({"oamTypes": ["TRAIT"]})).unwrap();
        let service = ObjectFacts {
            trait_type: Some("gateway"),
            component_type: None,
            ..workload("web", "Service", "web")
        };
        assert!(selector.matches(&service));
        assert!(!selector.matches(&workload("web", "Deployment", "web")));
        let by_component_type: ResourceSelector =
            serde_json::from_value(json!({"componentTypes": ["webservice"]})).unwrap();
        assert!(!by_component_type.matches(&service));
    }

    #[test]
    fn garbage_collect_first_matching_rule_wins() {
        let (policies, diagnostics) = ResourcePolicies::from_policies(
            &app(),
            &[policy(
                "garbage-collect",
                json!({"keepLegacyResource": true, "rules": [
                    {"selector": {"resourceTypes": ["ConfigMap"]}, "strategy": "never"},
                    {"selector": {"componentNames": ["web"]}, "strategy": "onAppDelete", "propagation": "orphan"},
                ]}),
            )],
        );
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert!(policies.garbage_collect.keep_legacy_resource);
        assert_eq!(
            policies.gc_for(&workload("web", "ConfigMap", "cfg")),
            (GcStrategy::Never, Propagation::Cascading)
        );
        assert_eq!(
            policies.gc_for(&workload("web", "Deployment", "web")),
            (GcStrategy::OnAppDelete, Propagation::Orphan)
        );
        assert_eq!(
            policies.gc_for(&workload("db", "Deployment", "db")),
            (GcStrategy::OnAppUpdate, Propagation::Cascading)
        );
    }

    #[test]
    fn a_malformed_policy_is_a_diagnostic() {
        let (policies, diagnostics) = ResourcePolicies::from_policies(
            &app(),
            &[policy(
                "garbage-collect",
                json!({"rules": [{"selector": {}, "strategy": "sometimes"}]}),
            )],
        );
        assert_eq!(policies, ResourcePolicies::default());
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].rule, "invalid-policy");
        assert!(
            diagnostics[0].message.contains("sometimes"),
            "{}",
            diagnostics[0].message
        );
    }

    #[test]
    fn apply_once_paths_follow_affect() {
        let (policies, _) = ResourcePolicies::from_policies(
            &app(),
            &[policy(
                "apply-once",
                json!({"enable": true, "rules": [
                    {"selector": {"resourceTypes": ["Deployment"]}, "strategy": {"path": ["spec.replicas"]}},
                    {"strategy": {"affect": "onStateKeep", "path": ["metadata.labels"]}},
                ]}),
            )],
        );
        let facts = workload("web", "Deployment", "web");
        assert_eq!(
            policies.drift_allowed(&facts, ApplyOnceMoment::Update),
            vec!["spec.replicas"]
        );
        assert_eq!(
            policies.drift_allowed(&facts, ApplyOnceMoment::StateKeep),
            vec!["spec.replicas", "metadata.labels"]
        );
        let (whole_app, _) = ResourcePolicies::from_policies(
            &app(),
            &[policy("apply-once", json!({"enable": true}))],
        );
        assert_eq!(
            whole_app.drift_allowed(&facts, ApplyOnceMoment::Update),
            vec!["*"]
        );
    }

    #[test]
    fn ownership_rules_are_collected() {
        let (policies, diagnostics) = ResourcePolicies::from_policies(
            &app(),
            &[
                policy(
                    "shared-resource",
                    json!({"rules": [{"selector": {"resourceTypes": ["Namespace"]}}]}),
                ),
                policy(
                    "take-over",
                    json!({"rules": [{"selector": {"componentNames": ["web"]}}]}),
                ),
                policy(
                    "read-only",
                    json!({"rules": [{"selector": {"resourceNames": ["cfg"]}}]}),
                ),
                policy("topology", json!({"clusters": ["local"]})),
            ],
        );
        assert!(diagnostics.is_empty());
        assert!(policies.is_shared(&workload("x", "Namespace", "team")));
        assert!(policies.may_take_over(&workload("web", "Service", "web")));
        assert!(policies.is_read_only(&workload("x", "ConfigMap", "cfg")));
        assert!(!policies.is_read_only(&workload("x", "ConfigMap", "other")));
    }
}
