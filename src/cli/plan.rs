//! `driftless plan`: the plan to stdout in the chosen format, diagnostics to stderr.
//!
//! The cluster is found as kubectl finds it (`kubeconfig`): with one, the plan is against the live
//! cluster (see `live`); with none, or with `--offline`, it is against an empty cluster, stderr
//! says why, and every format says so.

use agent::plan::Plan;
use agent::report::json::plan_json_string;
use agent::report::{DiagnosticStyle, MarkdownOptions, plan_human, plan_markdown};

use super::kubeconfig::{self, KubeconfigEnv, OfflineReason, Target};
use super::repo::{analyze_repo_for, report_render_diagnostics};
use super::terminal::{write_stderr, write_stdout};
use super::{Outcome, PlanArgs, PlanFormat};

pub fn run(args: &PlanArgs, style: DiagnosticStyle) -> anyhow::Result<Outcome> {
    // The analysis runs inside plan: its errors block only the affected app. A live plan
    // renders for the cluster's own version, so it connects first.
    // `--kube-version` names the release to render for, which only an offline plan needs; a
    // live plan renders for the cluster's own version. Refused before any kubeconfig is read.
    if args.kube.kube_version.is_some() && args.cluster.kubeconfig.is_some() {
        anyhow::bail!(
            "--kube-version is for offline plans: a plan with --kubeconfig renders for the \
             cluster's own version; drop one of the two"
        );
    }
    let offline = args.offline || args.kube.kube_version.is_some();
    let target = kubeconfig::find(
        args.cluster.kubeconfig.as_deref(),
        offline,
        &KubeconfigEnv::from_process(),
    )?;
    let (repo, plan): (_, Plan) = match target {
        Target::Live(_) => super::live::plan(&args.cluster, &args.path, style)?,
        Target::Offline(reason) => {
            // With no kubeconfig the plan's own header says it is offline; `--offline` also
            // says so here, since a kubeconfig may exist.
            if args.offline && reason == OfflineReason::Forced {
                write_stderr(&format!("note: {}\n", reason.explain()));
            }
            let repo = analyze_repo_for(&args.path, args.kube.kube_version.clone())?;
            report_render_diagnostics(&repo, style);
            let plan = agent::offline_plan::plan_against_empty_cluster(
                &repo.output,
                None,
                args.cluster.create_namespaces(),
            );
            (repo, plan)
        }
    };
    let text = match args.output {
        PlanFormat::Human => plan_human(&plan),
        PlanFormat::Json => plan_json_string(&plan, &repo.sources),
        PlanFormat::Markdown => plan_markdown(
            &plan,
            &repo.sources,
            MarkdownOptions {
                max_len: args.markdown_limit,
            },
        ),
    };
    write_stdout(&text)?;
    Ok(if plan.has_errors() {
        Outcome::Blocked
    } else if plan.has_changes() {
        Outcome::Changes
    } else {
        Outcome::Success
    })
}
