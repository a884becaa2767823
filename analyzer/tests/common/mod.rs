//! Helpers shared by the analyzer's integration tests: building snapshots from directories and
//! printing render results and diagnostics as stable text.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use std::path::Path;
use std::sync::OnceLock;

use analyzer::{Definitions, RenderOutput, Snapshot, SourceFile, SourceMap};

/// The built-in definitions, parsed once per test binary.
pub fn builtins() -> &'static Definitions {
    static BUILTINS: OnceLock<Definitions> = OnceLock::new();
    BUILTINS.get_or_init(Definitions::builtin)
}

/// Every file under `dir` (recursively) except the `skip`ped names, with `/`-separated
/// relative paths.
pub fn snapshot_of_dir(dir: &Path, skip: &[&str]) -> std::io::Result<Snapshot> {
    let mut files = Vec::new();
    collect(dir, dir, skip, &mut files)?;
    files.sort_by(|a: &SourceFile, b: &SourceFile| a.path.cmp(&b.path));
    Ok(Snapshot {
        commit: None,
        files,
    })
}

fn collect(
    root: &Path,
    dir: &Path,
    skip: &[&str],
    out: &mut Vec<SourceFile>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, skip, out)?;
            continue;
        }
        let relative = path
            .strip_prefix(root)
            .map_err(std::io::Error::other)?
            .to_string_lossy()
            .replace('\\', "/");
        if skip.contains(&relative.as_str()) {
            continue;
        }
        out.push(SourceFile {
            path: relative,
            contents: std::fs::read_to_string(&path)?,
        });
    }
    Ok(())
}

/// Every rendered object as YAML documents (keys sorted, like `vela dry-run`, so goldens do not
/// depend on CUE field order), grouped by app, with a comment naming where each object came from.
pub fn render_yaml(output: &RenderOutput) -> String {
    let mut out = String::new();
    for app in &output.apps {
        out.push_str(&format!(
            "# app {} ({} objects)\n",
            app.app,
            app.objects.len()
        ));
        for object in &app.objects {
            let origin = match (&object.trait_type, &object.output_name) {
                (None, _) => "workload".to_owned(),
                (Some(trait_type), Some(name)) => format!("{trait_type} output {name}"),
                (Some(trait_type), None) => trait_type.clone(),
            };
            out.push_str(&format!(
                "---\n# component {}: {origin}\n",
                object.component
            ));
            out.push_str(
                &serde_saphyr::to_string(&sorted_keys(&object.object))
                    .unwrap_or_else(|e| e.to_string()),
            );
        }
    }
    out
}

/// Every diagnostic (global first, then per app) as `severity[rule] file:line:col: message`.
pub fn diagnostics_text(output: &RenderOutput, sources: &SourceMap) -> String {
    let mut out = String::new();
    let all = output
        .diagnostics
        .iter()
        .chain(output.apps.iter().flat_map(|app| &app.diagnostics));
    for diagnostic in all {
        let severity = match diagnostic.severity {
            analyzer::Severity::Error => "error",
            analyzer::Severity::Warning => "warning",
        };
        let position = diagnostic.span.map_or_else(
            || "-".to_owned(),
            |span| {
                let location = sources.locate(span);
                format!("{}:{}:{}", location.path, location.line, location.column)
            },
        );
        let mut scope = Vec::new();
        if let Some(app) = &diagnostic.app {
            scope.push(format!("app {app}"));
        }
        if let Some(component) = &diagnostic.component {
            scope.push(format!("component {component}"));
        }
        let scope = if scope.is_empty() {
            String::new()
        } else {
            format!(" [{}]", scope.join(", "))
        };
        out.push_str(&format!(
            "{severity}[{}] {position}: {}{scope}\n",
            diagnostic.rule, diagnostic.message
        ));
        for label in &diagnostic.labels {
            let location = sources.locate(label.span);
            out.push_str(&format!(
                "  note {}:{}:{}: {}\n",
                location.path, location.line, location.column, label.message
            ));
        }
    }
    out
}

/// The value with every object's keys sorted.
pub fn sorted_keys(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort();
            serde_json::Value::Object(
                keys.into_iter()
                    .map(|key| (key.clone(), sorted_keys(&object[key])))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(sorted_keys).collect())
        }
        other => other.clone(),
    }
}
