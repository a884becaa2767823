//! `unknown-dependency` (error): a `dependsOn` entry that names no component (for a
//! component) or no workflow step (for a step).
//!
//! KubeVela waits for the dependency forever: the app never becomes ready.
//!
//! ```yaml
//! components:
//!   - name: api
//!     type: webservice
//!     dependsOn: [databse]      # error: no component `databse`
//! ```

use super::AppContext;
use crate::Diagnostic;
use crate::model::WorkflowStep;

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let positions = &ctx.loaded.document.positions;
    let components = &ctx.loaded.app.spec.components;
    for (index, component) in components.iter().enumerate() {
        for (dep_index, dependency) in component.depends_on.iter().enumerate() {
            if components.iter().any(|other| other.name == *dependency) {
                continue;
            }
            out.push(
                Diagnostic::error(
                    "unknown-dependency",
                    format!(
                        "component `{}` depends on `{dependency}`, which is not a component of \
                         this app",
                        component.name
                    ),
                    Some(
                        positions
                            .value_span(&format!("/spec/components/{index}/dependsOn/{dep_index}")),
                    ),
                )
                .for_component(&component.name),
            );
        }
    }
    let Some(workflow) = &ctx.loaded.app.spec.workflow else {
        return;
    };
    let mut names = Vec::new();
    collect_names(&workflow.steps, &mut names);
    check_steps(ctx, &workflow.steps, "/spec/workflow/steps", &names, out);
}

fn collect_names<'a>(steps: &'a [WorkflowStep], names: &mut Vec<&'a str>) {
    for step in steps {
        names.push(&step.name);
        collect_names(&step.sub_steps, names);
    }
}

fn check_steps(
    ctx: &AppContext<'_>,
    steps: &[WorkflowStep],
    pointer: &str,
    names: &[&str],
    out: &mut Vec<Diagnostic>,
) {
    for (index, step) in steps.iter().enumerate() {
        let step_pointer = format!("{pointer}/{index}");
        for (dep_index, dependency) in step.depends_on.iter().enumerate() {
            if names.contains(&dependency.as_str()) {
                continue;
            }
            out.push(Diagnostic::error(
                "unknown-dependency",
                format!(
                    "workflow step `{}` depends on `{dependency}`, which is not a step of this \
                     workflow",
                    step.name
                ),
                Some(
                    ctx.loaded
                        .document
                        .positions
                        .value_span(&format!("{step_pointer}/dependsOn/{dep_index}")),
                ),
            ));
        }
        check_steps(
            ctx,
            &step.sub_steps,
            &format!("{step_pointer}/subSteps"),
            names,
            out,
        );
    }
}
