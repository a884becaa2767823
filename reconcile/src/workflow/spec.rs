//! The checked workflow of one Application, and the validation that runs before anything is
//! applied.
//!
//! With no `spec.workflow.steps`, the default workflow is generated as KubeVela's step
//! generator does (`pkg/workflow/step/generator.go`, research §4.2): one `deploy` step per
//! topology policy (with every override policy before it), or one `deploy` step with all
//! overrides when there are overrides but no topology, or else one `apply-component` step per
//! component. Modes default to StepByStep for steps and DAG for sub-steps, as in KubeVela.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use analyzer::model::{Application, Policy, StepMode, WorkflowStep};

use super::condition::Condition;
use super::duration::parse_duration;

/// The step types Driftless executes. Others are reported by validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepType {
    Deploy,
    ApplyComponent,
    Suspend,
    StepGroup,
    Notification,
    ApplyObject,
    DependsOnApp,
}

impl StepType {
    /// The step type for a `type` string, if Driftless executes it.
    pub fn parse(text: &str) -> Option<StepType> {
        Some(match text {
            "deploy" => StepType::Deploy,
            "apply-component" => StepType::ApplyComponent,
            "suspend" => StepType::Suspend,
            "step-group" => StepType::StepGroup,
            "notification" => StepType::Notification,
            "apply-object" => StepType::ApplyObject,
            "depends-on-app" => StepType::DependsOnApp,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StepType::Deploy => "deploy",
            StepType::ApplyComponent => "apply-component",
            StepType::Suspend => "suspend",
            StepType::StepGroup => "step-group",
            StepType::Notification => "notification",
            StepType::ApplyObject => "apply-object",
            StepType::DependsOnApp => "depends-on-app",
        }
    }
}

/// `inputs[]` of a step: the named output `from`, written into the step's properties at the
/// dotted `parameter_key` (when given) and visible to `if` as `inputs.<from>`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepInput {
    pub from: String,
    pub parameter_key: Option<String>,
}

/// `outputs[]` of a step: the value at `value_from` in the step's result becomes output `name`.
/// `value_from` is a CUE expression over the result's top-level fields (KubeVela's
/// `valueFrom`, e.g. `output.status.phase`).
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    pub name: String,
    pub value_from: String,
}

/// One checked step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSpec {
    pub name: String,
    pub step_type: StepType,
    pub properties: serde_json::Value,
    pub depends_on: Vec<String>,
    pub condition: Option<Condition>,
    pub timeout: Option<Duration>,
    pub inputs: Vec<StepInput>,
    pub outputs: Vec<StepOutput>,
    pub sub_steps: Vec<StepSpec>,
}

/// A checked workflow: what the scheduler runs.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowSpec {
    pub mode: StepMode,
    pub sub_mode: StepMode,
    pub steps: Vec<StepSpec>,
}

impl WorkflowSpec {
    /// Every step and sub-step, parents before their children.
    pub fn all_steps(&self) -> impl Iterator<Item = &StepSpec> {
        self.steps
            .iter()
            .flat_map(|step| std::iter::once(step).chain(step.sub_steps.iter()))
    }

    /// The step named `name`, at any level.
    pub fn find(&self, name: &str) -> Option<&StepSpec> {
        self.all_steps().find(|step| step.name == name)
    }
}

/// What validation checks names against.
#[derive(Debug, Clone, Default)]
pub struct WorkflowContext<'a> {
    /// Policies visible to the app: its own, then standalone Policy objects of its namespace.
    pub policies: Vec<&'a Policy>,
    /// Cluster names from the agent's registry; `None` skips the cluster check.
    pub clusters: Option<BTreeSet<String>>,
}

/// A problem found before anything is applied. `rule` is a stable kebab-case id
/// (`unknown-workflow-step-type`, `dependency-cycle`, `unknown-policy`, `unknown-component`,
/// `unknown-cluster`, `unknown-dependency`, `invalid-if`, `invalid-timeout`, `unknown-input`,
/// `duplicate-workflow-step`, `invalid-rollout`, `invalid-parallelism`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub rule: &'static str,
    pub step: Option<String>,
    pub message: String,
}

/// Builds the workflow of `app` (its steps, or the generated default) and validates it. The
/// spec is returned only when there are no issues: a workflow with any issue must not start.
pub fn build_workflow(
    app: &Application,
    ctx: &WorkflowContext<'_>,
) -> (Option<WorkflowSpec>, Vec<Issue>) {
    let declared = app.spec.workflow.as_ref();
    let mode = declared
        .and_then(|workflow| workflow.mode.as_ref())
        .and_then(|mode| mode.steps)
        .unwrap_or(StepMode::StepByStep);
    let sub_mode = declared
        .and_then(|workflow| workflow.mode.as_ref())
        .and_then(|mode| mode.sub_steps)
        .unwrap_or(StepMode::Dag);
    let raw_steps = match declared {
        Some(workflow) if !workflow.steps.is_empty() => workflow.steps.clone(),
        _ => default_steps(app),
    };
    let mut issues = Vec::new();
    let component_names: BTreeSet<&str> = app
        .spec
        .components
        .iter()
        .map(|component| component.name.as_str())
        .collect();
    let mut checker = Checker {
        component_names,
        issues: &mut issues,
    };
    let steps: Vec<StepSpec> = raw_steps
        .iter()
        .filter_map(|step| checker.step(step, true))
        .collect();
    check_names(&steps, &mut issues);
    check_policies_clusters(ctx, &steps, &mut issues);
    if issues.is_empty() {
        (
            Some(WorkflowSpec {
                mode,
                sub_mode,
                steps,
            }),
            issues,
        )
    } else {
        (None, issues)
    }
}

/// KubeVela's generated steps when the Application declares none.
fn default_steps(app: &Application) -> Vec<WorkflowStep> {
    let policies = &app.spec.policies;
    let overrides: Vec<&str> = policies
        .iter()
        .filter(|policy| policy.policy_type == "override")
        .map(|policy| policy.name.as_str())
        .collect();
    let topologies: Vec<&str> = policies
        .iter()
        .filter(|policy| policy.policy_type == "topology")
        .map(|policy| policy.name.as_str())
        .collect();
    let deploy = |name: String, names: Vec<&str>| WorkflowStep {
        name,
        step_type: "deploy".to_owned(),
        properties: Some(serde_json::json!({ "policies": names })),
        ..WorkflowStep::default()
    };
    if !topologies.is_empty() {
        topologies
            .iter()
            .map(|topology| {
                let mut names = overrides.clone();
                names.push(topology);
                deploy(format!("deploy-{topology}"), names)
            })
            .collect()
    } else if !overrides.is_empty() {
        vec![deploy("deploy".to_owned(), overrides)]
    } else {
        app.spec
            .components
            .iter()
            .map(|component| WorkflowStep {
                name: component.name.clone(),
                step_type: "apply-component".to_owned(),
                properties: Some(serde_json::json!({ "component": component.name })),
                ..WorkflowStep::default()
            })
            .collect()
    }
}

struct Checker<'c> {
    component_names: BTreeSet<&'c str>,
    issues: &'c mut Vec<Issue>,
}

impl Checker<'_> {
    fn issue(&mut self, rule: &'static str, step: &str, message: String) {
        self.issues.push(Issue {
            rule,
            step: Some(step.to_owned()),
            message,
        });
    }

    fn step(&mut self, raw: &WorkflowStep, top_level: bool) -> Option<StepSpec> {
        let name = raw.name.clone();
        let Some(step_type) = StepType::parse(&raw.step_type) else {
            self.issue(
                "unknown-workflow-step-type",
                &name,
                format!(
                    "step {name:?} has type {:?}, which Driftless does not execute",
                    raw.step_type
                ),
            );
            return None;
        };
        if step_type == StepType::StepGroup && !top_level {
            self.issue(
                "unknown-workflow-step-type",
                &name,
                format!("sub-step {name:?} is a step-group; step groups do not nest"),
            );
            return None;
        }
        let properties = raw
            .properties
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        let condition = match raw.if_condition.as_deref().map(Condition::parse) {
            None => None,
            Some(Ok(condition)) => Some(condition),
            Some(Err(error)) => {
                self.issue("invalid-if", &name, format!("step {name:?}: {error}"));
                None
            }
        };
        let timeout = match raw.timeout.as_deref().map(parse_duration) {
            None => None,
            Some(Ok(timeout)) => Some(timeout),
            Some(Err(error)) => {
                self.issue("invalid-timeout", &name, format!("step {name:?}: {error}"));
                None
            }
        };
        if step_type == StepType::Suspend
            && let Some(duration) = properties.get("duration")
        {
            let valid = duration.as_str().map(parse_duration);
            if !matches!(valid, Some(Ok(_))) {
                self.issue(
                    "invalid-timeout",
                    &name,
                    format!("suspend step {name:?} has an invalid duration {duration}"),
                );
            }
        }
        if step_type == StepType::ApplyComponent {
            match properties.get("component").and_then(|value| value.as_str()) {
                Some(component) if self.component_names.contains(component) => {}
                Some(component) => self.issue(
                    "unknown-component",
                    &name,
                    format!("step {name:?} applies component {component:?}, which the app does not declare"),
                ),
                None => self.issue(
                    "unknown-component",
                    &name,
                    format!("apply-component step {name:?} names no component"),
                ),
            }
        }
        let inputs = raw
            .inputs
            .iter()
            .filter_map(|input| {
                let from = input.get("from")?.as_str()?.to_owned();
                let parameter_key = input
                    .get("parameterKey")
                    .and_then(|key| key.as_str())
                    .map(str::to_owned);
                Some(StepInput {
                    from,
                    parameter_key,
                })
            })
            .collect();
        let outputs = raw
            .outputs
            .iter()
            .filter_map(|output| {
                Some(StepOutput {
                    name: output.get("name")?.as_str()?.to_owned(),
                    value_from: output.get("valueFrom")?.as_str()?.to_owned(),
                })
            })
            .collect();
        let sub_steps = raw
            .sub_steps
            .iter()
            .filter_map(|sub_step| self.step(sub_step, false))
            .collect();
        Some(StepSpec {
            name,
            step_type,
            properties,
            depends_on: raw.depends_on.clone(),
            condition,
            timeout,
            inputs,
            outputs,
            sub_steps,
        })
    }
}

/// Unique names, known `dependsOn` targets, acyclic dependencies per level, `if` references
/// to existing steps, and inputs produced by some step.
fn check_names(steps: &[StepSpec], issues: &mut Vec<Issue>) {
    let mut seen = BTreeSet::new();
    let mut output_names = BTreeSet::new();
    for step in steps
        .iter()
        .flat_map(|step| std::iter::once(step).chain(step.sub_steps.iter()))
    {
        if step.name.is_empty() {
            issues.push(Issue {
                rule: "duplicate-workflow-step",
                step: None,
                message: format!("a {} step has no name", step.step_type.as_str()),
            });
        } else if !seen.insert(step.name.as_str()) {
            issues.push(Issue {
                rule: "duplicate-workflow-step",
                step: Some(step.name.clone()),
                message: format!("two steps are named {:?}", step.name),
            });
        }
        output_names.extend(step.outputs.iter().map(|output| output.name.as_str()));
    }
    for step in steps
        .iter()
        .flat_map(|step| std::iter::once(step).chain(step.sub_steps.iter()))
    {
        for condition_step in step
            .condition
            .as_ref()
            .map(Condition::referenced_steps)
            .unwrap_or_default()
        {
            if !seen.contains(condition_step.as_str()) {
                issues.push(Issue {
                    rule: "invalid-if",
                    step: Some(step.name.clone()),
                    message: format!(
                        "step {:?}: if reads the status of {condition_step:?}, which is not a step",
                        step.name
                    ),
                });
            }
        }
        for input in &step.inputs {
            if !output_names.contains(input.from.as_str()) {
                issues.push(Issue {
                    rule: "unknown-input",
                    step: Some(step.name.clone()),
                    message: format!(
                        "step {:?} takes input {:?}, which no step outputs",
                        step.name, input.from
                    ),
                });
            }
        }
    }
    check_level(steps, issues);
    for step in steps {
        check_level(&step.sub_steps, issues);
    }
}

/// `dependsOn` among siblings: known names and no cycle.
fn check_level(steps: &[StepSpec], issues: &mut Vec<Issue>) {
    let names: BTreeSet<&str> = steps.iter().map(|step| step.name.as_str()).collect();
    for step in steps {
        for dependency in &step.depends_on {
            if !names.contains(dependency.as_str()) {
                issues.push(Issue {
                    rule: "unknown-dependency",
                    step: Some(step.name.clone()),
                    message: format!(
                        "step {:?} depends on {dependency:?}, which is not a step at the same level",
                        step.name
                    ),
                });
            }
        }
    }
    if let Some(cycle) = find_cycle(steps) {
        issues.push(Issue {
            rule: "dependency-cycle",
            step: cycle.first().cloned(),
            message: format!(
                "workflow steps depend on each other in a cycle: {}",
                cycle.join(" -> ")
            ),
        });
    }
}

/// A dependency cycle among `steps`, as the names along it (first name repeated at the end).
pub(crate) fn find_cycle(steps: &[StepSpec]) -> Option<Vec<String>> {
    let edges: BTreeMap<&str, Vec<&str>> = steps
        .iter()
        .map(|step| {
            (
                step.name.as_str(),
                step.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    // Colours of a depth-first search: absent = unvisited, false = on the stack, true = done.
    let mut colour: BTreeMap<&str, bool> = BTreeMap::new();
    let mut path: Vec<&str> = Vec::new();
    fn visit<'a>(
        node: &'a str,
        edges: &BTreeMap<&'a str, Vec<&'a str>>,
        colour: &mut BTreeMap<&'a str, bool>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match colour.get(node) {
            Some(true) => return None,
            Some(false) => {
                let start = path.iter().position(|name| *name == node).unwrap_or(0);
                let mut cycle: Vec<String> = path[start..]
                    .iter()
                    .map(|name| (*name).to_owned())
                    .collect();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        colour.insert(node, false);
        path.push(node);
        for next in edges.get(node).into_iter().flatten() {
            if edges.contains_key(next)
                && let Some(cycle) = visit(next, edges, colour, path)
            {
                return Some(cycle);
            }
        }
        path.pop();
        colour.insert(node, true);
        None
    }
    for node in edges.keys() {
        if let Some(cycle) = visit(node, &edges, &mut colour, &mut path) {
            return Some(cycle);
        }
    }
    None
}

/// A deploy step's `rollout` (placement batches) and `parallelism` are usable, and the
/// clusters its batches name are registered and placed on by the step's topologies.
fn check_deploy_rollout(ctx: &WorkflowContext<'_>, step: &StepSpec, issues: &mut Vec<Issue>) {
    let mut issue = |rule: &'static str, message: String| {
        issues.push(Issue {
            rule,
            step: Some(step.name.clone()),
            message,
        });
    };
    if let Some(parallelism) = step.properties.get("parallelism")
        && parallelism.as_u64().is_none_or(|count| count == 0)
    {
        issue(
            "invalid-parallelism",
            format!(
                "deploy step {:?}: parallelism {parallelism} is not a positive integer",
                step.name
            ),
        );
    }
    let rollout = match crate::rollout::PlacementRollout::from_step_properties(&step.properties) {
        Ok(Some(rollout)) => rollout,
        Ok(None) => return,
        Err(error) => {
            issue(
                "invalid-rollout",
                format!("deploy step {:?}: {error}", step.name),
            );
            return;
        }
    };
    // The clusters the step's topologies name; `None` when one selects by label, so only
    // the registry can be checked.
    let mut placed: Option<BTreeSet<&str>> = Some(BTreeSet::new());
    for name in step
        .properties
        .get("policies")
        .and_then(|policies| policies.as_array())
        .into_iter()
        .flatten()
        .filter_map(|name| name.as_str())
    {
        let Some(policy) = ctx
            .policies
            .iter()
            .find(|policy| policy.name == name && policy.policy_type == "topology")
        else {
            continue;
        };
        let properties = policy.properties.as_ref();
        match properties.and_then(|properties| properties.get("clusters")) {
            Some(clusters) => {
                if let Some(placed) = placed.as_mut() {
                    placed.extend(
                        clusters
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|cluster| cluster.as_str()),
                    );
                }
            }
            None => placed = None,
        }
    }
    for cluster in rollout.named_clusters() {
        let registered = ctx
            .clusters
            .as_ref()
            .is_none_or(|clusters| clusters.contains(cluster));
        let on_step = placed
            .as_ref()
            .is_none_or(|placed| placed.contains(cluster));
        if !registered || !on_step {
            let why = if registered {
                "which none of the step's topology policies places the app on"
            } else {
                "which is not in the agent's cluster registry"
            };
            issue(
                "unknown-cluster",
                format!(
                    "deploy step {:?}: rollout batch names cluster {cluster:?}, {why}",
                    step.name
                ),
            );
        }
    }
}

/// Deploy steps name existing policies, and their rollouts registered clusters.
fn check_policies_clusters(ctx: &WorkflowContext<'_>, steps: &[StepSpec], issues: &mut Vec<Issue>) {
    for step in steps
        .iter()
        .flat_map(|step| std::iter::once(step).chain(step.sub_steps.iter()))
        .filter(|step| step.step_type == StepType::Deploy)
    {
        check_deploy_rollout(ctx, step, issues);
        let names = step
            .properties
            .get("policies")
            .and_then(|policies| policies.as_array())
            .into_iter()
            .flatten()
            .filter_map(|name| name.as_str());
        // A topology naming a cluster the registry lacks is no reason to refuse the workflow:
        // that placement is skipped with a warning (`fleet::unreachable_placements`) and the
        // others go on; the analyzer's `unknown-cluster` rule catches a misspelt name against
        // driftless.yaml.
        for name in names {
            if !ctx.policies.iter().any(|policy| policy.name == name) {
                issues.push(Issue {
                    rule: "unknown-policy",
                    step: Some(step.name.clone()),
                    message: format!(
                        "deploy step {:?} names policy {name:?}, which the app does not declare",
                        step.name
                    ),
                });
            }
        }
    }
}
