//! Failures during apply: applies killed at random points converge without orphans, and a
//! per-object error (a refused object, RBAC's forbidden, a 409 conflict) stops only its app and
//! never prunes.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};

use crate::support::cli::{Repo, config_map_names, expect_config_maps, expect_success};
use crate::support::cluster::{TestCluster, TestNamespace};

use super::{
    application, apply, changes, config_map_component, plan, raw_component, webservice_component,
};

/// Seeded from the clock and printed, so a failing run can be replayed by hand.
struct Lcg(u64);

impl Lcg {
    fn next_below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

#[tokio::test]
async fn applies_killed_at_random_points_converge_without_orphans() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-kill").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let bystander = ConfigMap {
        metadata: ObjectMeta {
            name: Some("bystander".to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    config_maps
        .create(&PostParams::default(), &bystander)
        .await?;
    let seed = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
    eprintln!("kill test seed: {seed}");
    let mut random = Lcg(seed);

    let repo = Repo::new(&ns)?;
    let path = repo.path().to_str().context("utf-8 path")?.to_owned();
    // Two desired states that share some objects and differ in others, so that every pass both
    // creates and prunes.
    let states: [Vec<&str>; 2] = [vec!["a", "b", "c", "d"], vec!["c", "d", "e", "f"]];
    let write_state = |round: usize, state: usize| -> Result<Vec<String>> {
        let names = &states[state];
        let components: Vec<String> = names
            .iter()
            .map(|name| config_map_component(name, &format!("cm-{name}"), &format!("r{round}")))
            .collect();
        repo.write_app("shop", &application("shop", &ns.name, &components))?;
        Ok(names.iter().map(|name| format!("cm-{name}")).collect())
    };
    for round in 0..8 {
        // The killed apply works towards one state...
        write_state(round, round % 2)?;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
            .args([
                "apply",
                &path,
                "--yes",
                "--tracker-namespace",
                &ns.name,
                "--kubeconfig",
            ])
            .arg(&cluster.kubeconfig)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let delay = Duration::from_millis(random.next_below(800));
        tokio::select! {
            _ = child.wait() => {}
            () = tokio::time::sleep(delay) => {
                child.start_kill()?;
                child.wait().await?;
            }
        }

        // ...and the rerun towards the other, so objects the killed run may have created and
        // that are no longer rendered must be found through the tracker and pruned.
        let names = write_state(round, (round + 1) % 2)?;
        expect_success(&apply(&cluster, &repo)?, &format!("rerun of round {round}"))?;
        let (code, clean) = plan(&cluster, &repo)?;
        ensure!(
            code == 0 && changes(&clean).is_empty(),
            "round {round}: not converged: {clean:#}"
        );
        let mut expected: BTreeSet<String> = names.into_iter().collect();
        expected.insert("bystander".to_owned());
        assert_eq!(
            config_map_names(&cluster, &ns.name).await?,
            expected,
            "round {round} (seed {seed})"
        );
    }
    Ok(())
}

#[tokio::test]
async fn per_object_errors_stop_only_their_app_and_never_prune() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-faults").await?;
    let repo = Repo::new(&ns)?;
    repo.write_app(
        "good",
        &application(
            "good",
            &ns.name,
            &[config_map_component("cfg", "good-cfg", "blue")],
        ),
    )?;
    repo.write_app(
        "rejected",
        &application(
            "rejected",
            &ns.name,
            &[config_map_component("old", "rejected-old", "blue")],
        ),
    )?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;

    // `rejected` drops its old object and adds a Service the apiserver refuses (port 0), and a
    // third app renders a kind no CRD serves.
    let bad_service = "          - apiVersion: v1
            kind: Service
            metadata:
              name: broken
            spec:
              ports:
                - port: 0
";
    repo.write_app(
        "rejected",
        &application(
            "rejected",
            &ns.name,
            &[
                config_map_component("first", "rejected-first", "blue"),
                raw_component("svc", bad_service),
            ],
        ),
    )?;
    let widget = "          - apiVersion: example.invalid/v1
            kind: Widget
            metadata:
              name: w
";
    repo.write_app(
        "unknown",
        &application("unknown", &ns.name, &[raw_component("w", widget)]),
    )?;
    repo.write_app(
        "good",
        &application(
            "good",
            &ns.name,
            &[config_map_component("cfg", "good-cfg", "green")],
        ),
    )?;

    let output = apply(&cluster, &repo)?;
    assert_eq!(output.status.code(), Some(1));
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains(
            "kind Widget (example.invalid/v1) is not served by the cluster (CRD not installed?)"
        ),
        "{text}"
    );
    assert!(
        text.contains("Service/") && text.contains("rejected as invalid"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "app {}/rejected: apply stopped, nothing pruned",
            ns.name
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("app {}/good: applied", ns.name)),
        "{text}"
    );

    // The good app moved on; the rejected app applied what came before the error and pruned
    // nothing, so its dropped object is still there.
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let good = config_maps.get("good-cfg").await?;
    assert_eq!(
        good.data
            .unwrap_or_default()
            .get("color")
            .map(String::as_str),
        Some("green")
    );
    expect_config_maps(
        &cluster,
        &ns.name,
        &["good-cfg", "rejected-old", "rejected-first"],
    )
    .await?;
    Ok(())
}

/// A kubeconfig for a ServiceAccount of `ns` that may only work with ConfigMaps there.
async fn configmaps_only_kubeconfig(
    cluster: &TestCluster,
    ns: &TestNamespace,
    dir: &Path,
) -> Result<std::path::PathBuf> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

    let client = cluster.client.clone();
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns.name);
    accounts
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: meta("limited"),
                ..ServiceAccount::default()
            },
        )
        .await?;
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns.name);
    roles
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta("configmaps"),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["configmaps".to_owned()]),
                    verbs: [
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ]
                    .map(str::to_owned)
                    .to_vec(),
                    ..PolicyRule::default()
                }]),
            },
        )
        .await?;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns.name);
    bindings
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta("configmaps"),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".to_owned(),
                    kind: "Role".to_owned(),
                    name: "configmaps".to_owned(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: "limited".to_owned(),
                    namespace: Some(ns.name.clone()),
                    ..Subject::default()
                }]),
            },
        )
        .await?;
    let token = accounts
        .create_token_request(
            "limited",
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![],
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            },
        )
        .await?
        .status
        .context("the token request has no status")?
        .token;
    let admin = std::fs::read_to_string(&cluster.kubeconfig)?;
    let line = |key: &str| {
        admin
            .lines()
            .find(|line| line.trim_start().starts_with(key))
            .map(str::trim)
            .with_context(|| format!("kubeconfig has no {key}"))
    };
    let kubeconfig = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    {}
    {}
users:
- name: limited
  user:
    token: {token}
contexts:
- name: limited
  context:
    cluster: e2e
    user: limited
current-context: limited
",
        line("server:")?,
        line("certificate-authority")?,
    );
    let path = dir.join("limited-kubeconfig");
    std::fs::write(&path, kubeconfig)?;
    Ok(path)
}

#[tokio::test]
async fn rbac_forbidden_is_a_per_object_error_of_its_app_only() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-rbac").await?;
    let repo = Repo::new(&ns)?;
    let kubeconfig = configmaps_only_kubeconfig(&cluster, &ns, repo.path()).await?;
    repo.write_app(
        "fine",
        &application(
            "fine",
            &ns.name,
            &[config_map_component("cfg", "fine-cfg", "blue")],
        ),
    )?;
    repo.write_app(
        "denied",
        &application(
            "denied",
            &ns.name,
            &[
                config_map_component("cfg", "denied-cfg", "blue"),
                webservice_component("web", "registry.invalid/web:1"),
            ],
        ),
    )?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "apply",
            repo.path().to_str().context("utf-8 path")?,
            "--yes",
        ])
        .args(["--tracker-namespace", &ns.name, "--kubeconfig"])
        .arg(&kubeconfig)
        .output()?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "Deployment/{}/web: forbidden (RBAC) (403)",
            ns.name
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("app {}/fine: applied", ns.name)),
        "{text}"
    );
    assert!(
        text.contains(&format!("app {}/denied: not applied", ns.name)),
        "{text}"
    );
    expect_config_maps(&cluster, &ns.name, &["fine-cfg"]).await?;
    Ok(())
}

/// A ConfigMap component whose manifest pins `metadata.resourceVersion` (as when a live object
/// is pasted into Git): the apiserver then applies it only over that very version.
fn pinned_config_map_component(component: &str, name: &str, color: &str, version: &str) -> String {
    raw_component(
        component,
        &format!(
            "          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}
              resourceVersion: \"{version}\"
            data:
              color: {color}
"
        ),
    )
}

/// Renders the repository and plans it in this process, so a test can act between the plan and
/// the apply.
pub(super) async fn plan_in_process(
    cluster: &TestCluster,
    repo: &Repo,
) -> Result<(
    agent::cluster::Cluster,
    agent::sync::LivePlan,
    agent::sync::LiveOptions,
)> {
    let live_cluster = agent::cluster::Cluster::connect(
        &cluster.kubeconfig,
        None,
        &agent::cluster::ClusterOptions::default(),
    )
    .await?;
    let worktree = agent::source::worktree::read_worktree(repo.path())?;
    let (output, _) = analyzer::render_snapshot(
        &worktree.snapshot,
        &analyzer::Definitions::builtin(),
        &analyzer::RenderOptions {
            cluster_version: analyzer::ClusterVersion::release(1, 34),
            ..analyzer::RenderOptions::default()
        },
    );
    let policies = agent::live::policies(&output);
    let mut options = agent::sync::LiveOptions {
        tracker_namespace: repo.tracker_namespace.clone(),
        ..agent::sync::LiveOptions::default()
    };
    options.apply.source = Some(std::fs::canonicalize(repo.path())?.display().to_string());
    let live_plan = agent::sync::plan_live(&live_cluster, &output, &policies, None, &options).await;
    Ok((live_cluster, live_plan, options))
}

pub(super) fn planned(live_plan: &agent::sync::LivePlan, app: &str) -> Vec<String> {
    live_plan
        .plan
        .apps
        .iter()
        .filter(|plan| plan.app.name == app)
        .flat_map(|plan| &plan.changes)
        .filter(|change| change.action != agent::plan::Action::Unchanged)
        .map(|change| format!("{} {}", change.action.as_str(), change.object.name))
        .collect()
}

#[tokio::test]
async fn conflicts_409_during_apply_stop_their_app_without_prune() -> Result<()> {
    use agent::apply::ApplyOutcome;
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "pa-409").await?;
    let repo = Repo::new(&ns)?;
    let two = |app: &str| {
        application(
            app,
            &ns.name,
            &[
                config_map_component("keep", &format!("{app}-keep"), "blue"),
                config_map_component("old", &format!("{app}-old"), "blue"),
            ],
        )
    };
    repo.write_app("pinned", &two("pinned"))?;
    repo.write_app("raced", &two("raced"))?;
    repo.write_app(
        "bystander",
        &application(
            "bystander",
            &ns.name,
            &[config_map_component("main", "bystander", "blue")],
        ),
    )?;
    expect_success(&apply(&cluster, &repo)?, "first apply")?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns.name);
    let version = config_maps
        .get("pinned-keep")
        .await?
        .metadata
        .resource_version
        .context("a live object has a resourceVersion")?;

    // Every app changes its kept object; `pinned` and `raced` also drop `old` (a prune).
    repo.write_app(
        "pinned",
        &application(
            "pinned",
            &ns.name,
            &[pinned_config_map_component(
                "keep",
                "pinned-keep",
                "green",
                &version,
            )],
        ),
    )?;
    repo.write_app(
        "raced",
        &application(
            "raced",
            &ns.name,
            &[config_map_component("keep", "raced-keep", "green")],
        ),
    )?;
    repo.write_app(
        "bystander",
        &application(
            "bystander",
            &ns.name,
            &[config_map_component("main", "bystander", "green")],
        ),
    )?;
    let (live_cluster, live_plan, options) = plan_in_process(&cluster, &repo).await?;
    assert_eq!(
        planned(&live_plan, "pinned"),
        vec!["delete pinned-old", "update pinned-keep"]
    );
    assert_eq!(
        planned(&live_plan, "raced"),
        vec!["delete raced-old", "update raced-keep"]
    );

    // Between the plan and the apply, someone else edits `pinned-keep` (its resourceVersion
    // moves on) and writes `raced`'s tracker (another agent on the same app).
    let edit = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"labels": {"edited-by": "someone-else"}}
    });
    config_maps
        .patch(
            "pinned-keep",
            &PatchParams::apply("someone-else"),
            &Patch::Merge(&edit),
        )
        .await?;
    let trackers: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &repo.tracker_namespace);
    trackers
        .patch(
            &format!("{}.raced", ns.name),
            &PatchParams::default(),
            &Patch::Merge(&edit),
        )
        .await?;

    let reports = agent::sync::apply_live(&live_cluster, &live_plan, &options).await;
    let report = |app: &str| {
        reports
            .iter()
            .find(|report| report.app.name == app)
            .with_context(|| format!("no apply report for {app}"))
    };
    // The object's 409 is its own error, named with the object.
    let pinned = report("pinned")?;
    let pinned_error = pinned
        .objects
        .iter()
        .find(|object| object.object.name == "pinned-keep")
        .and_then(|object| object.error.clone())
        .context("pinned-keep has an error")?;
    assert!(
        pinned_error.starts_with("conflict (409): "),
        "{pinned_error}"
    );
    assert!(
        matches!(&pinned.outcome, ApplyOutcome::Failed(reason)
            if reason.starts_with(&format!("ConfigMap/{}/pinned-keep: conflict (409)", ns.name))),
        "{:?}",
        pinned.outcome
    );
    // The tracker's 409 stops `raced` before any object is touched.
    let raced = report("raced")?;
    assert!(
        matches!(&raced.outcome, ApplyOutcome::Failed(reason)
            if reason.contains("was changed by someone else meanwhile")),
        "{:?}",
        raced.outcome
    );
    assert!(raced.objects.is_empty(), "{:?}", raced.objects);
    assert_eq!(report("bystander")?.outcome, ApplyOutcome::Applied);

    // Nothing pruned, nothing of the stopped apps written; the other app applied.
    let names = config_map_names(&cluster, &ns.name).await?;
    for name in ["pinned-old", "raced-old", "pinned-keep", "raced-keep"] {
        assert!(names.contains(name), "{name} missing: {names:?}");
    }
    let color = |name: &'static str| {
        let config_maps = config_maps.clone();
        async move {
            anyhow::Ok(
                config_maps
                    .get(name)
                    .await?
                    .data
                    .and_then(|data| data.get("color").cloned()),
            )
        }
    };
    assert_eq!(color("pinned-keep").await?.as_deref(), Some("blue"));
    assert_eq!(color("raced-keep").await?.as_deref(), Some("blue"));
    assert_eq!(color("bystander").await?.as_deref(), Some("green"));
    Ok(())
}
