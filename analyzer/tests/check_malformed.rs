//! Any file in a repository, however malformed, yields diagnostics and never a panic: the
//! whole analysis (YAML loading, the Application model, definitions, rendering, every rule,
//! OpenAPI and CRD validation) runs on deterministic mutations of real files (the golden
//! cases' Applications, definitions and CRDs, and KubeVela's example Applications), and on a
//! hand-picked list of pathological YAML. Every diagnostic must have its spans inside its
//! file, and no app may end in `internal-error` (a caught panic). The cargo-fuzz target
//! `analyze_yaml` explores further (FUZZING.md).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use analyzer::{AnalysisOptions, Snapshot, SourceFile};

/// A small deterministic generator (xorshift64*), so failures reproduce exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that matter to YAML (indicators, anchors, tags, flow collections, block scalars)
/// and to the CUE embedded in definitions.
const SYNTAX: &[u8] = b"-:?,[]{}#&*!|>'\"%@`\n \t{}()=<.0";

fn mutate(source: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bytes = source.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(6) {
            0 => bytes.truncate(at),
            1 if at < bytes.len() => bytes[at] ^= 1 << rng.below(7),
            2 if at < bytes.len() => {
                let end = (at + 1 + rng.below(12)).min(bytes.len());
                bytes.drain(at..end);
            }
            3 => bytes.insert(at, SYNTAX[rng.below(SYNTAX.len())]),
            4 => {
                // Shift a line's indentation: the commonest real YAML mistake.
                let line_start = bytes[..at]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                bytes.splice(
                    line_start..line_start,
                    std::iter::repeat_n(b' ', 1 + rng.below(3)),
                );
            }
            _ => {
                let end = (at + rng.below(48)).min(bytes.len());
                let slice = bytes[at..end].to_vec();
                let to = rng.below(bytes.len() + 1);
                bytes.splice(to..to, slice);
            }
        }
    }
    bytes
}

fn files_under(dir: &Path, suffixes: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.map(|entry| entry.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_under(&path, suffixes, out);
        } else if suffixes
            .iter()
            .any(|suffix| path.to_string_lossy().ends_with(suffix))
        {
            out.push(path);
        }
    }
}

/// Analyses `text` at `path`, checks the invariants, and returns the rule ids reported.
fn analyse(path: &str, text: &str, origin: &str) -> Vec<&'static str> {
    let snapshot = Snapshot {
        commit: None,
        files: vec![SourceFile {
            path: path.to_owned(),
            contents: text.to_owned(),
        }],
    };
    let (output, sources) =
        analyzer::analyze_snapshot(&snapshot, common::builtins(), &AnalysisOptions::default());
    let diagnostics = output
        .diagnostics
        .iter()
        .chain(output.apps.iter().flat_map(|app| &app.diagnostics));
    let mut rules = Vec::new();
    for diagnostic in diagnostics {
        rules.push(diagnostic.rule);
        assert_ne!(
            diagnostic.rule, "internal-error",
            "{origin}: {}\n--- input ---\n{text}",
            diagnostic.message
        );
        let spans = diagnostic
            .span
            .into_iter()
            .chain(diagnostic.labels.iter().map(|label| label.span));
        for span in spans {
            let file_text = sources.text(span.file);
            assert!(
                span.start <= span.end
                    && span.end as usize <= file_text.len()
                    && file_text.is_char_boundary(span.start as usize)
                    && file_text.is_char_boundary(span.end as usize),
                "{origin}: bad span {span:?} in {diagnostic:?}\n--- input ---\n{text}"
            );
            sources.locate(span);
        }
    }
    rules
}

#[test]
fn mutated_repository_files_yield_diagnostics_never_panics() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut seeds = Vec::new();
    files_under(
        &manifest.join("tests/cases"),
        &[".yaml", ".yml"],
        &mut seeds,
    );
    files_under(
        &manifest.join("../../shared/kubevela/docs/examples"),
        &[".yaml"],
        &mut seeds,
    );
    // Keep the run short on a loaded machine: every other seed, up to 120 files.
    let seeds: Vec<PathBuf> = seeds.into_iter().step_by(2).take(120).collect();
    assert!(
        seeds.len() > 40,
        "expected seed files, found {}",
        seeds.len()
    );
    let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
    let mut n_inputs = 0;
    for seed in &seeds {
        let source = std::fs::read(seed).unwrap();
        for _ in 0..4 {
            let mutated = mutate(&source, &mut rng);
            let text = String::from_utf8_lossy(&mutated);
            analyse("apps/mutated.yaml", &text, &seed.display().to_string());
            n_inputs += 1;
        }
    }
    assert_eq!(n_inputs, seeds.len() * 4);
}

#[test]
fn pathological_yaml_yields_diagnostics_never_panics() {
    let deep_flow = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
    let deep_block: String = (0..2_000)
        .map(|depth| format!("{}k:\n", " ".repeat(depth)))
        .collect();
    let billion_laughs = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n";
    let cases: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("only a document marker", "---\n...\n---\n".to_owned()),
        ("tab indentation", "apiVersion: v1\nkind: Application\nspec:\n\tcomponents: []\n".to_owned()),
        ("bom and nul", "\u{feff}kind: Application\u{0}\n".to_owned()),
        ("deep flow nesting", deep_flow),
        ("deep block nesting", deep_block),
        ("alias expansion", billion_laughs.to_owned()),
        ("undefined alias", "kind: Application\nmetadata: *nope\n".to_owned()),
        ("recursive merge key", "a: &a {<<: *a}\n".to_owned()),
        ("duplicate keys", "kind: Application\nkind: Application\nmetadata: {name: a}\n".to_owned()),
        ("non-string keys", "? [1, 2]\n: x\n{a: 1}: y\n".to_owned()),
        ("huge number", format!("kind: Application\nmetadata: {{name: a}}\nspec: {{components: [{{name: w, type: webservice, properties: {{image: x, cpu: {}}}}}]}}\n", "9".repeat(400))),
        ("components as a string", "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: a}\nspec: {components: web}\n".to_owned()),
        ("properties as a list", "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: a}\nspec: {components: [{name: w, type: webservice, properties: [1]}]}\n".to_owned()),
        ("CRD with a broken schema", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec: {group: g, names: {kind: K}, versions: [{name: v1, schema: {openAPIV3Schema: {type: [1], properties: 3, required: {}, items: true, enum: 7}}}]}\n".to_owned()),
        ("k8s-objects with odd objects", "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata: {name: a}\nspec: {components: [{name: w, type: k8s-objects, properties: {objects: [{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: [1]}, {apiVersion: 7, kind: null}]}}]}\n".to_owned()),
        ("invalid UTF-8 replaced", String::from_utf8_lossy(b"kind: Application\nmetadata: {name: \xff\xfe}\n").into_owned()),
    ];
    for (name, text) in &cases {
        let rules = analyse("apps/case.yaml", text, name);
        analyse("definitions/case.yaml", text, name);
        // Nesting past the loader's depth limit is a syntax error, not a crash.
        if name.starts_with("deep") {
            assert_eq!(rules, ["yaml-syntax"], "{name}");
        }
    }
}
