//! The setup most agent tests share: a fresh Gitea repository, a work tree that pushes to it, and
//! the agent polling it every second, deploying to the shared cluster and posting statuses to
//! Gitea, with plan pages behind the e2e token. [`AgentLines`] adds a test's own settings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use serde_json::json;

use super::agent::{AgentProcess, WorkTree, free_port, wait_for};
use super::cluster::TestCluster;
use super::gitea::Gitea;

/// Extra `driftless.yaml` lines, each already indented for where it goes.
#[derive(Debug, Default, Clone)]
pub struct AgentLines {
    /// Under the source (indent 4), e.g. `"    applyReviewedPlan: true\n"`.
    pub source: String,
    /// Under `server:` (indent 2), e.g. `"  webhookSecret: { env: E2E_WEBHOOK_SECRET }\n"`.
    pub server: String,
    /// At the top level, e.g. `"drift: { interval: 2s, mode: report }\n"`.
    pub top: String,
    /// More fields of the `forge` flow mapping, e.g. `", appStatusLimit: 2"`.
    pub forge: String,
}

/// A fresh Gitea repository named after `prefix`, and a source name unique to this run.
pub async fn new_repo(gitea: &Gitea, prefix: &str) -> Result<(String, String)> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let repo = format!("{prefix}-{}-{nanos:x}", std::process::id());
    let source = format!("{prefix}-{:x}", nanos & 0xffff_ffff);
    gitea
        .api(
            reqwest::Method::POST,
            "/user/repos",
            Some(json!({"name": repo, "default_branch": "main"})),
        )
        .await?;
    Ok((repo, source))
}

/// Writes the agent's `driftless.yaml` into `work`: `source` polling `repo` every second, the
/// shared cluster as `local`, the Gitea forge, the server on `port` with the e2e API token.
pub fn write_config(
    gitea: &Gitea,
    cluster: &TestCluster,
    (repo, source): (&str, &str),
    lines: &AgentLines,
    port: u16,
    work: &Path,
) -> Result<PathBuf> {
    let config = work.join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: {source}
    url: {clone_url}
    branch: main
    pollInterval: 1s
    credentials: {{ token: {{ env: E2E_GIT_TOKEN }} }}
{source_lines}clusters:
  - name: local
    kubeconfig: {kubeconfig}
forge: {{ kind: gitea, baseUrl: '{gitea_url}', token: {{ env: E2E_FORGE_TOKEN }}{forge_lines} }}
server:
  listen: '127.0.0.1:{port}'
  apiToken: {{ env: E2E_API_TOKEN }}
{server_lines}cacheDir: {cache}
{top_lines}",
            clone_url = gitea.clone_url(repo),
            kubeconfig = cluster.kubeconfig.display(),
            gitea_url = gitea.url,
            cache = work.join("cache").display(),
            source_lines = lines.source,
            server_lines = lines.server,
            top_lines = lines.top,
            forge_lines = lines.forge,
        ),
    )?;
    Ok(config)
}

/// Starts the agent on `config` with the Gitea token for git and the forge, plus `env`.
pub fn start_agent(
    gitea: &Gitea,
    config: &Path,
    port: u16,
    env: &[(&str, &str)],
) -> Result<AgentProcess> {
    let mut all = vec![
        ("E2E_GIT_TOKEN", gitea.token.as_str()),
        ("E2E_FORGE_TOKEN", gitea.token.as_str()),
    ];
    all.extend_from_slice(env);
    AgentProcess::start(config, &all, port)
}

/// The agent over a fresh Gitea repository.
pub struct GiteaAgent<'a> {
    pub gitea: &'a Gitea,
    pub repo: String,
    pub source: String,
    pub tree: WorkTree,
    pub process: AgentProcess,
    _work: tempfile::TempDir,
}

impl<'a> GiteaAgent<'a> {
    /// A new repository named after `prefix` and the agent over it (nothing pushed yet).
    pub async fn start(
        gitea: &'a Gitea,
        cluster: &TestCluster,
        prefix: &str,
        lines: &AgentLines,
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let (repo, source) = new_repo(gitea, prefix).await?;
        let tree = WorkTree::new(gitea.push_url(&repo))?;
        let work = tempfile::tempdir()?;
        let port = free_port()?;
        let config = write_config(gitea, cluster, (&repo, &source), lines, port, work.path())?;
        let process = start_agent(gitea, &config, port, env)?;
        Ok(GiteaAgent {
            gitea,
            repo,
            source,
            tree,
            process,
            _work: work,
        })
    }

    /// The final summary status of `commit` (state, description), with every latest status.
    pub async fn summary(
        &self,
        commit: &str,
    ) -> Result<((String, String), BTreeMap<String, (String, String)>)> {
        wait_for(&format!("the summary status of {commit}"), || async {
            let statuses = self.gitea.latest_statuses(&self.repo, commit).await?;
            Ok(statuses
                .get("driftless")
                .filter(|(state, _)| state != "pending")
                .cloned()
                .map(|summary| (summary, statuses)))
        })
        .await
    }

    /// Stops the agent, failing if its log shows the Gitea token; returns the log.
    pub fn stop(self) -> Result<String> {
        self.process.stop_checked(&[&self.gitea.token])
    }
}
