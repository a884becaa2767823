//! The impersonation grants of `deploy/rbac.yaml`, asked of the real apiserver's RBAC
//! authorizer (SubjectAccessReview): the agent's ServiceAccount may impersonate a source's
//! `driftless-deployer` account only in a namespace whose RoleBinding binds the
//! `driftless-impersonate` role, and nothing else (another account, another namespace, users,
//! groups). `helm.rs` asks the same of the chart's per-source Roles.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::agent::apply_manifest_file;
use crate::support::agent::wait_for;
use crate::support::cluster::{TestCluster, TestNamespace};

/// What an impersonation asks the authorizer: `impersonate` on `resource` (`serviceaccounts`
/// in `namespace`, or cluster-wide `users` / `groups`) named `name`.
pub struct Impersonation<'a> {
    pub resource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

/// Whether the ServiceAccount `account_namespace/account` may make `impersonation`, by the
/// apiserver's own authorizer.
pub async fn may_impersonate(
    cluster: &TestCluster,
    account_namespace: &str,
    account: &str,
    impersonation: &Impersonation<'_>,
) -> Result<bool> {
    let review = SubjectAccessReview {
        metadata: ObjectMeta::default(),
        spec: SubjectAccessReviewSpec {
            user: Some(format!(
                "system:serviceaccount:{account_namespace}:{account}"
            )),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{account_namespace}"),
                "system:authenticated".to_owned(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("impersonate".to_owned()),
                group: Some(String::new()),
                resource: Some(impersonation.resource.to_owned()),
                namespace: impersonation.namespace.map(str::to_owned),
                name: Some(impersonation.name.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        status: None,
    };
    let answered = Api::<SubjectAccessReview>::all(cluster.client.clone())
        .create(&PostParams::default(), &review)
        .await
        .context("creating a SubjectAccessReview")?;
    Ok(answered.status.is_some_and(|status| status.allowed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_rbac_impersonates_only_bound_deployer_accounts() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    apply_manifest_file(&cluster, "deploy/namespace.yaml").await?;
    apply_manifest_file(&cluster, "deploy/rbac.yaml").await?;
    let bound = TestNamespace::new(&cluster, "impersonate-bound").await?;
    let unbound = TestNamespace::new(&cluster, "impersonate-unbound").await?;
    // The RoleBinding deploy/rbac.yaml tells users to add per namespace.
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("driftless-impersonate".to_owned()),
            namespace: Some(bound.name.clone()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: "driftless-impersonate".to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: "driftless".to_owned(),
            namespace: Some("driftless-system".to_owned()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(cluster.client.clone(), &bound.name)
        .create(&PostParams::default(), &binding)
        .await
        .context("creating the RoleBinding")?;

    let agent = |resource, namespace, name| {
        let cluster = &cluster;
        async move {
            let impersonation = Impersonation {
                resource,
                namespace,
                name,
            };
            may_impersonate(cluster, "driftless-system", "driftless", &impersonation).await
        }
    };
    // The authorizer sees a new binding once its informer has: wait for the grant, so that the
    // refusals below are the binding's, not lag.
    wait_for(
        "the agent to be allowed to impersonate driftless-deployer where the role is bound",
        || async {
            let allowed = agent(
                "serviceaccounts",
                Some(bound.name.as_str()),
                "driftless-deployer",
            )
            .await?;
            Ok(allowed.then_some(()))
        },
    )
    .await?;
    ensure!(
        !agent("serviceaccounts", Some(bound.name.as_str()), "default").await?,
        "the agent may impersonate another account than driftless-deployer"
    );
    ensure!(
        !agent(
            "serviceaccounts",
            Some(unbound.name.as_str()),
            "driftless-deployer"
        )
        .await?,
        "the agent may impersonate driftless-deployer in a namespace that binds nothing"
    );
    ensure!(
        !agent("users", None, "admin").await?,
        "the agent may impersonate a user"
    );
    ensure!(
        !agent("groups", None, "system:masters").await?,
        "the agent may impersonate a group"
    );
    Ok(())
}
