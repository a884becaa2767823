//! Faults between the agent and the apiserver: a real TCP fault proxy (Toxiproxy, built from its
//! Go module by `hack/build-toxiproxy.sh`) that the agent's kubeconfig points at, and a restart
//! of the apiserver itself.
//!
//! Toxiproxy works on TCP, and the agent speaks TLS to the apiserver through it, so the proxy
//! cannot forge HTTP answers: 5xx responses are not among these faults.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

use crate::support::agent::free_port;
use crate::support::cluster::{TestCluster, hack_script};

/// The faults a fault trial puts in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Every answer delayed by 150-450 ms.
    Latency,
    /// Connections cut after a random number of bytes of the apiserver's answers, so requests
    /// die mid-response (an apply may or may not have happened).
    CutMidResponse,
    /// The proxy refuses connections and drops the open ones (the apiserver unreachable).
    Unreachable,
    /// The apiserver process is stopped and started again.
    ApiserverRestart,
}

impl Fault {
    pub const ALL: [Fault; 4] = [
        Fault::Latency,
        Fault::CutMidResponse,
        Fault::Unreachable,
        Fault::ApiserverRestart,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Latency => "latency",
            Fault::CutMidResponse => "cut-mid-response",
            Fault::Unreachable => "unreachable",
            Fault::ApiserverRestart => "apiserver-restart",
        }
    }
}

/// The proxy's name for the apiserver upstream.
const PROXY: &str = "apiserver";

/// A running Toxiproxy with one proxy in front of a cluster's apiserver; stopped when dropped.
pub struct FaultProxy {
    child: Child,
    api: String,
    /// A copy of the cluster's kubeconfig whose server is the proxy.
    pub kubeconfig: PathBuf,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl FaultProxy {
    pub async fn start(cluster: &TestCluster) -> Result<FaultProxy> {
        let server = hack_script("build-toxiproxy.sh", &[])?;
        let server = server
            .lines()
            .last()
            .context("build-toxiproxy.sh printed no path")?
            .trim();
        let api_port = free_port()?;
        let child = Command::new(server)
            .args(["-host", "127.0.0.1", "-port", &api_port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {server}"))?;
        let dir = tempfile::tempdir()?;
        let apiserver_port = *cluster
            .ports()?
            .get("APISERVER_PORT")
            .context("the cluster records no APISERVER_PORT")?;
        let listen_port = free_port()?;
        let original = std::fs::read_to_string(&cluster.kubeconfig)?;
        let from = format!("https://127.0.0.1:{apiserver_port}");
        ensure!(
            original.contains(&from),
            "the kubeconfig does not name {from}"
        );
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            original.replace(&from, &format!("https://127.0.0.1:{listen_port}")),
        )?;
        let proxy = FaultProxy {
            child,
            api: format!("http://127.0.0.1:{api_port}"),
            kubeconfig,
            http: reqwest::Client::new(),
            _dir: dir,
        };
        proxy.wait_ready().await?;
        proxy
            .call(
                reqwest::Method::POST,
                "/proxies",
                json!({
                    "name": PROXY,
                    "listen": format!("127.0.0.1:{listen_port}"),
                    "upstream": format!("127.0.0.1:{apiserver_port}"),
                    "enabled": true,
                }),
            )
            .await?;
        Ok(proxy)
    }

    async fn wait_ready(&self) -> Result<()> {
        for _ in 0..100 {
            if let Ok(response) = self.http.get(format!("{}/version", self.api)).send().await
                && response.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("toxiproxy did not answer on {} within 10s", self.api)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: serde_json::Value,
    ) -> Result<()> {
        let response = self
            .http
            .request(method, format!("{}{path}", self.api))
            .json(&body)
            .send()
            .await
            .with_context(|| format!("toxiproxy {path}"))?;
        let status = response.status();
        ensure!(
            status.is_success(),
            "toxiproxy {path}: {status}: {}",
            response.text().await.unwrap_or_default()
        );
        Ok(())
    }

    /// Puts `fault` in place; `bytes` picks where a cut lands.
    pub async fn inject(&self, fault: Fault, cluster: &TestCluster, bytes: u64) -> Result<()> {
        let toxic = |name: &str, kind: &str, stream: &str, attributes: serde_json::Value| json!({"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes});
        let toxics = format!("/proxies/{PROXY}/toxics");
        match fault {
            Fault::Latency => {
                for stream in ["downstream", "upstream"] {
                    let body = toxic(
                        &format!("latency-{stream}"),
                        "latency",
                        stream,
                        json!({"latency": 150, "jitter": 150}),
                    );
                    self.call(reqwest::Method::POST, &toxics, body).await?;
                }
            }
            Fault::CutMidResponse => {
                let body = toxic("cut", "limit_data", "downstream", json!({"bytes": bytes}));
                self.call(reqwest::Method::POST, &toxics, body).await?;
            }
            Fault::Unreachable => {
                self.call(
                    reqwest::Method::POST,
                    &format!("/proxies/{PROXY}"),
                    json!({"enabled": false}),
                )
                .await?;
            }
            Fault::ApiserverRestart => {
                restart_apiserver(cluster).await?;
            }
        }
        Ok(())
    }

    /// Takes every fault away again.
    pub async fn lift(&self, fault: Fault) -> Result<()> {
        let remove = |name: &str| format!("/proxies/{PROXY}/toxics/{name}");
        match fault {
            Fault::Latency => {
                for stream in ["downstream", "upstream"] {
                    self.call(
                        reqwest::Method::DELETE,
                        &remove(&format!("latency-{stream}")),
                        json!({}),
                    )
                    .await?;
                }
            }
            Fault::CutMidResponse => {
                self.call(reqwest::Method::DELETE, &remove("cut"), json!({}))
                    .await?;
            }
            Fault::Unreachable => {
                self.call(
                    reqwest::Method::POST,
                    &format!("/proxies/{PROXY}"),
                    json!({"enabled": true}),
                )
                .await?;
            }
            Fault::ApiserverRestart => {}
        }
        Ok(())
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `hack/cluster.sh restart-apiserver` for the cluster, off the async runtime.
async fn restart_apiserver(cluster: &TestCluster) -> Result<()> {
    let name = cluster.name.clone();
    tokio::task::spawn_blocking(move || {
        hack_script("cluster.sh", &["restart-apiserver", "--name", &name]).map(drop)
    })
    .await?
}

/// The kubeconfig the agent of a trial uses: the proxy's for fault trials.
pub fn agent_kubeconfig<'a>(cluster: &'a TestCluster, proxy: Option<&'a FaultProxy>) -> &'a Path {
    proxy.map_or(cluster.kubeconfig.as_path(), |proxy| {
        proxy.kubeconfig.as_path()
    })
}
