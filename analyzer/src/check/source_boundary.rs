//! `source-boundary` (error): a rendered object, or a topology cluster, is outside what the
//! app's source may touch (`sources[].boundary` of `driftless.yaml`), or in the namespace
//! reserved for Driftless's resource trackers (`driftless-system`).
//!
//! A source declares the namespaces and clusters it deploys to (globs), the cluster-scoped
//! kinds it may create (none once a boundary is declared) and kinds it may never write. The
//! tracker namespace is reserved whether or not a boundary is declared. The agent checks every
//! object again at apply, so a violation is refused even where this rule is turned off; the
//! `driftless.dev/ignore` annotation cannot suppress it, because the app's author is who the
//! boundary holds back.
//!
//! ```yaml
//! # driftless.yaml
//! sources:
//!   - name: team-a
//!     url: https://git.example.com/team-a/apps.git
//!     boundary:
//!       namespaces: [team-a, "team-a-*"]
//!       clusterScopedKinds: []       # the default: none
//!       deniedKinds: [rbac.authorization.k8s.io/RoleBinding]
//! ```
//!
//! ```yaml
//! # apps/web.yaml of source team-a
//! components:
//!   - name: grant
//!     type: k8s-objects
//!     properties:
//!       objects:
//!         - apiVersion: rbac.authorization.k8s.io/v1
//!           kind: ClusterRoleBinding   # error: cluster-scoped, not declared
//!           metadata: { name: team-a-admin }
//!         - apiVersion: v1
//!           kind: ConfigMap
//!           metadata: { name: x, namespace: kube-system }   # error: outside team-a*
//! ```

use super::AppContext;
use crate::Diagnostic;
use crate::boundary::is_cluster_scoped;

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let Some(boundary) = &ctx.config.boundary else {
        return;
    };
    for object in ctx.objects {
        let Some((api_version, kind)) = super::object_type(&object.object) else {
            continue;
        };
        let name = object
            .object
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let namespace = if is_cluster_scoped(api_version, kind) {
            None
        } else {
            Some(
                object
                    .object
                    .pointer("/metadata/namespace")
                    .and_then(serde_json::Value::as_str)
                    .filter(|namespace| !namespace.is_empty())
                    .unwrap_or(&ctx.loaded.app_ref.namespace),
            )
        };
        if let Err(violation) = boundary.check_object(api_version, kind, name, namespace) {
            out.push(ctx.at_object(
                object,
                Diagnostic::error(
                    "source-boundary",
                    format!("{kind} `{name}`: {violation}"),
                    Some(ctx.object_span(object)),
                ),
            ));
        }
    }
    for (index, policy) in ctx.loaded.app.spec.policies.iter().enumerate() {
        if policy.policy_type != "topology" {
            continue;
        }
        let clusters = policy
            .properties
            .as_ref()
            .and_then(|properties| properties.get("clusters"))
            .and_then(serde_json::Value::as_array);
        for (cluster_index, cluster) in clusters.into_iter().flatten().enumerate() {
            let Some(cluster) = cluster.as_str() else {
                continue;
            };
            if let Err(violation) = boundary.check_cluster(cluster) {
                out.push(Diagnostic::error(
                    "source-boundary",
                    format!("topology policy `{}`: {violation}", policy.name),
                    Some(ctx.loaded.document.positions.value_span(&format!(
                        "/spec/policies/{index}/properties/clusters/{cluster_index}"
                    ))),
                ));
            }
        }
    }
}
