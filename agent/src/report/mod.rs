//! Output rendering: everything Driftless shows to people and scripts, in one place.
//!
//! - [`render`]: the rendered objects as multi-document YAML or one JSON array
//!   (`driftless render`).
//! - [`plan_human`], [`plan_markdown`] and [`json::plan_json`]: a [`Plan`](crate::plan::Plan)
//!   as Terraform-like text, a PR comment, and the JSON contract.
//! - [`diagnostics`]: diagnostics drawn like compiler errors, or as JSON contract values.
//! - [`sarif`]: diagnostics as a SARIF 2.1.0 log (`driftless analyze -o sarif`).
//!
//! The JSON and markdown contracts are documented in DESIGN.md §3 and the README. They are
//! their own types in [`json`], filled in by hand: internal types never derive `Serialize` to
//! become output, so a refactor cannot silently change a contract. Every function here is
//! deterministic: the same input gives the same bytes.
//!
//! Deliberately absent: I/O. Callers get strings and decide where they go (results to
//! stdout, diagnostics and progress to stderr).

pub mod diagnostics;
pub mod json;
pub mod markdown;
pub mod plan_human;
pub mod render;
pub mod sarif;
mod summary;

pub use diagnostics::{DiagnosticStyle, render_diagnostics};
pub use markdown::{MarkdownOptions, plan_markdown};
pub use plan_human::plan_human;
pub use summary::{KindCounts, Summary};

use crate::plan::{ObjectRef, PlanTarget};

/// The sentence every plan format carries when no cluster was consulted.
pub const EMPTY_CLUSTER_NOTE: &str = "planned against an empty cluster (no kubeconfig given)";

/// One line saying what the plan was computed against.
pub(crate) fn target_description(target: &PlanTarget) -> String {
    match target {
        PlanTarget::EmptyCluster => format!("{EMPTY_CLUSTER_NOTE}: every object is a create"),
        PlanTarget::Clusters(clusters) => {
            format!("planned against cluster(s) {}", clusters.join(", "))
        }
    }
}

/// `Kind namespace/name`, or `Kind name` for cluster-scoped objects: how changes are named in
/// human and markdown output.
pub(crate) fn object_label(object: &ObjectRef) -> String {
    match &object.namespace {
        Some(namespace) => format!("{} {namespace}/{}", object.kind, object.name),
        None => format!("{} {}", object.kind, object.name),
    }
}
