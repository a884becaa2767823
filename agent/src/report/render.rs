//! `driftless render` output: every rendered object, in app order then object order, as
//! multi-document YAML or as one JSON array.
//!
//! The YAML form puts a `# Source:` comment above each document (app, component, and the
//! trait or output that produced it), the way `helm template` does; it is a comment, so the
//! stream is still plain multi-document YAML. Blocked apps contribute no objects.

use analyzer::{RenderOutput, RenderedApp, RenderedObject};

/// The objects of every app as multi-document YAML, each document starting with `---`.
///
/// # Errors
///
/// [`RenderOutputError`] when an object cannot be written as YAML (a bug: objects are JSON
/// values, which YAML can always represent).
pub fn render_yaml(output: &RenderOutput) -> Result<String, RenderOutputError> {
    let mut out = String::new();
    for app in &output.apps {
        for object in &app.objects {
            out.push_str("---\n");
            out.push_str(&source_comment(app, object));
            out.push_str(&object_yaml(&object.object)?);
        }
    }
    Ok(out)
}

/// The objects of every app as one pretty JSON array, ending with a newline.
pub fn render_json(output: &RenderOutput) -> String {
    let objects: Vec<&serde_json::Value> = output
        .apps
        .iter()
        .flat_map(|app| &app.objects)
        .map(|object| &object.object)
        .collect();
    super::json::to_pretty_string(&objects)
}

/// One object as a YAML document body (no `---`), ending with a newline.
///
/// # Errors
///
/// [`RenderOutputError`] when the YAML writer fails.
pub fn object_yaml(object: &serde_json::Value) -> Result<String, RenderOutputError> {
    let mut text =
        serde_saphyr::to_string(object).map_err(|source| RenderOutputError::YamlFailed {
            message: source.to_string(),
        })?;
    if let Some(stripped) = text.strip_prefix("---\n") {
        text = stripped.to_owned();
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// The error returned when rendered objects cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum RenderOutputError {
    #[error("writing an object as YAML failed: {message}")]
    YamlFailed { message: String },
}

fn source_comment(app: &RenderedApp, object: &RenderedObject) -> String {
    let mut comment = format!("# Source: app {}, component {}", app.app, object.component);
    if let Some(trait_type) = &object.trait_type {
        comment.push_str(&format!(", {trait_type}"));
    }
    if let Some(output_name) = &object.output_name {
        comment.push_str(&format!(" output {output_name}"));
    }
    comment.push('\n');
    comment
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer::AppRef;
    use expect_test::expect;
    use serde_json::json;

    fn output() -> RenderOutput {
        RenderOutput {
            apps: vec![RenderedApp {
                app: AppRef {
                    namespace: "team-a".into(),
                    name: "web".into(),
                },
                file: cue::FileId(0),
                objects: vec![
                    RenderedObject {
                        component: "web".into(),
                        trait_type: None,
                        output_name: None,
                        object: json!({"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": "web", "labels": {"app.oam.dev/name": "web"}},
                            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                                {"name": "web", "image": "nginx:1.27", "args": ["--port", "80"]}]}}}}),
                    },
                    RenderedObject {
                        component: "web".into(),
                        trait_type: Some("gateway".into()),
                        output_name: Some("ingress".into()),
                        object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "web-config"},
                            "data": {"enabled": "true", "multi": "a\nb\n"}}),
                    },
                ],
                diagnostics: Vec::new(),
                input_hash: String::new(),
                inputs: Default::default(),
            }],
            diagnostics: Vec::new(),
        }
    }

    #[test]
    fn yaml_is_multi_document_with_source_comments() {
        expect![[r#"
            ---
            # Source: app team-a/web, component web
            apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: web
              labels:
                app.oam.dev/name: web
            spec:
              replicas: 2
              template:
                spec:
                  containers:
                  - name: web
                    image: nginx:1.27
                    args:
                    - --port
                    - "80"
            ---
            # Source: app team-a/web, component web, gateway output ingress
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: web-config
            data:
              enabled: "true"
              multi: |
                a
                b
        "#]]
        .assert_eq(&render_yaml(&output()).unwrap());
    }

    #[test]
    fn yaml_documents_read_back_as_the_same_objects() {
        let yaml = render_yaml(&output()).unwrap();
        let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        let objects: Vec<serde_json::Value> = output().apps[0]
            .objects
            .iter()
            .map(|object| object.object.clone())
            .collect();
        assert_eq!(documents, objects);
    }

    #[test]
    fn json_is_one_array_of_the_objects() {
        let value: serde_json::Value = serde_json::from_str(&render_json(&output())).unwrap();
        let kinds: Vec<&str> = value
            .as_array()
            .unwrap()
            .iter()
            .map(|object| object["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["Deployment", "ConfigMap"]);
    }
}
