//! What never leaves the agent: a Secret's values and the credentials in a URL.
//!
//! Secret values are masked where the plan's text is made (`diff`), so every format built from
//! the plan (human, JSON, markdown, PR comments, plan pages) carries the mask and none can show a
//! value. As Argo CD's `HideSecretData` does, each value becomes a run of `+`: the key names stay
//! visible, and two sides of a diff get the same mask only when their values hash the same, so a
//! changed value still shows as changed (`++++++++` against `+++++++++`), an added key as added
//! and a removed key as removed.
//!
//! URLs with credentials (`https://TOKEN@host/repo.git`) keep their scheme, host and path and
//! lose the user information before they reach an error or a log.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::Digest;

/// What a Secret value is shown as.
pub const MASK: &str = "++++++++";

/// The annotation `kubectl apply` keeps a whole copy of the object in, values included.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// True for a core `v1` Secret, the one kind whose values are masked.
pub fn is_secret(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && object.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// The object as it may be shown: a Secret's `data` and `stringData` values masked. Any other
/// object is returned unchanged.
pub fn masked(object: &Value) -> Value {
    let mut object = object.clone();
    if is_secret(&object) {
        mask_values(&mut object, &|_, _| MASK.to_owned());
    }
    object
}

/// Both sides of a diff as they may be shown. Values are compared by their hash: a key whose
/// values hash the same on both sides gets the same mask, a changed one a longer mask on the
/// desired side. A pair that is not two Secrets is masked side by side (a Secret replaced by
/// another kind shows no value either).
pub fn masked_pair(live: &Value, desired: &Value) -> (Value, Value) {
    if !(is_secret(live) && is_secret(desired)) {
        return (masked(live), masked(desired));
    }
    let live_hashes = value_hashes(live);
    let desired_hashes = value_hashes(desired);
    let mut live = live.clone();
    mask_values(&mut live, &|_, _| MASK.to_owned());
    let mut desired = desired.clone();
    mask_values(&mut desired, &|field, key| {
        let entry = (field.to_owned(), key.to_owned());
        match (live_hashes.get(&entry), desired_hashes.get(&entry)) {
            (Some(live_hash), Some(desired_hash)) if live_hash != desired_hash => {
                format!("{MASK}+")
            }
            _ => MASK.to_owned(),
        }
    });
    (live, desired)
}

/// `text` with the user information of every URL in it replaced by `***`:
/// `https://TOKEN@host/x` becomes `https://***@host/x`.
pub fn url_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(scheme_end) = rest.find("://") {
        let authority_start = scheme_end + 3;
        out.push_str(&rest[..authority_start]);
        let after = &rest[authority_start..];
        let authority_len = after
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(after.len());
        let authority = &after[..authority_len];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***");
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_len..];
    }
    out.push_str(rest);
    out
}

/// The object with a Secret's `data` and `stringData` values (and the last-applied copy)
/// replaced by their SHA-256: what a digest may cover without any value being recoverable
/// from the digest's input. Any other object is returned unchanged.
pub fn hashed_secret_form(object: &Value) -> Value {
    let mut object = object.clone();
    if is_secret(&object) {
        let hashes = value_hashes(&object);
        mask_values(&mut object, &|field, key| {
            hashes
                .get(&(field.to_owned(), key.to_owned()))
                .map_or_else(|| MASK.to_owned(), hex::encode)
        });
    }
    object
}

/// SHA-256 of a value's JSON text: what two sides' values are compared by.
fn value_hash(value: &Value) -> [u8; 32] {
    sha2::Sha256::digest(value.to_string().as_bytes()).into()
}

/// The hash of every value under `data` and `stringData`, by `(field, key)`.
fn value_hashes(object: &Value) -> BTreeMap<(String, String), [u8; 32]> {
    let mut hashes = BTreeMap::new();
    for field in ["data", "stringData"] {
        if let Some(map) = object.get(field).and_then(Value::as_object) {
            for (key, value) in map {
                hashes.insert((field.to_owned(), key.clone()), value_hash(value));
            }
        }
    }
    hashes
}

/// Replaces every value under `data` and `stringData` with `mask(field, key)`, and the
/// last-applied annotation (a full copy of the values) with the mask.
fn mask_values(object: &mut Value, mask: &dyn Fn(&str, &str) -> String) {
    for field in ["data", "stringData"] {
        match object.get_mut(field) {
            Some(Value::Object(map)) => {
                for (key, value) in map.iter_mut() {
                    *value = Value::String(mask(field, key));
                }
            }
            // Not a map: nothing the apiserver would accept, and nothing to show either.
            Some(other) if !other.is_null() => *other = Value::String(MASK.to_owned()),
            _ => {}
        }
    }
    if let Some(annotation) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .and_then(|annotations| annotations.get_mut(LAST_APPLIED))
    {
        *annotation = Value::String(MASK.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "data": data})
    }

    #[test]
    fn a_lone_secret_shows_its_keys_and_no_value() {
        let shown = masked(&json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "annotations": {LAST_APPLIED: "{\"data\":{\"password\":\"aHVudGVyMg==\"}}"}},
            "data": {"password": "aHVudGVyMg=="},
            "stringData": {"user": "admin"}
        }));
        let text = shown.to_string();
        assert!(!text.contains("aHVudGVyMg"), "{text}");
        assert!(!text.contains("admin"), "{text}");
        assert_eq!(shown["data"]["password"], MASK);
        assert_eq!(shown["stringData"]["user"], MASK);
    }

    #[test]
    fn other_kinds_are_left_alone() {
        let config_map =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"color": "blue"}});
        assert_eq!(masked(&config_map), config_map);
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Secret", "data": {"a": "b"}});
        assert_eq!(masked(&custom), custom);
    }

    #[test]
    fn a_pair_marks_changed_added_and_removed_keys_by_hash() {
        let live = secret(json!({"same": "c2FtZQ==", "changed": "b2xk", "removed": "Z29uZQ=="}));
        let desired = secret(json!({"same": "c2FtZQ==", "changed": "bmV3", "added": "bmV3"}));
        let (live, desired) = masked_pair(&live, &desired);
        assert_eq!(
            live["data"],
            json!({"same": MASK, "changed": MASK, "removed": MASK})
        );
        assert_eq!(
            desired["data"],
            json!({"same": MASK, "changed": "+++++++++", "added": MASK})
        );
    }

    #[test]
    fn a_secret_replaced_by_another_kind_shows_no_value() {
        let (live, desired) = masked_pair(
            &secret(json!({"token": "c2VjcmV0"})),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"token": "plain"}}),
        );
        assert_eq!(live["data"]["token"], MASK);
        assert_eq!(desired["data"]["token"], "plain");
    }

    #[test]
    fn url_credentials_are_removed_wherever_a_url_appears() {
        assert_eq!(
            url_credentials("fetching https://ghp_abc123@github.com/org/repo.git: 401"),
            "fetching https://***@github.com/org/repo.git: 401"
        );
        assert_eq!(
            url_credentials("http://user:pass@host:3000/x and ssh://git@host/y"),
            "http://***@host:3000/x and ssh://***@host/y"
        );
        assert_eq!(
            url_credentials("https://host/repo.git"),
            "https://host/repo.git"
        );
        assert_eq!(url_credentials("no url here"), "no url here");
        assert_eq!(url_credentials("'https://tok@h'"), "'https://***@h'");
    }
}
