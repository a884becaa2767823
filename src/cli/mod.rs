//! The command line: what the user typed ([`Cli`], [`Command`]) and one handler per command.
//! Handlers turn arguments into options, call the libraries, and write results to stdout;
//! logs, progress and diagnostics go to stderr (plumbing stays quiet, porcelain talks on
//! stderr).

mod agent_cmd;
mod analyze;
mod approve_prune;
mod hold;
mod kubeconfig;
mod live;
mod plan;
mod render;
mod repo;
mod resume;
mod terminal;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

pub use terminal::init_tracing;

/// Installs logging for the chosen command: the agent logs JSON (or text) at `info`.
pub fn init_tracing_for(cli: &Cli) {
    match &cli.command {
        Command::Agent(args) => agent_cmd::init_tracing(cli.verbose, args.log_format),
        _ => init_tracing(cli.verbose),
    }
}

/// Driftless: a GitOps reconcile agent for KubeVela-style Applications.
///
/// It renders every Application of a repository with a native CUE evaluator (the same
/// objects KubeVela produces), checks them, and plans what applying them would change.
#[derive(Debug, Parser)]
#[command(name = "driftless", version, propagate_version = true)]
pub struct Cli {
    /// More logging on stderr: -v info, -vv debug, -vvv trace. `RUST_LOG` overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// When to colour diagnostics on stderr.
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto, global = true)]
    pub color: ColorWhen,

    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render every Application to Kubernetes objects.
    ///
    /// Prints the objects of every app, in app order then object order, as multi-document
    /// YAML (or one JSON array with `-o json`). Diagnostics go to stderr. Exits 1 if any app
    /// is blocked by an error; the other apps are still printed.
    Render(RenderArgs),

    /// Check every Application statically: the render's diagnostics plus the analysis rules
    /// (RULES.md), with severities and suppressions from the repository's `driftless.yaml`.
    ///
    /// Prints the diagnostics to stdout. Exits 1 if any is an error.
    Analyze(AnalyzeArgs),

    /// Plan what applying the repository would change.
    ///
    /// Without a cluster, plans against an empty cluster (every object is a create) and says
    /// so. Exits 0 when nothing would change, 2 when something would, 1 on errors (a blocked
    /// app is an error; the other apps are still planned).
    Plan(PlanArgs),

    /// Apply the repository to a live cluster.
    ///
    /// Prints the plan first and asks for confirmation unless `--yes`. Server-side apply with
    /// field manager `driftless`, Namespaces and CRDs first, prune last. An app with a conflict
    /// or an error is not applied (and never pruned); the other apps are. Exits 0 when every app
    /// applied, 1 otherwise.
    Apply(ApplyArgs),

    /// Run the GitOps agent: poll the configured git sources (or wake on webhooks), deploy the
    /// tracked branch with commit statuses, preview pull requests with a plan comment, and
    /// check for drift on a schedule. Serves /healthz, /readyz, /metrics, webhooks and plan
    /// pages. Stops on SIGTERM after finishing the step in flight.
    Agent(agent_cmd::AgentArgs),

    /// Resume an app's suspended workflow (a `suspend` step, a deploy waiting for approval):
    /// marks the steps resumed in the workflow state stored in the cluster, and the next apply
    /// or agent pass continues from there.
    Resume(resume::ResumeArgs),
    /// Approve the prunes of a commit that the agent held because they exceed the source's
    /// prune budget (`prune:` in `driftless.yaml`): stores the approval in the cluster, for
    /// that commit and at most `--objects` objects; the agent then deploys the commit again.
    ApprovePrune(approve_prune::ApprovePruneArgs),
    /// Hold one app: the agent applies nothing to it and corrects no drift in it until the
    /// hold expires (`--for`) or is released; previews, plans and drift reports go on. Stored
    /// in the cluster, so every agent replica sees it.
    Hold(hold::HoldArgs),
    /// Release an app's hold: the agent converges it to Git at its next pass.
    Release(hold::ReleaseArgs),
    /// Approve an app's plan that reviewed-plan mode held, by its digest (the one its commit
    /// status and the posted plan name): the agent applies it if its plan is still that one.
    Approve(hold::ApproveArgs),
}

/// Arguments of `driftless render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// A repository checkout, or a single Application file (the repository's `definitions/`
    /// are still used).
    #[arg(default_value = ".")]
    pub path: PathBuf,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = RenderFormat::Yaml)]
    pub output: RenderFormat,

    #[command(flatten)]
    pub kube: repo::KubeVersionArg,
}

/// Output formats of `driftless render`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RenderFormat {
    /// Multi-document YAML, one document per object.
    Yaml,
    /// One JSON array of every object.
    Json,
}

/// Arguments of `driftless analyze`.
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// A repository checkout, or a single Application file (the repository's `definitions/`
    /// and `driftless.yaml` are still used).
    #[arg(default_value = ".")]
    pub path: PathBuf,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = AnalyzeFormat::Human)]
    pub output: AnalyzeFormat,

    #[command(flatten)]
    pub kube: repo::KubeVersionArg,
}

/// Output formats of `driftless analyze`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AnalyzeFormat {
    /// Compiler-style diagnostics with source snippets.
    Human,
    /// A JSON array of diagnostics (the diagnostic contract of DESIGN.md §3).
    Json,
    /// SARIF 2.1.0, for code-scanning UIs.
    Sarif,
}

/// Arguments of `driftless plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// A repository checkout, or a single Application file (the repository's `definitions/`
    /// are still used).
    #[arg(default_value = ".")]
    pub path: PathBuf,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = PlanFormat::Human)]
    pub output: PlanFormat,

    /// With `-o markdown`: the most bytes the comment may have; the largest diffs are
    /// collapsed first to fit (GitHub's comment limit is 65,536 characters).
    #[arg(long, default_value_t = 60_000)]
    pub markdown_limit: usize,

    /// Plan against an empty cluster, whatever kubeconfig there is.
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    pub offline: bool,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub kube: repo::KubeVersionArg,
}

/// Arguments of `driftless apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// A repository checkout, or a single Application file (the repository's `definitions/`
    /// are still used; apps missing from a single file are never deleted).
    #[arg(default_value = ".")]
    pub path: PathBuf,

    /// Apply without asking for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// Prune even beyond the prune budget (more than 50 objects, or more than 30% of the
    /// repository's objects, in one apply): without it, such an apply prunes nothing.
    #[arg(long)]
    pub approve_prune: bool,

    /// Apply only if the plan's digest (the `Plan digest` line of `driftless plan`, whole or its
    /// first 12 characters) is this one: what was reviewed is what is applied, or nothing is.
    #[arg(long, value_name = "DIGEST")]
    pub plan_digest: Option<String>,

    /// How long apps with a workflow keep being driven (steps waiting for health, durations,
    /// other apps) before the command returns; the next apply or agent pass continues from the
    /// state stored in the cluster.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub workflow_wait: u64,

    /// A further cluster for topology policies, as NAME=KUBECONFIG[:CONTEXT] (repeatable):
    /// deploy steps whose topology names it apply there, with a tracker in that cluster. The
    /// `--kubeconfig` cluster is always registered, under `--cluster-name`, and is `local`.
    #[arg(long = "cluster", value_name = "NAME=KUBECONFIG[:CONTEXT]")]
    pub clusters: Vec<String>,

    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// The live cluster to plan against or apply to.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// The kubeconfig of the target cluster; otherwise `$KUBECONFIG` (a path list), then
    /// `~/.kube/config`, as kubectl reads them. With none, `plan` plans against an empty cluster.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context (the current context otherwise).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// The cluster's name in plans.
    #[arg(long, default_value = "local")]
    pub cluster_name: String,

    /// Sustained API requests per second.
    #[arg(long, default_value_t = 20.0)]
    pub qps: f64,

    /// API requests allowed in a burst above `--qps`.
    #[arg(long, default_value_t = 40)]
    pub burst: u32,

    /// Timeout of each API request, in seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout_seconds: u64,

    /// The namespace holding the resource trackers.
    #[arg(long, default_value = "driftless-system")]
    pub tracker_namespace: String,

    /// The source identity recorded in trackers: apps of this source that are no longer
    /// rendered are deleted. Defaults to the repository's absolute path.
    #[arg(long)]
    pub source: Option<String>,

    /// Do not create the apps' missing namespaces. By default each is planned as a create and
    /// created before the app's objects, labelled `driftless.dev/created-namespace`, and never
    /// pruned.
    #[arg(long)]
    pub no_create_namespaces: bool,
}

impl ClusterArgs {
    /// Whether missing app namespaces are created.
    pub fn create_namespaces(&self) -> agent::namespaces::CreateNamespaces {
        if self.no_create_namespaces {
            agent::namespaces::CreateNamespaces::Never
        } else {
            agent::namespaces::CreateNamespaces::WhenMissing
        }
    }
}

/// Output formats of `driftless plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// Terraform-like text.
    Human,
    /// The JSON plan contract.
    Json,
    /// Markdown for a pull-request comment.
    Markdown,
}

/// When to colour output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    /// When stderr is a terminal and `NO_COLOR` is unset.
    Auto,
    Always,
    Never,
}

/// How a command ended, when it ran to completion. `main` maps it to an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done; for `plan`, nothing would change.
    Success,
    /// `plan` found changes.
    Changes,
    /// The repository has errors: at least one app (or the repository itself) is blocked.
    Blocked,
}

/// Runs the command.
///
/// # Errors
///
/// When the environment fails: unreadable paths, a closed stdout.
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let style = terminal::diagnostic_style(cli.color);
    match cli.command {
        Command::Render(args) => render::run(&args, style),
        Command::Analyze(args) => analyze::run(&args, style),
        Command::Plan(args) => plan::run(&args, style),
        Command::Apply(args) => live::run(&args, style),
        Command::Agent(args) => agent_cmd::run(&args),
        Command::Resume(args) => resume::run(&args),
        Command::ApprovePrune(args) => approve_prune::run(&args),
        Command::Hold(args) => hold::hold(&args),
        Command::Release(args) => hold::release(&args),
        Command::Approve(args) => hold::approve(&args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn plan_defaults_to_the_current_directory_and_human_output() {
        let cli = Cli::try_parse_from(["driftless", "plan"]).unwrap();
        let Command::Plan(args) = cli.command else {
            panic!("parsed {:?}", cli.command);
        };
        assert_eq!(args.path, PathBuf::from("."));
        assert_eq!(args.output, PlanFormat::Human);
    }

    #[test]
    fn output_formats_are_checked() {
        let cli = Cli::try_parse_from(["driftless", "render", "repo", "-o", "json"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Render(RenderArgs {
                output: RenderFormat::Json,
                ..
            })
        ));
        let error = Cli::try_parse_from(["driftless", "plan", "-o", "sarif"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue);
    }
}
