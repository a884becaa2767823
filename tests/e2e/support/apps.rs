//! Repositories of small generated apps for the live-path tests.

use analyzer::{Snapshot, SourceFile};

/// `apps` Applications `app-0`… in `namespace`, each one ConfigMap `app-<i>-settings` with
/// `color: <color>` (`k8s-objects`, so nothing but the ConfigMap is rendered).
pub fn config_map_apps(namespace: &str, apps: usize, color: &str) -> Snapshot {
    let files = (0..apps)
        .map(|index| SourceFile {
            path: format!("apps/app-{index}.yaml"),
            contents: config_map_app(&format!("app-{index}"), namespace, color),
        })
        .collect();
    Snapshot {
        commit: None,
        files,
    }
}

/// The Application `name` in `namespace`: one ConfigMap `<name>-settings` with `color: <color>`.
pub fn config_map_app(name: &str, namespace: &str, color: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
    - name: settings
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}-settings
            data:
              color: {color}
"
    )
}

/// The Application `name` in `namespace` whose one component has a type no definition
/// provides: it fails to render.
pub fn broken_app(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
    - name: thing
      type: no-such-component-type
      properties: {{}}
"
    )
}
