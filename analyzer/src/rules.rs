//! Every diagnostic rule id the analyzer emits, with its severity and a one-line summary. The
//! ids are stable: scripts, SARIF output and suppressions refer to them. The edge
//! (`agent::report`) uses this table for rule metadata; a test keeps it in sync with the code.

use crate::Severity;

/// One rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub id: &'static str,
    pub severity: Severity,
    pub summary: &'static str,
}

/// All rules, by id.
pub const RULES: &[Rule] = &[
    rule(
        "cue-error",
        Severity::Error,
        "a definition's CUE template fails to evaluate (conflict, bad reference, incomplete output)",
    ),
    rule(
        "cue-syntax",
        Severity::Error,
        "a definition's CUE template is not valid CUE syntax",
    ),
    rule(
        "dangling-hpa",
        Severity::Warning,
        "a HorizontalPodAutoscaler scales an object its app does not have (kube-linter dangling-horizontalpodautoscaler)",
    ),
    rule(
        "dangling-ingress",
        Severity::Warning,
        "an Ingress routes to a Service its app does not have (kube-linter dangling-ingress)",
    ),
    rule(
        "dangling-service",
        Severity::Warning,
        "a Service's selector matches no pod template of its app (kube-linter dangling-service)",
    ),
    rule(
        "dependency-cycle",
        Severity::Error,
        "components or workflow steps whose `dependsOn` form a cycle",
    ),
    rule(
        "deprecated-api-version",
        Severity::Warning,
        "a rendered object uses an API version deprecated in the target Kubernetes release",
    ),
    rule(
        "deprecated-service-account-field",
        Severity::Warning,
        "a pod spec sets the deprecated `serviceAccount` (kube-linter deprecated-service-account-field)",
    ),
    rule(
        "duplicate-app",
        Severity::Error,
        "two Applications have the same namespace and name",
    ),
    rule(
        "duplicate-component",
        Severity::Error,
        "two components of an Application have the same name",
    ),
    rule(
        "duplicate-object",
        Severity::Error,
        "two Applications render the same Kubernetes object",
    ),
    rule(
        "env-var-secret",
        Severity::Warning,
        "a secret-looking environment variable has a literal value (kube-linter env-var-secret)",
    ),
    rule(
        "host-ipc",
        Severity::Warning,
        "a pod shares the host's IPC namespace (kube-linter host-ipc)",
    ),
    rule(
        "host-network",
        Severity::Warning,
        "a pod uses the host's network namespace",
    ),
    rule(
        "host-path",
        Severity::Warning,
        "a pod mounts a `hostPath` volume",
    ),
    rule(
        "host-pid",
        Severity::Warning,
        "a pod shares the host's process namespace (kube-linter host-pid)",
    ),
    rule(
        "image-tag",
        Severity::Warning,
        "a container image has no tag or the `latest` tag",
    ),
    rule(
        "internal-error",
        Severity::Error,
        "the renderer failed on this app; a Driftless bug to report",
    ),
    rule(
        "invalid-field",
        Severity::Error,
        "a field of an Application or definition has the wrong shape",
    ),
    rule(
        "invalid-name",
        Severity::Error,
        "an Application or component name is not a valid DNS-1123 name",
    ),
    rule(
        "invalid-properties",
        Severity::Error,
        "properties do not satisfy the definition's `parameter` schema",
    ),
    rule(
        "invalid-value",
        Severity::Error,
        "a field the API server's validation rejects: a name, port, quantity, env var name, volume mount, restart policy, ...",
    ),
    rule(
        "missing-anti-affinity",
        Severity::Warning,
        "a replicated workload has no pod anti-affinity or topology spread (kube-linter no-anti-affinity)",
    ),
    rule(
        "missing-field",
        Severity::Error,
        "a required field (`kind`, `metadata.name`, a component's `name` or `type`) is missing",
    ),
    rule(
        "missing-kind",
        Severity::Error,
        "a rendered object has no `apiVersion` or no `kind`",
    ),
    rule(
        "missing-probes",
        Severity::Warning,
        "a long-running container has no liveness or readiness probe",
    ),
    rule(
        "missing-property",
        Severity::Error,
        "a property the definition's `parameter` requires is not given",
    ),
    rule(
        "missing-resources",
        Severity::Warning,
        "a container has no resource requests or limits",
    ),
    rule(
        "missing-service-account",
        Severity::Warning,
        "a pod runs as a ServiceAccount its app does not create (kube-linter non-existent-service-account)",
    ),
    rule(
        "net-raw-capability",
        Severity::Warning,
        "a container does not drop the `NET_RAW` capability (kube-linter drop-net-raw-capability)",
    ),
    rule(
        "patch-conflict",
        Severity::Error,
        "a trait's patch conflicts with the workload as rendered so far",
    ),
    rule(
        "pdb-blocks-eviction",
        Severity::Warning,
        "a PodDisruptionBudget allows no disruption (kube-linter pdb-max-unavailable, pdb-min-available)",
    ),
    rule(
        "pdb-unhealthy-eviction",
        Severity::Warning,
        "a PodDisruptionBudget does not let unhealthy pods be evicted (kube-linter pdb-unhealthy-pod-eviction-policy)",
    ),
    rule(
        "privilege-escalation",
        Severity::Warning,
        "a container allows privilege escalation or adds `SYS_ADMIN` (kube-linter privilege-escalation-container)",
    ),
    rule(
        "privileged-container",
        Severity::Warning,
        "a container runs privileged",
    ),
    rule(
        "probe-port",
        Severity::Warning,
        "a probe checks a port its container does not declare (kube-linter liveness-port, readiness-port, startup-port)",
    ),
    rule(
        "property-not-allowed",
        Severity::Error,
        "a property's value is not among the values an enum or disjunction of `parameter` allows",
    ),
    rule(
        "property-out-of-range",
        Severity::Error,
        "a number outside the bounds `parameter` declares",
    ),
    rule(
        "property-pattern",
        Severity::Error,
        "a string that does not match the regular expression `parameter` declares",
    ),
    rule(
        "property-type",
        Severity::Error,
        "a property's value has a type `parameter` does not accept",
    ),
    rule(
        "remote-placement",
        Severity::Warning,
        "a topology places the app on another cluster with different overrides; only the local placement is rendered",
    ),
    rule(
        "removed-api-version",
        Severity::Error,
        "a rendered object uses an API version the target Kubernetes release no longer serves",
    ),
    rule(
        "render-budget",
        Severity::Error,
        "a definition's template takes more evaluation steps than the budget allows; its app is not rendered",
    ),
    rule(
        "render-deadline",
        Severity::Error,
        "rendering an app takes longer than its time limit; the app is not rendered",
    ),
    rule(
        "run-as-root",
        Severity::Warning,
        "a container may run as root (kube-linter run-as-non-root)",
    ),
    rule(
        "schema-violation",
        Severity::Error,
        "a rendered object does not match its kind's OpenAPI schema (Kubernetes 1.34 or a CRD in the repository)",
    ),
    rule(
        "selector-mismatch",
        Severity::Error,
        "a workload's selector is missing, empty or does not match its pod template's labels",
    ),
    rule(
        "sensitive-host-mount",
        Severity::Warning,
        "a pod mounts a sensitive host path or a runtime socket (kube-linter sensitive-host-mounts, docker-sock)",
    ),
    rule(
        "source-boundary",
        Severity::Error,
        "an object or topology cluster is outside its source's declared boundary, or in the reserved tracker namespace",
    ),
    rule(
        "ssh-port",
        Severity::Warning,
        "a container exposes port 22 (kube-linter ssh-port)",
    ),
    rule(
        "trait-conflict",
        Severity::Error,
        "two traits of a component conflict (`conflictsWith`)",
    ),
    rule(
        "trait-not-applicable",
        Severity::Warning,
        "a trait does not apply to the component's workload (`appliesToWorkloads`)",
    ),
    rule(
        "undocumented-parameter",
        Severity::Warning,
        "a repository definition's parameter has no `// +usage=` description",
    ),
    rule(
        "unknown-cluster",
        Severity::Error,
        "a topology policy names a cluster missing from driftless.yaml's `clusters`",
    ),
    rule(
        "unknown-component-type",
        Severity::Error,
        "no ComponentDefinition has the component's type",
    ),
    rule(
        "unknown-dependency",
        Severity::Error,
        "`dependsOn` names no component or workflow step of the app",
    ),
    rule(
        "unknown-field",
        Severity::Warning,
        "a key the Application schema does not have (often a typo)",
    ),
    rule(
        "unknown-kind",
        Severity::Warning,
        "a document under `apps/` is neither an Application nor a definition",
    ),
    rule(
        "unknown-policy",
        Severity::Error,
        "a deploy step names a policy the Application does not declare",
    ),
    rule(
        "unknown-policy-type",
        Severity::Error,
        "no PolicyDefinition has a custom policy's type",
    ),
    rule(
        "unknown-property",
        Severity::Error,
        "a property the definition's `parameter` does not declare (did you mean ...?)",
    ),
    rule(
        "unknown-trait-type",
        Severity::Error,
        "no TraitDefinition has the trait's type",
    ),
    rule(
        "unknown-workflow",
        Severity::Error,
        "`workflow.ref` names a Workflow that is not in the app's namespace",
    ),
    rule(
        "unknown-workflow-step-type",
        Severity::Error,
        "no WorkflowStepDefinition has the step's type",
    ),
    rule(
        "unsafe-sysctl",
        Severity::Warning,
        "a pod sets a sysctl outside the safe set (kube-linter unsafe-sysctls)",
    ),
    rule(
        "unserved-api",
        Severity::Error,
        "a rendered object's `apiVersion` and `kind` are not served by the target Kubernetes release or the repository's CRDs (did you mean ...?)",
    ),
    rule(
        "unsupported-definition",
        Severity::Error,
        "the definition needs a cluster or provider (`vela/*` imports, ref-objects) or has no CUE template",
    ),
    rule(
        "unsupported-policy",
        Severity::Error,
        "the app's placements render differently and none is the local cluster",
    ),
    rule(
        "writable-root-filesystem",
        Severity::Warning,
        "a container's root filesystem is writable (kube-linter no-read-only-root-fs)",
    ),
    rule(
        "yaml-lenient",
        Severity::Warning,
        "a YAML file breaks a rule that KubeVela's reader (go-yaml) does not enforce: a repeated mapping key (the last value wins) or an under-indented line of a quoted string",
    ),
    rule("yaml-syntax", Severity::Error, "a YAML file does not parse"),
];

const fn rule(id: &'static str, severity: Severity, summary: &'static str) -> Rule {
    Rule {
        id,
        severity,
        summary,
    }
}

/// The rule with this id.
pub fn rule_by_id(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|rule| rule.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule id passed to the `Diagnostic` constructors in the sources is in [`RULES`],
    /// with the same severity, and every rule is used.
    #[test]
    fn the_table_matches_the_code() {
        let pattern = regex::Regex::new(r#"Diagnostic::(error|warning)\(\s*"([a-z-]+)""#).unwrap();
        let mut used = std::collections::BTreeSet::new();
        let mut stack = vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for capture in pattern.captures_iter(&text) {
                let severity = if &capture[1] == "error" {
                    Severity::Error
                } else {
                    Severity::Warning
                };
                used.insert((capture[2].to_owned(), severity));
            }
        }
        for (id, severity) in &used {
            let rule = rule_by_id(id).unwrap_or_else(|| panic!("rule `{id}` is not in RULES"));
            assert_eq!(rule.severity, *severity, "severity of `{id}`");
        }
        for rule in RULES {
            assert!(
                used.iter().any(|(id, _)| id == rule.id),
                "rule `{}` is never emitted",
                rule.id
            );
        }
        let mut ids: Vec<&str> = RULES.iter().map(|rule| rule.id).collect();
        ids.sort_unstable();
        assert_eq!(
            ids,
            RULES.iter().map(|rule| rule.id).collect::<Vec<_>>(),
            "RULES is sorted"
        );
    }
}
