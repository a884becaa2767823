//! Scheduler tests on data: modes, dependencies, conditions, timeouts, suspension, inputs
//! and outputs, default workflow generation and validation.

use super::*;
use analyzer::model::Application;

fn app(yaml: &str) -> Application {
    serde_saphyr::from_str(yaml).unwrap()
}

fn spec_of(yaml: &str) -> WorkflowSpec {
    let application = app(yaml);
    let ctx = WorkflowContext {
        policies: application.spec.policies.iter().collect(),
        clusters: None,
    };
    let (spec, issues) = build_workflow(&application, &ctx);
    assert_eq!(issues, Vec::<Issue>::new());
    spec.unwrap()
}

fn issues_of(yaml: &str, clusters: Option<&[&str]>) -> Vec<(&'static str, String)> {
    let application = app(yaml);
    let ctx = WorkflowContext {
        policies: application.spec.policies.iter().collect(),
        clusters: clusters.map(|names| names.iter().map(|name| (*name).to_owned()).collect()),
    };
    let (spec, issues) = build_workflow(&application, &ctx);
    assert!(spec.is_none() || issues.is_empty());
    issues
        .into_iter()
        .map(|issue| (issue.rule, issue.message))
        .collect()
}

fn names(dispatches: &[Dispatch]) -> Vec<&str> {
    dispatches
        .iter()
        .map(|dispatch| dispatch.step.as_str())
        .collect()
}

fn ok() -> StepOutcome {
    StepOutcome::Succeeded {
        result: serde_json::json!({}),
    }
}

/// Runs the workflow to completion, succeeding every dispatch, and returns the dispatch
/// waves (the steps dispatched together on each call).
/// Runs `spec` to the end, every dispatched step succeeding at once, and asserts that the steps
/// were dispatched in exactly the `expected` waves; returns the final state.
fn expect_waves(spec: &WorkflowSpec, expected: &[&[&str]]) -> WorkflowState {
    let (waves, state) = waves(spec);
    assert_eq!(waves, expected);
    state
}

fn waves(spec: &WorkflowSpec) -> (Vec<Vec<String>>, WorkflowState) {
    let mut state = WorkflowState::new(spec, "r1", Timestamp(0));
    let mut all = Vec::new();
    for tick in 0..100 {
        let dispatches = advance(spec, &mut state, Timestamp(tick));
        if dispatches.is_empty() {
            break;
        }
        all.push(
            dispatches
                .iter()
                .map(|dispatch| dispatch.step.clone())
                .collect(),
        );
        for dispatch in dispatches {
            record(spec, &mut state, &dispatch.step, ok(), Timestamp(tick));
        }
    }
    (all, state)
}

const HEADER: &str = "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: demo, namespace: default}\n";

fn with_header(body: &str) -> String {
    format!("{HEADER}{body}")
}

#[test]
fn step_by_step_runs_in_order() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}, {name: b, type: webservice}]
  workflow:
    steps:
      - {name: one, type: apply-component, properties: {component: a}}
      - {name: two, type: apply-component, properties: {component: b}}
",
    ));
    let state = expect_waves(&spec, &[&["one"], &["two"]]);
    assert_eq!(state.phase, WorkflowPhase::Succeeded);
}

#[test]
fn dag_respects_depends_on() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    mode: {steps: DAG}
    steps:
      - {name: last, type: apply-component, properties: {component: a}, dependsOn: [mid]}
      - {name: mid, type: apply-component, properties: {component: a}, dependsOn: [first, other]}
      - {name: first, type: apply-component, properties: {component: a}}
      - {name: other, type: apply-component, properties: {component: a}}
",
    ));
    let state = expect_waves(&spec, &[&["first", "other"], &["mid"], &["last"]]);
    assert_eq!(state.phase, WorkflowPhase::Succeeded);
}

#[test]
fn step_group_sub_steps_default_to_dag_and_finish_the_group() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - name: group
        type: step-group
        subSteps:
          - {name: s1, type: apply-component, properties: {component: a}}
          - {name: s2, type: apply-component, properties: {component: a}, dependsOn: [s1]}
          - {name: s3, type: apply-component, properties: {component: a}}
      - {name: after, type: apply-component, properties: {component: a}}
",
    ));
    let state = expect_waves(&spec, &[&["s1", "s3"], &["s2"], &["after"]]);
    assert_eq!(state.step("group").unwrap().phase, StepPhase::Succeeded);
}

#[test]
fn sub_steps_step_by_step_mode() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    mode: {subSteps: StepByStep}
    steps:
      - name: group
        type: step-group
        subSteps:
          - {name: s1, type: apply-component, properties: {component: a}}
          - {name: s2, type: apply-component, properties: {component: a}}
",
    ));
    expect_waves(&spec, &[&["s1"], &["s2"]]);
}

#[test]
fn failure_skips_later_steps_except_always_and_matching_if() {
    let spec = spec_of(&with_header(
        r#"spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - {name: apply, type: apply-component, properties: {component: a}}
      - {name: next, type: apply-component, properties: {component: a}}
      - {name: cleanup, type: notification, if: always}
      - {name: on-fail, type: notification, if: 'status.apply.failed'}
      - {name: on-success, type: notification, if: 'status.apply.phase == "succeeded"'}
"#,
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(0))),
        vec!["apply"]
    );
    record(
        &spec,
        &mut state,
        "apply",
        StepOutcome::Failed {
            reason: "ApplyFailed".to_owned(),
            message: "forbidden".to_owned(),
        },
        Timestamp(1),
    );
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(1))),
        vec!["cleanup"]
    );
    assert_eq!(state.step("next").unwrap().phase, StepPhase::Skipped);
    record(&spec, &mut state, "cleanup", ok(), Timestamp(2));
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(2))),
        vec!["on-fail"]
    );
    record(&spec, &mut state, "on-fail", ok(), Timestamp(3));
    assert!(advance(&spec, &mut state, Timestamp(3)).is_empty());
    assert_eq!(state.step("on-success").unwrap().phase, StepPhase::Skipped);
    assert_eq!(state.phase, WorkflowPhase::Failed);
    let failure = state.failure.clone().unwrap();
    assert_eq!(
        (
            failure.step.as_str(),
            failure.reason.as_str(),
            failure.message.as_str()
        ),
        ("apply", "ApplyFailed", "forbidden")
    );
}

#[test]
fn timeout_fails_the_workflow_with_the_step_and_reason() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - {name: slow, type: apply-component, properties: {component: a}, timeout: 30s}
      - {name: never, type: apply-component, properties: {component: a}}
",
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(100));
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(100))),
        vec!["slow"]
    );
    let waiting = StepOutcome::Waiting {
        message: "0/1 ready".to_owned(),
    };
    record(&spec, &mut state, "slow", waiting.clone(), Timestamp(110));
    // Still running before the timeout: dispatched again.
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(129))),
        vec!["slow"]
    );
    record(&spec, &mut state, "slow", waiting, Timestamp(129));
    assert!(advance(&spec, &mut state, Timestamp(130)).is_empty());
    assert_eq!(state.phase, WorkflowPhase::Failed);
    let failure = state.failure.clone().unwrap();
    assert_eq!(failure.step, "slow");
    assert_eq!(failure.reason, "Timeout");
    assert_eq!(failure.message, "step \"slow\" timed out after 30s");
    assert_eq!(state.step("never").unwrap().phase, StepPhase::Skipped);
    // A late success report does not revive it.
    record(&spec, &mut state, "slow", ok(), Timestamp(131));
    assert_eq!(state.step("slow").unwrap().phase, StepPhase::Failed);
}

#[test]
fn timeout_condition_is_visible_to_if() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - {name: slow, type: apply-component, properties: {component: a}, timeout: 1m}
      - {name: alert, type: notification, if: status.slow.timeout}
",
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    advance(&spec, &mut state, Timestamp(0));
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(60))),
        vec!["alert"]
    );
}

#[test]
fn manual_suspend_waits_for_resume_and_survives_a_round_trip() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - {name: approve, type: suspend}
      - {name: ship, type: apply-component, properties: {component: a}}
",
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    assert!(advance(&spec, &mut state, Timestamp(0)).is_empty());
    assert_eq!(state.phase, WorkflowPhase::Suspending);
    assert!(advance(&spec, &mut state, Timestamp(10_000)).is_empty());
    // The state goes through its storage form, as across an agent restart.
    let stored = serde_json::to_string(&state).unwrap();
    let mut state: WorkflowState = serde_json::from_str(&stored).unwrap();
    assert_eq!(state.phase, WorkflowPhase::Suspending);
    assert_eq!(
        resume(&mut state, None).unwrap(),
        vec!["approve".to_owned()]
    );
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(10_001))),
        vec!["ship"]
    );
    assert_eq!(state.phase, WorkflowPhase::Executing);
    assert_eq!(
        resume(&mut state, Some("approve")),
        Err(ResumeError::StepNotSuspended {
            step: "approve".to_owned()
        })
    );
}

#[test]
fn suspend_with_duration_resumes_by_itself() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - {name: wait, type: suspend, properties: {duration: 1m30s}}
      - {name: ship, type: apply-component, properties: {component: a}}
",
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    assert!(advance(&spec, &mut state, Timestamp(0)).is_empty());
    assert!(advance(&spec, &mut state, Timestamp(89)).is_empty());
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(90))),
        vec!["ship"]
    );
}

#[test]
fn deploy_with_auto_false_waits_for_approval() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - {name: prod, type: deploy, properties: {auto: false}}
",
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    assert!(advance(&spec, &mut state, Timestamp(0)).is_empty());
    assert_eq!(state.phase, WorkflowPhase::Suspending);
    resume(&mut state, Some("prod")).unwrap();
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(1))),
        vec!["prod"]
    );
}

#[test]
fn outputs_flow_into_inputs_and_if() {
    let spec = spec_of(&with_header(
        r#"spec:
  components: [{name: a, type: webservice}]
  workflow:
    mode: {steps: DAG}
    steps:
      - name: consumer
        type: apply-object
        inputs: [{from: replicas, parameterKey: value.spec.replicas}]
        if: 'inputs.replicas > 2'
        properties: {value: {kind: ConfigMap}}
      - name: skipped
        type: notification
        inputs: [{from: replicas}]
        if: 'inputs.replicas > 5'
      - name: producer
        type: apply-component
        properties: {component: a}
        outputs: [{name: replicas, valueFrom: 'output.status.replicas + 1'}]
"#,
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    assert_eq!(
        names(&advance(&spec, &mut state, Timestamp(0))),
        vec!["producer"]
    );
    record(
        &spec,
        &mut state,
        "producer",
        StepOutcome::Succeeded {
            result: serde_json::json!({"output": {"status": {"replicas": 2}}}),
        },
        Timestamp(1),
    );
    let dispatches = advance(&spec, &mut state, Timestamp(1));
    assert_eq!(names(&dispatches), vec!["consumer"]);
    assert_eq!(
        dispatches[0].properties,
        serde_json::json!({"value": {"kind": "ConfigMap", "spec": {"replicas": 3}}})
    );
    assert_eq!(state.step("skipped").unwrap().phase, StepPhase::Skipped);
}

#[test]
fn failing_output_expression_fails_the_step() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - name: producer
        type: apply-component
        properties: {component: a}
        outputs: [{name: x, valueFrom: output.missing}]
",
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    advance(&spec, &mut state, Timestamp(0));
    record(
        &spec,
        &mut state,
        "producer",
        StepOutcome::Succeeded {
            result: serde_json::json!({"output": {}}),
        },
        Timestamp(1),
    );
    advance(&spec, &mut state, Timestamp(1));
    assert_eq!(state.phase, WorkflowPhase::Failed);
    assert_eq!(state.failure.unwrap().reason, "OutputFailed");
}

#[test]
fn step_group_timeout_fails_its_unfinished_sub_steps() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - name: group
        type: step-group
        timeout: 10s
        subSteps:
          - {name: s1, type: apply-component, properties: {component: a}}
          - {name: s2, type: apply-component, properties: {component: a}, dependsOn: [s1]}
",
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    assert_eq!(names(&advance(&spec, &mut state, Timestamp(0))), vec!["s1"]);
    assert!(advance(&spec, &mut state, Timestamp(10)).is_empty());
    assert_eq!(state.step("s1").unwrap().phase, StepPhase::Failed);
    assert_eq!(state.step("s2").unwrap().phase, StepPhase::Skipped);
    let failure = state.failure.unwrap();
    assert_eq!(
        (failure.step.as_str(), failure.reason.as_str()),
        ("s1", "Timeout")
    );
}

#[test]
fn new_revision_restarts_and_same_revision_resumes() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - {name: approve, type: suspend}
",
    ));
    let mut state = WorkflowState::new(&spec, "r1", Timestamp(0));
    advance(&spec, &mut state, Timestamp(0));
    let same = WorkflowState::resume_or_restart(Some(state.clone()), &spec, "r1", Timestamp(5));
    assert_eq!(same.step("approve").unwrap().phase, StepPhase::Suspending);
    let fresh = WorkflowState::resume_or_restart(Some(state), &spec, "r2", Timestamp(5));
    assert_eq!(fresh.step("approve").unwrap().phase, StepPhase::Pending);
    assert_eq!(fresh.revision, "r2");
}

#[test]
fn default_workflow_deploys_per_topology_with_overrides() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  policies:
    - {name: small, type: override, properties: {components: []}}
    - {name: east, type: topology, properties: {clusters: [east]}}
    - {name: west, type: topology, properties: {clusters: [west]}}
",
    ));
    let summary: Vec<(String, serde_json::Value)> = spec
        .steps
        .iter()
        .map(|step| (step.name.clone(), step.properties.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "deploy-east".to_owned(),
                serde_json::json!({"policies": ["small", "east"]})
            ),
            (
                "deploy-west".to_owned(),
                serde_json::json!({"policies": ["small", "west"]})
            ),
        ]
    );
}

#[test]
fn default_workflow_without_policies_applies_each_component() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}, {name: b, type: worker}]
",
    ));
    let summary: Vec<(&str, StepType)> = spec
        .steps
        .iter()
        .map(|step| (step.name.as_str(), step.step_type))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a", StepType::ApplyComponent),
            ("b", StepType::ApplyComponent)
        ]
    );
}

#[test]
fn default_workflow_with_only_overrides_is_one_deploy() {
    let spec = spec_of(&with_header(
        "spec:
  components: [{name: a, type: webservice}]
  policies: [{name: o, type: override, properties: {}}]
",
    ));
    assert_eq!(spec.steps.len(), 1);
    assert_eq!(
        spec.steps[0].properties,
        serde_json::json!({"policies": ["o"]})
    );
}

#[test]
fn validation_reports_bad_input_before_anything_runs() {
    let issues = issues_of(
        &with_header(
            r#"spec:
  components: [{name: a, type: webservice}]
  policies: [{name: place, type: topology, properties: {clusters: [east, mars]}}]
  workflow:
    mode: {steps: DAG}
    steps:
      - {name: one, type: deploi}
      - {name: two, type: deploy, properties: {policies: [place, nope]}}
      - {name: three, type: apply-component, properties: {component: ghost}, dependsOn: [four]}
      - {name: four, type: apply-component, properties: {component: a}, dependsOn: [three]}
      - {name: five, type: notification, if: 'status.one.phase == ', timeout: soon}
      - {name: six, type: notification, if: 'status.seven.failed', dependsOn: [zero]}
      - {name: six, type: notification, inputs: [{from: nothing}]}
"#,
        ),
        Some(&["east", "west"]),
    );
    let rules: Vec<&str> = issues.iter().map(|(rule, _)| *rule).collect();
    assert_eq!(
        rules,
        vec![
            "unknown-workflow-step-type",
            "unknown-component",
            "invalid-if",
            "invalid-timeout",
            "duplicate-workflow-step",
            "invalid-if",
            "unknown-input",
            "unknown-dependency",
            "dependency-cycle",
            "unknown-policy",
        ]
    );
    let cycle = &issues[8].1;
    assert_eq!(
        cycle,
        "workflow steps depend on each other in a cycle: four -> three -> four"
    );
    // A topology naming an unregistered cluster (`mars`) refuses nothing: that placement is
    // skipped with a warning (`fleet::unreachable_placements`).
    assert!(!issues.iter().any(|(_, message)| message.contains("mars")));
}

#[test]
fn sub_step_cycle_is_reported() {
    let issues = issues_of(
        &with_header(
            "spec:
  components: [{name: a, type: webservice}]
  workflow:
    steps:
      - name: g
        type: step-group
        subSteps:
          - {name: x, type: notification, dependsOn: [y]}
          - {name: y, type: notification, dependsOn: [x]}
",
        ),
        None,
    );
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].0, "dependency-cycle");
}

#[test]
fn conditions_parse_and_evaluate() {
    let condition =
        Condition::parse(r#"status["apply-a"].succeeded && inputs.env == "prod""#).unwrap();
    assert_eq!(condition.referenced_steps(), vec!["apply-a".to_owned()]);
    let status = serde_json::json!({"apply-a": {"succeeded": true}});
    assert_eq!(
        condition.evaluate(&status, &serde_json::json!({"env": "prod"})),
        Ok(true)
    );
    assert_eq!(
        condition.evaluate(&status, &serde_json::json!({"env": "dev"})),
        Ok(false)
    );
    assert!(matches!(
        condition.evaluate(&status, &serde_json::json!({})),
        Err(ConditionError::NotBoolean { .. })
    ));
    assert_eq!(Condition::parse(" always "), Ok(Condition::Always));
    assert!(matches!(
        Condition::parse("status.a.phase =="),
        Err(ConditionError::Syntax { .. })
    ));
}

#[test]
fn durations_follow_go() {
    use std::time::Duration;
    assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    assert!(parse_duration("10").is_err());
    assert!(parse_duration("-1s").is_err());
    assert!(parse_duration("1d").is_err());
}
