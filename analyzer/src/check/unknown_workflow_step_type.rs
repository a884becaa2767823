//! `unknown-workflow-step-type` (error): a workflow step whose `type` has no
//! WorkflowStepDefinition, in the repository or among KubeVela's built-in step types.
//!
//! KubeVela fails the workflow when it reaches such a step, after earlier steps have already
//! run. Step types that run only in the cluster (`notification`, `webhook`, ...) are known by
//! name: Driftless does not execute them but must not call them unknown.
//!
//! ```yaml
//! workflow:
//!   steps:
//!     - name: ship
//!       type: deploi          # error: unknown workflow step type
//! ```

use super::AppContext;
use crate::Diagnostic;
use crate::model::{DefinitionKind, WorkflowStep};

/// KubeVela's built-in WorkflowStepDefinition names (the `vela-templates` definitions and the
/// workflow engine's built-ins), known even without their templates.
const KUBEVELA_STEP_TYPES: &[&str] = &[
    "apply-app",
    "apply-application",
    "apply-component",
    "apply-deployment",
    "apply-object",
    "apply-terraform-config",
    "apply-terraform-provider",
    "build-push-image",
    "check-metrics",
    "clean-jobs",
    "collect-service-endpoints",
    "create-config",
    "delete-config",
    "depends-on-app",
    "deploy",
    "deploy-cloud-resource",
    "export-data",
    "export-service",
    "export2config",
    "export2secret",
    "generate-jdbc-connection",
    "list-config",
    "notification",
    "print-message-in-status",
    "read-app",
    "read-config",
    "read-object",
    "request",
    "restart-workflow",
    "share-cloud-resource",
    "step-group",
    "suspend",
    "vela-cli",
    "webhook",
];

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let Some(workflow) = &ctx.loaded.app.spec.workflow else {
        return;
    };
    check_steps(ctx, &workflow.steps, "/spec/workflow/steps", out);
}

fn check_steps(
    ctx: &AppContext<'_>,
    steps: &[WorkflowStep],
    pointer: &str,
    out: &mut Vec<Diagnostic>,
) {
    for (index, step) in steps.iter().enumerate() {
        let step_pointer = format!("{pointer}/{index}");
        let step_type = step.step_type.as_str();
        let base = step_type
            .split_once('@')
            .map_or(step_type, |(base, _)| base);
        let known = step_type.is_empty()
            || KUBEVELA_STEP_TYPES.contains(&base)
            || ctx
                .definitions
                .get(DefinitionKind::WorkflowStep, step_type)
                .is_some();
        if !known {
            out.push(Diagnostic::error(
                "unknown-workflow-step-type",
                format!(
                    "unknown workflow step type `{step_type}` (step `{}`)",
                    step.name
                ),
                Some(
                    ctx.loaded
                        .document
                        .positions
                        .value_span(&format!("{step_pointer}/type")),
                ),
            ));
        }
        check_steps(
            ctx,
            &step.sub_steps,
            &format!("{step_pointer}/subSteps"),
            out,
        );
    }
}
