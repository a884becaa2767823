//! Reading a repository (or one file) from disk and rendering it: the first steps every
//! command shares.

use std::path::Path;

use agent::report::{DiagnosticStyle, render_diagnostics};
use agent::source::worktree::read_worktree;
use analyzer::{
    AnalysisConfig, AnalysisOptions, Definitions, RenderOptions, RenderOutput, SourceMap,
};
use anyhow::Context as _;

use super::terminal::{Progress, write_stderr};

/// A rendered repository and the source map its diagnostics point into.
pub struct RenderedRepo {
    pub output: RenderOutput,
    pub sources: SourceMap,
}

/// Reads `path` and renders every app in it for a cluster of `cluster_version` (`None`:
/// Kubernetes 1.34, see [`offline_render_options`]): live applies render what the target
/// cluster's templates see.
///
/// # Errors
///
/// When `path` cannot be read. Problems in the repository are diagnostics, not errors.
pub fn render_repo_for(
    path: &Path,
    cluster_version: Option<analyzer::ClusterVersion>,
) -> anyhow::Result<RenderedRepo> {
    let progress = Progress::start(format!("reading {}", path.display()));
    let worktree = read_worktree(path).with_context(|| format!("reading {}", path.display()))?;
    tracing::info!(
        root = %worktree.root.display(),
        files = worktree.snapshot.files.len(),
        "read work tree"
    );
    progress.set_message("rendering");
    let definitions = Definitions::builtin();
    let mut options = offline_render_options();
    if let Some(cluster_version) = cluster_version {
        options.cluster_version = cluster_version;
    }
    let (output, sources) = analyzer::render_snapshot(&worktree.snapshot, &definitions, &options);
    tracing::info!(apps = output.apps.len(), "rendered");
    Ok(RenderedRepo { output, sources })
}

/// Reads `path` and analyzes every app in it for a cluster of `cluster_version` (`None`: the
/// analysis' target release): the render plus the analysis rules, with the severity settings
/// of the repository's `driftless.yaml` (its `analysis` and `clusters`), when there is one.
///
/// # Errors
///
/// When `path` cannot be read, or its `driftless.yaml` is invalid.
pub fn analyze_repo_for(
    path: &Path,
    cluster_version: Option<analyzer::ClusterVersion>,
) -> anyhow::Result<RenderedRepo> {
    let progress = Progress::start(format!("reading {}", path.display()));
    let worktree = read_worktree(path).with_context(|| format!("reading {}", path.display()))?;
    let config_path = worktree.root.join("driftless.yaml");
    let config = match std::fs::read_to_string(&config_path) {
        Ok(text) => AnalysisConfig::from_agent_config(&text)
            .with_context(|| format!("reading {}", config_path.display()))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => AnalysisConfig::default(),
        Err(error) => {
            return Err(error).with_context(|| format!("reading {}", config_path.display()));
        }
    };
    progress.set_message("analyzing");
    let definitions = Definitions::builtin();
    let mut options = AnalysisOptions::with_config(config);
    if let Some(cluster_version) = cluster_version {
        options.render.cluster_version = cluster_version;
    }
    let (output, sources) = analyzer::analyze_snapshot(&worktree.snapshot, &definitions, &options);
    tracing::info!(apps = output.apps.len(), "analyzed");
    Ok(RenderedRepo { output, sources })
}

/// Draws the diagnostics of a render on stderr: global ones first, then per app in app order.
pub fn report_render_diagnostics(repo: &RenderedRepo, style: DiagnosticStyle) {
    let diagnostics = repo
        .output
        .diagnostics
        .iter()
        .chain(repo.output.apps.iter().flat_map(|app| &app.diagnostics));
    write_stderr(&render_diagnostics(diagnostics, &repo.sources, style));
}

/// True when the repository or any app has an error diagnostic.
pub fn has_errors(output: &RenderOutput) -> bool {
    output
        .diagnostics
        .iter()
        .any(|diagnostic| diagnostic.severity == analyzer::Severity::Error)
        || output.apps.iter().any(analyzer::RenderedApp::is_blocked)
}

/// `--kube-version` of `render`, `analyze` and `plan`: the Kubernetes version templates render
/// for (`context.clusterVersion`).
#[derive(Debug, Clone, clap::Args)]
pub struct KubeVersionArg {
    /// The Kubernetes version templates render for (`context.clusterVersion`): `1.30`, or
    /// `vela-offline` for what `vela dry-run --offline` renders (no version: templates take
    /// their legacy branches). Default: 1.34, the release the analysis checks API versions
    /// against. A plan with `--kubeconfig` renders for the cluster's own version.
    #[arg(long, value_name = "VERSION", value_parser = parse_kube_version)]
    pub kube_version: Option<analyzer::ClusterVersion>,
}

/// Parses `--kube-version`: `MAJOR.MINOR` (a leading `v` and a patch version are accepted,
/// `v1.30.2`), or `vela-offline`.
///
/// # Errors
///
/// When the text is neither, with what to write instead.
pub fn parse_kube_version(text: &str) -> Result<analyzer::ClusterVersion, String> {
    if text == "vela-offline" {
        return Ok(analyzer::ClusterVersion::vela_offline());
    }
    let numbers: Vec<&str> = text.trim_start_matches('v').split('.').collect();
    match numbers.as_slice() {
        [major, minor] | [major, minor, _] => match (major.parse(), minor.parse()) {
            (Ok(major), Ok(minor)) => Ok(analyzer::ClusterVersion::release(major, minor)),
            _ => Err(format!(
                "`{text}` is not a Kubernetes version: write MAJOR.MINOR (1.30) or vela-offline"
            )),
        },
        _ => Err(format!(
            "`{text}` is not a Kubernetes version: write MAJOR.MINOR (1.30) or vela-offline"
        )),
    }
}

/// Render options without a cluster: Kubernetes 1.34, the version the analysis (and so `plan`)
/// renders for, so `render` and `plan` show the same API versions. KubeVela's offline dry run
/// instead takes the templates' legacy branches (`ClusterVersion::vela_offline`).
fn offline_render_options() -> RenderOptions {
    RenderOptions {
        cluster_version: analyzer::ClusterVersion::release(1, 34),
        ..RenderOptions::default()
    }
}
