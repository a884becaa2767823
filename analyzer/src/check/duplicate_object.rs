//! `duplicate-object` (error): two Applications render the same Kubernetes object (same API
//! group, kind, namespace and name).
//!
//! Each app's apply would overwrite the other's, and each prune would delete it. The first
//! app (in app order: namespace, then name) keeps the object; the later one is blocked, with
//! a label at the first app's component.
//!
//! ```yaml
//! # apps/a.yaml and apps/b.yaml, both in namespace `shop`:
//! components:
//!   - name: web               # error in the second app: Deployment shop/web is also rendered by app shop/a
//!     type: webservice
//! ```

use std::collections::BTreeMap;

use crate::load::application::LoadedApp;
use crate::{Diagnostic, RenderedApp, RenderedObject};

/// `(group, kind, namespace, name)`.
type ObjectKey = (String, String, String, String);

pub(crate) fn check(loaded: &[LoadedApp], apps: &mut [RenderedApp]) {
    let mut owners: BTreeMap<ObjectKey, (usize, usize)> = BTreeMap::new();
    let mut found: Vec<(usize, Diagnostic)> = Vec::new();
    for (app_index, app) in apps.iter().enumerate() {
        for (object_index, object) in app.objects.iter().enumerate() {
            let Some(key) = key_of(object, &app.app.namespace) else {
                continue;
            };
            match owners.get(&key) {
                None => {
                    owners.insert(key, (app_index, object_index));
                }
                Some(&(first_app, first_object)) if first_app != app_index => {
                    let first = &apps[first_app];
                    let span = component_span(&loaded[app_index], object);
                    let first_span =
                        component_span(&loaded[first_app], &first.objects[first_object]);
                    let (_, kind, namespace, name) = &key;
                    let mut diagnostic = Diagnostic::error(
                        "duplicate-object",
                        format!(
                            "{kind} {namespace}/{name} is also rendered by app {}",
                            first.app
                        ),
                        Some(span),
                    )
                    .for_app(&app.app)
                    .with_label(first_span, format!("rendered by app {} here", first.app));
                    if loaded[app_index]
                        .app
                        .spec
                        .components
                        .iter()
                        .any(|component| component.name == object.component)
                    {
                        diagnostic = diagnostic.for_component(&object.component);
                    }
                    found.push((app_index, diagnostic));
                }
                Some(_) => {}
            }
        }
    }
    for (app_index, diagnostic) in found {
        apps[app_index].diagnostics.push(diagnostic);
    }
}

fn key_of(object: &RenderedObject, app_namespace: &str) -> Option<ObjectKey> {
    let value = &object.object;
    let api_version = value.get("apiVersion")?.as_str()?;
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = value.get("kind")?.as_str()?;
    let name = value.pointer("/metadata/name")?.as_str()?;
    let namespace = value
        .pointer("/metadata/namespace")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(app_namespace);
    Some((
        group.to_owned(),
        kind.to_owned(),
        namespace.to_owned(),
        name.to_owned(),
    ))
}

fn component_span(loaded: &LoadedApp, object: &RenderedObject) -> cue::Span {
    let positions = &loaded.document.positions;
    match loaded
        .app
        .spec
        .components
        .iter()
        .position(|component| component.name == object.component)
    {
        Some(index) => positions.value_span(&format!("/spec/components/{index}/name")),
        None => positions.value_span("/metadata/name"),
    }
}
