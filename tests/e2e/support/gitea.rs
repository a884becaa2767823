//! The real Gitea the agent tests deploy from: started once per test process with
//! `hack/gitea.sh up --name e2e` (built from its Go module), and a thin client for its API.

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::Value;

use crate::support::agent::WorkTree;
use crate::support::apps::config_map_app;
use crate::support::cluster::hack_script;

pub const GITEA_INSTANCE: &str = "e2e";

/// The Gitea instance shared by the tests in this process.
#[derive(Clone)]
pub struct Gitea {
    pub url: String,
    pub token: String,
    pub user: String,
}

impl Gitea {
    /// Starts (or reuses) Gitea with `hack/gitea.sh up --name e2e`.
    pub fn shared() -> Result<Gitea> {
        static GITEA: OnceLock<Result<(String, PathBuf), String>> = OnceLock::new();
        let (url, token_file) = GITEA
            .get_or_init(|| gitea_sh_up().map_err(|error| format!("{error:#}")))
            .clone()
            .map_err(|error| anyhow!("Gitea could not be started:\n{error}"))?;
        let token = std::fs::read_to_string(&token_file)
            .with_context(|| format!("reading {}", token_file.display()))?
            .trim()
            .to_owned();
        Ok(Gitea {
            url,
            token,
            user: "driftless".to_owned(),
        })
    }

    pub async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let url = format!("{}/api/v1{path}", self.url);
        let mut request = reqwest::Client::new()
            .request(method.clone(), &url)
            .header("authorization", format!("token {}", self.token));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("{method} {path}"))?;
        let status = response.status();
        let text = response.text().await?;
        ensure!(
            status.is_success(),
            "{method} {path}: HTTP {status}: {text}"
        );
        Ok(if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)?
        })
    }

    /// Clone/push URL with the token as password (test-only; the agent gets it via config).
    pub fn push_url(&self, repo: &str) -> String {
        let host = self.url.trim_start_matches("http://");
        format!(
            "http://{}:{}@{host}/{}/{repo}.git",
            self.user, self.token, self.user
        )
    }

    pub fn clone_url(&self, repo: &str) -> String {
        format!("{}/{}/{repo}.git", self.url, self.user)
    }

    /// Every status on a commit, oldest first, page by page (a drift schedule every 2 seconds
    /// soon writes more than one page).
    pub async fn statuses(&self, repo: &str, sha: &str) -> Result<Vec<(String, String, String)>> {
        const PAGE: usize = 50;
        let mut out: Vec<(i64, String, String, String)> = Vec::new();
        for page in 1.. {
            let statuses = self
                .api(
                    reqwest::Method::GET,
                    &format!(
                        "/repos/{}/{repo}/commits/{sha}/statuses?limit={PAGE}&page={page}&sort=oldest",
                        self.user
                    ),
                    None,
                )
                .await?;
            let statuses = statuses.as_array().cloned().unwrap_or_default();
            out.extend(statuses.iter().map(|status| {
                (
                    status["id"].as_i64().unwrap_or(0),
                    status["context"].as_str().unwrap_or("").to_owned(),
                    status["status"]
                        .as_str()
                        .or(status["state"].as_str())
                        .unwrap_or("")
                        .to_owned(),
                    status["description"].as_str().unwrap_or("").to_owned(),
                )
            }));
            if statuses.len() < PAGE {
                break;
            }
        }
        out.sort();
        Ok(out
            .into_iter()
            .map(|(_, context, state, description)| (context, state, description))
            .collect())
    }

    /// The latest state and description per context.
    pub async fn latest_statuses(
        &self,
        repo: &str,
        sha: &str,
    ) -> Result<std::collections::BTreeMap<String, (String, String)>> {
        let mut latest = std::collections::BTreeMap::new();
        for (context, state, description) in self.statuses(repo, sha).await? {
            latest.insert(context, (state, description));
        }
        Ok(latest)
    }

    /// Opens a pull request of `branch` into main, titled `title`, once Gitea has recorded the
    /// pushed branch (it does so asynchronously); returns its number.
    pub async fn open_pull(&self, repo: &str, branch: &str, title: &str) -> Result<u64> {
        super::agent::wait_for("Gitea to record the branch", || async {
            let path = format!("/repos/{}/{repo}/branches/{branch}", self.user);
            Ok(self
                .api(reqwest::Method::GET, &path, None)
                .await
                .ok()
                .map(drop))
        })
        .await?;
        let pull = self
            .api(
                reqwest::Method::POST,
                &format!("/repos/{}/{repo}/pulls", self.user),
                Some(serde_json::json!({"head": branch, "base": "main", "title": title})),
            )
            .await?;
        pull["number"]
            .as_u64()
            .context("the pull request has no number")
    }

    pub async fn comments(&self, repo: &str, pull: u64) -> Result<Vec<(u64, String)>> {
        let comments = self
            .api(
                reqwest::Method::GET,
                &format!("/repos/{}/{repo}/issues/{pull}/comments", self.user),
                None,
            )
            .await?;
        Ok(comments
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|comment| {
                (
                    comment["id"].as_u64().unwrap_or(0),
                    comment["body"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect())
    }
}

fn gitea_sh_up() -> Result<(String, PathBuf)> {
    let stdout = hack_script("gitea.sh", &["up", "--name", GITEA_INSTANCE])?;
    let lines: Vec<&str> = stdout.lines().collect();
    let [url, token_file] = lines.as_slice() else {
        bail!("`hack/gitea.sh up` printed {stdout:?}, expected the base URL and the token file");
    };
    Ok((url.trim().to_owned(), PathBuf::from(token_file.trim())))
}

/// A fresh Gitea repository holding one ConfigMap app in `ns`; returns the repo name, the
/// source name and the pushed commit.
pub async fn repo_with_one_app(
    gitea: &Gitea,
    prefix: &str,
    ns: &str,
) -> Result<(String, String, String)> {
    let (repo, source) = super::gitea_agent::new_repo(gitea, prefix).await?;
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write("apps/app.yaml", &config_map_app("app", ns, "blue"))?;
    let commit = tree.commit_and_push("one app", "main")?;
    Ok((repo, source, commit))
}
