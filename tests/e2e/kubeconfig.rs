//! `plan` finds its cluster as kubectl does: `--kubeconfig`, else `$KUBECONFIG` (a list, missing
//! files skipped), else `~/.kube/config`; none gives an offline plan that says so, `--offline`
//! forces one, and a named kubeconfig that cannot be read is an error.
//!
//! The discriminator: after an apply, a live plan of the same repository has no changes (exit
//! 0), while an offline plan shows every object as a create (exit 2).

use std::path::Path;
use std::process::Output;

use anyhow::{Context, Result, ensure};

use crate::support::apps::config_map_app;
use crate::support::cli::{Repo, driftless, expect_success};
use crate::support::cluster::{TestCluster, TestNamespace};

/// `driftless plan REPO` with exactly this `$KUBECONFIG` (or none) and `$HOME`.
fn plan_with_env(
    repo: &Repo,
    extra: &[&str],
    kubeconfig: Option<&str>,
    home: &Path,
) -> Result<Output> {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"));
    command
        .args([
            "plan",
            repo.path_str()?,
            "--tracker-namespace",
            &repo.tracker_namespace,
        ])
        .args(extra)
        .env("HOME", home)
        .env_remove("KUBECONFIG");
    if let Some(kubeconfig) = kubeconfig {
        command.env("KUBECONFIG", kubeconfig);
    }
    command.output().context("running driftless plan")
}

fn describe(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_in_the_environment_alone_makes_plan_live() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "kubeconfig-order").await?;
    let repo = Repo::new(&namespace)?;
    repo.write_app("web", &config_map_app("web", &namespace.name, "blue"))?;
    let applied = driftless(
        &cluster,
        &[
            "apply",
            repo.path_str()?,
            "--yes",
            "--tracker-namespace",
            &repo.tracker_namespace,
        ],
    )?;
    expect_success(&applied, "apply")?;

    let home = tempfile::tempdir()?;
    let kubeconfig = cluster
        .kubeconfig
        .to_str()
        .context("a UTF-8 kubeconfig path")?;
    // A list as kubectl reads it: the missing first file is skipped.
    let list = format!("{}:{kubeconfig}", home.path().join("missing").display());
    let live = plan_with_env(&repo, &[], Some(&list), home.path())?;
    ensure!(
        live.status.code() == Some(0),
        "a live plan after apply has no changes: {}",
        describe(&live)
    );
    ensure!(
        !String::from_utf8_lossy(&live.stdout).contains("empty cluster"),
        "{}",
        describe(&live)
    );

    // Nothing anywhere: offline, and it says so.
    let offline = plan_with_env(&repo, &[], None, home.path())?;
    ensure!(offline.status.code() == Some(2), "{}", describe(&offline));
    ensure!(
        String::from_utf8_lossy(&offline.stdout).contains("empty cluster"),
        "{}",
        describe(&offline)
    );

    // ~/.kube/config, and --context naming its current context.
    std::fs::create_dir_all(home.path().join(".kube"))?;
    std::fs::copy(&cluster.kubeconfig, home.path().join(".kube/config"))?;
    let from_home = plan_with_env(&repo, &[], None, home.path())?;
    ensure!(
        from_home.status.code() == Some(0),
        "{}",
        describe(&from_home)
    );

    // --offline wins over every kubeconfig.
    let forced = plan_with_env(&repo, &["--offline"], Some(kubeconfig), home.path())?;
    ensure!(forced.status.code() == Some(2), "{}", describe(&forced));
    ensure!(
        String::from_utf8_lossy(&forced.stderr).contains("--offline"),
        "{}",
        describe(&forced)
    );

    // A named kubeconfig that cannot be read is an error, never an offline plan.
    let broken = home.path().join("broken");
    std::fs::write(&broken, "clusters: [unterminated")?;
    let broken = broken.to_str().context("UTF-8")?;
    let failed = plan_with_env(&repo, &[], Some(broken), home.path())?;
    ensure!(failed.status.code() == Some(1), "{}", describe(&failed));
    ensure!(
        String::from_utf8_lossy(&failed.stderr).contains("$KUBECONFIG"),
        "{}",
        describe(&failed)
    );
    ensure!(failed.stdout.is_empty(), "{}", describe(&failed));
    Ok(())
}
