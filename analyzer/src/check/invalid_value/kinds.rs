//! The API server's checks of the specs of common kinds beyond the pod template: workloads'
//! counts and strategies, StatefulSet claims, Jobs, CronJobs, Ingresses, NetworkPolicies,
//! HorizontalPodAutoscalers, PodDisruptionBudgets and RBAC bindings.

use serde_json::{Map, Value};

use super::{Findings, fields, formats};

/// `spec` of an object of `kind` (in a built-in group), at `/spec`.
pub(super) fn spec(kind: &str, object: &Value, findings: &mut Findings) {
    let spec = object.get("spec").and_then(Value::as_object);
    let number = |key: &str| spec.and_then(|spec| spec.get(key));
    match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "ReplicationController" => {
            for key in ["replicas", "minReadySeconds", "revisionHistoryLimit"] {
                fields::non_negative(number(key), || format!("/spec/{key}"), findings);
            }
            if let Some(spec) = spec {
                fields::label_selector(spec.get("selector"), "/spec/selector", findings);
                workload(kind, spec, findings);
            }
        }
        "Job" => {
            for key in [
                "parallelism",
                "completions",
                "backoffLimit",
                "activeDeadlineSeconds",
            ] {
                fields::non_negative(number(key), || format!("/spec/{key}"), findings);
            }
        }
        "CronJob" => {
            if let Some(schedule) = number("schedule").and_then(Value::as_str)
                && !is_schedule(schedule)
            {
                findings.push(
                    "/spec/schedule".to_owned(),
                    format!("`{schedule}` is not a cron schedule (five fields, or `@daily`, ...)"),
                );
            }
            for key in [
                "successfulJobsHistoryLimit",
                "failedJobsHistoryLimit",
                "startingDeadlineSeconds",
            ] {
                fields::non_negative(number(key), || format!("/spec/{key}"), findings);
            }
        }
        "Ingress" => {
            if let Some(spec) = spec {
                ingress(spec, findings);
            }
        }
        "NetworkPolicy" => {
            if let Some(spec) = spec {
                network_policy(spec, findings);
            }
        }
        "HorizontalPodAutoscaler" => {
            if let Some(spec) = spec {
                autoscaler(spec, findings);
            }
        }
        "PodDisruptionBudget" => {
            for key in ["minAvailable", "maxUnavailable"] {
                fields::count_or_percent(number(key), || format!("/spec/{key}"), findings);
            }
            fields::label_selector(number("selector"), "/spec/selector", findings);
        }
        "RoleBinding" | "ClusterRoleBinding" => binding(object, findings),
        "Role" | "ClusterRole" => role(object, findings),
        _ => {}
    }
}

fn workload(kind: &str, spec: &Map<String, Value>, findings: &mut Findings) {
    if let Some(rolling) = spec
        .get("strategy")
        .or_else(|| spec.get("updateStrategy"))
        .and_then(|strategy| strategy.get("rollingUpdate"))
        .and_then(Value::as_object)
    {
        let at = if kind == "Deployment" {
            "strategy"
        } else {
            "updateStrategy"
        };
        for key in ["maxSurge", "maxUnavailable"] {
            fields::count_or_percent(
                rolling.get(key),
                || format!("/spec/{at}/rollingUpdate/{key}"),
                findings,
            );
        }
    }
    if kind != "StatefulSet" {
        return;
    }
    if let Some(service) = spec.get("serviceName").and_then(Value::as_str)
        && !service.is_empty()
    {
        findings.check(
            || "/spec/serviceName".to_owned(),
            formats::dns1123_label(service),
        );
    }
    for (index, claim) in spec
        .get("volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("/spec/volumeClaimTemplates/{index}");
        match claim.pointer("/metadata/name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => {
                findings.check(
                    || format!("{at}/metadata/name"),
                    formats::dns1123_subdomain(name),
                );
            }
            _ => findings.push(format!("{at}/metadata/name"), "is required"),
        }
        if let Some(claim_spec) = claim.get("spec").and_then(Value::as_object) {
            claim_requirements(claim_spec, &format!("{at}/spec"), findings);
        }
    }
}

/// A claim's access modes and storage request (`PersistentVolumeClaimSpec`).
pub(super) fn claim_requirements(spec: &Map<String, Value>, at: &str, findings: &mut Findings) {
    if spec
        .get("accessModes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
        && spec.get("dataSourceRef").is_none()
    {
        findings.push(
            format!("{at}/accessModes"),
            "needs at least one access mode",
        );
    }
    if spec
        .get("resources")
        .and_then(|resources| resources.pointer("/requests/storage"))
        .is_none()
    {
        findings.push(format!("{at}/resources/requests"), "must request `storage`");
    }
}

/// Five (or six, with seconds) space-separated fields of cron characters, or a `@` macro.
fn is_schedule(schedule: &str) -> bool {
    let schedule = schedule
        .strip_prefix("CRON_TZ=")
        .or_else(|| schedule.strip_prefix("TZ="))
        .and_then(|rest| rest.split_once(' ').map(|(_, rest)| rest))
        .unwrap_or(schedule);
    if let Some(name) = schedule.strip_prefix('@') {
        return matches!(
            name,
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly"
        ) || name.starts_with("every ");
    }
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    fields.len() == 5
        && fields.iter().all(|field| {
            field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '*' | ',' | '-' | '/' | '?'))
        })
}

fn ingress(spec: &Map<String, Value>, findings: &mut Findings) {
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        findings.check(
            || "/spec/ingressClassName".to_owned(),
            formats::dns1123_subdomain(class),
        );
    }
    for (index, tls) in array(spec, "tls").enumerate() {
        for (host_index, host) in array_of(tls, "hosts").enumerate() {
            if let Some(host) = host.as_str() {
                findings.check(
                    || format!("/spec/tls/{index}/hosts/{host_index}"),
                    host_problem(host),
                );
            }
        }
        if let Some(secret) = tls.get("secretName").and_then(Value::as_str)
            && !secret.is_empty()
        {
            findings.check(
                || format!("/spec/tls/{index}/secretName"),
                formats::dns1123_subdomain(secret),
            );
        }
    }
    for (index, rule) in array(spec, "rules").enumerate() {
        let at = format!("/spec/rules/{index}");
        if let Some(host) = rule.get("host").and_then(Value::as_str)
            && !host.is_empty()
        {
            findings.check(|| format!("{at}/host"), host_problem(host));
        }
        for (path_index, path) in rule
            .pointer("/http/paths")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("{at}/http/paths/{path_index}");
            let path_type = path
                .get("pathType")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let text = path.get("path").and_then(Value::as_str).unwrap_or_default();
            if matches!(path_type, "Exact" | "Prefix") && !text.starts_with('/') {
                findings.push(
                    format!("{at}/path"),
                    "must be an absolute path (start with `/`)",
                );
            }
            backend(path.get("backend"), &format!("{at}/backend"), findings);
        }
    }
    backend(spec.get("defaultBackend"), "/spec/defaultBackend", findings);
}

fn backend(backend: Option<&Value>, at: &str, findings: &mut Findings) {
    let Some(service) = backend.and_then(|backend| backend.get("service")) else {
        return;
    };
    if let Some(name) = service.get("name").and_then(Value::as_str) {
        findings.check(
            || format!("{at}/service/name"),
            formats::dns1035_label(name),
        );
    }
    let port = service.get("port");
    let number = port
        .and_then(|port| port.get("number"))
        .and_then(Value::as_i64);
    let name = port
        .and_then(|port| port.get("name"))
        .and_then(Value::as_str);
    if number.unwrap_or(0) == 0 && name.is_none_or(str::is_empty) {
        findings.push(
            format!("{at}/service/port"),
            "needs a port `name` or `number`",
        );
    }
    if let Some(port) = port {
        if let Some(number) = port.get("number").and_then(Value::as_i64) {
            findings.check(
                || format!("{at}/service/port/number"),
                formats::port_number(number),
            );
        }
        if let Some(name) = port.get("name").and_then(Value::as_str) {
            findings.check(
                || format!("{at}/service/port/name"),
                formats::port_name(name),
            );
        }
    }
}

/// A host name of an Ingress: a DNS subdomain, optionally with a leading `*.` wildcard.
fn host_problem(host: &str) -> Option<&'static str> {
    formats::dns1123_subdomain(host.strip_prefix("*.").unwrap_or(host))
}

fn network_policy(spec: &Map<String, Value>, findings: &mut Findings) {
    fields::label_selector(spec.get("podSelector"), "/spec/podSelector", findings);
    for direction in ["ingress", "egress"] {
        for (index, rule) in array(spec, direction).enumerate() {
            for (port_index, port) in array_of(rule, "ports").enumerate() {
                fields::port_reference(
                    port.get("port"),
                    || format!("/spec/{direction}/{index}/ports/{port_index}/port"),
                    findings,
                );
            }
        }
    }
}

fn autoscaler(spec: &Map<String, Value>, findings: &mut Findings) {
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    let max = spec.get("maxReplicas").and_then(Value::as_i64);
    if min.is_some_and(|min| min < 1) {
        findings.push(
            "/spec/minReplicas".to_owned(),
            "must be greater than or equal to 1",
        );
    }
    if let Some(max) = max {
        if max < 1 {
            findings.push(
                "/spec/maxReplicas".to_owned(),
                "must be greater than or equal to 1",
            );
        } else if min.is_some_and(|min| min > max) {
            findings.push(
                "/spec/maxReplicas".to_owned(),
                "must be greater than or equal to `minReplicas`",
            );
        }
    }
    if let Some(target) = spec.get("scaleTargetRef").and_then(Value::as_object) {
        let text = |key: &str| target.get(key).and_then(Value::as_str).unwrap_or_default();
        let group = text("apiVersion")
            .rsplit_once('/')
            .map_or("", |(group, _)| group);
        if group.is_empty() || formats::dns1123_subdomain(group).is_some() {
            findings.push(
                "/spec/scaleTargetRef/apiVersion".to_owned(),
                "must be a group/version such as `apps/v1`",
            );
        }
        for key in ["kind", "name"] {
            if text(key).is_empty() {
                findings.push(format!("/spec/scaleTargetRef/{key}"), "is required");
            }
        }
    }
    for (index, metric) in array(spec, "metrics").enumerate() {
        for source in ["resource", "containerResource"] {
            let Some(resource) = metric.get(source) else {
                continue;
            };
            let at = format!("/spec/metrics/{index}/{source}");
            if resource
                .get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                findings.push(format!("{at}/name"), "is required");
            }
            if let Some(target) = resource.get("target").and_then(Value::as_object)
                && ["averageUtilization", "averageValue", "value"]
                    .iter()
                    .all(|key| target.get(*key).is_none_or(Value::is_null))
            {
                findings.push(
                    format!("{at}/target"),
                    "must set `averageUtilization`, `averageValue` or `value`",
                );
            }
        }
        for source in [
            "resource",
            "containerResource",
            "pods",
            "object",
            "external",
        ] {
            if let Some(utilization) = metric
                .get(source)
                .and_then(|source| source.pointer("/target/averageUtilization"))
                .and_then(Value::as_i64)
                && utilization < 1
            {
                findings.push(
                    format!("/spec/metrics/{index}/{source}/target/averageUtilization"),
                    "must be greater than 0",
                );
            }
        }
    }
}

fn binding(object: &Value, findings: &mut Findings) {
    if let Some(group) = object.pointer("/roleRef/apiGroup").and_then(Value::as_str)
        && !matches!(group, "rbac.authorization.k8s.io" | "")
    {
        findings.push(
            "/roleRef/apiGroup".to_owned(),
            "must be `rbac.authorization.k8s.io`",
        );
    }
    if object
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .is_some_and(str::is_empty)
    {
        findings.push("/roleRef/name".to_owned(), "is required");
    }
    if let Some(kind) = object.pointer("/roleRef/kind").and_then(Value::as_str)
        && !matches!(kind, "Role" | "ClusterRole")
    {
        findings.push(
            "/roleRef/kind".to_owned(),
            "must be `Role` or `ClusterRole`",
        );
    }
    for (index, subject) in object
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("/subjects/{index}");
        let text = |key: &str| subject.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("kind") {
            "ServiceAccount" => {
                findings.check(
                    || format!("{at}/name"),
                    formats::dns1123_subdomain(text("name")),
                );
            }
            "User" | "Group" => {
                if text("name").is_empty() {
                    findings.push(format!("{at}/name"), "is required");
                }
            }
            other => findings.push(
                format!("{at}/kind"),
                format!("`{other}` is not `ServiceAccount`, `User` or `Group`"),
            ),
        }
    }
}

fn role(object: &Value, findings: &mut Findings) {
    for (index, rule) in object
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(rule) = rule.as_object() else {
            continue;
        };
        let at = format!("/rules/{index}");
        let len = |key: &str| rule.get(key).and_then(Value::as_array).map_or(0, Vec::len);
        if len("verbs") == 0 {
            findings.push(format!("{at}/verbs"), "needs at least one verb");
        }
        if len("nonResourceURLs") == 0 {
            if len("apiGroups") == 0 {
                findings.push(format!("{at}/apiGroups"), "needs at least one API group");
            }
            if len("resources") == 0 {
                findings.push(format!("{at}/resources"), "needs at least one resource");
            }
        }
    }
}

fn array<'a>(map: &'a Map<String, Value>, key: &str) -> impl Iterator<Item = &'a Value> {
    map.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn array_of<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}
