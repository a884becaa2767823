//! Git as users host it, end to end: a real Gitea serving HTTPS with a certificate from a test CA
//! and SSH from its built-in server (`DRIFTLESS_GITEA_SECURE=1 hack/gitea.sh up --name
//! e2e-secure`), and the agent deploying from each into the shared cluster:
//!
//! - over HTTPS (trusting the test CA through `caFile`, a token as credential) and over SSH (a
//!   key uploaded to Gitea, the host's keys from `ssh-keyscan` as `knownHosts`), both deploy;
//! - a source whose `knownHosts` holds other keys for the host is refused, and a remote that
//!   accepts connections and then sends nothing times out; meanwhile `/readyz` is not ready and
//!   names both sources with their reasons, and the healthy source keeps deploying.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::{Value, json};

use crate::support::agent::{AgentProcess, WorkTree, free_port, wait_for};
use crate::support::apps::config_map_app;
use crate::support::cluster::{TestCluster, TestNamespace, hack_script_with_env};

const INSTANCE: &str = "e2e-secure";

/// The HTTPS + SSH Gitea shared by this file's tests.
struct SecureGitea {
    url: String,
    token: String,
    ca_file: PathBuf,
    ssh_port: u16,
    client: reqwest::Client,
}

impl SecureGitea {
    fn shared() -> Result<SecureGitea> {
        static UP: OnceLock<Result<(String, PathBuf), String>> = OnceLock::new();
        let (url, token_file) = UP
            .get_or_init(|| {
                let stdout = hack_script_with_env(
                    "gitea.sh",
                    &["up", "--name", INSTANCE],
                    &[("DRIFTLESS_GITEA_SECURE", "1")],
                )
                .map_err(|error| format!("{error:#}"))?;
                let lines: Vec<&str> = stdout.lines().collect();
                match lines.as_slice() {
                    [url, token] => Ok((url.trim().to_owned(), PathBuf::from(token.trim()))),
                    _ => Err(format!("`hack/gitea.sh up` printed {stdout:?}")),
                }
            })
            .clone()
            .map_err(|error| anyhow!("the secure Gitea could not be started:\n{error}"))?;
        let dir = token_file
            .parent()
            .context("the token file lives in the instance dir")?;
        let env: BTreeMap<String, String> = std::fs::read_to_string(dir.join("env"))?
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect();
        let ca_file = PathBuf::from(env.get("GITEA_CA_FILE").context(
            "the instance is not secure (no GITEA_CA_FILE); stop it with `hack/gitea.sh down --name e2e-secure`",
        )?);
        let ssh_port = env
            .get("GITEA_SSH_PORT")
            .context("no GITEA_SSH_PORT")?
            .parse()?;
        ensure!(url.starts_with("https://"), "the secure Gitea serves {url}");
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&ca_file)?)?)
            .build()?;
        Ok(SecureGitea {
            url,
            token: std::fs::read_to_string(&token_file)?.trim().to_owned(),
            ca_file,
            ssh_port,
            client,
        })
    }

    async fn api(&self, method: reqwest::Method, path: &str, body: Value) -> Result<Value> {
        let response = self
            .client
            .request(method.clone(), format!("{}/api/v1{path}", self.url))
            .header("authorization", format!("token {}", self.token))
            .json(&body)
            .send()
            .await
            .with_context(|| format!("{method} {path}"))?;
        let status = response.status();
        let text = response.text().await?;
        ensure!(
            status.is_success(),
            "{method} {path}: HTTP {status}: {text}"
        );
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// A new private repository holding the ConfigMap app `name` in `namespace`, pushed over
    /// HTTPS with the git CLI trusting the test CA.
    async fn repo_with_app(&self, prefix: &str, name: &str, namespace: &str) -> Result<String> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
        let repo = format!("{prefix}-{}-{nanos:x}", std::process::id());
        self.api(
            reqwest::Method::POST,
            "/user/repos",
            json!({"name": repo, "private": true, "default_branch": "main"}),
        )
        .await?;
        let host = self.url.trim_start_matches("https://");
        let push_url = format!(
            "https://driftless:{}@{host}/driftless/{repo}.git",
            self.token
        );
        let tree = WorkTree::new(push_url.clone())?;
        tree.write("apps/app.yaml", &config_map_app(name, namespace, "blue"))?;
        tree.commit_all("one app")?;
        // GIT_SSL_CAINFO, not http.sslCAInfo: the variable wins over the config when the
        // runner's environment sets it.
        let output = Command::new("git")
            .args(["push", "-q", "-f", &push_url, "HEAD:refs/heads/main"])
            .current_dir(tree.dir.path())
            .env("GIT_SSL_CAINFO", &self.ca_file)
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()?;
        ensure!(
            output.status.success(),
            "git push failed: {}",
            String::from_utf8_lossy(&output.stderr).replace(&self.token, "<token>")
        );
        Ok(repo)
    }

    fn https_url(&self, repo: &str) -> String {
        format!("{}/driftless/{repo}.git", self.url)
    }

    fn ssh_url(&self, repo: &str) -> String {
        format!("ssh://git@127.0.0.1:{}/driftless/{repo}.git", self.ssh_port)
    }

    /// The host's keys as `ssh-keyscan` prints them.
    fn keyscan(&self) -> Result<String> {
        let output = Command::new("ssh-keyscan")
            .args(["-p", &self.ssh_port.to_string(), "127.0.0.1"])
            .output()
            .context("running ssh-keyscan")?;
        let lines = String::from_utf8(output.stdout)?;
        ensure!(
            !lines.trim().is_empty(),
            "ssh-keyscan found no key: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(lines)
    }
}

/// A new SSH key pair in `dir`; returns the private key path and the public key line.
fn ssh_key(dir: &Path, name: &str, key_type: &str) -> Result<(PathBuf, String)> {
    let path = dir.join(name);
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", key_type, "-N", "", "-C", "driftless-e2e", "-f"])
        .arg(&path)
        .status()
        .context("running ssh-keygen")?;
    ensure!(status.success(), "ssh-keygen failed");
    let public = std::fs::read_to_string(path.with_extension("pub"))?;
    Ok((path, public.trim().to_owned()))
}

/// `known_hosts` lines naming the same host and key types as `real`, with other keys.
fn impostor_known_hosts(dir: &Path, real: &str) -> Result<String> {
    let mut lines = String::new();
    for (index, line) in real
        .lines()
        .filter(|line| !line.starts_with('#'))
        .enumerate()
    {
        let mut fields = line.split_whitespace();
        let (Some(host), Some(key_type)) = (fields.next(), fields.next()) else {
            continue;
        };
        let keygen_type = match key_type {
            "ssh-rsa" => "rsa",
            "ssh-ed25519" => "ed25519",
            key_type if key_type.starts_with("ecdsa") => "ecdsa",
            other => bail!("unexpected host key type {other}"),
        };
        let (_, public) = ssh_key(dir, &format!("impostor-{index}"), keygen_type)?;
        let key = public
            .split_whitespace()
            .nth(1)
            .context("a public key line")?;
        lines.push_str(&format!("{host} {key_type} {key}\n"));
    }
    Ok(lines)
}

async fn config_map_color(
    cluster: &TestCluster,
    namespace: &str,
    name: &str,
) -> Result<Option<String>> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), namespace);
    Ok(api
        .get_opt(name)
        .await?
        .and_then(|map| map.data)
        .and_then(|data| data.get("color").cloned()))
}

fn indent(text: &str, by: usize) -> String {
    text.lines()
        .map(|line| format!("{}{line}\n", " ".repeat(by)))
        .collect()
}

fn unique(prefix: &str) -> Result<String> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    Ok(format!("{prefix}-{:x}", nanos & 0xffff_ffff))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_deploys_over_https_and_over_ssh() -> Result<()> {
    let gitea = SecureGitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "git-transports").await?;
    let ns = namespace.name.as_str();
    let https_repo = gitea.repo_with_app("https", "over-https", ns).await?;
    let ssh_repo = gitea.repo_with_app("ssh", "over-ssh", ns).await?;

    let work = tempfile::tempdir()?;
    let (key, public) = ssh_key(work.path(), "id_ed25519", "ed25519")?;
    gitea
        .api(
            reqwest::Method::POST,
            "/user/keys",
            json!({"title": unique("e2e")?, "key": public}),
        )
        .await?;
    let known_hosts = gitea.keyscan()?;
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: {https_source}
    url: {https_url}
    caFile: {ca_file}
    credentials: {{ token: {{ env: E2E_GIT_TOKEN }} }}
    pollInterval: 2s
  - name: {ssh_source}
    url: {ssh_url}
    knownHosts: |
{known_hosts}    credentials: {{ sshKey: {{ file: {key} }} }}
    pollInterval: 2s
clusters:
  - {{ name: local, kubeconfig: {kubeconfig} }}
server: {{ listen: 127.0.0.1:{port} }}
cacheDir: {cache}
",
            https_source = unique("https")?,
            https_url = gitea.https_url(&https_repo),
            ca_file = gitea.ca_file.display(),
            ssh_source = unique("ssh")?,
            ssh_url = gitea.ssh_url(&ssh_repo),
            known_hosts = indent(&known_hosts, 6),
            key = key.display(),
            kubeconfig = cluster.kubeconfig.display(),
            cache = work.path().join("cache").display(),
        ),
    )?;
    let agent = AgentProcess::start(&config, &[("E2E_GIT_TOKEN", &gitea.token)], port)?;
    for name in ["over-https-settings", "over-ssh-settings"] {
        wait_for(&format!("ConfigMap {ns}/{name} deployed"), || async {
            config_map_color(&cluster, ns, name).await
        })
        .await
        .with_context(|| agent.log_text().unwrap_or_default())?;
    }
    let readyz = reqwest::get(format!("{}/readyz", agent.base)).await?;
    ensure!(readyz.status() == 200, "readyz: {}", readyz.text().await?);
    let private_key = std::fs::read_to_string(&key)?;
    agent.stop_checked(&[&gitea.token, private_key.trim()])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_host_key_and_a_silent_remote_fail_alone_and_readyz_says_so() -> Result<()> {
    let gitea = SecureGitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "git-refusals").await?;
    let ns = namespace.name.as_str();
    let good_repo = gitea.repo_with_app("good", "still-deploys", ns).await?;
    let ssh_repo = gitea
        .repo_with_app("impostor", "never-deployed", ns)
        .await?;

    let work = tempfile::tempdir()?;
    let (key, public) = ssh_key(work.path(), "id_ed25519", "ed25519")?;
    gitea
        .api(
            reqwest::Method::POST,
            "/user/keys",
            json!({"title": unique("e2e")?, "key": public}),
        )
        .await?;
    let impostor = impostor_known_hosts(work.path(), &gitea.keyscan()?)?;
    // Accepts every connection and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let silent_addr = silent.local_addr()?;
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept() {
            held.push(stream);
        }
    });
    let (good, wrong_key, black_hole) = (unique("good")?, unique("wrongkey")?, unique("silent")?);
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: {black_hole}
    url: http://{silent_addr}/driftless/nothing.git
    fetch: {{ lowSpeedTime: 2s }}
    pollInterval: 2s
  - name: {wrong_key}
    url: {ssh_url}
    knownHosts: |
{impostor}    credentials: {{ sshKey: {{ file: {key} }} }}
    pollInterval: 2s
  - name: {good}
    url: {https_url}
    caFile: {ca_file}
    credentials: {{ token: {{ env: E2E_GIT_TOKEN }} }}
    pollInterval: 2s
clusters:
  - {{ name: local, kubeconfig: {kubeconfig} }}
server: {{ listen: 127.0.0.1:{port} }}
cacheDir: {cache}
",
            ssh_url = gitea.ssh_url(&ssh_repo),
            impostor = indent(&impostor, 6),
            key = key.display(),
            https_url = gitea.https_url(&good_repo),
            ca_file = gitea.ca_file.display(),
            kubeconfig = cluster.kubeconfig.display(),
            cache = work.path().join("cache").display(),
        ),
    )?;
    let agent = AgentProcess::start(&config, &[("E2E_GIT_TOKEN", &gitea.token)], port)?;

    wait_for("the healthy source deploys", || async {
        config_map_color(&cluster, ns, "still-deploys-settings").await
    })
    .await
    .with_context(|| agent.log_text().unwrap_or_default())?;
    let readyz_url = format!("{}/readyz", agent.base);
    let body = wait_for("/readyz naming both failing sources", || async {
        let response = reqwest::get(&readyz_url).await?;
        let status = response.status();
        let body = response.text().await?;
        ensure!(status == 503, "/readyz answered {status}: {body}");
        Ok((body.contains(&format!("source {wrong_key}: cannot fetch"))
            && body.contains(&format!("source {black_hole}: cannot fetch")))
        .then_some(body))
    })
    .await?;
    ensure!(body.contains("does not match knownHosts"), "{body}");
    ensure!(body.contains("the transfer stalled"), "{body}");
    ensure!(!body.contains(&format!("source {good}:")), "{body}");
    ensure!(
        config_map_color(&cluster, ns, "never-deployed-settings")
            .await?
            .is_none(),
        "the source behind the wrong host key deployed"
    );
    agent.stop_checked(&[&gitea.token])?;
    Ok(())
}
