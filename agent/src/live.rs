//! The Application manifests a live plan reads besides the render: each app's resource
//! policies, status CUE and, for the apps that run a workflow, the manifest itself.

use std::collections::BTreeMap;

use analyzer::model::{Application, Policy};
use analyzer::{AppRef, AppRender, RenderOutput, SourceMap};
use rayon::prelude::*;
use serde_json::Value;

use crate::health::status::ComponentStatus;
use crate::health::{self};
use crate::sync::{RenderedApps, uses_workflow};

/// The Application manifests of every rendered app, parsed from the sources (the render output
/// carries only objects). Apps whose manifest does not parse here are absent: the render has
/// reported them already. Each manifest file is parsed once (an app is matched by name among
/// the apps rendered from it: its namespace may come from the render's rules), files in
/// parallel: at 10,000 apps this is seconds of YAML.
pub fn applications_from_sources<R: RenderedApps>(
    output: &R,
    sources: &SourceMap,
) -> BTreeMap<AppRef, Application> {
    let mut by_file: BTreeMap<cue::FileId, Vec<&AppRef>> = BTreeMap::new();
    for app in output.apps() {
        let app = app.render();
        by_file.entry(app.file).or_default().push(&app.app);
    }
    let files: Vec<(cue::FileId, Vec<&AppRef>)> = by_file.into_iter().collect();
    let parsed: Vec<Vec<(AppRef, Application)>> = files
        .par_iter()
        .map(|(file, apps)| applications_in(sources.text(*file), apps))
        .collect();
    parsed.into_iter().flatten().collect()
}

/// What a plan reads of the apps' manifests besides their render ([`plan_inputs`]).
#[derive(Debug, Default)]
pub struct PlanInputs {
    /// Each app's resource policies ([`policies_of`]).
    pub policies: BTreeMap<AppRef, Vec<Policy>>,
    /// Each app's status CUE inputs ([`health::status::of_applications`]).
    pub statuses: BTreeMap<AppRef, Vec<ComponentStatus>>,
    /// The apps that run a workflow ([`uses_workflow`]), with their manifests.
    pub workflows: BTreeMap<AppRef, Application>,
}

/// The policies, status inputs and workflow apps of every rendered app: what
/// [`policies_of`], [`health::status::of_applications`] and [`uses_workflow`] give over
/// [`applications_from_sources`], without holding every app's manifest at once. Each file's
/// Applications are reduced to those as soon as the file is parsed (files in parallel), and
/// only workflow apps keep their manifest: at 10,000 apps the parsed manifests of every app
/// were ~100 MiB on top of the plan.
pub fn plan_inputs<R: RenderedApps>(
    output: &R,
    sources: &SourceMap,
    definitions: &analyzer::Definitions,
) -> PlanInputs {
    let mut by_file: BTreeMap<cue::FileId, Vec<&AppRef>> = BTreeMap::new();
    for app in output.apps() {
        let app = app.render();
        by_file.entry(app.file).or_default().push(&app.app);
    }
    let files: Vec<(cue::FileId, Vec<&AppRef>)> = by_file.into_iter().collect();
    let catalog = health::status::StatusCatalog::new(definitions);
    type Reduced = (
        AppRef,
        Vec<Policy>,
        Vec<ComponentStatus>,
        Option<Application>,
    );
    let reduced: Vec<Vec<Reduced>> = files
        .par_iter()
        .map(|(file, apps)| {
            applications_in(sources.text(*file), apps)
                .into_iter()
                .map(|(app, application)| {
                    let statuses = health::status::from_model(&application, &catalog);
                    let policies = application.spec.policies.clone();
                    let workflow = uses_workflow(&application).then_some(application);
                    (app, policies, statuses, workflow)
                })
                .collect()
        })
        .collect();
    let mut inputs = PlanInputs::default();
    for (app, policies, statuses, workflow) in reduced.into_iter().flatten() {
        if let Some(application) = workflow {
            inputs.workflows.insert(app.clone(), application);
        }
        inputs.policies.insert(app.clone(), policies);
        inputs.statuses.insert(app, statuses);
    }
    inputs
}

/// The Applications of `apps` found among the YAML documents of one manifest file.
fn applications_in(text: &str, apps: &[&AppRef]) -> Vec<(AppRef, Application)> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_default();
    let mut found = Vec::new();
    for document in documents {
        if document.get("kind").and_then(Value::as_str) != Some("Application") {
            continue;
        }
        let name = document
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let matching: Vec<&&AppRef> = apps
            .iter()
            .filter(|app| Some(app.name.as_str()) == name.as_deref())
            .collect();
        if matching.is_empty() {
            continue;
        }
        if let Ok(parsed) = serde_json::from_value::<Application>(document) {
            for app in matching {
                found.push(((*app).clone(), parsed.clone()));
            }
        }
    }
    found
}

/// The resource policies of every rendered app, read from the Application manifests in the
/// sources (the render output does not carry them). A manifest that does not parse here has
/// already been reported by the render, so it simply contributes no policies.
pub fn policies_from_sources(
    output: &RenderOutput,
    sources: &SourceMap,
) -> BTreeMap<AppRef, Vec<Policy>> {
    policies_of(&applications_from_sources(output, sources))
}

/// The resource policies of each app of `applications`.
pub fn policies_of(applications: &BTreeMap<AppRef, Application>) -> BTreeMap<AppRef, Vec<Policy>> {
    applications
        .iter()
        .map(|(app, application)| (app.clone(), application.spec.policies.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_inputs_are_what_the_parsed_manifests_give() {
        // Two files, three apps: a plain one with a resource policy, one with a workflow step
        // and one with a topology policy (both run a workflow), across namespaces.
        let file = |path: &str, contents: &str| analyzer::SourceFile {
            path: path.to_owned(),
            contents: contents.to_owned(),
        };
        let snapshot = analyzer::Snapshot {
            commit: None,
            files: vec![
                file(
                    "apps/a.yaml",
                    "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: web, namespace: a}\nspec:\n  components:\n    - name: web\n      type: webservice\n      properties: {image: nginx}\n      traits:\n        - type: gateway\n          properties: {domain: x.example, http: {\"/\": 80}}\n  policies:\n    - name: keep\n      type: garbage-collect\n      properties: {keepLegacyResource: true}\n---\napiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: flow, namespace: b}\nspec:\n  components:\n    - name: cm\n      type: k8s-objects\n      properties:\n        objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}]\n  workflow:\n    steps:\n      - {name: one, type: apply-component, properties: {component: cm}}\n",
                ),
                file(
                    "apps/b.yaml",
                    "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: spread, namespace: a}\nspec:\n  components:\n    - name: cm\n      type: k8s-objects\n      properties:\n        objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: spread}}]\n  policies:\n    - name: where\n      type: topology\n      properties: {clusters: [local]}\n",
                ),
            ],
        };
        let definitions = analyzer::Definitions::builtin();
        let (output, sources) =
            analyzer::render_snapshot(&snapshot, &definitions, &analyzer::RenderOptions::default());
        assert_eq!(output.apps.len(), 3, "{:?}", output.diagnostics);
        let inputs = plan_inputs(&output, &sources, &definitions);
        let applications = applications_from_sources(&output, &sources);
        assert_eq!(applications.len(), 3);
        assert_eq!(inputs.policies, policies_of(&applications));
        assert_eq!(
            inputs.statuses,
            health::status::of_applications(&applications, &definitions)
        );
        let workflows: Vec<String> = inputs.workflows.keys().map(ToString::to_string).collect();
        assert_eq!(workflows, ["a/spread", "b/flow"]);
        assert_eq!(
            inputs.workflows[&app_ref_of("b", "flow")],
            applications[&app_ref_of("b", "flow")]
        );
        assert_eq!(inputs.policies[&app_ref_of("a", "web")].len(), 1);
    }

    fn app_ref_of(namespace: &str, name: &str) -> AppRef {
        AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}
