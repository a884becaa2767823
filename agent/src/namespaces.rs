//! Creating an app's missing namespaces on a cluster: which of the namespaces its plan wants
//! are missing ([`plan_creations`]), and creating exactly the ones its plan shows
//! ([`create_planned`]) before anything else of the app is written. What to create, and how a
//! creation is marked and shown, is decided in `reconcile::namespaces` (re-exported here).

use std::collections::{BTreeMap, BTreeSet};

use analyzer::AppRef;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta};

pub use reconcile::namespaces::*;

use crate::apply::{AppApplyReport, ObjectResult};
use crate::cluster::{Cluster, describe_error};
use crate::plan::{Action, AppPlan};

/// Finds which namespaces the apps of `apps` create objects in are missing from `cluster`
/// (one GET per namespace) and adds their creation to the apps' plans ([`add_creations`]).
/// A namespace whose existence cannot be read is left out: its objects' applies then fail
/// with the cluster's own error.
pub async fn plan_creations(cluster: &Cluster, apps: &mut [AppPlan], setting: CreateNamespaces) {
    if setting == CreateNamespaces::Never {
        return;
    }
    let wanted = wanted(apps);
    if wanted.is_empty() {
        return;
    }
    let api: Api<Namespace> = Api::all(cluster.client().clone());
    let mut missing = BTreeSet::new();
    for namespace in wanted.keys() {
        cluster.throttle().await;
        match api.get_opt(namespace).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                missing.insert(namespace.clone());
            }
            Err(error) => tracing::warn!(
                namespace = %namespace,
                error = %describe_error(&error),
                "could not check whether the namespace exists; it is not created"
            ),
        }
    }
    add_creations(apps, &missing, cluster.name());
}

/// Creates the namespaces `plan` plans to create, before anything else of its app is written,
/// and records each in `report`. A namespace created meanwhile (by another app's apply, or by
/// someone else) is left as it is: the create never changes an existing Namespace.
///
/// # Errors
/// A namespace could not be created: the message names it and says why.
pub async fn create_planned(
    cluster: &Cluster,
    plan: &AppPlan,
    report: &mut AppApplyReport,
) -> Result<(), String> {
    for change in plan.changes.iter().filter(|change| is_creation(change)) {
        let namespace = Namespace {
            metadata: namespace_meta(&change.object.name, &plan.app),
            ..Namespace::default()
        };
        let error = crate::writer::create_namespace(cluster, &namespace)
            .await
            .err()
            .map(|error| {
                format!(
                    "creating namespace {}: {}",
                    change.object.name,
                    describe_error(&error)
                )
            });
        report.objects.push(ObjectResult {
            object: change.object.clone(),
            action: Action::Create,
            error: error.clone(),
        });
        if let Some(error) = error {
            return Err(error);
        }
    }
    Ok(())
}

fn namespace_meta(name: &str, app: &AppRef) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(BTreeMap::from([(
            LABEL_CREATED.to_owned(),
            "true".to_owned(),
        )])),
        annotations: Some(BTreeMap::from([(
            ANNOTATION_CREATED_FOR.to_owned(),
            app.to_string(),
        )])),
        ..ObjectMeta::default()
    }
}
