//! Drift where people look: in report mode, each drifted app gets one issue on the forge,
//! edited when its drift changes and closed when the drift is gone. The issue shows the app's
//! plan as markdown, whose diffs mask Secret values like every plan output (`crate::redact`).
//!
//! What was reported lives in the agent's memory: after a restart, a drifted app's issue is
//! found again by its marker and edited, but an issue whose drift ended while the agent was
//! down stays open until that app drifts and recovers again.

use std::collections::BTreeMap;

use analyzer::{AppRef, SourceMap};

use crate::config::RepoSlug;
use crate::forge::outbox::{ForgeOp, Outbox};
use crate::plan::{Action, Plan};
use crate::source::git::CommitId;

/// The drift issues of one source.
#[derive(Debug, Default)]
pub struct DriftIssues {
    /// Per app with an open issue, the digest of the drifted plan it shows.
    reported: BTreeMap<AppRef, String>,
}

impl DriftIssues {
    /// Opens, edits or closes each app's issue after a drift check of `commit` found `plan`.
    pub fn sync(
        &mut self,
        outbox: &Outbox,
        repo: &RepoSlug,
        source: &str,
        commit: &CommitId,
        plan: &Plan,
        sources: &SourceMap,
    ) {
        for app_plan in &plan.apps {
            let app = &app_plan.app;
            let marker = crate::forge::drift_issue_marker(source, app);
            let drifted =
                (app_plan.changes.iter()).any(|change| change.action != Action::Unchanged);
            if !drifted {
                if self.reported.remove(app).is_some() {
                    outbox.send(ForgeOp::Issue {
                        repo: repo.clone(),
                        marker,
                        title: title(app),
                        body: None,
                    });
                }
                continue;
            }
            let digest = app_plan.digest.as_ref().map(|digest| digest.full.clone());
            let digest = digest.unwrap_or_default();
            if self.reported.get(app) == Some(&digest) {
                continue;
            }
            let single = Plan {
                target: plan.target.clone(),
                apps: vec![app_plan.clone()],
                diagnostics: Vec::new(),
            };
            let options = crate::report::MarkdownOptions { max_len: 50_000 };
            let body = format!(
                "The live objects of `{app}` differ from commit `{}` of source `{source}` (drift, report mode). Driftless changes nothing in report mode; this issue closes itself once the drift is gone.\n\n{}",
                commit.short(),
                crate::report::plan_markdown(&single, sources, options)
            );
            outbox.send(ForgeOp::Issue {
                repo: repo.clone(),
                marker,
                title: title(app),
                body: Some(body),
            });
            self.reported.insert(app.clone(), digest);
        }
    }
}

fn title(app: &AppRef) -> String {
    format!("Drift in {app}")
}
