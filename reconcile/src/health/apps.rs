//! Health of `apps/v1` workloads, following gitops-engine's `health_deployment.go`,
//! `health_statefulset.go`, `health_daemonset.go` and `health_replicaset.go`.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};

use super::Health;

pub(super) fn deployment(deployment: &Deployment) -> Health {
    let spec = deployment.spec.as_ref();
    if spec.and_then(|spec| spec.paused) == Some(true) {
        return Health::progressing("deployment is paused");
    }
    let Some(status) = deployment.status.as_ref() else {
        return Health::progressing("waiting for the deployment controller");
    };
    let generation = deployment.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return Health::progressing(
            "waiting for rollout to finish: observed deployment generation less than desired generation",
        );
    }
    let deadline_exceeded = status.conditions.iter().flatten().any(|condition| {
        condition.type_ == "Progressing"
            && condition.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    if deadline_exceeded {
        return Health::degraded(format!(
            "deployment {:?} exceeded its progress deadline",
            deployment.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    let desired = spec.and_then(|spec| spec.replicas).unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    let total = status.replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    if updated < desired {
        return Health::progressing(format!(
            "waiting for rollout to finish: {updated} out of {desired} new replicas have been updated"
        ));
    }
    if total > updated {
        return Health::progressing(format!(
            "waiting for rollout to finish: {} old replicas are pending termination",
            total - updated
        ));
    }
    if available < updated {
        return Health::progressing(format!(
            "waiting for rollout to finish: {available} of {updated} updated replicas are available"
        ));
    }
    Health::healthy()
}

pub(super) fn stateful_set(stateful_set: &StatefulSet) -> Health {
    let Some(status) = stateful_set.status.as_ref() else {
        return Health::progressing("waiting for the statefulset controller");
    };
    let generation = stateful_set.metadata.generation.unwrap_or(0);
    if status
        .observed_generation
        .is_none_or(|observed| observed < generation)
    {
        return Health::progressing("waiting for statefulset spec update to be observed");
    }
    let spec = stateful_set.spec.as_ref();
    let desired = spec.and_then(|spec| spec.replicas).unwrap_or(1);
    let ready = status.ready_replicas.unwrap_or(0);
    if ready < desired {
        return Health::progressing(format!("waiting for {} pods to be ready", desired - ready));
    }
    let strategy = spec.and_then(|spec| spec.update_strategy.as_ref());
    if strategy.and_then(|strategy| strategy.type_.as_deref()) == Some("OnDelete") {
        return Health::healthy();
    }
    let partition = strategy
        .and_then(|strategy| strategy.rolling_update.as_ref())
        .and_then(|rolling| rolling.partition)
        .unwrap_or(0);
    if partition > 0 {
        let updated = status.updated_replicas.unwrap_or(0);
        if updated < desired - partition {
            return Health::progressing(format!(
                "waiting for partitioned roll out to finish: {updated} out of {} new pods have been updated",
                desired - partition
            ));
        }
        return Health::healthy();
    }
    if status.update_revision != status.current_revision {
        return Health::progressing("waiting for rolling update to complete");
    }
    Health::healthy()
}

pub(super) fn daemon_set(daemon_set: &DaemonSet) -> Health {
    let Some(status) = daemon_set.status.as_ref() else {
        return Health::progressing("waiting for the daemonset controller");
    };
    let generation = daemon_set.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return Health::progressing("waiting for daemon set spec update to be observed");
    }
    let on_delete = daemon_set
        .spec
        .as_ref()
        .and_then(|spec| spec.update_strategy.as_ref())
        .and_then(|strategy| strategy.type_.as_deref())
        == Some("OnDelete");
    if on_delete {
        return Health::healthy();
    }
    let desired = status.desired_number_scheduled;
    let updated = status.updated_number_scheduled.unwrap_or(0);
    if updated < desired {
        return Health::progressing(format!(
            "waiting for daemon set rollout to finish: {updated} out of {desired} new pods have been updated"
        ));
    }
    let available = status.number_available.unwrap_or(0);
    if available < desired {
        return Health::progressing(format!(
            "waiting for daemon set rollout to finish: {available} of {desired} updated pods are available"
        ));
    }
    Health::healthy()
}

pub(super) fn replica_set(replica_set: &ReplicaSet) -> Health {
    let Some(status) = replica_set.status.as_ref() else {
        return Health::progressing("waiting for the replicaset controller");
    };
    let generation = replica_set.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return Health::progressing(
            "waiting for rollout to finish: observed replica set generation less than desired generation",
        );
    }
    let failure = status
        .conditions
        .iter()
        .flatten()
        .find(|condition| condition.type_ == "ReplicaFailure" && condition.status == "True");
    if let Some(failure) = failure {
        return Health::degraded(failure.message.clone().unwrap_or_default());
    }
    let desired = replica_set
        .spec
        .as_ref()
        .and_then(|spec| spec.replicas)
        .unwrap_or(1);
    let available = status.available_replicas.unwrap_or(0);
    if available < desired {
        return Health::progressing(format!(
            "waiting for rollout to finish: {available} out of {desired} replicas are available"
        ));
    }
    Health::healthy()
}
