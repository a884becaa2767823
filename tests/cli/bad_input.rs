//! Bad input in a temporary repository: each problem is a diagnostic on stderr naming the
//! file, line and field, and the command exits 1.

use expect_test::expect_file;

use crate::support::{TempRepo, application};

#[test]
fn a_yaml_syntax_error_names_the_file_and_line() {
    let repo = TempRepo::new();
    repo.write(
        "apps/good.yaml",
        &application("team-a", "good", "webservice"),
    );
    repo.write(
        "apps/bad.yaml",
        "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata:\n  name: bad\nspec:\n  components:\n    - name: bad\n      type: [webservice\n",
    );
    let run = repo.driftless(&["plan", "."]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("apps/bad.yaml:"), "{run:?}");
    expect_file!["golden/yaml-syntax.stderr"].assert_eq(&run.stderr);
    // The good app is still planned.
    assert!(
        run.stdout.contains("+ create   Deployment team-a/good"),
        "{run:?}"
    );
}

#[test]
fn an_unknown_component_type_names_the_type_field() {
    let repo = TempRepo::new();
    repo.write("apps/web.yaml", &application("team-a", "web", "webservise"));
    let run = repo.driftless(&["render", "."]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("apps/web.yaml:9:"), "{run:?}");
    expect_file!["golden/unknown-component-type.stderr"].assert_eq(&run.stderr);
}

#[test]
fn invalid_properties_name_the_property() {
    let repo = TempRepo::new();
    repo.write(
        "apps/web.yaml",
        "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata:\n  name: web\n  namespace: team-a\nspec:\n  components:\n    - name: web\n      type: webservice\n      properties:\n        image: 42\n",
    );
    let run = repo.driftless(&["plan", ".", "-o", "json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let diagnostic = &plan["apps"][0]["diagnostics"][0];
    assert_eq!(diagnostic["severity"], "error", "{diagnostic}");
    assert_eq!(diagnostic["file"], "apps/web.yaml", "{diagnostic}");
    assert_eq!(diagnostic["app"], "team-a/web", "{diagnostic}");
    assert_eq!(diagnostic["component"], "web", "{diagnostic}");
    assert!(diagnostic["line"].as_u64().is_some(), "{diagnostic}");
    assert!(
        diagnostic["message"].as_str().unwrap().contains("image"),
        "{diagnostic}"
    );
    expect_file!["golden/invalid-properties.stderr"].assert_eq(&run.stderr);
}

#[test]
fn a_cue_error_in_a_yaml_definition_points_into_the_yaml_file() {
    let repo = TempRepo::new();
    repo.write(
        "apps/web.yaml",
        &application("team-a", "web", "broken-service"),
    );
    repo.write(
        "definitions/broken-service.yaml",
        "apiVersion: core.oam.dev/v1beta1\nkind: ComponentDefinition\nmetadata:\n  name: broken-service\nspec:\n  workload:\n    definition:\n      apiVersion: apps/v1\n      kind: Deployment\n  schematic:\n    cue:\n      template: |\n        output: {\n          apiVersion: \"apps/v1\"\n          kind: \"Deployment\"\n          spec: replicas: 1 +\n        }\n        parameter: image: string\n",
    );
    let run = repo.driftless(&["render", "."]);
    assert_eq!(run.code, 1, "{run:?}");
    // The parser stops at the `}` on line 17 of the YAML file (the template's fifth line).
    assert!(
        run.stderr.contains("definitions/broken-service.yaml:17:9"),
        "{run:?}"
    );
    expect_file!["golden/cue-syntax-in-yaml-definition.stderr"].assert_eq(&run.stderr);
}
