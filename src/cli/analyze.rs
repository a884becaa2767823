//! `driftless analyze`: every diagnostic of the repository (loading, rendering and the
//! analysis rules of RULES.md) to stdout, as compiler-style text, the JSON diagnostic contract
//! (an array), or SARIF 2.1.0. Exits 1 when any diagnostic is an error.

use agent::report::json::{diagnostics_json, to_pretty_string};
use agent::report::sarif::sarif_string;
use agent::report::{DiagnosticStyle, render_diagnostics};
use analyzer::{Diagnostic, Severity};

use super::repo::analyze_repo_for;
use super::terminal::write_stdout;
use super::{AnalyzeArgs, AnalyzeFormat, Outcome};

pub fn run(args: &AnalyzeArgs, style: DiagnosticStyle) -> anyhow::Result<Outcome> {
    let repo = analyze_repo_for(&args.path, args.kube.kube_version.clone())?;
    let diagnostics: Vec<&Diagnostic> = repo
        .output
        .diagnostics
        .iter()
        .chain(repo.output.apps.iter().flat_map(|app| &app.diagnostics))
        .collect();
    let errors = diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.severity == Severity::Error)
        .count();
    let text = match args.output {
        AnalyzeFormat::Human => {
            let mut text = render_diagnostics(diagnostics.iter().copied(), &repo.sources, style);
            text.push_str(&format!(
                "{} app(s) analyzed: {errors} error(s), {} warning(s)\n",
                repo.output.apps.len(),
                diagnostics.len() - errors
            ));
            text
        }
        AnalyzeFormat::Json => to_pretty_string(&diagnostics_json(
            diagnostics.iter().copied(),
            &repo.sources,
        )),
        AnalyzeFormat::Sarif => sarif_string(diagnostics.iter().copied(), &repo.sources),
    };
    write_stdout(&text)?;
    Ok(if errors > 0 {
        Outcome::Blocked
    } else {
        Outcome::Success
    })
}
