//! Ownership marks and who may write an object.
//!
//! Every object Driftless applies carries KubeVela's ownership labels (`app.oam.dev/name`,
//! `app.oam.dev/namespace`) and the annotation `driftless.dev/owner: <namespace>/<app>`. The marks
//! travel inside the applied body, so an object never exists without them once we created it —
//! that is what lets a rerun re-adopt objects whose tracker write was lost, and what a prune checks
//! before it deletes anything (see `tracker`).
//!
//! The decision here is pure: given the live object (if any) and the app's resource policies, may
//! this app write it? It mirrors KubeVela's `resourcekeeper` admission: an object owned by another
//! app is a conflict unless shared, an unowned existing object is a conflict unless taken over,
//! read-only objects are never written.

use analyzer::AppRef;
use serde_json::Value;

use crate::policy::{ObjectFacts, ResourcePolicies};

/// KubeVela's label naming the owning app.
pub const LABEL_APP_NAME: &str = "app.oam.dev/name";
/// KubeVela's label naming the owning app's namespace.
pub const LABEL_APP_NAMESPACE: &str = "app.oam.dev/namespace";
/// Our annotation naming the owning app as `<namespace>/<name>`.
pub const ANNOTATION_OWNER: &str = "driftless.dev/owner";
/// KubeVela's annotation listing the apps sharing an object (`ns/name,ns/name`).
pub const ANNOTATION_SHARED_BY: &str = "app.oam.dev/shared-by";

/// Who owns a live object, by its marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// Our annotation names this app.
    Driftless(AppRef),
    /// Only KubeVela's labels name an app (applied by KubeVela, or our annotation was removed).
    Labels(AppRef),
    /// No marks at all.
    Nobody,
}

/// What this app may do with one rendered object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Absent: create it.
    Create,
    /// Ours (or adopted by `take-over`, or marked by labels for this very app): apply it.
    Write,
    /// Read-only, or shared and owned by another app: leave it alone. The reason says which.
    Skip(String),
    /// Not ours to write. The reason names the owner.
    Conflict(String),
    /// `read-only` object that does not exist.
    Missing(String),
}

/// Adds our ownership marks to an object about to be applied.
pub fn mark(object: &mut Value, app: &AppRef) {
    let Some(metadata) = object
        .as_object_mut()
        .map(|object| object.entry("metadata").or_insert_with(empty_map))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let mut set = |field: &str, key: &str, value: String| {
        if let Some(map) = metadata
            .entry(field)
            .or_insert_with(empty_map)
            .as_object_mut()
        {
            map.insert(key.to_owned(), Value::String(value));
        }
    };
    set("labels", LABEL_APP_NAME, app.name.clone());
    set("labels", LABEL_APP_NAMESPACE, app.namespace.clone());
    set("annotations", ANNOTATION_OWNER, app.to_string());
}

/// The owner of a live object according to its marks.
pub fn owner_of(live: &Value) -> Owner {
    let metadata = live.get("metadata");
    let string = |field: &str, key: &str| {
        metadata
            .and_then(|m| m.get(field))
            .and_then(|map| map.get(key))
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
    };
    if let Some((namespace, name)) =
        string("annotations", ANNOTATION_OWNER).and_then(|owner| owner.split_once('/'))
    {
        return Owner::Driftless(AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
    }
    match (
        string("labels", LABEL_APP_NAME),
        string("labels", LABEL_APP_NAMESPACE),
    ) {
        (Some(name), Some(namespace)) => Owner::Labels(AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }),
        _ => Owner::Nobody,
    }
}

/// True when the live object still carries our annotation naming `app`: the only objects a
/// prune may delete (together with being tracked).
pub fn carries_marks_of(live: &Value, app: &AppRef) -> bool {
    owner_of(live) == Owner::Driftless(app.clone())
}

/// Decides what `app` may do with one rendered object, given its live state.
pub fn admit(
    app: &AppRef,
    live: Option<&Value>,
    facts: &ObjectFacts<'_>,
    policies: &ResourcePolicies,
) -> Admission {
    if policies.is_read_only(facts) {
        return match live {
            Some(_) => Admission::Skip("read-only (read-only policy)".to_owned()),
            None => {
                Admission::Missing("read-only object does not exist (read-only policy)".to_owned())
            }
        };
    }
    let Some(live) = live else {
        return Admission::Create;
    };
    match owner_of(live) {
        Owner::Driftless(owner) | Owner::Labels(owner) if &owner == app => Admission::Write,
        Owner::Driftless(owner) | Owner::Labels(owner) => {
            if policies.is_shared(facts) {
                Admission::Skip(format!("shared resource owned by app {owner}"))
            } else {
                Admission::Conflict(format!("owned by app {owner}"))
            }
        }
        Owner::Nobody => {
            if policies.may_take_over(facts) {
                Admission::Write
            } else {
                Admission::Conflict(
                    "exists and is not managed by any app (add a take-over policy to adopt it)"
                        .to_owned(),
                )
            }
        }
    }
}

fn empty_map() -> Value {
    Value::Object(serde_json::Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(name: &str) -> AppRef {
        AppRef {
            namespace: "team".to_owned(),
            name: name.to_owned(),
        }
    }

    fn facts() -> ObjectFacts<'static> {
        ObjectFacts {
            component: "web",
            component_type: Some("webservice"),
            trait_type: None,
            kind: "Deployment",
            name: "web",
        }
    }

    fn policies(json: Value) -> ResourcePolicies {
        let policies: Vec<analyzer::model::Policy> = serde_json::from_value(json).unwrap();
        let (parsed, diagnostics) = ResourcePolicies::from_policies(&app("shop"), &policies);
        assert!(diagnostics.is_empty());
        parsed
    }

    #[test]
    fn mark_sets_labels_and_annotation_and_owner_of_reads_them() {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"keep": "1"}}});
        mark(&mut object, &app("shop"));
        assert_eq!(object["metadata"]["labels"]["keep"], "1");
        assert_eq!(object["metadata"]["labels"][LABEL_APP_NAME], "shop");
        assert_eq!(object["metadata"]["labels"][LABEL_APP_NAMESPACE], "team");
        assert_eq!(
            object["metadata"]["annotations"][ANNOTATION_OWNER],
            "team/shop"
        );
        assert_eq!(owner_of(&object), Owner::Driftless(app("shop")));
        assert!(carries_marks_of(&object, &app("shop")));
        assert!(!carries_marks_of(&object, &app("other")));
    }

    #[test]
    fn labels_alone_name_an_owner_but_do_not_allow_a_prune() {
        let live =
            json!({"metadata": {"labels": {LABEL_APP_NAME: "shop", LABEL_APP_NAMESPACE: "team"}}});
        assert_eq!(owner_of(&live), Owner::Labels(app("shop")));
        assert!(!carries_marks_of(&live, &app("shop")));
        assert_eq!(owner_of(&json!({"metadata": {}})), Owner::Nobody);
    }

    #[test]
    fn admission_follows_owner_and_policies() {
        let none = ResourcePolicies::default();
        let ours = json!({"metadata": {"annotations": {ANNOTATION_OWNER: "team/shop"}}});
        let theirs = json!({"metadata": {"annotations": {ANNOTATION_OWNER: "team/blog"}}});
        let unowned = json!({"metadata": {"name": "web"}});
        let shop = app("shop");
        assert_eq!(admit(&shop, None, &facts(), &none), Admission::Create);
        assert_eq!(admit(&shop, Some(&ours), &facts(), &none), Admission::Write);
        assert_eq!(
            admit(&shop, Some(&theirs), &facts(), &none),
            Admission::Conflict("owned by app team/blog".to_owned())
        );
        assert!(matches!(
            admit(&shop, Some(&unowned), &facts(), &none),
            Admission::Conflict(reason) if reason.contains("take-over")
        ));

        let take_over = policies(
            json!([{"name": "t", "type": "take-over", "properties": {"rules": [{"selector": {"componentNames": ["web"]}}]}}]),
        );
        assert_eq!(
            admit(&shop, Some(&unowned), &facts(), &take_over),
            Admission::Write
        );
        assert!(matches!(
            admit(&shop, Some(&theirs), &facts(), &take_over),
            Admission::Conflict(_)
        ));

        let shared = policies(
            json!([{"name": "s", "type": "shared-resource", "properties": {"rules": [{"selector": {"resourceTypes": ["Deployment"]}}]}}]),
        );
        assert_eq!(
            admit(&shop, Some(&theirs), &facts(), &shared),
            Admission::Skip("shared resource owned by app team/blog".to_owned())
        );

        let read_only = policies(
            json!([{"name": "r", "type": "read-only", "properties": {"rules": [{"selector": {"resourceNames": ["web"]}}]}}]),
        );
        assert!(matches!(
            admit(&shop, Some(&theirs), &facts(), &read_only),
            Admission::Skip(_)
        ));
        assert!(matches!(
            admit(&shop, None, &facts(), &read_only),
            Admission::Missing(_)
        ));
    }
}
