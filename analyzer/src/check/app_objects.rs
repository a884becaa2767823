//! What the cross-object rules (`dangling-service`, `dangling-ingress`, `dangling-hpa`,
//! `missing-service-account`) look up among an app's rendered objects: the objects by kind and
//! name, and the labels of every pod template.

use serde_json::{Map, Value};

use crate::RenderedObject;

/// An app's objects, indexed for the cross-object rules.
pub(crate) struct AppObjects<'a> {
    /// `(kind, namespace, name)` of every object.
    names: Vec<(&'a str, &'a str, &'a str)>,
    /// `(namespace, labels)` of every pod template.
    pod_labels: Vec<(&'a str, &'a Map<String, Value>)>,
}

impl<'a> AppObjects<'a> {
    pub(crate) fn new(objects: &'a [RenderedObject], app_namespace: &'a str) -> AppObjects<'a> {
        let mut names = Vec::new();
        let mut pod_labels = Vec::new();
        for object in objects {
            let value = &object.object;
            let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
            let (Some(kind), Some(name)) = (text("/kind"), text("/metadata/name")) else {
                continue;
            };
            let namespace = text("/metadata/namespace").unwrap_or(app_namespace);
            names.push((kind, namespace, name));
            let api_version = text("/apiVersion").unwrap_or_default();
            if let Some(labels) = super::pod_spec::template_labels(value, api_version, kind) {
                pod_labels.push((namespace, labels));
            }
        }
        AppObjects { names, pod_labels }
    }

    /// True when the app has an object of `kind` (any when `None`) named `name` in `namespace`.
    pub(crate) fn has(&self, kind: Option<&str>, namespace: &str, name: &str) -> bool {
        self.names
            .iter()
            .any(|(k, ns, n)| kind.is_none_or(|kind| kind == *k) && *ns == namespace && *n == name)
    }

    /// True when some pod template in `namespace` has every label of `selector`.
    pub(crate) fn selects_pods(&self, namespace: &str, selector: &Map<String, Value>) -> bool {
        self.pod_labels.iter().any(|(ns, labels)| {
            *ns == namespace
                && selector
                    .iter()
                    .all(|(key, value)| labels.get(key).and_then(Value::as_str) == value.as_str())
        })
    }
}

/// An object's namespace, or the app's.
pub(crate) fn namespace_of<'a>(object: &'a Value, app_namespace: &'a str) -> &'a str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(app_namespace)
}
