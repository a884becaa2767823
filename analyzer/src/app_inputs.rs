//! What a plan reads of an app's manifest besides its rendered objects ([`AppInputs`]), taken
//! from the Application as the render loaded it: nothing downstream parses a manifest again,
//! and an app the render could load always has its inputs.

use std::sync::Arc;

use crate::Definitions;
use crate::model::{Application, Policy};
use crate::status::{ComponentStatus, component_statuses};

/// One app's resource policies, its components' status inputs and, when it may be deployed
/// through a workflow, its Application. Small typed data: an app's properties are kept only
/// where a status snippet reads them, and the whole Application only for workflow apps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppInputs {
    policies: Vec<Policy>,
    statuses: Vec<ComponentStatus>,
    workflow: Option<Arc<Application>>,
}

impl AppInputs {
    /// The inputs of `application` (as loaded: before overrides), with the status CUE of
    /// `definitions`.
    pub(crate) fn of(application: &Application, definitions: &Definitions) -> AppInputs {
        AppInputs {
            policies: application.spec.policies.clone(),
            statuses: component_statuses(&application.spec.components, definitions),
            workflow: may_run_workflow(application).then(|| Arc::new(application.clone())),
        }
    }

    /// `spec.policies`, as written.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// Per component, what its health reads besides its live objects.
    pub fn statuses(&self) -> &[ComponentStatus] {
        &self.statuses
    }

    /// The Application, when it may be deployed through a workflow: it declares workflow
    /// steps, a topology or override policy, or a `rollout` trait. Whether it is (a rollout
    /// trait must be valid) is the agent's call.
    pub fn workflow(&self) -> Option<&Application> {
        self.workflow.as_deref()
    }
}

fn may_run_workflow(application: &Application) -> bool {
    let spec = &application.spec;
    spec.workflow
        .as_ref()
        .is_some_and(|workflow| !workflow.steps.is_empty())
        || spec
            .policies
            .iter()
            .any(|policy| matches!(policy.policy_type.as_str(), "topology" | "override"))
        || spec.components.iter().any(|component| {
            component
                .traits
                .iter()
                .any(|component_trait| component_trait.trait_type == "rollout")
        })
}
