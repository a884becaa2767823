//! The cluster registry: `clusters[]` as written ([`ClusterFile`]) and checked
//! ([`ClusterConfig`]): unique DNS-label names, kubeconfig paths resolved against the config
//! file's directory, contexts and labels.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Checker, is_dns_label};

/// One cluster of the registry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterFile {
    pub name: Spanned<String>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// One cluster of the registry.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub name: String,
    /// `None`: the in-cluster config or `$KUBECONFIG`, as kube's `Config::infer` does.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub labels: BTreeMap<String, String>,
}

impl ClusterConfig {
    /// This cluster as topology placement sees it (its name and labels).
    pub fn registered(&self) -> reconcile::placement::RegisteredCluster<'_> {
        reconcile::placement::RegisteredCluster {
            name: &self.name,
            labels: &self.labels,
        }
    }
}

/// Checks every cluster of the registry.
pub(super) fn check_clusters(
    checker: &mut Checker<'_>,
    files: Vec<ClusterFile>,
) -> Vec<ClusterConfig> {
    let mut clusters = Vec::new();
    let mut cluster_names = BTreeMap::new();
    for (idx, cluster) in files.into_iter().enumerate() {
        let field = format!("clusters[{idx}].name");
        if !is_dns_label(&cluster.name.value) {
            checker.problem(
                &field,
                &cluster.name,
                "must be lowercase letters, digits and '-', at most 63 characters",
            );
        }
        if let Some(previous) = cluster_names.insert(cluster.name.value.clone(), idx) {
            checker.problem(
                &field,
                &cluster.name,
                format!("duplicate cluster name (also clusters[{previous}])"),
            );
        }
        clusters.push(ClusterConfig {
            name: cluster.name.value,
            kubeconfig: cluster.kubeconfig.map(|path| checker.resolve_path(&path)),
            context: cluster.context,
            labels: cluster.labels,
        });
    }
    clusters
}
