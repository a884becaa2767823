//! The pod template of a rendered workload, as a small typed view: the best-practice rules
//! read containers, `hostNetwork` and volumes from it.
//!
//! Which kinds carry a pod template (and where) follows the Kubernetes API: `Pod` (`spec`),
//! `Deployment`, `StatefulSet`, `DaemonSet`, `ReplicaSet`, `Job` (`spec.template.spec`) and
//! `CronJob` (`spec.jobTemplate.spec.template.spec`). Custom resources are not looked into.

use serde::Deserialize;

/// The parts of a `PodSpec` the rules read. Unknown or malformed parts read as absent: a
/// wrong shape is the schema's business, not a best practice's.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodSpec {
    #[serde(default)]
    pub(crate) containers: Vec<Container>,
    #[serde(default)]
    pub(crate) host_network: Option<bool>,
    #[serde(default)]
    pub(crate) volumes: Vec<Volume>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Container {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) image: Option<String>,
    #[serde(default)]
    pub(crate) resources: Option<Resources>,
    #[serde(default)]
    pub(crate) security_context: Option<SecurityContext>,
    #[serde(default)]
    pub(crate) liveness_probe: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) readiness_probe: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Resources {
    #[serde(default)]
    pub(crate) requests: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    pub(crate) limits: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct SecurityContext {
    #[serde(default)]
    pub(crate) privileged: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Volume {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) host_path: Option<serde_json::Value>,
}

/// The kind of workload a pod template belongs to, for rules that treat run-to-completion
/// pods differently (probes make no sense on a Job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkloadKind {
    /// A long-running workload: Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet.
    Service,
    /// Job or CronJob.
    Batch,
}

/// The kinds whose objects carry a pod spec, and the JSON pointer of the spec.
const POD_SPEC_POINTERS: &[(&str, &str, &str, WorkloadKind)] = &[
    ("", "Pod", "/spec", WorkloadKind::Service),
    (
        "apps",
        "Deployment",
        "/spec/template/spec",
        WorkloadKind::Service,
    ),
    (
        "apps",
        "StatefulSet",
        "/spec/template/spec",
        WorkloadKind::Service,
    ),
    (
        "apps",
        "DaemonSet",
        "/spec/template/spec",
        WorkloadKind::Service,
    ),
    (
        "apps",
        "ReplicaSet",
        "/spec/template/spec",
        WorkloadKind::Service,
    ),
    ("batch", "Job", "/spec/template/spec", WorkloadKind::Batch),
    (
        "batch",
        "CronJob",
        "/spec/jobTemplate/spec/template/spec",
        WorkloadKind::Batch,
    ),
];

/// A pod spec with the kind of workload around it.
#[derive(Debug)]
pub(crate) struct PodTemplate {
    pub(crate) spec: PodSpec,
    pub(crate) workload: WorkloadKind,
}

impl PodTemplate {
    /// The pod template of a built-in workload object, if it is one.
    pub(crate) fn of(object: &serde_json::Value) -> Option<PodTemplate> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let (_, _, pointer, workload) = POD_SPEC_POINTERS
            .iter()
            .find(|(g, k, _, _)| *g == group && *k == kind)?;
        let spec = PodSpec::deserialize(object.pointer(pointer)?).ok()?;
        Some(PodTemplate {
            spec,
            workload: *workload,
        })
    }
}
