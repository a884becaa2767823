//! The plan for people, Terraform-like:
//!
//! ```text
//! Driftless plan: planned against an empty cluster (no kubeconfig given): every object is a create
//!
//! Objects to prune:
//!   - ConfigMap team-a/old (cluster local)
//!
//! App team-a/web (revision 1a2b3c4)
//!   + create   Deployment team-a/web
//!       + apiVersion: apps/v1
//!       ...
//!   ~ update   Service team-a/web
//!       changed: spec.ports
//!       @@ -3,3 +3,3 @@ ...
//!   - delete   ConfigMap team-a/old
//!   ! conflict ConfigMap team-a/shared: owned by app team-b/api
//!   team-a/web: 1 to create, 1 to update, 1 to delete, 1 conflict, 4 unchanged
//!   health: progressing
//!     component web: healthy; status: Ready:2/2
//!     component worker: progressing (Deployment team-a/worker: 1 of 2 updated replicas are available)
//!
//! Changes by kind:
//!   ...
//!
//! Plan: 1 to create, 1 to update, 1 to delete, 1 conflict
//! ```
//!
//! Deletes come first (the prune list is also shown on its own above the apps), because a
//! prune is the change a reviewer most needs to see. Unchanged objects are counted, not
//! listed. Diagnostics are not repeated here: they are drawn on stderr, and a blocked app
//! says so in one line.

use std::fmt::Write as _;

use crate::plan::{Action, AppPlan, Change, Plan};
use crate::report::{Summary, target_description};

/// Indentation of a change's body (its diff) under its header line.
const BODY_INDENT: &str = "      ";

/// The plan as text, ending with a newline.
pub fn plan_human(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Driftless plan: {}", target_description(&plan.target));

    let prunes: Vec<&Change> = plan
        .apps
        .iter()
        .flat_map(|app| &app.changes)
        .filter(|change| change.action == Action::Delete)
        .collect();
    if !prunes.is_empty() {
        let _ = writeln!(out, "\nObjects to prune:");
        for change in prunes {
            let _ = writeln!(
                out,
                "  - {} (cluster {})",
                super::object_label(&change.object),
                change.cluster
            );
        }
    }

    for app in &plan.apps {
        out.push('\n');
        write_app(&mut out, app);
    }
    if plan.apps.is_empty() {
        let _ = writeln!(out, "\nNo applications found.");
    }

    let by_kind = Summary::by_kind(plan);
    if by_kind.values().any(Summary::has_changes) {
        let width = by_kind
            .keys()
            .map(String::len)
            .max()
            .unwrap_or(0)
            .max("kind".len());
        let _ = writeln!(out, "\nChanges by kind:");
        let _ = writeln!(
            out,
            "  {:<width$}  create  update  delete  conflict  unchanged",
            "kind"
        );
        for (kind, counts) in &by_kind {
            let _ = writeln!(
                out,
                "  {kind:<width$}  {:>6}  {:>6}  {:>6}  {:>8}  {:>9}",
                counts.create, counts.update, counts.delete, counts.conflict, counts.unchanged
            );
        }
    }

    let summary = Summary::of_plan(plan);
    let blocked = plan.apps.iter().filter(|app| is_blocked(app)).count();
    let _ = write!(out, "\nPlan: {}", summary.sentence());
    if summary.unchanged > 0 {
        let _ = write!(out, " ({} unchanged)", summary.unchanged);
    }
    out.push('.');
    if let Some(digest) = crate::review::digest::plan_digest(plan) {
        let _ = write!(
            out,
            " Plan digest {}.",
            crate::review::digest::short(&digest)
        );
    }
    if blocked > 0 {
        let _ = write!(
            out,
            " {blocked} {} blocked by errors.",
            if blocked == 1 { "app" } else { "apps" }
        );
    }
    out.push('\n');
    out
}

fn write_app(out: &mut String, app: &AppPlan) {
    let revision = app.revision.as_deref().unwrap_or("working tree");
    match &app.digest {
        Some(digest) => {
            let _ = writeln!(
                out,
                "App {} (revision {revision}, digest {digest})",
                app.app
            );
        }
        None => {
            let _ = writeln!(out, "App {} (revision {revision})", app.app);
        }
    }
    if is_blocked(app) {
        let errors = app
            .diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.severity == analyzer::Severity::Error)
            .count();
        let _ = writeln!(
            out,
            "  blocked by {errors} {}; not planned (see the diagnostics on stderr)",
            if errors == 1 { "error" } else { "errors" }
        );
        return;
    }
    for change in &app.changes {
        write_change(out, change);
    }
    let summary = Summary::of_app(app);
    if summary.has_changes() {
        let _ = write!(out, "  {}: {}", app.app, summary.sentence());
        if summary.unchanged > 0 {
            let _ = write!(out, ", {} unchanged", summary.unchanged);
        }
        out.push('\n');
    } else {
        let _ = writeln!(
            out,
            "  no changes ({} objects unchanged)",
            summary.unchanged
        );
    }
    if let Some(health) = &app.health {
        write_health(out, health);
    }
}

/// The app's health as observed when planning, then one line per component: its health, why it
/// is not healthy, and its definition's custom status message.
fn write_health(out: &mut String, health: &crate::health::AppHealth) {
    let _ = writeln!(out, "  health: {}", health.health.status.as_str());
    for component in &health.components {
        let _ = write!(
            out,
            "    component {}: {}",
            component.component,
            component.health.status.as_str()
        );
        if !component.health.message.is_empty() {
            let _ = write!(out, " ({})", component.health.message);
        }
        if let Some(message) = &component.message {
            let _ = write!(out, "; status: {message}");
        }
        out.push('\n');
    }
}

fn write_change(out: &mut String, change: &Change) {
    let (symbol, word) = match change.action {
        Action::Create => ('+', "create"),
        Action::Update => ('~', "update"),
        Action::Delete => ('-', "delete"),
        Action::Conflict => ('!', "conflict"),
        Action::Unchanged => return,
    };
    let cluster = if change.cluster == "local" {
        String::new()
    } else {
        format!(" (cluster {})", change.cluster)
    };
    let _ = write!(
        out,
        "  {symbol} {word:<8} {}{cluster}",
        super::object_label(&change.object)
    );
    if let Some(reason) = &change.reason {
        let _ = write!(out, ": {reason}");
    }
    out.push('\n');
    match change.action {
        Action::Create => write_prefixed(out, &change.diff, "+ "),
        Action::Delete => write_prefixed(out, &change.diff, "- "),
        Action::Update => {
            if !change.changed_fields.is_empty() {
                let _ = writeln!(
                    out,
                    "{BODY_INDENT}changed: {}",
                    change.changed_fields.join(", ")
                );
            }
            write_prefixed(out, &change.diff, "");
        }
        Action::Conflict | Action::Unchanged => {}
    }
}

fn write_prefixed(out: &mut String, text: &str, prefix: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{BODY_INDENT}{prefix}{line}");
    }
}

fn is_blocked(app: &AppPlan) -> bool {
    app.diagnostics
        .iter()
        .any(|diagnostic| diagnostic.severity == analyzer::Severity::Error)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::{ObjectRef, PlanTarget};
    use analyzer::{AppRef, Diagnostic};
    use expect_test::expect;

    pub(crate) fn change(action: Action, kind: &str, name: &str, diff: &str) -> Change {
        Change {
            action,
            cluster: "local".into(),
            object: ObjectRef {
                api_version: if kind == "Deployment" {
                    "apps/v1"
                } else {
                    "v1"
                }
                .into(),
                kind: kind.into(),
                namespace: Some("team-a".into()),
                name: name.into(),
            },
            diff: diff.into(),
            changed_fields: if action == Action::Update {
                vec!["spec.replicas".into()]
            } else {
                Vec::new()
            },
            reason: (action == Action::Conflict).then(|| "owned by app team-b/api".to_owned()),
        }
    }

    pub(crate) fn sample_plan() -> Plan {
        let app = |name: &str| AppRef {
            namespace: "team-a".into(),
            name: name.into(),
        };
        Plan {
            target: PlanTarget::Clusters(vec!["local".into()]),
            apps: vec![
                AppPlan {
                    app: app("broken"),
                    revision: Some("1a2b3c4".into()),
                    changes: Vec::new(),
                    diagnostics: vec![Diagnostic::error("yaml-syntax", "bad", None)],
                    health: None,
                    digest: None,
                },
                AppPlan {
                    app: app("web"),
                    revision: Some("1a2b3c4".into()),
                    changes: vec![
                        change(Action::Delete, "ConfigMap", "old", "data:\n  a: b\n"),
                        change(
                            Action::Create,
                            "Deployment",
                            "web",
                            "kind: Deployment\nspec:\n  replicas: 2\n",
                        ),
                        change(
                            Action::Update,
                            "Deployment",
                            "worker",
                            "@@ -1,1 +1,1 @@\n-replicas: 1\n+replicas: 3\n",
                        ),
                        change(Action::Conflict, "ConfigMap", "shared", ""),
                        change(Action::Unchanged, "Service", "web", ""),
                    ],
                    diagnostics: Vec::new(),
                    health: Some(sample_health()),
                    digest: Some(crate::review::digest::AppDigest {
                        full: "0123456789abcdef".repeat(4),
                        desired: "fedcba9876543210".repeat(4),
                    }),
                },
            ],
            diagnostics: Vec::new(),
        }
    }

    fn sample_health() -> crate::health::AppHealth {
        use crate::health::status::ComponentHealth;
        use crate::health::{AppHealth, Health};
        AppHealth {
            health: Health::progressing("Deployment team-a/worker: 1 of 3 updated"),
            components: vec![
                ComponentHealth {
                    component: "web".into(),
                    health: Health::healthy(),
                    message: Some("Ready:2/2".into()),
                },
                ComponentHealth {
                    component: "worker".into(),
                    health: Health::progressing("Deployment team-a/worker: 1 of 3 updated"),
                    message: None,
                },
            ],
        }
    }

    #[test]
    fn lists_prunes_first_then_each_change_with_its_diff() {
        expect![[r#"
            Driftless plan: planned against cluster(s) local

            Objects to prune:
              - ConfigMap team-a/old (cluster local)

            App team-a/broken (revision 1a2b3c4)
              blocked by 1 error; not planned (see the diagnostics on stderr)

            App team-a/web (revision 1a2b3c4, digest 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef)
              - delete   ConfigMap team-a/old
                  - data:
                  -   a: b
              + create   Deployment team-a/web
                  + kind: Deployment
                  + spec:
                  +   replicas: 2
              ~ update   Deployment team-a/worker
                  changed: spec.replicas
                  @@ -1,1 +1,1 @@
                  -replicas: 1
                  +replicas: 3
              ! conflict ConfigMap team-a/shared: owned by app team-b/api
              team-a/web: 1 to create, 1 to update, 1 to delete, 1 conflict, 1 unchanged
              health: progressing
                component web: healthy; status: Ready:2/2
                component worker: progressing (Deployment team-a/worker: 1 of 3 updated)

            Changes by kind:
              kind        create  update  delete  conflict  unchanged
              ConfigMap        0       0       1         1          0
              Deployment       1       1       0         0          0
              Service          0       0       0         0          1

            Plan: 1 to create, 1 to update, 1 to delete, 1 conflict (1 unchanged). Plan digest bcbb89594bee. 1 app blocked by errors.
        "#]].assert_eq(&plan_human(&sample_plan()));
    }

    #[test]
    fn an_empty_cluster_plan_says_so() {
        let mut plan = sample_plan();
        plan.target = PlanTarget::EmptyCluster;
        plan.apps.clear();
        let out = plan_human(&plan);
        assert!(
            out.starts_with(
                "Driftless plan: planned against an empty cluster (no kubeconfig given)"
            ),
            "{out}"
        );
        assert!(
            out.ends_with("Plan: 0 to create, 0 to update, 0 to delete, 0 conflicts.\n"),
            "{out}"
        );
    }
}
