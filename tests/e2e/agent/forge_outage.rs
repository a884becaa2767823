//! The forge unreachable: the agent still deploys, and every queued status lands once the forge
//! is back, in order, also across a restart of the agent while it is down.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::Value;

use crate::support::agent::{AgentProcess, free_port, wait_for};
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::{Gitea, repo_with_one_app};

use super::{color, single_source_config};

/// A TCP relay to Gitea on a fixed loopback port, which the test can switch off (connections
/// refused, like a forge that is down) and on again.
struct ForgeRelay {
    port: u16,
    target: String,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ForgeRelay {
    fn new(target_url: &str) -> Result<ForgeRelay> {
        Ok(ForgeRelay {
            port: free_port()?,
            target: target_url.trim_start_matches("http://").to_owned(),
            task: None,
        })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn up(&mut self) -> Result<()> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .with_context(|| format!("binding the relay port {}", self.port))?;
        let target = self.target.clone();
        self.task = Some(tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }));
        Ok(())
    }
}

impl Drop for ForgeRelay {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The agent's work directory and port, kept across its runs so a restarted agent finds the
/// last run's cache (and the forge outbox saved in it).
struct AgentHome {
    work: tempfile::TempDir,
    port: u16,
}

impl AgentHome {
    fn new() -> Result<AgentHome> {
        Ok(AgentHome {
            work: tempfile::tempdir()?,
            port: free_port()?,
        })
    }

    /// Starts an agent that watches Gitea's `repo` as `source` and reaches the forge through
    /// `relay`.
    fn start(
        &self,
        gitea: &Gitea,
        cluster: &TestCluster,
        relay: &ForgeRelay,
        repo: &str,
        source: &str,
    ) -> Result<AgentProcess> {
        let config = self.work.path().join("driftless.yaml");
        std::fs::write(
            &config,
            single_source_config(
                source,
                &gitea.clone_url(repo),
                cluster,
                &relay.url(),
                None,
                self.port,
                self.work.path(),
            ),
        )?;
        AgentProcess::start(&config, &[("E2E_FORGE_TOKEN", &gitea.token)], self.port)
    }
}

/// The forge is down while a commit is pushed: the agent deploys it anyway, counts the failed
/// forge calls, and once the forge is back the newest status of each context lands on the
/// right commit (the `pending` it queued was superseded before it could be sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_outage_delays_statuses_but_not_deploys() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "outage").await?;
    let ns = namespace.name.as_str();
    let (repo, source, commit) = repo_with_one_app(&gitea, "outage", ns).await?;
    // The relay is not listening yet: every forge call is refused.
    let mut relay = ForgeRelay::new(&gitea.url)?;
    let home = AgentHome::new()?;
    let agent = home.start(&gitea, &cluster, &relay, &repo, &source)?;

    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let deployed = wait_for("the app to be deployed while the forge is down", || async {
        Ok(config_maps.get_opt("app-settings").await?)
    })
    .await?;
    assert_eq!(color(&deployed), Some("blue"));
    wait_for("failed forge calls to be counted", || async {
        let text = agent.metrics().await?;
        Ok(text
            .lines()
            .any(|line| {
                line.starts_with("driftless_api_calls_total{target=\"Forge\",outcome=\"Error\"}")
            })
            .then_some(()))
    })
    .await?;
    assert!(
        gitea.statuses(&repo, &commit).await?.is_empty(),
        "no status can have reached the forge while it was down"
    );

    relay.up().await?;
    let app_context = format!("driftless/{ns}/app");
    let latest = wait_for("the queued statuses to land", || async {
        let latest = gitea.latest_statuses(&repo, &commit).await?;
        let done = |context: &str| {
            latest
                .get(context)
                .is_some_and(|(state, _)| state != "pending")
        };
        Ok((done("driftless") && done(&app_context)).then_some(latest))
    })
    .await?;
    assert_eq!(latest["driftless"].0, "success", "{latest:?}");
    assert_eq!(latest[&app_context].0, "success", "{latest:?}");
    let history = gitea.statuses(&repo, &commit).await?;
    let states = |wanted: &str| -> Vec<String> {
        history
            .iter()
            .filter(|(context, _, _)| context == wanted)
            .map(|(_, state, _)| state.clone())
            .collect()
    };
    assert_eq!(states("driftless"), ["success"], "{history:?}");
    assert_eq!(states(&app_context), ["success"], "{history:?}");

    agent.stop_checked(&[&gitea.token])?;
    Ok(())
}

/// The agent crashes while the forge is down, with statuses queued: they were saved in the
/// cache directory, and the next run delivers them once the forge is back, although it no
/// longer watches that repository (so it cannot have made them again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_restarted_while_the_forge_is_down_loses_no_status() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "restart").await?;
    let ns = namespace.name.as_str();
    let (repo, source, commit) = repo_with_one_app(&gitea, "restart", ns).await?;
    let mut relay = ForgeRelay::new(&gitea.url)?;
    let home = AgentHome::new()?;
    let agent = home.start(&gitea, &cluster, &relay, &repo, &source)?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    wait_for("the app to be deployed while the forge is down", || async {
        Ok(config_maps.get_opt("app-settings").await?)
    })
    .await?;
    let outbox = home.work.path().join("cache/forge-outbox.json");
    let app_context = format!("driftless/{ns}/app");
    wait_for("the final statuses to be saved in the outbox", || async {
        let text = std::fs::read_to_string(&outbox).unwrap_or_default();
        let saved: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let final_state = |context: &str| {
            saved["operations"].as_array().is_some_and(|ops| {
                ops.iter().any(|op| {
                    op["commit"] == commit.as_str()
                        && op["context"] == context
                        && op["state"] == "success"
                })
            })
        };
        Ok((final_state("driftless") && final_state(&app_context)).then_some(()))
    })
    .await?;
    // A crash: SIGKILL, no shutdown path.
    drop(agent);

    // The next run watches another repository only, with the same cache directory.
    let other_namespace = TestNamespace::new(&cluster, "restart-other").await?;
    let (other_repo, other_source, _) =
        repo_with_one_app(&gitea, "restart-other", &other_namespace.name).await?;
    let agent = home.start(&gitea, &cluster, &relay, &other_repo, &other_source)?;
    relay.up().await?;
    let latest = wait_for("the saved statuses to land", || async {
        let latest = gitea.latest_statuses(&repo, &commit).await?;
        Ok(
            (latest.contains_key("driftless") && latest.contains_key(&app_context))
                .then_some(latest),
        )
    })
    .await?;
    assert_eq!(latest["driftless"].0, "success", "{latest:?}");
    assert_eq!(latest[&app_context].0, "success", "{latest:?}");
    let log = agent.stop_checked(&[&gitea.token])?;
    ensure!(
        log.contains("resuming the forge outbox of the last run"),
        "the second run did not resume the saved outbox; log:\n{log}"
    );
    Ok(())
}
