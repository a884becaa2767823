//! Status CUE against live objects: KubeVela's own built-in policies (webservice) read from the
//! embedded definitions, and hand-written policies for `context.outputs`, `parameter` and
//! traits.

use super::*;
use crate::planner::{DesiredApp, LiveObjects, Observed, builtin_scope};
use analyzer::{RenderedApp, RenderedObject};

fn app() -> AppRef {
    AppRef {
        namespace: "team".to_owned(),
        name: "shop".to_owned(),
    }
}

fn deployment(replicas: i64, ready: Option<i64>) -> Value {
    let mut status = json!({"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas});
    if let Some(ready) = ready {
        status["readyReplicas"] = json!(ready);
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team", "generation": 1},
        "spec": {"replicas": replicas, "selector": {}, "template": {}},
        "status": status
    })
}

fn webservice_status(definitions: &Definitions) -> ComponentStatus {
    let application = json!({
        "kind": "Application",
        "spec": {"components": [{"name": "web", "type": "webservice", "properties": {"image": "nginx"}}]}
    });
    let mut statuses = from_application(&application, definitions);
    assert_eq!(statuses.len(), 1);
    statuses.remove(0)
}

fn workload<'a>(object: &'a ObjectRef, live: Option<&'a Value>) -> LiveOutput<'a> {
    LiveOutput {
        object,
        component: "web",
        trait_type: None,
        output_name: None,
        live,
    }
}

fn object_ref(kind: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: if kind == "Deployment" {
            "apps/v1"
        } else {
            "v1"
        }
        .to_owned(),
        kind: kind.to_owned(),
        namespace: Some("team".to_owned()),
        name: name.to_owned(),
    }
}

#[test]
fn webservice_health_policy_and_custom_status_read_the_live_deployment() {
    let definitions = Definitions::builtin();
    let status = webservice_status(&definitions);
    assert!(status.rules.health_policy.is_some());
    assert!(status.rules.custom_status.is_some());
    let evaluator = cue::Evaluator::new();
    let web = object_ref("Deployment", "web");

    let ready = deployment(2, Some(2));
    let health = component_health(&evaluator, &app(), &status, &[workload(&web, Some(&ready))])
        .expect("webservice rates its component");
    assert_eq!(health.health.status, HealthStatus::Healthy, "{health:?}");
    assert_eq!(health.message.as_deref(), Some("Ready:2/2"));

    // Kubernetes' own rule sees every replica available, but no pod reports ready: only the
    // definition's policy (readyReplicas == replicas) catches it.
    let unready = deployment(2, None);
    let health = component_health(
        &evaluator,
        &app(),
        &status,
        &[workload(&web, Some(&unready))],
    )
    .expect("webservice rates its component");
    assert_eq!(
        health.health.status,
        HealthStatus::Progressing,
        "{health:?}"
    );
    assert_eq!(
        health.health.message,
        "healthPolicy of component type webservice: not healthy yet"
    );
    assert_eq!(health.message.as_deref(), Some("Ready:0/2"));
}

#[test]
fn only_snippets_that_read_parameter_keep_the_properties() {
    let definitions = Definitions::builtin();
    let application = json!({
        "kind": "Application",
        "spec": {"components": [{
            "name": "web", "type": "webservice", "properties": {"image": "nginx", "env": [{"name": "A", "value": "1"}]},
            "traits": [
                {"type": "gateway", "properties": {"name": "api", "domain": "x.example", "http": {"/": 80}}},
                {"type": "scaler", "properties": {"replicas": 0}}
            ]
        }]}
    });
    let statuses = from_application(&application, &definitions);
    let [web] = statuses.as_slice() else {
        panic!("one component: {statuses:?}")
    };
    // webservice's snippets read context.output only; scaler has none; gateway's read
    // parameter.name.
    assert!(!web.rules.is_empty() && !web.rules.reads_parameter());
    assert_eq!(web.parameter, json!({}));
    let [gateway, scaler] = web.traits.as_slice() else {
        panic!("two traits: {:?}", web.traits)
    };
    assert!(gateway.rules.reads_parameter());
    assert_eq!(gateway.parameter["name"], json!("api"));
    assert!(scaler.rules.is_empty());
    assert_eq!(scaler.parameter, json!({}));
    // `context.parameter` counts as a read too.
    let rules = StatusRules {
        health_policy: None,
        custom_status: Some("message: context.parameter.image".into()),
    };
    assert!(rules.reads_parameter());
}

#[test]
fn the_disable_health_check_annotation_makes_webservice_healthy() {
    let definitions = Definitions::builtin();
    let status = webservice_status(&definitions);
    let mut unready = deployment(2, None);
    unready["metadata"]["annotations"] = json!({"app.oam.dev/disable-health-check": "true"});
    let policy = status.rules.health_policy.as_ref().unwrap();
    let mut context = base_context(&app(), "web", &status.parameter);
    context.insert("output".to_owned(), unready);
    let healthy = evaluate_health_policy(
        &cue::Evaluator::new(),
        policy,
        &Value::Object(context),
        &status.parameter,
    );
    assert_eq!(healthy, Ok(true));
}

#[test]
fn policies_read_outputs_and_parameter_and_custom_status_sees_the_verdict() {
    let status = ComponentStatus {
        name: "web".to_owned(),
        component_type: "custom".to_owned(),
        parameter: json!({"minEndpoints": 2}),
        rules: StatusRules {
            health_policy: Some(
                "isHealth: len(context.outputs.endpoints.data) >= parameter.minEndpoints".into(),
            ),
            custom_status: Some(
                "message: \"\\(context.name) healthy=\\(context.status.healthy) want \\(parameter.minEndpoints)\"".into(),
            ),
        },
        traits: Vec::new(),
    };
    let web = object_ref("Deployment", "web");
    let endpoints = object_ref("ConfigMap", "web-endpoints");
    let ready = deployment(1, Some(1));
    let evaluate = |data: Value| {
        let live_endpoints = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-endpoints"}, "data": data});
        component_health(
            &cue::Evaluator::new(),
            &app(),
            &status,
            &[
                workload(&web, Some(&ready)),
                LiveOutput {
                    object: &endpoints,
                    component: "web",
                    trait_type: Some("AuxiliaryWorkload"),
                    output_name: Some("endpoints"),
                    live: Some(&live_endpoints),
                },
            ],
        )
        .expect("rated")
    };
    let one = evaluate(json!({"a": "1"}));
    assert_eq!(one.health.status, HealthStatus::Progressing);
    assert_eq!(one.message.as_deref(), Some("web healthy=false want 2"));
    let two = evaluate(json!({"a": "1", "b": "2"}));
    assert_eq!(two.health.status, HealthStatus::Healthy);
    assert_eq!(two.message.as_deref(), Some("web healthy=true want 2"));
}

#[test]
fn a_trait_policy_sees_only_its_own_outputs_and_no_context_output() {
    let trait_status = |policy: &str| ComponentStatus {
        name: "web".to_owned(),
        component_type: "worker".to_owned(),
        parameter: json!({}),
        rules: StatusRules::default(),
        traits: vec![TraitStatus {
            trait_type: "expose".to_owned(),
            parameter: json!({"port": [80]}),
            rules: StatusRules {
                health_policy: Some(Snippet::new(policy)),
                custom_status: None,
            },
        }],
    };
    let web = object_ref("Deployment", "web");
    let service = object_ref("Service", "web");
    let ready = deployment(1, Some(1));
    let live_service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80}]}});
    let objects = [
        workload(&web, Some(&ready)),
        LiveOutput {
            object: &service,
            component: "web",
            trait_type: Some("expose"),
            output_name: Some("service"),
            live: Some(&live_service),
        },
    ];
    let evaluator = cue::Evaluator::new();
    let rate = |policy: &str| {
        component_health(&evaluator, &app(), &trait_status(policy), &objects)
            .expect("rated")
            .health
    };
    let sees_service =
        rate("isHealth: context.outputs.service.spec.clusterIP != \"\" && parameter.port[0] == 80");
    assert_eq!(
        sees_service.status,
        HealthStatus::Healthy,
        "{sees_service:?}"
    );
    // `context.output` is not there for traits: the policy cannot be evaluated, which KubeVela
    // counts as not healthy.
    let reads_output = rate("isHealth: context.output.status.readyReplicas == 1");
    assert_eq!(
        reads_output.status,
        HealthStatus::Unknown,
        "{reads_output:?}"
    );
    assert!(
        reads_output
            .message
            .starts_with("healthPolicy of trait expose: cannot evaluate"),
        "{reads_output:?}"
    );
}

#[test]
fn broken_snippets_are_not_healthy_and_lose_only_their_message() {
    let evaluator = cue::Evaluator::new();
    let context = json!({"output": {"status": {}}});
    let parameter = json!({});
    for broken in ["isHealth: [", "isHealth: 1", "other: true"] {
        let snippet = Snippet::new(broken);
        let evaluated = evaluate_health_policy(&evaluator, &snippet, &context, &parameter);
        assert!(evaluated.is_err(), "{broken}: {evaluated:?}");
    }
    assert_eq!(
        evaluate_health_policy(
            &evaluator,
            &Snippet::new("isHealth: *true | bool"),
            &context,
            &parameter
        ),
        Ok(true)
    );
    assert!(
        evaluate_custom_status(
            &evaluator,
            &Snippet::new("message: context.output.status.missing"),
            &context,
            &parameter
        )
        .is_err()
    );
}

#[test]
fn app_health_rates_each_component_and_waits_for_missing_objects() {
    let definitions = Definitions::builtin();
    let rendered: RenderedApp = RenderedApp {
        app: app(),
        file: cue::FileId(0),
        objects: ["web", "api"]
            .into_iter()
            .map(|name| {
                let mut object = deployment(1, Some(1));
                object["metadata"]["name"] = json!(name);
                RenderedObject {
                    component: name.to_owned(),
                    trait_type: None,
                    output_name: None,
                    object,
                }
            })
            .collect(),
        diagnostics: Vec::new(),
        input_hash: String::new(),
        inputs: Default::default(),
    };
    let desired = DesiredApp::from_rendered(&rendered, &[], None, &builtin_scope);
    let application = json!({"kind": "Application", "spec": {"components": [
        {"name": "web", "type": "webservice", "properties": {"image": "a"}},
        {"name": "api", "type": "webservice", "properties": {"image": "b"}}
    ]}});
    let statuses = from_application(&application, &definitions);
    let mut live = LiveObjects::default();
    let web = &desired.objects[0];
    live.objects.insert(
        web.object_ref.clone(),
        Observed::Present {
            live: rendered.objects[0].object.clone(),
            dry_run: None,
        },
    );
    let health = crate::health::of_app(&desired, &live, &statuses).expect("rated");
    assert_eq!(health.health.status, HealthStatus::Progressing);
    assert_eq!(
        health.health.message,
        "Deployment/team/api: not created yet"
    );
    let components: Vec<(&str, HealthStatus, Option<&str>)> = health
        .components
        .iter()
        .map(|c| (c.component.as_str(), c.health.status, c.message.as_deref()))
        .collect();
    assert_eq!(
        components,
        vec![
            ("web", HealthStatus::Healthy, Some("Ready:1/1")),
            ("api", HealthStatus::Progressing, None),
        ]
    );
}
