//! `driftless render`: every rendered object to stdout, diagnostics to stderr.

use agent::report::DiagnosticStyle;
use agent::report::render::{render_json, render_yaml};

use super::repo::{has_errors, render_repo_for, report_render_diagnostics};
use super::terminal::write_stdout;
use super::{Outcome, RenderArgs, RenderFormat};

pub fn run(args: &RenderArgs, style: DiagnosticStyle) -> anyhow::Result<Outcome> {
    let repo = render_repo_for(&args.path, args.kube.kube_version.clone())?;
    report_render_diagnostics(&repo, style);
    let text = match args.output {
        RenderFormat::Yaml => render_yaml(&repo.output)?,
        RenderFormat::Json => render_json(&repo.output),
    };
    write_stdout(&text)?;
    Ok(if has_errors(&repo.output) {
        Outcome::Blocked
    } else {
        Outcome::Success
    })
}
