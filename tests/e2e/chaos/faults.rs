//! Faults between the agent and the apiserver: a real TCP fault proxy (Toxiproxy, built from its
//! Go module by `hack/build-toxiproxy.sh`) that the agent's kubeconfig points at, and a restart
//! of the apiserver itself.
//!
//! Toxiproxy works on TCP, and the agent speaks TLS to the apiserver through it, so it cannot
//! forge HTTP answers. For 5xx answers a trial's agent talks instead to `hack/faultproxy`, an
//! HTTPS reverse proxy (Go's standard library, built by `hack/build-faultproxy.sh`) that
//! terminates TLS and answers a share of the requests with 500, 503 or 504.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Half the requests answered with a 5xx (500, 503 or 504) by the HTTPS fault proxy.
    ServerErrors,
}

impl Fault {
    pub const ALL: [Fault; 5] = [
        Fault::Latency,
        Fault::CutMidResponse,
        Fault::Unreachable,
        Fault::ApiserverRestart,
        Fault::ServerErrors,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Latency => "latency",
            Fault::CutMidResponse => "cut-mid-response",
            Fault::Unreachable => "unreachable",
            Fault::ApiserverRestart => "apiserver-restart",
            Fault::ServerErrors => "http-5xx",
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
    /// The HTTPS proxy that answers with 5xx, for [`Fault::ServerErrors`] trials.
    server_errors: HttpFaultProxy,
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
        let server_errors =
            HttpFaultProxy::start(&cluster.kubeconfig, &original, &from, dir.path())?;
        let proxy = FaultProxy {
            child,
            api: format!("http://127.0.0.1:{api_port}"),
            kubeconfig,
            http: reqwest::Client::new(),
            server_errors,
            _dir: dir,
        };
        proxy.server_errors.wait_ready(&proxy.http).await?;
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
            Fault::ServerErrors => {
                let status = [500, 503, 504][(bytes % 3) as usize];
                self.server_errors
                    .admin(
                        &self.http,
                        reqwest::Method::PUT,
                        &format!("status={status}&ratio=0.5"),
                    )
                    .await?;
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
            Fault::ServerErrors => {
                self.server_errors
                    .admin(&self.http, reqwest::Method::DELETE, "")
                    .await?;
                let injected = self.server_errors.injected(&self.http).await?;
                ensure!(
                    injected
                        > self
                            .server_errors
                            .injected_before
                            .swap(injected, Ordering::SeqCst),
                    "the 5xx fault answered no request: the agent made none while it was in place"
                );
            }
        }
        Ok(())
    }
}

/// `hack/faultproxy` in front of the apiserver: answers a share of the requests with a 5xx.
struct HttpFaultProxy {
    child: Child,
    admin: String,
    /// A copy of the cluster's kubeconfig whose server is this proxy, trusting its certificate.
    kubeconfig: PathBuf,
    /// The proxy's count of injected answers when the last fault was lifted.
    injected_before: AtomicU64,
}

impl HttpFaultProxy {
    /// Starts the proxy before the apiserver at `server` (as `kubeconfig_text`, read from
    /// `kubeconfig`, names it), presenting the kubeconfig's client certificate.
    fn start(
        kubeconfig: &Path,
        kubeconfig_text: &str,
        server: &str,
        dir: &Path,
    ) -> Result<HttpFaultProxy> {
        let binary = hack_script("build-faultproxy.sh", &[])?;
        let binary = binary
            .lines()
            .last()
            .context("build-faultproxy.sh printed no path")?
            .trim()
            .to_owned();
        // The kubeconfig of hack/cluster.sh names its files, relative paths from its folder.
        let base = kubeconfig.parent().unwrap_or(Path::new("."));
        let file = |key: &str| -> Result<PathBuf> {
            let value = kubeconfig_text
                .lines()
                .find_map(|line| line.trim().strip_prefix(&format!("{key}:")))
                .with_context(|| format!("the kubeconfig has no {key}"))?;
            Ok(base.join(value.trim()))
        };
        let (listen_port, admin_port) = (free_port()?, free_port()?);
        let serving_ca = dir.join("faultproxy-ca.pem");
        let child = Command::new(&binary)
            .arg("-listen")
            .arg(format!("127.0.0.1:{listen_port}"))
            .arg("-admin")
            .arg(format!("127.0.0.1:{admin_port}"))
            .arg("-upstream")
            .arg(server)
            .arg("-ca")
            .arg(file("certificate-authority")?)
            .arg("-cert")
            .arg(file("client-certificate")?)
            .arg("-key")
            .arg(file("client-key")?)
            .arg("-serving-ca-out")
            .arg(&serving_ca)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        let ca_line = kubeconfig_text
            .lines()
            .find(|line| line.trim().starts_with("certificate-authority:"))
            .context("the kubeconfig has no certificate-authority")?;
        let indent = &ca_line[..ca_line.len() - ca_line.trim_start().len()];
        let proxied = kubeconfig_text
            .replace(server, &format!("https://127.0.0.1:{listen_port}"))
            .replace(
                ca_line,
                &format!("{indent}certificate-authority: {}", serving_ca.display()),
            );
        let path = dir.join("kubeconfig-5xx");
        std::fs::write(&path, proxied)?;
        Ok(HttpFaultProxy {
            child,
            admin: format!("http://127.0.0.1:{admin_port}"),
            kubeconfig: path,
            injected_before: AtomicU64::new(0),
        })
    }

    async fn wait_ready(&self, http: &reqwest::Client) -> Result<()> {
        for _ in 0..100 {
            if self.injected(http).await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "hack/faultproxy did not answer on {} within 10s",
            self.admin
        )
    }

    async fn admin(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        query: &str,
    ) -> Result<()> {
        let response = http
            .request(method, format!("{}/fault?{query}", self.admin))
            .send()
            .await
            .context("hack/faultproxy /fault")?;
        ensure!(
            response.status().is_success(),
            "hack/faultproxy /fault?{query}: {}",
            response.status()
        );
        Ok(())
    }

    /// How many requests the proxy has answered with a fault so far.
    async fn injected(&self, http: &reqwest::Client) -> Result<u64> {
        let stats: serde_json::Value = http
            .get(format!("{}/stats", self.admin))
            .send()
            .await?
            .json()
            .await?;
        stats["injected"]
            .as_u64()
            .context("hack/faultproxy /stats has no injected count")
    }
}

impl Drop for HttpFaultProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// The kubeconfig the agent of a trial uses: a proxy's when the run has fault trials (the HTTPS
/// fault proxy's for a 5xx trial).
pub fn agent_kubeconfig<'a>(
    cluster: &'a TestCluster,
    proxy: Option<&'a FaultProxy>,
    fault: Option<Fault>,
) -> &'a Path {
    match (proxy, fault) {
        (Some(proxy), Some(Fault::ServerErrors)) => proxy.server_errors.kubeconfig.as_path(),
        (Some(proxy), _) => proxy.kubeconfig.as_path(),
        (None, _) => cluster.kubeconfig.as_path(),
    }
}
