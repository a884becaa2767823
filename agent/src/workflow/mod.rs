//! KubeVela's workflow against clusters. The pure scheduler (`spec`, `condition`, `state`,
//! `engine`: `advance` takes `now` and returns the effects to run) lives in
//! `reconcile::workflow` and is re-exported here; this module runs its effects.
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

mod driver;
mod fleet;
mod notify;
mod store;

pub use reconcile::workflow::*;

pub use driver::{DriverOptions, WorkflowReport, now, run_workflow};
pub use fleet::{
    Fleet, FleetConnectError, PlannedTarget, StepTargets, Target, Unreachable, collect_departed,
    collection_failure, in_namespace, needs_placements, placed_clusters, placements_of,
    record_placements, step_targets, unreachable_placements,
};
pub use notify::send_notification;
pub use store::{StoredWorkflow, WorkflowStore, WorkflowStoreError, workflow_state_name};
