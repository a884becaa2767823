//! KubeVela's workflow, as a pure scheduler plus the data it needs.
//!
//! - `spec.rs`: the checked workflow (`WorkflowSpec`) built from an Application, including the
//!   default workflow KubeVela generates when none is given, and validation diagnostics raised
//!   before anything is applied.
//! - `condition.rs`: `if` expressions, evaluated with the native CUE evaluator over injected
//!   `status` and `inputs`.
//! - `state.rs`: the persisted progress of one app revision (`WorkflowState`).
//! - `engine.rs`: `advance` moves the workflow one step with `now` as a parameter and returns
//!   the effects to run; `record` stores an effect's outcome. Like gitops-engine's sync
//!   context, every call leaves the state resumable, so a restarted agent continues where the
//!   stored state says.
//!
//! Running the effects (the driver, the notification webhook, the state's ConfigMap, the fleet
//! of clusters) is the agent's (`agent::workflow`): the scheduler takes `now` and returns
//! effects, which the driver runs and reports back through `record`.

pub mod condition;
pub mod duration;
pub mod engine;
pub mod spec;
pub mod state;

pub use condition::{Condition, ConditionError};
pub use duration::{DurationError, parse_duration};
pub use engine::{Dispatch, ResumeError, StepOutcome, advance, record, resume};
pub use spec::{
    Issue, StepInput, StepOutput, StepSpec, StepType, WorkflowContext, WorkflowSpec, build_workflow,
};
pub use state::{Failure, StepPhase, StepState, Timestamp, WorkflowPhase, WorkflowState};

#[cfg(test)]
mod tests;
