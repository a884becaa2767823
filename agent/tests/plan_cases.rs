//! Golden planner cases: each directory under `tests/cases/plan/` holds
//! - `case.md`: what the case shows;
//! - `desired.yaml`: the Application(s) as written in Git, rendered here with the built-in
//!   definitions (Kubernetes 1.34), their resource policies read from the same file;
//! - `live.yaml` (optional): the objects as the apiserver holds them;
//! - `tracker.yaml` (optional): one resource tracker record per document, in the stored JSON
//!   shape (`app`, `source`, `revision`, `objects`). A `hash: desired` entry stands for the hash
//!   of the current render of that object (an entry recorded by the last apply of this very
//!   render); any other hash is a stale one. A record whose app is not rendered is an app removed
//!   from Git, planned for deletion;
//! - `plan.txt`: the expected plan (the human output, the unchanged objects that have a reason,
//!   then every diagnostic).
//!
//! The planner runs exactly as in a live plan, without the dry run (the projected comparison).
//! Re-bless with `UPDATE_EXPECT=1`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use agent::plan::{ObjectRef, PlanTarget};
use agent::planner::{
    self, DesiredApp, LiveObjects, Observed, PlanOptions, builtin_scope, plan_all,
};
use agent::tracker::TrackerRecord;
use analyzer::{AppRef, Definitions, Snapshot, SourceFile};
use serde_json::Value;

fn documents(dir: &Path, name: &str) -> datatest_stable::Result<Vec<Value>> {
    let path = dir.join(name);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path)?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(documents.into_iter().filter(|doc| !doc.is_null()).collect())
}

fn app_of(record: &Value) -> Option<AppRef> {
    Some(AppRef {
        namespace: record.pointer("/app/namespace")?.as_str()?.to_owned(),
        name: record.pointer("/app/name")?.as_str()?.to_owned(),
    })
}

/// The tracker record of a document, `hash: desired` replaced by the desired object's hash.
fn tracker_record(
    mut record: Value,
    desired: Option<&DesiredApp>,
) -> datatest_stable::Result<TrackerRecord> {
    if let Some(objects) = record.get_mut("objects").and_then(Value::as_array_mut) {
        for entry in objects {
            if entry.get("hash").and_then(Value::as_str) != Some("desired") {
                continue;
            }
            let object_ref = ObjectRef::from_object(&serde_json::json!({
                "apiVersion": entry["apiVersion"], "kind": entry["kind"],
                "metadata": {"name": entry["name"], "namespace": entry["namespace"]}
            }))?;
            let hash = desired
                .and_then(|desired| {
                    desired
                        .objects
                        .iter()
                        .find(|object| object.object_ref == object_ref)
                })
                .map(|object| object.hash.clone())
                .ok_or_else(|| format!("hash: desired, but {object_ref} is not rendered"))?;
            entry["hash"] = Value::String(hash);
        }
    }
    Ok(TrackerRecord::from_json(
        "case",
        &record.to_string(),
        Some("1".to_owned()),
    )?)
}

fn plan_case(desired_file: &Path) -> datatest_stable::Result<()> {
    let dir = desired_file
        .parent()
        .ok_or("desired.yaml has a parent directory")?;
    let snapshot = Snapshot {
        commit: None,
        files: vec![SourceFile {
            path: "desired.yaml".to_owned(),
            contents: std::fs::read_to_string(desired_file)?,
        }],
    };
    let render_options = analyzer::RenderOptions {
        cluster_version: analyzer::ClusterVersion::release(1, 34),
        ..analyzer::RenderOptions::default()
    };
    let (output, _) =
        analyzer::render_snapshot(&snapshot, &Definitions::builtin(), &render_options);
    let policies = agent::live::policies(&output);

    let mut live = LiveObjects::default();
    for object in documents(dir, "live.yaml")? {
        let object_ref = ObjectRef::from_object(&object)?;
        live.objects.insert(
            object_ref,
            Observed::Present {
                live: object,
                dry_run: None,
            },
        );
    }
    let trackers = documents(dir, "tracker.yaml")?;
    let options = PlanOptions::default();
    let mut app_plans = Vec::new();
    for rendered in &output.apps {
        let app_policies = policies.get(&rendered.app).cloned().unwrap_or_default();
        let desired = DesiredApp::from_rendered(
            rendered,
            &app_policies,
            Some("case".to_owned()),
            &builtin_scope,
        );
        let tracker = trackers
            .iter()
            .find(|record| app_of(record).as_ref() == Some(&rendered.app))
            .map(|record| tracker_record(record.clone(), Some(&desired)))
            .transpose()?;
        app_plans.push(planner::plan_app(
            &desired,
            &live,
            tracker.as_ref(),
            &options,
        ));
    }
    for record in &trackers {
        let app = app_of(record).ok_or("a tracker record without app")?;
        if output.apps.iter().any(|rendered| rendered.app == app) {
            continue;
        }
        let tracker = tracker_record(record.clone(), None)?;
        app_plans.push(planner::plan_app_deletion(&app, &live, &tracker, &options));
    }
    let plan = plan_all(
        app_plans,
        PlanTarget::Clusters(vec!["local".to_owned()]),
        output.diagnostics.clone(),
    );
    let mut text = agent::report::plan_human(&plan);
    // The human plan counts unchanged objects without listing them; the reasons policies give
    // (kept, shared, read-only, drift allowed, lost marks) are what many cases are about.
    let reasons: Vec<String> = plan
        .apps
        .iter()
        .flat_map(|app| app.changes.iter().map(move |change| (app, change)))
        .filter(|(_, change)| change.action == agent::plan::Action::Unchanged)
        .filter_map(|(app, change)| {
            let reason = change.reason.as_deref()?;
            Some(format!("{} {}: {reason}", app.app, change.object))
        })
        .collect();
    if !reasons.is_empty() {
        text.push_str("\nUnchanged, with a reason:\n");
        for line in reasons {
            text.push_str(&format!("  {line}\n"));
        }
    }
    let diagnostics: Vec<String> = plan
        .diagnostics
        .iter()
        .chain(plan.apps.iter().flat_map(|app| &app.diagnostics))
        .map(|diagnostic| {
            let severity = match diagnostic.severity {
                analyzer::Severity::Error => "error",
                analyzer::Severity::Warning => "warning",
            };
            format!("{severity} {}: {}", diagnostic.rule, diagnostic.message)
        })
        .collect();
    if !diagnostics.is_empty() {
        text.push_str("\nDiagnostics:\n");
        for line in diagnostics {
            text.push_str(&format!("  {line}\n"));
        }
    }
    let absolute = std::env::current_dir()?.join(dir);
    expect_test::expect_file![absolute.join("plan.txt")].assert_eq(&text);
    Ok(())
}

datatest_stable::harness! {
    { test = plan_case, root = "tests/cases/plan", pattern = r"desired\.yaml$" },
}
