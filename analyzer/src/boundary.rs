//! What one source may touch: the destination clusters and namespaces (globs), the
//! cluster-scoped kinds it may create, the kinds it may never write, and the namespaces reserved
//! for Driftless itself (the resource trackers').
//!
//! One declaration, checked twice: the `source-boundary` rule reports violations in the render
//! (so a pull request's preview shows them before anything is applied), and the agent checks
//! every object again at apply, where the kind's scope is known from discovery. Pure data and
//! pure checks: no client, no clock.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// A list of globs with the patterns as written, for messages.
#[derive(Debug, Clone)]
pub struct Globs {
    patterns: Vec<String>,
    set: GlobSet,
}

impl PartialEq for Globs {
    fn eq(&self, other: &Globs) -> bool {
        self.patterns == other.patterns
    }
}

impl Globs {
    /// Compiles `patterns` (`team-a`, `team-a-*`, `*`).
    ///
    /// # Errors
    ///
    /// The first pattern that is not a valid glob, with the reason.
    pub fn new(patterns: &[String]) -> Result<Globs, (String, String)> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let glob =
                Glob::new(pattern).map_err(|error| (pattern.clone(), error.kind().to_string()))?;
            builder.add(glob);
        }
        let set = builder
            .build()
            .map_err(|error| (patterns.join(", "), error.kind().to_string()))?;
        Ok(Globs {
            patterns: patterns.to_vec(),
            set,
        })
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.set.is_match(text)
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// One source's boundary. [`SourceBoundary::default`] allows everything but the reserved
/// namespaces: a source that declares nothing keeps working as before.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceBoundary {
    /// The source's name, for messages.
    pub source: String,
    /// Namespaces its namespaced objects may be in; `None`: any.
    pub namespaces: Option<Globs>,
    /// Clusters it may deploy to; `None`: any.
    pub clusters: Option<Globs>,
    /// Cluster-scoped kinds it may create (`Namespace`, `rbac.authorization.k8s.io/ClusterRole`);
    /// `None`: any (nothing declared). A declared boundary defaults to none.
    pub cluster_scoped_kinds: Option<Vec<String>>,
    /// Kinds it may never write, namespaced or not.
    pub denied_kinds: Vec<String>,
    /// Namespaces no app may write to (the tracker namespace), nor create.
    pub reserved_namespaces: Vec<String>,
}

/// Why an object is outside the boundary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("namespace `{namespace}` is reserved for Driftless (its resource trackers)")]
    ReservedNamespace { namespace: String },
    #[error("namespace `{namespace}` is outside source `{source_name}`'s namespaces ({allowed})")]
    Namespace {
        source_name: String,
        namespace: String,
        allowed: String,
    },
    #[error(
        "cluster-scoped {kind} is not among the kinds source `{source_name}` may create ({allowed})"
    )]
    ClusterScopedKind {
        source_name: String,
        kind: String,
        allowed: String,
    },
    #[error("kind {kind} is denied to source `{source_name}`")]
    DeniedKind { source_name: String, kind: String },
    #[error("cluster `{cluster}` is outside source `{source_name}`'s clusters ({allowed})")]
    Cluster {
        source_name: String,
        cluster: String,
        allowed: String,
    },
}

impl SourceBoundary {
    /// A boundary that only reserves `namespaces` (the tracker namespace).
    pub fn reserving(source: &str, namespaces: &[&str]) -> SourceBoundary {
        SourceBoundary {
            source: source.to_owned(),
            reserved_namespaces: namespaces.iter().map(|ns| (*ns).to_owned()).collect(),
            ..SourceBoundary::default()
        }
    }

    /// Whether the source may write an object of `api_version`/`kind` in `namespace` (`None`
    /// for a cluster-scoped object; the caller knows the scope). A `Namespace` object is
    /// checked by its name as well: creating a namespace is creating a place to write.
    ///
    /// # Errors
    ///
    /// The first [`Violation`].
    pub fn check_object(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<(), Violation> {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let qualified = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{group}/{kind}")
        };
        let names_kind = |listed: &String| listed == kind || *listed == qualified;
        if self.denied_kinds.iter().any(names_kind) {
            return Err(Violation::DeniedKind {
                source_name: self.source.clone(),
                kind: qualified,
            });
        }
        let namespace_named = match namespace {
            Some(namespace) => Some(namespace),
            None if group.is_empty() && kind == "Namespace" => Some(name),
            None => None,
        };
        if let Some(namespace) = namespace_named {
            self.check_namespace(namespace)?;
        }
        if namespace.is_none()
            && let Some(allowed) = &self.cluster_scoped_kinds
            && !allowed.iter().any(names_kind)
        {
            return Err(Violation::ClusterScopedKind {
                source_name: self.source.clone(),
                kind: qualified,
                allowed: listing(allowed),
            });
        }
        Ok(())
    }

    /// Whether the source may write into `namespace`.
    ///
    /// # Errors
    ///
    /// [`Violation::ReservedNamespace`] or [`Violation::Namespace`].
    pub fn check_namespace(&self, namespace: &str) -> Result<(), Violation> {
        if self.reserved_namespaces.iter().any(|ns| ns == namespace) {
            return Err(Violation::ReservedNamespace {
                namespace: namespace.to_owned(),
            });
        }
        match &self.namespaces {
            Some(allowed) if !allowed.is_match(namespace) => Err(Violation::Namespace {
                source_name: self.source.clone(),
                namespace: namespace.to_owned(),
                allowed: listing(allowed.patterns()),
            }),
            _ => Ok(()),
        }
    }

    /// Whether the source may deploy to `cluster`.
    ///
    /// # Errors
    ///
    /// [`Violation::Cluster`].
    pub fn check_cluster(&self, cluster: &str) -> Result<(), Violation> {
        match &self.clusters {
            Some(allowed) if !allowed.is_match(cluster) => Err(Violation::Cluster {
                source_name: self.source.clone(),
                cluster: cluster.to_owned(),
                allowed: listing(allowed.patterns()),
            }),
            _ => Ok(()),
        }
    }
}

/// The well-known cluster-scoped kinds, for checking a render without a cluster: a render
/// carries the app namespace on cluster-scoped objects too (KubeVela stamps it), so scope comes
/// from the kind. Kinds not listed are taken as namespaced; the agent checks again at apply with
/// the scope discovery reports.
pub fn is_cluster_scoped(api_version: &str, kind: &str) -> bool {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    matches!(
        (group, kind),
        ("", "Namespace" | "Node" | "PersistentVolume")
            | (
                "rbac.authorization.k8s.io",
                "ClusterRole" | "ClusterRoleBinding"
            )
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | (
                "storage.k8s.io",
                "StorageClass" | "CSIDriver" | "VolumeAttachment"
            )
            | ("scheduling.k8s.io", "PriorityClass")
            | ("networking.k8s.io", "IngressClass")
            | ("node.k8s.io", "RuntimeClass")
            | ("apiregistration.k8s.io", "APIService")
            | (
                "admissionregistration.k8s.io",
                "MutatingWebhookConfiguration"
                    | "ValidatingWebhookConfiguration"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            )
    )
}

fn listing(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team_a() -> SourceBoundary {
        SourceBoundary {
            source: "team-a".into(),
            namespaces: Some(Globs::new(&["team-a".into(), "team-a-*".into()]).unwrap()),
            clusters: Some(Globs::new(&["local".into()]).unwrap()),
            cluster_scoped_kinds: Some(vec!["Namespace".into()]),
            denied_kinds: vec!["Secret".into()],
            reserved_namespaces: vec!["driftless-system".into()],
        }
    }

    #[test]
    fn namespaced_objects_stay_in_the_declared_namespaces() {
        let boundary = team_a();
        assert_eq!(
            boundary.check_object("v1", "ConfigMap", "x", Some("team-a-dev")),
            Ok(())
        );
        assert!(matches!(
            boundary.check_object("v1", "ConfigMap", "x", Some("kube-system")),
            Err(Violation::Namespace { .. })
        ));
        assert!(matches!(
            boundary.check_object("v1", "ConfigMap", "x", Some("driftless-system")),
            Err(Violation::ReservedNamespace { .. })
        ));
    }

    #[test]
    fn cluster_scoped_kinds_need_declaring_and_namespaces_are_checked_by_name() {
        let boundary = team_a();
        assert_eq!(
            boundary.check_object("v1", "Namespace", "team-a-dev", None),
            Ok(())
        );
        assert!(matches!(
            boundary.check_object("v1", "Namespace", "kube-public", None),
            Err(Violation::Namespace { .. })
        ));
        let refused = boundary
            .check_object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "admin",
                None,
            )
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "cluster-scoped rbac.authorization.k8s.io/ClusterRoleBinding is not among the kinds \
             source `team-a` may create (Namespace)"
        );
        assert!(matches!(
            boundary.check_object("v1", "Secret", "db", Some("team-a")),
            Err(Violation::DeniedKind { .. })
        ));
        assert!(boundary.check_cluster("local").is_ok());
        assert!(boundary.check_cluster("prod").is_err());
    }

    #[test]
    fn an_undeclared_boundary_only_reserves_the_tracker_namespace() {
        let boundary = SourceBoundary::reserving("any", &["driftless-system"]);
        assert_eq!(
            boundary.check_object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "x",
                None
            ),
            Ok(())
        );
        assert_eq!(
            boundary.check_object("v1", "ConfigMap", "x", Some("kube-system")),
            Ok(())
        );
        assert!(
            boundary
                .check_object("v1", "Namespace", "driftless-system", None)
                .is_err()
        );
    }
}
