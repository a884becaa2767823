//! `analyzer::render_placements` for what only the per-placement render does: `replication`
//! policies (one copy of the selected components per key, `context.replicaKey` set) and the
//! deploy sub-steps of step groups; and the single render (`render_snapshot`) staying what
//! `vela dry-run` prints for the same app (replication ignored, `context.replicaKey` empty,
//! observed with vela v1.11.0).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use analyzer::{Definitions, RenderOptions, RenderedApp, Snapshot, SourceFile};

/// A ConfigMap named after the component and its replica key, the key also in its data.
const DEFINITION: &str = r#"apiVersion: core.oam.dev/v1beta1
kind: ComponentDefinition
metadata:
  name: rep-cm
spec:
  workload:
    definition: {apiVersion: v1, kind: ConfigMap}
  schematic:
    cue:
      template: |
        output: {
          apiVersion: "v1"
          kind: "ConfigMap"
          metadata: name: context.name + "-" + context.replicaKey
          data: key: context.replicaKey
          data: v: parameter.v
        }
        parameter: v: string
"#;

/// The same, but its name ignores the replica key.
const KEYLESS_DEFINITION: &str = r#"apiVersion: core.oam.dev/v1beta1
kind: ComponentDefinition
metadata:
  name: plain-cm
spec:
  workload:
    definition: {apiVersion: v1, kind: ConfigMap}
  schematic:
    cue:
      template: |
        output: {
          apiVersion: "v1"
          kind: "ConfigMap"
          metadata: name: context.name
          data: key: context.replicaKey
        }
"#;

fn app(component_type: &str, replication: &str, steps: &str) -> String {
    format!(
        r#"apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: rep
  namespace: apps
spec:
  components:
    - name: a
      type: {component_type}
      properties: {{v: "xx"}}
    - name: b
      type: rep-cm
      properties: {{v: "yy"}}
  policies:
    - name: t
      type: topology
      properties:
        clusters: ["local"]
    - name: edge
      type: topology
      properties:
        clusters: ["edge"]
    - name: r
      type: replication
      properties: {replication}
  workflow:
    steps:
{steps}"#
    )
}

const DEPLOY_WITH_REPLICATION: &str = r#"      - name: d
        type: deploy
        properties:
          policies: ["t", "r"]
"#;

fn snapshot(app: &str) -> Snapshot {
    let file = |path: &str, contents: &str| SourceFile {
        path: path.to_owned(),
        contents: contents.to_owned(),
    };
    Snapshot {
        commit: None,
        files: vec![
            file("apps/app.yaml", app),
            file("definitions/rep.yaml", DEFINITION),
            file("definitions/plain.yaml", KEYLESS_DEFINITION),
        ],
    }
}

/// `name key=<data.key> replica=<label>` per object.
fn summary(rendered: &RenderedApp) -> Vec<String> {
    rendered
        .objects
        .iter()
        .map(|object| {
            let object = &object.object;
            format!(
                "{} key={} replica={}",
                object["metadata"]["name"].as_str().unwrap(),
                object["data"]["key"].as_str().unwrap(),
                object["metadata"]["labels"]["app.oam.dev/replicaKey"]
                    .as_str()
                    .unwrap_or("-"),
            )
        })
        .collect()
}

fn errors(rendered: &RenderedApp) -> Vec<String> {
    rendered
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.severity == analyzer::Severity::Error)
        .map(|diagnostic| format!("{}: {}", diagnostic.rule, diagnostic.message))
        .collect()
}

fn placements(app: &str) -> Vec<(Option<String>, RenderedApp)> {
    let (apps, _) = analyzer::render_placements(
        &snapshot(app),
        &Definitions::builtin(),
        &RenderOptions::default(),
    );
    assert_eq!(apps.len(), 1);
    apps.into_iter()
        .next()
        .unwrap()
        .placements
        .into_iter()
        .map(|placement| (placement.topology, placement.rendered))
        .collect()
}

const KEYS: &str = r#"{keys: ["beijing", "hangzhou"], selector: ["a"]}"#;

#[test]
fn replication_renders_the_selected_components_once_per_key() {
    let placements = placements(&app("rep-cm", KEYS, DEPLOY_WITH_REPLICATION));
    assert_eq!(placements.len(), 1);
    let (topology, rendered) = &placements[0];
    assert_eq!(topology.as_deref(), Some("t"));
    assert!(errors(rendered).is_empty(), "{:?}", errors(rendered));
    assert_eq!(
        summary(rendered),
        [
            "a-beijing key=beijing replica=beijing",
            "a-hangzhou key=hangzhou replica=hangzhou",
            "b- key= replica=-",
        ]
    );
}

#[test]
fn the_single_render_ignores_replication_like_vela_dry_run() {
    // vela v1.11.0 `dry-run --offline` on this app prints `a-` and `b-`, each with
    // `data.key: ""` and no replicaKey label.
    let (output, _) = analyzer::render_snapshot(
        &snapshot(&app("rep-cm", KEYS, DEPLOY_WITH_REPLICATION)),
        &Definitions::builtin(),
        &RenderOptions::default(),
    );
    assert_eq!(
        summary(&output.apps[0]),
        ["a- key= replica=-", "b- key= replica=-"]
    );
}

#[test]
fn bad_replication_policies_block_the_placement() {
    let no_keys = placements(&app(
        "rep-cm",
        r#"{keys: [], selector: ["a"]}"#,
        DEPLOY_WITH_REPLICATION,
    ));
    assert_eq!(
        errors(&no_keys[0].1),
        [
            "invalid-properties: replication policy `r`: `keys` is empty: nothing would be replicated"
        ]
    );
    assert!(no_keys[0].1.objects.is_empty());
    let selects_none = placements(&app(
        "rep-cm",
        r#"{keys: ["x"], selector: ["nope"]}"#,
        DEPLOY_WITH_REPLICATION,
    ));
    assert_eq!(
        errors(&selects_none[0].1),
        [
            "invalid-properties: replication policy `r`: `selector` [\"nope\"] selects no component to replicate"
        ]
    );
    let keyless = placements(&app("plain-cm", KEYS, DEPLOY_WITH_REPLICATION));
    assert_eq!(
        errors(&keyless[0].1),
        [
            "invalid-properties: replicas `beijing` and `hangzhou` of component `a` render the same ConfigMap apps/a; its definition must use `context.replicaKey` in the names"
        ]
    );
    assert!(keyless[0].1.objects.is_empty());
}

#[test]
fn deploy_sub_steps_of_step_groups_are_placed_after_the_top_level_steps() {
    let steps = r#"      - name: first
        type: deploy
        properties:
          policies: ["t"]
      - name: group
        type: step-group
        subSteps:
          - name: inner
            type: deploy
            properties:
              policies: ["edge", "r"]
"#;
    let placements = placements(&app("rep-cm", KEYS, steps));
    let topologies: Vec<Option<&str>> = placements
        .iter()
        .map(|(topology, _)| topology.as_deref())
        .collect();
    assert_eq!(topologies, [Some("t"), Some("edge")]);
    assert_eq!(
        summary(&placements[0].1),
        ["a- key= replica=-", "b- key= replica=-"]
    );
    assert_eq!(
        summary(&placements[1].1),
        [
            "a-beijing key=beijing replica=beijing",
            "a-hangzhou key=hangzhou replica=hangzhou",
            "b- key= replica=-",
        ]
    );
}
