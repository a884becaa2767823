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
    - {name: twice, type: replication, properties: {keys: [a, b], selector: [web]}}
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
            inputs: Default::default(),
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
            .map(|name| ((*name).to_owned(), Arc::new(unused_connection(name))))
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

#[tokio::test]
async fn a_cluster_the_registry_lacks_is_skipped_with_a_warning_and_the_rest_deploys() {
    let (_, app_ref, _, mut fleet) = setup(&["east", "west"]);
    let text = APP.replace(
        "    - {name: big,",
        "    - {name: far, type: topology, properties: {clusters: [staging]}}
    - {name: mixed, type: topology, properties: {clusters: [local, staging]}}
    - {name: big,",
    );
    let (app, spec) = {
        let text = text.split("  workflow:").next().unwrap().to_owned()
            + "  workflow:\n    steps:\n"
            + "      - {name: remote, type: deploy, properties: {policies: [far]}}
      - {name: both, type: deploy, properties: {policies: [mixed]}}
";
        let app: Application = serde_saphyr::from_str(&text).unwrap();
        let ctx = WorkflowContext {
            policies: app.spec.policies.iter().collect(),
            clusters: Some(fleet.names()),
        };
        let (spec, issues) = build_workflow(&app, &ctx);
        assert!(issues.is_empty(), "refused: {issues:?}");
        (app, spec.unwrap())
    };
    if let Some(renders) = fleet.placements.get_mut(&app_ref) {
        renders.push(render(&app_ref, "far", "far"));
        renders.push(render(&app_ref, "mixed", "mixed"));
    }
    let targets = step_targets(&app, &app_ref, &spec, &fleet).unwrap();
    // Present but empty: an absent step would deploy the whole app to the hub.
    assert_eq!(summary(&targets["remote"]), vec![]);
    assert_eq!(
        summary(&targets["both"]),
        vec![row(0, "hub", "apps", "mixed")]
    );
    let unreachable = unreachable_placements(&app, &spec, &fleet);
    let summary: Vec<(&str, &str, &str)> = unreachable
        .iter()
        .map(|skipped| {
            (
                skipped.step.as_str(),
                skipped.topology.as_str(),
                skipped.cluster.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [("remote", "far", "staging"), ("both", "mixed", "staging")]
    );
    let message = unreachable[0].message();
    assert!(
        message.contains("skipped") && message.contains("--cluster staging=KUBECONFIG"),
        "{message}"
    );
}

/// The app with `steps` as its workflow, built against the `setup` fleet.
fn app_with_steps(steps: &str) -> (Application, WorkflowSpec) {
    let text =
        APP.split("  workflow:").next().unwrap().to_owned() + "  workflow:\n    steps:\n" + steps;
    let app: Application = serde_saphyr::from_str(&text).unwrap();
    let ctx = WorkflowContext {
        policies: app.spec.policies.iter().collect(),
        clusters: None,
    };
    let (spec, issues) = build_workflow(&app, &ctx);
    assert!(issues.is_empty(), "{issues:?}");
    (app, spec.unwrap())
}

#[tokio::test]
async fn deploy_sub_steps_of_step_groups_get_the_renders_after_the_top_level_ones() {
    let (_, app_ref, _, fleet) = setup(&["east", "west"]);
    let (app, spec) = app_with_steps(
        "      - {name: first, type: deploy, properties: {policies: [canary]}}
      - name: group
        type: step-group
        subSteps:
          - {name: inner, type: deploy, properties: {policies: [edges]}}
          - {name: again, type: deploy, properties: {policies: [canary]}}
",
    );
    let targets = step_targets(&app, &app_ref, &spec, &fleet).unwrap();
    assert_eq!(
        summary(&targets["first"]),
        vec![row(0, "hub", "apps", "first-canary")]
    );
    assert_eq!(
        summary(&targets["inner"]),
        vec![
            row(0, "east", "edge-apps", "first-edges"),
            row(0, "west", "edge-apps", "first-edges"),
        ]
    );
    assert_eq!(
        summary(&targets["again"]),
        vec![row(0, "hub", "apps", "again-canary")]
    );
}

#[tokio::test]
async fn a_deploy_step_replicating_without_topology_targets_the_workflow_cluster() {
    let (_, app_ref, _, fleet) = setup(&["east", "west"]);
    let (app, spec) = app_with_steps(
        "      - {name: first, type: deploy, properties: {policies: [canary]}}
      - {name: rep, type: deploy, properties: {policies: [twice]}}
",
    );
    let targets = step_targets(&app, &app_ref, &spec, &fleet).unwrap();
    assert_eq!(
        summary(&targets["rep"]),
        vec![row(0, "hub", "apps", "plain")],
        "the first render made without topology"
    );
}

#[tokio::test]
async fn a_placement_whose_render_has_errors_is_refused() {
    let (app, app_ref, spec, mut fleet) = setup(&["east", "west"]);
    let renders = fleet.placements.get_mut(&app_ref).unwrap();
    renders[1].rendered.objects.clear();
    renders[1]
        .rendered
        .diagnostics
        .push(analyzer::Diagnostic::error(
            "invalid-properties",
            "replication policy `r`: `keys` is empty: nothing would be replicated",
            None,
        ));
    let issues = step_targets(&app, &app_ref, &spec, &fleet).unwrap_err();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].rule, "invalid-placement");
    assert_eq!(issues[0].step.as_deref(), Some("first"));
    assert!(issues[0].message.contains("`keys` is empty"), "{issues:?}");
}

#[tokio::test]
async fn the_workflow_cluster_counts_as_placed_only_when_a_step_deploys_there() {
    let (_, _, spec, fleet) = setup(&["east", "west"]);
    let local = unused_connection("hub");
    let east = fleet.connection("east", &local).unwrap();
    let target = |cluster| Target {
        group: 0,
        cluster,
        desired: DesiredApp {
            app: AppRef {
                namespace: "apps".to_owned(),
                name: "web".to_owned(),
            },
            revision: None,
            objects: Vec::new(),
            policies: Default::default(),
            diagnostics: Vec::new(),
        },
    };
    // `plain` deploys without topology, so to the workflow's own cluster.
    let all: StepTargets<'_> = BTreeMap::from([
        ("first".to_owned(), vec![target(east)]),
        ("again".to_owned(), vec![target(east)]),
    ]);
    let names = |set: BTreeSet<String>| set.into_iter().collect::<Vec<_>>();
    assert_eq!(names(placed_clusters(&spec, &all, "hub")), ["east", "hub"]);
    let (_, only_edges) =
        app_with_steps("      - {name: first, type: deploy, properties: {policies: [edges]}}\n");
    let edges: StepTargets<'_> = BTreeMap::from([("first".to_owned(), vec![target(east)])]);
    assert_eq!(names(placed_clusters(&only_edges, &edges, "hub")), ["east"]);
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
