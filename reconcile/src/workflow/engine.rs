//! The scheduler. [`advance`] applies every transition that needs no effect (skips, `if`,
//! timeouts, suspensions, step-group completion) until nothing changes, then returns the
//! running steps whose effect the caller must run. The caller runs each [`Dispatch`] and
//! reports with [`record`]; a step whose effect is not done yet (a health gate not passed)
//! reports [`StepOutcome::Waiting`] and is dispatched again on the next call, so re-running a
//! dispatch must be idempotent (server-side apply is).
//!
//! Semantics mirrored from KubeVela's workflow (`kubevela/workflow` `pkg/executor`,
//! `pkg/tasks/custom`):
//! - StepByStep: a step waits for the previous step; DAG: only for its `dependsOn`. In both
//!   modes a step also waits for its `dependsOn`, for the steps producing its `inputs`, and for
//!   the steps its `if` reads.
//! - Without `if`, a step runs only when none of its dependencies failed; otherwise it is
//!   skipped and the skip propagates. `if: always` runs regardless; any other `if` decides.
//! - `timeout` counts from the step's first start; an expired step fails with reason
//!   `Timeout`, and an expired step group fails with its unfinished sub-steps.
//! - The workflow fails once every step is finished and any failed; the failure names the
//!   first failed leaf step and its reason.

use std::collections::BTreeMap;

use analyzer::model::StepMode;

use super::condition::Condition;
use super::duration::parse_duration;
use super::spec::{StepSpec, StepType, WorkflowSpec};
use super::state::{Failure, REASON_TIMEOUT, StepPhase, Timestamp, WorkflowPhase, WorkflowState};

/// A running step whose effect the caller must run now.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub step: String,
    pub step_type: StepType,
    /// The step's properties with its inputs written at their `parameterKey`s.
    pub properties: serde_json::Value,
    /// When the step first started, e.g. for a health gate's own bookkeeping.
    pub started_at: Timestamp,
}

/// What running a dispatched step's effect came to.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    /// Done. `result` is a JSON object whose top-level fields the step's `outputs[].valueFrom`
    /// expressions read (e.g. `{"output": {...}}`).
    Succeeded { result: serde_json::Value },
    /// Not done yet (objects applied but not healthy); dispatched again later.
    Waiting { message: String },
    /// Terminal failure.
    Failed { reason: String, message: String },
}

/// Error of [`resume`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("no step of the workflow is suspended")]
    NotSuspended,
    #[error("step {step:?} is not suspended")]
    StepNotSuspended { step: String },
}

/// Moves the workflow as far as it goes without effects and returns the effects to run.
pub fn advance(spec: &WorkflowSpec, state: &mut WorkflowState, now: Timestamp) -> Vec<Dispatch> {
    if state.is_finished() {
        return Vec::new();
    }
    // Each pass applies at least one transition or ends the loop; every transition moves a
    // step forward in Pending → Running/Suspending → finished, so the loop is bounded.
    while advance_level(spec, &spec.steps, spec.mode, None, state, now) {}
    let dispatches: Vec<Dispatch> = spec
        .all_steps()
        .filter(|step| is_effect(step))
        .filter(|step| {
            state
                .steps
                .get(&step.name)
                .is_some_and(|step_state| step_state.phase == StepPhase::Running)
        })
        .map(|step| Dispatch {
            step: step.name.clone(),
            step_type: step.step_type,
            properties: properties_with_inputs(step, state),
            started_at: state
                .steps
                .get(&step.name)
                .and_then(|step_state| step_state.started_at)
                .unwrap_or(now),
        })
        .collect();
    update_phase(spec, state, now, !dispatches.is_empty());
    dispatches
}

/// Records the outcome of a dispatched step. Outcomes for steps that are no longer running
/// (a timeout fired meanwhile, a stale report after a restart) are ignored.
pub fn record(
    spec: &WorkflowSpec,
    state: &mut WorkflowState,
    step_name: &str,
    outcome: StepOutcome,
    now: Timestamp,
) {
    let Some(step) = spec.find(step_name) else {
        return;
    };
    let running = state
        .steps
        .get(step_name)
        .is_some_and(|step_state| step_state.phase == StepPhase::Running);
    if !running {
        return;
    }
    match outcome {
        StepOutcome::Succeeded { result } => match evaluate_outputs(step, &result) {
            Ok(outputs) => {
                state.outputs.extend(outputs);
                finish(state, step_name, StepPhase::Succeeded, None, None, now);
            }
            Err(message) => finish(
                state,
                step_name,
                StepPhase::Failed,
                Some("OutputFailed"),
                Some(message),
                now,
            ),
        },
        StepOutcome::Waiting { message } => {
            if let Some(step_state) = state.steps.get_mut(step_name) {
                step_state.message = Some(message);
            }
        }
        StepOutcome::Failed { reason, message } => finish(
            state,
            step_name,
            StepPhase::Failed,
            Some(&reason),
            Some(message),
            now,
        ),
    }
}

/// Marks suspended steps resumed (`driftless resume`): the named one, or every suspended
/// step. Returns the names resumed. The next [`advance`] moves them on.
///
/// # Errors
/// Nothing (or not the named step) is suspended.
pub fn resume(state: &mut WorkflowState, step: Option<&str>) -> Result<Vec<String>, ResumeError> {
    let mut resumed = Vec::new();
    for (name, step_state) in &mut state.steps {
        if step_state.phase == StepPhase::Suspending && step.is_none_or(|wanted| wanted == name) {
            step_state.resumed = true;
            resumed.push(name.clone());
        }
    }
    // A deploy step whose placement rollout waits for approval between batches is running,
    // not suspended; resuming it approves its next batch.
    for (name, rollout) in &mut state.rollouts {
        let running = state
            .steps
            .get(name)
            .is_some_and(|step_state| step_state.phase == StepPhase::Running);
        if running && rollout.awaits_approval() && step.is_none_or(|wanted| wanted == name) {
            rollout.approve_next();
            resumed.push(format!("{name} (batch {} approved)", rollout.batch + 1));
        }
    }
    match (resumed.is_empty(), step) {
        (false, _) => Ok(resumed),
        (true, None) => Err(ResumeError::NotSuspended),
        (true, Some(step)) => Err(ResumeError::StepNotSuspended {
            step: step.to_owned(),
        }),
    }
}

/// Whether the caller runs this step type (the scheduler handles suspend and step groups).
fn is_effect(step: &StepSpec) -> bool {
    !matches!(step.step_type, StepType::Suspend | StepType::StepGroup)
}

/// One pass over sibling steps. Returns whether any state changed.
fn advance_level(
    spec: &WorkflowSpec,
    steps: &[StepSpec],
    mode: StepMode,
    parent: Option<&StepSpec>,
    state: &mut WorkflowState,
    now: Timestamp,
) -> bool {
    let mut changed = false;
    for (index, step) in steps.iter().enumerate() {
        let Some(phase) = state
            .steps
            .get(&step.name)
            .map(|step_state| step_state.phase)
        else {
            continue;
        };
        match phase {
            StepPhase::Pending => {
                changed |= start_if_ready(spec, steps, mode, index, state, now);
            }
            StepPhase::Running | StepPhase::Suspending => {
                if timed_out(step, state, now) {
                    fail_timeout(step, state, now);
                    changed = true;
                    continue;
                }
                changed |= progress_running(spec, step, phase, state, now);
            }
            StepPhase::Succeeded | StepPhase::Failed | StepPhase::Skipped => {}
        }
    }
    let _ = parent;
    changed
}

/// Starts, skips or fails a pending step whose dependencies are all finished.
fn start_if_ready(
    spec: &WorkflowSpec,
    steps: &[StepSpec],
    mode: StepMode,
    index: usize,
    state: &mut WorkflowState,
    now: Timestamp,
) -> bool {
    let step = &steps[index];
    let dependencies = dependencies(spec, steps, mode, index);
    let dependency_phases: Vec<(StepPhase, Option<&str>)> = dependencies
        .iter()
        .filter_map(|name| state.steps.get(name))
        .map(|step_state| (step_state.phase, step_state.reason.as_deref()))
        .collect();
    if dependency_phases
        .iter()
        .any(|(phase, _)| !phase.is_finished())
    {
        return false;
    }
    let blocked = dependency_phases.iter().any(|(phase, reason)| {
        *phase == StepPhase::Failed
            || (*phase == StepPhase::Skipped && *reason == Some(REASON_DEPENDENCY_FAILED))
    });
    let run = match &step.condition {
        Some(Condition::Always) => Ok(true),
        Some(condition) => condition
            .evaluate(&status_json(state), &inputs_json(step, state))
            .map_err(|error| error.to_string()),
        None => Ok(!blocked),
    };
    match run {
        Ok(true) => start(step, state, now),
        Ok(false) => {
            let reason = if step.condition.is_some() {
                REASON_IF_FALSE
            } else {
                REASON_DEPENDENCY_FAILED
            };
            finish(
                state,
                &step.name,
                StepPhase::Skipped,
                Some(reason),
                None,
                now,
            );
            skip_sub_steps(step, state, reason, now);
        }
        Err(message) => {
            finish(
                state,
                &step.name,
                StepPhase::Failed,
                Some("InvalidIf"),
                Some(message),
                now,
            );
            skip_sub_steps(step, state, REASON_DEPENDENCY_FAILED, now);
        }
    }
    true
}

const REASON_DEPENDENCY_FAILED: &str = "DependencyFailed";
const REASON_IF_FALSE: &str = "IfFalse";

fn start(step: &StepSpec, state: &mut WorkflowState, now: Timestamp) {
    let needs_approval = step.step_type == StepType::Deploy
        && step.properties.get("auto").and_then(|auto| auto.as_bool()) == Some(false);
    let phase = if step.step_type == StepType::Suspend || needs_approval {
        StepPhase::Suspending
    } else {
        StepPhase::Running
    };
    if let Some(step_state) = state.steps.get_mut(&step.name) {
        step_state.phase = phase;
        step_state.started_at = Some(now);
    }
}

/// Transitions of a running or suspended step that need no effect.
fn progress_running(
    spec: &WorkflowSpec,
    step: &StepSpec,
    phase: StepPhase,
    state: &mut WorkflowState,
    now: Timestamp,
) -> bool {
    let Some(step_state) = state.steps.get(&step.name) else {
        return false;
    };
    let started_at = step_state.started_at.unwrap_or(now);
    let resumed = step_state.resumed;
    match (step.step_type, phase) {
        (StepType::Suspend, StepPhase::Suspending) => {
            let elapsed = step
                .properties
                .get("duration")
                .and_then(|duration| duration.as_str())
                .and_then(|duration| parse_duration(duration).ok())
                .is_some_and(|duration| now.since(started_at) >= duration.as_secs());
            if resumed || elapsed {
                finish(state, &step.name, StepPhase::Succeeded, None, None, now);
                return true;
            }
            false
        }
        (StepType::Deploy, StepPhase::Suspending) if resumed => {
            if let Some(step_state) = state.steps.get_mut(&step.name) {
                step_state.phase = StepPhase::Running;
            }
            true
        }
        (StepType::StepGroup, StepPhase::Running) => {
            let mut changed =
                advance_level(spec, &step.sub_steps, spec.sub_mode, Some(step), state, now);
            let sub_phases: Vec<StepPhase> = step
                .sub_steps
                .iter()
                .filter_map(|sub_step| state.steps.get(&sub_step.name))
                .map(|sub_state| sub_state.phase)
                .collect();
            if sub_phases.iter().all(|phase| phase.is_finished()) {
                let failed = step
                    .sub_steps
                    .iter()
                    .find(|sub_step| {
                        state
                            .steps
                            .get(&sub_step.name)
                            .is_some_and(|sub_state| sub_state.phase == StepPhase::Failed)
                    })
                    .map(|sub_step| sub_step.name.clone());
                match failed {
                    Some(failed) => finish(
                        state,
                        &step.name,
                        StepPhase::Failed,
                        Some("SubStepFailed"),
                        Some(format!("sub-step {failed:?} failed")),
                        now,
                    ),
                    None => finish(state, &step.name, StepPhase::Succeeded, None, None, now),
                }
                changed = true;
            }
            changed
        }
        _ => false,
    }
}

/// The names a step waits for (see the module doc).
fn dependencies(
    spec: &WorkflowSpec,
    steps: &[StepSpec],
    mode: StepMode,
    index: usize,
) -> Vec<String> {
    let step = &steps[index];
    let mut names: Vec<String> = step.depends_on.clone();
    if mode == StepMode::StepByStep && index > 0 {
        names.push(steps[index - 1].name.clone());
    }
    for input in &step.inputs {
        if let Some(producer) = spec
            .all_steps()
            .find(|candidate| {
                candidate
                    .outputs
                    .iter()
                    .any(|output| output.name == input.from)
            })
            .filter(|producer| producer.name != step.name)
        {
            names.push(producer.name.clone());
        }
    }
    if let Some(condition) = &step.condition {
        names.extend(
            condition
                .referenced_steps()
                .into_iter()
                .filter(|name| *name != step.name),
        );
    }
    // A sub-step can wait on its own parent only through dependsOn misuse; ignore it rather
    // than deadlock.
    names.retain(|name| {
        !spec
            .find(name)
            .is_some_and(|target| target.sub_steps.iter().any(|sub| sub.name == step.name))
    });
    names.sort();
    names.dedup();
    names
}

fn timed_out(step: &StepSpec, state: &WorkflowState, now: Timestamp) -> bool {
    let Some(timeout) = step.timeout else {
        return false;
    };
    state
        .steps
        .get(&step.name)
        .and_then(|step_state| step_state.started_at)
        .is_some_and(|started_at| now.since(started_at) >= timeout.as_secs())
}

fn fail_timeout(step: &StepSpec, state: &mut WorkflowState, now: Timestamp) {
    let seconds = step.timeout.map(|timeout| timeout.as_secs()).unwrap_or(0);
    finish(
        state,
        &step.name,
        StepPhase::Failed,
        Some(REASON_TIMEOUT),
        Some(format!("step {:?} timed out after {seconds}s", step.name)),
        now,
    );
    for sub_step in &step.sub_steps {
        let Some(phase) = state.steps.get(&sub_step.name).map(|sub| sub.phase) else {
            continue;
        };
        match phase {
            StepPhase::Running | StepPhase::Suspending => finish(
                state,
                &sub_step.name,
                StepPhase::Failed,
                Some(REASON_TIMEOUT),
                Some(format!(
                    "step group {:?} timed out after {seconds}s",
                    step.name
                )),
                now,
            ),
            StepPhase::Pending => finish(
                state,
                &sub_step.name,
                StepPhase::Skipped,
                Some(REASON_DEPENDENCY_FAILED),
                None,
                now,
            ),
            _ => {}
        }
    }
}

fn skip_sub_steps(step: &StepSpec, state: &mut WorkflowState, reason: &str, now: Timestamp) {
    for sub_step in &step.sub_steps {
        finish(
            state,
            &sub_step.name,
            StepPhase::Skipped,
            Some(reason),
            None,
            now,
        );
    }
}

fn finish(
    state: &mut WorkflowState,
    name: &str,
    phase: StepPhase,
    reason: Option<&str>,
    message: Option<String>,
    now: Timestamp,
) {
    if let Some(step_state) = state.steps.get_mut(name) {
        step_state.phase = phase;
        step_state.finished_at = Some(now);
        step_state.reason = reason.map(str::to_owned);
        if message.is_some() {
            step_state.message = message;
        }
    }
}

fn update_phase(spec: &WorkflowSpec, state: &mut WorkflowState, now: Timestamp, dispatching: bool) {
    let top_finished = spec.steps.iter().all(|step| {
        state
            .steps
            .get(&step.name)
            .is_some_and(|step_state| step_state.phase.is_finished())
    });
    if top_finished {
        let failed_step = |leaf_only: bool| {
            spec.all_steps()
                .filter(|step| !leaf_only || step.step_type != StepType::StepGroup)
                .find_map(|step| {
                    let step_state = state.steps.get(&step.name)?;
                    (step_state.phase == StepPhase::Failed).then(|| Failure {
                        step: step.name.clone(),
                        reason: step_state.reason.clone().unwrap_or_default(),
                        message: step_state.message.clone().unwrap_or_default(),
                    })
                })
        };
        let failure = failed_step(true).or_else(|| failed_step(false));
        state.phase = if failure.is_some() {
            WorkflowPhase::Failed
        } else {
            WorkflowPhase::Succeeded
        };
        state.failure = failure;
        state.finished_at = Some(now);
        return;
    }
    let suspended = state
        .steps
        .values()
        .any(|step_state| step_state.phase == StepPhase::Suspending);
    state.phase = if !dispatching && suspended {
        WorkflowPhase::Suspending
    } else {
        WorkflowPhase::Executing
    };
}

/// `status` for `if`: every step's status object by name.
fn status_json(state: &WorkflowState) -> serde_json::Value {
    serde_json::Value::Object(
        state
            .steps
            .iter()
            .map(|(name, step_state)| (name.clone(), step_state.status_json()))
            .collect(),
    )
}

/// `inputs` for `if`: the step's inputs by output name, where produced.
fn inputs_json(step: &StepSpec, state: &WorkflowState) -> serde_json::Value {
    serde_json::Value::Object(
        step.inputs
            .iter()
            .filter_map(|input| Some((input.from.clone(), state.outputs.get(&input.from)?.clone())))
            .collect(),
    )
}

fn properties_with_inputs(step: &StepSpec, state: &WorkflowState) -> serde_json::Value {
    let mut properties = step.properties.clone();
    for input in &step.inputs {
        let (Some(key), Some(value)) = (&input.parameter_key, state.outputs.get(&input.from))
        else {
            continue;
        };
        set_path(&mut properties, key, value.clone());
    }
    properties
}

/// Sets `value` at the dotted `path`, creating objects on the way (KubeVela's
/// `parameterKey`, e.g. `spec.replicas`).
fn set_path(target: &mut serde_json::Value, path: &str, value: serde_json::Value) {
    let mut cursor = target;
    let segments: Vec<&str> = path.split('.').collect();
    for (position, segment) in segments.iter().enumerate() {
        if !cursor.is_object() {
            *cursor = serde_json::Value::Object(serde_json::Map::new());
        }
        let serde_json::Value::Object(map) = cursor else {
            return;
        };
        if position + 1 == segments.len() {
            map.insert((*segment).to_owned(), value);
            return;
        }
        cursor = map
            .entry((*segment).to_owned())
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    }
}

/// Evaluates the step's `outputs[].valueFrom` over `result`'s top-level fields.
fn evaluate_outputs(
    step: &StepSpec,
    result: &serde_json::Value,
) -> Result<BTreeMap<String, serde_json::Value>, String> {
    let mut outputs = BTreeMap::new();
    if step.outputs.is_empty() {
        return Ok(outputs);
    }
    let empty = serde_json::Map::new();
    let fields = result.as_object().unwrap_or(&empty);
    for output in &step.outputs {
        let mut source = String::new();
        for name in fields.keys() {
            source.push_str(&format!("{}: _\n", quote_label(name)));
        }
        source.push_str(&format!("driftlessOutput: ({})\n", output.value_from));
        let parsed = cue::parse_file(cue::FileId(0), &source);
        if let Some(error) = parsed.errors.first() {
            return Err(format!("output {:?}: {error}", output.name));
        }
        let span = cue::Span::new(cue::FileId(0), 0, 0);
        let injections: Vec<cue::Injection<'_>> = fields
            .iter()
            .map(|(field, value)| cue::Injection { field, value, span })
            .collect();
        let value = cue::Evaluator::new().evaluate(&[&parsed.file], &injections);
        let exported = value
            .lookup(&["driftlessOutput"])
            .ok_or_else(|| format!("output {:?}: no value", output.name))?
            .to_json()
            .map_err(|errors| {
                let joined: Vec<String> = errors.iter().map(ToString::to_string).collect();
                format!(
                    "output {:?} from {:?}: {}",
                    output.name,
                    output.value_from,
                    joined.join("; ")
                )
            })?;
        outputs.insert(output.name.clone(), exported);
    }
    Ok(outputs)
}

fn quote_label(name: &str) -> String {
    let plain = name.chars().all(|c| c.is_alphanumeric() || c == '_')
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_');
    if plain {
        name.to_owned()
    } else {
        serde_json::Value::String(name.to_owned()).to_string()
    }
}
