//! `hack/demo.sh`, as its printout tells a new user to use it: `up` (two clusters of its own, a
//! Gitea of its own with examples/repo, the agent, built already: `DRIFTLESS_BIN`), one pull
//! request through Gitea's API that changes a replica count, the agent's plan comment on it,
//! then `down`, after which no process of the demo is left.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};
use base64::Engine as _;
use serde_json::json;

use crate::support::agent::wait_for;
use crate::support::gitea::Gitea;

const NAME: &str = "e2e-demo";

fn demo_sh(command: &str) -> Result<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/demo.sh");
    let output = Command::new(script)
        .args([command, "--name", NAME])
        .env("DRIFTLESS_BIN", env!("CARGO_BIN_EXE_driftless"))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running hack/demo.sh {command}"))?;
    if !output.status.success() {
        bail!(
            "hack/demo.sh {command} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs `hack/demo.sh down` if the test ends before it did.
struct Down {
    done: bool,
}

impl Drop for Down {
    fn drop(&mut self) {
        if !self.done
            && let Err(error) = demo_sh("down")
        {
            eprintln!("{error:#}");
        }
    }
}

/// Processes whose command line names one of the demo's directories (its clusters, its Gitea,
/// its agent's config).
fn demo_processes() -> Result<Vec<String>> {
    let marks = [
        format!("clusters/{NAME}-local/"),
        format!("clusters/{NAME}-staging/"),
        format!("gitea/{NAME}/"),
        format!("demo/{NAME}/"),
    ];
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let path = entry?.path();
        let Ok(cmdline) = std::fs::read(path.join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if marks.iter().any(|mark| cmdline.contains(mark.as_str())) {
            found.push(format!("{}: {cmdline}", path.display()));
        }
    }
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_comes_up_previews_a_pull_request_and_goes_down_leaving_nothing() -> Result<()> {
    let mut down = Down { done: false };
    let summary = demo_sh("up")?;
    for wanted in [
        "Gitea repository",
        "Three things to try",
        "hack/demo.sh down",
    ] {
        ensure!(
            summary.contains(wanted),
            "the summary lacks {wanted:?}:\n{summary}"
        );
    }
    let env: std::collections::BTreeMap<String, String> = demo_sh("status")?
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    let get = |key: &str| {
        env.get(key)
            .cloned()
            .with_context(|| format!("{key} missing from `hack/demo.sh status`: {env:?}"))
    };
    let token = std::fs::read_to_string(get("GITEA_TOKEN_FILE")?)?
        .trim()
        .to_owned();
    let gitea = Gitea {
        url: get("GITEA_URL")?,
        token,
        user: get("DEMO_USER")?,
    };
    let repo = "examples";
    let owner = gitea.user.clone();

    // A pull request that raises storefront-web's replicas, made through Gitea's API.
    let path = "apps/team-a/storefront.yaml";
    let file = gitea
        .api(
            reqwest::Method::GET,
            &format!("/repos/{owner}/{repo}/contents/{path}"),
            None,
        )
        .await?;
    let base64 = base64::engine::general_purpose::STANDARD;
    let text = String::from_utf8(
        base64.decode(
            file["content"]
                .as_str()
                .context("no content")?
                .replace('\n', ""),
        )?,
    )?;
    ensure!(text.contains("replicas: 3"), "{text}");
    let changed = text.replacen("replicas: 3", "replicas: 5", 1);
    gitea
        .api(
            reqwest::Method::PUT,
            &format!("/repos/{owner}/{repo}/contents/{path}"),
            Some(json!({
                "content": base64.encode(changed),
                "sha": file["sha"],
                "branch": "main",
                "new_branch": "more-replicas",
                "message": "storefront-web: 5 replicas",
            })),
        )
        .await?;
    let pull = gitea
        .api(
            reqwest::Method::POST,
            &format!("/repos/{owner}/{repo}/pulls"),
            Some(json!({"head": "more-replicas", "base": "main", "title": "More replicas"})),
        )
        .await?;
    let number = pull["number"].as_u64().context("no pull request number")?;
    let comment = wait_for("the plan comment on the pull request", || async {
        let comments = gitea.comments(repo, number).await?;
        Ok(comments
            .into_iter()
            .map(|(_, body)| body)
            .find(|body| body.contains("storefront-web")))
    })
    .await
    .with_context(|| {
        std::fs::read_to_string(get("AGENT_LOG").unwrap_or_default())
            .map(|log| format!("agent log:\n{log}"))
            .unwrap_or_default()
    })?;
    ensure!(
        comment.contains("spec.replicas") && comment.contains("team-a/storefront"),
        "the comment does not show the replica change:\n{comment}"
    );

    down.done = true;
    demo_sh("down")?;
    let left = demo_processes()?;
    ensure!(
        left.is_empty(),
        "processes left after `hack/demo.sh down`:\n{left:#?}"
    );
    Ok(())
}
