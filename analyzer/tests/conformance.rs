//! The KubeVela render conformance harness (CONFORMANCE.md).
//!
//! Every example Application found under `shared/kubevela/` by `hack/regen-conformance.sh` is
//! listed in `tests/conformance/manifest.json` with the outcome of the real
//! `vela dry-run --offline`; the objects vela printed are checked in under
//! `tests/conformance/references/`. This harness renders each example through Driftless with
//! KubeVela's own definitions (read in place from `vela-templates/definitions/internal/`, plus
//! the definitions the example brings, exactly those the manifest lists) and compares the
//! object sets semantically: objects keyed by apiVersion, kind, namespace and name, contents as
//! canonical JSON (numbers by value, key order ignored, list order kept).
//!
//! It prints PASS, FAIL or SKIP per example and the pass rate, and fails when the rate drops
//! below [`PASS_RATE_FLOOR`]. Skips are decided by what an example needs, never by its file
//! name: vela itself failed on it, or it uses a definition that needs a cluster or a provider
//! (see [`skip_reason`]).
//!
//!   cargo test -p analyzer --test conformance -- --nocapture
//!
//! `KUBEVELA=/path/to/kubevela` overrides the location of the shared folder; `CONFORMANCE=text`
//! runs only the examples whose id contains `text` (the floor is then not checked), and
//! `CONFORMANCE_SHOW=1` prints the objects Driftless renders for them.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use analyzer::{
    Definitions, Placement, RenderOptions, RenderOutput, Severity, Snapshot, SourceFile, SourceMap,
};
use serde::Deserialize;
use serde_json::Value;

/// The pass rate (passed / not skipped) this harness achieved when it was last raised; a change
/// that renders fewer examples like KubeVela fails the test.
const PASS_RATE_FLOOR: f64 = 0.986;

/// The bar: at least 95% of the examples that are not skipped render like KubeVela.
const REQUIRED_PASS_RATE: f64 = 0.95;

/// The Helm chart's definitions carry a template expression for their namespace; upstream
/// tests and `hack/regen-conformance.sh` substitute `vela-system`.
const HELM_NAMESPACE: &str = "{{ include \"systemDefinitionNamespace\" . }}";

#[derive(Debug, Deserialize)]
struct Manifest {
    examples: Vec<Example>,
}

#[derive(Debug, Deserialize)]
struct Example {
    id: String,
    source: String,
    document: usize,
    /// Standalone Policy and Workflow documents of the same file, passed to vela with the app.
    companions: Vec<usize>,
    definitions: Vec<DocumentRef>,
    outcome: Outcome,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    reference: Option<String>,
}

#[derive(Debug, Deserialize)]
struct DocumentRef {
    path: String,
    document: usize,
}

#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum Outcome {
    Rendered,
    VelaError,
}

#[derive(Debug, Deserialize)]
struct Reference {
    renders: Vec<ReferenceRender>,
}

/// One block of vela's output: a label (`app`, `app with topology t`, `app only with override
/// policies`) and its objects.
#[derive(Debug, Deserialize)]
struct ReferenceRender {
    label: String,
    objects: Vec<ReferenceObject>,
}

#[derive(Debug, Deserialize)]
struct ReferenceObject {
    object: Value,
}

/// The verdict on one example.
#[derive(Debug)]
enum Verdict {
    Pass,
    Fail(String),
    Skip(String),
}

fn kubevela_root() -> PathBuf {
    let root = std::env::var_os("KUBEVELA").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/kubevela"),
        PathBuf::from,
    );
    assert!(
        root.join("vela-templates/definitions/internal").is_dir(),
        "KubeVela reference folder not found at {} (set KUBEVELA)",
        root.display()
    );
    root
}

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

fn read_kubevela(root: &Path, relative: &str) -> String {
    let path = root.join(relative);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    String::from_utf8_lossy(&bytes).replace(HELM_NAMESPACE, "vela-system")
}

/// Splits YAML text at `---` lines exactly like `hack/regen-conformance.sh`, so document
/// indexes agree: a separator is `---` followed only by blanks or a comment, and documents
/// without a line that is neither blank nor a comment are dropped before numbering.
fn split_documents(text: &str) -> Vec<String> {
    let is_separator = |line: &str| {
        line.strip_prefix("---").is_some_and(|rest| {
            let rest = rest.trim_start_matches([' ', '\t']);
            rest.is_empty() || rest.starts_with('#')
        })
    };
    let mut documents = vec![Vec::new()];
    for line in text.split('\n') {
        if is_separator(line) {
            documents.push(Vec::new());
        } else if let Some(current) = documents.last_mut() {
            current.push(line);
        }
    }
    documents
        .into_iter()
        .filter(|lines| {
            lines.iter().any(|line| {
                let trimmed = line.trim();
                !trimmed.is_empty() && !trimmed.starts_with('#')
            })
        })
        .map(|lines| lines.join("\n"))
        .collect()
}

/// KubeVela's internal definitions (every class, `.cue`), as snapshot files that sort before
/// the example's own, so an example's definition of the same kind and name wins (Driftless:
/// the later path wins), like the regeneration script's choice.
fn internal_definitions(root: &Path) -> Vec<SourceFile> {
    let internal = root.join("vela-templates/definitions/internal");
    let mut files = Vec::new();
    let mut classes: Vec<PathBuf> = std::fs::read_dir(&internal)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    classes.sort();
    for class in classes {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&class)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "cue"))
            .collect();
        names.sort();
        for path in names {
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            files.push(SourceFile {
                path: format!(
                    "definitions/0-kubevela/{}",
                    path.strip_prefix(&internal).unwrap().to_string_lossy()
                ),
                contents: read_kubevela(root, &relative),
            });
        }
    }
    files
}

/// The snapshot vela saw: the app document and its companions in one file, the example's
/// definitions one document per file, KubeVela's internal definitions.
fn example_snapshot(root: &Path, internal: &[SourceFile], example: &Example) -> Snapshot {
    let documents = split_documents(&read_kubevela(root, &example.source));
    let mut app_text = String::new();
    for index in std::iter::once(example.document).chain(example.companions.iter().copied()) {
        app_text.push_str("---\n");
        app_text.push_str(&documents[index]);
        app_text.push('\n');
    }
    let mut files = internal.to_vec();
    files.push(SourceFile {
        path: "apps/app.yaml".to_owned(),
        contents: app_text,
    });
    for (index, definition) in example.definitions.iter().enumerate() {
        let documents = split_documents(&read_kubevela(root, &definition.path));
        files.push(SourceFile {
            path: format!("definitions/1-example/{index:03}.yaml"),
            contents: documents[definition.document].clone(),
        });
    }
    Snapshot {
        commit: None,
        files,
    }
}

/// Why an example cannot be compared, from what it needs (never from its name): vela itself
/// failed; a component type whose schematic is not CUE (Terraform, Helm, raw `kube`), which
/// needs its controller or provider.
fn skip_reason(root: &Path, example: &Example) -> Option<String> {
    if example.outcome == Outcome::VelaError {
        let reason = example.reason.as_deref().unwrap_or("no message");
        return Some(format!(
            "vela dry-run failed: {}",
            vela_error_category(reason)
        ));
    }
    let app = document_value(root, &example.source, example.document)?;
    let components = app.pointer("/spec/components").and_then(Value::as_array);
    let component_types: Vec<&str> = components
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("type").and_then(Value::as_str))
        .collect();
    for definition in &example.definitions {
        let Some(value) = document_value(root, &definition.path, definition.document) else {
            continue;
        };
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if kind != "ComponentDefinition" || !component_types.contains(&name) {
            continue;
        }
        let schematic = value.pointer("/spec/schematic").and_then(Value::as_object);
        if let Some(other) = schematic
            .into_iter()
            .flat_map(|s| s.keys())
            .find(|key| key.as_str() != "cue")
        {
            return Some(format!(
                "needs a controller or provider: component type `{name}` has a `{other}` \
                 schematic (only CUE templates render offline)"
            ));
        }
    }
    None
}

/// One document of a KubeVela file as JSON, when it parses.
fn document_value(root: &Path, path: &str, document: usize) -> Option<Value> {
    let documents = split_documents(&read_kubevela(root, path));
    serde_saphyr::from_str(documents.get(document)?).ok()
}

/// A short, stable category for vela's error, then its message.
fn vela_error_category(reason: &str) -> String {
    let category = if reason.contains("failed to get API group resources")
        || reason.contains("parseReferredObjects")
    {
        "needs a cluster (a provider call or ref-objects reads live state)"
    } else if reason.contains("cannot load template") || reason.contains("not found") {
        "a definition it uses is not available offline"
    } else if reason.contains("yaml") || reason.contains("json") {
        "the example is not a valid manifest"
    } else if reason.contains("validation failed") || reason.contains("incomplete value") {
        "its template does not evaluate with the example's properties"
    } else {
        "error"
    };
    format!("{category} ({reason})")
}

/// Numbers by value (vela's output went through float64 and YAML), objects by key.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Number(number) => match (number.as_i64(), number.as_f64()) {
            (Some(integer), _) => Value::from(integer),
            (None, Some(float)) if float.fract() == 0.0 && float.abs() < 9.0e15 => {
                Value::from(float as i64)
            }
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        Value::Object(object) => {
            let sorted: BTreeMap<&String, Value> =
                object.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        other => other.clone(),
    }
}

/// An object's identity in a render.
fn object_key(object: &Value) -> String {
    let field = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    format!(
        "{} {} {}/{}",
        field("/apiVersion"),
        field("/kind"),
        field("/metadata/namespace"),
        field("/metadata/name")
    )
}

/// Objects keyed by identity; several objects with one identity keep their order.
fn object_set<'a>(objects: impl Iterator<Item = &'a Value>) -> BTreeMap<String, Vec<Value>> {
    let mut set: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for object in objects {
        set.entry(object_key(object))
            .or_default()
            .push(canonical(object));
    }
    set
}

/// The first few JSON paths where two values differ.
fn differences(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    if out.len() >= 4 || expected == actual {
        return;
    }
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                match a.get(key) {
                    Some(other) => differences(&format!("{path}.{key}"), value, other, out),
                    None => out.push(format!("{path}.{key}: missing (vela: {})", short(value))),
                }
            }
            for (key, value) in a {
                if !e.contains_key(key) {
                    out.push(format!("{path}.{key}: extra ({})", short(value)));
                }
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (index, (e, a)) in e.iter().zip(a).enumerate() {
                differences(&format!("{path}[{index}]"), e, a, out);
            }
        }
        (Value::String(e), Value::String(a)) if e.chars().count() > 120 => {
            // Long strings (JSON in annotations, scripts): show where they start to differ.
            let at = e.chars().zip(a.chars()).take_while(|(x, y)| x == y).count();
            let window = |text: &str| {
                text.chars()
                    .skip(at.saturating_sub(30))
                    .take(80)
                    .collect::<String>()
            };
            out.push(format!(
                "{path}: differs at character {at}: vela …{:?}… != driftless …{:?}…",
                window(e),
                window(a)
            ));
        }
        _ => out.push(format!(
            "{path}: vela {} != driftless {}",
            short(expected),
            short(actual)
        )),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 120 {
        format!("{}…", text.chars().take(120).collect::<String>())
    } else {
        text
    }
}

/// Compares one render with vela's object set; `Err` says how they differ.
fn compare(expected: &[Value], actual: &[Value]) -> Result<(), String> {
    let expected = object_set(expected.iter());
    let actual = object_set(actual.iter());
    if expected == actual {
        return Ok(());
    }
    let mut problems = Vec::new();
    for (key, objects) in &expected {
        match actual.get(key) {
            None => problems.push(format!("missing object {key}")),
            Some(other) if other.len() != objects.len() => problems.push(format!(
                "{key}: vela renders {} objects, driftless {}",
                objects.len(),
                other.len()
            )),
            Some(other) => {
                for (e, a) in objects.iter().zip(other) {
                    let mut paths = Vec::new();
                    differences("", e, a, &mut paths);
                    if !paths.is_empty() {
                        problems.push(format!("{key}: {}", paths.join("; ")));
                    }
                }
            }
        }
    }
    for key in actual.keys() {
        if !expected.contains_key(key) {
            problems.push(format!("extra object {key}"));
        }
    }
    Err(problems.join("\n        "))
}

fn first_error(output: &RenderOutput, sources: &SourceMap) -> Option<String> {
    let app_errors = output.apps.iter().flat_map(|app| &app.diagnostics);
    app_errors
        .chain(&output.diagnostics)
        .find(|d| d.severity == Severity::Error)
        .map(|diagnostic| match diagnostic.span {
            Some(span) => {
                let location = sources.locate(span);
                format!(
                    "{} {}:{}: {}",
                    diagnostic.rule, location.path, location.line, diagnostic.message
                )
            }
            None => format!("{} {}", diagnostic.rule, diagnostic.message),
        })
}

fn judge(root: &Path, internal: &[SourceFile], example: &Example) -> Verdict {
    if let Some(reason) = skip_reason(root, example) {
        return Verdict::Skip(reason);
    }
    let reference_path = conformance_dir().join(example.reference.as_deref().unwrap_or_default());
    let reference: Reference = serde_json::from_str(
        &std::fs::read_to_string(&reference_path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", reference_path.display())),
    )
    .unwrap_or_else(|e| panic!("parsing {}: {e}", reference_path.display()));
    let snapshot = example_snapshot(root, internal, example);
    let (apps, sources) =
        analyzer::render_placements(&snapshot, &Definitions::empty(), &RenderOptions::default());
    let Some(app) = apps.first() else {
        let (output, sources) =
            analyzer::render_snapshot(&snapshot, &Definitions::empty(), &RenderOptions::default());
        return Verdict::Fail(format!(
            "driftless found no Application ({})",
            first_error(&output, &sources).unwrap_or_else(|| "no diagnostic".to_owned())
        ));
    };
    // vela prints one render per placement (topology of a deploy step), in order; an app
    // without components prints nothing at all.
    let placements: Vec<&Placement> = app
        .placements
        .iter()
        .filter(|p| !p.rendered.objects.is_empty() || p.rendered.is_blocked())
        .collect();
    if let Some(blocked) = placements.iter().find(|p| p.rendered.is_blocked()) {
        // Snapshot-level diagnostics (a definition that failed to load) explain app errors
        // such as an unknown component type, so they are shown too.
        let (mut whole, _) =
            analyzer::render_snapshot(&snapshot, &Definitions::empty(), &RenderOptions::default());
        let output = RenderOutput {
            apps: vec![blocked.rendered.clone()],
            diagnostics: std::mem::take(&mut whole.diagnostics),
        };
        let mut context = String::new();
        for diagnostic in output
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
        {
            let location = diagnostic.span.map(|span| sources.locate(span));
            write!(
                context,
                "; {} {}: {}",
                diagnostic.rule,
                location.map_or(String::new(), |l| format!("{}:{}", l.path, l.line)),
                diagnostic.message
            )
            .unwrap();
        }
        return Verdict::Fail(format!(
            "driftless blocked the app: {}{context}",
            first_error(&output, &sources).unwrap_or_default()
        ));
    }
    // vela labels each render by its topology, and the regeneration script joins consecutive
    // blocks with one label (two deploy steps with the same topology): join them alike.
    let mut joined: Vec<(Option<&str>, Vec<Value>)> = Vec::new();
    for placement in &placements {
        let objects = placement.rendered.objects.iter().map(|o| o.object.clone());
        match joined.last_mut() {
            Some((topology, joined_objects)) if *topology == placement.topology.as_deref() => {
                joined_objects.extend(objects)
            }
            _ => joined.push((placement.topology.as_deref(), objects.collect())),
        }
    }
    if joined.len() != reference.renders.len() {
        return Verdict::Fail(format!(
            "vela prints {} renders ({}), driftless renders {} placements",
            reference.renders.len(),
            reference
                .renders
                .iter()
                .map(|r| r.label.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            joined.len()
        ));
    }
    let mut problems = Vec::new();
    for (render, (placement_topology, actual)) in reference.renders.iter().zip(&joined) {
        let topology = render
            .label
            .split_once(" with topology ")
            .map(|(_, topology)| topology);
        if topology != *placement_topology {
            problems.push(format!(
                "[{}] driftless placement has topology {placement_topology:?}",
                render.label
            ));
            continue;
        }
        let expected: Vec<Value> = render.objects.iter().map(|o| o.object.clone()).collect();
        if std::env::var_os("CONFORMANCE_SHOW").is_some() {
            for object in actual {
                println!("driftless [{}]: {object}", render.label);
            }
        }
        if let Err(problem) = compare(&expected, actual) {
            problems.push(format!("[{}] {problem}", render.label));
        }
    }
    if problems.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(problems.join("\n      "))
    }
}

#[test]
fn kubevela_examples_render_like_vela() {
    let root = kubevela_root();
    let manifest_path = conformance_dir().join("manifest.json");
    let manifest: Manifest =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    let filter = std::env::var("CONFORMANCE").ok();
    let internal = internal_definitions(&root);
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    let mut report = String::new();
    for example in &manifest.examples {
        if filter.as_deref().is_some_and(|f| !example.id.contains(f)) {
            continue;
        }
        match judge(&root, &internal, example) {
            Verdict::Pass => {
                passed += 1;
                writeln!(report, "PASS {}", example.id).unwrap();
            }
            Verdict::Fail(reason) => {
                failed += 1;
                writeln!(report, "FAIL {}\n      {reason}", example.id).unwrap();
            }
            Verdict::Skip(reason) => {
                skipped += 1;
                writeln!(report, "SKIP {}: {reason}", example.id).unwrap();
            }
        }
    }
    let compared = passed + failed;
    let rate = if compared == 0 {
        0.0
    } else {
        passed as f64 / compared as f64
    };
    writeln!(
        report,
        "\nconformance: {passed} passed, {failed} failed, {skipped} skipped; pass rate {:.1}% of {compared} compared examples",
        rate * 100.0
    )
    .unwrap();
    println!("{report}");
    if filter.is_none() {
        assert!(
            rate >= PASS_RATE_FLOOR,
            "pass rate {:.1}% dropped below the floor {:.1}%",
            rate * 100.0,
            PASS_RATE_FLOOR * 100.0
        );
        assert!(
            rate >= REQUIRED_PASS_RATE,
            "pass rate {:.1}% is below the required {:.0}%",
            rate * 100.0,
            REQUIRED_PASS_RATE * 100.0
        );
    }
}

#[test]
fn documents_split_like_the_regeneration_script() {
    let text = "# header\n---\na: 1\n--- # comment\n# only a comment\n---\nb: 2\n---x: 3\n";
    assert_eq!(split_documents(text), vec!["a: 1", "b: 2\n---x: 3\n"]);
}

#[test]
fn numbers_compare_by_value_and_keys_by_identity() {
    let vela: Value = serde_json::json!({"kind": "A", "spec": {"replicas": 1.0, "b": [2, 1]}});
    let driftless: Value = serde_json::json!({"spec": {"b": [2, 1], "replicas": 1}, "kind": "A"});
    assert!(compare(std::slice::from_ref(&vela), &[driftless]).is_ok());
    let reordered: Value = serde_json::json!({"kind": "A", "spec": {"replicas": 1, "b": [1, 2]}});
    let problem = compare(&[vela], &[reordered]).unwrap_err();
    assert!(
        problem.contains(".spec.b[0]: vela 2 != driftless 1"),
        "{problem}"
    );
}
