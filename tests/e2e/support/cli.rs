//! Running the `driftless` binary against a test cluster, from a repository in a temporary
//! directory, and reading back what it left in the cluster.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;

use super::cluster::{TestCluster, TestNamespace};

/// A repository in a temporary directory with one file per app under `apps/`. Its trackers
/// and workflow states are kept in the test's namespace, so they go when the namespace goes;
/// its absolute path is its source identity, so garbage collection of vanished apps never
/// reaches another test's apps.
pub struct Repo {
    dir: tempfile::TempDir,
    pub tracker_namespace: String,
}

impl Repo {
    pub fn new(ns: &TestNamespace) -> Result<Repo> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("apps"))?;
        Ok(Repo {
            dir,
            tracker_namespace: ns.name.clone(),
        })
    }

    pub fn write_app(&self, name: &str, manifest: &str) -> Result<()> {
        std::fs::write(self.dir.path().join(format!("apps/{name}.yaml")), manifest)?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn path_str(&self) -> Result<&str> {
        self.path().to_str().context("utf-8 path")
    }
}

/// One `driftless` process with `args`, talking to `cluster`.
pub fn driftless(cluster: &TestCluster, args: &[&str]) -> Result<Output> {
    std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(args)
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .output()
        .context("running driftless")
}

/// Fails with the process's output unless it succeeded.
pub fn expect_success(output: &Output, what: &str) -> Result<()> {
    if !output.status.success() {
        bail!(
            "{what} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// The app ConfigMaps of the namespace: not trackers, workflow states, placement records or the
/// root CA.
pub async fn config_map_names(cluster: &TestCluster, namespace: &str) -> Result<BTreeSet<String>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), namespace);
    Ok(config_maps
        .list(
            &ListParams::default()
                .labels("!driftless.dev/tracker,!driftless.dev/workflow,!driftless.dev/placements"),
        )
        .await?
        .items
        .into_iter()
        .filter_map(|config_map| config_map.metadata.name)
        .filter(|name| name != "kube-root-ca.crt")
        .collect())
}

/// Asserts that the namespace holds exactly the app ConfigMaps `names`.
pub async fn expect_config_maps(
    cluster: &TestCluster,
    namespace: &str,
    names: &[&str],
) -> Result<()> {
    let expected: BTreeSet<String> = names.iter().map(|name| (*name).to_owned()).collect();
    assert_eq!(config_map_names(cluster, namespace).await?, expected);
    Ok(())
}
