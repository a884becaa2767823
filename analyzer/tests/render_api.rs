//! The public render API's guarantees: deterministic output, input hashes that change exactly
//! when an app's inputs change, and spans that resolve to file, line and column.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use analyzer::{RenderOptions, Snapshot, SourceFile, render_snapshot};

fn file(path: &str, contents: &str) -> SourceFile {
    SourceFile {
        path: path.to_owned(),
        contents: contents.to_owned(),
    }
}

const TRAIT: &str = "\"team-label\": {\n\ttype: \"trait\"\n\tattributes: {}\n}\ntemplate: {\n\tpatch: metadata: labels: team: parameter.team\n\tparameter: team: string\n}\n";

fn app(name: &str, with_trait: bool) -> String {
    let traits = if with_trait {
        "\n      traits:\n        - type: team-label\n          properties: {team: a}"
    } else {
        ""
    };
    format!(
        "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata:\n  name: {name}\nspec:\n  components:\n    - name: c\n      type: worker\n      properties:\n        image: busybox{traits}\n"
    )
}

fn snapshot(trait_source: &str) -> Snapshot {
    Snapshot {
        commit: None,
        files: vec![
            file("apps/a.yaml", &app("a", true)),
            file("apps/b.yaml", &app("b", false)),
            file("definitions/traits/team-label.cue", trait_source),
        ],
    }
}

#[test]
fn renders_are_deterministic_and_hashes_track_inputs() {
    let builtins = common::builtins();
    let options = RenderOptions::default();
    let (first, _) = render_snapshot(&snapshot(TRAIT), builtins, &options);
    let (second, _) = render_snapshot(&snapshot(TRAIT), builtins, &options);
    assert_eq!(common::render_yaml(&first), common::render_yaml(&second));
    assert!(
        first.apps.iter().all(|app| !app.is_blocked()),
        "{:?}",
        first.apps
    );
    let hashes = |output: &analyzer::RenderOutput| -> Vec<String> {
        output
            .apps
            .iter()
            .map(|app| app.input_hash.clone())
            .collect()
    };
    assert_eq!(hashes(&first), hashes(&second));
    assert_ne!(first.apps[0].input_hash, first.apps[1].input_hash);
    assert_eq!(
        first.apps[0].objects[0].object["metadata"]["labels"]["team"],
        "a"
    );

    // Changing the trait's source changes the hash of the app that uses it only.
    let changed = TRAIT.replace("parameter.team", "\"x-\" + parameter.team");
    let (third, _) = render_snapshot(&snapshot(&changed), builtins, &options);
    assert_ne!(third.apps[0].input_hash, first.apps[0].input_hash);
    assert_eq!(third.apps[1].input_hash, first.apps[1].input_hash);
    assert_eq!(
        third.apps[0].objects[0].object["metadata"]["labels"]["team"],
        "x-a"
    );

    // A forced namespace is an input too.
    let forced = RenderOptions {
        forced_namespace: Some("other".to_owned()),
        ..RenderOptions::default()
    };
    let (fourth, _) = render_snapshot(&snapshot(TRAIT), builtins, &forced);
    assert_ne!(fourth.apps[1].input_hash, first.apps[1].input_hash);
}

#[test]
fn a_bad_app_does_not_block_the_others() {
    let snapshot = Snapshot {
        commit: None,
        files: vec![
            file("apps/a.yaml", &app("a", false)),
            file(
                "apps/b.yaml",
                &app("b", false).replace("image: busybox", "image: [busybox"),
            ),
            file("apps/c.yaml", &app("c", true)),
        ],
    };
    let (output, sources) =
        render_snapshot(&snapshot, common::builtins(), &RenderOptions::default());
    let names: Vec<String> = output.apps.iter().map(|app| app.app.to_string()).collect();
    assert_eq!(names, ["default/a", "default/c"]);
    assert!(!output.apps[0].is_blocked());
    // `c` uses a trait that only exists in another snapshot: blocked, with the position.
    let diagnostic = &output.apps[1].diagnostics[0];
    assert_eq!(diagnostic.rule, "unknown-trait-type");
    let location = sources.locate(diagnostic.span.unwrap());
    assert_eq!(
        (location.path.as_str(), location.line, location.column),
        ("apps/c.yaml", 12, 17)
    );
    assert!(output.apps[1].objects.is_empty());
    assert_eq!(output.diagnostics[0].rule, "yaml-syntax");
    assert_eq!(
        sources.locate(output.diagnostics[0].span.unwrap()).path,
        "apps/b.yaml"
    );
}

/// Render never panics: every prefix (by line) of an app and of a definition renders without an
/// `internal-error` (a caught panic).
#[test]
fn truncated_inputs_never_panic() {
    let app_text = app("a", true);
    let app_lines: Vec<&str> = app_text.split_inclusive('\n').collect();
    let trait_lines: Vec<&str> = TRAIT.split_inclusive('\n').collect();
    let mut cases = Vec::new();
    for cut in 0..=app_lines.len() {
        cases.push((app_lines[..cut].concat(), TRAIT.to_owned()));
    }
    for cut in 0..=trait_lines.len() {
        cases.push((app_text.clone(), trait_lines[..cut].concat()));
    }
    for (app_source, trait_source) in cases {
        let snapshot = Snapshot {
            commit: None,
            files: vec![
                file("apps/a.yaml", &app_source),
                file("definitions/traits/team-label.cue", &trait_source),
            ],
        };
        let (output, sources) =
            render_snapshot(&snapshot, common::builtins(), &RenderOptions::default());
        let text = common::diagnostics_text(&output, &sources);
        assert!(
            !text.contains("internal-error"),
            "{app_source}\n{trait_source}\n{text}"
        );
    }
}

/// The same for a large real template: every 7th-line prefix of the built-in webservice
/// definition, used as a repo-local override.
#[test]
fn truncated_webservice_definitions_never_panic() {
    let definition = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../definitions/components/webservice.cue"),
    )
    .unwrap();
    let lines: Vec<&str> = definition.split_inclusive('\n').collect();
    let app_source = app("a", false).replace("type: worker", "type: webservice");
    for cut in (0..=lines.len()).step_by(7) {
        let snapshot = Snapshot {
            commit: None,
            files: vec![
                file("apps/a.yaml", &app_source),
                file(
                    "definitions/components/webservice.cue",
                    &lines[..cut].concat(),
                ),
            ],
        };
        let (output, sources) =
            render_snapshot(&snapshot, common::builtins(), &RenderOptions::default());
        let text = common::diagnostics_text(&output, &sources);
        assert!(
            !text.contains("internal-error"),
            "cut at line {cut}:\n{text}"
        );
    }
}
