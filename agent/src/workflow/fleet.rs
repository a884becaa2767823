//! Where each `deploy` step of a workflow puts the app when it names topology policies: the
//! clusters of the registry (`crate::placement`), each connected, and per topology the render
//! with that step's override policies (`analyzer::render_placements`).
//!
//! The analyzer renders one placement per topology of each top-level deploy step, in step
//! order (kubevela-render-semantics.md §4.2); [`step_targets`] walks the checked workflow's
//! top-level deploy steps in the same order and takes, for the n-th use of a topology, the
//! n-th render made for it, so two steps that reuse a topology with different overrides each
//! get their own render.

use std::collections::BTreeMap;

use analyzer::AppRef;
use analyzer::model::{Application, Policy};
use serde_json::Value;

use super::spec::{Issue, StepType, WorkflowSpec};
use crate::cluster::Cluster;
use crate::config::ClusterConfig;
use crate::placement::{self, Placement};
use crate::planner::DesiredApp;

/// The clusters a workflow may deploy to and each app's render per placement.
pub struct Fleet {
    /// The cluster registry; the first entry is the cluster the workflow runs against (KubeVela's
    /// `local`), whose connection the caller passes separately.
    pub registry: Vec<ClusterConfig>,
    /// Connections to the registry's other clusters, by name.
    pub clusters: BTreeMap<String, Cluster>,
    /// Per app, `analyzer::render_placements`' renders.
    pub placements: BTreeMap<AppRef, Vec<analyzer::Placement>>,
}

impl Fleet {
    /// The registry's cluster names and `local` (its first), for the workflow's
    /// `unknown-cluster` check.
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        self.registry
            .iter()
            .map(|cluster| cluster.name.clone())
            .chain([placement::LOCAL_CLUSTER.to_owned()])
            .collect()
    }

    /// Whether cluster `name` can be deployed to.
    pub fn is_connected(&self, name: &str) -> bool {
        self.registry
            .first()
            .is_some_and(|first| first.name == name)
            || self.clusters.contains_key(name)
    }

    /// The connection to cluster `name`: `local` for the registry's first cluster.
    pub fn connection<'a>(&'a self, name: &str, local: &'a Cluster) -> Option<&'a Cluster> {
        if self
            .registry
            .first()
            .is_some_and(|first| first.name == name)
        {
            return Some(local);
        }
        self.clusters.get(name)
    }
}

/// One placement of a deploy step, before its objects are resolved against its cluster.
#[derive(Debug, Clone)]
pub struct PlannedTarget<'a> {
    /// The topology's position among the step's topologies: the step rolls out one group
    /// after another, each gated on health.
    pub group: usize,
    pub placement: Placement,
    pub rendered: &'a analyzer::RenderedApp,
}

/// One cluster a deploy step places the app on, with that placement's objects.
pub struct Target<'a> {
    pub group: usize,
    pub cluster: &'a Cluster,
    pub desired: DesiredApp,
}

/// Per deploy step name, where it places the app. Steps absent here (no topology) deploy the
/// whole render to the cluster the workflow runs against.
pub type StepTargets<'a> = BTreeMap<String, Vec<Target<'a>>>;

/// The placements of every top-level deploy step of `spec` that names a topology policy.
///
/// # Errors
/// Issues (nothing may be applied then): a topology naming an unregistered cluster or
/// selecting none, a cluster without connection, or a placement the render did not produce.
pub fn step_targets<'a>(
    app: &Application,
    app_ref: &AppRef,
    spec: &WorkflowSpec,
    fleet: &'a Fleet,
) -> Result<BTreeMap<String, Vec<PlannedTarget<'a>>>, Vec<Issue>> {
    let renders: &[analyzer::Placement] =
        fleet.placements.get(app_ref).map_or(&[][..], Vec::as_slice);
    let mut used: BTreeMap<&str, usize> = BTreeMap::new();
    let mut issues = Vec::new();
    let mut targets = BTreeMap::new();
    for step in spec
        .steps
        .iter()
        .filter(|step| step.step_type == StepType::Deploy)
    {
        let topologies: Vec<&Policy> = step
            .properties
            .get("policies")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|name| app.spec.policies.iter().find(|policy| policy.name == name))
            .filter(|policy| policy.policy_type == "topology")
            .collect();
        let mut step_targets = Vec::new();
        for (group, topology) in topologies.into_iter().enumerate() {
            let occurrence = used.entry(topology.name.as_str()).or_insert(0);
            let render = renders
                .iter()
                .filter(|render| render.topology.as_deref() == Some(topology.name.as_str()))
                .nth(*occurrence);
            *occurrence += 1;
            let issue = |rule: &'static str, message: String| Issue {
                rule,
                step: Some(step.name.clone()),
                message,
            };
            let Some(render) = render else {
                issues.push(issue(
                    "placement-not-rendered",
                    format!(
                        "deploy step {:?}: topology policy {:?} has no render",
                        step.name, topology.name
                    ),
                ));
                continue;
            };
            let placements =
                match placement::placements(&[topology], &fleet.registry, &app_ref.namespace) {
                    Ok(placements) => placements,
                    Err(error) => {
                        issues.push(issue("unknown-cluster", error.to_string()));
                        continue;
                    }
                };
            for placement in placements {
                if !fleet.is_connected(&placement.cluster) {
                    issues.push(issue(
                        "remote-placement-unsupported",
                        format!(
                            "topology policy {:?} places the app on cluster {:?}, which has no connection",
                            topology.name, placement.cluster
                        ),
                    ));
                    continue;
                }
                step_targets.push(PlannedTarget {
                    group,
                    placement,
                    rendered: &render.rendered,
                });
            }
        }
        if !step_targets.is_empty() {
            targets.insert(step.name.clone(), step_targets);
        }
    }
    if issues.is_empty() {
        Ok(targets)
    } else {
        Err(issues)
    }
}

/// `rendered` moved into `namespace` (a topology's `namespace`): objects in the app's
/// namespace, or in none, go to the placement's.
pub fn in_namespace(rendered: &analyzer::RenderedApp, namespace: &str) -> analyzer::RenderedApp {
    let mut moved = rendered.clone();
    if namespace == rendered.app.namespace {
        return moved;
    }
    for object in &mut moved.objects {
        // Namespace-less objects would default to the app's namespace; cluster-scoped ones
        // lose the namespace again when scoped by discovery.
        let in_app_namespace = object
            .object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .is_none_or(|current| current == rendered.app.namespace);
        if in_app_namespace
            && let Some(metadata) = object
                .object
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
        {
            metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
        }
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::{WorkflowContext, build_workflow};

    const APP: &str = "
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: web, namespace: apps}
spec:
  components: [{name: web, type: webservice, properties: {image: nginx}}]
  policies:
    - {name: canary, type: topology, properties: {clusters: [local]}}
    - {name: edges, type: topology, properties: {clusterLabelSelector: {tier: edge}, namespace: edge-apps}}
    - {name: big, type: override, properties: {components: [{name: web}]}}
  workflow:
    steps:
      - {name: first, type: deploy, properties: {policies: [canary, edges]}}
      - {name: again, type: deploy, properties: {policies: [big, canary]}}
      - {name: plain, type: deploy, properties: {policies: [big]}}
";

    fn registry_entry(name: &str, labels: &[(&str, &str)]) -> ClusterConfig {
        ClusterConfig {
            name: name.to_owned(),
            kubeconfig: None,
            context: None,
            labels: labels
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
        }
    }

    /// A render whose one object names the placement it was made for, to tell them apart.
    fn render(app_ref: &AppRef, topology: &str, marker: &str) -> analyzer::Placement {
        analyzer::Placement {
            topology: Some(topology.to_owned()),
            rendered: analyzer::RenderedApp {
                app: app_ref.clone(),
                file: cue::FileId(0),
                objects: vec![analyzer::RenderedObject {
                    component: "web".to_owned(),
                    trait_type: None,
                    output_name: None,
                    object: serde_json::json!({
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": marker, "namespace": "apps"},
                    }),
                }],
                diagnostics: Vec::new(),
                input_hash: String::new(),
            },
        }
    }

    /// A connection that is never used: step planning only looks connections up by name.
    fn unused_connection(name: &str) -> Cluster {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let options = crate::cluster::ClusterOptions {
            name: name.to_owned(),
            ..crate::cluster::ClusterOptions::default()
        };
        Cluster::from_client(kube::Client::try_from(config).unwrap(), &options)
    }

    /// The app, its workflow, and a fleet (hub first; east and west carry `tier: edge`) where
    /// the clusters in `connected` have a connection.
    fn setup(connected: &[&str]) -> (Application, AppRef, WorkflowSpec, Fleet) {
        let app: Application = serde_saphyr::from_str(APP).unwrap();
        let app_ref = AppRef {
            namespace: "apps".to_owned(),
            name: "web".to_owned(),
        };
        let ctx = WorkflowContext {
            policies: app.spec.policies.iter().collect(),
            clusters: None,
        };
        let (spec, issues) = build_workflow(&app, &ctx);
        assert!(issues.is_empty(), "{issues:?}");
        let fleet = Fleet {
            registry: vec![
                registry_entry("hub", &[]),
                registry_entry("east", &[("tier", "edge")]),
                registry_entry("west", &[("tier", "edge")]),
            ],
            clusters: connected
                .iter()
                .map(|name| ((*name).to_owned(), unused_connection(name)))
                .collect(),
            placements: BTreeMap::from([(
                app_ref.clone(),
                vec![
                    render(&app_ref, "canary", "first-canary"),
                    render(&app_ref, "edges", "first-edges"),
                    render(&app_ref, "canary", "again-canary"),
                    analyzer::Placement {
                        topology: None,
                        ..render(&app_ref, "none", "plain")
                    },
                ],
            )]),
        };
        (app, app_ref, spec.unwrap(), fleet)
    }

    fn summary(targets: &[PlannedTarget<'_>]) -> Vec<(usize, String, String, String)> {
        targets
            .iter()
            .map(|target| {
                (
                    target.group,
                    target.placement.cluster.clone(),
                    target.placement.namespace.clone(),
                    target.rendered.objects[0].object["metadata"]["name"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                )
            })
            .collect()
    }

    fn row(
        group: usize,
        cluster: &str,
        namespace: &str,
        render: &str,
    ) -> (usize, String, String, String) {
        (
            group,
            cluster.to_owned(),
            namespace.to_owned(),
            render.to_owned(),
        )
    }

    #[tokio::test]
    async fn each_use_of_a_topology_gets_its_own_render_and_its_clusters_a_group() {
        let (app, app_ref, spec, fleet) = setup(&["east", "west"]);
        let targets = step_targets(&app, &app_ref, &spec, &fleet).unwrap();
        assert_eq!(
            targets.keys().collect::<Vec<_>>(),
            vec!["again", "first"],
            "a deploy step without topology keeps the whole render"
        );
        assert_eq!(
            summary(&targets["first"]),
            vec![
                row(0, "hub", "apps", "first-canary"),
                row(1, "east", "edge-apps", "first-edges"),
                row(1, "west", "edge-apps", "first-edges"),
            ]
        );
        assert_eq!(
            summary(&targets["again"]),
            vec![row(0, "hub", "apps", "again-canary")]
        );
    }

    #[tokio::test]
    async fn unconnected_clusters_are_refused_before_anything_runs() {
        let (app, app_ref, spec, fleet) = setup(&["east"]);
        let issues = step_targets(&app, &app_ref, &spec, &fleet).unwrap_err();
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].rule, "remote-placement-unsupported");
        assert_eq!(issues[0].step.as_deref(), Some("first"));
        assert!(issues[0].message.contains("\"west\""), "{issues:?}");
    }

    #[test]
    fn a_selector_matching_nothing_is_refused() {
        let (app, app_ref, spec, mut fleet) = setup(&[]);
        fleet.registry.truncate(1);
        let issues = step_targets(&app, &app_ref, &spec, &fleet).unwrap_err();
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].rule, "unknown-cluster");
        assert!(issues[0].message.contains("edges"), "{issues:?}");
    }

    #[test]
    fn a_topology_namespace_moves_the_objects_in_the_app_namespace() {
        let app_ref = AppRef {
            namespace: "apps".to_owned(),
            name: "web".to_owned(),
        };
        let rendered = render(&app_ref, "t", "cm").rendered;
        let moved = in_namespace(&rendered, "edge-apps");
        assert_eq!(
            moved.objects[0].object["metadata"]["namespace"],
            "edge-apps"
        );
        assert_eq!(in_namespace(&rendered, "apps").objects, rendered.objects);
    }
}
