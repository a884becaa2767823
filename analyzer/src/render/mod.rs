//! Rendering: Application × Definitions → Kubernetes objects, with KubeVela's semantics
//! (`shared/research/kubevela-render-semantics.md`).
//!
//! Per app, in parallel with rayon: each component's template is evaluated with `parameter`
//! and `context` ([`context`]), its `output` becomes the workload and `outputs` the
//! auxiliaries; traits run in order, each seeing the workload as patched so far, adding
//! outputs and patching with the strategy engine ([`patch`]); everything is exported to JSON
//! and gets KubeVela's labels ([`labels`]).

mod app;
mod component;
mod context;
mod custom_policy;
mod errors;
mod instance;
mod labels;
mod memo;
mod output_reads;
pub(crate) mod patch;
mod policies;
mod restart_hash;

pub(crate) use app::{render_app, render_app_placements};
pub(crate) use context::template_reads;
