//! Health of Ingresses and CustomResourceDefinitions (gitops-engine's `health_ingress.go`; a CRD
//! is healthy once the apiserver has established it).

use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::Health;

pub(super) fn ingress(ingress: &Ingress) -> Health {
    let has_address = ingress
        .status
        .as_ref()
        .and_then(|status| status.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|addresses| !addresses.is_empty());
    if has_address {
        Health::healthy()
    } else {
        Health::progressing("waiting for the ingress controller to assign an address")
    }
}

pub(super) fn custom_resource_definition(crd: &CustomResourceDefinition) -> Health {
    let conditions = crd
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref());
    let condition = |type_: &str| {
        conditions
            .into_iter()
            .flatten()
            .find(|condition| condition.type_ == type_)
    };
    if let Some(names) = condition("NamesAccepted")
        && names.status == "False"
    {
        return Health::degraded(names.message.clone().unwrap_or_default());
    }
    match condition("Established") {
        Some(established) if established.status == "True" => Health::healthy(),
        _ => Health::progressing("waiting for the CRD to be established"),
    }
}

/// True when a live CRD is established: custom resources of its kinds can be applied.
pub fn crd_established(live: &serde_json::Value) -> bool {
    serde_json::from_value::<CustomResourceDefinition>(live.clone())
        .is_ok_and(|crd| custom_resource_definition(&crd).status == super::HealthStatus::Healthy)
}
