//! The local control plane itself: Deployments become ready on kwok nodes, and several clusters run
//! side by side and stop cleanly.

use std::collections::BTreeMap;
use std::net::TcpListener;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::wait::await_condition;

use crate::support::cluster::{OwnedCluster, TestCluster, TestNamespace, WAIT};

fn deployment(name: &str, replicas: i32) -> Deployment {
    let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".to_owned(),
                        // kwok never pulls images; the name only has to be valid.
                        image: Some("registry.invalid/driftless/app:1".to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

#[tokio::test]
async fn deployment_with_three_replicas_becomes_ready() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "deploy").await?;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), &ns.name);

    deployments
        .create(&PostParams::default(), &deployment("web", 3))
        .await?;

    let ready = |d: Option<&Deployment>| {
        d.and_then(|d| d.status.as_ref())
            .and_then(|s| s.ready_replicas)
            == Some(3)
    };
    let web = tokio::time::timeout(WAIT, await_condition(deployments, "web", ready))
        .await
        .context("timed out waiting for readyReplicas == 3")??
        .context("deployment web disappeared")?;
    let status = web.status.context("deployment has no status")?;
    assert_eq!(status.ready_replicas, Some(3));
    assert_eq!(status.available_replicas, Some(3));
    Ok(())
}

async fn kube_system_uid(cluster: &TestCluster) -> Result<String> {
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .get("kube-system")
        .await?
        .metadata
        .uid
        .context("kube-system has no uid")
}

/// Whether a process runs the given component (not gone, not a zombie, not a reused pid).
fn runs(pid: u32, component: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .map(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, Some(Some('Z' | 'X'))) {
        return false;
    }
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
        exe.file_name()
            .is_some_and(|f| f.to_string_lossy().starts_with(component))
    })
}

#[tokio::test]
async fn two_clusters_run_side_by_side_and_stop_cleanly() -> Result<()> {
    let a = TestCluster::shared().await?;
    let b = OwnedCluster::up("e2e-b").await?;

    // Distinct control planes: their own ports, etcd and identity.
    let (ports_a, ports_b) = (a.ports()?, b.cluster.ports()?);
    ensure!(
        ports_a["APISERVER_PORT"] != ports_b["APISERVER_PORT"],
        "clusters share the apiserver port"
    );
    ensure!(
        ports_a["ETCD_PORT"] != ports_b["ETCD_PORT"],
        "clusters share the etcd port"
    );
    assert_ne!(
        kube_system_uid(&a).await?,
        kube_system_uid(&b.cluster).await?
    );

    // Write to both at once, read back from each: each sees only its own object.
    let ns_a = TestNamespace::new(&a, "multi").await?;
    let ns_b = TestNamespace::new(&b.cluster, "multi").await?;
    let cm = |value: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some("probe".to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("cluster".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    };
    let cms_a: Api<ConfigMap> = Api::namespaced(a.client.clone(), &ns_a.name);
    let cms_b: Api<ConfigMap> = Api::namespaced(b.cluster.client.clone(), &ns_b.name);
    let pp = PostParams::default();
    let (cm_a, cm_b) = (cm("a"), cm("b"));
    let (ra, rb) = tokio::join!(cms_a.create(&pp, &cm_a), cms_b.create(&pp, &cm_b));
    ra?;
    rb?;
    let (ra, rb) = tokio::join!(cms_a.get("probe"), cms_b.get("probe"));
    assert_eq!(ra?.data.context("no data in a")?["cluster"], "a");
    assert_eq!(rb?.data.context("no data in b")?["cluster"], "b");
    // Namespaces are per cluster: b's namespace does not exist in a.
    let namespaces_a: Api<Namespace> = Api::all(a.client.clone());
    assert!(namespaces_a.get_opt(&ns_b.name).await?.is_none());

    // Stop b; nothing of it may remain.
    let pids = b.cluster.pids()?;
    assert_eq!(
        pids.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok"
        ]
    );
    drop(ns_b);
    b.down()?;
    for (component, pid) in &pids {
        assert!(
            !runs(*pid, component),
            "{component} (pid {pid}) of e2e-b still runs after down"
        );
    }
    for (name, port) in &ports_b {
        TcpListener::bind(("127.0.0.1", *port))
            .with_context(|| format!("{name} {port} of e2e-b is still in use after down"))?;
    }
    // The shared cluster is unaffected.
    cms_a.get("probe").await?;
    Ok(())
}
