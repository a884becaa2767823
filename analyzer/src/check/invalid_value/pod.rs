//! The API server's validation of a pod spec (`ValidatePodSpec`) for the fields
//! `invalid-value` checks.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{Findings, escape, fields, formats};

/// The three container lists, in the order the API server validates them.
const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// Checks the pod spec `spec` at `pointer`; `restart_policies` are those the workload allows.
pub(super) fn pod_spec(
    spec: &Value,
    pointer: &str,
    restart_policies: Option<&[&str]>,
    findings: &mut Findings,
) {
    let Some(spec) = spec.as_object() else {
        return;
    };
    let volumes = volumes(spec, pointer, findings);
    if spec
        .get("containers")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        findings.push(
            format!("{pointer}/containers"),
            "must have at least one container",
        );
    }
    let mut container_names = HashSet::new();
    for list in CONTAINER_LISTS {
        let Some(containers) = spec.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (index, container) in containers.iter().enumerate() {
            let Some(container) = container.as_object() else {
                continue;
            };
            let at = format!("{pointer}/{list}/{index}");
            // A missing name is the schema's finding (`name` is required there).
            let name = text(container, "name");
            if name.is_empty() && container.contains_key("name") {
                findings.push(format!("{at}/name"), "is required");
            }
            if let Some(problem) = formats::dns1123_label(name).filter(|_| !name.is_empty()) {
                findings.push(format!("{at}/name"), problem);
            } else if !name.is_empty() && !container_names.insert(name) {
                findings.push(
                    format!("{at}/name"),
                    format!("duplicates container name `{name}` (names are unique in a pod)"),
                );
            }
            if text(container, "image").is_empty() {
                findings.push(format!("{at}/image"), "is required");
            }
            ports(container, &at, findings);
            env(container, &at, findings);
            volume_mounts(container, &at, &volumes, findings);
            resources(container, &at, findings);
            fields::probes(container, &at, findings);
            fields::security_context(
                container.get("securityContext"),
                &format!("{at}/securityContext"),
                findings,
            );
        }
    }
    fields::security_context(
        spec.get("securityContext"),
        &format!("{pointer}/securityContext"),
        findings,
    );
    fields::tolerations(spec, pointer, findings);
    if let Some(account) = spec.get("serviceAccountName").and_then(Value::as_str)
        && !account.is_empty()
    {
        findings.check(
            || format!("{pointer}/serviceAccountName"),
            formats::dns1123_subdomain(account),
        );
    }
    // An empty restart policy is defaulted to `Always`.
    let policy = spec
        .get("restartPolicy")
        .and_then(Value::as_str)
        .map(|policy| if policy.is_empty() { "Always" } else { policy });
    if let (Some(allowed), Some(policy)) = (restart_policies, policy)
        && !allowed.contains(&policy)
    {
        findings.push(
            format!("{pointer}/restartPolicy"),
            format!(
                "must be {} for this workload, found `{policy}`",
                allowed
                    .iter()
                    .map(|policy| format!("`{policy}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        );
    }
    // A batch pod template must say how it restarts (the pod default, `Always`, is refused).
    if restart_policies == Some(&["OnFailure", "Never"][..]) && !spec.contains_key("restartPolicy")
    {
        findings.push(
            format!("{pointer}/restartPolicy"),
            "is required for a Job's pod template: `OnFailure` or `Never`",
        );
    }
}

fn text<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The declared volume names (checked: DNS-1123 labels, unique).
fn volumes<'a>(
    spec: &'a Map<String, Value>,
    pointer: &str,
    findings: &mut Findings,
) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (index, volume) in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(volume) = volume.as_object() else {
            continue;
        };
        fields::volume_source(volume, &format!("{pointer}/volumes/{index}"), findings);
        let at = format!("{pointer}/volumes/{index}/name");
        let name = text(volume, "name");
        if name.is_empty() {
            findings.push(at, "is required");
        } else if let Some(problem) = formats::dns1123_label(name) {
            findings.push(at, problem);
        } else if !names.insert(name) {
            findings.push(at, format!("duplicates volume name `{name}`"));
        }
    }
    names
}

fn ports(container: &Map<String, Value>, at: &str, findings: &mut Findings) {
    let mut names = HashSet::new();
    for (index, port) in container
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(port) = port.as_object() else {
            continue;
        };
        let at = format!("{at}/ports/{index}");
        let name = text(port, "name");
        if !name.is_empty() {
            if let Some(problem) = formats::port_name(name) {
                findings.push(format!("{at}/name"), problem);
            } else if !names.insert(name) {
                findings.push(
                    format!("{at}/name"),
                    format!("duplicates port name `{name}` of this container"),
                );
            }
        }
        if let Some(number) = port.get("containerPort").and_then(Value::as_i64) {
            findings.check(
                || format!("{at}/containerPort"),
                formats::port_number(number),
            );
        }
        if let Some(host_port) = port.get("hostPort").and_then(Value::as_i64)
            && host_port != 0
        {
            findings.check(|| format!("{at}/hostPort"), formats::port_number(host_port));
        }
    }
}

fn env(container: &Map<String, Value>, at: &str, findings: &mut Findings) {
    for (index, variable) in container
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(variable) = variable.as_object() {
            findings.check(
                || format!("{at}/env/{index}/name"),
                formats::env_var_name(text(variable, "name")),
            );
            fields::env_field_ref(variable, &format!("{at}/env/{index}"), findings);
        }
    }
}

fn volume_mounts(
    container: &Map<String, Value>,
    at: &str,
    volumes: &HashSet<&str>,
    findings: &mut Findings,
) {
    let mut paths = HashSet::new();
    for (index, mount) in container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(mount) = mount.as_object() else {
            continue;
        };
        let at = format!("{at}/volumeMounts/{index}");
        let name = text(mount, "name");
        if name.is_empty() {
            findings.push(format!("{at}/name"), "is required");
        } else if !volumes.contains(name) {
            findings.push(
                format!("{at}/name"),
                format!("names volume `{name}`, which the pod does not declare in `volumes`"),
            );
        }
        let path = text(mount, "mountPath");
        if path.is_empty() {
            findings.push(format!("{at}/mountPath"), "is required");
        } else if !paths.insert(path) {
            findings.push(
                format!("{at}/mountPath"),
                format!("mounts `{path}` a second time in this container"),
            );
        }
    }
}

fn resources(container: &Map<String, Value>, at: &str, findings: &mut Findings) {
    let Some(resources) = container.get("resources").and_then(Value::as_object) else {
        return;
    };
    let mut parsed: HashMap<(&str, &str), f64> = HashMap::new();
    for list in ["limits", "requests"] {
        let Some(amounts) = resources.get(list).and_then(Value::as_object) else {
            continue;
        };
        for (resource, amount) in amounts {
            let at = format!("{at}/resources/{list}/{}", escape(resource));
            let amount = match amount {
                // A quantity that does not parse is the schema's finding.
                Value::String(text) if !crate::schema::is_quantity(text) => continue,
                Value::String(text) => {
                    if formats::quantity_is_negative(text) {
                        findings.push(at, "must be greater than or equal to 0");
                        continue;
                    }
                    approximate(text)
                }
                Value::Number(number) => {
                    let value = number.as_f64().unwrap_or_default();
                    if value < 0.0 {
                        findings.push(at, "must be greater than or equal to 0");
                        continue;
                    }
                    Some(value)
                }
                _ => None,
            };
            if let Some(amount) = amount {
                parsed.insert((list, resource.as_str()), amount);
            }
        }
    }
    for ((list, resource), request) in &parsed {
        if *list != "requests" {
            continue;
        }
        if let Some(limit) = parsed.get(&("limits", *resource))
            && request > &(limit * (1.0 + 1e-9))
        {
            findings.push(
                format!("{at}/resources/requests/{}", escape(resource)),
                format!("must be less than or equal to the `{resource}` limit"),
            );
        }
    }
}

/// A quantity's value as a float (precise enough to compare a request with its limit).
fn approximate(text: &str) -> Option<f64> {
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent => 10f64.powi(exponent.get(1..)?.parse().ok()?),
    };
    Some(number * factor)
}
