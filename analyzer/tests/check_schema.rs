//! The checked-in Kubernetes schema (`analyzer/schemas/k8s-v1.34.json`) is exactly what the
//! generator makes from upstream's swagger.json: never edited by hand.
//!
//! The upstream file is found in the Go module cache (`hack/build-cluster.sh` downloads the
//! module), or at `K8S_SWAGGER_JSON`. `UPDATE_K8S_SCHEMA=1` rewrites the artefact
//! (`hack/gen-k8s-schema.sh`).

use std::path::PathBuf;

const K8S_MODULE: &str = "k8s.io/kubernetes@v1.34.3";

fn artefact_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas/k8s-v1.34.json")
}

fn swagger_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("K8S_SWAGGER_JSON") {
        return Some(PathBuf::from(path));
    }
    let output = std::process::Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .ok()?;
    let cache = String::from_utf8(output.stdout).ok()?;
    let path = PathBuf::from(cache.trim())
        .join(K8S_MODULE)
        .join("api/openapi-spec/swagger.json");
    path.is_file().then_some(path)
}

#[test]
fn regenerating_the_kubernetes_schema_gives_the_same_bytes() {
    let Some(swagger) = swagger_path() else {
        // CI downloads the module before the tests (hack/build-cluster.sh); a machine without
        // Go still checks that the artefact parses, below.
        eprintln!("{K8S_MODULE} is not in the Go module cache; regeneration not checked");
        return;
    };
    let text = std::fs::read_to_string(&swagger).unwrap();
    let generated = analyzer::schema::generate::generate_k8s_schema(
        &text,
        &format!("{K8S_MODULE} api/openapi-spec/swagger.json"),
    )
    .unwrap();
    if std::env::var_os("UPDATE_K8S_SCHEMA").is_some() {
        std::fs::write(artefact_path(), &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(artefact_path()).unwrap();
    assert!(
        checked_in == generated,
        "analyzer/schemas/k8s-v1.34.json differs from a fresh generation; run hack/gen-k8s-schema.sh"
    );
}

#[test]
fn the_artefact_maps_core_kinds_to_definitions_without_descriptions() {
    let text = std::fs::read_to_string(artefact_path()).unwrap();
    let artefact: serde_json::Value = serde_json::from_str(&text).unwrap();
    let kinds = artefact["kinds"].as_object().unwrap();
    for (key, definition) in [
        ("apps/v1 Deployment", "io.k8s.api.apps.v1.Deployment"),
        ("v1 Service", "io.k8s.api.core.v1.Service"),
        (
            "networking.k8s.io/v1 Ingress",
            "io.k8s.api.networking.v1.Ingress",
        ),
        ("batch/v1 CronJob", "io.k8s.api.batch.v1.CronJob"),
    ] {
        assert_eq!(kinds[key], definition, "{key}");
        assert!(
            artefact["definitions"].get(definition).is_some(),
            "{definition}"
        );
    }
    // Documentation is dropped: a `description` key with text would be upstream's prose (a
    // field named `description`, as in PriorityClass, maps to a schema object instead).
    assert!(!text.contains("\"description\":\""));
    assert!(
        artefact["definitions"]["io.k8s.api.core.v1.Container"]
            .get("description")
            .is_none()
    );
    let container = &artefact["definitions"]["io.k8s.api.core.v1.Container"];
    assert_eq!(container["required"], serde_json::json!(["name"]));
    assert_eq!(
        container["properties"]["ports"]["items"]["$ref"],
        "io.k8s.api.core.v1.ContainerPort"
    );
}
