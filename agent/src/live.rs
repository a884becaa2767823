//! What a live plan reads of the apps' manifests besides their objects: each app's resource
//! policies, status CUE and, for the apps that run a workflow, the Application itself. The
//! analyzer takes all of it from the Application as it loaded it and hands it over with each
//! app's render (`RenderedApp::inputs`): nothing here parses a manifest again.

use std::collections::BTreeMap;

use analyzer::model::{Application, Policy};
use analyzer::{AppRef, AppRender};

use crate::health::status::ComponentStatus;
use crate::sync::{RenderedApps, uses_workflow};

/// What a plan reads of the apps' manifests besides their render ([`plan_inputs`]).
#[derive(Debug, Default)]
pub struct PlanInputs {
    /// Each app's resource policies.
    pub policies: BTreeMap<AppRef, Vec<Policy>>,
    /// Each app's status CUE inputs.
    pub statuses: BTreeMap<AppRef, Vec<ComponentStatus>>,
    /// The apps that run a workflow ([`uses_workflow`]), with their manifests.
    pub workflows: BTreeMap<AppRef, Application>,
}

/// The policies, status inputs and workflow apps of every rendered app, as its render carries
/// them.
pub fn plan_inputs<R: RenderedApps>(output: &R) -> PlanInputs {
    let mut inputs = PlanInputs::default();
    for app in output.apps() {
        let carried = app.inputs();
        if let Some(application) = carried.workflow().filter(|app| uses_workflow(app)) {
            inputs
                .workflows
                .insert(app.app().clone(), application.clone());
        }
        inputs
            .policies
            .insert(app.app().clone(), carried.policies().to_vec());
        inputs
            .statuses
            .insert(app.app().clone(), carried.statuses().to_vec());
    }
    inputs
}

/// The resource policies of every rendered app, as its render carries them.
pub fn policies<R: RenderedApps>(output: &R) -> BTreeMap<AppRef, Vec<Policy>> {
    output
        .apps()
        .iter()
        .map(|app| (app.app().clone(), app.inputs().policies().to_vec()))
        .collect()
}

/// The apps of a render that run a workflow ([`uses_workflow`]), with their manifests.
pub fn workflow_apps<R: RenderedApps>(output: &R) -> BTreeMap<AppRef, Application> {
    output
        .apps()
        .iter()
        .filter_map(|app| {
            let application = app.inputs().workflow().filter(|app| uses_workflow(app))?;
            Some((app.app().clone(), application.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The Applications of a manifest file, parsed on their own (what the render loaded).
    fn parsed(contents: &str) -> Vec<Application> {
        let documents: Vec<Value> = serde_saphyr::from_multiple(contents).unwrap();
        documents
            .into_iter()
            .map(|document| serde_json::from_value(document).unwrap())
            .collect()
    }

    #[test]
    fn plan_inputs_are_what_the_manifests_say() {
        // Two files, four apps: a plain one with a resource policy, one with a workflow step,
        // one with a topology policy (both run a workflow) and one whose rollout trait is not
        // a valid plan (it may, but does not, run a workflow), across namespaces.
        let file = |path: &str, contents: &str| analyzer::SourceFile {
            path: path.to_owned(),
            contents: contents.to_owned(),
        };
        let first = "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: web, namespace: a}\nspec:\n  components:\n    - name: web\n      type: webservice\n      properties: {image: nginx}\n      traits:\n        - type: gateway\n          properties: {domain: x.example, http: {\"/\": 80}}\n  policies:\n    - name: keep\n      type: garbage-collect\n      properties: {keepLegacyResource: true}\n---\napiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: flow, namespace: b}\nspec:\n  components:\n    - name: cm\n      type: k8s-objects\n      properties:\n        objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}]\n  workflow:\n    steps:\n      - {name: one, type: apply-component, properties: {component: cm}}\n";
        let second = "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: spread, namespace: a}\nspec:\n  components:\n    - name: cm\n      type: k8s-objects\n      properties:\n        objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: spread}}]\n  policies:\n    - name: where\n      type: topology\n      properties: {clusters: [local]}\n---\napiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: bad-rollout, namespace: a}\nspec:\n  components:\n    - name: web\n      type: webservice\n      properties: {image: nginx}\n      traits:\n        - type: rollout\n          properties: {targetSize: -1}\n";
        let snapshot = analyzer::Snapshot {
            commit: None,
            files: vec![file("apps/a.yaml", first), file("apps/b.yaml", second)],
        };
        let definitions = analyzer::Definitions::builtin();
        let (output, _) =
            analyzer::render_snapshot(&snapshot, &definitions, &analyzer::RenderOptions::default());
        assert_eq!(output.apps.len(), 4, "{:?}", output.diagnostics);
        let applications: BTreeMap<AppRef, Application> = parsed(first)
            .into_iter()
            .chain(parsed(second))
            .map(|application| {
                let app = app_ref_of(
                    application
                        .metadata
                        .namespace
                        .as_deref()
                        .unwrap_or_default(),
                    &application.metadata.name,
                );
                (app, application)
            })
            .collect();
        let inputs = plan_inputs(&output);
        let expected_policies: BTreeMap<AppRef, Vec<Policy>> = applications
            .iter()
            .map(|(app, application)| (app.clone(), application.spec.policies.clone()))
            .collect();
        assert_eq!(inputs.policies, expected_policies);
        assert_eq!(policies(&output), expected_policies);
        assert_eq!(
            inputs.statuses,
            crate::health::status::of_applications(&applications, &definitions)
        );
        let workflows: Vec<String> = inputs.workflows.keys().map(ToString::to_string).collect();
        assert_eq!(workflows, ["a/spread", "b/flow"]);
        assert_eq!(
            inputs.workflows[&app_ref_of("b", "flow")],
            applications[&app_ref_of("b", "flow")]
        );
        assert_eq!(workflow_apps(&output), inputs.workflows);
        assert_eq!(inputs.policies[&app_ref_of("a", "web")].len(), 1);
    }

    fn app_ref_of(namespace: &str, name: &str) -> AppRef {
        AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}
