//! The crash and fault harness: the agent, SIGKILLed at random instants or cut off from the
//! apiserver by a TCP fault proxy, never leaves an object of ours outside a tracker, never
//! prunes what is not its own, and converges on what Git says once restarted or once the fault
//! is gone.
//!
//! The trials run on a cluster of this test's own (`chaos`: the fault trials restart its
//! apiserver), each in a namespace of its own. A trial:
//! 1. puts bystanders there: an unmarked ConfigMap, a ConfigMap carrying only KubeVela's
//!    ownership labels of one of our apps, and an app of another source (`driftless apply`);
//! 2. deploys the scenario's first state with the agent and waits until it converged (a trial
//!    of the first deploy has no first state);
//! 3. commits the next state and, at a random instant of its deploy, SIGKILLs the agent (crash
//!    trial) or puts a fault between it and the apiserver for a random while (fault trial);
//! 4. crash: checks for orphans at once, then restarts the agent; fault: lifts the fault. Then
//!    it waits for convergence and checks again: no orphan, no wrong prune, convergence.
//!
//! The agent polls its repository every second and corrects drift every three seconds, so it
//! converges without a new commit. `hack/chaos.sh` runs many trials through this test
//! (`DRIFTLESS_CHAOS_CRASH_TRIALS`, `DRIFTLESS_CHAOS_FAULT_TRIALS`, `DRIFTLESS_CHAOS_SEED`,
//! `DRIFTLESS_CHAOS_RESULTS`) and records them in RELIABILITY.md; the suite runs one of each.

mod checks;
mod faults;
mod scenarios;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::support::agent::{AgentProcess, WorkTree, free_port};
use crate::support::cli::{driftless, expect_success};
use crate::support::cluster::{OwnedCluster, TestCluster, TestNamespace};
use faults::{Fault, FaultProxy, agent_kubeconfig};
use scenarios::{Scenario, State};

/// How long a trial waits for convergence after the kill or the fault.
const CONVERGENCE: Duration = Duration::from_secs(120);

/// Seeded, printed and recorded, so a failing trial can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next_below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound.max(1)
    }
}

/// The outcome of one trial.
#[derive(Debug)]
struct Trial {
    kind: &'static str,
    scenario: Scenario,
    /// The fault, for a fault trial.
    fault: Option<Fault>,
    /// When the kill or the fault landed, after the disturbed step's commit.
    at_ms: u64,
    /// Whether the cluster still differed from Git then: the kill or fault hit the step
    /// before it finished (otherwise it hit an agent that had already converged).
    mid_step: bool,
    /// How long the undisturbed first state took from commit to convergence (0 without one).
    first_state_ms: u64,
    /// Orphans found right after the kill (crash trials) and after convergence.
    orphans: Vec<String>,
    wrong_prunes: Vec<String>,
    /// What still differed from Git when the wait ended (empty: converged).
    differences: Vec<String>,
    seconds: f64,
}

impl Trial {
    fn passed(&self) -> bool {
        self.orphans.is_empty() && self.wrong_prunes.is_empty() && self.differences.is_empty()
    }

    fn json(&self, seed: u64) -> serde_json::Value {
        serde_json::json!({
            "kind": self.kind,
            "scenario": self.scenario.name(),
            "fault": self.fault.map(Fault::name),
            "atMs": self.at_ms,
            "midStep": self.mid_step,
            "firstStateMs": self.first_state_ms,
            "seed": seed,
            "orphans": self.orphans,
            "wrongPrunes": self.wrong_prunes,
            "converged": self.differences.is_empty(),
            "differences": self.differences,
            "seconds": (self.seconds * 10.0).round() / 10.0,
        })
    }
}

fn env_count(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .with_context(|| format!("{name}={text:?} is not a count")),
        Err(_) => Ok(default),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_faulted_agents_leave_no_orphan_prune_nothing_wrong_and_converge() -> Result<()>
{
    let crash_trials = env_count("DRIFTLESS_CHAOS_CRASH_TRIALS", 1)?;
    let fault_trials = env_count("DRIFTLESS_CHAOS_FAULT_TRIALS", 1)?;
    let seed = match std::env::var("DRIFTLESS_CHAOS_SEED") {
        Ok(text) => text.parse().context("DRIFTLESS_CHAOS_SEED")?,
        Err(_) => SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64,
    };
    eprintln!("chaos seed: {seed}");
    let mut random = Lcg(seed);
    let owned = OwnedCluster::up("chaos").await?;
    let cluster = &owned.cluster;
    let proxy = if fault_trials > 0 {
        Some(FaultProxy::start(cluster).await?)
    } else {
        None
    };
    let results_file = std::env::var_os("DRIFTLESS_CHAOS_RESULTS");
    let mut failed = Vec::new();
    let plan = (0..crash_trials)
        .map(|index| (index, None))
        .chain((0..fault_trials).map(|index| (index, Some(Fault::ALL[index % Fault::ALL.len()]))));
    // Trials take scenarios (and faults) in turn from this index: one combination can be run
    // again alone.
    let first = env_count("DRIFTLESS_CHAOS_FIRST", 0)?;
    let plan = plan.map(|(index, fault)| {
        let index = index + first;
        (index, fault.map(|_| Fault::ALL[index % Fault::ALL.len()]))
    });
    for (index, fault) in plan {
        // Scenarios in turn; a fault trial has no first deploy to disturb with a restart.
        let scenario = match fault {
            None => Scenario::ALL[index % Scenario::ALL.len()],
            Some(_) => Scenario::ALL[1 + index % (Scenario::ALL.len() - 1)],
        };
        let trial = run_trial(cluster, proxy.as_ref(), scenario, fault, &mut random).await?;
        let line = trial.json(seed);
        eprintln!("chaos trial: {line}");
        if let Some(path) = &results_file {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            writeln!(file, "{line}")?;
        }
        if !trial.passed() {
            failed.push(line);
        }
    }
    drop(proxy);
    owned.down()?;
    ensure!(
        failed.is_empty(),
        "failed chaos trials (seed {seed}):\n{failed:#?}"
    );
    Ok(())
}

/// The agent's configuration: one source polled every second (with a prune budget the prune
/// scenario fits in), drift corrected every three.
fn agent_config(tree: &WorkTree, kubeconfig: &Path, port: u16, work: &Path) -> Result<String> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() & 0xffff_ffff;
    Ok(format!(
        "sources:
  - name: chaos-{nanos:x}
    url: file://{repo}
    pollInterval: 1s
    # The prune scenario removes half the apps on purpose: above the default prune budget,
    # which would hold it for an approval (a behaviour of its own, tested elsewhere).
    prune: {{ maxObjects: 1000, maxPercent: 100 }}
clusters:
  - name: local
    kubeconfig: {kubeconfig}
server: {{ listen: '127.0.0.1:{port}' }}
drift: {{ schedule: '*/3 * * * * *', mode: correct }}
cacheDir: {cache}
",
        repo = tree.dir.path().display(),
        kubeconfig = kubeconfig.display(),
        cache = work.join("cache").display(),
    ))
}

/// Objects that are not ours in any way: one unmarked, one with only KubeVela's labels of app-0
/// (labels alone never make an object ours); and an app of another source.
async fn bystanders(cluster: &TestCluster, namespace: &str) -> Result<tempfile::TempDir> {
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), namespace);
    for (name, labels) in [
        ("unowned", None),
        (
            "lookalike",
            Some(BTreeMap::from([
                ("app.oam.dev/name".to_owned(), "app-0".to_owned()),
                ("app.oam.dev/namespace".to_owned(), namespace.to_owned()),
            ])),
        ),
    ] {
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels,
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("color".to_owned(), "grey".to_owned())])),
            ..ConfigMap::default()
        };
        config_maps
            .create(&PostParams::default(), &config_map)
            .await?;
    }
    // The neighbour's tracker sits with ours (driftless-system): the agent lists it with its own
    // and must leave it alone, since it records another source.
    let neighbour = tempfile::tempdir()?;
    std::fs::create_dir_all(neighbour.path().join("apps"))?;
    std::fs::write(
        neighbour.path().join("apps/neighbour.yaml"),
        crate::support::apps::config_map_app("neighbour", namespace, "grey"),
    )?;
    let path = neighbour.path().to_str().context("utf-8 path")?;
    let output = driftless(cluster, &["apply", path, "--yes"])?;
    expect_success(&output, "driftless apply of the neighbour app")?;
    Ok(neighbour)
}

/// Polls until the cluster holds `state` (and nothing of `removed`), at most [`CONVERGENCE`];
/// returns what still differed when the wait ended.
async fn converge(cluster: &TestCluster, state: &State, removed: &[String]) -> Result<Vec<String>> {
    let deadline = Instant::now() + CONVERGENCE;
    loop {
        let differences = checks::differences(cluster, state, removed).await?;
        if differences.is_empty() || Instant::now() >= deadline {
            return Ok(differences);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn run_trial(
    cluster: &TestCluster,
    proxy: Option<&FaultProxy>,
    scenario: Scenario,
    fault: Option<Fault>,
    random: &mut Lcg,
) -> Result<Trial> {
    let started = Instant::now();
    let ns = TestNamespace::new(cluster, "chaos").await?;
    let namespace = ns.name.as_str();
    let _neighbour = bystanders(cluster, namespace).await?;
    let tree = WorkTree::new("file-source".to_owned())?;
    let work = tempfile::tempdir()?;
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        agent_config(
            &tree,
            agent_kubeconfig(cluster, proxy, fault),
            port,
            work.path(),
        )?,
    )?;

    let after = scenario.after(namespace);
    let mut agent = None;
    let mut first_state_ms = 0;
    if let Some(before) = scenario.before(namespace) {
        before.commit(&tree, "before")?;
        let committed = Instant::now();
        agent = Some(AgentProcess::start(&config, &[], port)?);
        let differences = converge(cluster, &before, &[]).await?;
        first_state_ms = committed.elapsed().as_millis() as u64;
        ensure!(
            differences.is_empty(),
            "{} trial: the first state did not converge: {differences:?}",
            scenario.name()
        );
    }
    // What must survive: the bystanders untouched, and every object Git keeps with its uid.
    let kept = after.config_maps();
    let survivors_before = checks::survivors(
        cluster,
        namespace,
        |key| match key.split_once('/') {
            Some(("ConfigMap", name)) => {
                ["unowned", "lookalike", "neighbour-settings"].contains(&name)
                    || kept.contains_key(name)
            }
            // The rollout's Deployment takes the new revision in place: never deleted.
            Some(("Deployment", "web")) => after.rollout.is_some(),
            _ => false,
        },
        |key| {
            [
                "ConfigMap/unowned",
                "ConfigMap/lookalike",
                "ConfigMap/neighbour-settings",
            ]
            .contains(&key)
        },
    )
    .await?;
    let removed: Vec<String> = scenario
        .before(namespace)
        .map(|before| {
            before
                .app_names()
                .difference(&after.app_names())
                .cloned()
                .collect()
        })
        .unwrap_or_default();

    after.commit(&tree, "after")?;
    let at_ms = random.next_below(scenario.window_ms());
    let mut orphans = Vec::new();
    let mid_step;
    match fault {
        None => {
            let running = match agent.take() {
                Some(running) => running,
                None => AgentProcess::start(&config, &[], port)?,
            };
            tokio::time::sleep(Duration::from_millis(at_ms)).await;
            running.kill()?;
            mid_step = !checks::differences(cluster, &after, &removed)
                .await?
                .is_empty();
            orphans.extend(
                checks::orphans(cluster, namespace)
                    .await?
                    .into_iter()
                    .map(|o| format!("at the kill: {o}")),
            );
            agent = Some(AgentProcess::start(&config, &[], port)?);
        }
        Some(fault) => {
            let proxy = proxy.context("a fault trial needs the proxy")?;
            tokio::time::sleep(Duration::from_millis(at_ms.min(2_000))).await;
            let bytes = 500 + random.next_below(30_000);
            mid_step = !checks::differences(cluster, &after, &removed)
                .await?
                .is_empty();
            proxy.inject(fault, cluster, bytes).await?;
            tokio::time::sleep(Duration::from_millis(1_000 + random.next_below(5_000))).await;
            orphans.extend(
                checks::orphans(cluster, namespace)
                    .await?
                    .into_iter()
                    .map(|o| format!("under the fault: {o}")),
            );
            proxy.lift(fault).await?;
        }
    }
    let differences = converge(cluster, &after, &removed).await?;
    orphans.extend(checks::orphans(cluster, namespace).await?);
    let wrong_prunes = checks::wrong_prunes(cluster, namespace, &survivors_before).await?;
    if let Some(running) = agent {
        if !differences.is_empty() {
            let kept = std::env::temp_dir().join(format!("chaos-agent-{namespace}.log"));
            std::fs::write(&kept, running.log_text()?)?;
            eprintln!("the agent's log of the failed trial: {}", kept.display());
        }
        running.kill()?;
    }
    Ok(Trial {
        kind: if fault.is_some() { "fault" } else { "crash" },
        scenario,
        fault,
        at_ms,
        mid_step,
        first_state_ms,
        orphans,
        wrong_prunes,
        differences,
        seconds: started.elapsed().as_secs_f64(),
    })
}
