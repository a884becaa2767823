//! The API server's checks of fields shared by many kinds: probes, security contexts,
//! volume sources, tolerations, downward-API references, label selectors and percentages.

use serde_json::{Map, Value};

use super::{Findings, formats};

/// The fields of the downward API an environment variable may read.
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// The numeric fields of a probe, none of which may be negative.
const PROBE_NUMBERS: &[&str] = &[
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
    "terminationGracePeriodSeconds",
];

/// A container port reference (`httpGet.port`, `tcpSocket.port`): a port number or a port
/// name.
pub(super) fn port_reference(
    value: Option<&Value>,
    at: impl FnOnce() -> String,
    findings: &mut Findings,
) {
    match value {
        Some(Value::Number(number)) => {
            if let Some(number) = number.as_i64() {
                findings.check(at, formats::port_number(number));
            }
        }
        Some(Value::String(name)) => match name.parse::<i64>() {
            Ok(number) => findings.check(at, formats::port_number(number)),
            Err(_) if name.is_empty() => findings.push(at(), "is required"),
            Err(_) => findings.check(at, formats::port_name(name)),
        },
        _ => {}
    }
}

/// The probes of a container.
pub(super) fn probes(container: &Map<String, Value>, at: &str, findings: &mut Findings) {
    for probe_name in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(probe) = container.get(probe_name).and_then(Value::as_object) else {
            continue;
        };
        let at = format!("{at}/{probe_name}");
        for number in PROBE_NUMBERS {
            non_negative(probe.get(*number), || format!("{at}/{number}"), findings);
        }
        for handler in ["httpGet", "tcpSocket"] {
            if let Some(action) = probe.get(handler).and_then(Value::as_object) {
                port_reference(
                    action.get("port"),
                    || format!("{at}/{handler}/port"),
                    findings,
                );
            }
        }
    }
}

/// A number that must not be negative.
pub(super) fn non_negative(
    value: Option<&Value>,
    at: impl FnOnce() -> String,
    findings: &mut Findings,
) {
    if value
        .and_then(Value::as_i64)
        .is_some_and(|number| number < 0)
    {
        findings.push(at(), "must be greater than or equal to 0");
    }
}

/// The user and group ids of a (pod or container) security context.
pub(super) fn security_context(context: Option<&Value>, at: &str, findings: &mut Findings) {
    let Some(context) = context.and_then(Value::as_object) else {
        return;
    };
    for id in ["runAsUser", "runAsGroup", "fsGroup"] {
        if let Some(number) = context.get(id).and_then(Value::as_i64)
            && !(0..=i64::from(i32::MAX)).contains(&number)
        {
            findings.push(
                format!("{at}/{id}"),
                "must be between 0 and 2147483647, inclusive",
            );
        }
    }
}

/// The sources of the volume at `at`: the names they refer to and their modes.
pub(super) fn volume_source(volume: &Map<String, Value>, at: &str, findings: &mut Findings) {
    for (source, name_field) in [("configMap", "name"), ("secret", "secretName")] {
        let Some(source_value) = volume.get(source).and_then(Value::as_object) else {
            continue;
        };
        if source_value
            .get(name_field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            findings.push(format!("{at}/{source}/{name_field}"), "is required");
        }
        if let Some(mode) = source_value.get("defaultMode").and_then(Value::as_i64)
            && !(0..=0o777).contains(&mode)
        {
            findings.push(
                format!("{at}/{source}/defaultMode"),
                "must be a file mode between 0 and 0777 (511)",
            );
        }
    }
}

/// A pod's tolerations: an empty key only with `operator: Exists`.
pub(super) fn tolerations(spec: &Map<String, Value>, at: &str, findings: &mut Findings) {
    for (index, toleration) in spec
        .get("tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(toleration) = toleration.as_object() else {
            continue;
        };
        let text = |key: &str| {
            toleration
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let at = format!("{at}/tolerations/{index}");
        if text("key").is_empty() && text("operator") != "Exists" {
            findings.push(
                format!("{at}/operator"),
                "must be `Exists` when `key` is empty",
            );
        } else if !text("key").is_empty() {
            findings.check(|| format!("{at}/key"), formats::qualified_name(text("key")));
        }
    }
}

/// The downward-API field an environment variable reads.
pub(super) fn env_field_ref(variable: &Map<String, Value>, at: &str, findings: &mut Findings) {
    let Some(path) = variable
        .get("valueFrom")
        .and_then(|from| from.pointer("/fieldRef/fieldPath"))
        .and_then(Value::as_str)
    else {
        return;
    };
    let labelled = ["metadata.labels['", "metadata.annotations['"]
        .iter()
        .any(|prefix| path.starts_with(prefix) && path.ends_with("']"));
    if !ENV_FIELD_PATHS.contains(&path) && !labelled {
        findings.push(
            format!("{at}/valueFrom/fieldRef/fieldPath"),
            format!("`{path}` is not a field the downward API offers to environment variables"),
        );
    }
}

/// A `LabelSelector`: its labels, and the operator and values of each expression.
pub(super) fn label_selector(selector: Option<&Value>, at: &str, findings: &mut Findings) {
    let Some(selector) = selector.and_then(Value::as_object) else {
        return;
    };
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        super::label_map(labels, &format!("{at}/matchLabels"), findings);
    }
    for (index, expression) in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(expression) = expression.as_object() else {
            continue;
        };
        let at = format!("{at}/matchExpressions/{index}");
        let values = expression
            .get("values")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        match expression.get("operator").and_then(Value::as_str) {
            Some("In" | "NotIn") if values == 0 => {
                findings.push(
                    format!("{at}/values"),
                    "must be non-empty for `In` and `NotIn`",
                );
            }
            Some("Exists" | "DoesNotExist") if values > 0 => {
                findings.push(
                    format!("{at}/values"),
                    "must be empty for `Exists` and `DoesNotExist`",
                );
            }
            Some("In" | "NotIn" | "Exists" | "DoesNotExist") | None => {}
            Some(other) => findings.push(
                format!("{at}/operator"),
                format!("`{other}` is not `In`, `NotIn`, `Exists` or `DoesNotExist`"),
            ),
        }
        if let Some(key) = expression.get("key").and_then(Value::as_str) {
            findings.check(|| format!("{at}/key"), formats::qualified_name(key));
        }
    }
}

/// An int-or-string that must be a non-negative count or a percentage (`maxSurge`,
/// `minAvailable`).
pub(super) fn count_or_percent(
    value: Option<&Value>,
    at: impl FnOnce() -> String,
    findings: &mut Findings,
) {
    match value {
        Some(Value::String(text)) => {
            let digits = text.strip_suffix('%').unwrap_or_default();
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                findings.push(at(), "must be a number or a percentage such as `25%`");
            }
        }
        other => non_negative(other, at, findings),
    }
}
