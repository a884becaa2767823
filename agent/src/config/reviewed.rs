//! `sources[].applyReviewedPlan` and `sources[].reviewedPlan`: apply exactly what was reviewed
//! (see `crate::review::reviewed`). Raw as written, then checked.

use serde::Deserialize;

/// `sources[].reviewedPlan` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReviewedPlanFile {
    /// `apply` or `hold`: what a commit no reviewed pull request merged gets.
    pub direct_pushes: Option<DirectPushes>,
    /// Forge logins whose `/driftless apply` comment approves a held plan.
    pub approvers: Option<Vec<String>>,
}

/// What happens to a commit of the tracked branch that no previewed pull request merged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DirectPushes {
    /// Held for approval (`driftless approve APP --digest D`): nobody reviewed its plan.
    #[default]
    Hold,
    /// Applied as without reviewed-plan mode.
    Apply,
}

/// A source's checked reviewed-plan mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewedPlan {
    pub direct_pushes: DirectPushes,
    pub approvers: Vec<String>,
}

/// The mode when `applyReviewedPlan` is true; `None` otherwise (`reviewedPlan` is then unused).
pub fn check(enabled: Option<bool>, file: Option<ReviewedPlanFile>) -> Option<ReviewedPlan> {
    if enabled != Some(true) {
        return None;
    }
    let file = file.unwrap_or_default();
    Some(ReviewedPlan {
        direct_pushes: file.direct_pushes.unwrap_or_default(),
        approvers: file.approvers.unwrap_or_default(),
    })
}
