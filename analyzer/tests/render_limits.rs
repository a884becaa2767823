//! Render limits: an app whose templates take too many evaluation steps or too much time is
//! blocked with a diagnostic naming the definition and the limit, the other apps render, the
//! limits come from `driftless.yaml`, and the diagnostics cannot be switched off.
//! (`tests/cases/render/render-budget` shows the default step budget.)

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use analyzer::{AnalysisConfig, AnalysisOptions, RenderLimits, RenderOptions, RenderOutput};

fn hostile_repo() -> analyzer::Snapshot {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases/render/render-budget");
    common::snapshot_of_dir(&dir, &["case.md", "render.yaml", "diagnostics.txt"]).unwrap()
}

/// Each app's name with the rules of its error diagnostics and its number of objects.
fn summary(output: &RenderOutput) -> Vec<(String, Vec<&str>, usize)> {
    output
        .apps
        .iter()
        .map(|app| {
            let errors = app
                .diagnostics
                .iter()
                .filter(|d| d.severity == analyzer::Severity::Error)
                .map(|d| d.rule)
                .collect();
            (app.app.name.clone(), errors, app.objects.len())
        })
        .collect()
}

#[test]
fn an_app_past_its_deadline_is_blocked_and_the_others_render() {
    let options = RenderOptions {
        limits: RenderLimits {
            steps: u64::MAX,
            app_seconds: 0.2,
        },
        ..RenderOptions::default()
    };
    let (output, _) = analyzer::render_snapshot(&hostile_repo(), common::builtins(), &options);
    assert_eq!(
        summary(&output),
        vec![
            ("grid".to_owned(), vec!["render-deadline"], 0),
            ("notes".to_owned(), vec![], 2),
            ("small-grid".to_owned(), vec![], 1),
        ]
    );
    let message = &output.apps[0].diagnostics[0].message;
    assert_eq!(
        message,
        "component `cells`: evaluating the template of ComponentDefinition `grid` stopped: it \
         ran past its deadline of 200ms; the app is not rendered. Make the template do less \
         work, or raise `analysis.limits.appSeconds` in driftless.yaml if it really needs more"
    );
}

#[test]
fn limits_come_from_driftless_yaml_and_stay_errors() {
    // A budget small enough for the 2-by-2 grid but not the 3,000-by-3,000 one, and an attempt
    // to switch the rule off.
    let config = AnalysisConfig::from_agent_config(
        "analysis:\n  rules: { render-budget: off }\n  ignore:\n    - paths: ['**']\n      rules: [render-budget]\n  limits: { steps: 50000 }\n",
    )
    .unwrap();
    let options = AnalysisOptions::with_config(config);
    assert_eq!(options.render.limits.steps, 50_000);
    assert_eq!(
        options.render.limits.app_seconds,
        RenderLimits::DEFAULT_APP_SECONDS
    );
    let (output, _) = analyzer::analyze_snapshot(&hostile_repo(), common::builtins(), &options);
    let summary = summary(&output);
    assert_eq!(summary[0], ("grid".to_owned(), vec!["render-budget"], 0));
    assert!(
        output.apps[0].diagnostics[0]
            .message
            .contains("it exceeded its budget of 50000 steps"),
        "{:?}",
        output.apps[0].diagnostics
    );
    assert_eq!(summary[1].2, 2);
    assert_eq!(summary[2].2, 1);
}

#[test]
fn limits_must_be_positive() {
    for limits in ["{ steps: 0 }", "{ appSeconds: 0 }", "{ appSeconds: -1 }"] {
        let error = AnalysisConfig::from_agent_config(&format!("analysis:\n  limits: {limits}\n"))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`analysis.limits` must be positive"),
            "{limits}: {error}"
        );
    }
    let error =
        AnalysisConfig::from_agent_config("analysis:\n  limits: { stepz: 5 }\n").unwrap_err();
    assert!(error.to_string().contains("stepz"), "{error}");
}
