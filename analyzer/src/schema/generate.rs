//! The generator of `analyzer/schemas/k8s-v1.34.json`: reduces upstream Kubernetes'
//! `api/openapi-spec/swagger.json` (shipped in the `k8s.io/kubernetes` Go module) to what
//! validation needs.
//!
//! Kept per schema node: `type`, `format`, `properties`, `required`, `items`,
//! `additionalProperties`, `enum`, `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-int-or-string`
//! and `$ref` (as the bare definition name). Dropped: descriptions, defaults, list and patch
//! strategies, unions. The GVK table maps `apiVersion` and `kind` to the definition that
//! carries `x-kubernetes-group-version-kind`.
//!
//! The output is deterministic (sorted keys, one definition per line), so regenerating it from
//! the same module gives the same bytes; `analyzer/tests/check_schema.rs` asserts that when
//! the module is in the Go module cache, and `hack/gen-k8s-schema.sh` rewrites the file.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Why the generator could not read its input.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("swagger.json is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("swagger.json has no `definitions` object")]
    NoDefinitions,
}

/// The prefix of references inside swagger.json.
const REF_PREFIX: &str = "#/definitions/";

/// Reduces `swagger` (the text of swagger.json) to the compact artefact. `source` names the
/// upstream module and file, for the reader of the artefact.
pub fn generate_k8s_schema(swagger: &str, source: &str) -> Result<String, GenerateError> {
    let spec: Value = serde_json::from_str(swagger)?;
    let definitions = spec
        .get("definitions")
        .and_then(Value::as_object)
        .ok_or(GenerateError::NoDefinitions)?;
    let mut kinds: BTreeMap<String, String> = BTreeMap::new();
    let mut reduced: BTreeMap<&str, Value> = BTreeMap::new();
    for (name, schema) in definitions {
        for gvk in schema
            .get("x-kubernetes-group-version-kind")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let field = |key: &str| gvk.get(key).and_then(Value::as_str).unwrap_or_default();
            let api_version = match field("group") {
                "" => field("version").to_owned(),
                group => format!("{group}/{}", field("version")),
            };
            // Sorted definition names make the choice deterministic when two definitions
            // claim one GVK (they do not in 1.34).
            kinds
                .entry(format!("{api_version} {}", field("kind")))
                .or_insert_with(|| name.clone());
        }
        reduced.insert(name, reduce(schema));
    }
    let mut out = String::from("{\n");
    out.push_str(&format!(
        "\"source\": {},\n",
        Value::String(source.to_owned())
    ));
    out.push_str("\"kinds\": {\n");
    push_entries(
        &mut out,
        kinds
            .iter()
            .map(|(k, v)| (k.as_str(), Value::String(v.clone()))),
    );
    out.push_str("},\n\"definitions\": {\n");
    push_entries(&mut out, reduced.into_iter());
    out.push_str("}\n}\n");
    Ok(out)
}

fn push_entries<'a>(out: &mut String, entries: impl Iterator<Item = (&'a str, Value)>) {
    let mut first = true;
    for (key, value) in entries {
        if !first {
            out.push_str(",\n");
        }
        first = false;
        out.push_str(&Value::String(key.to_owned()).to_string());
        out.push_str(": ");
        out.push_str(&value.to_string());
    }
    out.push('\n');
}

/// One schema node without documentation, keys sorted.
fn reduce(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return Value::Object(Map::new());
    };
    let mut out: BTreeMap<&str, Value> = BTreeMap::new();
    for (key, value) in object {
        let kept = match key.as_str() {
            "type"
            | "format"
            | "required"
            | "enum"
            | "x-kubernetes-preserve-unknown-fields"
            | "x-kubernetes-int-or-string" => value.clone(),
            "$ref" => match value.as_str() {
                Some(reference) => {
                    Value::String(reference.trim_start_matches(REF_PREFIX).to_owned())
                }
                None => continue,
            },
            "items" => reduce(value),
            "additionalProperties" => match value {
                Value::Bool(_) => value.clone(),
                _ => reduce(value),
            },
            "properties" => {
                let Some(properties) = value.as_object() else {
                    continue;
                };
                let sorted: BTreeMap<&String, Value> = properties
                    .iter()
                    .map(|(name, property)| (name, reduce(property)))
                    .collect();
                Value::Object(
                    sorted
                        .into_iter()
                        .map(|(name, property)| (name.clone(), property))
                        .collect(),
                )
            }
            _ => continue,
        };
        out.insert(key, kept);
    }
    Value::Object(
        out.into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}
