//! `unknown-cluster` (error): a `topology` policy names a cluster that is not in the agent
//! config's `clusters` registry (`driftless.yaml`).
//!
//! The app would never be placed there. Checked only when the repository's `driftless.yaml`
//! lists clusters; `local` (the agent's own cluster) is always known.
//!
//! ```yaml
//! policies:
//!   - name: where
//!     type: topology
//!     properties:
//!       clusters: [prod-eu, prod-us]   # error if driftless.yaml has no cluster `prod-us`
//! ```

use super::AppContext;
use crate::Diagnostic;

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let Some(known) = &ctx.config.known_clusters else {
        return;
    };
    for (index, policy) in ctx.loaded.app.spec.policies.iter().enumerate() {
        if policy.policy_type != "topology" {
            continue;
        }
        let Some(clusters) = policy
            .properties
            .as_ref()
            .and_then(|properties| properties.get("clusters"))
            .and_then(serde_json::Value::as_array)
        else {
            continue;
        };
        for (cluster_index, cluster) in clusters.iter().enumerate() {
            let Some(cluster) = cluster.as_str() else {
                continue;
            };
            if cluster == "local" || known.iter().any(|name| name == cluster) {
                continue;
            }
            out.push(Diagnostic::error(
                "unknown-cluster",
                format!(
                    "topology policy `{}` names cluster `{cluster}`, which is not in driftless.yaml's clusters ({})",
                    policy.name,
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                ),
                Some(ctx.loaded.document.positions.value_span(&format!(
                    "/spec/policies/{index}/properties/clusters/{cluster_index}"
                ))),
            ));
        }
    }
}
