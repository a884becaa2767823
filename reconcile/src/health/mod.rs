//! Health of live objects: one pure function per kind, from the live object's JSON to a
//! [`Health`] (gitops-engine's `pkg/health` shape). Built-in kinds are read through the
//! k8s-openapi types; kinds without a health rule have no health (`None`) and do not count
//! towards an app's health.
//!
//! Definitions' `healthPolicy` / `customStatus` CUE is evaluated against the same live objects
//! in `status`; [`of_app`] combines both per component and per app.

mod apps;
mod batch;
mod core;
mod other;
pub mod status;

pub use other::crd_established;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::plan::ObjectRef;
use crate::planner::{DesiredApp, LiveObjects, Observed};
use status::{ComponentHealth, ComponentStatus, LiveOutput};

/// How healthy an object is, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthStatus {
    Healthy,
    /// Working towards the desired state (rolling out, pending, waiting for an address).
    Progressing,
    /// The status could not be read.
    Unknown,
    /// Failed, or will not get there without help.
    Degraded,
}

/// One object's health, with a message for people when it is not healthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub status: HealthStatus,
    pub message: String,
}

impl HealthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Healthy => "healthy",
            HealthStatus::Progressing => "progressing",
            HealthStatus::Unknown => "unknown",
            HealthStatus::Degraded => "degraded",
        }
    }
}

impl Health {
    pub fn healthy() -> Health {
        Health {
            status: HealthStatus::Healthy,
            message: String::new(),
        }
    }

    pub fn progressing(message: impl Into<String>) -> Health {
        Health {
            status: HealthStatus::Progressing,
            message: message.into(),
        }
    }

    pub fn degraded(message: impl Into<String>) -> Health {
        Health {
            status: HealthStatus::Degraded,
            message: message.into(),
        }
    }

    pub fn unknown(message: impl Into<String>) -> Health {
        Health {
            status: HealthStatus::Unknown,
            message: message.into(),
        }
    }
}

/// The health of a live object, or `None` for kinds without a health rule.
pub fn health_of(live: &Value) -> Option<Health> {
    let object = ObjectRef::from_object(live).ok()?;
    let health = match (object.group(), object.kind.as_str()) {
        ("apps", "Deployment") => typed(live, apps::deployment),
        ("apps", "StatefulSet") => typed(live, apps::stateful_set),
        ("apps", "DaemonSet") => typed(live, apps::daemon_set),
        ("apps", "ReplicaSet") => typed(live, apps::replica_set),
        ("batch", "Job") => typed(live, batch::job),
        ("batch", "CronJob") => typed(live, batch::cron_job),
        ("", "Pod") => typed(live, core::pod),
        ("", "Service") => typed(live, core::service),
        ("", "PersistentVolumeClaim") => typed(live, core::persistent_volume_claim),
        ("", "Namespace") => typed(live, core::namespace),
        ("", "ConfigMap" | "Secret" | "ServiceAccount") => Health::healthy(),
        ("networking.k8s.io", "Ingress") => typed(live, other::ingress),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            typed(live, other::custom_resource_definition)
        }
        _ => return None,
    };
    Some(health)
}

/// The worst of several healths (`None` when there are none): an app is as healthy as its least
/// healthy object. The message lists the objects that are not healthy.
pub fn aggregate<'a>(
    healths: impl IntoIterator<Item = (&'a ObjectRef, &'a Health)>,
) -> Option<Health> {
    let mut worst: Option<HealthStatus> = None;
    let mut messages = Vec::new();
    for (object, health) in healths {
        worst = Some(worst.map_or(health.status, |worst| worst.max(health.status)));
        if health.status != HealthStatus::Healthy {
            messages.push(format!("{object}: {}", health.message));
        }
    }
    worst.map(|status| Health {
        status,
        message: messages.join("; "),
    })
}

/// One app's health: the worst of its components', with each component's own health and
/// custom status message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppHealth {
    pub health: Health,
    /// In render order; components nothing rates are absent.
    pub components: Vec<ComponentHealth>,
}

/// The health of an app's rendered objects as observed in `live`, with the status CUE of its
/// components (`statuses`, from [`status::from_application`]; components missing there are
/// rated by their objects' kinds only). `None` when nothing rates any component.
pub fn of_app(
    desired: &DesiredApp,
    live: &LiveObjects,
    statuses: &[ComponentStatus],
) -> Option<AppHealth> {
    let evaluator = cue::Evaluator::new();
    let mut components: Vec<&str> = Vec::new();
    for object in &desired.objects {
        if !components.contains(&object.component.as_str()) {
            components.push(&object.component);
        }
    }
    let mut rated = Vec::new();
    let mut failed = Vec::new();
    for component in components {
        let mut outputs = Vec::new();
        for object in desired
            .objects
            .iter()
            .filter(|object| object.component == component)
        {
            let live_object = match live.objects.get(&object.object_ref) {
                Some(Observed::Present { live, .. }) => Some(live),
                Some(Observed::Absent) | None => None,
                Some(Observed::Failed(message)) => {
                    failed.push((&object.object_ref, Health::unknown(message.clone())));
                    continue;
                }
            };
            outputs.push(LiveOutput {
                object: &object.object_ref,
                component,
                trait_type: object.trait_type.as_deref(),
                output_name: object.output_name.as_deref(),
                live: live_object,
            });
        }
        let unrated = ComponentStatus {
            name: component.to_owned(),
            component_type: String::new(),
            parameter: serde_json::Value::Object(serde_json::Map::new()),
            rules: status::StatusRules::default(),
            traits: Vec::new(),
        };
        let component_status = statuses
            .iter()
            .find(|status| status.name == component)
            .unwrap_or(&unrated);
        if let Some(health) =
            status::component_health(&evaluator, &desired.app, component_status, &outputs)
        {
            rated.push(health);
        }
    }
    let mut worst: Option<HealthStatus> = None;
    let mut messages = Vec::new();
    for component in &rated {
        worst = Some(worst.map_or(component.health.status, |worst| {
            worst.max(component.health.status)
        }));
        if component.health.status != HealthStatus::Healthy {
            messages.push(component.health.message.clone());
        }
    }
    for (object, health) in &failed {
        worst = Some(worst.map_or(health.status, |worst| worst.max(health.status)));
        messages.push(format!("{object}: {}", health.message));
    }
    worst.map(|status| AppHealth {
        health: Health {
            status,
            message: messages.join("; "),
        },
        components: rated,
    })
}

fn typed<T: DeserializeOwned>(live: &Value, rule: fn(&T) -> Health) -> Health {
    // Read in place: a copy of every live object first was a large share of rating 10,000
    // apps.
    match T::deserialize(live) {
        Ok(object) => rule(&object),
        Err(error) => Health::unknown(format!("cannot read the object: {error}")),
    }
}

#[cfg(test)]
mod tests;
