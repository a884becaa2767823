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
//! - `store.rs`: persisting the state in a ConfigMap per app (the trackers' ConfigMap store).
//! - `fleet.rs`: where deploy steps with topology policies put the app (registered,
//!   connected clusters, each placement's render with the step's overrides).
//! - `driver.rs`: the effectful loop that runs a workflow against a cluster: reads the state,
//!   advances, runs each step's effect through the apply path, records and stores.
//!
//! Nothing but `store.rs`, `notify.rs` and `driver.rs` talks to a cluster, a clock or the
//! network: the scheduler takes `now` and returns effects, which the driver runs and reports
//! back through `record`.

mod condition;
mod driver;
mod duration;
mod engine;
mod fleet;
mod notify;
mod spec;
mod state;
mod store;

pub use condition::{Condition, ConditionError};
pub use driver::{DriverOptions, WorkflowReport, now, run_workflow};
pub use duration::{DurationError, parse_duration};
pub use engine::{Dispatch, ResumeError, StepOutcome, advance, record, resume};
pub use fleet::{
    Fleet, FleetConnectError, PlannedTarget, StepTargets, Target, Unreachable, collect_departed,
    collection_failure, in_namespace, needs_placements, placed_clusters, placements_of,
    record_placements, step_targets, unreachable_placements,
};
pub use notify::send_notification;
pub use spec::{
    Issue, StepInput, StepOutput, StepSpec, StepType, WorkflowContext, WorkflowSpec, build_workflow,
};
pub use state::{Failure, StepPhase, StepState, Timestamp, WorkflowPhase, WorkflowState};
pub use store::{StoredWorkflow, WorkflowStore, WorkflowStoreError, workflow_state_name};

#[cfg(test)]
mod tests;
