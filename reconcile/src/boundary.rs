//! The source boundary at apply: the last check before anything is written. The analyzer's
//! `source-boundary` rule already shows violations in previews; this check runs on the objects
//! as they will be applied, with each kind's scope as discovery reports it, so a kind the
//! analyzer cannot place, or a rule turned off, still cannot take an app outside its source's
//! lane. An app with any object outside is refused whole: nothing of it is applied.

use analyzer::boundary::SourceBoundary;

use crate::planner::DesiredApp;

/// Why `desired` may not be applied to `cluster` under `boundary`; `None` when it may.
pub fn refusal(boundary: &SourceBoundary, cluster: &str, desired: &DesiredApp) -> Option<String> {
    if let Err(violation) = boundary.check_cluster(cluster) {
        return Some(format!("refused by the source boundary: {violation}"));
    }
    desired.objects.iter().find_map(|object| {
        let object_ref = &object.object_ref;
        boundary
            .check_object(
                &object_ref.api_version,
                &object_ref.kind,
                &object_ref.name,
                object_ref.namespace.as_deref(),
            )
            .err()
            .map(|violation| format!("refused by the source boundary: {object_ref}: {violation}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer::boundary::Globs;
    use analyzer::{AppRef, RenderedApp, RenderedObject};
    use serde_json::json;

    use crate::planner::builtin_scope;

    fn desired(objects: Vec<serde_json::Value>) -> DesiredApp {
        let rendered: RenderedApp = RenderedApp {
            app: AppRef {
                namespace: "team-a".into(),
                name: "web".into(),
            },
            file: cue::FileId(0),
            input_hash: String::new(),
            inputs: Default::default(),
            objects: objects
                .into_iter()
                .map(|object| RenderedObject {
                    component: "web".into(),
                    trait_type: None,
                    output_name: None,
                    object,
                })
                .collect(),
            diagnostics: Vec::new(),
        };
        DesiredApp::from_rendered(&rendered, &[], None, &builtin_scope)
    }

    fn team_a() -> SourceBoundary {
        SourceBoundary {
            source: "team-a".into(),
            namespaces: Some(Globs::new(&["team-a".into()]).unwrap()),
            cluster_scoped_kinds: Some(Vec::new()),
            reserved_namespaces: vec!["driftless-system".into()],
            ..SourceBoundary::default()
        }
    }

    #[test]
    fn objects_inside_pass_and_one_outside_refuses_the_app() {
        let inside = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        assert_eq!(
            refusal(&team_a(), "local", &desired(vec![inside.clone()])),
            None
        );
        let elsewhere = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "kube-system"}});
        let refused = refusal(
            &team_a(),
            "local",
            &desired(vec![inside.clone(), elsewhere]),
        );
        assert_eq!(
            refused.as_deref(),
            Some(
                "refused by the source boundary: ConfigMap/kube-system/b: namespace `kube-system` \
                 is outside source `team-a`'s namespaces (team-a)"
            )
        );
        // The render stamps the app namespace on a ClusterRoleBinding; its scope makes it
        // cluster-scoped all the same.
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "c"}});
        assert!(
            refusal(&team_a(), "local", &desired(vec![inside, binding]))
                .is_some_and(|message| message.contains("ClusterRoleBinding"))
        );
    }
}
