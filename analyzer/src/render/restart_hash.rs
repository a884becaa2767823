//! The pod-restart hash of pod-disruptive traits (KubeVela `pkg/appfile/appfile.go`,
//! `propagatePodDisruptiveHash`): a trait whose definition sets `podDisruptive: true` and that
//! renders separate objects (`outputs`) stamps a hash of each such object onto the workload's
//! pod template, `spec.template.metadata.annotations["app.oam.dev/trait-restart-hash-<type>"]`,
//! so the pods roll when the trait's objects change.
//!
//! The hash is the first 16 hex digits of SHA-256 over Go's `json.Marshal` of the object (keys
//! sorted, compact, `<`, `>`, `&`, U+2028 and U+2029 escaped) after dropping the fields the
//! controller injects (`metadata.resourceVersion`, `uid`, `creationTimestamp`, `generation`,
//! `managedFields`, `ownerReferences`, the app-revision labels) and `status`.

use serde_json::Value;
use sha2::Digest;

use super::labels::object_entry;

/// `app.oam.dev/trait-restart-hash-`: KubeVela's annotation prefix.
const PREFIX: &str = "app.oam.dev/trait-restart-hash-";

/// Annotation keys longer than this (a Kubernetes name part's limit) use a hash of the type.
const MAX_KEY_LENGTH: usize = 63;

/// Metadata fields left out of the hash (KubeVela's `oamInjectedMetadataFields`).
const INJECTED_METADATA: &[&str] = &[
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
];

/// Labels left out of the hash.
const INJECTED_LABELS: &[&str] = &["app.oam.dev/appRevision", "app.oam.dev/app-revision-hash"];

/// Stamps the hash of `trait_object` (an output of the pod-disruptive trait `trait_type`) on
/// `workload`'s pod template; a workload without `spec.template` is left alone.
pub(crate) fn stamp_restart_hash(workload: &mut Value, trait_type: &str, trait_object: &Value) {
    let Some(template) = workload
        .pointer_mut("/spec/template")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let hash = content_hash(trait_object);
    let metadata = object_entry(template, "metadata");
    let annotations = object_entry(metadata, "annotations");
    annotations.insert(annotation_key(trait_type), Value::String(hash));
}

fn annotation_key(trait_type: &str) -> String {
    let key = format!("{PREFIX}{trait_type}");
    if key.len() <= MAX_KEY_LENGTH {
        return key;
    }
    let digest = hex::encode(sha2::Sha256::digest(trait_type.as_bytes()));
    format!("{PREFIX}{}", &digest[..16])
}

fn content_hash(object: &Value) -> String {
    let mut copy = object.clone();
    if let Some(root) = copy.as_object_mut() {
        root.remove("status");
        if let Some(metadata) = root.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in INJECTED_METADATA {
                metadata.remove(*field);
            }
            if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
                for label in INJECTED_LABELS {
                    labels.remove(*label);
                }
            }
        }
    }
    let mut text = String::new();
    go_json(&copy, &mut text);
    let digest = hex::encode(sha2::Sha256::digest(text.as_bytes()));
    digest[..16].to_owned()
}

/// Go's `encoding/json` text of a decoded object: map keys sorted, no spaces, HTML-safe
/// escapes. Numbers print as serde_json does, which equals Go for integers and for the floats
/// Kubernetes objects carry.
fn go_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                go_string(key, out);
                out.push(':');
                go_json(&object[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                go_json(item, out);
            }
            out.push(']');
        }
        Value::String(text) => go_string(text, out),
        other => out.push_str(&other.to_string()),
    }
}

fn go_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_json_sorts_keys_and_escapes_html() {
        let mut text = String::new();
        go_json(
            &json!({"b": [1, "x<y&z"], "a": {"d": true, "c": null}}),
            &mut text,
        );
        assert_eq!(
            text,
            r#"{"a":{"c":null,"d":true},"b":[1,"x\u003cy\u0026z"]}"#
        );
    }

    #[test]
    fn the_hash_ignores_injected_fields_and_lands_on_the_pod_template() {
        let trait_object = json!({"kind": "ConfigMap", "metadata": {"name": "c", "uid": "1",
            "labels": {"app.oam.dev/appRevision": "r1", "a": "b"}}, "status": {"x": 1}});
        let bare = json!({"kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}}});
        assert_eq!(content_hash(&trait_object), content_hash(&bare));
        let mut workload = json!({"spec": {"template": {"spec": {}}}});
        stamp_restart_hash(&mut workload, "storage", &trait_object);
        let stamped = &workload["spec"]["template"]["metadata"]["annotations"]["app.oam.dev/trait-restart-hash-storage"];
        assert_eq!(stamped, &Value::String(content_hash(&bare)));
        let mut service = json!({"spec": {"ports": []}});
        stamp_restart_hash(&mut service, "storage", &trait_object);
        assert_eq!(service, json!({"spec": {"ports": []}}));
    }

    #[test]
    fn long_trait_types_use_a_hash_in_the_key() {
        let long = "a".repeat(40);
        let key = annotation_key(&long);
        assert_eq!(key.len(), PREFIX.len() + 16);
        assert_eq!(
            annotation_key("storage"),
            "app.oam.dev/trait-restart-hash-storage"
        );
    }
}
