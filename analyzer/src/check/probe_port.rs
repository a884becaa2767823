//! `probe-port` (warning): a liveness, readiness or startup probe checks a port its container
//! does not declare.
//!
//! A named port that no `ports` entry of the container carries never resolves: the kubelet
//! fails the probe every time, so a liveness or startup probe restarts the container forever
//! and a readiness probe keeps it out of its Service. A numbered port is compared only when the
//! container declares ports (declaring them is optional). kube-linter's `liveness-port`,
//! `readiness-port` and `startup-port`.
//!
//! ```yaml
//! ports:
//!   - { name: http, containerPort: 8080 }
//! livenessProbe:
//!   httpGet: { path: /healthz, port: metrics }   # warning: no port is named `metrics`
//! ```

use serde_json::{Map, Value};

use super::AppContext;
use super::container_security::finding;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

const PROBES: [&str; 3] = ["livenessProbe", "readinessProbe", "startupProbe"];
const HANDLERS: [&str; 3] = ["httpGet", "tcpSocket", "grpc"];

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    for container in &pod.spec.containers {
        let Some(raw) = pod.raw_container(&object.object, container) else {
            continue;
        };
        let declared = raw.get("ports").and_then(Value::as_array);
        for probe in PROBES {
            let Some((handler, port)) = probe_port(raw, probe) else {
                continue;
            };
            let missing = match port {
                Value::String(name) => !declared
                    .into_iter()
                    .flatten()
                    .any(|entry| entry.get("name").and_then(Value::as_str) == Some(name)),
                Value::Number(number) => declared.is_some_and(|ports| {
                    !ports.is_empty()
                        && !ports.iter().any(|entry| {
                            entry.get("containerPort").and_then(Value::as_i64) == number.as_i64()
                        })
                }),
                _ => false,
            };
            if missing {
                let (message, span) = finding(
                    ctx,
                    object,
                    pod,
                    container,
                    &format!("has a {probe} on port {port}, which the container does not declare"),
                    &format!("/{probe}/{handler}/port"),
                );
                out.push(ctx.at_object(object, Diagnostic::warning("probe-port", message, span)));
            }
        }
    }
}

/// The handler and port of `probe` of a container, when it checks a port.
fn probe_port<'a>(
    container: &'a Map<String, Value>,
    probe: &str,
) -> Option<(&'static str, &'a Value)> {
    let probe = container.get(probe)?;
    HANDLERS
        .into_iter()
        .find_map(|handler| Some((handler, probe.get(handler)?.get("port")?)))
}
