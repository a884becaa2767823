//! The `core.oam.dev/v1beta1` Application: components with traits, policies and a workflow.
//!
//! Properties stay untyped JSON: their schema is the definition's `parameter`, checked when the
//! template is evaluated. Unknown keys are accepted here and reported by the loader as
//! `unknown-field` warnings (see `crate::load::application`).

use indexmap::IndexMap;
use serde::Deserialize;

/// An Application document.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Application {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    pub metadata: Metadata,
    #[serde(default)]
    pub spec: ApplicationSpec,
}

/// `metadata` of an Application or a definition.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: IndexMap<String, String>,
    #[serde(default)]
    pub annotations: IndexMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSpec {
    #[serde(default)]
    pub components: Vec<Component>,
    #[serde(default)]
    pub policies: Vec<Policy>,
    #[serde(default)]
    pub workflow: Option<Workflow>,
}

/// One entry of `spec.components`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type")]
    pub component_type: String,
    /// Raw JSON, the template's `parameter`. `None` when absent or `null`.
    #[serde(default)]
    pub properties: Option<serde_json::Value>,
    /// `traits: null` is no traits (Go decodes a null list as empty; KubeVela accepts it).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub traits: Vec<Trait>,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub inputs: Vec<serde_json::Value>,
    #[serde(default)]
    pub outputs: Vec<serde_json::Value>,
    #[serde(default)]
    pub external_revision: Option<String>,
    /// Set by a `replication` policy on each copy of a replicated component (KubeVela's
    /// `ApplicationComponent.ReplicaKey`, never read from YAML): the template's
    /// `context.replicaKey`.
    #[serde(skip)]
    pub replica_key: Option<String>,
}

/// One entry of a component's `traits`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trait {
    #[serde(default, rename = "type")]
    pub trait_type: String,
    #[serde(default)]
    pub properties: Option<serde_json::Value>,
}

/// One entry of `spec.policies`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type")]
    pub policy_type: String,
    #[serde(default)]
    pub properties: Option<serde_json::Value>,
}

/// `spec.workflow`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    /// Name of a standalone `Workflow` object whose steps are used instead of `steps`.
    #[serde(default, rename = "ref")]
    pub workflow_ref: Option<String>,
    #[serde(default)]
    pub steps: Vec<WorkflowStep>,
    #[serde(default)]
    pub mode: Option<WorkflowMode>,
}

/// `spec.workflow.mode`: how top-level steps and the sub-steps of a step group run.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowMode {
    #[serde(default)]
    pub steps: Option<StepMode>,
    #[serde(default)]
    pub sub_steps: Option<StepMode>,
}

/// KubeVela's `StepByStep` and `DAG` execution modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum StepMode {
    StepByStep,
    #[serde(rename = "DAG")]
    Dag,
}

/// One workflow step (or sub-step of a `step-group`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStep {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type")]
    pub step_type: String,
    #[serde(default)]
    pub properties: Option<serde_json::Value>,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default, rename = "if")]
    pub if_condition: Option<String>,
    #[serde(default)]
    pub timeout: Option<String>,
    #[serde(default)]
    pub inputs: Vec<serde_json::Value>,
    #[serde(default)]
    pub outputs: Vec<serde_json::Value>,
    #[serde(default)]
    pub sub_steps: Vec<WorkflowStep>,
    #[serde(default)]
    pub meta: Option<WorkflowStepMeta>,
}

/// `meta` of a workflow step.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStepMeta {
    #[serde(default)]
    pub alias: Option<String>,
}

/// Known keys per level of an Application, for the `unknown-field` warning. Keys that
/// KubeVela's CRD accepts but we do not model (`scopes`, `status`) are listed so they do not
/// warn.
pub(crate) mod known_keys {
    pub(crate) const DOCUMENT: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
    pub(crate) const SPEC: &[&str] = &["components", "policies", "workflow"];
    pub(crate) const COMPONENT: &[&str] = &[
        "name",
        "type",
        "properties",
        "traits",
        "dependsOn",
        "inputs",
        "outputs",
        "externalRevision",
        "scopes",
    ];
    pub(crate) const TRAIT: &[&str] = &["type", "properties"];
    pub(crate) const POLICY: &[&str] = &["name", "type", "properties"];
    pub(crate) const WORKFLOW: &[&str] = &["ref", "steps", "mode"];
    pub(crate) const MODE: &[&str] = &["steps", "subSteps"];
    pub(crate) const STEP: &[&str] = &[
        "name",
        "type",
        "properties",
        "dependsOn",
        "if",
        "timeout",
        "inputs",
        "outputs",
        "subSteps",
        "meta",
    ];
}

/// A list that may be written as `null`.
fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}
