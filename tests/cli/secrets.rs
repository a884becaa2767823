//! An app with a Secret: every plan format shows the Secret's key names, and none shows a value
//! (neither `data` nor `stringData`, neither plain nor base64).

use expect_test::expect_file;

use crate::support::TempRepo;

/// The values written into the app; none may appear in any output.
const VALUES: &[&str] = &[
    "hunter2",
    "aHVudGVyMg==",
    "correct-horse-battery-staple",
    "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ",
];

fn repo_with_a_secret() -> TempRepo {
    let repo = TempRepo::new();
    repo.write(
        "apps/db.yaml",
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: db
  namespace: team-a
spec:
  components:
    - name: credentials
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: Secret
            metadata:
              name: db-credentials
            data:
              password: aHVudGVyMg==
            stringData:
              passphrase: correct-horse-battery-staple
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: db-settings
            data:
              host: db.team-a.svc
",
    );
    repo
}

fn assert_no_value(output: &str) {
    for value in VALUES {
        assert!(!output.contains(value), "a Secret value leaked:\n{output}");
    }
    assert!(
        output.contains("password"),
        "key names stay visible:\n{output}"
    );
    assert!(
        output.contains("passphrase"),
        "key names stay visible:\n{output}"
    );
    // Other objects are shown as they are.
    assert!(output.contains("db.team-a.svc"), "{output}");
}

#[test]
fn the_human_plan_of_a_secret_shows_keys_and_no_value() {
    let run = repo_with_a_secret().driftless(&["plan", "."]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_no_value(&run.stdout);
    assert_no_value(&format!("{}{}", run.stdout, run.stderr));
    expect_file!["golden/secret-plan.txt"].assert_eq(&run.stdout);
}

#[test]
fn the_json_plan_of_a_secret_shows_keys_and_no_value() {
    let run = repo_with_a_secret().driftless(&["plan", ".", "-o", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_no_value(&run.stdout);
    expect_file!["golden/secret-plan.json"].assert_eq(&run.stdout);
}

#[test]
fn the_markdown_plan_of_a_secret_shows_keys_and_no_value() {
    let run = repo_with_a_secret().driftless(&["plan", ".", "-o", "markdown"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_no_value(&run.stdout);
    expect_file!["golden/secret-plan.md"].assert_eq(&run.stdout);
}
