//! The pod template of a rendered workload, as a small typed view borrowed from the object:
//! the best-practice rules read containers, `hostNetwork` and volumes from it.
//!
//! Which kinds carry a pod template (and where) follows the Kubernetes API: `Pod` (`spec`),
//! `PodTemplate` (`template.spec`), `Deployment`, `StatefulSet`, `DaemonSet`, `ReplicaSet`,
//! `ReplicationController`, `Job` (`spec.template.spec`) and `CronJob`
//! (`spec.jobTemplate.spec.template.spec`). Custom resources are not looked into. The
//! containers are those of `containers`, `initContainers` and `ephemeralContainers`, in that
//! order, each with its list and index.
//!
//! The view reads the object as serde would deserialize it into plain structs with every
//! field `#[serde(default)]` (the rules were written against those, and their findings must
//! not change): a struct is an object (unknown keys ignored) or a list of its fields in
//! order; a missing field is its default, a `null` one is absent for an `Option` and
//! malformed otherwise. Anything malformed anywhere makes the whole pod template read as
//! absent: a wrong shape is the schema's business, not a best practice's. It copies nothing
//! (it was a deserialized copy of the pod spec: ~11 K instructions per workload).

use serde_json::{Map, Value};

/// The parts of a `PodSpec` the rules read.
#[derive(Debug, Default)]
pub(crate) struct PodSpec<'a> {
    pub(crate) containers: Vec<Container<'a>>,
    pub(crate) host_network: Option<bool>,
    pub(crate) volumes: Vec<Volume<'a>>,
}

#[derive(Debug, Default)]
pub(crate) struct Container<'a> {
    /// Which list of the pod spec the container is in, and its index there.
    pub(crate) list: ContainerList,
    /// The container as JSON (when written as an object), for the fields the view does not
    /// read.
    pub(crate) raw: Option<&'a Map<String, Value>>,
    pub(crate) index: usize,
    /// Empty when the container has no `name`.
    pub(crate) name: &'a str,
    pub(crate) image: Option<&'a str>,
    pub(crate) resources: Option<Resources<'a>>,
    pub(crate) security_context: Option<SecurityContext>,
    pub(crate) liveness_probe: Option<&'a Value>,
    pub(crate) readiness_probe: Option<&'a Value>,
}

/// The three container lists of a pod spec.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContainerList {
    #[default]
    Containers,
    InitContainers,
    EphemeralContainers,
}

impl ContainerList {
    /// The list's field name in the pod spec.
    pub(crate) fn field(self) -> &'static str {
        match self {
            ContainerList::Containers => "containers",
            ContainerList::InitContainers => "initContainers",
            ContainerList::EphemeralContainers => "ephemeralContainers",
        }
    }
}

impl Container<'_> {
    /// How messages name the container (`container \`web\``, `init container \`setup\``).
    pub(crate) fn label(&self) -> String {
        let what = match self.list {
            ContainerList::Containers => "container",
            ContainerList::InitContainers => "init container",
            ContainerList::EphemeralContainers => "ephemeral container",
        };
        format!("{what} `{}`", self.name)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Resources<'a> {
    pub(crate) requests: Option<&'a Map<String, Value>>,
    pub(crate) limits: Option<&'a Map<String, Value>>,
}

#[derive(Debug, Default)]
pub(crate) struct SecurityContext {
    pub(crate) privileged: Option<bool>,
}

#[derive(Debug, Default)]
pub(crate) struct Volume<'a> {
    /// Empty when the volume has no `name`.
    pub(crate) name: &'a str,
    pub(crate) host_path: Option<&'a Value>,
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

/// The kinds whose objects carry a pod spec, and the path of the spec.
const POD_SPEC_PATHS: &[(&str, &str, &[&str], WorkloadKind)] = &[
    ("", "Pod", &["spec"], WorkloadKind::Service),
    (
        "",
        "PodTemplate",
        &["template", "spec"],
        WorkloadKind::Service,
    ),
    (
        "",
        "ReplicationController",
        &["spec", "template", "spec"],
        WorkloadKind::Service,
    ),
    (
        "apps",
        "Deployment",
        &["spec", "template", "spec"],
        WorkloadKind::Service,
    ),
    (
        "apps",
        "StatefulSet",
        &["spec", "template", "spec"],
        WorkloadKind::Service,
    ),
    (
        "apps",
        "DaemonSet",
        &["spec", "template", "spec"],
        WorkloadKind::Service,
    ),
    (
        "apps",
        "ReplicaSet",
        &["spec", "template", "spec"],
        WorkloadKind::Service,
    ),
    (
        "batch",
        "Job",
        &["spec", "template", "spec"],
        WorkloadKind::Batch,
    ),
    (
        "batch",
        "CronJob",
        &["spec", "jobTemplate", "spec", "template", "spec"],
        WorkloadKind::Batch,
    ),
];

/// A pod spec with the kind of workload around it.
#[derive(Debug)]
pub(crate) struct PodTemplate<'a> {
    pub(crate) spec: PodSpec<'a>,
    pub(crate) workload: WorkloadKind,
    /// The JSON pointer of the pod spec in the object (`/spec/template/spec`).
    pub(crate) pointer: String,
    /// The pod spec as JSON (when written as an object).
    raw: Option<&'a Map<String, Value>>,
}

impl<'a> PodTemplate<'a> {
    /// The pod spec as JSON, for the fields the view does not read (`object` is the template's
    /// own object: the spec was borrowed from it).
    pub(crate) fn raw(&self, _object: &Value) -> Option<&'a Map<String, Value>> {
        self.raw
    }

    /// `container` (of this template) as JSON.
    pub(crate) fn raw_container(
        &self,
        _object: &Value,
        container: &Container<'a>,
    ) -> Option<&'a Map<String, Value>> {
        container.raw
    }

    /// The JSON pointer of `container` in the object.
    pub(crate) fn container_pointer(&self, container: &Container<'_>) -> String {
        format!(
            "{}/{}/{}",
            self.pointer,
            container.list.field(),
            container.index
        )
    }
}

impl<'a> PodTemplate<'a> {
    /// The pod template of a built-in workload object, if it is one and well formed.
    /// `api_version` and `kind` are the object's.
    pub(crate) fn of(object: &'a Value, api_version: &str, kind: &str) -> Option<PodTemplate<'a>> {
        let (path, workload) = pod_spec_path(api_version, kind)?;
        let spec = path
            .iter()
            .try_fold(object, |value, segment| value.get(segment))?;
        Some(PodTemplate {
            spec: pod_spec(spec).ok()?,
            workload,
            pointer: pointer_of(path),
            raw: spec.as_object(),
        })
    }
}

/// Where a built-in workload of `api_version` and `kind` has its pod spec, as a JSON pointer,
/// and what kind of workload it is.
pub(crate) fn pod_spec_location(api_version: &str, kind: &str) -> Option<(String, WorkloadKind)> {
    pod_spec_path(api_version, kind).map(|(path, workload)| (pointer_of(path), workload))
}

/// The labels of the pod template of a built-in workload (a Pod's own labels).
pub(crate) fn template_labels<'a>(
    object: &'a Value,
    api_version: &str,
    kind: &str,
) -> Option<&'a Map<String, Value>> {
    let (path, _) = pod_spec_path(api_version, kind)?;
    let (_, template) = path.split_last()?;
    template
        .iter()
        .chain(&["metadata", "labels"])
        .try_fold(object, |value, segment| value.get(segment))?
        .as_object()
}

fn pod_spec_path(api_version: &str, kind: &str) -> Option<(&'static [&'static str], WorkloadKind)> {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    POD_SPEC_PATHS
        .iter()
        .find(|(g, k, _, _)| *g == group && *k == kind)
        .map(|(_, _, path, workload)| (*path, *workload))
}

fn pointer_of(path: &[&str]) -> String {
    path.iter().map(|segment| format!("/{segment}")).collect()
}

/// A part that serde would not have deserialized: the pod template reads as absent.
struct Malformed;

type Read<T> = Result<T, Malformed>;

fn pod_spec(value: &Value) -> Read<PodSpec<'_>> {
    let [
        containers,
        host_network,
        volumes,
        init_containers,
        ephemeral_containers,
    ] = fields(
        value,
        [
            "containers",
            "hostNetwork",
            "volumes",
            "initContainers",
            "ephemeralContainers",
        ],
    )?;
    let mut all = Vec::new();
    for (list_name, value) in [
        (ContainerList::Containers, containers),
        (ContainerList::InitContainers, init_containers),
        (ContainerList::EphemeralContainers, ephemeral_containers),
    ] {
        let read = list(value, container)?;
        all.extend(read.into_iter().enumerate().map(|(index, mut container)| {
            container.list = list_name;
            container.index = index;
            container
        }));
    }
    Ok(PodSpec {
        containers: all,
        host_network: optional_bool(host_network)?,
        volumes: list(volumes, volume)?,
    })
}

fn container(value: &Value) -> Read<Container<'_>> {
    let [
        name,
        image,
        resources,
        security_context,
        liveness_probe,
        readiness_probe,
    ] = fields(
        value,
        [
            "name",
            "image",
            "resources",
            "securityContext",
            "livenessProbe",
            "readinessProbe",
        ],
    )?;
    Ok(Container {
        list: ContainerList::Containers,
        raw: value.as_object(),
        index: 0,
        name: text(name)?,
        image: optional(image, as_text)?,
        resources: optional(resources, |value| {
            let [requests, limits] = fields(value, ["requests", "limits"])?;
            Ok(Resources {
                requests: optional(requests, as_map)?,
                limits: optional(limits, as_map)?,
            })
        })?,
        security_context: optional(security_context, |value| {
            let [privileged] = fields(value, ["privileged"])?;
            Ok(SecurityContext {
                privileged: optional_bool(privileged)?,
            })
        })?,
        liveness_probe: optional(liveness_probe, Ok)?,
        readiness_probe: optional(readiness_probe, Ok)?,
    })
}

fn volume(value: &Value) -> Read<Volume<'_>> {
    let [name, host_path] = fields(value, ["name", "hostPath"])?;
    Ok(Volume {
        name: text(name)?,
        host_path: optional(host_path, Ok)?,
    })
}

/// The fields `names` of a struct, as serde reads a struct from a JSON value: an object by
/// key (other keys ignored), or a list by position (missing trailing elements are missing
/// fields, surplus ones malformed).
fn fields<'a, const N: usize>(value: &'a Value, names: [&str; N]) -> Read<[Option<&'a Value>; N]> {
    match value {
        Value::Object(map) => {
            let mut found = [None; N];
            for (key, child) in map {
                if let Some(index) = names.iter().position(|name| name == key)
                    && let Some(slot) = found.get_mut(index)
                {
                    *slot = Some(child);
                }
            }
            Ok(found)
        }
        Value::Array(items) if items.len() <= N => {
            Ok(std::array::from_fn(|index| items.get(index)))
        }
        _ => Err(Malformed),
    }
}

/// A `Vec` field: missing is empty, a list reads each element, anything else (`null`
/// included) is malformed.
fn list<'a, T>(value: Option<&'a Value>, read: impl Fn(&'a Value) -> Read<T>) -> Read<Vec<T>> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(read).collect(),
        Some(_) => Err(Malformed),
    }
}

/// An `Option` field: missing or `null` is absent.
fn optional<'a, T>(
    value: Option<&'a Value>,
    read: impl FnOnce(&'a Value) -> Read<T>,
) -> Read<Option<T>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => read(value).map(Some),
    }
}

fn optional_bool(value: Option<&Value>) -> Read<Option<bool>> {
    optional(value, |value| value.as_bool().ok_or(Malformed))
}

/// A `String` field: missing is empty, `null` is malformed.
fn text(value: Option<&Value>) -> Read<&str> {
    value.map_or(Ok(""), as_text)
}

fn as_text(value: &Value) -> Read<&str> {
    value.as_str().ok_or(Malformed)
}

fn as_map(value: &Value) -> Read<&Map<String, Value>> {
    value.as_object().ok_or(Malformed)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// The deserialized structs this view replaced: the reference it must agree with.
    mod serde_reference {
        use serde::Deserialize;

        #[derive(Debug, Default, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub(super) struct PodSpec {
            #[serde(default)]
            pub(super) containers: Vec<Container>,
            #[serde(default)]
            pub(super) host_network: Option<bool>,
            #[serde(default)]
            pub(super) volumes: Vec<Volume>,
            #[serde(default)]
            pub(super) init_containers: Vec<Container>,
            #[serde(default)]
            pub(super) ephemeral_containers: Vec<Container>,
        }

        #[derive(Debug, Default, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub(super) struct Container {
            #[serde(default)]
            pub(super) name: String,
            #[serde(default)]
            pub(super) image: Option<String>,
            #[serde(default)]
            pub(super) resources: Option<Resources>,
            #[serde(default)]
            pub(super) security_context: Option<SecurityContext>,
            #[serde(default)]
            pub(super) liveness_probe: Option<serde_json::Value>,
            #[serde(default)]
            pub(super) readiness_probe: Option<serde_json::Value>,
        }

        #[derive(Debug, Default, Deserialize)]
        pub(super) struct Resources {
            #[serde(default)]
            pub(super) requests: Option<serde_json::Map<String, serde_json::Value>>,
            #[serde(default)]
            pub(super) limits: Option<serde_json::Map<String, serde_json::Value>>,
        }

        #[derive(Debug, Default, Deserialize)]
        pub(super) struct SecurityContext {
            #[serde(default)]
            pub(super) privileged: Option<bool>,
        }

        #[derive(Debug, Default, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub(super) struct Volume {
            #[serde(default)]
            pub(super) name: String,
            #[serde(default)]
            pub(super) host_path: Option<serde_json::Value>,
        }
    }

    /// What the rules read, from the view.
    fn summary(spec: &PodSpec<'_>) -> String {
        let containers: Vec<String> = spec
            .containers
            .iter()
            .map(|c| {
                let resources = c.resources.as_ref();
                format!(
                    "{:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                    c.name,
                    c.image,
                    resources.map(|r| r.requests.map(|m| m.len())),
                    resources.map(|r| r.limits.map(|m| m.len())),
                    c.security_context.as_ref().map(|s| s.privileged),
                    c.liveness_probe,
                    c.readiness_probe
                )
            })
            .collect();
        let volumes: Vec<String> = spec
            .volumes
            .iter()
            .map(|v| format!("{:?} {:?}", v.name, v.host_path))
            .collect();
        format!("{containers:?} {:?} {volumes:?}", spec.host_network)
    }

    /// The same, from the reference structs.
    fn reference_summary(spec: &serde_reference::PodSpec) -> String {
        let containers: Vec<String> = spec
            .containers
            .iter()
            .chain(&spec.init_containers)
            .chain(&spec.ephemeral_containers)
            .map(|c| {
                let resources = c.resources.as_ref();
                format!(
                    "{:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                    c.name,
                    c.image.as_deref(),
                    resources.map(|r| r.requests.as_ref().map(|m| m.len())),
                    resources.map(|r| r.limits.as_ref().map(|m| m.len())),
                    c.security_context.as_ref().map(|s| s.privileged),
                    c.liveness_probe.as_ref(),
                    c.readiness_probe.as_ref()
                )
            })
            .collect();
        let volumes: Vec<String> = spec
            .volumes
            .iter()
            .map(|v| format!("{:?} {:?}", v.name, v.host_path.as_ref()))
            .collect();
        format!("{containers:?} {:?} {volumes:?}", spec.host_network)
    }

    /// Every value of a table of pod specs, and every one-step mutation of them (a value
    /// replaced by each JSON type, a key removed, a struct written as a list of its fields):
    /// the view reads what serde deserialized, or is absent exactly when serde failed.
    #[test]
    fn the_view_reads_what_serde_deserialized() {
        let specs = [
            json!({
                "containers": [{
                    "name": "web", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "100m"}, "limits": {}},
                    "securityContext": {"privileged": true},
                    "livenessProbe": {"httpGet": {"path": "/"}}, "readinessProbe": null,
                    "ports": [{"containerPort": 80}]
                }, {"name": "sidecar"}],
                "hostNetwork": false,
                "volumes": [{"name": "logs", "hostPath": {"path": "/var/log"}}, {"name": "tmp"}],
                "restartPolicy": "Always"
            }),
            json!({}),
            json!([[["web", "nginx", [{"cpu": 1}, null], [true], 1, null]], true, [["v", 1]]]),
            json!({"containers": [["a"], ["b", null, null, [false]]], "volumes": []}),
        ];
        let replacements = [
            json!(null),
            json!(true),
            json!(7),
            json!("text"),
            json!([]),
            json!({}),
            json!(["x", "y", "z", "u", "v", "w", "extra"]),
        ];
        let mut checked = 0;
        let mut absent = 0;
        for spec in &specs {
            let mut mutants = vec![spec.clone()];
            mutate(spec, "", &replacements, &mut mutants, spec);
            for mutant in &mutants {
                let object = json!({
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "spec": {"template": {"spec": mutant}}
                });
                let view =
                    PodTemplate::of(&object, "apps/v1", "Deployment").map(|pod| summary(&pod.spec));
                let reference = serde_reference::PodSpec::deserialize(mutant)
                    .ok()
                    .map(|spec| reference_summary(&spec));
                assert_eq!(view, reference, "{mutant}");
                checked += 1;
                absent += usize::from(view.is_none());
            }
        }
        assert!(
            absent > 50 && checked - absent > 50,
            "{absent} of {checked}"
        );
    }

    fn mutate(
        value: &Value,
        pointer: &str,
        replacements: &[Value],
        out: &mut Vec<Value>,
        root: &Value,
    ) {
        if !pointer.is_empty() {
            for replacement in replacements {
                let mut mutant = root.clone();
                *mutant.pointer_mut(pointer).unwrap() = replacement.clone();
                out.push(mutant);
            }
        }
        match value {
            Value::Object(map) => {
                // The struct as a list of its values, in the map's order.
                let mut as_list = root.clone();
                *as_list.pointer_mut(pointer).unwrap() =
                    Value::Array(map.values().cloned().collect());
                out.push(as_list);
                for (key, child) in map {
                    let mut removed = root.clone();
                    removed
                        .pointer_mut(pointer)
                        .unwrap()
                        .as_object_mut()
                        .unwrap()
                        .shift_remove(key);
                    out.push(removed);
                    mutate(child, &format!("{pointer}/{key}"), replacements, out, root);
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    mutate(
                        child,
                        &format!("{pointer}/{index}"),
                        replacements,
                        out,
                        root,
                    );
                }
            }
            _ => {}
        }
    }

    #[test]
    fn workloads_and_their_pod_spec_paths() {
        let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "job"}]
        }}}}}});
        let pod = PodTemplate::of(&cron, "batch/v1", "CronJob").unwrap();
        assert_eq!(pod.workload, WorkloadKind::Batch);
        assert_eq!(pod.spec.containers[0].name, "job");
        let bare = json!({"spec": {"containers": [{"name": "p"}]}});
        assert_eq!(
            PodTemplate::of(&bare, "v1", "Pod")
                .unwrap()
                .spec
                .containers
                .len(),
            1
        );
        assert!(PodTemplate::of(&bare, "example.com/v1", "Pod").is_none());
        assert!(PodTemplate::of(&bare, "apps/v1", "Deployment").is_none());
    }
}
