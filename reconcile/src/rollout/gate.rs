//! The batch state machine with a health gate between batches. The caller applies the current
//! batch (idempotently), observes its health, and calls [`advance_rollout`] with it; the
//! decision says whether to wait, move on to the next batch, hold (partition, pause, approval),
//! finish, or stop (and roll back). The state is plain data the caller persists with the
//! workflow state, so a restarted agent resumes at the same batch.

use serde::{Deserialize, Serialize};

use crate::workflow::Timestamp;

/// Health of the current batch, from `agent::health` on the live objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchGate {
    /// Every object of the batch is healthy (for a workload: the batch's updated replicas are
    /// ready).
    Healthy,
    /// Not there yet.
    Progressing { message: String },
    /// Failed for good (crash loop, failed condition).
    Unhealthy { reason: String },
}

/// Limits of one rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchLimits {
    pub n_batches: usize,
    /// Hold after this batch index (`batchPartition`).
    pub partition: Option<usize>,
    /// Hold before the next batch (`paused`).
    pub paused: bool,
    /// Hold after every batch until approved (`driftless resume`).
    pub pause_between_batches: bool,
    /// Seconds a batch may stay progressing before its gate fails.
    pub gate_timeout_secs: Option<u64>,
    pub rollback_on_failure: bool,
}

/// Where a rollout stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "phase")]
pub enum RolloutPhase {
    Rolling,
    /// Healthy but not going on; `approval`: until `driftless resume` approves the next
    /// batch (the other holds, `batchPartition` and `paused`, end by a change in Git).
    Holding {
        reason: String,
        #[serde(default)]
        approval: bool,
    },
    Succeeded,
    Failed {
        batch: usize,
        reason: String,
    },
}

/// Persisted rollout progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutState {
    /// Index of the batch being rolled out.
    pub batch: usize,
    pub phase: RolloutPhase,
    pub batch_started_at: Timestamp,
    /// Batches approved to start when `pause_between_batches` (batch 0 needs none).
    #[serde(default)]
    pub approved_through: usize,
}

/// What the caller does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    /// Apply batch `batch` (a new one just started).
    Apply { batch: usize },
    /// Keep batch `batch` applied and check again later.
    Wait { batch: usize, message: String },
    /// Batch `batch` is healthy but the rollout may not go on yet.
    Hold { batch: usize, reason: String },
    /// Every batch is done and healthy.
    Done,
    /// The gate of `batch` failed: stop; roll back to the previous revision if `rollback`.
    Stop {
        batch: usize,
        reason: String,
        rollback: bool,
    },
}

impl RolloutState {
    /// A rollout about to apply its first batch.
    pub fn new(now: Timestamp) -> RolloutState {
        RolloutState {
            batch: 0,
            phase: RolloutPhase::Rolling,
            batch_started_at: now,
            approved_through: 0,
        }
    }

    /// Approves the next batch (`driftless resume` on a rollout held between batches).
    pub fn approve_next(&mut self) {
        self.approved_through = self.approved_through.max(self.batch + 1);
    }

    /// Whether the rollout holds until `driftless resume` approves its next batch.
    pub fn awaits_approval(&self) -> bool {
        matches!(self.phase, RolloutPhase::Holding { approval: true, .. })
            && self.approved_through <= self.batch
    }
}

/// Moves the rollout by at most one batch. See the module doc.
pub fn advance_rollout(
    state: &mut RolloutState,
    limits: &BatchLimits,
    gate: BatchGate,
    now: Timestamp,
) -> GateDecision {
    match &state.phase {
        RolloutPhase::Succeeded => return GateDecision::Done,
        RolloutPhase::Failed { batch, reason } => {
            return GateDecision::Stop {
                batch: *batch,
                reason: reason.clone(),
                rollback: limits.rollback_on_failure,
            };
        }
        RolloutPhase::Rolling | RolloutPhase::Holding { .. } => {}
    }
    let batch = state.batch;
    match gate {
        BatchGate::Unhealthy { reason } => fail(state, limits, reason),
        BatchGate::Progressing { message } => {
            let expired = limits
                .gate_timeout_secs
                .is_some_and(|timeout| now.since(state.batch_started_at) >= timeout);
            if expired {
                let seconds = limits.gate_timeout_secs.unwrap_or(0);
                fail(
                    state,
                    limits,
                    format!("batch {batch} not healthy after {seconds}s: {message}"),
                )
            } else {
                state.phase = RolloutPhase::Rolling;
                GateDecision::Wait { batch, message }
            }
        }
        BatchGate::Healthy => {
            if batch + 1 >= limits.n_batches {
                state.phase = RolloutPhase::Succeeded;
                return GateDecision::Done;
            }
            let hold = if limits.partition.is_some_and(|partition| batch >= partition) {
                Some((
                    format!("batchPartition holds the rollout after batch {batch}"),
                    false,
                ))
            } else if limits.paused {
                Some(("the rollout is paused".to_owned(), false))
            } else if limits.pause_between_batches && state.approved_through <= batch {
                Some((format!("batch {} waits for approval", batch + 1), true))
            } else {
                None
            };
            if let Some((reason, approval)) = hold {
                state.phase = RolloutPhase::Holding {
                    reason: reason.clone(),
                    approval,
                };
                return GateDecision::Hold { batch, reason };
            }
            state.batch = batch + 1;
            state.batch_started_at = now;
            state.phase = RolloutPhase::Rolling;
            GateDecision::Apply { batch: batch + 1 }
        }
    }
}

fn fail(state: &mut RolloutState, limits: &BatchLimits, reason: String) -> GateDecision {
    state.phase = RolloutPhase::Failed {
        batch: state.batch,
        reason: reason.clone(),
    };
    GateDecision::Stop {
        batch: state.batch,
        reason,
        rollback: limits.rollback_on_failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(n_batches: usize) -> BatchLimits {
        BatchLimits {
            n_batches,
            partition: None,
            paused: false,
            pause_between_batches: false,
            gate_timeout_secs: Some(60),
            rollback_on_failure: true,
        }
    }

    fn progressing() -> BatchGate {
        BatchGate::Progressing {
            message: "1/2 ready".to_owned(),
        }
    }

    #[test]
    fn each_batch_waits_for_its_gate() {
        let limits = limits(3);
        let mut state = RolloutState::new(Timestamp(0));
        assert!(matches!(
            advance_rollout(&mut state, &limits, progressing(), Timestamp(1)),
            GateDecision::Wait { batch: 0, .. }
        ));
        assert_eq!(
            advance_rollout(&mut state, &limits, BatchGate::Healthy, Timestamp(2)),
            GateDecision::Apply { batch: 1 }
        );
        assert!(matches!(
            advance_rollout(&mut state, &limits, progressing(), Timestamp(3)),
            GateDecision::Wait { batch: 1, .. }
        ));
        assert_eq!(
            advance_rollout(&mut state, &limits, BatchGate::Healthy, Timestamp(4)),
            GateDecision::Apply { batch: 2 }
        );
        assert_eq!(
            advance_rollout(&mut state, &limits, BatchGate::Healthy, Timestamp(5)),
            GateDecision::Done
        );
        assert_eq!(state.phase, RolloutPhase::Succeeded);
    }

    #[test]
    fn gate_timeout_stops_with_batch_and_reason_and_rollback() {
        let limits = limits(3);
        let mut state = RolloutState::new(Timestamp(0));
        advance_rollout(&mut state, &limits, BatchGate::Healthy, Timestamp(10));
        let decision = advance_rollout(&mut state, &limits, progressing(), Timestamp(70));
        assert_eq!(
            decision,
            GateDecision::Stop {
                batch: 1,
                reason: "batch 1 not healthy after 60s: 1/2 ready".to_owned(),
                rollback: true
            }
        );
        // Stays stopped whatever the health says later.
        assert!(matches!(
            advance_rollout(&mut state, &limits, BatchGate::Healthy, Timestamp(80)),
            GateDecision::Stop { batch: 1, .. }
        ));
    }

    #[test]
    fn unhealthy_stops_at_once() {
        let mut state = RolloutState::new(Timestamp(0));
        let decision = advance_rollout(
            &mut state,
            &limits(2),
            BatchGate::Unhealthy {
                reason: "CrashLoopBackOff".to_owned(),
            },
            Timestamp(1),
        );
        assert!(matches!(decision, GateDecision::Stop { batch: 0, .. }));
    }

    #[test]
    fn partition_pause_and_approval_hold() {
        let mut with_partition = limits(3);
        with_partition.partition = Some(0);
        let mut state = RolloutState::new(Timestamp(0));
        assert!(matches!(
            advance_rollout(
                &mut state,
                &with_partition,
                BatchGate::Healthy,
                Timestamp(1)
            ),
            GateDecision::Hold { batch: 0, .. }
        ));

        let mut approval = limits(2);
        approval.pause_between_batches = true;
        let mut state = RolloutState::new(Timestamp(0));
        assert!(matches!(
            advance_rollout(&mut state, &approval, BatchGate::Healthy, Timestamp(1)),
            GateDecision::Hold { batch: 0, .. }
        ));
        assert!(state.awaits_approval());
        state.approve_next();
        assert!(!state.awaits_approval());
        assert_eq!(
            advance_rollout(&mut state, &approval, BatchGate::Healthy, Timestamp(2)),
            GateDecision::Apply { batch: 1 }
        );

        let mut paused = limits(2);
        paused.paused = true;
        let mut state = RolloutState::new(Timestamp(0));
        assert!(matches!(
            advance_rollout(&mut state, &paused, BatchGate::Healthy, Timestamp(1)),
            GateDecision::Hold { batch: 0, .. }
        ));
    }
}
