//! Definitions written as KubeVela CRs in YAML (`kind: ComponentDefinition` etc. with
//! `spec.schematic.cue.template`). The template is registered in the source map as a text
//! embedded in the YAML file, so CUE errors point at the right YAML line.

use serde::Deserialize;

use super::definition_cue::finish_definition;
use super::yaml::YamlDocument;
use crate::model::{DefinitionKind, TemplateReads, TraitAttributes, WorkloadType};
use crate::snapshot::Embedding;
use crate::{Definition, Diagnostic, SourceMap};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefinitionCr {
    #[serde(default)]
    metadata: crate::model::Metadata,
    #[serde(default)]
    spec: DefinitionSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefinitionSpec {
    #[serde(default)]
    workload: Option<WorkloadSpec>,
    #[serde(default)]
    schematic: Option<Schematic>,
    #[serde(default)]
    status: Option<StatusSpec>,
    #[serde(default)]
    applies_to_workloads: Vec<String>,
    #[serde(default)]
    conflicts_with: Vec<String>,
    #[serde(default)]
    pod_disruptive: bool,
    #[serde(default)]
    workload_ref_path: Option<String>,
    #[serde(default)]
    stage: Option<String>,
    /// A WorkloadDefinition's own type (`spec.definitionRef.name`).
    #[serde(default)]
    definition_ref: Option<serde_json::Value>,
    /// Legacy `spec.extension.template`.
    #[serde(default)]
    extension: Option<Extension>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadSpec {
    #[serde(default, rename = "type")]
    workload_type: Option<String>,
    #[serde(default)]
    definition: Option<WorkloadDefinitionRef>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadDefinitionRef {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Schematic {
    #[serde(default)]
    cue: Option<CueSchematic>,
}

#[derive(Debug, Default, Deserialize)]
struct CueSchematic {
    #[serde(default)]
    template: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Extension {
    #[serde(default)]
    template: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusSpec {
    #[serde(default)]
    health_policy: Option<String>,
    #[serde(default)]
    custom_status: Option<String>,
}

/// Loads one definition CR. `Err` when it cannot be identified (no name, malformed spec).
pub(crate) fn load_definition_cr(
    kind: DefinitionKind,
    parent: cue::FileId,
    document: &YamlDocument,
    source_text: &str,
    sources: &mut SourceMap,
    path: &str,
) -> Result<Definition, Diagnostic> {
    let positions = &document.positions;
    let cr: DefinitionCr = super::application::from_json_with_path(&document.value).map_err(
        |(pointer, message)| {
            Diagnostic::error(
                "invalid-field",
                format!("{}: {message}", kind.cr_kind()),
                Some(positions.value_span(&pointer)),
            )
        },
    )?;
    if cr.metadata.name.is_empty() {
        return Err(Diagnostic::error(
            "missing-field",
            format!("{} has no `metadata.name`", kind.cr_kind()),
            Some(positions.key_span("/metadata/name")),
        ));
    }
    let spec = cr.spec;
    let (template_pointer, template_text) = match (
        spec.schematic
            .and_then(|schematic| schematic.cue)
            .and_then(|cue| cue.template),
        spec.extension.and_then(|extension| extension.template),
    ) {
        (Some(text), _) => ("/spec/schematic/cue/template", Some(text)),
        (None, Some(text)) => ("/spec/extension/template", Some(text)),
        (None, None) => ("", None),
    };
    let template = template_text.map(|text| {
        let value_span = positions.value_span(template_pointer);
        let embedding = embedding_of(source_text, value_span.start as usize, parent);
        let file = sources.add_embedded(text.clone(), embedding);
        (file, text)
    });
    let workload = spec.workload.map(|workload| {
        let definition = workload.definition.unwrap_or_default();
        WorkloadType {
            workload_type: workload.workload_type,
            api_version: definition.api_version,
            kind: definition.kind,
        }
    });
    let _ = spec.definition_ref;
    let status = spec.status.unwrap_or_default();
    let skeleton = Definition {
        kind,
        name: cr.metadata.name,
        template: None,
        template_reads: TemplateReads::default(),
        workload,
        trait_attributes: TraitAttributes {
            applies_to_workloads: spec.applies_to_workloads,
            conflicts_with: spec.conflicts_with,
            pod_disruptive: spec.pod_disruptive,
            workload_ref_path: spec.workload_ref_path.filter(|path| !path.is_empty()),
            stage: spec.stage,
        },
        health_policy: crate::status::Snippet::non_empty(status.health_policy.as_deref()),
        custom_status: crate::status::Snippet::non_empty(status.custom_status.as_deref()),
        unsupported: None,
        span: positions.value_span("/metadata/name"),
        path: path.to_owned(),
        source_digest: digest(source_text),
        builtin: false,
        errors: Vec::new(),
    };
    Ok(match template {
        Some((file, text)) => {
            let parsed = cue::parse_file(file, &text);
            finish_definition(skeleton, parsed.file.clone(), parsed.errors)
        }
        None => skeleton,
    })
}

/// Where a block scalar's text sits in its YAML file: the value span starts at the `|` or `>`
/// indicator; the text starts on the next line, indented by the first content line's
/// indentation. For quoted or plain scalars the mapping is approximate (escapes and folding
/// shift columns): the text is placed at the scalar itself.
fn embedding_of(source: &str, value_start: usize, parent: cue::FileId) -> Embedding {
    let line_of =
        |offset: usize| source[..offset.min(source.len())].matches('\n').count() as u32 + 1;
    let rest = source.get(value_start..).unwrap_or_default();
    if rest.starts_with('|') || rest.starts_with('>') {
        let after_indicator = rest
            .find('\n')
            .map_or(source.len(), |newline| value_start + newline + 1);
        let indent = source[after_indicator.min(source.len())..]
            .lines()
            .find(|line| !line.trim().is_empty())
            .map_or(0, |line| {
                (line.len() - line.trim_start_matches(' ').len()) as u32
            });
        Embedding {
            parent,
            first_line: line_of(after_indicator),
            indent,
        }
    } else {
        let line_start = source[..value_start.min(source.len())]
            .rfind('\n')
            .map_or(0, |n| n + 1);
        let quote = u32::from(rest.starts_with('"') || rest.starts_with('\''));
        Embedding {
            parent,
            first_line: line_of(value_start),
            indent: source[line_start..value_start].chars().count() as u32 + quote,
        }
    }
}

/// SHA-256 of a definition's source text.
pub(crate) fn digest(text: &str) -> [u8; 32] {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(text.as_bytes());
    hasher.finalize().into()
}
