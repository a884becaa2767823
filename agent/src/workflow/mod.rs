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
//! - `notify.rs`: the `notification` step's webhook POST (an effect the caller runs).
//! - `store.rs`: the one effectful part, persisting the state in a ConfigMap per app.
//!
//! Nothing else here talks to a cluster, a clock or the network: the effects (apply, notification
//! webhooks, health gates) run in the caller, which reports back through `record`.

mod condition;
mod duration;
mod engine;
mod notify;
mod spec;
mod state;
mod store;

pub use condition::{Condition, ConditionError};
pub use duration::{DurationError, parse_duration};
pub use engine::{Dispatch, ResumeError, StepOutcome, advance, record, resume};
pub use notify::send_notification;
pub use spec::{
    Issue, StepInput, StepOutput, StepSpec, StepType, WorkflowContext, WorkflowSpec, build_workflow,
};
pub use state::{Failure, StepPhase, StepState, Timestamp, WorkflowPhase, WorkflowState};
pub use store::{StoredWorkflow, WorkflowStore, WorkflowStoreError, workflow_state_name};

#[cfg(test)]
mod tests;
