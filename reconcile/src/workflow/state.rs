//! The progress of one app's workflow at one revision. It is what the agent persists in the
//! cluster (see `agent::workflow_store`), so it derives serde: this is a storage format, not an
//! output contract. Step states are keyed by step name; KubeVela requires step names to be
//! unique across steps and sub-steps, and validation enforces it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Seconds since the Unix epoch. The scheduler never reads a clock: callers pass `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// Seconds elapsed since `earlier` (zero if `earlier` is later, e.g. after a clock step).
    pub fn since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// KubeVela's workflow phases (`executing`, `suspending`, `succeeded`, `failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WorkflowPhase {
    Executing,
    Suspending,
    Succeeded,
    Failed,
}

/// KubeVela's step phases, spelled as `status.<step>.phase` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StepPhase {
    Pending,
    Running,
    Suspending,
    Succeeded,
    Failed,
    Skipped,
}

impl StepPhase {
    /// Whether the step will not change any more.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            StepPhase::Succeeded | StepPhase::Failed | StepPhase::Skipped
        )
    }

    /// The word `if` expressions compare `phase` with.
    pub fn as_str(self) -> &'static str {
        match self {
            StepPhase::Pending => "pending",
            StepPhase::Running => "running",
            StepPhase::Suspending => "suspending",
            StepPhase::Succeeded => "succeeded",
            StepPhase::Failed => "failed",
            StepPhase::Skipped => "skipped",
        }
    }
}

/// One step's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepState {
    pub phase: StepPhase,
    /// When the step first started running; timeouts and suspend durations count from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// Machine reason of the last transition (`Timeout`, `DependencyFailed`, `IfFalse`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Set by `driftless resume` on a suspended step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

impl StepState {
    pub fn pending() -> StepState {
        StepState {
            phase: StepPhase::Pending,
            started_at: None,
            finished_at: None,
            reason: None,
            message: None,
            resumed: false,
        }
    }

    /// The `status.<step>` object `if` expressions see.
    pub(crate) fn status_json(&self) -> serde_json::Value {
        serde_json::json!({
            "phase": self.phase.as_str(),
            "message": self.message.clone().unwrap_or_default(),
            "reason": self.reason.clone().unwrap_or_default(),
            "succeeded": self.phase == StepPhase::Succeeded,
            "failed": self.phase == StepPhase::Failed,
            "skipped": self.phase == StepPhase::Skipped,
            "timeout": self.reason.as_deref() == Some(REASON_TIMEOUT),
        })
    }
}

/// Reason recorded on a step that exceeded its `timeout`.
pub(crate) const REASON_TIMEOUT: &str = "Timeout";

/// The step that failed the workflow, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub step: String,
    pub reason: String,
    pub message: String,
}

/// The whole workflow's progress for one app revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowState {
    /// The Git revision this progress belongs to. A new revision restarts the workflow.
    pub revision: String,
    pub phase: WorkflowPhase,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    pub steps: BTreeMap<String, StepState>,
    /// Named step outputs (`outputs[].name`), read by later steps' `inputs[].from`.
    #[serde(default)]
    pub outputs: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// Placement rollouts of deploy steps with `rollout.batches`, by step name: the batch a
    /// step is at survives restarts, and `driftless resume` approves the next one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rollouts: BTreeMap<String, crate::rollout::RolloutState>,
}

impl WorkflowState {
    /// A fresh state for `revision`, every step pending.
    pub fn new(spec: &super::WorkflowSpec, revision: &str, now: Timestamp) -> WorkflowState {
        let mut steps = BTreeMap::new();
        for step in spec.all_steps() {
            steps.insert(step.name.clone(), StepState::pending());
        }
        WorkflowState {
            revision: revision.to_owned(),
            phase: WorkflowPhase::Executing,
            started_at: now,
            finished_at: None,
            steps,
            outputs: BTreeMap::new(),
            failure: None,
            rollouts: BTreeMap::new(),
        }
    }

    /// The stored state if it belongs to `revision` and has the same steps, else a fresh one:
    /// KubeVela restarts the workflow when the application revision changes.
    pub fn resume_or_restart(
        stored: Option<WorkflowState>,
        spec: &super::WorkflowSpec,
        revision: &str,
        now: Timestamp,
    ) -> WorkflowState {
        match stored {
            Some(state)
                if state.revision == revision
                    && spec
                        .all_steps()
                        .all(|step| state.steps.contains_key(&step.name)) =>
            {
                state
            }
            _ => WorkflowState::new(spec, revision, now),
        }
    }

    /// Whether the workflow is done, successfully or not.
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, WorkflowPhase::Succeeded | WorkflowPhase::Failed)
    }

    /// The step's state. Every step of the spec the state was made for has one.
    pub fn step(&self, name: &str) -> Option<&StepState> {
        self.steps.get(name)
    }
}
