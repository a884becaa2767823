//! Health of core (`v1`) kinds: Pod, Service, PersistentVolumeClaim, Namespace, following
//! gitops-engine's `health_pod.go`, `health_service.go` and `health_pvc.go`.

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Service};

use super::Health;

/// Container waiting reasons that will not resolve on their own.
const BROKEN_WAITING_REASONS: &[&str] = &[
    "CrashLoopBackOff",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

pub(super) fn pod(pod: &Pod) -> Health {
    let Some(status) = pod.status.as_ref() else {
        return Health::progressing("waiting for the pod to be scheduled");
    };
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    for container in containers {
        let waiting = container
            .state
            .as_ref()
            .and_then(|state| state.waiting.as_ref());
        if let Some(reason) = waiting.and_then(|waiting| waiting.reason.as_deref())
            && BROKEN_WAITING_REASONS.contains(&reason)
        {
            let message = waiting
                .and_then(|waiting| waiting.message.clone())
                .unwrap_or_default();
            return Health::degraded(
                format!("container {}: {reason} {message}", container.name)
                    .trim_end()
                    .to_owned(),
            );
        }
    }
    match status.phase.as_deref() {
        Some("Succeeded") => Health::healthy(),
        Some("Failed") => Health::degraded(
            status
                .message
                .clone()
                .unwrap_or_else(|| "pod failed".to_owned()),
        ),
        Some("Pending") => Health::progressing(
            status
                .message
                .clone()
                .unwrap_or_else(|| "pod is pending".to_owned()),
        ),
        Some("Running") => {
            let restart_never = pod
                .spec
                .as_ref()
                .and_then(|spec| spec.restart_policy.as_deref())
                .is_some_and(|policy| policy != "Always");
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True");
            if ready || restart_never {
                Health::healthy()
            } else {
                Health::progressing("pod is running but not ready")
            }
        }
        _ => Health::unknown(status.message.clone().unwrap_or_default()),
    }
}

pub(super) fn service(service: &Service) -> Health {
    let load_balancer =
        service.spec.as_ref().and_then(|spec| spec.type_.as_deref()) == Some("LoadBalancer");
    if !load_balancer {
        return Health::healthy();
    }
    let has_address = service
        .status
        .as_ref()
        .and_then(|status| status.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|ingress| !ingress.is_empty());
    if has_address {
        Health::healthy()
    } else {
        Health::progressing("waiting for a load balancer address")
    }
}

pub(super) fn persistent_volume_claim(claim: &PersistentVolumeClaim) -> Health {
    match claim
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
    {
        Some("Bound") => Health::healthy(),
        Some("Pending") => Health::progressing("waiting for the claim to be bound"),
        Some("Lost") => Health::degraded("the claim lost its volume"),
        _ => Health::unknown("the claim has no phase"),
    }
}

pub(super) fn namespace(namespace: &Namespace) -> Health {
    match namespace
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
    {
        Some("Terminating") => Health::progressing("namespace is terminating"),
        _ => Health::healthy(),
    }
}
