//! Health rules on live objects written as the apiserver returns them.

use super::*;
use serde_json::json;

fn status_of(live: Value) -> (HealthStatus, String) {
    let health = health_of(&live).expect("the kind has a health rule");
    (health.status, health.message)
}

fn deployment(replicas: i64, status: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team", "generation": 2},
        "spec": {"replicas": replicas, "selector": {}, "template": {}},
        "status": status
    })
}

#[test]
fn deployment_is_healthy_once_every_replica_is_updated_and_available() {
    let ready = deployment(
        3,
        json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3, "readyReplicas": 3}),
    );
    assert_eq!(status_of(ready).0, HealthStatus::Healthy);

    let rolling = deployment(
        3,
        json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 1}),
    );
    assert_eq!(
        status_of(rolling),
        (
            HealthStatus::Progressing,
            "waiting for rollout to finish: 1 of 3 updated replicas are available".to_owned()
        )
    );

    let stale = deployment(
        3,
        json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
    );
    assert_eq!(status_of(stale).0, HealthStatus::Progressing);

    let stuck = deployment(
        3,
        json!({"observedGeneration": 2, "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
        ]}),
    );
    assert_eq!(status_of(stuck).0, HealthStatus::Degraded);
}

#[test]
fn stateful_set_waits_for_ready_pods_and_the_update_revision() {
    let base = |status: Value| {
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "generation": 1},
            "spec": {"replicas": 2, "selector": {}, "serviceName": "db", "template": {}},
            "status": status
        })
    };
    assert_eq!(
        status_of(base(
            json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 1})
        ))
        .0,
        HealthStatus::Progressing
    );
    assert_eq!(status_of(base(json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "currentRevision": "a", "updateRevision": "b"}))).0, HealthStatus::Progressing);
    assert_eq!(status_of(base(json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "currentRevision": "b", "updateRevision": "b"}))).0, HealthStatus::Healthy);
}

#[test]
fn daemon_set_waits_for_available_pods() {
    let base = |available: i64| {
        json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "generation": 1},
            "spec": {"selector": {}, "template": {}},
            "status": {"observedGeneration": 1, "currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberMisscheduled": 0, "numberReady": available, "updatedNumberScheduled": 2, "numberAvailable": available}
        })
    };
    assert_eq!(status_of(base(1)).0, HealthStatus::Progressing);
    assert_eq!(status_of(base(2)).0, HealthStatus::Healthy);
}

#[test]
fn job_follows_its_conditions() {
    let job = |conditions: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {}}, "status": {"conditions": conditions}});
    assert_eq!(
        status_of(job(json!([{"type": "Complete", "status": "True"}]))).0,
        HealthStatus::Healthy
    );
    assert_eq!(
        status_of(job(
            json!([{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}])
        )),
        (HealthStatus::Degraded, "BackoffLimitExceeded".to_owned())
    );
    assert_eq!(status_of(job(json!([]))).0, HealthStatus::Progressing);
}

#[test]
fn cron_job_is_degraded_when_the_last_run_failed() {
    let cron = |status: Value| json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "* * * * *", "jobTemplate": {}}, "status": status});
    assert_eq!(status_of(cron(json!({}))).0, HealthStatus::Healthy);
    assert_eq!(status_of(cron(json!({"lastScheduleTime": "2026-01-02T00:00:00Z", "lastSuccessfulTime": "2026-01-01T00:00:00Z"}))).0, HealthStatus::Degraded);
    assert_eq!(status_of(cron(json!({"lastScheduleTime": "2026-01-02T00:00:00Z", "lastSuccessfulTime": "2026-01-02T00:00:05Z"}))).0, HealthStatus::Healthy);
}

#[test]
fn pod_health_reads_phase_readiness_and_waiting_reasons() {
    let pod = |status: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}, "status": status});
    assert_eq!(
        status_of(pod(
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
        ))
        .0,
        HealthStatus::Healthy
    );
    assert_eq!(
        status_of(pod(
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})
        ))
        .0,
        HealthStatus::Progressing
    );
    assert_eq!(
        status_of(pod(json!({"phase": "Pending"}))).0,
        HealthStatus::Progressing
    );
    let (status, message) = status_of(pod(json!({"phase": "Pending", "containerStatuses": [
        {"name": "app", "image": "x", "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}
    ]})));
    assert_eq!(status, HealthStatus::Degraded);
    assert_eq!(message, "container app: ImagePullBackOff");
}

#[test]
fn services_ingresses_claims_namespaces_and_crds() {
    let lb = |status: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "LoadBalancer"}, "status": status});
    assert_eq!(status_of(lb(json!({}))).0, HealthStatus::Progressing);
    assert_eq!(
        status_of(lb(
            json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}})
        ))
        .0,
        HealthStatus::Healthy
    );
    assert_eq!(status_of(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "ClusterIP"}})).0, HealthStatus::Healthy);
    assert_eq!(status_of(json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}})).0, HealthStatus::Progressing);
    let pvc = |phase: &str| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "status": {"phase": phase}});
    assert_eq!(status_of(pvc("Bound")).0, HealthStatus::Healthy);
    assert_eq!(status_of(pvc("Pending")).0, HealthStatus::Progressing);
    assert_eq!(status_of(pvc("Lost")).0, HealthStatus::Degraded);
    assert_eq!(status_of(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "status": {"phase": "Terminating"}})).0, HealthStatus::Progressing);
    assert_eq!(
        status_of(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})).0,
        HealthStatus::Healthy
    );
    let crd = |established: &str| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Namespaced", "versions": []},
            "status": {"conditions": [{"type": "Established", "status": established}]}
        })
    };
    assert!(crd_established(&crd("True")));
    assert!(!crd_established(&crd("False")));
    assert!(
        health_of(
            &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
        )
        .is_none()
    );
}

#[test]
fn an_app_is_as_healthy_as_its_worst_object() {
    let a = ObjectRef {
        api_version: "v1".into(),
        kind: "Service".into(),
        namespace: None,
        name: "a".into(),
    };
    let b = ObjectRef {
        name: "b".into(),
        ..a.clone()
    };
    let healthy = Health::healthy();
    let waiting = Health::progressing("waiting");
    let app = aggregate([(&a, &healthy), (&b, &waiting)]).unwrap();
    assert_eq!(app.status, HealthStatus::Progressing);
    assert_eq!(app.message, "Service/b: waiting");
    assert!(aggregate([]).is_none());
}
