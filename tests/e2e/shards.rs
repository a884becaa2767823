//! Replicas sharing the apps: three agent processes over one Gitea repository, coordinated by
//! Leases in the real cluster. The apps split within the bound; a replica killed with SIGKILL
//! has its apps taken over within the Lease duration plus a poll; no app is applied by two
//! replicas at once (each replica's applies, from its log, fall inside its holding of the app's
//! claim, from a watch of the claim Leases); every app ends deployed with its status, nothing
//! orphaned; and a fourth replica moves about a quarter of the apps.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::support::agent::{AgentProcess, WorkTree, free_port, wait_for};
use crate::support::apps::config_map_app;
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::Gitea;

const N_APPS: usize = 16;
const LEASE_SECONDS: u64 = 3;
const POLL_SECONDS: u64 = 1;
const CLAIM: &str = "driftless.dev/shard-role=claim";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_apps_and_take_over_a_killed_ones() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "shards").await?;
    let ns = namespace.name.clone();
    let history = ClaimHistory::watch(&cluster, &ns).await?;

    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let repo = format!("shards-{}-{nanos:x}", std::process::id());
    let source = format!("shards-{:x}", nanos & 0xffff_ffff);
    gitea
        .api(
            reqwest::Method::POST,
            "/user/repos",
            Some(json!({"name": repo, "default_branch": "main"})),
        )
        .await?;
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    let apps: Vec<String> = (0..N_APPS).map(|index| format!("app-{index}")).collect();
    for app in &apps {
        tree.write(
            &format!("apps/{app}.yaml"),
            &config_map_app(app, &ns, "blue"),
        )?;
    }
    let first = tree.commit_and_push("sixteen apps", "main")?;

    let work = tempfile::tempdir()?;
    let fleet = Fleet {
        gitea: &gitea,
        cluster: &cluster,
        repo: &repo,
        source: &source,
        ns: &ns,
        work: work.path(),
    };
    let mut replicas: BTreeMap<String, AgentProcess> = BTreeMap::new();
    for replica in ["r-0", "r-1", "r-2"] {
        replicas.insert(replica.to_owned(), fleet.start(replica)?);
    }

    // Every app deployed once, with its status, split within ⌈1.25 × 16 / 3⌉ = 7.
    fleet.wait_deployed(&first, &apps, "blue").await?;
    let owners = wait_split(&cluster, &ns, &["r-0", "r-1", "r-2"], &apps).await?;
    let cap = agent::shard::assign::max_load(N_APPS, 3, 0.25);
    for (replica, n_apps) in loads(&owners) {
        ensure!(
            n_apps <= cap,
            "{replica} holds {n_apps} apps, over the bound {cap}: {owners:?}"
        );
    }
    assert_eq!(owners, expected_owners(&["r-0", "r-1", "r-2"], &ns, &apps));
    // The metrics give each replica's apps; `/shards` shows the assignment, behind the token.
    let mut owned_total = 0;
    for (replica, process) in &replicas {
        let metrics = process.metrics().await?;
        let line = format!("driftless_shard_owned_apps{{source=\"{source}\"}} ");
        let owned: usize = metrics
            .lines()
            .find_map(|text| text.strip_prefix(&line))
            .and_then(|value| value.trim().parse().ok())
            .with_context(|| format!("{replica}'s metrics have no {line}:\n{metrics}"))?;
        assert_eq!(
            owned,
            loads(&owners).get(replica).copied().unwrap_or(0),
            "{replica}"
        );
        owned_total += owned;
    }
    assert_eq!(owned_total, N_APPS);
    let page_url = format!("{}/shards", replicas["r-0"].base);
    let refused = reqwest::get(&page_url).await?.status();
    assert_eq!(refused, 401, "/shards without credentials");
    let page = reqwest::Client::new()
        .get(&page_url)
        .bearer_auth(crate::support::agent::API_TOKEN)
        .send()
        .await?
        .text()
        .await?;
    ensure!(
        page.contains("live members (3): r-0, r-1, r-2"),
        "/shards:\n{page}"
    );
    ensure!(
        page.contains(&format!(
            "source {source}: {N_APPS} apps, at most {cap} per replica"
        )),
        "/shards:\n{page}"
    );

    // SIGKILL r-1: the others take its apps within the Lease duration plus one poll.
    let killed_apps: Vec<String> = owners
        .iter()
        .filter(|(_, owner)| *owner == "r-1")
        .map(|(app, _)| app.clone())
        .collect();
    ensure!(!killed_apps.is_empty(), "r-1 owned nothing: {owners:?}");
    let killed_at = Instant::now();
    replicas.remove("r-1").context("r-1 runs")?.kill()?;
    let owners = wait_split(&cluster, &ns, &["r-0", "r-2"], &apps).await?;
    let taken_over = killed_at.elapsed();
    ensure!(
        taken_over <= Duration::from_secs(LEASE_SECONDS + POLL_SECONDS + 2),
        "r-1's apps were taken over {taken_over:?} after its kill"
    );
    println!(
        "r-1's {} apps taken over {taken_over:?} after SIGKILL",
        killed_apps.len()
    );
    // A commit after the kill reaches every app, r-1's included: no lost app, no lost status.
    for app in &apps {
        tree.write(
            &format!("apps/{app}.yaml"),
            &config_map_app(app, &ns, "green"),
        )?;
    }
    let second = tree.commit_and_push("green", "main")?;
    fleet.wait_deployed(&second, &apps, "green").await?;
    assert_eq!(owners, expected_owners(&["r-0", "r-2"], &ns, &apps));

    // 3 → 4 replicas: r-1 comes back, then r-3 joins; about a quarter of the apps move.
    replicas.insert("r-1".to_owned(), fleet.start("r-1")?);
    let three = wait_split(&cluster, &ns, &["r-0", "r-1", "r-2"], &apps).await?;
    replicas.insert("r-3".to_owned(), fleet.start("r-3")?);
    let four = wait_split(&cluster, &ns, &["r-0", "r-1", "r-2", "r-3"], &apps).await?;
    let moved = apps
        .iter()
        .filter(|app| three.get(*app) != four.get(*app))
        .count();
    println!("3 → 4 replicas moved {moved} of {N_APPS} apps");
    ensure!(
        (N_APPS / 8..=N_APPS / 2).contains(&moved),
        "3 → 4 replicas moved {moved} of {N_APPS}"
    );
    // The moved apps are deployed again by their new owners at the next commit.
    for app in &apps {
        tree.write(
            &format!("apps/{app}.yaml"),
            &config_map_app(app, &ns, "red"),
        )?;
    }
    let third = tree.commit_and_push("red", "main")?;
    fleet.wait_deployed(&third, &apps, "red").await?;

    // No app applied by two replicas at once: each replica's applies of an app fall inside its
    // holding of the app's claim.
    let mut logs = BTreeMap::new();
    for (replica, process) in replicas {
        logs.insert(replica, process.stop_checked(&[&gitea.token])?);
    }
    let holdings = history.holdings(&ns);
    let mut n_applies = 0;
    for (replica, log) in &logs {
        for (at, app) in applies(log, &ns) {
            n_applies += 1;
            let held = holdings.get(&app).is_some_and(|spans| {
                spans.iter().any(|(holder, from, to)| {
                    holder == replica && *from <= at && to.is_none_or(|to| at <= to)
                })
            });
            ensure!(
                held,
                "{replica} applied {app} at {at} without holding its claim: {:?}",
                holdings.get(&app)
            );
        }
    }
    ensure!(
        n_applies >= 3 * N_APPS,
        "only {n_applies} applies found in the logs"
    );
    // The stopped replicas gave their claims up.
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), &ns);
    let left = leases
        .list(&ListParams::default().labels(CLAIM))
        .await?
        .items
        .len();
    ensure!(left == 0, "{left} claims left after every replica stopped");
    // No orphans: exactly the apps' ConfigMaps (and the root CA) in the namespace.
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns);
    let names: Vec<String> = config_maps
        .list(&ListParams::default().labels("!driftless.dev/shard-role"))
        .await?
        .items
        .into_iter()
        .filter_map(|config_map| config_map.metadata.name)
        .filter(|name| name != "kube-root-ca.crt")
        .collect();
    ensure!(
        names.len() == N_APPS,
        "ConfigMaps in the namespace: {names:?}"
    );
    Ok(())
}

/// The shared pieces of the agents' configs.
struct Fleet<'a> {
    gitea: &'a Gitea,
    cluster: &'a TestCluster,
    repo: &'a str,
    source: &'a str,
    ns: &'a str,
    work: &'a std::path::Path,
}

impl Fleet<'_> {
    fn start(&self, replica: &str) -> Result<AgentProcess> {
        let port = free_port()?;
        let config = self.work.join(format!("{replica}.yaml"));
        std::fs::write(
            &config,
            format!(
                "sources:
  - name: {source}
    url: {clone_url}
    branch: main
    pollInterval: {POLL_SECONDS}s
    credentials: {{ token: {{ env: E2E_GIT_TOKEN }} }}
clusters:
  - name: local
    kubeconfig: {kubeconfig}
forge:
  kind: gitea
  baseUrl: {gitea_url}
  token: {{ env: E2E_FORGE_TOKEN }}
server:
  listen: 127.0.0.1:{port}
  apiToken: {{ env: E2E_API_TOKEN }}
sharding:
  replicaId: {replica}
  namespace: {ns}
  leaseDuration: {LEASE_SECONDS}s
cacheDir: {cache}
",
                source = self.source,
                clone_url = self.gitea.clone_url(self.repo),
                kubeconfig = self.cluster.kubeconfig.display(),
                gitea_url = self.gitea.url,
                ns = self.ns,
                cache = self.work.join(format!("cache-{replica}")).display(),
            ),
        )?;
        AgentProcess::start(
            &config,
            &[
                ("E2E_GIT_TOKEN", &self.gitea.token),
                ("E2E_FORGE_TOKEN", &self.gitea.token),
            ],
            port,
        )
    }

    /// Waits until every app's ConfigMap holds `color`, its status on `commit` is a success,
    /// and so is the commit's one summary status.
    async fn wait_deployed(&self, commit: &str, apps: &[String], color: &str) -> Result<()> {
        let config_maps: Api<ConfigMap> = Api::namespaced(self.cluster.client.clone(), self.ns);
        wait_for(
            &format!("every app deployed at {commit} ({color})"),
            || async {
                let statuses = self.gitea.latest_statuses(self.repo, commit).await?;
                for app in apps {
                    let context = format!("driftless/{}/{app}", self.ns);
                    match statuses.get(&context) {
                        Some((state, _)) if state == "success" => {}
                        Some((state, description)) if state != "pending" => {
                            bail!("{context} is {state}: {description}")
                        }
                        _ => return Ok(None),
                    }
                    let config_map = config_maps.get_opt(&format!("{app}-settings")).await?;
                    let data = config_map
                        .and_then(|config_map| config_map.data)
                        .unwrap_or_default();
                    if data.get("color").map(String::as_str) != Some(color) {
                        return Ok(None);
                    }
                }
                // One summary, by the leader, from every replica's published results.
                match statuses.get("driftless") {
                    Some((state, description)) if state == "success" => {
                        let expected = format!("{} app(s) deployed by", apps.len());
                        ensure!(description.starts_with(&expected), "summary: {description}");
                        Ok(Some(()))
                    }
                    Some((state, description)) if state != "pending" => {
                        bail!("the summary is {state}: {description}")
                    }
                    _ => Ok(None),
                }
            },
        )
        .await
    }
}

/// Waits until the claims of every app are held by `members` as bounded hashing assigns them
/// over exactly these members; returns app → holder.
async fn wait_split(
    cluster: &TestCluster,
    ns: &str,
    members: &[&str],
    apps: &[String],
) -> Result<BTreeMap<String, String>> {
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), ns);
    let expected = expected_owners(members, ns, apps);
    wait_for(&format!("the apps split over {members:?}"), || async {
        let mut holders = BTreeMap::new();
        for lease in leases
            .list(&ListParams::default().labels(CLAIM))
            .await?
            .items
        {
            let app = claim_app(&lease, ns);
            let holder = lease.spec.and_then(|spec| spec.holder_identity);
            if let (Some(app), Some(holder)) = (app, holder) {
                holders.insert(app, holder);
            }
        }
        Ok((holders == expected).then_some(holders))
    })
    .await
}

/// The owners bounded hashing gives the apps over `members` (what every replica computes).
fn expected_owners(members: &[&str], ns: &str, apps: &[String]) -> BTreeMap<String, String> {
    let keys: Vec<String> = apps.iter().map(|app| format!("{ns}/{app}")).collect();
    let owners = agent::shard::assign::bounded(members, &keys, 0.25);
    apps.iter()
        .zip(owners)
        .filter_map(|(app, owner)| Some((app.clone(), members[owner?].to_owned())))
        .collect()
}

fn loads(owners: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut loads = BTreeMap::new();
    for owner in owners.values() {
        *loads.entry(owner.clone()).or_default() += 1;
    }
    loads
}

/// The app a claim Lease is for (its annotation is `source namespace/name`).
fn claim_app(lease: &Lease, ns: &str) -> Option<String> {
    let annotation = lease
        .metadata
        .annotations
        .as_ref()?
        .get(agent::shard::APP_ANNOTATION)?;
    let (_, app) = annotation.split_once(' ')?;
    app.strip_prefix(&format!("{ns}/")).map(str::to_owned)
}

/// One watch event of a claim Lease: when the test saw it, the Lease's name, and the Lease
/// (`None`: deleted).
type ClaimEvent = (Timestamp, String, Option<Lease>);

/// One holding of a claim: the holder, from its acquire time, until the next holder's acquire
/// time or the deletion seen (`None`: still held).
type Holding = (String, Timestamp, Option<Timestamp>);

/// Every write to the claim Leases, as a watch saw it.
struct ClaimHistory {
    events: Arc<Mutex<Vec<ClaimEvent>>>,
}

impl ClaimHistory {
    async fn watch(cluster: &TestCluster, ns: &str) -> Result<ClaimHistory> {
        let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), ns);
        let mut stream = leases
            .watch(&WatchParams::default().labels(CLAIM).timeout(290), "0")
            .await?
            .boxed();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        tokio::spawn(async move {
            while let Ok(Some(event)) = stream.try_next().await {
                let now = Timestamp::now();
                let (name, lease) = match event {
                    WatchEvent::Added(lease) | WatchEvent::Modified(lease) => {
                        (lease.metadata.name.clone().unwrap_or_default(), Some(lease))
                    }
                    WatchEvent::Deleted(lease) => {
                        (lease.metadata.name.clone().unwrap_or_default(), None)
                    }
                    _ => continue,
                };
                sink.lock().expect("not poisoned").push((now, name, lease));
            }
        });
        Ok(ClaimHistory { events })
    }

    /// Per app, who held its claim and when: (holder, from its acquire time, to the next
    /// holder's acquire time or the deletion seen).
    fn holdings(&self, ns: &str) -> BTreeMap<String, Vec<Holding>> {
        let events = self.events.lock().expect("not poisoned");
        let mut per_lease: BTreeMap<&str, Vec<Holding>> = BTreeMap::new();
        let mut app_of: BTreeMap<&str, String> = BTreeMap::new();
        for (seen, name, lease) in events.iter() {
            let spans = per_lease.entry(name.as_str()).or_default();
            match lease {
                Some(lease) => {
                    if let Some(app) = claim_app(lease, ns) {
                        app_of.insert(name.as_str(), app);
                    }
                    let spec = lease.spec.clone().unwrap_or_default();
                    let holder = spec.holder_identity.unwrap_or_default();
                    let from = spec.acquire_time.map_or(*seen, |time| time.0);
                    let same = spans.last().is_some_and(|(last, last_from, to)| {
                        *last == holder && *last_from == from && to.is_none()
                    });
                    if !same {
                        if let Some(last) = spans.last_mut()
                            && last.2.is_none()
                        {
                            last.2 = Some(from);
                        }
                        spans.push((holder, from, None));
                    }
                }
                None => {
                    if let Some(last) = spans.last_mut()
                        && last.2.is_none()
                    {
                        last.2 = Some(*seen);
                    }
                }
            }
        }
        per_lease
            .into_iter()
            .filter_map(|(name, spans)| Some((app_of.get(name)?.clone(), spans)))
            .collect()
    }
}

/// The (time, app) of every app a replica's log says it reconciled in namespace `ns`.
fn applies(log: &str, ns: &str) -> Vec<(Timestamp, String)> {
    log.lines()
        .filter(|line| {
            line.contains("app reconciled") && line.contains(&format!("app.namespace={ns}"))
        })
        .filter_map(|line| {
            let at: Timestamp = line.split_whitespace().next()?.parse().ok()?;
            let app = line
                .split("app.name=")
                .nth(1)?
                .split([' ', '}'])
                .next()?
                .to_owned();
            Some((at, app))
        })
        .collect()
}
