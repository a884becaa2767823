//! Definitions written as `.cue` definition files, KubeVela's `vela def` format:
//!
//! ```cue
//! import "strings"
//!
//! webservice: {
//!     type: "component"
//!     attributes: workload: definition: {apiVersion: "apps/v1", kind: "Deployment"}
//! }
//! template: {
//!     output: {...}
//!     parameter: {...}
//! }
//! ```
//!
//! The metadata struct is read from the syntax tree (it is literal data in practice; a
//! non-literal value there is ignored), so loading needs no evaluation. The template is the
//! `template` field's struct literal, turned into a file of its own with the file's imports.

use std::sync::Arc;

use cue::ast::{self, Decl, Expr, Label, StringPart};

use super::definition_yaml::digest;
use crate::model::{DefinitionKind, TemplateReads, TraitAttributes, WorkloadType};
use crate::{Definition, Diagnostic};

/// Loads a `.cue` definition file already registered as `file`. `Err` when the file is not a
/// definition file (no metadata field with a known `type`).
pub(crate) fn load_definition_file(
    file: cue::FileId,
    text: &str,
    path: &str,
    builtin: bool,
) -> Result<Definition, Diagnostic> {
    let parsed = cue::parse_file(file, text);
    let mut metadata = None;
    let mut template = None;
    for decl in &parsed.file.decls {
        let Decl::Field(field) = decl else { continue };
        let Some(label) = label_name(&field.label) else {
            continue;
        };
        if label == "template" {
            if let Expr::Struct(lit) = &field.value {
                template = Some(lit);
            }
            continue;
        }
        if metadata.is_none()
            && let Some(value) = literal_json(&field.value)
            && value
                .get("type")
                .and_then(serde_json::Value::as_str)
                .is_some()
        {
            metadata = Some((label, value, field.span));
        }
    }
    let Some((name, metadata, name_span)) = metadata else {
        // With syntax errors the metadata may simply not have parsed: report those instead.
        if let Some(error) = parsed.errors.first() {
            return Err(Diagnostic::error(
                "cue-syntax",
                error.message.clone(),
                error.span(),
            ));
        }
        return Err(Diagnostic::error(
            "missing-field",
            "not a definition file: no top-level `<name>: {type: ...}` metadata field",
            Some(parsed.file.span),
        ));
    };
    let cue_type = metadata["type"].as_str().unwrap_or_default();
    let Some(kind) = DefinitionKind::from_cue_type(cue_type) else {
        return Err(Diagnostic::error(
            "invalid-field",
            format!("definition `{name}` has unknown type `{cue_type}`"),
            Some(name_span),
        ));
    };
    let skeleton = skeleton(kind, name, &metadata, name_span, path, text, builtin);
    let template_file = template.map(|lit| ast::File {
        package: None,
        imports: parsed.file.imports.clone(),
        decls: lit.decls.clone(),
        span: lit.span,
        compile_checks: ast::CompileChecks::default(),
    });
    Ok(match template_file {
        Some(template_file) => finish_definition(skeleton, template_file, parsed.errors),
        None => {
            let mut definition = finish_definition(
                skeleton,
                ast::File {
                    package: None,
                    imports: Vec::new(),
                    decls: Vec::new(),
                    span: parsed.file.span,
                    compile_checks: ast::CompileChecks::default(),
                },
                parsed.errors,
            );
            definition.template = None;
            definition
        }
    })
}

/// A definition as its metadata describes it (attributes, workload, status snippets), before
/// its template is attached.
fn skeleton(
    kind: DefinitionKind,
    name: String,
    metadata: &serde_json::Value,
    name_span: cue::Span,
    path: &str,
    text: &str,
    builtin: bool,
) -> Definition {
    let attributes = metadata.get("attributes").cloned().unwrap_or_default();
    let strings = |key: &str| -> Vec<String> {
        attributes
            .get(key)
            .and_then(serde_json::Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| item.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let string = |value: Option<&serde_json::Value>| {
        value.and_then(serde_json::Value::as_str).map(str::to_owned)
    };
    let workload = attributes.get("workload").map(|workload| WorkloadType {
        workload_type: string(workload.get("type")),
        api_version: string(workload.pointer("/definition/apiVersion")),
        kind: string(workload.pointer("/definition/kind")),
    });
    Definition {
        kind,
        name,
        template: None,
        template_reads: TemplateReads::default(),
        workload,
        trait_attributes: TraitAttributes {
            applies_to_workloads: strings("appliesToWorkloads"),
            conflicts_with: strings("conflictsWith"),
            pod_disruptive: attributes
                .get("podDisruptive")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            workload_ref_path: string(attributes.get("workloadRefPath")).filter(|p| !p.is_empty()),
            stage: string(attributes.get("stage")),
        },
        health_policy: crate::status::Snippet::non_empty(
            string(attributes.pointer("/status/healthPolicy")).as_deref(),
        ),
        custom_status: crate::status::Snippet::non_empty(
            string(attributes.pointer("/status/customStatus")).as_deref(),
        ),
        unsupported: None,
        span: name_span,
        path: path.to_owned(),
        source_digest: digest(text),
        builtin,
        errors: Vec::new(),
    }
}

/// Attaches a parsed template to a definition: syntax errors become `cue-syntax` errors of the
/// definition, and provider imports mark it unsupported.
pub(crate) fn finish_definition(
    mut definition: Definition,
    template: ast::File,
    syntax_errors: Vec<cue::Error>,
) -> Definition {
    for error in syntax_errors {
        definition.errors.push(Diagnostic::error(
            "cue-syntax",
            format!(
                "{} definition `{}`: {}",
                definition.kind.noun(),
                definition.name,
                error.message
            ),
            error.span(),
        ));
    }
    if let Some(import) = template
        .imports
        .iter()
        .find(|import| import.path.starts_with("vela/"))
    {
        definition.unsupported = Some(format!(
            "{} definition `{}` imports the provider package `{}`, which needs a cluster; \
             it cannot be rendered offline",
            definition.kind.noun(),
            definition.name,
            import.path
        ));
    }
    // KubeVela special-cases this component type by name (`pkg/appfile/parser.go`): its
    // objects are read from the cluster, the template only describes the selector.
    if definition.kind == DefinitionKind::Component && definition.name == "ref-objects" {
        definition.unsupported = Some(
            "component type `ref-objects` reads existing objects from the cluster; \
             it cannot be rendered offline"
                .to_owned(),
        );
    }
    // KubeVela v1.11 rewrites legacy list arithmetic before compiling any template.
    let template = super::cue_upgrade::upgrade_list_arithmetic(template);
    definition.template_reads = crate::render::template_reads(&template);
    definition.template = Some(Arc::new(template));
    definition
}

fn label_name(label: &Label) -> Option<String> {
    match label {
        Label::Ident(ident) => Some(ident.name.clone()),
        Label::String(text, _) => Some(text.clone()),
        Label::Alias(_, inner) => label_name(inner),
        Label::Dynamic(..) | Label::Pattern(..) => None,
    }
}

/// A literal expression as JSON: strings without interpolation, numbers, booleans, null,
/// lists and structs of literals. Anything else is `None`; fields with non-literal values are
/// skipped inside structs.
pub(crate) fn literal_json(expr: &Expr) -> Option<serde_json::Value> {
    match expr {
        Expr::Null(_) => Some(serde_json::Value::Null),
        Expr::Bool(value, _) => Some(serde_json::Value::Bool(*value)),
        Expr::Number { text, .. } => {
            let clean = text.replace('_', "");
            clean
                .parse::<i64>()
                .ok()
                .map(serde_json::Value::from)
                .or_else(|| clean.parse::<f64>().ok().map(serde_json::Value::from))
        }
        Expr::String { parts, .. } => {
            let mut out = String::new();
            for part in parts {
                match part {
                    StringPart::Lit(text) => out.push_str(text),
                    StringPart::Interp(_) => return None,
                }
            }
            Some(serde_json::Value::String(out))
        }
        Expr::Paren(inner, _) => literal_json(inner),
        Expr::List(list) => list
            .elems
            .iter()
            .map(|elem| match elem {
                ast::ListElem::Expr(expr) => literal_json(expr),
                ast::ListElem::Comprehension(_) => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(serde_json::Value::Array),
        Expr::Struct(lit) => {
            let mut object = serde_json::Map::new();
            for decl in &lit.decls {
                if let Decl::Field(field) = decl
                    && let Some(label) = label_name(&field.label)
                    && let Some(value) = literal_json(&field.value)
                {
                    // `a: b: 1` and `a: c: 2` written separately merge like CUE would.
                    merge_into(&mut object, label, value);
                }
            }
            Some(serde_json::Value::Object(object))
        }
        _ => None,
    }
}

fn merge_into(
    object: &mut serde_json::Map<String, serde_json::Value>,
    key: String,
    value: serde_json::Value,
) {
    match (object.get_mut(&key), value) {
        (Some(serde_json::Value::Object(existing)), serde_json::Value::Object(incoming)) => {
            for (inner_key, inner_value) in incoming {
                merge_into(existing, inner_key, inner_value);
            }
        }
        (_, value) => {
            object.insert(key, value);
        }
    }
}
