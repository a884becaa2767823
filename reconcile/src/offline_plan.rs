//! The plan against an empty cluster: what `driftless plan` shows when no cluster is
//! configured. It runs the real planner ([`crate::planner`]) with nothing live and no resource
//! tracker, so every rendered object is a create (with our ownership marks, exactly as it would
//! be applied) and the only conflicts are objects rendered by two apps. Pure: rendered apps in,
//! plan out.

use analyzer::RenderOutput;

use crate::namespaces::{self, CreateNamespaces};
use crate::plan::{Plan, PlanTarget};
use crate::planner::{DesiredApp, LiveObjects, PlanOptions, builtin_scope, plan_all, plan_app};

/// Plans every app of `output` against an empty cluster. Blocked apps get no changes and keep
/// their diagnostics; `revision` is the git revision the snapshot was read at, if any. Every
/// namespace the apps create objects in is missing there, so each is planned for creation
/// unless `create_namespaces` says never (`crate::namespaces`).
///
/// Deviation: resource policies (`apply-once`, `read-only`, `shared-resource`, ...) are not
/// seen here, because the render output does not carry the apps' policies; against an empty
/// cluster only `read-only` would change the result (it would skip the create).
pub fn plan_against_empty_cluster(
    output: &RenderOutput,
    revision: Option<&str>,
    create_namespaces: CreateNamespaces,
) -> Plan {
    let empty = LiveObjects::default();
    let options = PlanOptions::default();
    let app_plans = output
        .apps
        .iter()
        .map(|rendered| {
            let desired = DesiredApp::from_rendered(
                rendered,
                &[],
                revision.map(str::to_owned),
                &builtin_scope,
            );
            plan_app(&desired, &empty, None, &options)
        })
        .collect();
    let mut plan = plan_all(
        app_plans,
        PlanTarget::EmptyCluster,
        output.diagnostics.clone(),
    );
    if create_namespaces == CreateNamespaces::WhenMissing {
        let missing = namespaces::wanted(&plan.apps).into_keys().collect();
        namespaces::add_creations(&mut plan.apps, &missing, &options.cluster);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Action;
    use analyzer::{AppRef, Diagnostic, RenderedApp, RenderedObject};
    use serde_json::json;

    fn rendered(component: &str, object: serde_json::Value) -> RenderedObject {
        RenderedObject {
            component: component.into(),
            trait_type: None,
            output_name: None,
            object,
        }
    }

    fn app(name: &str, objects: Vec<RenderedObject>, diagnostics: Vec<Diagnostic>) -> RenderedApp {
        RenderedApp {
            app: AppRef {
                namespace: "team-a".into(),
                name: name.into(),
            },
            file: cue::FileId(0),
            objects,
            diagnostics,
            input_hash: String::new(),
            inputs: Default::default(),
        }
    }

    fn deployment(name: &str) -> serde_json::Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "team-a"}, "spec": {"replicas": 2}})
    }

    #[test]
    fn every_object_is_a_create_and_says_what_it_plans_against() {
        let output = RenderOutput {
            apps: vec![app(
                "web",
                vec![rendered("web", deployment("web"))],
                Vec::new(),
            )],
            diagnostics: Vec::new(),
        };
        let plan = plan_against_empty_cluster(&output, Some("abc123"), CreateNamespaces::Never);
        assert_eq!(plan.target, PlanTarget::EmptyCluster);
        let change = &plan.apps[0].changes[0];
        assert_eq!(change.action, Action::Create);
        assert_eq!(change.object.to_string(), "Deployment/team-a/web");
        assert!(change.diff.contains("replicas: 2"), "{}", change.diff);
        assert_eq!(plan.apps[0].revision.as_deref(), Some("abc123"));
        assert!(plan.has_changes());
        assert!(!plan.has_errors());
    }

    #[test]
    fn the_apps_namespaces_are_created_first_unless_told_never() {
        let output = RenderOutput {
            apps: vec![app(
                "web",
                vec![rendered("web", deployment("web"))],
                Vec::new(),
            )],
            diagnostics: Vec::new(),
        };
        let plan = plan_against_empty_cluster(&output, None, CreateNamespaces::WhenMissing);
        let changes: Vec<String> = plan.apps[0]
            .changes
            .iter()
            .map(|change| format!("{} {}", change.action.as_str(), change.object))
            .collect();
        assert_eq!(
            changes,
            ["create Namespace/team-a", "create Deployment/team-a/web"]
        );
        assert!(crate::namespaces::is_creation(&plan.apps[0].changes[0]));
    }

    #[test]
    fn blocked_apps_plan_nothing_and_shared_objects_conflict() {
        let output = RenderOutput {
            apps: vec![
                app("a", vec![rendered("a", deployment("shared"))], Vec::new()),
                app("b", vec![rendered("b", deployment("shared"))], Vec::new()),
                app(
                    "broken",
                    Vec::new(),
                    vec![Diagnostic::error("yaml-syntax", "bad", None)],
                ),
            ],
            diagnostics: Vec::new(),
        };
        let plan = plan_against_empty_cluster(&output, None, CreateNamespaces::Never);
        let actions: Vec<Vec<Action>> = plan
            .apps
            .iter()
            .map(|app| app.changes.iter().map(|change| change.action).collect())
            .collect();
        assert_eq!(
            actions,
            [vec![Action::Create], vec![Action::Conflict], vec![]]
        );
        assert!(plan.has_errors());
    }
}
