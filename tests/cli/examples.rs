//! `render` and `plan` on `examples/repo`, pinned by goldens, and their exit codes.

use expect_test::expect_file;

use crate::support::{TempRepo, application, driftless};

#[test]
fn render_yaml_prints_every_object_of_the_example_repo() {
    let run = driftless(&["render", "examples/repo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.stderr.contains("error"),
        "the example repository has no errors: {run:?}"
    );
    expect_file!["golden/render.stderr"].assert_eq(&run.stderr);
    expect_file!["golden/render.yaml"].assert_eq(&run.stdout);
}

#[test]
fn render_json_is_one_array_of_the_same_objects() {
    let run = driftless(&["render", "examples/repo", "-o", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    expect_file!["golden/render.json"].assert_eq(&run.stdout);
    let objects: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
    let yaml = driftless(&["render", "examples/repo"]).stdout;
    assert_eq!(objects.len(), yaml.matches("\n---\n").count() + 1);
    assert!(objects.iter().all(|object| object["kind"].is_string()));
}

#[test]
fn plan_human_plans_against_an_empty_cluster_and_exits_2() {
    let run = driftless(&["plan", "examples/repo"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout
            .contains("planned against an empty cluster (no kubeconfig given)"),
        "{run:?}"
    );
    expect_file!["golden/plan.txt"].assert_eq(&run.stdout);
}

#[test]
fn plan_json_follows_the_contract() {
    let run = driftless(&["plan", "examples/repo", "-o", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    expect_file!["golden/plan.json"].assert_eq(&run.stdout);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["target"]["kind"], "empty-cluster");
    let apps = plan["apps"].as_array().unwrap();
    let names: Vec<String> = apps
        .iter()
        .map(|app| {
            format!(
                "{}/{}",
                app["namespace"].as_str().unwrap(),
                app["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "team-a/orders",
            "team-a/storefront",
            "team-b/reporting",
            "team-b/search"
        ]
    );
    let n_changes: usize = apps
        .iter()
        .map(|app| app["changes"].as_array().unwrap().len())
        .sum();
    assert_eq!(plan["summary"]["create"].as_u64(), Some(n_changes as u64));
    for change in apps
        .iter()
        .flat_map(|app| app["changes"].as_array().unwrap())
    {
        assert_eq!(change["action"], "create");
        for key in ["cluster", "apiVersion", "kind", "name", "diff"] {
            assert!(change[key].is_string(), "{key} in {change}");
        }
    }
}

#[test]
fn plan_markdown_is_a_pr_comment() {
    let run = driftless(&["plan", "examples/repo", "-o", "markdown"]);
    assert_eq!(run.code, 2, "{run:?}");
    expect_file!["golden/plan.md"].assert_eq(&run.stdout);
    assert!(run.stdout.len() <= 60_000);
}

#[test]
fn plan_markdown_respects_a_size_limit() {
    let run = driftless(&[
        "plan",
        "examples/repo",
        "-o",
        "markdown",
        "--markdown-limit",
        "8000",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.len() <= 8000, "{}", run.stdout.len());
    assert!(
        run.stdout
            .contains("Diff omitted to fit the comment size limit"),
        "{run:?}"
    );
}

#[test]
fn a_single_file_is_planned_with_the_repos_definitions() {
    let run = driftless(&[
        "plan",
        "examples/repo/apps/team-b/search.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let apps = plan["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 1);
    let kinds: Vec<&str> = apps[0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|change| change["kind"].as_str().unwrap())
        .collect();
    // The custom `stateless-api` component and `pod-disruption-budget` trait come from the
    // repository's definitions/.
    assert!(kinds.contains(&"PodDisruptionBudget"), "{kinds:?}");
    assert!(kinds.contains(&"Service"), "{kinds:?}");
}

#[test]
fn an_empty_repo_has_nothing_to_plan_and_exits_0() {
    let repo = TempRepo::new();
    let run = repo.driftless(&["plan", "."]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("No applications found."), "{run:?}");
    assert!(
        run.stdout
            .ends_with("Plan: 0 to create, 0 to update, 0 to delete, 0 conflicts.\n"),
        "{run:?}"
    );
    let run = repo.driftless(&["render"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{run:?}");
}

#[test]
fn a_broken_app_exits_1_while_the_others_are_still_planned() {
    let repo = TempRepo::copy_of_examples();
    repo.write(
        "apps/team-b/broken.yaml",
        &application("team-b", "broken", "no-such-type"),
    );
    let run = repo.driftless(&["plan", ".", "-o", "json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let apps = plan["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 5);
    for app in apps {
        let is_broken = app["name"] == "broken";
        assert_eq!(app["blocked"], is_broken, "{app}");
        assert_eq!(
            app["changes"].as_array().unwrap().is_empty(),
            is_broken,
            "{app}"
        );
    }
    assert!(run.stderr.contains("apps/team-b/broken.yaml:9:"), "{run:?}");

    // `render` prints the other apps' objects and still fails.
    let render = repo.driftless(&["render", "."]);
    assert_eq!(render.code, 1, "{render:?}");
    let all = crate::support::driftless(&["render", "examples/repo"]);
    assert_eq!(render.stdout, all.stdout);
}

#[test]
fn usage_errors_exit_1_not_2() {
    let run = driftless(&["plan", "examples/repo", "-o", "sarif"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("invalid value 'sarif'"), "{run:?}");
    let run = driftless(&["--help"]);
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn a_missing_path_is_an_error_naming_it() {
    let run = driftless(&["plan", "no/such/repo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("error: reading no/such/repo"),
        "{run:?}"
    );
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    // `driftless render | head -0`: the reader is gone before the binary writes its result.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(["render", "examples/repo"])
        .current_dir(crate::support::workspace_root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// Templates branch on `context.clusterVersion`: `--kube-version` picks the release they
/// render for, and `vela-offline` reproduces `vela dry-run --offline` (no version at all).
#[test]
fn kube_version_picks_the_templates_branches() {
    let cron_job_api = |args: &[&str]| {
        let run = driftless(&[&["render", "examples/repo", "-o", "json"], args].concat());
        assert_eq!(run.code, 0, "{run:?}");
        let objects: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
        let cron_job = objects
            .iter()
            .find(|object| object["kind"] == "CronJob")
            .expect("the example repository renders a CronJob");
        cron_job["apiVersion"].as_str().unwrap().to_owned()
    };
    assert_eq!(cron_job_api(&[]), "batch/v1");
    assert_eq!(cron_job_api(&["--kube-version", "1.24"]), "batch/v1beta1");
    assert_eq!(cron_job_api(&["--kube-version", "v1.25.3"]), "batch/v1");
    assert_eq!(
        cron_job_api(&["--kube-version", "vela-offline"]),
        "batch/v1beta1"
    );

    let bad = driftless(&["analyze", "examples/repo", "--kube-version", "latest"]);
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(
        bad.stderr
            .contains("write MAJOR.MINOR (1.30) or vela-offline"),
        "{bad:?}"
    );
    // A live plan renders for the cluster's own version: asking for another is refused
    // before any connection is made.
    let live = driftless(&[
        "plan",
        "examples/repo",
        "--kube-version",
        "1.30",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert_ne!(live.code, 0, "{live:?}");
    assert!(
        live.stderr.contains("--kube-version is for offline plans"),
        "{live:?}"
    );
}
