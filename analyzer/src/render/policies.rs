//! The effect of `override`, `topology` and `replication` policies on what is rendered
//! (kubevela-render-semantics.md §4.2 and §5).
//!
//! Which overrides apply comes from the deploy steps: explicit `spec.workflow.steps` of type
//! `deploy` (their `properties.policies`), or, without steps, one deploy per topology policy
//! (all overrides plus that topology), or one deploy with all overrides. With no deploy step at
//! all, overrides are not applied, like `vela dry-run`. Topology contents do not change the
//! objects offline (no cluster or namespace rewrite).
//!
//! Per placement ([`placement_components`], behind `analyzer::render_placements`) the deploy
//! sub-steps of step groups are placed too, after the top-level ones, and a deploy step's
//! `replication` policies render the selected components once per key with
//! `context.replicaKey` set, as KubeVela's controller deploys them. `vela dry-run` does
//! neither (it walks top-level steps only and ignores replication; checked with vela v1.11.0:
//! one render, `context.replicaKey` empty), so the single render ([`effective_components`],
//! `driftless render`) does neither either.
//!
//! Deviation: KubeVela renders once per topology. The single render has no per-cluster
//! placement: when the placements of an app would render different objects (different
//! override lists), the placement on the local cluster is rendered and each other one gets a
//! `remote-placement` warning; with no single local placement the app is blocked with
//! `unsupported-policy`.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::Diagnostic;
use crate::load::Standalone;
use crate::load::application::LoadedApp;
use crate::model::{Component, Policy, WorkflowStep};

mod override_patch;

use override_patch::apply_override;

/// A component as rendered, after overrides, with where it is declared. The app's own
/// components are borrowed until an override or replication changes them: most apps have
/// none, and copying (then comparing and dropping) every component's properties per render
/// is wasted.
#[derive(Debug, Clone)]
pub(crate) struct EffectiveComponent<'a> {
    pub(crate) component: Cow<'a, Component>,
    /// JSON pointer of its declaration (in `spec.components`, or in the override policy that
    /// added it).
    pub(crate) pointer: String,
}

/// The components of one placement (a topology of a deploy step, or a deploy step without
/// topology), after its override policies.
#[derive(Debug, Clone)]
pub(crate) struct PlacementComponents<'a> {
    /// The topology policy's name; `None` for a deploy step without topology, or an app with
    /// no deploy step.
    pub(crate) topology: Option<String>,
    pub(crate) components: Vec<EffectiveComponent<'a>>,
}

/// An app's placements before any override is applied.
struct PlacementPlan<'a> {
    components: Vec<EffectiveComponent<'a>>,
    all_policies: Vec<&'a Policy>,
    /// One per placement: one per topology of each deploy step, or one per deploy step without
    /// topology; top-level deploy steps first in `vela dry-run`'s order, then the deploy
    /// sub-steps of step groups in order. `None` when the app has no deploy step (overrides
    /// are then not applied at all).
    variants: Option<Vec<Variant>>,
}

/// One placement of a deploy step, as policy indexes into `all_policies`.
#[derive(Debug, Clone)]
struct Variant {
    topology: Option<usize>,
    /// Override policies, in the step's order.
    overrides: Vec<usize>,
    /// Replication policies, in the step's order.
    replications: Vec<usize>,
    /// From a deploy sub-step of a step group: `vela dry-run` ignores those (it walks
    /// top-level steps only), so only [`placement_components`] renders them.
    nested: bool,
}

/// The components to render, after the override policies that the app's deploy steps apply.
///
/// # Errors
/// A deploy step naming a policy that does not exist, or topologies with different overrides.
pub(crate) fn effective_components<'a>(
    loaded: &'a LoadedApp,
    standalone: &'a Standalone,
) -> Result<(Vec<EffectiveComponent<'a>>, Vec<Diagnostic>), Vec<Diagnostic>> {
    let PlacementPlan {
        components,
        all_policies,
        variants,
    } = placement_plan(loaded, standalone)?;
    let Some(variants) = variants else {
        return Ok((components, Vec::new()));
    };
    // Like `vela dry-run`: top-level deploy steps only, and no replication.
    let variants: Vec<(Option<usize>, Vec<usize>)> = variants
        .into_iter()
        .filter(|variant| !variant.nested)
        .map(|variant| (variant.topology, variant.overrides))
        .collect();
    if variants.is_empty() {
        return Ok((components, Vec::new()));
    }
    let (chosen, warnings) = choose_placement(loaded, &all_policies, &variants)?;
    let components = apply_overrides(loaded, &all_policies, components, &chosen)?;
    Ok((components, warnings))
}

/// Every placement of the app with its components, in `vela dry-run`'s order (one entry with
/// no topology when the app has no deploy step).
///
/// # Errors
/// A deploy step naming a policy that does not exist, or an invalid override policy.
pub(crate) fn placement_components<'a>(
    loaded: &'a LoadedApp,
    standalone: &'a Standalone,
) -> Result<Vec<PlacementComponents<'a>>, Vec<Diagnostic>> {
    let PlacementPlan {
        components,
        all_policies,
        variants,
    } = placement_plan(loaded, standalone)?;
    let Some(variants) = variants else {
        return Ok(vec![PlacementComponents {
            topology: None,
            components,
        }]);
    };
    variants
        .iter()
        .map(|variant| {
            let overridden = apply_overrides(
                loaded,
                &all_policies,
                components.clone(),
                &variant.overrides,
            )?;
            Ok(PlacementComponents {
                topology: variant
                    .topology
                    .map(|index| all_policies[index].name.clone()),
                components: apply_replications(
                    loaded,
                    &all_policies,
                    overridden,
                    &variant.replications,
                )?,
            })
        })
        .collect()
}

/// Applies the replication policies `replications` (indexes into `all_policies`) in order,
/// as KubeVela's deploy step does after the overrides (`pkg/policy/replication.go`): the
/// components a policy's `selector` names are rendered once per key, each with
/// `context.replicaKey` set to its key (the definition uses it in names); the others once.
/// Each selected component is expanded in place, key by key, so objects keep component order.
///
/// Deviation: KubeVela silently deploys nothing replicated for a policy with no keys;
/// Driftless refuses it, since an empty key list is almost certainly a mistake.
fn apply_replications<'a>(
    loaded: &LoadedApp,
    all_policies: &[&Policy],
    mut components: Vec<EffectiveComponent<'a>>,
    replications: &[usize],
) -> Result<Vec<EffectiveComponent<'a>>, Vec<Diagnostic>> {
    let positions = &loaded.document.positions;
    for index in replications {
        let policy = all_policies[*index];
        let pointer = format!("/spec/policies/{index}/properties");
        let error = |message: String| {
            vec![Diagnostic::error(
                "invalid-properties",
                format!("replication policy `{}`: {message}", policy.name),
                Some(positions.value_span(&pointer)),
            )]
        };
        let properties = policy.properties.clone().unwrap_or_default();
        let strings = |key: &str| -> Option<Vec<String>> {
            properties.get(key).and_then(Value::as_array).map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
        };
        let keys = strings("keys").unwrap_or_default();
        if keys.is_empty() {
            return Err(error(
                "`keys` is empty: nothing would be replicated".to_owned(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(duplicate) = keys.iter().find(|key| !seen.insert(key.as_str())) {
            return Err(error(format!(
                "key `{duplicate}` is listed twice; its replicas would be the same objects"
            )));
        }
        let selector = strings("selector").unwrap_or_default();
        let selected = |effective: &EffectiveComponent| {
            effective.component.replica_key.is_none()
                && selector.contains(&effective.component.name)
        };
        if !components.iter().any(selected) {
            return Err(error(format!(
                "`selector` {selector:?} selects no component to replicate"
            )));
        }
        components = components
            .into_iter()
            .flat_map(|effective| {
                if selected(&effective) {
                    keys.iter()
                        .map(|key| {
                            let mut replica = effective.clone();
                            replica.component.to_mut().replica_key = Some(key.clone());
                            replica
                        })
                        .collect()
                } else {
                    vec![effective]
                }
            })
            .collect();
    }
    Ok(components)
}

/// Applies the override policies `overrides` (indexes into `all_policies`) in order.
fn apply_overrides<'a>(
    loaded: &LoadedApp,
    all_policies: &[&Policy],
    mut components: Vec<EffectiveComponent<'a>>,
    overrides: &[usize],
) -> Result<Vec<EffectiveComponent<'a>>, Vec<Diagnostic>> {
    let positions = &loaded.document.positions;
    for policy in overrides {
        let pointer = format!("/spec/policies/{policy}/properties");
        let properties = all_policies[*policy].properties.clone().unwrap_or_default();
        components = apply_override(components, &properties, &pointer).map_err(|message| {
            vec![Diagnostic::error(
                "invalid-properties",
                format!(
                    "override policy `{}`: {message}",
                    all_policies[*policy].name
                ),
                Some(positions.value_span(&pointer)),
            )]
        })?;
    }
    Ok(components)
}

/// Reads the app's deploy steps and policies into a [`PlacementPlan`].
fn placement_plan<'a>(
    loaded: &'a LoadedApp,
    standalone: &'a Standalone,
) -> Result<PlacementPlan<'a>, Vec<Diagnostic>> {
    let spec = &loaded.app.spec;
    let namespace = &loaded.app_ref.namespace;
    let components: Vec<EffectiveComponent> = spec
        .components
        .iter()
        .enumerate()
        .map(|(index, component)| EffectiveComponent {
            component: Cow::Borrowed(component),
            pointer: format!("/spec/components/{index}"),
        })
        .collect();
    // The app's own policies, then standalone Policy objects of its namespace (KubeVela looks
    // a deploy step's policy up in the Application first).
    let mut all_policies: Vec<&Policy> = spec.policies.iter().collect();
    all_policies.extend(
        standalone
            .policies
            .iter()
            .filter(|((policy_namespace, name), _)| {
                policy_namespace == namespace && !spec.policies.iter().any(|p| p.name == *name)
            })
            .map(|(_, policy)| policy),
    );
    let deploy_steps = deploy_steps(loaded, standalone)?;
    if deploy_steps.is_empty() {
        return Ok(PlacementPlan {
            components,
            all_policies,
            variants: None,
        });
    }
    let variants = variants(&deploy_steps, &all_policies, loaded)?;
    Ok(PlacementPlan {
        components,
        all_policies,
        variants: Some(variants),
    })
}

/// A deploy step as placements read it: its policy names, the pointer its errors point at,
/// and whether it is nested in a step group.
type DeployStep = (Vec<String>, String, bool);

/// The app's deploy steps: those of its workflow (its own steps, or the Workflow it refers
/// to), top-level first; without a workflow, one per topology policy with every override
/// policy, or one with the overrides alone.
fn deploy_steps(
    loaded: &LoadedApp,
    standalone: &Standalone,
) -> Result<Vec<DeployStep>, Vec<Diagnostic>> {
    let spec = &loaded.app.spec;
    let namespace = &loaded.app_ref.namespace;
    let positions = &loaded.document.positions;
    let workflow_ref = spec
        .workflow
        .as_ref()
        .and_then(|workflow| workflow.workflow_ref.as_deref())
        .filter(|name| !name.is_empty());

    // (policy names, pointer for errors, nested in a step group) per deploy step.
    let mut deploy_steps: Vec<DeployStep> = Vec::new();
    let explicit_steps = spec
        .workflow
        .as_ref()
        .is_some_and(|workflow| !workflow.steps.is_empty());
    let steps: Vec<(&WorkflowStep, String)> = if explicit_steps {
        spec.workflow
            .iter()
            .flat_map(|workflow| &workflow.steps)
            .enumerate()
            .map(|(index, step)| {
                (
                    step,
                    format!("/spec/workflow/steps/{index}/properties/policies"),
                )
            })
            .collect()
    } else if let Some(name) = workflow_ref {
        match standalone
            .workflows
            .get(&(namespace.clone(), name.to_owned()))
        {
            Some(steps) => steps
                .iter()
                .map(|step| (step, "/spec/workflow/ref".to_owned()))
                .collect(),
            None => {
                return Err(vec![Diagnostic::error(
                    "unknown-workflow",
                    format!("workflow `{name}` not found in namespace `{namespace}`"),
                    Some(positions.value_span("/spec/workflow/ref")),
                )]);
            }
        }
    } else {
        Vec::new()
    };
    if explicit_steps || workflow_ref.is_some() {
        let policy_names = |step: &WorkflowStep| -> Vec<String> {
            step.properties
                .as_ref()
                .and_then(|properties| properties.get("policies"))
                .and_then(Value::as_array)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        // Top-level deploy steps first (what `vela dry-run` prints), then the deploy
        // sub-steps of step groups, which the controller places per topology too.
        let mut nested = Vec::new();
        for (step, pointer) in steps {
            if step.step_type == "deploy" {
                deploy_steps.push((policy_names(step), pointer.clone(), false));
            }
            for sub_step in step
                .sub_steps
                .iter()
                .filter(|sub| sub.step_type == "deploy")
            {
                nested.push((policy_names(sub_step), pointer.clone(), true));
            }
        }
        deploy_steps.extend(nested);
    } else {
        let overrides: Vec<String> = spec
            .policies
            .iter()
            .filter(|policy| policy.policy_type == "override")
            .map(|policy| policy.name.clone())
            .collect();
        let topologies: Vec<String> = spec
            .policies
            .iter()
            .filter(|policy| policy.policy_type == "topology")
            .map(|policy| policy.name.clone())
            .collect();
        for topology in &topologies {
            let mut names = overrides.clone();
            names.push(topology.clone());
            deploy_steps.push((names, "/spec/policies".to_owned(), false));
        }
        if topologies.is_empty() && !overrides.is_empty() {
            deploy_steps.push((overrides, "/spec/policies".to_owned(), false));
        }
    }
    Ok(deploy_steps)
}

/// One placement per topology of each deploy step (one per step without topology), with the
/// step's override and replication policies; an unknown policy name is an error.
fn variants(
    deploy_steps: &[DeployStep],
    all_policies: &[&Policy],
    loaded: &LoadedApp,
) -> Result<Vec<Variant>, Vec<Diagnostic>> {
    let positions = &loaded.document.positions;
    let policy_index = |name: &str| all_policies.iter().position(|policy| policy.name == name);
    let is_type = |index: usize, policy_type: &str| all_policies[index].policy_type == policy_type;
    let mut errors = Vec::new();
    let mut variants: Vec<Variant> = Vec::new();
    for (names, pointer, nested) in deploy_steps {
        let mut overrides = Vec::new();
        let mut replications = Vec::new();
        let mut topologies = Vec::new();
        for name in names {
            match policy_index(name) {
                None => errors.push(Diagnostic::error(
                    "unknown-policy",
                    format!("policy `{name}` not found"),
                    Some(positions.value_span(pointer)),
                )),
                Some(index) if is_type(index, "override") => overrides.push(index),
                Some(index) if is_type(index, "replication") => replications.push(index),
                Some(index) if is_type(index, "topology") => topologies.push(index),
                Some(_) => {}
            }
        }
        let variant = |topology: Option<usize>| Variant {
            topology,
            overrides: overrides.clone(),
            replications: replications.clone(),
            nested: *nested,
        };
        if topologies.is_empty() {
            variants.push(variant(None));
        } else {
            variants.extend(
                topologies
                    .into_iter()
                    .map(|topology| variant(Some(topology))),
            );
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(variants)
}

/// Picks the placement to render. Every placement with the same overrides renders the same
/// objects (topology contents do not change objects offline), so only differing ones need a
/// choice: the placement on the local cluster (a topology listing `local`, or naming no
/// clusters), with a warning for each other placement that is not rendered.
fn choose_placement(
    loaded: &LoadedApp,
    all_policies: &[&Policy],
    variants: &[(Option<usize>, Vec<usize>)],
) -> Result<(Vec<usize>, Vec<Diagnostic>), Vec<Diagnostic>> {
    let positions = &loaded.document.positions;
    let mut distinct: Vec<&Vec<usize>> = variants.iter().map(|(_, overrides)| overrides).collect();
    distinct.dedup();
    if distinct.len() <= 1 {
        return Ok((
            distinct.first().map(|v| (*v).clone()).unwrap_or_default(),
            Vec::new(),
        ));
    }
    let is_local = |topology: Option<usize>| {
        let Some(topology) = topology else {
            return true;
        };
        let properties = all_policies[topology].properties.as_ref();
        let clusters = properties
            .and_then(|p| p.get("clusters"))
            .and_then(Value::as_array);
        let selects = properties.is_some_and(|p| {
            p.get("clusterLabelSelector").is_some() || p.get("clusterSelector").is_some()
        });
        match clusters {
            Some(clusters) => clusters
                .iter()
                .any(|cluster| cluster.as_str() == Some("local")),
            None => !selects,
        }
    };
    let mut local: Vec<&(Option<usize>, Vec<usize>)> = variants
        .iter()
        .filter(|(topology, _)| is_local(*topology))
        .collect();
    local.dedup_by(|a, b| a.1 == b.1);
    if local.len() != 1 {
        return Err(vec![Diagnostic::error(
            "unsupported-policy",
            "the placements of this app apply different override policies and none (or more \
             than one) of them is the local cluster; per-placement rendering is not supported yet",
            Some(positions.value_span("/spec/policies")),
        )]);
    }
    let chosen = local[0].1.clone();
    let warnings = variants
        .iter()
        .filter(|(topology, overrides)| !is_local(*topology) && *overrides != chosen)
        .filter_map(|(topology, _)| *topology)
        .map(|topology| {
            Diagnostic::warning(
                "remote-placement",
                format!(
                    "topology `{}` places this app on other clusters with different overrides; \
                     only the local cluster's placement is rendered",
                    all_policies[topology].name
                ),
                Some(positions.value_span(&format!("/spec/policies/{topology}"))),
            )
        })
        .collect();
    Ok((chosen, warnings))
}

/// KubeVela's label on every object of a replica (`oam.LabelReplicaKey`, set by the
/// controller when it dispatches a replicated component).
const REPLICA_KEY_LABEL: &str = "app.oam.dev/replicaKey";

/// Labels the objects of one replica with its key.
pub(crate) fn label_replica(objects: &mut [crate::RenderedObject], key: &str) {
    for object in objects {
        let Some(metadata) = object
            .object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(REPLICA_KEY_LABEL.to_owned(), Value::String(key.to_owned()));
        }
    }
}

/// Replicas whose definition does not put `context.replicaKey` into a name render the same
/// object for every key; applied, the last key would silently win. An error per such object.
///
/// Deviation: KubeVela applies such replicas one over the other; Driftless refuses the app.
pub(crate) fn replica_collisions(
    loaded: &LoadedApp,
    objects: &[crate::RenderedObject],
) -> Vec<Diagnostic> {
    let text = |object: &Value, pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut seen: std::collections::BTreeMap<(String, String, String, String), &str> =
        std::collections::BTreeMap::new();
    let mut diagnostics = Vec::new();
    for object in objects {
        let namespace = Some(text(&object.object, "/metadata/namespace"))
            .filter(|namespace| !namespace.is_empty())
            .unwrap_or_else(|| loaded.app_ref.namespace.clone());
        let key = (
            text(&object.object, "/apiVersion"),
            text(&object.object, "/kind"),
            namespace,
            text(&object.object, "/metadata/name"),
        );
        let replica = object
            .object
            .pointer(&format!(
                "/metadata/labels/{}",
                REPLICA_KEY_LABEL.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(first) = seen.get(&key) {
            diagnostics.push(
                Diagnostic::error(
                    "invalid-properties",
                    format!(
                        "replicas `{first}` and `{replica}` of component `{}` render the same {} {}/{}; \
                         its definition must use `context.replicaKey` in the names",
                        object.component, key.1, key.2, key.3
                    ),
                    Some(loaded.document.positions.value_span("/spec/policies")),
                )
                .for_component(&object.component),
            );
        } else {
            seen.insert(key, replica);
        }
    }
    diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn effective(components: Value) -> Vec<EffectiveComponent<'static>> {
        serde_json::from_value::<Vec<Component>>(components)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(index, component)| EffectiveComponent {
                component: Cow::Owned(component),
                pointer: format!("/spec/components/{index}"),
            })
            .collect()
    }

    fn names_and_properties(components: &[EffectiveComponent]) -> Value {
        Value::Array(
            components
                .iter()
                .map(|e| {
                    json!({
                        "name": e.component.name,
                        "type": e.component.component_type,
                        "properties": e.component.properties,
                        "traits": e.component.traits.iter().map(|t| json!([t.trait_type, t.properties])).collect::<Vec<_>>(),
                    })
                })
                .collect(),
        )
    }

    #[test]
    fn properties_merge_maps_and_replace_lists() {
        let components = effective(json!([
            {"name": "web", "type": "webservice", "properties": {"image": "a", "ports": [{"port": 80}], "env": {"A": "1"}},
             "traits": [{"type": "scaler", "properties": {"replicas": 1}}, {"type": "labels", "properties": {"a": "b"}}]}
        ]));
        let result = apply_override(
            components,
            &json!({"components": [{"name": "web", "properties": {"ports": [], "env": {"B": "2"}, "cpu": "1"},
                "traits": [{"type": "scaler", "properties": {"replicas": 3}}, {"type": "labels", "disable": true}, {"type": "expose", "properties": {"port": [80]}}]}]}),
            "/p",
        )
        .unwrap();
        assert_eq!(
            names_and_properties(&result),
            json!([{"name": "web", "type": "webservice",
                "properties": {"image": "a", "ports": [], "env": {"A": "1", "B": "2"}, "cpu": "1"},
                "traits": [["scaler", {"replicas": 3}], ["expose", {"port": [80]}]]}])
        );
    }

    #[test]
    fn patterns_match_unanchored_and_unmatched_names_add_components() {
        let components = effective(json!([
            {"name": "my-web-2", "type": "webservice"},
            {"name": "db", "type": "worker"}
        ]));
        let result = apply_override(
            components,
            &json!({"components": [
                {"name": "web", "properties": {"image": "x"}},
                {"name": "cache", "type": "worker", "properties": {"image": "redis"}},
                {"type": "worker", "properties": {"cpu": "1"}}
            ]}),
            "/p",
        )
        .unwrap();
        assert_eq!(
            names_and_properties(&result),
            json!([
                {"name": "my-web-2", "type": "webservice", "properties": {"image": "x"}, "traits": []},
                {"name": "db", "type": "worker", "properties": {"cpu": "1"}, "traits": []},
                {"name": "cache", "type": "worker", "properties": {"image": "redis", "cpu": "1"}, "traits": []}
            ])
        );
        assert_eq!(result[2].pointer, "/p/components/1");
    }

    #[test]
    fn selector_keeps_only_listed_components() {
        let components =
            effective(json!([{"name": "a", "type": "worker"}, {"name": "b", "type": "worker"}]));
        let result = apply_override(components, &json!({"selector": ["b"]}), "/p").unwrap();
        assert_eq!(result.len(), 1);
        assert_eq!(result[0].component.name, "b");
    }

    #[test]
    fn a_different_type_replaces_the_component() {
        let components =
            effective(json!([{"name": "web", "type": "webservice", "properties": {"image": "a"}}]));
        let result = apply_override(
            components,
            &json!({"components": [{"name": "web", "type": "worker", "properties": {"image": "b"}}]}),
            "/p",
        )
        .unwrap();
        assert_eq!(
            names_and_properties(&result),
            json!([{"name": "web", "type": "worker", "properties": {"image": "b"}, "traits": []}])
        );
    }
}
