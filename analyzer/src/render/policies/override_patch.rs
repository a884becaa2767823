//! One `override` policy applied to the effective components: which components it selects,
//! and how a component patch merges into them (KubeVela's `pkg/policy/envbinding/patch.go`).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::EffectiveComponent;
use crate::model::{Component, Trait};

/// One override policy (`pkg/policy/envbinding/patch.go` `PatchComponents`).
pub(super) fn apply_override<'a>(
    mut components: Vec<EffectiveComponent<'a>>,
    properties: &Value,
    pointer: &str,
) -> Result<Vec<EffectiveComponent<'a>>, String> {
    let patches = properties
        .get("components")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (patch_index, patch_json) in patches.iter().enumerate() {
        let patch_pointer = format!("{pointer}/components/{patch_index}");
        let patch = ComponentPatch::from_json(patch_json)?;
        let pattern = match &patch.name {
            Some(name) if !name.is_empty() => Some(
                regex::Regex::new(&name.replace('*', ".*"))
                    .map_err(|error| format!("invalid component name pattern `{name}`: {error}"))?,
            ),
            _ => None,
        };
        let mut matched = false;
        for effective in &mut components {
            let component = &effective.component;
            let is_match = match &pattern {
                Some(pattern) => pattern.is_match(&component.name),
                None => patch
                    .component_type
                    .as_ref()
                    .is_none_or(|patch_type| *patch_type == component.component_type),
            };
            if !is_match {
                continue;
            }
            matched = true;
            match &patch.component_type {
                Some(patch_type) if *patch_type != component.component_type => {
                    // A different type replaces the component (upstream quirk: the name becomes
                    // the pattern).
                    *effective = EffectiveComponent {
                        component: Cow::Owned(patch.as_component()),
                        pointer: patch_pointer.clone(),
                    };
                }
                _ => merge_component(effective.component.to_mut(), &patch),
            }
        }
        if !matched
            && let Some(name) = &patch.name
            && name.chars().any(|c| c.is_ascii_lowercase())
        {
            components.push(EffectiveComponent {
                component: Cow::Owned(patch.as_component()),
                pointer: patch_pointer,
            });
        }
    }
    if let Some(selector) = properties.get("selector").and_then(Value::as_array) {
        let names: Vec<&str> = selector.iter().filter_map(Value::as_str).collect();
        components.retain(|effective| names.contains(&effective.component.name.as_str()));
    }
    Ok(components)
}

/// One entry of an override policy's `components`.
struct ComponentPatch {
    name: Option<String>,
    component_type: Option<String>,
    properties: Option<Value>,
    traits: Vec<(String, Option<Value>, bool)>,
    external_revision: Option<String>,
}

impl ComponentPatch {
    fn from_json(value: &Value) -> Result<ComponentPatch, String> {
        let string = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        let mut traits = Vec::new();
        for entry in value
            .get("traits")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let trait_type = entry
                .get("type")
                .and_then(Value::as_str)
                .ok_or("a trait patch has no `type`")?;
            let disable = entry
                .get("disable")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            traits.push((
                trait_type.to_owned(),
                entry.get("properties").cloned(),
                disable,
            ));
        }
        Ok(ComponentPatch {
            name: string("name"),
            component_type: string("type").filter(|t| !t.is_empty()),
            properties: value.get("properties").cloned(),
            traits,
            external_revision: string("externalRevision"),
        })
    }

    fn as_component(&self) -> Component {
        Component {
            name: self.name.clone().unwrap_or_default(),
            component_type: self.component_type.clone().unwrap_or_default(),
            properties: self.properties.clone(),
            traits: self
                .traits
                .iter()
                .filter(|(_, _, disable)| !disable)
                .map(|(trait_type, properties, _)| Trait {
                    trait_type: trait_type.clone(),
                    properties: properties.clone(),
                })
                .collect(),
            external_revision: self.external_revision.clone(),
            ..Component::default()
        }
    }
}

fn merge_component(component: &mut Component, patch: &ComponentPatch) {
    if let Some(properties) = &patch.properties {
        let mut base = component
            .properties
            .clone()
            .unwrap_or_else(|| Value::Object(Map::new()));
        merge_properties(&mut base, properties);
        component.properties = Some(base);
    }
    if let Some(revision) = &patch.external_revision {
        component.external_revision = Some(revision.clone());
    }
    for (trait_type, properties, disable) in &patch.traits {
        match component
            .traits
            .iter()
            .position(|t| t.trait_type == *trait_type)
        {
            Some(index) if *disable => {
                component.traits.remove(index);
            }
            Some(index) => {
                if let Some(properties) = properties {
                    let existing = &mut component.traits[index];
                    let mut base = existing
                        .properties
                        .clone()
                        .unwrap_or_else(|| Value::Object(Map::new()));
                    merge_properties(&mut base, properties);
                    existing.properties = Some(base);
                }
            }
            None if !disable => component.traits.push(Trait {
                trait_type: trait_type.clone(),
                properties: properties.clone(),
            }),
            None => {}
        }
    }
}

/// mergo `WithOverride` on JSON maps: maps merge recursively, everything else (lists
/// included, zero values and `null` too) replaces; a map never replaces a non-empty scalar.
fn merge_properties(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, patch_value) in patch {
                match base.get_mut(key) {
                    Some(base_value) => merge_properties(base_value, patch_value),
                    None => {
                        base.insert(key.clone(), patch_value.clone());
                    }
                }
            }
        }
        (base, Value::Object(_)) if !is_empty_scalar(base) => {}
        (base, patch) => *base = patch.clone(),
    }
}

fn is_empty_scalar(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(_) | Value::Object(_) => false,
    }
}
