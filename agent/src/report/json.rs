//! The JSON output contracts (DESIGN.md §3), as their own types filled in by hand.
//!
//! Plan:
//! ```json
//! {"target": {"kind": "empty-cluster", "clusters": [], "note": "..."},
//!  "apps": [{"name", "namespace", "revision", "blocked",
//!            "changes": [{"action", "cluster", "apiVersion", "kind", "namespace", "name",
//!                         "diff", "changedFields", "reason"}],
//!            "diagnostics": [...],
//!            "health": {"status", "message",
//!                       "components": [{"name", "status", "message", "customStatus"}]} | null,
//!            "digest": "sha256 hex" | null}],
//!  "diagnostics": [...],
//!  "digest": "sha256 hex" | null,
//!  "summary": {"create", "update", "delete", "conflict", "unchanged"}}
//! ```
//! `target`, `blocked`, the top-level `diagnostics` (problems not tied to one app),
//! `changedFields`, `reason` and `health` (live plans only: `healthy|progressing|unknown|degraded`
//! per app and per component, with the definition's `customStatus` message) and the plan digests
//! (`crate::review::digest`: per app, `null` when blocked; for the whole plan) are additions to the DESIGN.md contract; nothing there was
//! renamed or removed.
//!
//! Diagnostic: `{"rule", "severity": "error|warning", "message", "file", "line", "column",
//! "app", "component"}`, where `app` is `namespace/name` and absent values are `null`.

use serde::Serialize;

use analyzer::{Diagnostic, Severity, SourceMap};

use crate::plan::{AppPlan, Change, Plan, PlanTarget};
use crate::report::{EMPTY_CLUSTER_NOTE, Summary};

/// The JSON plan.
#[derive(Debug, Serialize)]
pub struct JsonPlan {
    pub target: JsonTarget,
    pub apps: Vec<JsonAppPlan>,
    pub diagnostics: Vec<JsonDiagnostic>,
    /// The whole plan's digest; `null` when every app is blocked.
    pub digest: Option<String>,
    pub summary: JsonSummary,
}

/// What the plan was computed against.
#[derive(Debug, Serialize)]
pub struct JsonTarget {
    /// `empty-cluster` or `clusters`.
    pub kind: &'static str,
    pub clusters: Vec<String>,
    /// Human wording, for scripts that just echo it.
    pub note: String,
}

/// One app's plan.
#[derive(Debug, Serialize)]
pub struct JsonAppPlan {
    pub name: String,
    pub namespace: String,
    pub revision: Option<String>,
    /// True when an error diagnostic kept the app from being planned.
    pub blocked: bool,
    pub changes: Vec<JsonChange>,
    pub diagnostics: Vec<JsonDiagnostic>,
    /// The app's live health when the plan was made; `null` offline or when nothing rates it.
    pub health: Option<JsonHealth>,
    /// The app plan's digest; `null` when blocked.
    pub digest: Option<String>,
}

/// An app's health.
#[derive(Debug, Serialize)]
pub struct JsonHealth {
    /// `healthy`, `progressing`, `unknown` or `degraded`.
    pub status: &'static str,
    /// Why it is not healthy (empty when healthy).
    pub message: String,
    pub components: Vec<JsonComponentHealth>,
}

/// One component's health.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JsonComponentHealth {
    pub name: String,
    pub status: &'static str,
    pub message: String,
    /// The definition's `customStatus` message.
    pub custom_status: Option<String>,
}

/// One object's planned change.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JsonChange {
    pub action: &'static str,
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub diff: String,
    pub changed_fields: Vec<String>,
    pub reason: Option<String>,
}

/// Totals per action.
#[derive(Debug, Serialize)]
pub struct JsonSummary {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub conflict: usize,
    pub unchanged: usize,
}

/// One diagnostic.
#[derive(Debug, Serialize)]
pub struct JsonDiagnostic {
    pub rule: &'static str,
    /// `error` or `warning`.
    pub severity: &'static str,
    pub message: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// `namespace/name`.
    pub app: Option<String>,
    pub component: Option<String>,
}

/// The JSON contract value of a plan.
pub fn plan_json(plan: &Plan, sources: &SourceMap) -> JsonPlan {
    let summary = Summary::of_plan(plan);
    JsonPlan {
        target: target_json(&plan.target),
        apps: plan.apps.iter().map(|app| app_json(app, sources)).collect(),
        diagnostics: diagnostics_json(&plan.diagnostics, sources),
        digest: crate::review::digest::plan_digest(plan),
        summary: JsonSummary {
            create: summary.create,
            update: summary.update,
            delete: summary.delete,
            conflict: summary.conflict,
            unchanged: summary.unchanged,
        },
    }
}

/// The plan as pretty JSON text, ending with a newline.
pub fn plan_json_string(plan: &Plan, sources: &SourceMap) -> String {
    to_pretty_string(&plan_json(plan, sources))
}

/// The JSON contract values of diagnostics, in the order given.
pub fn diagnostics_json<'d>(
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
    sources: &SourceMap,
) -> Vec<JsonDiagnostic> {
    diagnostics
        .into_iter()
        .map(|diagnostic| diagnostic_json(diagnostic, sources))
        .collect()
}

/// The JSON contract value of one diagnostic.
pub fn diagnostic_json(diagnostic: &Diagnostic, sources: &SourceMap) -> JsonDiagnostic {
    let location = diagnostic.span.map(|span| sources.locate(span));
    JsonDiagnostic {
        rule: diagnostic.rule,
        severity: match diagnostic.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        },
        message: diagnostic.message.clone(),
        file: location.as_ref().map(|location| location.path.clone()),
        line: location.as_ref().map(|location| location.line),
        column: location.as_ref().map(|location| location.column),
        app: diagnostic.app.as_ref().map(ToString::to_string),
        component: diagnostic.component.clone(),
    }
}

/// Pretty JSON ending with a newline. Serializing these types cannot fail (string keys, no
/// non-finite floats), so a failure is a bug and says so in the output rather than panicking.
pub fn to_pretty_string(value: &impl Serialize) -> String {
    match serde_json::to_string_pretty(value) {
        Ok(mut text) => {
            text.push('\n');
            text
        }
        Err(error) => format!("{{\"error\": \"internal error serializing output: {error}\"}}\n"),
    }
}

fn target_json(target: &PlanTarget) -> JsonTarget {
    match target {
        PlanTarget::EmptyCluster => JsonTarget {
            kind: "empty-cluster",
            clusters: Vec::new(),
            note: EMPTY_CLUSTER_NOTE.to_owned(),
        },
        PlanTarget::Clusters(clusters) => JsonTarget {
            kind: "clusters",
            clusters: clusters.clone(),
            note: super::target_description(target),
        },
    }
}

fn app_json(app: &AppPlan, sources: &SourceMap) -> JsonAppPlan {
    JsonAppPlan {
        name: app.app.name.clone(),
        namespace: app.app.namespace.clone(),
        revision: app.revision.clone(),
        blocked: app
            .diagnostics
            .iter()
            .any(|diagnostic| diagnostic.severity == Severity::Error),
        changes: app.changes.iter().map(change_json).collect(),
        diagnostics: diagnostics_json(&app.diagnostics, sources),
        health: app.health.as_ref().map(|health| JsonHealth {
            status: health.health.status.as_str(),
            message: health.health.message.clone(),
            components: health
                .components
                .iter()
                .map(|component| JsonComponentHealth {
                    name: component.component.clone(),
                    status: component.health.status.as_str(),
                    message: component.health.message.clone(),
                    custom_status: component.message.clone(),
                })
                .collect(),
        }),
        digest: app.digest.as_ref().map(|digest| digest.full.clone()),
    }
}

fn change_json(change: &Change) -> JsonChange {
    JsonChange {
        action: change.action.as_str(),
        cluster: change.cluster.clone(),
        api_version: change.object.api_version.clone(),
        kind: change.object.kind.clone(),
        namespace: change.object.namespace.clone(),
        name: change.object.name.clone(),
        diff: change.diff.clone(),
        changed_fields: change.changed_fields.clone(),
        reason: change.reason.clone(),
    }
}
