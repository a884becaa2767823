//! The install manifests in `deploy/` (the kustomize base, the Helm chart's defaults) are
//! checked like any app: their objects, wrapped in one Application of `k8s-objects`, pass
//! `driftless analyze` with no error; and every image reference is a released version, never
//! `latest`.

use crate::support::{TempRepo, driftless_in, workspace_root};

/// The kustomize base's resources, in its order.
fn kustomize_resources() -> Vec<String> {
    let kustomization = std::fs::read_to_string(workspace_root().join("deploy/kustomization.yaml"))
        .expect("deploy/kustomization.yaml");
    let mut resources = Vec::new();
    let mut in_resources = false;
    for line in kustomization.lines() {
        if line.starts_with("resources:") {
            in_resources = true;
        } else if in_resources {
            match line.trim().strip_prefix("- ") {
                Some(file) => resources.push(file.to_owned()),
                None => in_resources = false,
            }
        }
    }
    resources
}

#[test]
fn the_kustomize_base_passes_the_analyzer() {
    let resources = kustomize_resources();
    assert!(resources.len() >= 6, "{resources:?}");
    let mut objects = Vec::new();
    for file in &resources {
        let text = std::fs::read_to_string(workspace_root().join("deploy").join(file))
            .unwrap_or_else(|error| panic!("deploy/{file}: {error}"));
        for document in text.split("\n---") {
            let value: serde_json::Value = serde_saphyr::from_str(document)
                .unwrap_or_else(|error| panic!("deploy/{file}: {error}"));
            if !value.is_null() {
                objects.push(value);
            }
        }
    }
    let kinds: Vec<&str> = objects
        .iter()
        .filter_map(|object| object["kind"].as_str())
        .collect();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ConfigMap",
        "Secret",
        "Deployment",
        "Service",
        "NetworkPolicy",
        "PodDisruptionBudget",
    ] {
        assert!(kinds.contains(&kind), "deploy/ has no {kind}: {kinds:?}");
    }
    let app = serde_json::json!({
        "apiVersion": "core.oam.dev/v1beta1",
        "kind": "Application",
        "metadata": {"name": "driftless", "namespace": "driftless-system"},
        "spec": {"components": [{
            "name": "agent",
            "type": "k8s-objects",
            "properties": {"objects": objects},
        }]},
    });
    let repo = TempRepo::new();
    repo.write(
        "apps/driftless.yaml",
        &serde_json::to_string_pretty(&app).expect("JSON"),
    );
    let run = driftless_in(repo.path(), &["analyze", ".", "-o", "json"]);
    let diagnostics: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{run:?}"));
    let errors: Vec<&serde_json::Value> = diagnostics
        .as_array()
        .expect("a JSON array")
        .iter()
        .filter(|diagnostic| diagnostic["severity"] == "error")
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn images_are_versioned_never_latest() {
    let version = env!("CARGO_PKG_VERSION");
    let deployment = std::fs::read_to_string(workspace_root().join("deploy/deployment.yaml"))
        .expect("deploy/deployment.yaml");
    assert!(
        deployment.contains(&format!("image: driftless:{version}")),
        "{deployment}"
    );
    let chart = std::fs::read_to_string(workspace_root().join("deploy/helm/driftless/Chart.yaml"))
        .expect("Chart.yaml");
    assert!(
        chart.contains(&format!("appVersion: \"{version}\"")),
        "{chart}"
    );
    for dir in [
        "deploy",
        "deploy/helm/driftless",
        "deploy/helm/driftless/templates",
    ] {
        for entry in std::fs::read_dir(workspace_root().join(dir)).expect("a directory") {
            let path = entry.expect("an entry").path();
            if path.is_file() {
                let text = std::fs::read_to_string(&path).expect("a text file");
                for line in text
                    .lines()
                    .filter(|line| line.trim_start().starts_with("image:"))
                {
                    assert!(!line.contains("latest"), "{}: {line}", path.display());
                }
            }
        }
    }
}
