//! SARIF 2.1.0 output of diagnostics (`driftless analyze -o sarif`), for code-scanning UIs
//! (GitHub, GitLab) that annotate pull requests.
//!
//! One run whose tool driver lists every rule of [`analyzer::rules::RULES`] (id, summary,
//! default level), and one result per diagnostic: rule id and index, level, message, the
//! primary location as file and 1-based region, secondary labels as related locations.
//! Diagnostics without a position have no `locations`. Columns count Unicode code points
//! (`columnKind`). Paths are relative to the repository root, percent-encoded where a URI
//! needs it (`<builtin>/...` definitions become `%3Cbuiltin%3E/...`).
//!
//! Like the JSON contracts, these are output types filled in by hand.

use serde::Serialize;

use analyzer::rules::RULES;
use analyzer::{Diagnostic, Severity, SourceMap};
use cue::Span;

/// The SARIF schema this output follows.
pub const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// A SARIF log.
#[derive(Debug, Serialize)]
pub struct SarifLog {
    #[serde(rename = "$schema")]
    pub schema: &'static str,
    pub version: &'static str,
    pub runs: Vec<SarifRun>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SarifRun {
    pub tool: SarifTool,
    pub column_kind: &'static str,
    pub results: Vec<SarifResult>,
}

#[derive(Debug, Serialize)]
pub struct SarifTool {
    pub driver: SarifDriver,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SarifDriver {
    pub name: &'static str,
    pub version: &'static str,
    pub rules: Vec<SarifRule>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SarifRule {
    pub id: &'static str,
    pub short_description: SarifMessage,
    pub default_configuration: SarifConfiguration,
}

#[derive(Debug, Serialize)]
pub struct SarifConfiguration {
    pub level: &'static str,
}

#[derive(Debug, Serialize)]
pub struct SarifMessage {
    pub text: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SarifResult {
    pub rule_id: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_index: Option<usize>,
    pub level: &'static str,
    pub message: SarifMessage,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<SarifLocation>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related_locations: Vec<SarifLocation>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SarifLocation {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<usize>,
    pub physical_location: SarifPhysicalLocation,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<SarifMessage>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SarifPhysicalLocation {
    pub artifact_location: SarifArtifactLocation,
    pub region: SarifRegion,
}

#[derive(Debug, Serialize)]
pub struct SarifArtifactLocation {
    pub uri: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SarifRegion {
    pub start_line: u32,
    pub start_column: u32,
    pub end_line: u32,
    pub end_column: u32,
}

/// The SARIF log of `diagnostics`, in the order given.
pub fn sarif_log<'d>(
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
    sources: &SourceMap,
) -> SarifLog {
    let rules = RULES
        .iter()
        .map(|rule| SarifRule {
            id: rule.id,
            short_description: SarifMessage {
                text: rule.summary.to_owned(),
            },
            default_configuration: SarifConfiguration {
                level: level(rule.severity),
            },
        })
        .collect();
    let results = diagnostics
        .into_iter()
        .map(|diagnostic| result(diagnostic, sources))
        .collect();
    SarifLog {
        schema: SARIF_SCHEMA,
        version: "2.1.0",
        runs: vec![SarifRun {
            tool: SarifTool {
                driver: SarifDriver {
                    name: "driftless",
                    version: env!("CARGO_PKG_VERSION"),
                    rules,
                },
            },
            column_kind: "unicodeCodePoints",
            results,
        }],
    }
}

/// The SARIF log as pretty JSON text, ending with a newline.
pub fn sarif_string<'d>(
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
    sources: &SourceMap,
) -> String {
    super::json::to_pretty_string(&sarif_log(diagnostics, sources))
}

fn result(diagnostic: &Diagnostic, sources: &SourceMap) -> SarifResult {
    let mut message = diagnostic.message.clone();
    if let Some(app) = &diagnostic.app {
        message.push_str(&format!(" (app {app}"));
        if let Some(component) = &diagnostic.component {
            message.push_str(&format!(", component {component}"));
        }
        message.push(')');
    }
    SarifResult {
        rule_id: diagnostic.rule,
        rule_index: RULES.iter().position(|rule| rule.id == diagnostic.rule),
        level: level(diagnostic.severity),
        message: SarifMessage { text: message },
        locations: diagnostic
            .span
            .map(|span| location(span, None, None, sources))
            .into_iter()
            .collect(),
        related_locations: diagnostic
            .labels
            .iter()
            .enumerate()
            .map(|(index, label)| {
                location(
                    label.span,
                    Some(index),
                    Some(label.message.clone()),
                    sources,
                )
            })
            .collect(),
    }
}

fn location(
    span: Span,
    id: Option<usize>,
    message: Option<String>,
    sources: &SourceMap,
) -> SarifLocation {
    let start = sources.locate(span);
    let end = sources.locate(Span::new(span.file, span.end, span.end));
    // SARIF lines and columns are 1-based; a span the source map cannot place (line 0) is
    // clamped rather than emitting an invalid region.
    let start_line = start.line.max(1);
    let start_column = start.column.max(1);
    let (end_line, end_column) = if (end.line, end.column) < (start_line, start_column) {
        (start_line, start_column)
    } else {
        (end.line, end.column.max(1))
    };
    SarifLocation {
        id,
        physical_location: SarifPhysicalLocation {
            artifact_location: SarifArtifactLocation {
                uri: uri_of_path(&start.path),
            },
            region: SarifRegion {
                start_line,
                start_column,
                end_line,
                end_column,
            },
        },
        message: message.map(|text| SarifMessage { text }),
    }
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// A relative URI reference for a repository path: unreserved characters and `/` stay,
/// everything else is percent-encoded (RFC 3986).
fn uri_of_path(path: &str) -> String {
    let mut uri = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer::AppRef;

    #[test]
    fn results_have_rule_index_level_and_region() {
        let mut sources = SourceMap::new();
        let text = "metadata:\n  name: My_App\n";
        let file = sources.add("apps/my app.yaml", text);
        let start = text.find("My_App").unwrap() as u32;
        let diagnostic = Diagnostic::error(
            "invalid-name",
            "bad name",
            Some(Span::new(file, start, start + 6)),
        )
        .for_app(&AppRef {
            namespace: "default".into(),
            name: "My_App".into(),
        });
        let log = serde_json::to_value(sarif_log([&diagnostic], &sources)).unwrap();
        let result = &log["runs"][0]["results"][0];
        assert_eq!(result["ruleId"], "invalid-name");
        assert_eq!(
            log["runs"][0]["tool"]["driver"]["rules"]
                [result["ruleIndex"].as_u64().unwrap() as usize]["id"],
            "invalid-name"
        );
        assert_eq!(result["level"], "error");
        let location = &result["locations"][0]["physicalLocation"];
        assert_eq!(location["artifactLocation"]["uri"], "apps/my%20app.yaml");
        assert_eq!(location["region"]["startLine"], 2);
        assert_eq!(location["region"]["startColumn"], 9);
        assert_eq!(location["region"]["endColumn"], 15);
    }

    /// The output validates against the official SARIF 2.1.0 JSON schema (checked in at
    /// `analyzer/schemas/`, see its README for the source), formats included: every rule in
    /// the driver, results with and without a position, secondary labels, a built-in
    /// definition's path that needs percent-encoding, and a message with non-ASCII text.
    #[test]
    fn output_validates_against_the_sarif_2_1_0_schema() {
        let mut schema: serde_json::Value = serde_json::from_str(include_str!(
            "../../../analyzer/schemas/sarif-schema-2.1.0.json"
        ))
        .unwrap();
        // The published schema's `language` patterns have a stray `]`, which is not a valid
        // ECMA-262 regular expression, so the validator's own check of the schema (draft-07
        // `format: regex`) rejects them. Escape them in memory (the same language); our output
        // has no `language`. Everything else is the file as published.
        fn escape_bracket(value: &mut serde_json::Value) -> usize {
            const BROKEN: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
            match value {
                serde_json::Value::String(text) if text == BROKEN => {
                    *text = r"^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}\]?$".to_owned();
                    1
                }
                serde_json::Value::Array(items) => items.iter_mut().map(escape_bracket).sum(),
                serde_json::Value::Object(map) => map.values_mut().map(escape_bracket).sum(),
                _ => 0,
            }
        }
        assert_eq!(escape_bracket(&mut schema), 2);
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        let mut sources = SourceMap::new();
        let app_text = "metadata:\n  name: café\nspec: {}\n";
        let app_file = sources.add("apps/shop app.yaml", app_text);
        let builtin_file = sources.add("<builtin>/components/webservice.cue", "parameter: {}\n");
        let app = AppRef {
            namespace: "default".into(),
            name: "café".into(),
        };
        let start = app_text.find("café").unwrap() as u32;
        let end = start + "café".len() as u32;
        let diagnostics = [
            Diagnostic::error(
                "invalid-name",
                "`café` is not a DNS-1123 name",
                Some(Span::new(app_file, start, end)),
            )
            .for_app(&app)
            .with_label(Span::new(app_file, 0, 8), "declared here"),
            Diagnostic::warning("unknown-kind", "no position", None),
            Diagnostic::error("cue-error", "conflict", Some(Span::new(builtin_file, 0, 9)))
                .for_app(&app)
                .for_component("web"),
        ];
        let log = serde_json::from_str::<serde_json::Value>(&sarif_string(&diagnostics, &sources))
            .unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&log)
            .map(|error| format!("{error} at {}", error.instance_path()))
            .collect();
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(log["runs"][0]["results"].as_array().unwrap().len(), 3);
        // The validator is not vacuous: a level SARIF does not define is rejected.
        let mut broken = log.clone();
        broken["runs"][0]["results"][0]["level"] = "fatal".into();
        assert!(!validator.is_valid(&broken));
    }
}
