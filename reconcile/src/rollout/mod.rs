//! Rollout in batches with a health gate between batches, pure like the workflow scheduler.
//!
//! - `plan.rs`: within a workload, KubeVela's rollout plan (`targetSize`, `numBatches` or
//!   `rolloutBatches[].replicas`, `batchPartition`, `paused`) turned into cumulative replica
//!   targets per batch.
//! - `placements.rs`: across placements, a `deploy` step's clusters split into batches (named
//!   canary clusters first, then a percentage, then the rest).
//! - `gate.rs`: the batch state machine both use. Each call moves at most one batch, with the
//!   health of the current batch and `now` as parameters, and says what to apply; a failed gate
//!   stops with the batch and the reason, and asks for a rollback when the plan wants one.
//!
//! Mechanism for a Deployment: a Deployment
//! has no partition, so the new revision runs as its own Deployment whose `spec.replicas` is the
//! batch's cumulative target while the previous revision's Deployment is scaled to
//! `targetSize - target`; the gate passes when the new one reports that many updated, ready
//! replicas. A StatefulSet uses `spec.updateStrategy.rollingUpdate.partition =
//! replicas - target`.

mod gate;
mod placements;
mod plan;

pub use gate::{BatchGate, BatchLimits, GateDecision, RolloutPhase, RolloutState, advance_rollout};
pub use placements::{
    PlacementBatchSpec, PlacementRollout, PlacementRolloutError, split_placements,
};
pub use plan::{RolloutError, RolloutPlan};
