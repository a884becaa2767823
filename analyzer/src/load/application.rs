//! Turns a YAML document of kind `Application` into the typed model, with the structural
//! checks that need no definitions: `missing-field`, `duplicate-component`, `invalid-field`
//! and `unknown-field`.

use cue::FileId;
use serde::Deserialize;

use super::yaml::{YamlDocument, escape_segment};
use crate::model::Application;
use crate::model::application_known_keys as known_keys;
use crate::{AppRef, Diagnostic};

/// An Application as loaded, with its source document for positions.
#[derive(Debug, Clone)]
pub(crate) struct LoadedApp {
    pub(crate) app: Application,
    pub(crate) app_ref: AppRef,
    pub(crate) file: FileId,
    pub(crate) document: YamlDocument,
    /// SHA-256 of the whole file the app was read from: part of the input hash, so a change
    /// that moves the app's lines (and so its diagnostics' positions) changes the hash too.
    pub(crate) file_digest: [u8; 32],
    /// Problems found while loading; errors block the app.
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// Where the namespace of an app comes from when its manifest has none.
#[derive(Debug, Clone)]
pub(crate) struct NamespaceRules<'a> {
    /// `-n`: wins over `metadata.namespace` (KubeVela's `vela dry-run -n`).
    pub(crate) forced: Option<&'a str>,
    pub(crate) default: &'a str,
}

/// Loads one Application document. `Err` carries the diagnostic when the document cannot
/// identify an app at all (no `metadata.name`, or a malformed shape): it is reported without
/// an app.
pub(crate) fn load_application(
    file: FileId,
    file_digest: [u8; 32],
    document: YamlDocument,
    namespaces: &NamespaceRules<'_>,
) -> Result<LoadedApp, Diagnostic> {
    let positions = &document.positions;
    // `get`, not `pointer`: serde_json unescapes every segment of a pointer into a new String.
    let name = document
        .value
        .get("metadata")
        .and_then(|metadata| metadata.get("name"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    if name.is_empty() {
        return Err(Diagnostic::error(
            "missing-field",
            "Application has no `metadata.name`",
            Some(positions.key_span("/metadata/name")),
        ));
    }
    // Without path tracking first: almost every app decodes, and serde_path_to_error costs a
    // path segment per field; only a failure is decoded again to name where.
    let decoded = Application::deserialize(&document.value).or_else(|_| {
        serde_path_to_error::deserialize(&document.value).map_err(|error| {
            let pointer = pointer_of_serde_path(error.path());
            Diagnostic::error(
                "invalid-field",
                format!(
                    "Application `{name}`: invalid `{}`: {}",
                    error.path(),
                    error.inner()
                ),
                Some(positions.value_span(&pointer)),
            )
        })
    });
    let mut app = decoded?;
    // KubeVela names anonymous policies `<type>-auto-gen-<index>` before anything else reads
    // them (`pkg/appfile/parser.go`, `GenerateAppFileFromApp`).
    for (index, policy) in app.spec.policies.iter_mut().enumerate() {
        if policy.name.is_empty() && !policy.policy_type.is_empty() {
            policy.name = format!("{}-auto-gen-{index}", policy.policy_type);
        }
    }
    let namespace = namespaces
        .forced
        .map(str::to_owned)
        .or_else(|| app.metadata.namespace.clone().filter(|ns| !ns.is_empty()))
        .unwrap_or_else(|| namespaces.default.to_owned());
    let app_ref = AppRef {
        namespace,
        name: name.to_owned(),
    };
    let mut diagnostics = Vec::new();
    check_components(&app, &document, &mut diagnostics);
    check_unknown_fields(&document, &mut diagnostics);
    for diagnostic in &mut diagnostics {
        diagnostic.app = Some(app_ref.clone());
    }
    Ok(LoadedApp {
        app,
        app_ref,
        file,
        document,
        file_digest,
        diagnostics,
    })
}

/// `missing-field` for components and traits without a name or type, and
/// `duplicate-component`.
fn check_components(app: &Application, document: &YamlDocument, out: &mut Vec<Diagnostic>) {
    let positions = &document.positions;
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for (index, component) in app.spec.components.iter().enumerate() {
        let pointer = format!("/spec/components/{index}");
        if component.name.is_empty() {
            out.push(Diagnostic::error(
                "missing-field",
                format!("component #{} has no `name`", index + 1),
                Some(positions.value_span(&pointer)),
            ));
        } else if let Some((_, first)) = seen.iter().find(|(name, _)| *name == component.name) {
            out.push(
                Diagnostic::error(
                    "duplicate-component",
                    format!("duplicate component name `{}`", component.name),
                    Some(positions.value_span(&format!("{pointer}/name"))),
                )
                .for_component(&component.name)
                .with_label(
                    positions.value_span(&format!("/spec/components/{first}/name")),
                    "first declared here",
                ),
            );
        } else {
            seen.push((&component.name, index));
        }
        if component.component_type.is_empty() {
            let diagnostic = Diagnostic::error(
                "missing-field",
                format!("component `{}` has no `type`", component.name),
                Some(positions.key_span(&format!("{pointer}/type"))),
            );
            out.push(diagnostic.for_component(&component.name));
        }
        for (trait_index, component_trait) in component.traits.iter().enumerate() {
            if component_trait.trait_type.is_empty() {
                out.push(
                    Diagnostic::error(
                        "missing-field",
                        format!(
                            "trait #{} of component `{}` has no `type`",
                            trait_index + 1,
                            component.name
                        ),
                        Some(positions.value_span(&format!("{pointer}/traits/{trait_index}"))),
                    )
                    .for_component(&component.name),
                );
            }
        }
    }
    for (index, policy) in app.spec.policies.iter().enumerate() {
        let pointer = format!("/spec/policies/{index}");
        if policy.name.is_empty() || policy.policy_type.is_empty() {
            let missing = if policy.name.is_empty() {
                "name"
            } else {
                "type"
            };
            out.push(Diagnostic::error(
                "missing-field",
                format!("policy #{} has no `{missing}`", index + 1),
                Some(positions.value_span(&pointer)),
            ));
        }
    }
}

/// `unknown-field` warnings: keys the Application schema does not have. KubeVela's CRD would
/// prune them silently, which hides typos like `trait:` for `traits:`.
///
/// Walks the document once from the root (every app of every analysis goes through here: a
/// JSON-pointer lookup from the root per object hashed each segment again).
fn check_unknown_fields(document: &YamlDocument, out: &mut Vec<Diagnostic>) {
    use serde_json::Value;
    let mut check = |object: Option<&Value>, pointer: &str, known: &[&str]| {
        let Some(object) = object.and_then(Value::as_object) else {
            return;
        };
        for key in object.keys() {
            if !known.contains(&key.as_str()) {
                let key_pointer = format!("{pointer}/{}", escape_segment(key));
                out.push(Diagnostic::warning(
                    "unknown-field",
                    format!(
                        "unknown field `{key}` in `{}`",
                        display_path(pointer).unwrap_or_else(|| "the document".to_owned())
                    ),
                    Some(document.positions.key_span(&key_pointer)),
                ));
            }
        }
    };
    fn items<'v>(value: Option<&'v Value>, key: &str) -> &'v [Value] {
        value
            .and_then(|value| value.get(key))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
    let root = Some(&document.value);
    let spec = document.value.get("spec");
    let workflow = spec.and_then(|spec| spec.get("workflow"));
    check(root, "", known_keys::DOCUMENT);
    check(spec, "/spec", known_keys::SPEC);
    check(workflow, "/spec/workflow", known_keys::WORKFLOW);
    check(
        workflow.and_then(|workflow| workflow.get("mode")),
        "/spec/workflow/mode",
        known_keys::MODE,
    );
    for (index, component) in items(spec, "components").iter().enumerate() {
        let pointer = format!("/spec/components/{index}");
        check(Some(component), &pointer, known_keys::COMPONENT);
        for (trait_index, component_trait) in items(Some(component), "traits").iter().enumerate() {
            check(
                Some(component_trait),
                &format!("{pointer}/traits/{trait_index}"),
                known_keys::TRAIT,
            );
        }
    }
    for (index, policy) in items(spec, "policies").iter().enumerate() {
        check(
            Some(policy),
            &format!("/spec/policies/{index}"),
            known_keys::POLICY,
        );
    }
    // Last step first, each step before its sub-steps (the order of the reports).
    let mut steps: Vec<(String, &Value)> = items(workflow, "steps")
        .iter()
        .enumerate()
        .map(|(index, step)| (format!("/spec/workflow/steps/{index}"), step))
        .collect();
    while let Some((pointer, step)) = steps.pop() {
        check(Some(step), &pointer, known_keys::STEP);
        for (index, sub_step) in items(Some(step), "subSteps").iter().enumerate() {
            steps.push((format!("{pointer}/subSteps/{index}"), sub_step));
        }
    }
}

/// `/spec/components/1/traits` → `spec.components[1].traits`; `None` for the root.
pub(crate) fn display_path(pointer: &str) -> Option<String> {
    if pointer.is_empty() {
        return None;
    }
    let mut out = String::new();
    for segment in pointer.trim_start_matches('/').split('/') {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if segment.parse::<usize>().is_ok() {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        }
    }
    Some(out)
}

/// A serde path (`spec.components[1].traits`) as a JSON pointer.
fn pointer_of_serde_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut pointer = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => pointer.push_str(&format!("/{index}")),
            Segment::Map { key } => pointer.push_str(&format!("/{}", escape_segment(key))),
            Segment::Enum { variant } => pointer.push_str(&format!("/{}", escape_segment(variant))),
            Segment::Unknown => {}
        }
    }
    pointer
}

/// Deserializes `T` from a JSON value, naming the failing path. Used for definition CRs.
pub(crate) fn from_json_with_path<T: for<'de> Deserialize<'de>>(
    value: &serde_json::Value,
) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        (
            pointer_of_serde_path(error.path()),
            format!("invalid `{}`: {}", error.path(), error.inner()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::yaml::parse_documents;

    fn load(text: &str) -> Result<LoadedApp, Diagnostic> {
        let document = parse_documents(FileId(0), text).unwrap().remove(0);
        let rules = NamespaceRules {
            forced: None,
            default: "default",
        };
        load_application(FileId(0), [0; 32], document, &rules)
    }

    fn summary(text: &str, diagnostics: &[Diagnostic]) -> Vec<String> {
        let index = cue::LineIndex::new(text);
        diagnostics
            .iter()
            .map(|diagnostic| {
                let position = diagnostic.span.map(|span| index.line_col(span.start));
                let (line, column) = position.map_or((0, 0), |lc| (lc.line, lc.column));
                format!("{line}:{column} {} {}", diagnostic.rule, diagnostic.message)
            })
            .collect()
    }

    #[test]
    fn loads_components_traits_and_namespace() {
        let text = "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata:\n  name: demo\n  namespace: team-a\nspec:\n  components:\n  - name: web\n    type: webservice\n    properties: {image: nginx}\n    traits:\n    - type: scaler\n      properties: {replicas: 2}\n";
        let loaded = load(text).unwrap();
        assert_eq!(loaded.app_ref.to_string(), "team-a/demo");
        let component = &loaded.app.spec.components[0];
        assert_eq!(component.component_type, "webservice");
        assert_eq!(component.traits[0].trait_type, "scaler");
        assert!(loaded.diagnostics.is_empty());
    }

    #[test]
    fn structural_problems_are_diagnostics_with_positions() {
        let text = "kind: Application\nmetadata:\n  name: demo\nspec:\n  components:\n  - name: web\n    type: webservice\n    trait:\n    - type: scaler\n  - name: web\n    type: worker\n  - type: task\n  - name: db\n";
        let loaded = load(text).unwrap();
        assert_eq!(
            summary(text, &loaded.diagnostics),
            vec![
                "10:11 duplicate-component duplicate component name `web`",
                "12:5 missing-field component #3 has no `name`",
                "13:5 missing-field component `db` has no `type`",
                "8:5 unknown-field unknown field `trait` in `spec.components[0]`",
            ]
        );
    }

    #[test]
    fn missing_name_and_bad_shapes_fail_the_document() {
        let text = "kind: Application\nmetadata:\n  labels: {a: b}\n";
        let error = load(text).unwrap_err();
        assert_eq!(
            summary(text, &[error]),
            vec!["2:1 missing-field Application has no `metadata.name`"]
        );
        let text = "kind: Application\nmetadata:\n  name: x\nspec:\n  components: {web: 1}\n";
        let error = load(text).unwrap_err();
        assert_eq!(
            summary(text, &[error]),
            vec![
                "5:15 invalid-field Application `x`: invalid `spec.components`: invalid type: map, expected a sequence"
            ]
        );
    }

    #[test]
    fn unknown_fields_are_reported_at_every_level() {
        let text = "kind: Application\nextra: 1\nmetadata:\n  name: demo\nspec:\n  x-spec: 1\n  components:\n  - name: web\n    type: webservice\n    typ: worker\n    traits:\n    - type: scaler\n      propertys: {}\n  - name: db\n    type: worker\n    outputz: 1\n  policies:\n  - name: p\n    type: topology\n    prop: 1\n  workflow:\n    mode: {steps: DAG, sub: x}\n    stpes: []\n    steps:\n    - name: a\n      type: deploy\n      tipe: 1\n      subSteps:\n      - {name: a1, type: suspend, x1: 1}\n      - {name: a2, type: suspend, x2: 1}\n    - name: b\n      type: deploy\n      xb: 1\n";
        let loaded = load(text).unwrap();
        let unknown: Vec<String> = summary(text, &loaded.diagnostics)
            .into_iter()
            .filter(|line| line.contains("unknown-field"))
            .collect();
        // The order of the reports: the top levels, each component then its traits, policies,
        // then workflow steps last first, each before its sub-steps (also last first).
        assert_eq!(
            unknown,
            vec![
                "2:1 unknown-field unknown field `extra` in `the document`",
                "6:3 unknown-field unknown field `x-spec` in `spec`",
                "23:5 unknown-field unknown field `stpes` in `spec.workflow`",
                "22:24 unknown-field unknown field `sub` in `spec.workflow.mode`",
                "10:5 unknown-field unknown field `typ` in `spec.components[0]`",
                "13:7 unknown-field unknown field `propertys` in `spec.components[0].traits[0]`",
                "16:5 unknown-field unknown field `outputz` in `spec.components[1]`",
                "20:5 unknown-field unknown field `prop` in `spec.policies[0]`",
                "33:7 unknown-field unknown field `xb` in `spec.workflow.steps[1]`",
                "27:7 unknown-field unknown field `tipe` in `spec.workflow.steps[0]`",
                "30:35 unknown-field unknown field `x2` in `spec.workflow.steps[0].subSteps[1]`",
                "29:35 unknown-field unknown field `x1` in `spec.workflow.steps[0].subSteps[0]`",
            ]
        );
    }

    #[test]
    fn display_paths_read_like_kubectl() {
        assert_eq!(
            display_path("/spec/components/1/properties/image").as_deref(),
            Some("spec.components[1].properties.image")
        );
    }
}
