//! `driftless agent` end to end, against a real Gitea (started by `hack/gitea.sh up --name e2e`,
//! built from its Go module) and the shared local cluster:
//!
//! - a push to the tracked branch is deployed: per-app statuses go pending then success, and a
//!   broken app gets a failure status with its error while the other app deploys;
//! - a pull request gets one plan comment and a status on its head commit, nothing changes in
//!   the cluster, and a second push edits the same comment in place;
//! - a webhook with a bad signature is rejected, and Gitea's own signed webhooks make the agent
//!   poll at once (the poll interval is an hour, so nothing else could).
//!
//! If Gitea cannot be started the test fails and says why; it never skips. Waiting is bounded
//! polling of Gitea's API and the cluster, never fixed sleeps.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::{Value, json};

use crate::support::cluster::{TestCluster, TestNamespace};

/// How long to wait for the agent to react (statuses, comments).
const AGENT_WAIT: Duration = Duration::from_secs(180);
const GITEA_INSTANCE: &str = "e2e";
const WEBHOOK_SECRET: &str = "e2e-webhook-secret";

/// The Gitea instance shared by the tests in this process.
#[derive(Clone)]
struct Gitea {
    url: String,
    token: String,
    user: String,
}

impl Gitea {
    /// Starts (or reuses) Gitea with `hack/gitea.sh up --name e2e`.
    fn shared() -> Result<Gitea> {
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

    async fn api(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value> {
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
    fn push_url(&self, repo: &str) -> String {
        let host = self.url.trim_start_matches("http://");
        format!(
            "http://{}:{}@{host}/{}/{repo}.git",
            self.user, self.token, self.user
        )
    }

    fn clone_url(&self, repo: &str) -> String {
        format!("{}/{}/{repo}.git", self.url, self.user)
    }

    /// Every status on a commit, oldest first.
    async fn statuses(&self, repo: &str, sha: &str) -> Result<Vec<(String, String, String)>> {
        let statuses = self
            .api(
                reqwest::Method::GET,
                &format!(
                    "/repos/{}/{repo}/commits/{sha}/statuses?limit=50&sort=oldest",
                    self.user
                ),
                None,
            )
            .await?;
        let mut out: Vec<(i64, String, String, String)> = statuses
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|status| {
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
            })
            .collect();
        out.sort();
        Ok(out
            .into_iter()
            .map(|(_, context, state, description)| (context, state, description))
            .collect())
    }

    /// The latest state and description per context.
    async fn latest_statuses(
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

    async fn comments(&self, repo: &str, pull: u64) -> Result<Vec<(u64, String)>> {
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
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/gitea.sh");
    let mut child = Command::new(&script)
        .args(["up", "--name", GITEA_INSTANCE])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", script.display()))?;
    let stderr = child.stderr.take().expect("stderr is piped");
    let relay = std::thread::spawn(move || {
        let mut kept = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
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
        bail!("`hack/gitea.sh up --name {GITEA_INSTANCE}` failed ({status}):\n{err_output}");
    }
    let lines: Vec<&str> = stdout.lines().collect();
    let [url, token_file] = lines.as_slice() else {
        bail!("`hack/gitea.sh up` printed {stdout:?}, expected the base URL and the token file");
    };
    Ok((url.trim().to_owned(), PathBuf::from(token_file.trim())))
}

/// A local clone to commit and push from, with the `git` CLI.
struct WorkTree {
    dir: tempfile::TempDir,
    push_url: String,
}

impl WorkTree {
    fn new(push_url: String) -> Result<WorkTree> {
        let tree = WorkTree {
            dir: tempfile::tempdir()?,
            push_url,
        };
        tree.git(&["init", "-q", "-b", "main"])?;
        tree.git(&["config", "user.name", "e2e"])?;
        tree.git(&["config", "user.email", "e2e@example.invalid"])?;
        Ok(tree)
    }

    fn git(&self, args: &[&str]) -> Result<String> {
        let output = Command::new("git")
            .args(args)
            .current_dir(self.dir.path())
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .context("running git")?;
        // The push URL holds the token: never echo arguments into the error.
        ensure!(
            output.status.success(),
            "git {} failed: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&output.stderr).replace(&self.push_url, "<push url>")
        );
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    fn write(&self, path: &str, contents: &str) -> Result<()> {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("files live in directories"))?;
        std::fs::write(full, contents)?;
        Ok(())
    }

    /// Commits everything and pushes HEAD to `branch`; returns the commit id.
    fn commit_and_push(&self, message: &str, branch: &str) -> Result<String> {
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "-m", message])?;
        let push_url = self.push_url.clone();
        self.git(&[
            "push",
            "-q",
            "-f",
            &push_url,
            &format!("HEAD:refs/heads/{branch}"),
        ])?;
        self.git(&["rev-parse", "HEAD"])
    }
}

fn config_map_app(name: &str, namespace: &str, color: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
    - name: settings
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}-settings
            data:
              color: {color}
"
    )
}

fn broken_app(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
    - name: thing
      type: no-such-component-type
      properties: {{}}
"
    )
}

/// The running agent process; stopped with SIGTERM when dropped.
struct AgentProcess {
    child: Child,
    base: String,
}

impl AgentProcess {
    fn start(config: &Path, env: &[(&str, &str)], port: u16) -> Result<AgentProcess> {
        let log = std::fs::File::create(config.with_extension("log"))?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_driftless"));
        command
            .args(["agent", "--config"])
            .arg(config)
            .args(["--log-format", "text"])
            .env("RUST_LOG", "info,agent=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().context("starting driftless agent")?;
        Ok(AgentProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
        })
    }

    /// Sends SIGTERM and waits for a clean exit.
    fn stop(mut self) -> Result<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            ensure!(
                Instant::now() < deadline,
                "the agent did not stop within 60s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `check` until it returns `Some`, at most `AGENT_WAIT`.
async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + AGENT_WAIT;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(error) => last_error = Some(error),
        }
        if Instant::now() >= deadline {
            bail!("timed out after {AGENT_WAIT:?} waiting for {what} (last error: {last_error:?})");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_deploys_previews_and_verifies_webhooks() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "agent").await?;
    let ns = namespace.name.as_str();
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let repo = format!("apps-{}-{nanos:x}", std::process::id());
    // The source name is the tracker's source identity: unique, so apps of earlier runs (in
    // namespaces long deleted) are never this run's orphans.
    let source = format!("e2e-{:x}", nanos & 0xffff_ffff);
    gitea
        .api(
            reqwest::Method::POST,
            "/user/repos",
            Some(json!({"name": repo, "private": true, "default_branch": "main"})),
        )
        .await?;

    // The first commit: one good app and one broken one.
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write("apps/good.yaml", &config_map_app("good", ns, "blue"))?;
    tree.write("apps/broken.yaml", &broken_app("broken", ns))?;
    let first = tree.commit_and_push("two apps, one broken", "main")?;

    let port = free_port()?;
    let work = tempfile::tempdir()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: {source}
    url: {clone_url}
    branch: main
    paths: {{ include: ['apps/**'] }}
    pollInterval: 1h
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
  webhookSecret: {{ env: E2E_WEBHOOK_SECRET }}
cacheDir: {cache}
",
            clone_url = gitea.clone_url(&repo),
            kubeconfig = cluster.kubeconfig.display(),
            gitea_url = gitea.url,
            cache = work.path().join("cache").display(),
        ),
    )?;
    let agent = AgentProcess::start(
        &config,
        &[
            ("E2E_GIT_TOKEN", &gitea.token),
            ("E2E_FORGE_TOKEN", &gitea.token),
            ("E2E_WEBHOOK_SECRET", WEBHOOK_SECRET),
        ],
        port,
    )?;

    // Gitea delivers push and pull-request events to the agent, signed with the secret.
    gitea
        .api(
            reqwest::Method::POST,
            &format!("/repos/{}/{repo}/hooks", gitea.user),
            Some(json!({
                "type": "gitea",
                "active": true,
                "events": ["push", "pull_request"],
                "config": {
                    "url": format!("{}/webhooks/gitea", agent.base),
                    "content_type": "json",
                    "secret": WEBHOOK_SECRET,
                },
            })),
        )
        .await?;

    // Deploy of the first commit: the good app succeeds, the broken one fails with its error.
    let good_context = format!("driftless/{ns}/good");
    let broken_context = format!("driftless/{ns}/broken");
    let latest = wait_for("final statuses on the first commit", || async {
        let latest = gitea.latest_statuses(&repo, &first).await?;
        let done = |context: &str| {
            latest
                .get(context)
                .is_some_and(|(state, _)| state != "pending")
        };
        Ok((done("driftless") && done(&good_context) && done(&broken_context)).then_some(latest))
    })
    .await?;
    assert_eq!(latest[&good_context].0, "success", "{latest:?}");
    assert_eq!(latest[&broken_context].0, "failure", "{latest:?}");
    assert!(
        latest[&broken_context].1.contains("no-such-component-type"),
        "the failure names the error: {latest:?}"
    );
    assert_eq!(latest["driftless"].0, "failure", "{latest:?}");
    let history = gitea.statuses(&repo, &first).await?;
    let good_states: Vec<&str> = history
        .iter()
        .filter(|(context, _, _)| *context == good_context)
        .map(|(_, state, _)| state.as_str())
        .collect();
    assert_eq!(good_states.first(), Some(&"pending"), "{history:?}");
    assert_eq!(good_states.last(), Some(&"success"), "{history:?}");
    for (_, _, description) in &history {
        assert!(description.chars().count() <= 140);
        assert!(
            !description.contains(&gitea.token),
            "a status leaked the token"
        );
    }

    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let deployed = config_maps
        .get("good-settings")
        .await
        .context("the good app was deployed")?;
    assert_eq!(
        deployed
            .data
            .as_ref()
            .and_then(|data| data.get("color"))
            .map(String::as_str),
        Some("blue")
    );

    // The plan page the statuses link to.
    let page = reqwest::get(format!("{}/plans/{first}", agent.base)).await?;
    assert_eq!(page.status(), 200);
    let html = page.text().await?;
    assert!(html.contains(&format!("{ns}/good")), "{html}");
    assert!(
        !html.contains(&gitea.token),
        "the plan page leaked the token"
    );

    // A webhook with a bad signature is refused.
    let body = json!({"repository": {"full_name": format!("{}/{repo}", gitea.user)}}).to_string();
    let rejected = reqwest::Client::new()
        .post(format!("{}/webhooks/gitea", agent.base))
        .header("x-gitea-event", "push")
        .header("x-gitea-signature", "00".repeat(32))
        .body(body)
        .send()
        .await?;
    assert_eq!(rejected.status(), 401);

    // A pull request: a plan comment and a status on its head; nothing changes in the cluster.
    let feature = WorkTree::new(gitea.push_url(&repo))?;
    feature.git(&["fetch", "-q", &gitea.push_url(&repo), "main"])?;
    feature.git(&["reset", "-q", "--hard", "FETCH_HEAD"])?;
    feature.write("apps/good.yaml", &config_map_app("good", ns, "green"))?;
    let head = feature.commit_and_push("green", "feature")?;
    // Gitea records pushed branches asynchronously; a pull request needs the branch recorded.
    wait_for("Gitea to record the feature branch", || async {
        let path = format!("/repos/{}/{repo}/branches/feature", gitea.user);
        Ok(gitea
            .api(reqwest::Method::GET, &path, None)
            .await
            .ok()
            .map(drop))
    })
    .await?;
    let pull = gitea
        .api(
            reqwest::Method::POST,
            &format!("/repos/{}/{repo}/pulls", gitea.user),
            Some(json!({"head": "feature", "base": "main", "title": "make it green"})),
        )
        .await?;
    let pull_number = pull["number"].as_u64().context("pull request number")?;
    let marker = format!("<!-- driftless:plan source={source} -->");
    let marker = marker.as_str();
    let (comment_id, body) = wait_for("the plan comment", || async {
        let comments = gitea.comments(&repo, pull_number).await?;
        Ok(comments
            .into_iter()
            .find(|(_, body)| body.starts_with(marker) && body.contains("green")))
    })
    .await?;
    assert!(!body.contains(&gitea.token), "the comment leaked the token");
    wait_for("a status on the pull request head", || async {
        let latest = gitea.latest_statuses(&repo, &head).await?;
        Ok(latest
            .get("driftless")
            .filter(|(state, _)| state != "pending")
            .cloned())
    })
    .await?;
    let still = config_maps.get("good-settings").await?;
    assert_eq!(
        still
            .data
            .as_ref()
            .and_then(|data| data.get("color"))
            .map(String::as_str),
        Some("blue"),
        "a preview must not change the cluster"
    );

    // A second push to the pull request edits the same comment.
    feature.write("apps/good.yaml", &config_map_app("good", ns, "purple"))?;
    let second_head = feature.commit_and_push("purple", "feature")?;
    wait_for("the plan comment to be updated in place", || async {
        let comments = gitea.comments(&repo, pull_number).await?;
        let ours: Vec<&(u64, String)> = comments
            .iter()
            .filter(|(_, body)| body.starts_with(marker))
            .collect();
        ensure!(ours.len() <= 1, "more than one plan comment: {ours:?}");
        Ok(ours
            .first()
            .filter(|(id, body)| *id == comment_id && body.contains("purple"))
            .map(|_| ()))
    })
    .await?;
    wait_for("a status on the new pull request head", || async {
        let latest = gitea.latest_statuses(&repo, &second_head).await?;
        Ok(latest
            .get("driftless")
            .filter(|(state, _)| state != "pending")
            .cloned())
    })
    .await?;

    // A push to main is deployed at once: the poll interval is an hour, so only Gitea's signed
    // webhook can have triggered this poll.
    tree.write("apps/broken.yaml", &config_map_app("broken", ns, "red"))?;
    let fixed = tree.commit_and_push("fix the broken app", "main")?;
    let latest = wait_for("statuses on the fixed commit", || async {
        let latest = gitea.latest_statuses(&repo, &fixed).await?;
        Ok(latest
            .get("driftless")
            .filter(|(state, _)| state != "pending")
            .map(|_| latest.clone()))
    })
    .await?;
    assert_eq!(latest["driftless"].0, "success", "{latest:?}");
    assert_eq!(latest[&broken_context].0, "success", "{latest:?}");

    let metrics = reqwest::get(format!("{}/metrics", agent.base))
        .await?
        .text()
        .await?;
    assert!(
        metrics.contains(&format!("driftless_apps{{source=\"{source}\"}} 2")),
        "{metrics}"
    );
    assert!(!metrics.contains(&gitea.token));

    let status = agent.stop()?;
    let log = std::fs::read_to_string(config.with_extension("log"))?;
    assert!(
        status.success(),
        "the agent exited with {status} after SIGTERM; log:\n{log}"
    );
    assert!(
        !log.contains(&gitea.token),
        "the agent's log leaked the token"
    );
    Ok(())
}

/// Drift: a live object changed by hand is reported by the scheduled drift check, as a
/// `driftless/drift` failure status on the deployed commit and as the `driftless_app_drifted`
/// metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_is_reported_as_status_and_metric() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "drift").await?;
    let ns = namespace.name.as_str();
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let repo = format!("drift-{}-{nanos:x}", std::process::id());
    let source = format!("drift-{:x}", nanos & 0xffff_ffff);
    gitea
        .api(
            reqwest::Method::POST,
            "/user/repos",
            Some(json!({"name": repo, "default_branch": "main"})),
        )
        .await?;
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write("apps/app.yaml", &config_map_app("app", ns, "blue"))?;
    let commit = tree.commit_and_push("one app", "main")?;

    let port = free_port()?;
    let work = tempfile::tempdir()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: {source}
    url: {clone_url}
    pollInterval: 1h
clusters:
  - name: local
    kubeconfig: {kubeconfig}
forge: {{ kind: gitea, baseUrl: '{gitea_url}', token: {{ env: E2E_FORGE_TOKEN }} }}
drift: {{ schedule: '*/2 * * * * *', mode: report }}
server: {{ listen: '127.0.0.1:{port}' }}
cacheDir: {cache}
",
            clone_url = gitea.clone_url(&repo),
            kubeconfig = cluster.kubeconfig.display(),
            gitea_url = gitea.url,
            cache = work.path().join("cache").display(),
        ),
    )?;
    let agent = AgentProcess::start(&config, &[("E2E_FORGE_TOKEN", &gitea.token)], port)?;
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    wait_for("the app to be deployed", || async {
        Ok(config_maps.get_opt("app-settings").await?.map(drop))
    })
    .await?;
    wait_for("a no-drift status", || async {
        let latest = gitea.latest_statuses(&repo, &commit).await?;
        Ok(latest
            .get("driftless/drift")
            .filter(|(state, _)| state == "success")
            .cloned())
    })
    .await?;

    let patch = json!({"data": {"color": "hacked"}});
    config_maps
        .patch(
            "app-settings",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
    let (_, description) = wait_for("a drift status", || async {
        let latest = gitea.latest_statuses(&repo, &commit).await?;
        Ok(latest
            .get("driftless/drift")
            .filter(|(state, _)| state == "failure")
            .cloned())
    })
    .await?;
    assert!(description.contains(&format!("{ns}/app")), "{description}");
    let metric =
        format!("driftless_app_drifted{{source=\"{source}\",namespace=\"{ns}\",app=\"app\"}} 1");
    wait_for("the drift metric", || async {
        let text = reqwest::get(format!("{}/metrics", agent.base))
            .await?
            .text()
            .await?;
        Ok(text.contains(&metric).then_some(()))
    })
    .await?;
    let status = agent.stop()?;
    ensure!(
        status.success(),
        "the agent exited with {status} after SIGTERM"
    );
    Ok(())
}
