//! Definitions: ComponentDefinition, TraitDefinition, PolicyDefinition,
//! WorkflowStepDefinition and WorkloadDefinition, in one shape whatever form they were written
//! in (a YAML CR with `spec.schematic.cue.template`, or a `.cue` definition file).

use std::sync::Arc;

use cue::Span;

use crate::Diagnostic;

/// Which kind of definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DefinitionKind {
    Component,
    Trait,
    Policy,
    WorkflowStep,
    Workload,
}

impl DefinitionKind {
    /// The CR kind (`ComponentDefinition`, ...).
    pub fn cr_kind(self) -> &'static str {
        match self {
            DefinitionKind::Component => "ComponentDefinition",
            DefinitionKind::Trait => "TraitDefinition",
            DefinitionKind::Policy => "PolicyDefinition",
            DefinitionKind::WorkflowStep => "WorkflowStepDefinition",
            DefinitionKind::Workload => "WorkloadDefinition",
        }
    }

    /// From a CR kind.
    pub fn from_cr_kind(kind: &str) -> Option<DefinitionKind> {
        Some(match kind {
            "ComponentDefinition" => DefinitionKind::Component,
            "TraitDefinition" => DefinitionKind::Trait,
            "PolicyDefinition" => DefinitionKind::Policy,
            "WorkflowStepDefinition" => DefinitionKind::WorkflowStep,
            "WorkloadDefinition" => DefinitionKind::Workload,
            _ => return None,
        })
    }

    /// From the `type` of a `.cue` definition file (`component`, `trait`, `policy`,
    /// `workflow-step`, `workload`).
    pub fn from_cue_type(kind: &str) -> Option<DefinitionKind> {
        Some(match kind {
            "component" => DefinitionKind::Component,
            "trait" => DefinitionKind::Trait,
            "policy" => DefinitionKind::Policy,
            "workflow-step" => DefinitionKind::WorkflowStep,
            "workload" => DefinitionKind::Workload,
            _ => return None,
        })
    }

    /// Lowercase word for messages (`component`, `trait`, ...).
    pub fn noun(self) -> &'static str {
        match self {
            DefinitionKind::Component => "component",
            DefinitionKind::Trait => "trait",
            DefinitionKind::Policy => "policy",
            DefinitionKind::WorkflowStep => "workflow step",
            DefinitionKind::Workload => "workload",
        }
    }
}

/// What a template can read of the `context` it is given (`cue::ast::File::may_read_fields`),
/// decided once when the definition is loaded so that rendering does not walk the template
/// per app. Everything is `true` (may read) until a template has been looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateReads {
    /// Any field of the context: a trait that reads none renders the same for every app.
    pub context: bool,
    /// `context.output` or `context.outputs` (traits: the workload and auxiliaries so far).
    pub output: bool,
    /// `context.components` (every component of the app as written).
    pub components: bool,
    /// `context.parameter` (the component's properties, also injected as `parameter`).
    pub parameter: bool,
}

impl Default for TemplateReads {
    fn default() -> TemplateReads {
        TemplateReads {
            context: true,
            output: true,
            components: true,
            parameter: true,
        }
    }
}

/// One definition, parsed once and shared by every app that uses it.
#[derive(Debug, Clone)]
pub struct Definition {
    pub kind: DefinitionKind,
    pub name: String,
    /// The CUE template as a file of its own: the template's imports and declarations. `None`
    /// for definitions without a CUE schematic (a WorkloadDefinition, or a YAML CR with no
    /// template).
    pub template: Option<Arc<cue::ast::File>>,
    /// What the template can read of its `context`, decided once from its syntax.
    pub template_reads: TemplateReads,
    /// `spec.workload` of a ComponentDefinition: the workload's type.
    pub workload: Option<WorkloadType>,
    /// Trait-only attributes.
    pub trait_attributes: TraitAttributes,
    /// `spec.status.healthPolicy` (CUE), not evaluated by rendering.
    pub health_policy: Option<crate::status::Snippet>,
    /// `spec.status.customStatus` (CUE), not evaluated by rendering.
    pub custom_status: Option<crate::status::Snippet>,
    /// Set when the definition cannot be rendered offline (it imports a `vela/*` provider
    /// package): the reason, for an `unsupported-definition` diagnostic.
    pub unsupported: Option<String>,
    /// Where the definition is declared (its name), for diagnostics.
    pub span: Span,
    /// The path it was loaded from (`<builtin>/...` for built-ins).
    pub path: String,
    /// SHA-256 of the definition's source text, part of an app's input hash.
    pub source_digest: [u8; 32],
    /// True for the definitions embedded in the binary.
    pub builtin: bool,
    /// Problems with the definition itself (CUE syntax errors in its template). An app that
    /// uses it is blocked with these.
    pub errors: Vec<Diagnostic>,
}

/// `spec.workload` of a ComponentDefinition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadType {
    /// `spec.workload.type` (`autodetects.core.oam.dev` for templates that decide themselves).
    pub workload_type: Option<String>,
    /// `spec.workload.definition.apiVersion`.
    pub api_version: Option<String>,
    /// `spec.workload.definition.kind`.
    pub kind: Option<String>,
}

/// The attributes of a TraitDefinition that affect validation and rendering.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraitAttributes {
    pub applies_to_workloads: Vec<String>,
    pub conflicts_with: Vec<String>,
    pub pod_disruptive: bool,
    /// When set, the workload's `{apiVersion, kind, name}` is written at this dotted path of
    /// every trait output (KubeVela's `SetOAMContract`).
    pub workload_ref_path: Option<String>,
    pub stage: Option<String>,
}
