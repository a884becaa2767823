//! The KubeVela data model as users write it: `core.oam.dev/v1beta1` Applications and the
//! definition kinds. Plain data with serde; positions live beside it in the loaded document
//! (see `crate::load`), addressed by JSON pointer.

mod application;
mod definition;

pub(crate) use application::known_keys as application_known_keys;
pub use application::{
    Application, ApplicationSpec, Component, Metadata, Policy, StepMode, Trait, Workflow,
    WorkflowMode, WorkflowStep, WorkflowStepMeta,
};
pub use definition::{Definition, DefinitionKind, TemplateReads, TraitAttributes, WorkloadType};
