//! Planner tests on plain data: rendered apps, live objects and tracker records built by hand.

use super::*;
use crate::ownership::{ANNOTATION_OWNER, LABEL_APP_NAME, LABEL_APP_NAMESPACE};
use crate::tracker::{EntryState, TrackedEntry};
use analyzer::{RenderedApp, RenderedObject};
use serde_json::json;

fn app(name: &str) -> AppRef {
    AppRef {
        namespace: "team".to_owned(),
        name: name.to_owned(),
    }
}

fn rendered(app_name: &str, objects: Vec<(&str, Option<&str>, Value)>) -> RenderedApp {
    RenderedApp {
        app: app(app_name),
        file: cue::FileId(0),
        objects: objects
            .into_iter()
            .map(|(component, trait_type, object)| RenderedObject {
                component: component.to_owned(),
                trait_type: trait_type.map(str::to_owned),
                output_name: None,
                object,
            })
            .collect(),
        diagnostics: Vec::new(),
        input_hash: String::new(),
        inputs: Default::default(),
    }
}

fn config_map(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "team", "labels": {"app.oam.dev/component": "web"}, "annotations": {}},
        "data": {"key": value}
    })
}

fn desired(
    app_name: &str,
    objects: Vec<(&str, Option<&str>, Value)>,
    policies: Value,
) -> DesiredApp {
    let policies: Vec<Policy> = serde_json::from_value(policies).unwrap();
    DesiredApp::from_rendered(
        &rendered(app_name, objects),
        &policies,
        Some("rev1".to_owned()),
        &builtin_scope,
    )
}

/// The object as the apiserver would hold it after we applied it: marks, server metadata.
fn as_live(desired_object: &DesiredObject, resource_version: &str) -> Value {
    let mut live = desired_object.object.clone();
    let metadata = live["metadata"].as_object_mut().unwrap();
    metadata.insert("uid".to_owned(), json!("uid-1"));
    metadata.insert("resourceVersion".to_owned(), json!(resource_version));
    metadata.insert(
        "managedFields".to_owned(),
        json!([{"manager": "driftless"}]),
    );
    live
}

/// A desired app of one ConfigMap `name` (data `key: value`) from component `web`, no policies.
fn one_config_map(app_name: &str, name: &str, value: &str) -> DesiredApp {
    desired(
        app_name,
        vec![("web", None, config_map(name, value))],
        json!([]),
    )
}

/// Live objects holding `observed` under the ref of `object`.
fn live_with<'a>(observed: impl IntoIterator<Item = (&'a DesiredObject, Observed)>) -> LiveObjects {
    let mut live = LiveObjects::default();
    for (object, observed) in observed {
        live.objects.insert(object.object_ref.clone(), observed);
    }
    live
}

/// A tracker of app `app_name` recording `entries` under the refs of their objects.
fn tracker_with<'a>(
    app_name: &str,
    entries: impl IntoIterator<Item = (&'a ObjectRef, TrackedEntry)>,
) -> TrackerRecord {
    let mut tracker = TrackerRecord::new(&app(app_name));
    for (object_ref, entry) in entries {
        tracker.entries.insert(object_ref.clone(), entry);
    }
    tracker
}

/// The summary lines of `app`'s plan with the default options.
fn plan_summary(
    app: &DesiredApp,
    live: &LiveObjects,
    tracker: Option<&TrackerRecord>,
) -> Vec<String> {
    summary(&plan_app(app, live, tracker, &PlanOptions::default()))
}

fn present(live: Value) -> Observed {
    Observed::Present {
        live,
        dry_run: None,
    }
}

fn entry(hash: &str, resource_version: &str) -> TrackedEntry {
    TrackedEntry {
        state: EntryState::Applied,
        hash: hash.to_owned(),
        resource_version: Some(resource_version.to_owned()),
        component: "web".to_owned(),
        component_type: None,
        trait_type: None,
        gc: GcStrategy::OnAppUpdate,
        propagation: crate::policy::Propagation::Cascading,
    }
}

fn summary(plan: &AppPlan) -> Vec<String> {
    plan.changes
        .iter()
        .map(|change| {
            let mut line = format!("{} {}", change.action.as_str(), change.object);
            if !change.changed_fields.is_empty() {
                line.push_str(&format!(" {:?}", change.changed_fields));
            }
            if let Some(reason) = &change.reason {
                line.push_str(&format!(" ({reason})"));
            }
            line
        })
        .collect()
}

#[test]
fn against_an_empty_cluster_everything_is_a_create_in_kind_order() {
    let shop = desired(
        "shop",
        vec![
            (
                "web",
                None,
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "team"}}),
            ),
            (
                "web",
                Some("gateway"),
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "team"}}),
            ),
            (
                "ns",
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
            ),
            (
                "rbac",
                None,
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "reader", "namespace": "team"}}),
            ),
        ],
        json!([]),
    );
    let plan = plan_app(
        &shop,
        &LiveObjects::default(),
        None,
        &PlanOptions::default(),
    );
    assert_eq!(
        summary(&plan),
        vec![
            "create Namespace/team",
            "create ClusterRole/reader",
            "create Service/team/web",
            "create Deployment/team/web",
        ]
    );
    let cluster_role = &plan.changes[1];
    assert!(
        !cluster_role
            .diff
            .lines()
            .any(|line| line.starts_with("  namespace:")),
        "{}",
        cluster_role.diff
    );
    assert!(
        cluster_role.diff.contains(ANNOTATION_OWNER),
        "{}",
        cluster_role.diff
    );
}

#[test]
fn an_object_left_as_applied_is_unchanged_without_a_dry_run() {
    let shop = one_config_map("shop", "cfg", "a");
    let object = &shop.objects[0];
    // Even a live value that differs is trusted: same hash, same resourceVersion means nobody
    // wrote the object since our apply, so the difference is the apiserver's normalisation.
    let mut live_object = as_live(object, "5");
    live_object["data"]["key"] = json!("normalised");
    let live = live_with([(object, present(live_object))]);
    let tracker = tracker_with("shop", [(&object.object_ref, entry(&object.hash, "5"))]);
    assert_eq!(
        plan_summary(&shop, &live, Some(&tracker)),
        vec!["unchanged ConfigMap/team/cfg"]
    );

    // Another resourceVersion: somebody wrote it, so it is compared and the drift shows.
    let tracker = tracker_with("shop", [(&object.object_ref, entry(&object.hash, "4"))]);
    assert_eq!(
        plan_summary(&shop, &live, Some(&tracker)),
        vec!["update ConfigMap/team/cfg [\"data.key\"]"]
    );
}

#[test]
fn a_changed_property_is_exactly_one_changed_field() {
    let before = one_config_map("shop", "cfg", "a");
    let after = one_config_map("shop", "cfg", "b");
    let live = live_with([(
        &before.objects[0],
        present(as_live(&before.objects[0], "5")),
    )]);
    let plan = plan_app(&after, &live, None, &PlanOptions::default());
    assert_eq!(
        summary(&plan),
        vec!["update ConfigMap/team/cfg [\"data.key\"]"]
    );
    assert!(
        plan.changes[0].diff.contains("-  key: a\n+  key: b"),
        "{}",
        plan.changes[0].diff
    );
}

#[test]
fn the_dry_run_result_is_compared_when_present() {
    let shop = one_config_map("shop", "cfg", "a");
    let object = &shop.objects[0];
    let live_object = as_live(object, "5");
    let mut dry_run = live_object.clone();
    dry_run["metadata"]["resourceVersion"] = json!("6");
    let with_dry_run = |dry_run: &Value| {
        live_with([(
            object,
            Observed::Present {
                live: live_object.clone(),
                dry_run: Some(dry_run.clone()),
            },
        )])
    };
    assert_eq!(
        plan_summary(&shop, &with_dry_run(&dry_run), None),
        vec!["unchanged ConfigMap/team/cfg"]
    );

    dry_run["data"]["extra"] = json!("x");
    assert_eq!(
        plan_summary(&shop, &with_dry_run(&dry_run), None),
        vec!["update ConfigMap/team/cfg [\"data.extra\"]"]
    );
}

#[test]
fn tracked_objects_no_longer_rendered_are_pruned_first_when_still_marked() {
    let shop = one_config_map("shop", "keep", "a");
    let gone = desired(
        "shop",
        vec![("old", None, config_map("gone", "a"))],
        json!([]),
    );
    let unmarked = desired(
        "shop",
        vec![("old", None, config_map("unmarked", "a"))],
        json!([]),
    );
    let mut stripped = as_live(&unmarked.objects[0], "1");
    stripped["metadata"]["annotations"] = json!({});
    let live = live_with([
        (&shop.objects[0], present(as_live(&shop.objects[0], "1"))),
        (&gone.objects[0], present(as_live(&gone.objects[0], "1"))),
        (&unmarked.objects[0], present(stripped)),
    ]);
    // Tracked but already gone from the cluster: nothing to do.
    let vanished = ObjectRef {
        name: "vanished".to_owned(),
        ..gone.objects[0].object_ref.clone()
    };
    let tracked = [&shop.objects[0], &gone.objects[0], &unmarked.objects[0]]
        .map(|object| (&object.object_ref, entry(&object.hash, "1")));
    let tracker = tracker_with(
        "shop",
        tracked.into_iter().chain([(&vanished, entry("h", "1"))]),
    );
    assert_eq!(
        plan_summary(&shop, &live, Some(&tracker)),
        vec![
            "delete ConfigMap/team/gone",
            "unchanged ConfigMap/team/unmarked (not pruned: no longer carries this app's ownership marks)",
            "unchanged ConfigMap/team/keep",
        ]
    );
    let no_prune = PlanOptions {
        prune: Prune::Disabled,
        ..PlanOptions::default()
    };
    assert_eq!(
        summary(&plan_app(&shop, &live, Some(&tracker), &no_prune)),
        vec!["unchanged ConfigMap/team/keep"]
    );
}

#[test]
fn garbage_collect_rules_keep_objects_on_update_but_not_on_app_deletion() {
    let shop = desired(
        "shop",
        vec![],
        json!([{"name": "gc", "type": "garbage-collect", "properties": {"rules": [
            {"selector": {"componentNames": ["web"]}, "strategy": "onAppDelete"}
        ]}}]),
    );
    let gone = one_config_map("shop", "gone", "a");
    let live = live_with([(&gone.objects[0], present(as_live(&gone.objects[0], "1")))]);
    let mut tracker = tracker_with("shop", [(&gone.objects[0].object_ref, entry("h", "1"))]);
    assert_eq!(
        plan_summary(&shop, &live, Some(&tracker)),
        vec!["unchanged ConfigMap/team/gone (kept (garbage-collect strategy onAppDelete))"]
    );
    assert_eq!(
        summary(&plan_app_deletion(
            &app("shop"),
            &live,
            &tracker,
            &PlanOptions::default()
        )),
        vec!["delete ConfigMap/team/gone"]
    );
    tracker
        .entries
        .values_mut()
        .for_each(|entry| entry.gc = GcStrategy::Never);
    assert_eq!(
        summary(&plan_app_deletion(
            &app("shop"),
            &live,
            &tracker,
            &PlanOptions::default()
        )),
        vec!["unchanged ConfigMap/team/gone (kept (garbage-collect strategy never))"]
    );
}

#[test]
fn an_object_owned_by_another_app_is_a_conflict_naming_it() {
    let blog = one_config_map("blog", "cfg", "a");
    let shop = one_config_map("shop", "cfg", "a");
    let mut live_object = as_live(&blog.objects[0], "1");
    live_object["metadata"]["annotations"][ANNOTATION_OWNER] = json!("team/blog");
    live_object["metadata"]["labels"][LABEL_APP_NAME] = json!("blog");
    live_object["metadata"]["labels"][LABEL_APP_NAMESPACE] = json!("team");
    let live = live_with([(&blog.objects[0], present(live_object))]);
    assert_eq!(
        plan_summary(&shop, &live, None),
        vec!["conflict ConfigMap/team/cfg (owned by app team/blog)"]
    );
}

#[test]
fn two_apps_creating_the_same_object_conflict_in_the_second() {
    let blog = one_config_map("blog", "cfg", "a");
    let shop = one_config_map("shop", "cfg", "a");
    let empty = LiveObjects::default();
    let options = PlanOptions::default();
    let plan = plan_all(
        vec![
            plan_app(&shop, &empty, None, &options),
            plan_app(&blog, &empty, None, &options),
        ],
        PlanTarget::EmptyCluster,
        Vec::new(),
    );
    assert_eq!(summary(&plan.apps[0]), vec!["create ConfigMap/team/cfg"]);
    assert_eq!(
        summary(&plan.apps[1]),
        vec!["conflict ConfigMap/team/cfg (also rendered by app team/blog, which creates it)"]
    );
}

#[test]
fn apply_once_keeps_live_values_of_drifting_paths() {
    let policies = json!([{"name": "once", "type": "apply-once", "properties": {"enable": true, "rules": [
        {"selector": {"resourceTypes": ["ConfigMap"]}, "strategy": {"path": ["data.key"]}}
    ]}}]);
    let shop = desired(
        "shop",
        vec![("web", None, config_map("cfg", "a"))],
        policies,
    );
    let mut live_object = as_live(&shop.objects[0], "2");
    live_object["data"]["key"] = json!("edited by hand");
    let live = live_with([(&shop.objects[0], present(live_object))]);
    assert_eq!(
        plan_summary(&shop, &live, None),
        vec!["unchanged ConfigMap/team/cfg"]
    );
    let whole = desired(
        "shop",
        vec![("web", None, config_map("cfg", "b"))],
        json!([{"name": "once", "type": "apply-once", "properties": {"enable": true}}]),
    );
    assert_eq!(
        plan_summary(&whole, &live, None),
        vec!["unchanged ConfigMap/team/cfg (exists; drift allowed (apply-once policy))"]
    );
}

#[test]
fn per_object_errors_are_diagnostics_and_blocked_apps_plan_nothing() {
    let shop = one_config_map("shop", "cfg", "a");
    let live = live_with([(
        &shop.objects[0],
        Observed::Failed("forbidden: cannot get configmaps".to_owned()),
    )]);
    let two = desired(
        "shop",
        vec![
            ("web", None, config_map("cfg", "a")),
            ("web", None, config_map("other", "a")),
        ],
        json!([]),
    );
    let plan = plan_app(&two, &live, None, &PlanOptions::default());
    assert!(
        plan.changes.is_empty(),
        "the healthy object is not planned either"
    );
    assert_eq!(plan.diagnostics.len(), 1);
    assert_eq!(plan.diagnostics[0].rule, "cluster-error");
    assert!(
        plan.diagnostics[0]
            .message
            .contains("ConfigMap/team/cfg: forbidden")
    );

    let twice = desired(
        "shop",
        vec![
            ("a", None, config_map("cfg", "a")),
            ("b", None, config_map("cfg", "b")),
        ],
        json!([]),
    );
    assert!(twice.is_blocked());
    let tracker = tracker_with("shop", [(&shop.objects[0].object_ref, entry("h", "1"))]);
    let plan = plan_app(
        &twice,
        &LiveObjects::default(),
        Some(&tracker),
        &PlanOptions::default(),
    );
    assert!(plan.changes.is_empty(), "a blocked app never prunes");
}

#[test]
fn keep_live_paths_copies_or_removes() {
    let mut desired_value = json!({"spec": {"replicas": 3, "paused": true}});
    let live = json!({"spec": {"replicas": 5}});
    keep_live_paths(
        &mut desired_value,
        &live,
        &["spec.replicas".to_owned(), "spec.paused".to_owned()],
    );
    assert_eq!(desired_value, json!({"spec": {"replicas": 5}}));
}

#[test]
fn a_packed_render_plans_the_same_desired_objects_as_its_values() {
    use analyzer::CachedApp;
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"workload.oam.dev/type": "webservice", "b": "1", "a": "2"}},
        "spec": {"replicas": 0, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27",
            "ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": "0.5"}}}]}}}
    });
    let cluster_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "reader", "namespace": "team"}, "rules": []});
    let values = rendered(
        "web",
        vec![
            ("web", None, deployment),
            ("web", Some("gateway"), config_map("settings", "é\"\n")),
            ("web", Some("rbac"), cluster_role),
        ],
    );
    let packed = CachedApp::pack(values.clone());
    let from_values =
        DesiredApp::from_rendered(&values, &[], Some("rev1".to_owned()), &builtin_scope);
    let from_packed =
        DesiredApp::from_rendered(&packed, &[], Some("rev1".to_owned()), &builtin_scope);
    assert_eq!(from_packed.objects.len(), 3);
    assert_eq!(from_packed.objects, from_values.objects);
    // Same key order too: the hash is over the JSON text.
    for (a, b) in from_packed.objects.iter().zip(&from_values.objects) {
        assert_eq!(a.hash, b.hash);
        assert_eq!(a.object.to_string(), b.object.to_string());
    }
    assert_eq!(
        from_packed.objects[0].component_type.as_deref(),
        Some("webservice")
    );
    // A blocked app plans no object, packed or not.
    let mut blocked: RenderedApp = values;
    blocked
        .diagnostics
        .push(Diagnostic::error("x", "broken".to_owned(), None));
    let blocked = CachedApp::pack(blocked);
    assert!(
        DesiredApp::from_rendered(&blocked, &[], None, &builtin_scope)
            .objects
            .is_empty()
    );
}

#[test]
fn protected_and_annotated_objects_are_never_pruned() {
    let shop = one_config_map("shop", "keep", "a");
    let annotated = desired(
        "shop",
        vec![("old", None, config_map("annotated", "a"))],
        json!([]),
    );
    let mut claim_object = config_map("data", "a");
    claim_object["kind"] = json!("PersistentVolumeClaim");
    let claim = desired("shop", vec![("db", None, claim_object)], json!([]));
    let mut annotated_live = as_live(&annotated.objects[0], "1");
    annotated_live["metadata"]["annotations"]["driftless.dev/prune"] = json!("false");
    let live = live_with([
        (&shop.objects[0], present(as_live(&shop.objects[0], "1"))),
        (&annotated.objects[0], present(annotated_live)),
        (&claim.objects[0], present(as_live(&claim.objects[0], "1"))),
    ]);
    let claim_entry = TrackedEntry {
        component: "db".to_owned(),
        // As the apply records it: no rule of the app selects the claim.
        gc: GcStrategy::Never,
        ..entry(&claim.objects[0].hash, "1")
    };
    let tracker = tracker_with(
        "shop",
        [
            (
                &shop.objects[0].object_ref,
                entry(&shop.objects[0].hash, "1"),
            ),
            (
                &annotated.objects[0].object_ref,
                entry(&annotated.objects[0].hash, "1"),
            ),
            (&claim.objects[0].object_ref, claim_entry),
        ],
    );
    assert_eq!(
        plan_summary(&shop, &live, Some(&tracker)),
        vec![
            "unchanged PersistentVolumeClaim/team/data (kept (garbage-collect strategy never))",
            "unchanged ConfigMap/team/annotated (kept (annotated driftless.dev/prune: \"false\"))",
            "unchanged ConfigMap/team/keep",
        ]
    );
    // The app deleted: the same two stay, the rest goes.
    let deleted = plan_app_deletion(&app("shop"), &live, &tracker, &PlanOptions::default());
    assert_eq!(
        summary(&deleted),
        vec![
            "unchanged PersistentVolumeClaim/team/data (kept (garbage-collect strategy never))",
            "unchanged ConfigMap/team/annotated (kept (annotated driftless.dev/prune: \"false\"))",
            "delete ConfigMap/team/keep",
        ]
    );
}

#[test]
fn the_tracker_namespace_is_reserved() {
    let mut in_reserved = config_map("settings", "a");
    in_reserved["metadata"]["namespace"] = json!("driftless-system");
    let mut reserved_itself =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "driftless-system"}});
    reserved_itself["metadata"]["labels"] = json!({});
    let mut app_plan = desired(
        "shop",
        vec![
            ("web", None, in_reserved),
            ("ns", None, reserved_itself),
            ("web", None, config_map("fine", "a")),
        ],
        json!([]),
    );
    app_plan.refuse_reserved_namespace("driftless-system");
    assert!(app_plan.is_blocked());
    let message = &app_plan.diagnostics[0].message;
    assert!(
        message.contains("ConfigMap/driftless-system/settings")
            && message.contains("Namespace/driftless-system")
            && !message.contains("fine"),
        "{message}"
    );
    // Trackers kept in the app's own namespace: ordinary objects stay the app's, records not.
    let mut own = one_config_map("shop", "settings", "a");
    own.refuse_reserved_namespace("team");
    assert!(!own.is_blocked(), "{:?}", own.diagnostics);
    let mut forged = one_config_map("shop", "team.other", "a");
    forged.refuse_reserved_namespace("team");
    assert!(forged.is_blocked());
}
