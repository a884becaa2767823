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
mod trait_name;

pub(crate) use app::{render_app, render_app_placements};
pub(crate) use context::template_reads;

/// A whole render output as text (per app: name, objects, diagnostics with their spans, input
/// hash), for tests that compare two ways of rendering the same snapshot.
#[cfg(test)]
pub(crate) fn output_text(output: &crate::RenderOutput) -> String {
    output
        .apps
        .iter()
        .map(|app| {
            let objects: Vec<&serde_json::Value> =
                app.objects.iter().map(|object| &object.object).collect();
            format!(
                "{}\n{}\n{:?}\n{}\n",
                app.app.name,
                serde_json::to_string(&objects).unwrap(),
                app.diagnostics,
                app.input_hash
            )
        })
        .collect()
}
