use super::*;
use crate::apply::{ApplyOptions, ApplyOutcome};
use crate::cluster::Cluster;
use crate::plan::{Action, Change};
use crate::planner::{DesiredApp, Observed, builtin_scope};
use crate::tracker::{EntryState, TrackedEntry, TrackerRecord};
use crate::tracker_store::TrackerStore;
use analyzer::{RenderedApp, RenderedObject};
use serde_json::json;

fn desired(namespace: &str, name: &str, objects: &[&str]) -> DesiredApp {
    let rendered: RenderedApp = RenderedApp {
        app: AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        },
        file: cue::FileId(0),
        objects: objects
            .iter()
            .map(|object| RenderedObject {
                component: "settings".to_owned(),
                trait_type: None,
                output_name: None,
                object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": object, "namespace": namespace},
                               "data": {"k": "v"}}),
            })
            .collect(),
        diagnostics: Vec::new(),
        input_hash: String::new(),
        inputs: Default::default(),
    };
    DesiredApp::from_rendered(&rendered, &[], None, &builtin_scope)
}

fn unchanged(object: &crate::plan::ObjectRef) -> Change {
    Change {
        action: Action::Unchanged,
        cluster: "local".to_owned(),
        object: object.clone(),
        diff: String::new(),
        changed_fields: Vec::new(),
        reason: None,
    }
}

#[test]
fn an_apply_keeps_only_the_live_objects_it_may_write_or_adopt() {
    let (mut observation, app_plan) = planned(
        desired("team", "shop", &["recorded", "stale-hash", "changed"]),
        &[None, Some("an older render"), None],
        &[Action::Unchanged, Action::Unchanged, Action::Update],
    );
    let kept: Vec<&str> = observation
        .live
        .objects
        .keys()
        .map(|object| object.name.as_str())
        .collect();
    // Unchanged and recorded with the desired hash: nothing to write or adopt. An older
    // hash is adopted by the apply, a change is written: both keep their live object.
    assert_eq!(kept, vec!["changed", "stale-hash"]);

    // Without a tracker everything may be adopted: nothing is dropped.
    observation.tracker = None;
    let before = observation.live.objects.len();
    drop_settled(&mut observation, &app_plan);
    assert_eq!(observation.live.objects.len(), before);
}

/// An observation of `desired` with every object live and recorded in the tracker with
/// `hashes` (the desired hash when `None`), planned with `actions`, after [`drop_settled`].
fn planned(
    desired: DesiredApp,
    hashes: &[Option<&str>],
    actions: &[Action],
) -> (AppObservation, AppPlan) {
    let mut tracker = TrackerRecord::new(&desired.app);
    let mut live = LiveObjects::default();
    for (object, hash) in desired.objects.iter().zip(hashes) {
        tracker.entries.insert(
            object.object_ref.clone(),
            TrackedEntry {
                state: EntryState::Applied,
                hash: hash.map_or_else(|| object.hash.clone(), str::to_owned),
                resource_version: Some("1".to_owned()),
                component: "settings".to_owned(),
                component_type: None,
                trait_type: None,
                gc: Default::default(),
                propagation: Default::default(),
            },
        );
        live.objects.insert(
            object.object_ref.clone(),
            Observed::Present {
                live: object.object.clone(),
                dry_run: None,
            },
        );
    }
    let app_plan = AppPlan {
        app: desired.app.clone(),
        revision: None,
        changes: desired
            .objects
            .iter()
            .zip(actions)
            .map(|(object, action)| Change {
                action: *action,
                ..unchanged(&object.object_ref)
            })
            .collect(),
        diagnostics: Vec::new(),
        health: None,
        digest: None,
    };
    let mut observation = AppObservation {
        desired,
        live,
        tracker: Some(tracker),
        tracker_error: None,
        apply: observe::ApplyNeeds::Observation,
    };
    drop_settled(&mut observation, &app_plan);
    (observation, app_plan)
}

#[test]
fn only_apps_an_apply_does_not_write_lose_their_rendered_json() {
    let unchanged_app = planned(
        desired("team", "settled", &["a", "b"]),
        &[None, None],
        &[Action::Unchanged, Action::Unchanged],
    );
    let updated_app = planned(
        desired("team", "updated", &["a", "b"]),
        &[None, None],
        &[Action::Unchanged, Action::Update],
    );
    // Unchanged, but recorded with an older hash: the apply adopts it (reads the object).
    let adopted_app = planned(
        desired("team", "adopted", &["a"]),
        &[Some("an older render")],
        &[Action::Unchanged],
    );
    let mut observations = Vec::new();
    for (mut observation, app_plan) in [unchanged_app, updated_app, adopted_app] {
        drop_settled_json(&mut observation, &app_plan);
        observations.push(observation);
    }
    let emptied: Vec<(String, bool)> = observations
        .iter()
        .map(|observation| {
            let nulls = observation
                .desired
                .objects
                .iter()
                .all(|object| object.object.is_null());
            (observation.desired.app.name.clone(), nulls)
        })
        .collect();
    assert_eq!(
        emptied,
        vec![
            ("settled".to_owned(), true),
            ("updated".to_owned(), false),
            ("adopted".to_owned(), false),
        ]
    );
    // Identities and hashes stay: the apply and health after it read them.
    let settled = &observations[0].desired.objects;
    assert_eq!(settled.len(), 2);
    assert!(settled.iter().all(|object| !object.hash.is_empty()));
}

/// Whether [`apply::apply_app`] of this observation made no request and reported the app
/// applied with no object acted on.
async fn apply_is_a_no_op(
    observation: &AppObservation,
    app_plan: &AppPlan,
    options: &ApplyOptions,
) -> bool {
    let cluster = Cluster::offline();
    let store = TrackerStore::new(&cluster, crate::tracker::DEFAULT_NAMESPACE);
    let report = apply::apply_app(&cluster, &store, observation, app_plan, options).await;
    report.outcome == ApplyOutcome::Applied && report.objects.is_empty() && cluster.requests() == 0
}

#[tokio::test]
async fn an_app_the_apply_would_not_touch_keeps_only_its_identity() {
    let options = ApplyOptions::default();
    let settled = || {
        planned(
            desired("team", "settled", &["a", "b"]),
            &[None, None],
            &[Action::Unchanged, Action::Unchanged],
        )
    };
    let mut cases: Vec<(&str, AppObservation, AppPlan, ApplyOptions)> = Vec::new();
    let (observation, app_plan) = settled();
    cases.push(("settled", observation, app_plan, options.clone()));
    let (observation, app_plan) = planned(
        desired("team", "adopted", &["a"]),
        &[Some("an older render")],
        &[Action::Unchanged],
    );
    cases.push(("adopted", observation, app_plan, options.clone()));
    let (observation, app_plan) = planned(
        desired("team", "updated", &["a", "b"]),
        &[None, None],
        &[Action::Unchanged, Action::Update],
    );
    cases.push(("updated", observation, app_plan, options.clone()));
    // The tracker was written by another source: the apply records this one.
    let (observation, app_plan) = settled();
    let other_source = ApplyOptions {
        source: Some("another".to_owned()),
        ..options.clone()
    };
    cases.push(("other source", observation, app_plan, other_source));
    // A tracked object the app no longer renders and that is gone: the apply drops its entry.
    let (mut observation, app_plan) = settled();
    let tracker = observation.tracker.as_mut().unwrap();
    let mut gone = tracker.entries.keys().next().unwrap().clone();
    gone.name = "gone".to_owned();
    let entry = tracker.entries.values().next().unwrap().clone();
    tracker.entries.insert(gone, entry);
    cases.push(("stale entry", observation, app_plan, options.clone()));
    // Listed before its apply (write-ahead) but never recorded as applied: adopted.
    let (mut observation, app_plan) = settled();
    for entry in observation.tracker.as_mut().unwrap().entries.values_mut() {
        entry.state = EntryState::Pending;
    }
    let rendered = observation.desired.objects.clone();
    for object in &rendered {
        observation.live.objects.insert(
            object.object_ref.clone(),
            Observed::Present {
                live: object.object.clone(),
                dry_run: None,
            },
        );
    }
    cases.push(("pending entries", observation, app_plan, options.clone()));
    let (mut observation, app_plan) = settled();
    observation.tracker_error = Some("forbidden".to_owned());
    cases.push(("unreadable tracker", observation, app_plan, options.clone()));
    let (observation, mut app_plan) = settled();
    app_plan.diagnostics.push(analyzer::Diagnostic::error(
        "cluster-error",
        "an object could not be read".to_owned(),
        None,
    ));
    cases.push(("plan error", observation, app_plan, options.clone()));

    let mut judged = Vec::new();
    for (name, observation, app_plan, options) in &cases {
        let nothing = apply::nothing_to_apply(observation, app_plan, options);
        // The judgement is exactly what the apply does with the whole observation.
        assert_eq!(
            nothing,
            apply_is_a_no_op(observation, app_plan, options).await,
            "{name}"
        );
        judged.push((*name, nothing));
    }
    assert_eq!(
        judged,
        vec![
            ("settled", true),
            ("adopted", false),
            ("updated", false),
            ("other source", false),
            ("stale entry", false),
            ("pending entries", false),
            ("unreadable tracker", false),
            ("plan error", false),
        ]
    );

    // What the plan keeps of the settled app: its identity, and an apply that does nothing.
    let (observation, app_plan) = settled();
    let kept = AppObservation::nothing_to_apply(observation);
    assert_eq!(kept.desired.app.name, "settled");
    assert!(kept.desired.objects.is_empty() && kept.tracker.is_none());
    assert!(kept.live.objects.is_empty());
    assert!(apply_is_a_no_op(&kept, &app_plan, &options).await);
}

#[test]
fn a_shared_render_is_built_one_namespace_group_at_a_time() {
    let rendered: Vec<analyzer::CachedApp> = [("a", "one"), ("a", "two"), ("b", "one"), ("c", "x")]
        .iter()
        .map(|(namespace, name)| {
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": name}, "data": {"k": "v"}});
            analyzer::CachedApp::pack(RenderedApp {
                app: AppRef {
                    namespace: (*namespace).to_owned(),
                    name: (*name).to_owned(),
                },
                file: cue::FileId(0),
                objects: vec![RenderedObject {
                    component: "settings".to_owned(),
                    trait_type: None,
                    output_name: None,
                    object,
                }],
                diagnostics: Vec::new(),
                input_hash: String::new(),
                inputs: Default::default(),
            })
        })
        .collect();
    let policies = BTreeMap::new();
    let scopes = BTreeMap::from([(
        ("v1".to_owned(), "ConfigMap".to_owned()),
        crate::plan::Scope::Namespaced,
    )]);
    let groups = |by_namespace: bool| {
        let builder = observe::DesiredBuilder::from_scopes(scopes.clone(), &policies, Some("abc"));
        let mut groups = Desired::Shared(&rendered[..], builder).into_groups(by_namespace);
        let mut names: Vec<Vec<String>> = Vec::new();
        while let Some(group) = groups.next_group() {
            // Built as `desired_apps` builds them: marked, in the app's namespace.
            for app in &group {
                let object = &app.objects[0];
                assert_eq!(
                    object.object_ref.namespace.as_deref(),
                    Some(app.app.namespace.as_str())
                );
                assert_eq!(app.revision.as_deref(), Some("abc"));
                assert!(crate::ownership::carries_marks_of(&object.object, &app.app));
            }
            names.push(group.iter().map(|app| app.app.to_string()).collect());
        }
        names
    };
    assert_eq!(
        groups(true),
        vec![
            vec!["a/one".to_owned(), "a/two".to_owned()],
            vec!["b/one".to_owned()],
            vec!["c/x".to_owned()],
        ]
    );
    assert_eq!(
        groups(false),
        vec![vec![
            "a/one".to_owned(),
            "a/two".to_owned(),
            "b/one".to_owned(),
            "c/x".to_owned()
        ]]
    );
}

#[test]
fn apps_are_grouped_by_namespace_in_order() {
    let apps = vec![
        desired("a", "one", &[]),
        desired("a", "two", &[]),
        desired("b", "one", &[]),
        desired("c", "one", &[]),
        desired("c", "two", &[]),
    ];
    let groups: Vec<Vec<String>> = by_namespace(apps)
        .iter()
        .map(|group| group.iter().map(|app| app.app.to_string()).collect())
        .collect();
    assert_eq!(
        groups,
        vec![
            vec!["a/one".to_owned(), "a/two".to_owned()],
            vec!["b/one".to_owned()],
            vec!["c/one".to_owned(), "c/two".to_owned()],
        ]
    );
}
