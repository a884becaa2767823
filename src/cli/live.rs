//! The live-cluster path of `driftless plan` and `driftless apply`: connect with the kubeconfig
//! and context given, plan against what is live, and (for `apply`) confirm and apply. The work
//! itself is `agent::live`; this file turns arguments into options and prints results.

use std::fmt::Write as _;
use std::io::{BufRead as _, IsTerminal as _};
use std::path::Path;
use std::time::Duration;

use agent::apply::{ApplyOptions, ApplyOutcome};
use agent::cluster::{Cluster, ClusterOptions};
use agent::live::{
    LiveOptions, LivePlan, apply_live, plan_live, policies_from_sources, read_health,
};
use agent::planner::PlanOptions;
use agent::report::{DiagnosticStyle, plan_human, render_diagnostics};
use anyhow::Context as _;

use super::repo::{RenderedRepo, render_repo, report_render_diagnostics};
use super::terminal::{write_stderr, write_stdout};
use super::{ApplyArgs, ClusterArgs, Outcome};

/// Plans a rendered repository against the cluster of `cluster_args` (which has a kubeconfig).
///
/// # Errors
///
/// The kubeconfig cannot be loaded or the async runtime not started. Cluster failures per
/// object are diagnostics in the plan.
pub fn plan(
    cluster_args: &ClusterArgs,
    path: &Path,
    repo: &RenderedRepo,
    style: DiagnosticStyle,
) -> anyhow::Result<LivePlan> {
    let runtime = runtime()?;
    let live_plan = runtime.block_on(async {
        let cluster = connect(cluster_args).await?;
        anyhow::Ok(plan_with(&cluster, cluster_args, path, repo).await)
    })?;
    report_cluster_diagnostics(&live_plan, repo, style);
    Ok(live_plan)
}

/// Draws on stderr the diagnostics the live plan added to the render's (cluster errors per
/// object, unreadable trackers, invalid policies): the render's own were drawn already.
fn report_cluster_diagnostics(live_plan: &LivePlan, repo: &RenderedRepo, style: DiagnosticStyle) {
    let rendered_count = |app: &analyzer::AppRef| {
        repo.output
            .apps
            .iter()
            .find(|rendered| &rendered.app == app)
            .map_or(0, |rendered| rendered.diagnostics.len())
    };
    let added = live_plan
        .plan
        .diagnostics
        .iter()
        .skip(repo.output.diagnostics.len())
        .chain(
            live_plan
                .plan
                .apps
                .iter()
                .flat_map(|app| app.diagnostics.iter().skip(rendered_count(&app.app))),
        );
    write_stderr(&render_diagnostics(added, &repo.sources, style));
}

/// `driftless apply`: plan, show, confirm, apply, report.
///
/// # Errors
///
/// The repository cannot be read, the kubeconfig not loaded, or the confirmation not read.
pub fn run(args: &ApplyArgs, style: DiagnosticStyle) -> anyhow::Result<Outcome> {
    let repo = render_repo(&args.path)?;
    report_render_diagnostics(&repo, style);
    let runtime = runtime()?;
    runtime.block_on(async {
        let cluster = connect(&args.cluster).await?;
        let live_plan = plan_with(&cluster, &args.cluster, &args.path, &repo).await;
        report_cluster_diagnostics(&live_plan, &repo, style);
        write_stdout(&plan_human(&live_plan.plan))?;
        // Without changes there is nothing to confirm; the apply then only brings the trackers
        // up to date (adoptions, entries of objects that left our ownership).
        if live_plan.plan.has_changes() && !args.yes && !confirm()? {
            write_stderr("apply cancelled\n");
            return Ok(Outcome::Blocked);
        }
        let options = live_options(&args.cluster, &args.path);
        let reports = apply_live(&cluster, &live_plan, &options).await;
        let mut text = String::from("\nApply results:\n");
        let mut failed = false;
        for report in &reports {
            for object in &report.objects {
                let _ = match &object.error {
                    None => writeln!(
                        text,
                        "  {} {} {}: ok",
                        report.app,
                        object.action.as_str(),
                        object.object
                    ),
                    Some(error) => writeln!(
                        text,
                        "  {} {} {}: error: {error}",
                        report.app,
                        object.action.as_str(),
                        object.object
                    ),
                };
            }
            let _ = match &report.outcome {
                ApplyOutcome::Applied if report.objects.is_empty() => {
                    writeln!(text, "app {}: up to date", report.app)
                }
                ApplyOutcome::Applied => writeln!(text, "app {}: applied", report.app),
                ApplyOutcome::Skipped(reason) => {
                    failed = true;
                    writeln!(text, "app {}: not applied: {reason}", report.app)
                }
                ApplyOutcome::Failed(reason) => {
                    failed = true;
                    writeln!(
                        text,
                        "app {}: apply stopped, nothing pruned: {reason}",
                        report.app
                    )
                }
            };
        }
        write_stdout(&text)?;
        let health = read_health(&cluster, &live_plan).await;
        write_stdout(&health_text(&health))?;
        Ok(if failed || live_plan.plan.has_errors() {
            Outcome::Blocked
        } else {
            Outcome::Success
        })
    })
}

async fn plan_with(
    cluster: &Cluster,
    cluster_args: &ClusterArgs,
    path: &Path,
    repo: &RenderedRepo,
) -> LivePlan {
    let policies = policies_from_sources(&repo.output, &repo.sources);
    let options = live_options(cluster_args, path);
    plan_live(cluster, &repo.output, &policies, None, &options).await
}

fn live_options(cluster_args: &ClusterArgs, path: &Path) -> LiveOptions {
    // Apps vanished from the source are deleted only when the whole repository was given: from
    // a single file, every other app of the repository would look vanished.
    let source = if path.is_dir() {
        std::fs::canonicalize(path)
            .ok()
            .map(|path| path.display().to_string())
    } else {
        None
    };
    LiveOptions {
        plan: PlanOptions {
            cluster: cluster_args.cluster_name.clone(),
            ..PlanOptions::default()
        },
        apply: ApplyOptions {
            source: cluster_args.source.clone().or(source),
            ..ApplyOptions::default()
        },
        tracker_namespace: cluster_args.tracker_namespace.clone(),
    }
}

async fn connect(cluster_args: &ClusterArgs) -> anyhow::Result<Cluster> {
    let kubeconfig = cluster_args
        .kubeconfig
        .as_deref()
        .context("a live plan needs --kubeconfig")?;
    let options = ClusterOptions {
        name: cluster_args.cluster_name.clone(),
        qps: cluster_args.qps,
        burst: cluster_args.burst,
        timeout: Duration::from_secs(cluster_args.timeout_seconds),
    };
    Ok(Cluster::connect(kubeconfig, cluster_args.context.as_deref(), &options).await?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Asks on stderr, reads one line from stdin. Without a terminal, nothing is confirmed.
fn confirm() -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        write_stderr(
            "not applying: stdin is not a terminal (pass --yes to apply without asking)\n",
        );
        return Ok(false);
    }
    write_stderr("Apply these changes? Only 'yes' is accepted: ");
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("reading the confirmation")?;
    Ok(answer.trim() == "yes")
}

fn health_text(
    health: &std::collections::BTreeMap<analyzer::AppRef, agent::health::Health>,
) -> String {
    let mut text = String::new();
    if health.is_empty() {
        return text;
    }
    text.push_str("\nHealth:\n");
    for (app, app_health) in health {
        let _ = if app_health.message.is_empty() {
            writeln!(text, "  {app}: {}", app_health.status.as_str())
        } else {
            writeln!(
                text,
                "  {app}: {} ({})",
                app_health.status.as_str(),
                app_health.message
            )
        };
    }
    text
}
