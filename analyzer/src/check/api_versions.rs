//! The API versions the target Kubernetes release serves, and those it removed or deprecated.
//!
//! Served: the group-versions a default kube-apiserver 1.34 enables
//! (`stableAPIGroupVersionsEnabledByDefault` in upstream's `pkg/controlplane/instance.go`, plus
//! the apiextensions and apiregistration servers' `v1`; every beta and alpha group-version of
//! 1.34 is disabled by default), with the kinds the generated schema has for them. Used by
//! `unserved-api`.
//!
//! Retired: the upstream deprecation guide
//! (<https://kubernetes.io/docs/reference/using-api/deprecation-guide/>) and the
//! `+k8s:prerelease-lifecycle-gen` markers of the 1.34 API types, with the release that
//! deprecated and removed each and its replacement. Used by `removed-api-version` and
//! `deprecated-api-version`.

use std::collections::{BTreeSet, HashSet};
use std::sync::OnceLock;

/// The Kubernetes release the analysis targets (`1.34`).
pub(crate) const TARGET_VERSION: (u32, u32) = (1, 34);

/// One retired `(apiVersion, kind)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetiredApi {
    pub(crate) api_version: &'static str,
    pub(crate) kind: &'static str,
    /// The minor release of 1.x that deprecated it.
    pub(crate) deprecated_in: u32,
    /// The minor release of 1.x that stopped serving it; `None` when no removal is planned.
    pub(crate) removed_in: Option<u32>,
    pub(crate) replacement: &'static str,
}

const fn retired(
    api_version: &'static str,
    kind: &'static str,
    deprecated_in: u32,
    removed_in: Option<u32>,
    replacement: &'static str,
) -> RetiredApi {
    RetiredApi {
        api_version,
        kind,
        deprecated_in,
        removed_in,
        replacement,
    }
}

/// Every entry of the deprecation guide, by removal release.
pub(crate) const RETIRED_APIS: &[RetiredApi] = &[
    // v1.16
    retired("extensions/v1beta1", "Deployment", 9, Some(16), "apps/v1"),
    retired("apps/v1beta1", "Deployment", 9, Some(16), "apps/v1"),
    retired("apps/v1beta2", "Deployment", 9, Some(16), "apps/v1"),
    retired("extensions/v1beta1", "DaemonSet", 9, Some(16), "apps/v1"),
    retired("apps/v1beta2", "DaemonSet", 9, Some(16), "apps/v1"),
    retired("extensions/v1beta1", "ReplicaSet", 9, Some(16), "apps/v1"),
    retired("apps/v1beta1", "ReplicaSet", 9, Some(16), "apps/v1"),
    retired("apps/v1beta2", "ReplicaSet", 9, Some(16), "apps/v1"),
    retired("apps/v1beta1", "StatefulSet", 9, Some(16), "apps/v1"),
    retired("apps/v1beta2", "StatefulSet", 9, Some(16), "apps/v1"),
    retired(
        "extensions/v1beta1",
        "NetworkPolicy",
        9,
        Some(16),
        "networking.k8s.io/v1",
    ),
    retired(
        "extensions/v1beta1",
        "PodSecurityPolicy",
        10,
        Some(16),
        "policy/v1beta1",
    ),
    // v1.22
    retired(
        "admissionregistration.k8s.io/v1beta1",
        "MutatingWebhookConfiguration",
        16,
        Some(22),
        "admissionregistration.k8s.io/v1",
    ),
    retired(
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingWebhookConfiguration",
        16,
        Some(22),
        "admissionregistration.k8s.io/v1",
    ),
    retired(
        "apiextensions.k8s.io/v1beta1",
        "CustomResourceDefinition",
        16,
        Some(22),
        "apiextensions.k8s.io/v1",
    ),
    retired(
        "apiregistration.k8s.io/v1beta1",
        "APIService",
        19,
        Some(22),
        "apiregistration.k8s.io/v1",
    ),
    retired(
        "authentication.k8s.io/v1beta1",
        "TokenReview",
        19,
        Some(22),
        "authentication.k8s.io/v1",
    ),
    retired(
        "authorization.k8s.io/v1beta1",
        "LocalSubjectAccessReview",
        19,
        Some(22),
        "authorization.k8s.io/v1",
    ),
    retired(
        "authorization.k8s.io/v1beta1",
        "SelfSubjectAccessReview",
        19,
        Some(22),
        "authorization.k8s.io/v1",
    ),
    retired(
        "authorization.k8s.io/v1beta1",
        "SubjectAccessReview",
        19,
        Some(22),
        "authorization.k8s.io/v1",
    ),
    retired(
        "certificates.k8s.io/v1beta1",
        "CertificateSigningRequest",
        19,
        Some(22),
        "certificates.k8s.io/v1",
    ),
    retired(
        "coordination.k8s.io/v1beta1",
        "Lease",
        19,
        Some(22),
        "coordination.k8s.io/v1",
    ),
    retired(
        "extensions/v1beta1",
        "Ingress",
        14,
        Some(22),
        "networking.k8s.io/v1",
    ),
    retired(
        "networking.k8s.io/v1beta1",
        "Ingress",
        19,
        Some(22),
        "networking.k8s.io/v1",
    ),
    retired(
        "networking.k8s.io/v1beta1",
        "IngressClass",
        19,
        Some(22),
        "networking.k8s.io/v1",
    ),
    retired(
        "rbac.authorization.k8s.io/v1beta1",
        "ClusterRole",
        17,
        Some(22),
        "rbac.authorization.k8s.io/v1",
    ),
    retired(
        "rbac.authorization.k8s.io/v1beta1",
        "ClusterRoleBinding",
        17,
        Some(22),
        "rbac.authorization.k8s.io/v1",
    ),
    retired(
        "rbac.authorization.k8s.io/v1beta1",
        "Role",
        17,
        Some(22),
        "rbac.authorization.k8s.io/v1",
    ),
    retired(
        "rbac.authorization.k8s.io/v1beta1",
        "RoleBinding",
        17,
        Some(22),
        "rbac.authorization.k8s.io/v1",
    ),
    retired(
        "scheduling.k8s.io/v1beta1",
        "PriorityClass",
        14,
        Some(22),
        "scheduling.k8s.io/v1",
    ),
    retired(
        "storage.k8s.io/v1beta1",
        "CSIDriver",
        19,
        Some(22),
        "storage.k8s.io/v1",
    ),
    retired(
        "storage.k8s.io/v1beta1",
        "CSINode",
        17,
        Some(22),
        "storage.k8s.io/v1",
    ),
    retired(
        "storage.k8s.io/v1beta1",
        "StorageClass",
        19,
        Some(22),
        "storage.k8s.io/v1",
    ),
    retired(
        "storage.k8s.io/v1beta1",
        "VolumeAttachment",
        19,
        Some(22),
        "storage.k8s.io/v1",
    ),
    // v1.25
    retired("batch/v1beta1", "CronJob", 21, Some(25), "batch/v1"),
    retired(
        "discovery.k8s.io/v1beta1",
        "EndpointSlice",
        21,
        Some(25),
        "discovery.k8s.io/v1",
    ),
    retired(
        "events.k8s.io/v1beta1",
        "Event",
        19,
        Some(25),
        "events.k8s.io/v1",
    ),
    retired(
        "autoscaling/v2beta1",
        "HorizontalPodAutoscaler",
        22,
        Some(25),
        "autoscaling/v2",
    ),
    retired(
        "policy/v1beta1",
        "PodDisruptionBudget",
        21,
        Some(25),
        "policy/v1",
    ),
    retired(
        "policy/v1beta1",
        "PodSecurityPolicy",
        21,
        Some(25),
        "Pod Security Admission",
    ),
    retired(
        "node.k8s.io/v1beta1",
        "RuntimeClass",
        20,
        Some(25),
        "node.k8s.io/v1",
    ),
    // v1.26
    retired(
        "flowcontrol.apiserver.k8s.io/v1beta1",
        "FlowSchema",
        23,
        Some(26),
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    retired(
        "flowcontrol.apiserver.k8s.io/v1beta1",
        "PriorityLevelConfiguration",
        23,
        Some(26),
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    retired(
        "autoscaling/v2beta2",
        "HorizontalPodAutoscaler",
        23,
        Some(26),
        "autoscaling/v2",
    ),
    // v1.27
    retired(
        "storage.k8s.io/v1beta1",
        "CSIStorageCapacity",
        24,
        Some(27),
        "storage.k8s.io/v1",
    ),
    // v1.29
    retired(
        "flowcontrol.apiserver.k8s.io/v1beta2",
        "FlowSchema",
        26,
        Some(29),
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    retired(
        "flowcontrol.apiserver.k8s.io/v1beta2",
        "PriorityLevelConfiguration",
        26,
        Some(29),
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    // v1.32
    retired(
        "flowcontrol.apiserver.k8s.io/v1beta3",
        "FlowSchema",
        29,
        Some(32),
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    retired(
        "flowcontrol.apiserver.k8s.io/v1beta3",
        "PriorityLevelConfiguration",
        29,
        Some(32),
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    // Deprecated and still served.
    retired(
        "v1",
        "ComponentStatus",
        19,
        None,
        "none (use the components' health endpoints)",
    ),
    retired(
        "v1",
        "Endpoints",
        33,
        None,
        "discovery.k8s.io/v1 EndpointSlice",
    ),
];

/// The entry for an object's `apiVersion` and `kind`, if it is retired: from the deprecation
/// guide's table, else from Kubernetes' lifecycle data of its alpha and beta types
/// ([`super::api_lifecycle`]).
pub(crate) fn lookup(api_version: &str, kind: &str) -> Option<RetiredApi> {
    if let Some(api) = RETIRED_APIS
        .iter()
        .find(|api| api.api_version == api_version && api.kind == kind)
    {
        return Some(*api);
    }
    super::api_lifecycle::API_LIFECYCLE
        .iter()
        .find(|(v, k, ..)| *v == api_version && *k == kind)
        .map(
            |&(api_version, kind, _, deprecated_in, removed_in, replacement)| RetiredApi {
                api_version,
                kind,
                deprecated_in,
                removed_in,
                replacement,
            },
        )
}

/// What to use instead of `api`: its replacement, else the version of its kind the target
/// release serves, else any served version.
pub(crate) fn replacement_of(api: &RetiredApi) -> String {
    if !api.replacement.is_empty() {
        return api.replacement.to_owned();
    }
    match builtin_apis().suggest(api.api_version, api.kind) {
        Some((api_version, kind)) if kind == api.kind => format!("{api_version} {kind}"),
        _ => "a version the cluster serves".to_owned(),
    }
}

/// True when `removed_in` is at or before the target release.
pub(crate) fn is_removed(api: &RetiredApi) -> bool {
    api.removed_in
        .is_some_and(|minor| (1, minor) <= TARGET_VERSION)
}

/// The group-versions a default kube-apiserver of the target release serves.
pub(crate) const SERVED_GROUP_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "apiextensions.k8s.io/v1",
    "apiregistration.k8s.io/v1",
    "apps/v1",
    "authentication.k8s.io/v1",
    "authorization.k8s.io/v1",
    "autoscaling/v1",
    "autoscaling/v2",
    "batch/v1",
    "certificates.k8s.io/v1",
    "coordination.k8s.io/v1",
    "discovery.k8s.io/v1",
    "events.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1",
    "networking.k8s.io/v1",
    "node.k8s.io/v1",
    "policy/v1",
    "rbac.authorization.k8s.io/v1",
    "resource.k8s.io/v1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1",
];

/// Kinds the schema lists in every group-version that are not objects one can apply.
const NOT_APPLICABLE_KINDS: &[&str] = &["DeleteOptions", "WatchEvent", "Status", "APIGroup"];

/// The built-in API of the target release: what it serves, and which groups are built in.
pub(crate) struct BuiltinApis {
    /// `(apiVersion, kind)` of every served kind (lists excluded).
    served: HashSet<(&'static str, &'static str)>,
    /// Every group the schema knows, served or retired (`""` is the core group).
    groups: HashSet<&'static str>,
    /// The served pairs, sorted, for suggestions.
    sorted: BTreeSet<(&'static str, &'static str)>,
}

/// The built-in API, from the embedded schema.
pub(crate) fn builtin_apis() -> &'static BuiltinApis {
    static APIS: OnceLock<BuiltinApis> = OnceLock::new();
    APIS.get_or_init(|| {
        let schema = crate::schema::kubernetes();
        let mut served = HashSet::new();
        let mut groups = HashSet::new();
        for (api_version, kind) in schema.kinds() {
            groups.insert(group_of(api_version));
            let applicable = !NOT_APPLICABLE_KINDS.contains(&kind) && !kind.ends_with("List");
            if applicable && SERVED_GROUP_VERSIONS.contains(&api_version) {
                served.insert((api_version, kind));
            }
        }
        let sorted = served.iter().copied().collect();
        BuiltinApis {
            served,
            groups,
            sorted,
        }
    })
}

impl BuiltinApis {
    /// True when the target release serves `kind` at `api_version`.
    pub(crate) fn serves(&self, api_version: &str, kind: &str) -> bool {
        self.served.contains(&(api_version, kind))
    }

    /// True when `group` is one of Kubernetes' own (served now or once).
    pub(crate) fn is_builtin_group(&self, group: &str) -> bool {
        self.groups.contains(group)
    }

    /// The served `(apiVersion, kind)` closest to what was written: the same kind in another
    /// version of its group (or any group), else the kind of the same group-version (or any)
    /// nearest in spelling.
    pub(crate) fn suggest(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Option<(&'static str, &'static str)> {
        let group = group_of(api_version);
        let same_kind = || self.sorted.iter().filter(|(_, k)| *k == kind);
        if let Some(found) = same_kind()
            .find(|(v, _)| group_of(v) == group)
            .or_else(|| same_kind().next())
        {
            return Some(*found);
        }
        let nearest = |candidates: &mut dyn Iterator<Item = &(&'static str, &'static str)>| {
            candidates
                .map(|pair| {
                    (
                        strsim::damerau_levenshtein(&pair.1.to_lowercase(), &kind.to_lowercase()),
                        pair,
                    )
                })
                .filter(|(distance, _)| *distance <= 2.max(kind.len() / 4))
                .min_by_key(|(distance, _)| *distance)
                .map(|(_, pair)| *pair)
        };
        nearest(&mut self.sorted.iter().filter(|(v, _)| *v == api_version))
            .or_else(|| nearest(&mut self.sorted.iter()))
    }
}

/// The group of an `apiVersion` (`""` for the core group's `v1`).
pub(crate) fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}
