//! The live-cluster path of `driftless plan` and `driftless apply`: connect with the kubeconfig
//! and context given, plan against what is live, and (for `apply`) confirm and apply. The work
//! itself is `agent::sync`; this file turns arguments into options and prints results.

use std::fmt::Write as _;
use std::io::{BufRead as _, IsTerminal as _};
use std::path::Path;
use std::time::Duration;

use std::collections::BTreeMap;

use agent::apply::{AppApplyReport, ApplyOptions, ApplyOutcome};
use agent::cluster::{Cluster, ClusterOptions};
use agent::health::AppHealth;
use agent::live::{PlanInputs, plan_inputs};
use agent::plan::Plan;
use agent::planner::PlanOptions;
use agent::prune_guard::{Approval, Evidence, PassBudget};
use agent::report::{DiagnosticStyle, plan_human, render_diagnostics};
use agent::sync::{
    AppOutcome, Apply, ApplyHooks, Apps, FleetFuture, Gate, HealthAfter, LiveOptions, LivePlan,
    Mode, Orphans, ReadOnly, Synced, Target, WorkflowResult,
};
use agent::workflow::{Fleet, WorkflowPhase};
use analyzer::model::Application;
use analyzer::{AppRef, RenderOutput, SourceMap};
use anyhow::Context as _;

use super::repo::{RenderedRepo, analyze_repo_for, render_repo_for, report_render_diagnostics};
use super::terminal::{write_stderr, write_stdout};
use super::{ApplyArgs, ClusterArgs, Outcome};

/// Analyzes the repository at `path` for the cluster of `cluster_args` (which has a
/// kubeconfig) and plans it against that cluster.
///
/// # Errors
///
/// The kubeconfig cannot be loaded, the repository not read, or the async runtime not started.
/// Cluster failures per object are diagnostics in the plan.
pub fn plan(
    cluster_args: &ClusterArgs,
    path: &Path,
    style: DiagnosticStyle,
) -> anyhow::Result<(RenderedRepo, Plan)> {
    let runtime = runtime()?;
    runtime.block_on(async {
        let cluster = connect(cluster_args).await?;
        let version = cluster_version(&cluster).await;
        let mut repo = analyze_repo_for(path, version)?;
        report_render_diagnostics(&repo, style);
        tracing::info!(rss = %memory(), "analyzed");
        let inputs = plan_inputs(&repo.output);
        let counts = RenderCounts::of(&repo.output);
        let synced = sync_repo(
            cluster_args,
            path,
            (&mut repo.output, &repo.sources),
            inputs,
            Mode::Plan(ReadOnly::new(&cluster)),
            false,
        )
        .await;
        // For `hack/scale.sh` (with -v): a plan's reads must not grow with unchanged apps.
        tracing::info!(requests = cluster.requests(), rss = %memory(), "planned against the cluster");
        report_cluster_diagnostics(&synced.plan, &counts, &repo.sources, style);
        anyhow::Ok((repo, synced.plan))
    })
}

/// The cluster's version for `context.clusterVersion`; when `/version` cannot be read, the
/// render keeps its default (the plan then reports the cluster's errors per object).
async fn cluster_version(cluster: &Cluster) -> Option<analyzer::ClusterVersion> {
    match agent::observe::cluster_version(cluster).await {
        Ok(version) => Some(version),
        Err(error) => {
            tracing::warn!(%error, "rendering for the default Kubernetes version");
            None
        }
    }
}

/// How many diagnostics the render drew, outside apps and per app (only apps with some), so the
/// plan's own can be told apart from them.
struct RenderCounts {
    outside_apps: usize,
    per_app: BTreeMap<AppRef, usize>,
}

impl RenderCounts {
    fn of(output: &RenderOutput) -> Self {
        RenderCounts {
            outside_apps: output.diagnostics.len(),
            per_app: output
                .apps
                .iter()
                .filter(|rendered| !rendered.diagnostics.is_empty())
                .map(|rendered| (rendered.app.clone(), rendered.diagnostics.len()))
                .collect(),
        }
    }
}

/// Draws on stderr the diagnostics the live plan added to the render's (cluster errors per
/// object, unreadable trackers, invalid policies): the render's own were drawn already.
fn report_cluster_diagnostics(
    plan: &Plan,
    counts: &RenderCounts,
    sources: &SourceMap,
    style: DiagnosticStyle,
) {
    let rendered_count = |app: &AppRef| counts.per_app.get(app).copied().unwrap_or(0);
    let added = plan.diagnostics.iter().skip(counts.outside_apps).chain(
        plan.apps
            .iter()
            .flat_map(|app| app.diagnostics.iter().skip(rendered_count(&app.app))),
    );
    write_stderr(&render_diagnostics(added, sources, style));
}

/// `driftless apply`: plan, show, confirm, apply, report.
///
/// # Errors
///
/// The repository cannot be read, the kubeconfig not loaded, a `--cluster` not connected, or
/// the confirmation not read.
pub fn run(args: &ApplyArgs, style: DiagnosticStyle) -> anyhow::Result<Outcome> {
    let runtime = runtime()?;
    runtime.block_on(async {
        let cluster = connect(&args.cluster).await?;
        let version = cluster_version(&cluster).await;
        let mut repo = render_repo_for(&args.path, version)?;
        report_render_diagnostics(&repo, style);
        tracing::info!(rss = %memory(), "rendered");
        let mut inputs = plan_inputs(&repo.output);
        let counts = RenderCounts::of(&repo.output);
        let workflow_apps = std::mem::take(&mut inputs.workflows);
        // The other clusters are connected before anything is planned: a `--cluster` that
        // cannot be used stops the command before it writes.
        let fleet = if workflow_apps.is_empty() {
            None
        } else {
            Some(fleet(args, &workflow_apps).await?)
        };
        let mut hooks = ConfirmedApply {
            args,
            counts: &counts,
            sources: &repo.sources,
            style,
            fleet,
            error: None,
        };
        let apply = Apply {
            cluster: &cluster,
            workflows: &workflow_apps,
            workflow_wait: Duration::from_secs(args.workflow_wait),
            hooks: &mut hooks,
            health: HealthAfter::Read,
        };
        let synced = sync_repo(
            &args.cluster,
            &args.path,
            (&mut repo.output, &repo.sources),
            inputs,
            Mode::Apply(apply),
            args.approve_prune,
        )
        .await;
        if let Some(error) = hooks.error {
            return Err(error);
        }
        if synced.stopped {
            return Ok(Outcome::Blocked);
        }
        tracing::info!(requests = cluster.requests(), rss = %memory(), "applied");
        let failed = write_results(&synced)?;
        Ok(if failed || synced.plan.has_errors() {
            Outcome::Blocked
        } else {
            Outcome::Success
        })
    })
}

/// Writes an apply's results: each app's apply or workflow, then the apps' health. Returns
/// whether any app failed.
fn write_results(synced: &Synced) -> anyhow::Result<bool> {
    let mut text = String::from("\nApply results:\n");
    let whole = synced.apps.iter().filter_map(|app| match &app.outcome {
        AppOutcome::Applied(report) => Some(report),
        _ => None,
    });
    let mut failed = apply_results_text(whole, None, &mut text);
    let workflows: Vec<&WorkflowResult> = synced.workflow_results().collect();
    if !workflows.is_empty() {
        failed |= workflow_text(&workflows, &mut text);
    }
    write_stdout(&text)?;
    let health: BTreeMap<&AppRef, &AppHealth> = synced
        .apps
        .iter()
        .filter_map(|app| app.health.as_ref().map(|health| (&app.app, health)))
        .collect();
    write_stdout(&health_text(&health))?;
    Ok(failed)
}

/// The apply's gate: shows the plan, checks its digest when one is given, and asks.
struct ConfirmedApply<'a> {
    args: &'a ApplyArgs,
    counts: &'a RenderCounts,
    sources: &'a SourceMap,
    style: DiagnosticStyle,
    fleet: Option<Fleet>,
    /// Why the gate could not finish (stdout closed, the answer unreadable).
    error: Option<anyhow::Error>,
}

impl ConfirmedApply<'_> {
    fn proceed(&mut self, live_plan: &LivePlan) -> anyhow::Result<bool> {
        let plan = &live_plan.plan;
        report_cluster_diagnostics(plan, self.counts, self.sources, self.style);
        write_stdout(&plan_human(plan))?;
        tracing::info!(rss = %memory(), "plan written");
        if let Some(expected) = &self.args.plan_digest {
            let digest = agent::review::digest::plan_digest(plan).unwrap_or_default();
            if !agent::review::digest::matches(&digest, expected) {
                write_stderr(&format!(
                    "the plan's digest is {digest}, not {expected}: the cluster or the repository changed since that plan; nothing was applied (review the plan above and run again with its digest)\n"
                ));
                return Ok(false);
            }
        }
        // Without changes there is nothing to confirm; the apply then only brings the trackers
        // up to date (adoptions, entries of objects that left our ownership).
        if plan.has_changes() && !self.args.yes && !confirm()? {
            write_stderr("apply cancelled\n");
            return Ok(false);
        }
        Ok(true)
    }
}

impl ApplyHooks for ConfirmedApply<'_> {
    fn gate(&mut self, live_plan: &LivePlan, _: &BTreeMap<AppRef, Application>) -> Gate {
        match self.proceed(live_plan) {
            Ok(true) => Gate::Apply {
                held: std::collections::BTreeSet::new(),
                workflows: None,
            },
            Ok(false) => Gate::Stop,
            Err(error) => {
                self.error = Some(error);
                Gate::Stop
            }
        }
    }

    fn fleet<'a>(&'a mut self, _apps: &'a BTreeMap<AppRef, Application>) -> FleetFuture<'a> {
        // Connected before the plan (`run`), whenever an app has a workflow.
        let fleet = self.fleet.take().unwrap_or_else(|| Fleet {
            registry: Vec::new(),
            clusters: BTreeMap::new(),
            placements: BTreeMap::new(),
        });
        Box::pin(async move { fleet })
    }
}

/// The clusters of `--cluster NAME=KUBECONFIG[:CONTEXT]` (connected, after the `--kubeconfig`
/// cluster, which is the registry's first: KubeVela's `local`), and, when a workflow app has
/// a topology policy, every app's render per placement (with its deploy steps' overrides).
///
/// # Errors
/// A `--cluster` entry is malformed, repeats a name, or its kubeconfig cannot be loaded; the
/// repository cannot be read again.
async fn fleet(
    args: &ApplyArgs,
    workflow_apps: &BTreeMap<AppRef, Application>,
) -> anyhow::Result<agent::workflow::Fleet> {
    let local = agent::config::ClusterConfig {
        name: args.cluster.cluster_name.clone(),
        kubeconfig: args.cluster.kubeconfig.clone(),
        context: args.cluster.context.clone(),
        labels: BTreeMap::new(),
    };
    let mut fleet = agent::workflow::Fleet {
        registry: vec![local],
        clusters: BTreeMap::new(),
        placements: BTreeMap::new(),
    };
    for entry in &args.clusters {
        let (name, location) = entry
            .split_once('=')
            .with_context(|| format!("--cluster {entry:?} is not NAME=KUBECONFIG[:CONTEXT]"))?;
        if fleet.registry.iter().any(|known| known.name == name) {
            anyhow::bail!("--cluster {entry:?}: cluster {name:?} is given twice");
        }
        // `path:context`, unless the whole of it is an existing file.
        let (path, context) = match location.rsplit_once(':') {
            Some((path, context)) if !Path::new(location).exists() => {
                (path, Some(context.to_owned()))
            }
            _ => (location, None),
        };
        let options = ClusterOptions {
            name: name.to_owned(),
            qps: args.cluster.qps,
            burst: args.cluster.burst,
            timeout: Duration::from_secs(args.cluster.timeout_seconds),
        };
        let cluster = Cluster::connect(Path::new(path), context.as_deref(), &options)
            .await
            .with_context(|| format!("--cluster {entry:?}"))?;
        fleet.registry.push(agent::config::ClusterConfig {
            name: name.to_owned(),
            kubeconfig: Some(path.into()),
            context,
            labels: BTreeMap::new(),
        });
        fleet
            .clusters
            .insert(name.to_owned(), std::sync::Arc::new(cluster));
    }
    if agent::workflow::needs_placements(workflow_apps.values()) {
        let worktree = agent::source::worktree::read_worktree(&args.path)
            .with_context(|| format!("reading {}", args.path.display()))?;
        let options = analyzer::RenderOptions {
            cluster_version: analyzer::ClusterVersion::release(1, 34),
            ..analyzer::RenderOptions::default()
        };
        fleet.placements = agent::workflow::placements_of(
            &worktree.snapshot,
            &analyzer::Definitions::builtin(),
            &options,
            workflow_apps,
        );
    }
    Ok(fleet)
}

/// Appends one line per object acted on and one per app; returns whether any app failed.
/// `step` prefixes the lines of an apply made by a workflow step.
fn apply_results_text<'a>(
    reports: impl IntoIterator<Item = &'a AppApplyReport>,
    step: Option<&str>,
    text: &mut String,
) -> bool {
    let mut failed = false;
    let prefix = step.map(|step| format!("[{step}] ")).unwrap_or_default();
    for report in reports {
        for object in &report.objects {
            let _ = match &object.error {
                None => writeln!(
                    text,
                    "  {prefix}{} {} {}: ok",
                    report.app,
                    object.action.as_str(),
                    object.object
                ),
                Some(error) => writeln!(
                    text,
                    "  {prefix}{} {} {}: error: {error}",
                    report.app,
                    object.action.as_str(),
                    object.object
                ),
            };
        }
        if step.is_some() {
            continue;
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
                    "app {}: apply stopped, {}: {reason}",
                    report.app,
                    pruned_text(report)
                )
            }
        };
    }
    failed
}

/// What a stopped apply pruned before it stopped, as the results say: never "nothing" when
/// an object was deleted.
fn pruned_text(report: &AppApplyReport) -> String {
    let pruned = report
        .objects
        .iter()
        .filter(|object| object.action == agent::plan::Action::Delete && object.error.is_none())
        .count();
    match pruned {
        0 => "nothing pruned".to_owned(),
        1 => "after pruning 1 object".to_owned(),
        n => format!("after pruning {n} objects"),
    }
}

/// Appends each app's workflow: the applies of its steps, every step's phase, and where the
/// workflow stands. Returns whether any workflow failed or was refused.
fn workflow_text(results: &[&WorkflowResult], text: &mut String) -> bool {
    let mut failed = false;
    for result in results {
        match *result {
            WorkflowResult::Invalid { app, issues } => {
                failed = true;
                let _ = writeln!(text, "app {app}: workflow not valid, nothing applied:");
                for issue in issues {
                    let _ = writeln!(text, "  error[{}]: {}", issue.rule, issue.message);
                }
            }
            WorkflowResult::Failed { app, message } => {
                failed = true;
                let _ = writeln!(text, "app {app}: workflow error: {message}");
            }
            WorkflowResult::Ran(report) => {
                for (step, applied) in &report.applies {
                    apply_results_text(std::slice::from_ref(applied), Some(step), text);
                }
                let app = &report.app;
                for warning in &report.warnings {
                    let _ = writeln!(text, "app {app}: warning: {warning}");
                }
                // Clusters the app left that could not be collected (named in the message).
                if let Some(message) = agent::workflow::collection_failure(&report.applies) {
                    failed = true;
                    let _ = writeln!(text, "app {app}: garbage collection failed: {message}");
                }
                for (name, step) in &report.state.steps {
                    let detail = match (&step.reason, &step.message) {
                        (Some(reason), Some(message)) => format!(" ({reason}: {message})"),
                        (None, Some(message)) if !message.is_empty() => format!(" ({message})"),
                        _ => String::new(),
                    };
                    let _ = writeln!(
                        text,
                        "app {app}: step {name}: {}{detail}",
                        step.phase.as_str()
                    );
                }
                let _ = match (&report.state.phase, &report.state.failure) {
                    (WorkflowPhase::Failed, Some(failure)) => {
                        failed = true;
                        writeln!(
                            text,
                            "app {app}: workflow failed at step {}: {}: {}",
                            failure.step, failure.reason, failure.message
                        )
                    }
                    (WorkflowPhase::Failed, None) => {
                        failed = true;
                        writeln!(text, "app {app}: workflow failed")
                    }
                    (WorkflowPhase::Succeeded, _) => {
                        writeln!(text, "app {app}: workflow succeeded")
                    }
                    (WorkflowPhase::Suspending, _) => writeln!(
                        text,
                        "app {app}: workflow suspended (continue with `driftless resume {} -n {}`)",
                        app.name, app.namespace
                    ),
                    (WorkflowPhase::Executing, _) => writeln!(
                        text,
                        "app {app}: workflow still running; the next apply continues it"
                    ),
                };
            }
        }
    }
    failed
}

/// Syncs `repo` in `mode`, with the policies and status CUE its render took from each
/// manifest (`inputs`). The CLI's one call of the sync engine.
async fn sync_repo(
    cluster_args: &ClusterArgs,
    path: &Path,
    (output, sources): (&mut RenderOutput, &SourceMap),
    inputs: PlanInputs,
    mode: Mode<'_>,
    approve_prune: bool,
) -> Synced {
    let PlanInputs {
        policies, statuses, ..
    } = inputs;
    let mut options = live_options(cluster_args, path);
    options.evidence = evidence_of(output, sources);
    options.budget = budget(approve_prune);
    // Health reads the status CUE of the definitions the render used (the repository's own
    // where it has them).
    options.statuses = statuses;
    let target = Target {
        options,
        revision: None,
        policies: &policies,
        orphans: &Orphans::NotRendered,
        permits: None,
    };
    // The rendered objects move into the plan: nothing after it reads them from the render.
    let apps: Apps<'_, RenderOutput> = Apps::Taken(output);
    agent::sync::run(target, apps, mode).await
}

/// Whether the repository loaded well enough to prune: the files that did not load, named.
fn evidence_of(output: &RenderOutput, sources: &SourceMap) -> Evidence {
    let app_diagnostics = output.apps.iter().flat_map(|app| &app.diagnostics);
    Evidence::of_render(&output.diagnostics, app_diagnostics, &|file| {
        Some(sources.path(file).to_owned())
    })
}

/// The prune budget of `driftless apply` (the defaults), overridden by `--approve-prune`.
fn budget(approve_prune: bool) -> PassBudget {
    PassBudget {
        approval: if approve_prune {
            Approval::Any
        } else {
            Approval::None
        },
        how_to_approve: "approved with `driftless apply --approve-prune`".to_owned(),
        ..PassBudget::default()
    }
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
            create_namespaces: cluster_args.create_namespaces(),
            ..PlanOptions::default()
        },
        apply: ApplyOptions {
            source: cluster_args.source.clone().or(source),
            ..ApplyOptions::default()
        },
        tracker_namespace: cluster_args.tracker_namespace.clone(),
        // Filled in by `plan_with`, which has the rendered repository.
        statuses: std::collections::BTreeMap::new(),
        evidence: Evidence::Complete,
        budget: PassBudget::default(),
    }
}

/// The cluster found as kubectl finds it (see `kubeconfig`).
async fn connect(cluster_args: &ClusterArgs) -> anyhow::Result<Cluster> {
    super::kubeconfig::connect_args(cluster_args, "a live plan or apply").await
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

fn health_text(health: &BTreeMap<&AppRef, &AppHealth>) -> String {
    let mut text = String::new();
    if health.is_empty() {
        return text;
    }
    text.push_str("\nHealth:\n");
    for (app, app_health) in health {
        let summary = &app_health.health;
        let _ = if summary.message.is_empty() {
            writeln!(text, "  {app}: {}", summary.status.as_str())
        } else {
            writeln!(
                text,
                "  {app}: {} ({})",
                summary.status.as_str(),
                summary.message
            )
        };
        for component in &app_health.components {
            if let Some(message) = &component.message {
                let _ = writeln!(text, "    component {}: {message}", component.component);
            }
        }
    }
    text
}

/// This process's memory for the phase logs of `plan` and `apply` (`-v`): resident now and at
/// its peak so far, from `/proc/self/status`, so `hack/scale.sh` runs show which phase grows.
/// Empty where there is no procfs.
fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .map_or_else(|| "?".to_owned(), |kib| format!("{} MiB", kib / 1024))
    };
    format!(
        "{} (peak {}) cpu={}",
        field("VmRSS:"),
        field("VmHWM:"),
        cpu_seconds()
    )
}

/// User + system CPU time of this process so far (all threads), from `/proc/self/stat`, so
/// the phase logs show CPU apart from wall time on a shared machine; `?` where there is no
/// procfs. Assumes the usual 100 clock ticks per second.
fn cpu_seconds() -> String {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (in parentheses, which may hold spaces): utime and
    // stime are the 12th and 13th of them.
    let ticks: Option<u64> = stat.rsplit_once(')').and_then(|(_, rest)| {
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let user = fields.get(11)?.parse::<u64>().ok()?;
        let system = fields.get(12)?.parse::<u64>().ok()?;
        Some(user + system)
    });
    ticks.map_or_else(
        || "?".to_owned(),
        |ticks| format!("{:.2} s", ticks as f64 / 100.0),
    )
}
