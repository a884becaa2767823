//! A generated corpus of Kubernetes objects for the differential test against the API server
//! (`apiserver_diff.rs`): valid objects of the common kinds, and mutations of them that the API
//! server may or may not accept (wrong types, out-of-range enums, broken selectors, bad names,
//! missing fields, unserved versions). Deterministic: the same corpus every run.

use serde_json::{Value, json};

/// One object of the corpus.
pub struct Case {
    /// What was done to the base object (`Deployment: remove /spec/selector`).
    pub description: String,
    pub object: Value,
    /// The `apiVersion` and `kind` of the base object, for the URL when the mutated object's
    /// own are not served.
    pub base_type: (String, String),
}

/// Every case, each with a unique name, in `namespace`.
pub fn corpus(namespace: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    for base in bases(namespace) {
        let api_version = text(&base, "/apiVersion");
        let kind = text(&base, "/kind");
        let mut push = |description: String, object: Value| {
            cases.push(Case {
                description: format!("{kind}: {description}"),
                object,
                base_type: (api_version.clone(), kind.clone()),
            });
        };
        push("valid".to_owned(), base.clone());
        for (description, object) in mutations(&base) {
            push(description, object);
        }
    }
    // Unique names, so that the objects of one analysis never collide (`duplicate-object`);
    // a name mutation keeps its bad name with the index added where it stays bad.
    for (index, case) in cases.iter_mut().enumerate() {
        if let Some(name) = case
            .object
            .pointer_mut("/metadata/name")
            .filter(|name| name.is_string())
        {
            let base = name.as_str().unwrap_or_default().to_owned();
            *name = Value::String(unique_name(&base, index));
        }
    }
    cases
}

/// `base` with the case index added, keeping whatever made it invalid.
fn unique_name(base: &str, index: usize) -> String {
    if base.is_empty() {
        return String::new();
    }
    if base.len() > 200 {
        return format!("{index}{base}");
    }
    if base.ends_with('-') || base.ends_with('.') {
        return format!("c{index}-{base}");
    }
    format!("{base}-{index}")
}

fn text(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A valid pod spec with most common fields set.
fn pod_spec(restart_policy: &str) -> Value {
    json!({
        "restartPolicy": restart_policy,
        "serviceAccountName": "default",
        "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "fsGroup": 2000},
        "volumes": [
            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "config", "configMap": {"name": "settings", "defaultMode": 420}}
        ],
        "initContainers": [{
            "name": "init",
            "image": "busybox:1.36",
            "command": ["sh", "-c", "true"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
        }],
        "containers": [{
            "name": "app",
            "image": "registry.local/app:1.2.3",
            "imagePullPolicy": "IfNotPresent",
            "args": ["--port=8080"],
            "ports": [
                {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                {"name": "metrics", "containerPort": 9090}
            ],
            "env": [
                {"name": "LOG_LEVEL", "value": "info"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
            ],
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"cpu": "500m", "memory": "256Mi"}
            },
            "volumeMounts": [
                {"name": "cache", "mountPath": "/cache"},
                {"name": "config", "mountPath": "/etc/app", "readOnly": true}
            ],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
            "livenessProbe": {"tcpSocket": {"port": 8080}, "failureThreshold": 3},
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"]}
            }
        }],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "app", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 30
    })
}

fn template(labels: &Value, restart_policy: &str) -> Value {
    json!({"metadata": {"labels": labels}, "spec": pod_spec(restart_policy)})
}

/// The valid objects the mutations start from.
fn bases(ns: &str) -> Vec<Value> {
    let labels = json!({"app": "web", "tier": "frontend"});
    let meta = |name: &str| json!({"name": name, "namespace": ns, "labels": {"app": "web"}, "annotations": {"example.com/owner": "team-a"}});
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("settings"),
            "data": {"level": "info", "app.properties": "a=b"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("credentials"),
            "type": "Opaque", "stringData": {"user": "app"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("web"),
        "spec": {"type": "ClusterIP", "selector": labels, "sessionAffinity": "None",
            "ports": [
                {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                {"name": "metrics", "port": 9090, "targetPort": 9090}
            ]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("edge"),
            "spec": {"type": "NodePort", "externalTrafficPolicy": "Local", "selector": labels,
                "ports": [{"port": 443, "targetPort": 8443, "nodePort": 30443}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("web"),
            "spec": {"replicas": 2, "revisionHistoryLimit": 5,
                "selector": {"matchLabels": labels},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                "template": template(&labels, "Always")}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("db"),
            "spec": {"replicas": 1, "serviceName": "db", "podManagementPolicy": "OrderedReady",
                "selector": {"matchLabels": labels,
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}]},
                "template": template(&labels, "Always"),
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta("agent"),
            "spec": {"selector": {"matchLabels": labels},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": template(&labels, "Always")}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta("pool"),
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                "template": template(&labels, "Always")}}),
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": meta("legacy"),
            "spec": {"replicas": 1, "selector": labels, "template": template(&labels, "Always")}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("migrate"),
            "spec": {"backoffLimit": 2, "completions": 1, "parallelism": 1,
                "completionMode": "NonIndexed", "template": template(&labels, "Never")}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("report"),
            "spec": {"schedule": "0 3 * * *", "concurrencyPolicy": "Forbid",
                "successfulJobsHistoryLimit": 1,
                "jobTemplate": {"spec": {"template": template(&labels, "OnFailure")}}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta("debug"),
            "spec": pod_spec("Always")}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("runner"),
            "automountServiceAccountToken": false}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("data"),
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                "resources": {"requests": {"storage": "5Gi"}}}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta("web"),
            "spec": {"ingressClassName": "nginx",
                "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                "rules": [{"host": "shop.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta("web"),
            "spec": {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}],
                    "ports": [{"protocol": "TCP", "port": 8080}]}]}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta("web"),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 70}}}]}}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("web"),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels},
                "unhealthyPodEvictionPolicy": "AlwaysAllow"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta("reader"),
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("reader"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": ns}]}),
    ]
}

/// Every mutation of `base`: `(description, object)`.
fn mutations(base: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut set = |description: &str, pointer: &str, value: Value| {
        let mut object = base.clone();
        if let Some(slot) = object.pointer_mut(pointer) {
            *slot = value;
            out.push((format!("{description} ({pointer})"), object));
        }
    };
    let kind = text(base, "/kind");
    let api_version = text(base, "/apiVersion");
    let group = api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group)
        .to_owned();
    let with_group = |version: &str| match group.as_str() {
        "" => version.to_owned(),
        group => format!("{group}/{version}"),
    };
    // Types and versions.
    set("kind without a value", "/kind", Value::Null);
    set("empty kind", "/kind", json!(""));
    set("typo in the kind", "/kind", json!(typo(&kind)));
    set("kind in lowercase", "/kind", json!(kind.to_lowercase()));
    set(
        "version that never existed",
        "/apiVersion",
        json!(with_group("v2")),
    );
    set(
        "retired alpha version",
        "/apiVersion",
        json!(with_group("v1alpha1")),
    );
    set(
        "retired beta version",
        "/apiVersion",
        json!(with_group("v1beta1")),
    );
    set("core group for a grouped kind", "/apiVersion", json!("v1"));
    set("apps group", "/apiVersion", json!("apps/v1"));
    // Names.
    for (description, name) in [
        ("uppercase name", json!("Web")),
        ("underscore in the name", json!("web_app")),
        ("name starting with a hyphen", json!("-web")),
        ("name with dots", json!("web.v2")),
        ("name starting with a digit", json!("1web")),
        ("name of 70 characters", json!("w".repeat(70))),
        ("name of 254 characters", json!("w".repeat(254))),
        ("name with a slash", json!("web/a")),
        ("empty name", json!("")),
        ("numeric name", json!(42)),
    ] {
        set(description, "/metadata/name", name);
    }
    set("invalid namespace", "/metadata/namespace", json!("Team_A"));
    set(
        "label with a bad key",
        "/metadata/labels",
        json!({"a/b/c": "x"}),
    );
    set(
        "label with a bad value",
        "/metadata/labels",
        json!({"app": "has space"}),
    );
    set(
        "label value of 64 characters",
        "/metadata/labels",
        json!({"app": "v".repeat(64)}),
    );
    set(
        "label value that is a number",
        "/metadata/labels",
        json!({"app": 3}),
    );
    set(
        "label key with a prefix",
        "/metadata/labels",
        json!({"app.kubernetes.io/name": "web"}),
    );
    set(
        "annotation with a bad key",
        "/metadata/annotations",
        json!({"bad key": "x"}),
    );
    set(
        "annotations as a list",
        "/metadata/annotations",
        json!(["x"]),
    );
    set("metadata as a string", "/metadata", json!("web"));
    // Every leaf: removed, and replaced by a value of another type.
    let mut leaves = Vec::new();
    collect_leaves(base, String::new(), &mut leaves);
    for (pointer, value) in leaves {
        if pointer == "/apiVersion"
            || pointer == "/kind"
            || pointer.starts_with("/metadata/namespace")
        {
            continue;
        }
        let mut removed = base.clone();
        if remove(&mut removed, &pointer) {
            out.push((format!("remove {pointer}"), removed));
        }
        let other = match &value {
            Value::String(_) => json!(12345),
            Value::Number(_) => json!("seven"),
            Value::Bool(_) => json!("yes"),
            _ => continue,
        };
        let mut replaced = base.clone();
        if let Some(slot) = replaced.pointer_mut(&pointer) {
            *slot = other;
            out.push((format!("wrong type at {pointer}"), replaced));
        }
        // Text leaves get an enum-like wrong value and a lowercase one; numbers go out of range.
        let mut odd = |label: &str, new: Value| {
            let mut object = base.clone();
            if let Some(slot) = object.pointer_mut(&pointer) {
                *slot = new;
                out.push((format!("{label} at {pointer}"), object));
            }
        };
        match &value {
            Value::String(text) => {
                odd("unknown value", json!("Sometimes"));
                if text.to_lowercase() != *text {
                    odd("lowercased value", json!(text.to_lowercase()));
                }
                odd("empty text", json!(""));
            }
            Value::Number(number) => {
                odd("negative number", json!(-1));
                odd("zero", json!(0));
                odd("number above 65535", json!(70000));
                if number.is_i64() {
                    odd("fraction", json!(1.5));
                }
            }
            _ => {}
        }
    }
    // Unknown fields.
    let mut unknown = base.clone();
    if let Some(map) = unknown.as_object_mut() {
        map.insert("specification".to_owned(), json!({}));
        out.push(("unknown top-level field".to_owned(), unknown));
    }
    out
}

/// `kind` with one letter dropped (`ConfigMap` -> `ConfgMap`).
fn typo(kind: &str) -> String {
    let middle = kind.len() / 2;
    kind.char_indices()
        .filter(|(index, _)| *index != middle)
        .map(|(_, c)| c)
        .collect()
}

/// Every scalar (and empty list or map) under `value`, as `(pointer, value)`.
fn collect_leaves(value: &Value, pointer: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                collect_leaves(child, format!("{pointer}/{key}"), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (index, child) in items.iter().enumerate() {
                collect_leaves(child, format!("{pointer}/{index}"), out);
            }
        }
        _ => out.push((pointer, value.clone())),
    }
}

/// Removes the value at `pointer` (a map entry or a list element).
fn remove(value: &mut Value, pointer: &str) -> bool {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return false;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => map.shift_remove(&last).is_some(),
        Some(Value::Array(items)) => match last.parse::<usize>() {
            Ok(index) if index < items.len() => {
                items.remove(index);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_corpus_is_large_and_its_names_unique() {
        let cases = super::corpus("ns");
        assert!(cases.len() >= 2000, "{}", cases.len());
    }
}
