//! `invalid-value` (error): a field of a rendered built-in object that the API server's own
//! validation rejects, though its type is right.
//!
//! Checked, as `kube-apiserver` 1.34 validates them on create:
//! - names: `metadata.name` as the kind requires (a DNS-1035 label for a Service, a DNS-1123
//!   label for a Namespace, a DNS-1123 subdomain for the workloads, ConfigMaps, Secrets, ...;
//!   at most 52 characters for a CronJob, 63 for a Job), `metadata.namespace`, label keys and
//!   values, annotation keys;
//! - containers (of `containers`, `initContainers` and `ephemeralContainers`): a name that is
//!   a DNS-1123 label and unique in the pod, an image, ports between 1 and 65535 with names
//!   that are IANA service names (at most 15 characters) and unique in the container,
//!   environment variable names, `volumeMounts` that name a volume the pod declares (once per
//!   mount path), resource quantities that parse, are not negative, with requests not above
//!   limits;
//! - pod templates: volume names that are DNS-1123 labels and unique, the `restartPolicy` the
//!   workload allows (`Always` for Deployments, StatefulSets, DaemonSets and ReplicaSets;
//!   `OnFailure` or `Never` for Jobs and CronJobs);
//! - Services: ports between 1 and 65535, named (DNS-1123 labels, unique) when there are
//!   several, target ports that are valid numbers or port names; `externalName` for an
//!   `ExternalName` Service;
//! - workloads: counts not negative, `maxSurge` and `maxUnavailable` counts or percentages,
//!   selector operators and values; StatefulSet claim templates; Job counts; CronJob
//!   schedules; Ingress hosts, paths and backends; NetworkPolicy ports; HorizontalPodAutoscaler
//!   replica bounds; PodDisruptionBudget counts; RBAC role references, subjects and rules;
//! - probes (ports, non-negative numbers), security context ids, configMap and secret volume
//!   names and modes, tolerations, downward-API field paths, `serviceAccountName`.
//!
//! Enums (`type`, `imagePullPolicy`, `protocol`, `restartPolicy`, ...) are `schema-violation`'s,
//! and a selector that does not match its template is `selector-mismatch`'s.
//!
//! ```yaml
//! objects:
//!   - apiVersion: v1
//!     kind: Service
//!     metadata: {name: web}
//!     spec:
//!       ports:
//!         - name: http-metrics-port   # error: must be no more than 15 characters
//!           port: 70000               # error: must be between 1 and 65535, inclusive
//! ```

mod fields;
mod formats;
mod kinds;
mod pod;

use serde_json::{Map, Value};

use super::AppContext;
use super::api_versions::group_of;
use super::pod_spec::WorkloadKind;
use crate::{Diagnostic, RenderedObject};

/// The problems found in one object: `(JSON pointer, message)`.
#[derive(Default)]
pub(crate) struct Findings {
    found: Vec<(String, String)>,
}

impl Findings {
    pub(crate) fn push(&mut self, pointer: String, message: impl Into<String>) {
        self.found.push((pointer, message.into()));
    }

    /// Reports `problem` for the text at `pointer`, when there is one (the pointer is made
    /// only then: most values are valid).
    pub(crate) fn check(&mut self, pointer: impl FnOnce() -> String, problem: Option<&str>) {
        if let Some(problem) = problem {
            self.push(pointer(), problem);
        }
    }
}

/// `api_version` and `kind` are the object's; `pod` the pointer and workload of its pod spec.
pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    api_version: &str,
    kind: &str,
    pod: Option<(&str, WorkloadKind)>,
    out: &mut Vec<Diagnostic>,
) {
    if !super::api_versions::builtin_apis().serves(api_version, kind) {
        return;
    }
    let mut findings = Findings::default();
    let value = &object.object;
    metadata(value, "/metadata", Some(kind), &mut findings);
    match (group_of(api_version), kind) {
        ("", "Service") => service(value, &mut findings),
        ("", "PersistentVolumeClaim") => {
            if let Some(spec) = value.get("spec").and_then(Value::as_object) {
                kinds::claim_requirements(spec, "/spec", &mut findings);
            }
        }
        _ => kinds::spec(kind, value, &mut findings),
    }
    if let Some((pointer, workload)) = pod {
        if let Some(template) = pointer.strip_suffix("/spec") {
            metadata(value, &format!("{template}/metadata"), None, &mut findings);
        }
        if let Some(spec) = value.pointer(pointer) {
            pod::pod_spec(
                spec,
                pointer,
                pod_restart_policies(kind, workload),
                &mut findings,
            );
        }
    }
    let label = super::object_label(value);
    for (pointer, message) in findings.found {
        let last = pointer
            .rsplit('/')
            .next()
            .filter(|segment| !segment.is_empty() && !segment.chars().all(|c| c.is_ascii_digit()));
        out.push(ctx.at_object(
            object,
            Diagnostic::error(
                "invalid-value",
                format!("{label}: `{}` {message}", dotted(&pointer)),
                Some(ctx.source_span(object, &pointer, last)),
            ),
        ));
    }
}

/// The restart policies a workload's pod template may have (`None`: any).
fn pod_restart_policies(kind: &str, workload: WorkloadKind) -> Option<&'static [&'static str]> {
    match (kind, workload) {
        ("Pod" | "PodTemplate", _) => None,
        (_, WorkloadKind::Batch) => Some(&["OnFailure", "Never"]),
        (_, WorkloadKind::Service) => Some(&["Always"]),
    }
}

/// A pointer as a dotted path with indexes (`/spec/ports/0/port` is `spec.ports[0].port`).
fn dotted(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        if !segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    out
}

/// The name (when `kind` is given: the object's own metadata), namespace, labels and
/// annotation keys at `pointer`.
fn metadata(object: &Value, pointer: &str, kind: Option<&str>, findings: &mut Findings) {
    let Some(metadata) = object.pointer(pointer).and_then(Value::as_object) else {
        return;
    };
    if let Some(kind) = kind {
        match metadata.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => {
                findings.check(|| format!("{pointer}/name"), name_problem(kind, name));
            }
            _ if metadata.get("generateName").is_none() => {
                findings.push(format!("{pointer}/name"), "is required (or `generateName`)");
            }
            _ => {}
        }
        if let Some(namespace) = metadata.get("namespace").and_then(Value::as_str)
            && !namespace.is_empty()
        {
            findings.check(
                || format!("{pointer}/namespace"),
                formats::dns1123_label(namespace),
            );
        }
    }
    if let Some(labels) = metadata.get("labels").and_then(Value::as_object) {
        label_map(labels, &format!("{pointer}/labels"), findings);
    }
    if let Some(annotations) = metadata.get("annotations").and_then(Value::as_object) {
        for key in annotations.keys() {
            if let Some(problem) = formats::qualified_name(key) {
                findings.push(
                    format!("{pointer}/annotations/{}", escape(key)),
                    format!("has an invalid key `{key}`: {problem}"),
                );
            }
        }
    }
}

/// Label keys and text values.
pub(crate) fn label_map(labels: &Map<String, Value>, pointer: &str, findings: &mut Findings) {
    for (key, value) in labels {
        let at = || format!("{pointer}/{}", escape(key));
        if let Some(problem) = formats::qualified_name(key) {
            findings.push(at(), format!("has an invalid key: {problem}"));
        }
        if let Some(text) = value.as_str() {
            findings.check(at, formats::label_value(text));
        }
    }
}

/// What is wrong with `name` for an object of `kind`, by the kinds whose name rule the API
/// server is known to apply (others are not checked).
fn name_problem(kind: &str, name: &str) -> Option<&'static str> {
    match kind {
        _ if name.contains(['/', '%']) || name == "." || name == ".." => {
            Some("may not contain '/' or '%', nor be '.' or '..'")
        }
        "Service" => formats::dns1035_label(name),
        "Namespace" | "StatefulSet" => formats::dns1123_label(name),
        "CronJob" if name.len() > 52 => Some("must be no more than 52 characters"),
        "Job" if name.len() > 63 => Some("must be no more than 63 characters"),
        "ConfigMap"
        | "Secret"
        | "Pod"
        | "ServiceAccount"
        | "PersistentVolumeClaim"
        | "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "Job"
        | "CronJob"
        | "ReplicationController"
        | "Ingress"
        | "NetworkPolicy"
        | "HorizontalPodAutoscaler" => formats::dns1123_subdomain(name),
        _ => None,
    }
}

fn service(object: &Value, findings: &mut Findings) {
    let Some(spec) = object.get("spec").and_then(Value::as_object) else {
        return;
    };
    let text = |key: &str| spec.get(key).and_then(Value::as_str).unwrap_or_default();
    if text("type") == "ExternalName" {
        if text("externalName").is_empty() {
            findings.push(
                "/spec/externalName".to_owned(),
                "is required for an ExternalName Service",
            );
        }
        return;
    }
    let external = matches!(text("type"), "NodePort" | "LoadBalancer");
    if !external && !text("externalTrafficPolicy").is_empty() {
        findings.push(
            "/spec/externalTrafficPolicy".to_owned(),
            "may only be set when `type` is `NodePort` or `LoadBalancer`",
        );
    }
    let ports = spec.get("ports").and_then(Value::as_array);
    let headless = text("clusterIP") == "None";
    if ports.is_none_or(Vec::is_empty) {
        if !headless {
            findings.push("/spec/ports".to_owned(), "is required (at least one port)");
        }
        return;
    }
    let ports = ports.map(Vec::as_slice).unwrap_or_default();
    let mut names = std::collections::HashSet::new();
    for (index, port) in ports.iter().enumerate() {
        let at = format!("/spec/ports/{index}");
        let name = port.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            if ports.len() > 1 {
                findings.push(
                    format!("{at}/name"),
                    "is required when a Service has several ports",
                );
            }
        } else if let Some(problem) = formats::dns1123_label(name) {
            findings.push(format!("{at}/name"), problem);
        } else if !names.insert(name) {
            findings.push(
                format!("{at}/name"),
                format!("duplicates port name `{name}`"),
            );
        }
        if let Some(number) = port.get("port").and_then(Value::as_i64) {
            findings.check(|| format!("{at}/port"), formats::port_number(number));
        }
        match port.get("targetPort") {
            Some(Value::Number(number)) => {
                if let Some(number) = number.as_i64().filter(|number| *number != 0) {
                    findings.check(|| format!("{at}/targetPort"), formats::port_number(number));
                }
            }
            Some(Value::String(name)) if !name.is_empty() => {
                findings.check(|| format!("{at}/targetPort"), formats::port_name(name));
            }
            _ => {}
        }
        // The node port's range is the allocator's, not validation's (a dry run accepts any).
        if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 && !external {
            findings.push(
                format!("{at}/nodePort"),
                "may only be set when `type` is `NodePort` or `LoadBalancer`",
            );
        }
    }
    if let Some(selector) = spec.get("selector").and_then(Value::as_object) {
        label_map(selector, "/spec/selector", findings);
    }
}

/// A JSON pointer segment for `key`.
pub(crate) fn escape(key: &str) -> String {
    crate::load::yaml::escape_segment(key)
}
