//! The generated apps are valid: they render with the built-in definitions, without errors, to
//! the objects their traits promise (a benchmark over broken apps would measure error paths).

use analyzer::{Definitions, RenderOptions, Snapshot, SourceFile, render_snapshot};

fn snapshot(files: &[loadgen::GeneratedFile]) -> Snapshot {
    Snapshot {
        commit: None,
        files: files
            .iter()
            .map(|file| SourceFile {
                path: file.path.to_string_lossy().into_owned(),
                contents: file.contents.clone(),
            })
            .collect(),
    }
}

#[test]
fn generated_apps_render_without_errors() {
    let options = loadgen::Options::default();
    let files = loadgen::generate(60, &options);
    let (output, _) = render_snapshot(
        &snapshot(&files),
        &Definitions::builtin(),
        &RenderOptions::default(),
    );
    assert!(output.diagnostics.is_empty(), "{:?}", output.diagnostics);
    assert_eq!(output.apps.len(), 60);
    for app in &output.apps {
        // Apps come back sorted by (namespace, name); find each one's file by its path.
        let path = format!("apps/{}/{}.yaml", app.app.namespace, app.app.name);
        let file = files
            .iter()
            .find(|file| file.path.to_string_lossy() == path)
            .unwrap();
        assert!(!app.is_blocked(), "{}: {:?}", app.app, app.diagnostics);
        let kinds: Vec<&str> = app
            .objects
            .iter()
            .map(|object| object.object["kind"].as_str().unwrap_or("?"))
            .collect();
        let gateway = file.contents.contains("type: gateway");
        let expected: &[&str] = if gateway {
            &["Deployment", "Service", "Ingress", "ConfigMap"]
        } else {
            &["Deployment", "Service", "ConfigMap"]
        };
        assert_eq!(kinds, expected, "{}", app.app);
        let deployment = &app.objects[0].object;
        let containers = deployment["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        let sidecar = file.contents.contains("type: sidecar");
        assert_eq!(containers.len(), if sidecar { 2 } else { 1 }, "{}", app.app);
        assert_eq!(deployment["spec"]["replicas"], 0);
    }
}
