//! App namespaces: a namespace an app creates objects in that the cluster does not have yet is
//! created by Driftless before the app's objects, as Argo CD's `CreateNamespace=true` does (in
//! KubeVela the namespace exists because the Application itself lives in it).
//!
//! The plan shows each creation as a `create` of the Namespace in every app that needs it
//! ([`add_creations`]; the first apply creates it, the others find it there), and the apply
//! creates exactly the namespaces its app's plan shows before anything else of the app is
//! written. This module decides; reading which namespaces exist and creating them is the
//! agent's (`agent::namespaces`). A created Namespace is marked as Driftless's
//! ([`LABEL_CREATED`], [`ANNOTATION_CREATED_FOR`]) but carries no owner mark and is listed in no
//! tracker, so no prune ever deletes it: taking a namespace away deletes everything in it,
//! which is never a side effect of an app leaving Git.
//!
//! Namespaces an app renders itself (a `Namespace` object) are the app's own objects, planned
//! and applied as any other; they are never created here.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::AppRef;

use crate::plan::{Action, AppPlan, Change, ObjectRef};

/// Label on every Namespace Driftless created for an app (`kubectl get ns -l
/// driftless.dev/created-namespace`).
pub const LABEL_CREATED: &str = "driftless.dev/created-namespace";
/// Annotation naming the app (`<namespace>/<name>`) whose apply created the Namespace.
pub const ANNOTATION_CREATED_FOR: &str = "driftless.dev/created-for";
/// The `reason` of a planned creation: what tells it apart from a Namespace an app renders.
pub const CREATION_REASON: &str = "the namespace does not exist: Driftless creates it";

/// Whether missing app namespaces are created (`createNamespaces` of a source in
/// `driftless.yaml`, `--no-create-namespaces` on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CreateNamespaces {
    /// Missing namespaces are planned and created (the default).
    #[default]
    WhenMissing,
    /// Never: objects in a missing namespace fail to apply, naming it.
    Never,
}

/// The namespaces each app of `apps` creates objects in (namespaced `create` changes), less
/// those some app of `apps` renders as a `Namespace` object itself.
pub fn wanted(apps: &[AppPlan]) -> BTreeMap<String, BTreeSet<usize>> {
    let rendered: BTreeSet<&str> = apps
        .iter()
        .flat_map(|app| &app.changes)
        .filter(|change| is_namespace(&change.object) && !is_creation(change))
        .map(|change| change.object.name.as_str())
        .collect();
    let mut wanted: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (app_idx, app) in apps.iter().enumerate() {
        for change in &app.changes {
            if change.action != Action::Create {
                continue;
            }
            if let Some(namespace) = &change.object.namespace
                && !rendered.contains(namespace.as_str())
            {
                wanted.entry(namespace.clone()).or_default().insert(app_idx);
            }
        }
    }
    wanted
}

/// Adds a creation of each namespace in `missing` to every app of `apps` that creates objects
/// in it, first among its creates (after the prunes: Namespaces go first in apply order).
/// Pure: `missing` comes from the cluster (`agent::namespaces::plan_creations`) or, against an empty cluster,
/// is every wanted namespace.
pub fn add_creations(apps: &mut [AppPlan], missing: &BTreeSet<String>, cluster: &str) {
    for (namespace, app_indices) in wanted(apps) {
        if !missing.contains(&namespace) {
            continue;
        }
        for app_idx in app_indices {
            let Some(app) = apps.get_mut(app_idx) else {
                continue;
            };
            if app.changes.iter().any(|change| {
                is_creation(change) && change.object.name == namespace && change.cluster == cluster
            }) {
                continue;
            }
            let creation = Change {
                action: Action::Create,
                cluster: cluster.to_owned(),
                object: namespace_ref(&namespace),
                diff: namespace_yaml(&namespace, &app.app),
                changed_fields: Vec::new(),
                reason: Some(CREATION_REASON.to_owned()),
            };
            let position = app
                .changes
                .iter()
                .position(|change| change.action != Action::Delete)
                .unwrap_or(app.changes.len());
            app.changes.insert(position, creation);
        }
    }
}

/// Whether `change` is a namespace creation planned here (not a Namespace an app renders).
pub fn is_creation(change: &Change) -> bool {
    change.action == Action::Create
        && is_namespace(&change.object)
        && change.reason.as_deref() == Some(CREATION_REASON)
}

fn is_namespace(object: &ObjectRef) -> bool {
    object.api_version == "v1" && object.kind == "Namespace"
}

fn namespace_ref(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".to_owned(),
        kind: "Namespace".to_owned(),
        namespace: None,
        name: name.to_owned(),
    }
}

/// The created Namespace as the plan shows it (the `diff` of a create is the desired YAML).
fn namespace_yaml(name: &str, app: &AppRef) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n    {LABEL_CREATED}: \"true\"\n  annotations:\n    {ANNOTATION_CREATED_FOR}: {app}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(namespace: &str, name: &str, changes: Vec<Change>) -> AppPlan {
        AppPlan {
            app: AppRef {
                namespace: namespace.into(),
                name: name.into(),
            },
            revision: None,
            changes,
            diagnostics: Vec::new(),
            health: None,
            digest: None,
        }
    }

    fn change(action: Action, kind: &str, namespace: Option<&str>, name: &str) -> Change {
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
                namespace: namespace.map(str::to_owned),
                name: name.into(),
            },
            diff: String::new(),
            changed_fields: Vec::new(),
            reason: None,
        }
    }

    fn summary(app: &AppPlan) -> Vec<String> {
        app.changes
            .iter()
            .map(|change| format!("{} {}", change.action.as_str(), change.object))
            .collect()
    }

    #[test]
    fn every_app_creating_objects_in_a_missing_namespace_plans_its_creation_after_the_prunes() {
        let mut apps = vec![
            app(
                "team-a",
                "orders",
                vec![
                    change(Action::Delete, "ConfigMap", Some("team-a"), "old"),
                    change(Action::Create, "Deployment", Some("team-a"), "orders"),
                ],
            ),
            app(
                "team-a",
                "storefront",
                vec![change(Action::Create, "Deployment", Some("team-a"), "web")],
            ),
            app(
                "team-b",
                "search",
                vec![change(Action::Unchanged, "Deployment", Some("team-b"), "s")],
            ),
        ];
        let missing = BTreeSet::from(["team-a".to_owned(), "team-b".to_owned()]);
        add_creations(&mut apps, &missing, "local");
        assert_eq!(
            summary(&apps[0]),
            [
                "delete ConfigMap/team-a/old",
                "create Namespace/team-a",
                "create Deployment/team-a/orders"
            ]
        );
        assert_eq!(
            summary(&apps[1]),
            ["create Namespace/team-a", "create Deployment/team-a/web"]
        );
        // Nothing is created in team-b, so its absence is not this plan's business.
        assert_eq!(summary(&apps[2]), ["unchanged Deployment/team-b/s"]);
        assert!(is_creation(&apps[1].changes[0]));
        assert!(
            apps[1].changes[0]
                .diff
                .contains("driftless.dev/created-for: team-a/storefront")
        );
        // Planning again adds nothing twice.
        add_creations(&mut apps, &missing, "local");
        assert_eq!(apps[1].changes.len(), 2);
    }

    #[test]
    fn a_namespace_an_app_renders_itself_is_never_created_for_others() {
        let mut apps = vec![
            app(
                "platform",
                "namespaces",
                vec![change(Action::Create, "Namespace", None, "team-c")],
            ),
            app(
                "team-c",
                "web",
                vec![change(Action::Create, "Deployment", Some("team-c"), "web")],
            ),
        ];
        assert!(wanted(&apps).is_empty());
        add_creations(&mut apps, &BTreeSet::from(["team-c".to_owned()]), "local");
        assert_eq!(summary(&apps[1]), ["create Deployment/team-c/web"]);
        assert!(!is_creation(&apps[0].changes[0]));
    }

    #[test]
    fn an_existing_namespace_is_not_planned() {
        let mut apps = vec![app(
            "team-a",
            "web",
            vec![change(Action::Create, "Deployment", Some("team-a"), "web")],
        )];
        add_creations(&mut apps, &BTreeSet::new(), "local");
        assert_eq!(summary(&apps[0]), ["create Deployment/team-a/web"]);
    }
}
