//! The live plan at scale reads in bulk: one LIST per (kind, namespace) instead of a
//! GET per object and per tracker, and no server-side-apply dry run for objects the tracker
//! proves unchanged — also when a controller moved their resourceVersion by writing `status`.
//! A plan of unchanged apps makes the same number of requests for 4 apps as for 12. Small here,
//! so it runs in seconds; `hack/scale.sh` measures the same paths at 1,000 and 10,000 apps.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;

use agent::cluster::{Cluster, ClusterOptions, PrefetchStats};

use agent::plan::{Action, ObjectRef};
use agent::planner::Observed;
use agent::sync::{LiveOptions, apply_live, plan_live};
use analyzer::{ClusterVersion, Definitions, RenderOptions, Snapshot, SourceFile};

use crate::support::apps::config_map_apps;
use crate::support::cluster::{TestCluster, TestNamespace};

const APPS: usize = 6;

fn snapshot(namespace: &str, color: &str) -> Snapshot {
    config_map_apps(namespace, APPS, color)
}

fn config_map(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        namespace: Some(namespace.to_owned()),
        name: name.to_owned(),
    }
}

#[tokio::test]
async fn unchanged_apps_are_planned_from_one_list_without_dry_runs() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "scale-bulk").await?;
    let live = Cluster::connect(&cluster.kubeconfig, None, &ClusterOptions::default()).await?;
    let render = |color: &str| {
        analyzer::render_snapshot(
            &snapshot(&ns.name, color),
            &Definitions::builtin(),
            &RenderOptions {
                cluster_version: ClusterVersion::release(1, 34),
                ..RenderOptions::default()
            },
        )
    };
    // Trackers live in the test namespace too, so apps and trackers are one collection.
    let mut options = LiveOptions {
        tracker_namespace: ns.name.clone(),
        ..LiveOptions::default()
    };
    options.apply.source = Some(format!("e2e-{}", ns.name));

    let (output, _) = render("blue");
    let policies = agent::live::policies(&output);
    let first = plan_live(&live, &output, &policies, None, &options).await;
    let creates = first
        .plan
        .apps
        .iter()
        .flat_map(|app| &app.changes)
        .filter(|change| change.action == Action::Create)
        .count();
    assert_eq!(creates, APPS, "{:?}", first.plan);
    let reports = apply_live(&live, &first, &options).await;
    assert_eq!(reports.len(), APPS);

    // What a plan of these apps reads: six ConfigMaps and six trackers, in one LIST.
    let mut wanted: Vec<ObjectRef> = (0..APPS)
        .map(|index| config_map(&ns.name, &format!("app-{index}-settings")))
        .collect();
    wanted.extend((0..APPS).map(|index| config_map(&ns.name, &format!("{}.app-{index}", ns.name))));
    wanted.push(config_map(&ns.name, "not-there"));
    let stats = live.prefetch(wanted).await;
    assert_eq!(
        stats,
        PrefetchStats {
            lists: 1,
            requests: 1,
            objects: 2 * APPS + 1,
            cached: 0,
        }
    );
    let settings = live
        .take_prefetched(&config_map(&ns.name, "app-0-settings"))
        .expect("listed")
        .expect("present");
    // List items come without apiVersion/kind; the snapshot restores them, as a GET has them.
    assert_eq!(settings["kind"], "ConfigMap");
    assert_eq!(settings["apiVersion"], "v1");
    assert_eq!(settings["data"]["color"], "blue");
    assert_eq!(
        live.take_prefetched(&config_map(&ns.name, "not-there")),
        Some(None),
        "listed and absent"
    );
    assert_eq!(
        live.take_prefetched(&config_map(&ns.name, "app-0-settings")),
        None,
        "taken once"
    );
    live.clear_prefetched();

    // The second plan: everything unchanged, the trackers found (from the bulk read), and no
    // dry run, because each tracker entry has the desired hash and the live resourceVersion.
    let second = plan_live(&live, &output, &policies, None, &options).await;
    for app in &second.plan.apps {
        assert!(
            app.changes
                .iter()
                .all(|change| change.action == Action::Unchanged),
            "{app:?}"
        );
    }
    for observation in &second.observations {
        assert!(observation.tracker.is_some(), "{}", observation.desired.app);
        for (object, observed) in &observation.live.objects {
            assert!(
                matches!(observed, Observed::Present { dry_run: None, .. }),
                "{object}: {observed:?}"
            );
        }
    }
    // Nothing of the plan's snapshot outlives it.
    assert_eq!(
        live.take_prefetched(&config_map(&ns.name, "app-1-settings")),
        None
    );

    // One app changed: exactly its object is dry-run and updated; the others still are not.
    let (changed, _) = render("green");
    let mut changed_output = output.clone();
    changed_output.apps[0] = changed.apps[0].clone();
    let third = plan_live(&live, &changed_output, &policies, None, &options).await;
    let dry_runs: Vec<String> = third
        .observations
        .iter()
        .flat_map(|observation| &observation.live.objects)
        .filter(|(_, observed)| {
            matches!(
                observed,
                Observed::Present {
                    dry_run: Some(_),
                    ..
                }
            )
        })
        .map(|(object, _)| object.name.clone())
        .collect();
    assert_eq!(dry_runs, vec!["app-0-settings".to_owned()]);
    let updates: Vec<String> = third
        .plan
        .apps
        .iter()
        .flat_map(|app| &app.changes)
        .filter(|change| change.action == Action::Update)
        .map(|change| change.object.name.clone())
        .collect();
    assert_eq!(updates, vec!["app-0-settings".to_owned()]);
    Ok(())
}

/// `apps` webservice apps (a Deployment each, scaled to 0 as KubeVela's load test does, so kwok
/// runs no pods; the deployment controller still writes each one's `status`).
fn workload_snapshot(namespace: &str, apps: usize) -> Snapshot {
    let files = (0..apps)
        .map(|index| SourceFile {
            path: format!("apps/web-{index}.yaml"),
            contents: format!(
                "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: web-{index}
  namespace: {namespace}
spec:
  components:
    - name: web-{index}
      type: webservice
      properties:
        image: nginx:1.27
      traits:
        - type: scaler
          properties:
            replicas: 0
"
            ),
        })
        .collect();
    Snapshot {
        commit: None,
        files,
    }
}

/// Waits until the deployment controller has written the status of every Deployment in
/// `namespace` for its current generation (generous deadline: a loaded 2-core machine).
async fn wait_for_deployment_status(cluster: &TestCluster, namespace: &str) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let list = deployments.list(&Default::default()).await?;
        let observed = list.items.iter().all(|deployment| {
            let generation = deployment.metadata.generation;
            let seen = deployment
                .status
                .as_ref()
                .and_then(|status| status.observed_generation);
            generation.is_some() && seen == generation
        });
        if observed && !list.items.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the deployment controller did not write every status in {namespace} within 120 s"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Applies `apps` webservice apps, waits for their statuses, then plans them unchanged with a
/// fresh client. Returns that plan's request count.
async fn unchanged_plan_requests(
    cluster: &TestCluster,
    namespace: &str,
    options: &LiveOptions,
    apps: usize,
) -> Result<u64> {
    let (output, _) = analyzer::render_snapshot(
        &workload_snapshot(namespace, apps),
        &Definitions::builtin(),
        &RenderOptions {
            cluster_version: ClusterVersion::release(1, 34),
            ..RenderOptions::default()
        },
    );
    let policies = agent::live::policies(&output);
    let applier = Cluster::connect(&cluster.kubeconfig, None, &ClusterOptions::default()).await?;
    let plan = plan_live(&applier, &output, &policies, None, options).await;
    assert!(!plan.plan.has_errors(), "{:?}", plan.plan);
    for report in apply_live(&applier, &plan, options).await {
        assert_eq!(
            report.outcome,
            agent::apply::ApplyOutcome::Applied,
            "{report:?}"
        );
    }
    wait_for_deployment_status(cluster, namespace).await?;

    let planner = Cluster::connect(&cluster.kubeconfig, None, &ClusterOptions::default()).await?;
    let plan = plan_live(&planner, &output, &policies, None, options).await;
    let requests = planner.requests();
    assert_eq!(plan.observations.len(), apps);
    for app in &plan.plan.apps {
        assert!(
            app.changes
                .iter()
                .all(|change| change.action == Action::Unchanged),
            "{app:?}"
        );
    }
    for observation in &plan.observations {
        let tracker = observation
            .tracker
            .as_ref()
            .context("every applied app has a tracker")?;
        for (object, observed) in &observation.live.objects {
            let Observed::Present { live, dry_run } = observed else {
                bail!("{object}: {observed:?}");
            };
            assert!(dry_run.is_none(), "{object} was dry-run");
            // The case this test is about: the controller's status write moved the
            // resourceVersion away from the one the apply recorded.
            let recorded = tracker
                .applied(object)
                .and_then(|entry| entry.resource_version.clone());
            assert_ne!(
                recorded.as_deref(),
                live.pointer("/metadata/resourceVersion")
                    .and_then(serde_json::Value::as_str),
                "{object}: status not written yet"
            );
        }
    }
    Ok(requests)
}

#[tokio::test]
async fn a_plan_of_unchanged_apps_makes_as_many_requests_for_12_apps_as_for_4() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "scale-requests").await?;
    let mut options = LiveOptions {
        tracker_namespace: ns.name.clone(),
        ..LiveOptions::default()
    };
    options.apply.source = Some(format!("e2e-{}", ns.name));
    // 4 apps: the smallest collection that is listed rather than read object by object.
    let four = unchanged_plan_requests(&cluster, &ns.name, &options, 4).await?;
    let twelve = unchanged_plan_requests(&cluster, &ns.name, &options, 12).await?;
    // Discovery of apps/v1, one LIST of the Deployments and one of the trackers (which also
    // finds vanished apps; before, the prefetch listed them a second time, after discovering
    // v1 for it): nothing per app.
    assert_eq!((four, twelve), (3, 3));
    Ok(())
}
