//! Test support for driving `driftless agent`: a git work tree to commit (and push) from, the
//! agent process with its log, bounded polling, and free ports.

use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

/// The plan pages' bearer token: every agent started here gets it as `E2E_API_TOKEN`, for a
/// config's `server.apiToken: { env: E2E_API_TOKEN }`.
pub const API_TOKEN: &str = "e2e-plan-page-token-8f3a1c";

/// How long to wait for the agent to react (statuses, comments, objects).
pub const AGENT_WAIT: Duration = Duration::from_secs(180);

/// A local clone to commit and push from, with the `git` CLI.
pub struct WorkTree {
    pub dir: tempfile::TempDir,
    pub push_url: String,
}

impl WorkTree {
    pub fn new(push_url: String) -> Result<WorkTree> {
        let tree = WorkTree {
            dir: tempfile::tempdir()?,
            push_url,
        };
        tree.git(&["init", "-q", "-b", "main"])?;
        tree.git(&["config", "user.name", "e2e"])?;
        tree.git(&["config", "user.email", "e2e@example.invalid"])?;
        Ok(tree)
    }

    pub fn git(&self, args: &[&str]) -> Result<String> {
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

    pub fn write(&self, path: &str, contents: &str) -> Result<()> {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("files live in directories"))?;
        std::fs::write(full, contents)?;
        Ok(())
    }

    /// Commits everything; returns the commit id.
    pub fn commit_all(&self, message: &str) -> Result<String> {
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "-m", message])?;
        self.git(&["rev-parse", "HEAD"])
    }

    /// Commits everything and pushes HEAD to `branch`; returns the commit id.
    pub fn commit_and_push(&self, message: &str, branch: &str) -> Result<String> {
        let commit = self.commit_all(message)?;
        let push_url = self.push_url.clone();
        self.git(&[
            "push",
            "-q",
            "-f",
            &push_url,
            &format!("HEAD:refs/heads/{branch}"),
        ])?;
        Ok(commit)
    }
}

/// The running agent process; stopped with SIGTERM when dropped.
pub struct AgentProcess {
    child: Child,
    /// The agent's HTTP base URL.
    pub base: String,
    log: PathBuf,
}

impl AgentProcess {
    pub fn start(config: &Path, env: &[(&str, &str)], port: u16) -> Result<AgentProcess> {
        let log = std::fs::File::create(config.with_extension("log"))?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_driftless"));
        command
            .args(["agent", "--config"])
            .arg(config)
            .args(["--log-format", "text"])
            .env("RUST_LOG", "info,agent=debug")
            .env("E2E_API_TOKEN", API_TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (name, value) in env {
            command.env(name, value);
        }
        Self::spawn(command, config.with_extension("log"), port)
    }

    /// Spawns `command` (a `driftless agent` whose stderr goes to `log`) serving on `port`.
    pub fn spawn(mut command: Command, log: PathBuf, port: u16) -> Result<AgentProcess> {
        let child = command.spawn().context("starting driftless agent")?;
        Ok(AgentProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        })
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> Result<String> {
        Ok(reqwest::get(format!("{}/metrics", self.base))
            .await?
            .text()
            .await?)
    }

    /// The plan page of `commit`, once the agent has one (a deploy or preview finished),
    /// read with the bearer token.
    pub async fn plan_page(&self, commit: &str) -> Result<Option<String>> {
        let response = reqwest::Client::new()
            .get(format!("{}/plans/{commit}", self.base))
            .bearer_auth(API_TOKEN)
            .send()
            .await?;
        Ok(if response.status() == 200 {
            Some(response.text().await?)
        } else {
            None
        })
    }

    /// The agent's log so far.
    pub fn log_text(&self) -> Result<String> {
        std::fs::read_to_string(&self.log)
            .with_context(|| format!("reading {}", self.log.display()))
    }

    /// Stops the agent with SIGTERM, checks that it exited cleanly and that its log holds none
    /// of `secrets`, and returns the log.
    pub fn stop_checked(self, secrets: &[&str]) -> Result<String> {
        let log_path = self.log.clone();
        let status = self.stop()?;
        let log = std::fs::read_to_string(&log_path)?;
        ensure!(
            status.success(),
            "the agent exited with {status} after SIGTERM; log:\n{log}"
        );
        for secret in secrets {
            ensure!(!log.contains(secret), "the agent's log leaked a secret");
        }
        Ok(log)
    }

    /// SIGKILLs the agent at once (a crash: nothing is finished or flushed) and reaps it.
    pub fn kill(mut self) -> Result<()> {
        self.child.kill().context("sending SIGKILL to the agent")?;
        self.child.wait().context("reaping the killed agent")?;
        Ok(())
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn stop(mut self) -> Result<std::process::ExitStatus> {
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
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> Result<T>
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

pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
