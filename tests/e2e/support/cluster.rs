//! The real local control plane started by `hack/cluster.sh`, and per-test namespaces in it.
//!
//! The shared cluster (`e2e`) is started once per test process and left running between runs; stop
//! it with `hack/cluster.sh down --name e2e`. Tests that need a cluster of their own use
//! [`OwnedCluster`], which brings it down when dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::await_condition;
use kube::{Api, Client, Config};

/// Name of the cluster shared by all end-to-end tests.
pub const SHARED: &str = "e2e";

/// How long a test waits for the cluster to reach a watched condition.
pub const WAIT: Duration = Duration::from_secs(120);

/// A running cluster and a client for it. Clients are bound to the tokio runtime that built them,
/// and every `#[tokio::test]` has its own runtime, so each handle builds its own client.
pub struct TestCluster {
    pub name: String,
    pub kubeconfig: PathBuf,
    pub client: Client,
}

impl TestCluster {
    /// The shared cluster, started with `hack/cluster.sh up --name e2e` the first time a test in
    /// this process asks for it (a no-op when it is already running). Fails with the script's
    /// error output when the cluster cannot be started.
    pub async fn shared() -> Result<Self> {
        static KUBECONFIG: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let kubeconfig = KUBECONFIG
            .get_or_init(|| cluster_sh("up", SHARED).map_err(|e| format!("{e:#}")))
            .clone()
            .map_err(|e| anyhow!("the shared test cluster could not be started:\n{e}"))?;
        Self::connect(SHARED, kubeconfig).await
    }

    /// Builds a client for an already running cluster from its kubeconfig.
    pub async fn connect(name: &str, kubeconfig: PathBuf) -> Result<Self> {
        let kc = Kubeconfig::read_from(&kubeconfig)
            .with_context(|| format!("reading kubeconfig {}", kubeconfig.display()))?;
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading kubeconfig {}", kubeconfig.display()))?;
        let client = Client::try_from(config).context("building the kube client")?;
        Ok(Self {
            name: name.to_owned(),
            kubeconfig,
            client,
        })
    }

    /// The cluster's state directory (`$DRIFTLESS_CACHE/clusters/NAME`), which holds the
    /// kubeconfig, `pids/*.pid`, `ports` and `logs/`.
    pub fn dir(&self) -> &Path {
        self.kubeconfig
            .parent()
            .expect("kubeconfig lives in the cluster directory")
    }

    /// The processes of the cluster, by component, from `pids/*.pid`.
    pub fn pids(&self) -> Result<BTreeMap<String, u32>> {
        let mut pids = BTreeMap::new();
        let dir = self.dir().join("pids");
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            let (Some(component), Some("pid")) = (
                path.file_stem().and_then(|s| s.to_str()),
                path.extension().and_then(|s| s.to_str()),
            ) else {
                continue;
            };
            let pid = std::fs::read_to_string(&path)?.trim().parse()?;
            pids.insert(component.to_owned(), pid);
        }
        Ok(pids)
    }

    /// The loopback ports of the cluster, by name (`APISERVER_PORT`, ...), from `ports`.
    pub fn ports(&self) -> Result<BTreeMap<String, u16>> {
        let path = self.dir().join("ports");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| Ok((k.to_owned(), v.parse()?)))
            .collect()
    }
}

/// A cluster of this test's own, stopped (`hack/cluster.sh down`) by [`OwnedCluster::down`] or,
/// if the test fails first, on drop.
pub struct OwnedCluster {
    pub cluster: TestCluster,
    stopped: bool,
}

impl OwnedCluster {
    pub async fn up(name: &str) -> Result<Self> {
        let kubeconfig = cluster_sh("up", name)
            .with_context(|| format!("the test cluster '{name}' could not be started"))?;
        let cluster = TestCluster::connect(name, kubeconfig).await?;
        Ok(Self {
            cluster,
            stopped: false,
        })
    }

    /// Stops the cluster; the script fails unless every process is gone and no port listens.
    pub fn down(mut self) -> Result<()> {
        self.stopped = true;
        cluster_sh("down", &self.cluster.name).map(drop)
    }
}

impl Drop for OwnedCluster {
    fn drop(&mut self) {
        if !self.stopped
            && let Err(e) = cluster_sh("down", &self.cluster.name)
        {
            eprintln!(
                "stopping test cluster '{}' failed: {e:#}",
                self.cluster.name
            );
        }
    }
}

/// Runs `hack/SCRIPT ARGS...` from the repository: its progress is shown on stderr as it happens,
/// its stderr is kept for the error, and its stdout is returned.
pub fn hack_script(script: &str, args: &[&str]) -> Result<String> {
    hack_script_with_env(script, args, &[])
}

/// [`hack_script`] with extra environment variables.
pub fn hack_script_with_env(script: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("hack")
        .join(script);
    let mut child = Command::new(&path)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", path.display()))?;
    let stderr = child.stderr.take().expect("stderr is piped");
    // Forward progress lines straight to the real stderr (not libtest's capture) and keep them.
    let relay = std::thread::spawn(move || {
        let mut kept = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(std::io::stderr(), "{line}");
            kept.push_str(&line);
            kept.push('\n');
        }
        kept
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout is piped")
        .read_to_string(&mut stdout)?;
    let status = child.wait()?;
    let err_output = relay.join().unwrap_or_default();
    if !status.success() {
        bail!(
            "`hack/{script} {}` failed ({status}):\n{err_output}",
            args.join(" ")
        );
    }
    Ok(stdout)
}

/// Runs `hack/cluster.sh CMD --name NAME` and returns, for `up`, the last stdout line (the
/// kubeconfig path).
pub fn cluster_sh(cmd: &str, name: &str) -> Result<PathBuf> {
    let stdout = hack_script("cluster.sh", &[cmd, "--name", name])?;
    if cmd != "up" {
        return Ok(PathBuf::new());
    }
    let last = stdout.lines().last().unwrap_or_default().trim();
    let path = PathBuf::from(last);
    if !path.is_absolute() || !path.is_file() {
        bail!("`hack/cluster.sh up --name {name}` printed no kubeconfig path (stdout: {stdout:?})");
    }
    Ok(path)
}

/// A uniquely named namespace, ready for pods (its `default` ServiceAccount exists), deleted when
/// dropped.
pub struct TestNamespace {
    pub name: String,
    kubeconfig: PathBuf,
}

impl TestNamespace {
    pub async fn new(cluster: &TestCluster, prefix: &str) -> Result<Self> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos();
        let prefix: String = prefix.chars().take(30).collect();
        let name = format!(
            "{prefix}-{}-{}-{nanos:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([(
                    "driftless.test/e2e".to_owned(),
                    "true".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        let this = Self {
            name,
            kubeconfig: cluster.kubeconfig.clone(),
        };
        // Pods are rejected until the controller manager has created the default ServiceAccount.
        let sas: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), &this.name);
        tokio::time::timeout(
            WAIT,
            await_condition(sas, "default", |sa: Option<&ServiceAccount>| sa.is_some()),
        )
        .await
        .with_context(|| format!("timed out waiting for ServiceAccount {}/default", this.name))??;
        Ok(this)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // Drop can't await and the test's runtime may be shutting down (or the test panicking), so
        // delete from a short-lived runtime on a thread of its own.
        let (name, kubeconfig) = (self.name.clone(), self.kubeconfig.clone());
        let deleted = std::thread::spawn(move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let cluster = TestCluster::connect("", kubeconfig).await?;
                let namespaces: Api<Namespace> = Api::all(cluster.client);
                namespaces
                    .delete(&name, &DeleteParams::background())
                    .await?;
                Ok(())
            })
        })
        .join();
        match deleted {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("deleting test namespace {} failed: {e:#}", self.name),
            Err(_) => eprintln!("deleting test namespace {} panicked", self.name),
        }
    }
}
