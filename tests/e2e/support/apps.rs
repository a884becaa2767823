//! Repositories of small generated apps for the live-path tests.

use analyzer::{Snapshot, SourceFile};

/// `apps` Applications `app-0`… in `namespace`, each one ConfigMap `app-<i>-settings` with
/// `color: <color>` (`k8s-objects`, so nothing but the ConfigMap is rendered).
pub fn config_map_apps(namespace: &str, apps: usize, color: &str) -> Snapshot {
    let files = (0..apps)
        .map(|index| SourceFile {
            path: format!("apps/app-{index}.yaml"),
            contents: format!(
                "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: app-{index}
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
              name: app-{index}-settings
            data:
              color: {color}
"
            ),
        })
        .collect();
    Snapshot {
        commit: None,
        files,
    }
}
