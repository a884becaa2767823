//! The enums the API server enforces, added to the generated schema when it is compiled.
//!
//! Upstream's published OpenAPI (swagger v2 and the v3 documents of 1.34) carries no `enum`:
//! the `+enum` markers of the Go types only reach the descriptions. This table is written by
//! hand from those markers, keeping only the fields whose values the API server's validation
//! (`pkg/apis/*/validation`) rejects outside the list (`field.NotSupported`), so that an enum
//! violation here is always a rejection there. An empty string is listed where the API server
//! accepts it (it defaults a plain string field; an empty optional pointer field is refused).

use serde_json::Value;

/// `(definition, property, allowed values)`; a property ending in `[]` constrains the items
/// of a list.
const ENUMS: &[(&str, &str, &[&str])] = &[
    (
        "io.k8s.api.core.v1.Container",
        "imagePullPolicy",
        &["Always", "IfNotPresent", "Never", ""],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "imagePullPolicy",
        &["Always", "IfNotPresent", "Never", ""],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "terminationMessagePolicy",
        &["File", "FallbackToLogsOnError", ""],
    ),
    (
        "io.k8s.api.core.v1.ContainerPort",
        "protocol",
        &["TCP", "UDP", "SCTP", ""],
    ),
    (
        "io.k8s.api.core.v1.ServicePort",
        "protocol",
        &["TCP", "UDP", "SCTP", ""],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "type",
        &["ClusterIP", "NodePort", "LoadBalancer", "ExternalName", ""],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "sessionAffinity",
        &["ClientIP", "None", ""],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "externalTrafficPolicy",
        &["Cluster", "Local", ""],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "internalTrafficPolicy",
        &["Cluster", "Local", ""],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ipFamilyPolicy",
        &["SingleStack", "PreferDualStack", "RequireDualStack", ""],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "restartPolicy",
        &["Always", "OnFailure", "Never", ""],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "dnsPolicy",
        &[
            "ClusterFirstWithHostNet",
            "ClusterFirst",
            "Default",
            "None",
            "",
        ],
    ),
    (
        "io.k8s.api.core.v1.HTTPGetAction",
        "scheme",
        &["HTTP", "HTTPS", ""],
    ),
    (
        "io.k8s.api.core.v1.Toleration",
        "operator",
        &["Exists", "Equal", ""],
    ),
    (
        "io.k8s.api.core.v1.Toleration",
        "effect",
        &["NoSchedule", "PreferNoSchedule", "NoExecute", ""],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        "accessModes[]",
        &[
            "ReadWriteOnce",
            "ReadOnlyMany",
            "ReadWriteMany",
            "ReadWriteOncePod",
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        "volumeMode",
        &["Block", "Filesystem"],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStrategy",
        "type",
        &["Recreate", "RollingUpdate", ""],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetSpec",
        "podManagementPolicy",
        &["OrderedReady", "Parallel", ""],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetUpdateStrategy",
        "type",
        &["RollingUpdate", "OnDelete", ""],
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetUpdateStrategy",
        "type",
        &["RollingUpdate", "OnDelete", ""],
    ),
    (
        "io.k8s.api.batch.v1.CronJobSpec",
        "concurrencyPolicy",
        &["Allow", "Forbid", "Replace", ""],
    ),
    (
        "io.k8s.api.batch.v1.JobSpec",
        "completionMode",
        &["NonIndexed", "Indexed"],
    ),
    (
        "io.k8s.api.networking.v1.HTTPIngressPath",
        "pathType",
        &["Exact", "Prefix", "ImplementationSpecific"],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicySpec",
        "policyTypes[]",
        &["Ingress", "Egress"],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicyPort",
        "protocol",
        &["TCP", "UDP", "SCTP"],
    ),
    (
        "io.k8s.api.core.v1.SeccompProfile",
        "type",
        &["Unconfined", "RuntimeDefault", "Localhost"],
    ),
    (
        "io.k8s.api.autoscaling.v2.MetricSpec",
        "type",
        &[
            "ContainerResource",
            "External",
            "Object",
            "Pods",
            "Resource",
        ],
    ),
    (
        "io.k8s.api.autoscaling.v2.MetricTarget",
        "type",
        &["Utilization", "Value", "AverageValue"],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        "unhealthyPodEvictionPolicy",
        &["IfHealthyBudget", "AlwaysAllow"],
    ),
];

/// Fields the OpenAPI lists as required that the API server defaults when they are absent:
/// `(definition, property)`.
const DEFAULTED: &[(&str, &str)] = &[("io.k8s.api.rbac.v1.RoleRef", "apiGroup")];

/// Drops [`DEFAULTED`] from the `required` lists of the artefact's definitions.
pub(crate) fn drop_defaulted(artefact: &mut Value) {
    for (definition, property) in DEFAULTED {
        if let Some(required) = artefact
            .get_mut("definitions")
            .and_then(|definitions| definitions.get_mut(*definition))
            .and_then(|schema| schema.get_mut("required"))
            .and_then(Value::as_array_mut)
        {
            required.retain(|name| name != property);
        }
    }
}

/// Adds [`ENUMS`] to the artefact's definitions (`{"definitions": {...}}`); an entry whose
/// definition or property the artefact lacks is skipped (a test checks there is none).
pub(crate) fn add_enums(artefact: &mut Value) -> usize {
    let mut added = 0;
    for (definition, property, allowed) in ENUMS {
        let (name, items) = match property.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (*property, false),
        };
        let Some(mut schema) = artefact
            .get_mut("definitions")
            .and_then(|definitions| definitions.get_mut(*definition))
            .and_then(|schema| schema.get_mut("properties"))
            .and_then(|properties| properties.get_mut(name))
        else {
            continue;
        };
        if items {
            let Some(item) = schema.get_mut("items") else {
                continue;
            };
            schema = item;
        }
        if let Some(object) = schema.as_object_mut() {
            let values = allowed.iter().map(|value| Value::from(*value)).collect();
            object.insert("enum".to_owned(), Value::Array(values));
            added += 1;
        }
    }
    added
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_enum_names_a_property_of_the_schema() {
        let mut artefact: serde_json::Value =
            serde_json::from_str(super::super::KUBERNETES_SCHEMA).unwrap();
        assert_eq!(super::add_enums(&mut artefact), super::ENUMS.len());
    }
}
