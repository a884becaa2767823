//! `env-var-secret` (warning): a container's environment variable whose name says it holds a
//! secret (`SECRET`, `PASSWORD`, `TOKEN`, `API_KEY`, ...) has a literal `value`.
//!
//! The value is then in the repository and in the object, readable by anyone who can read the
//! workload. kube-linter's `env-var-secret`. Use `valueFrom.secretKeyRef`. The message never
//! shows the value.
//!
//! ```yaml
//! env:
//!   - name: DB_PASSWORD
//!     value: hunter2          # warning
//! ```

use serde_json::Value;

use super::AppContext;
use super::container_security::finding;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

/// Name parts (upper case) that mark a secret.
const SECRET_WORDS: &[&str] = &[
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "TOKEN",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
];

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    for container in &pod.spec.containers {
        let env = pod
            .raw_container(&object.object, container)
            .and_then(|raw| raw.get("env"))
            .and_then(Value::as_array);
        for (index, variable) in env.into_iter().flatten().enumerate() {
            let name = variable
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let literal = variable
                .get("value")
                .and_then(Value::as_str)
                .is_some_and(|value| !value.is_empty());
            let upper = name.to_uppercase();
            if literal && SECRET_WORDS.iter().any(|word| upper.contains(word)) {
                {
                    let (message, span) = finding(
                        ctx,
                        object,
                        pod,
                        container,
                        &format!(
                            "sets `{name}` to a literal value; read it from a Secret (`valueFrom.secretKeyRef`)"
                        ),
                        &format!("/env/{index}/value"),
                    );
                    out.push(
                        ctx.at_object(object, Diagnostic::warning("env-var-secret", message, span)),
                    );
                }
            }
        }
    }
}
