//! The cache's contract: for every snapshot in a sequence of edits, the incremental analysis
//! gives exactly the uncached analysis's output, and reuses only the apps whose inputs did not
//! change.

use std::collections::BTreeMap;

use crate::{
    AnalysisCache, AnalysisOptions, CacheStats, ClusterVersion, Definitions, Snapshot, SourceFile,
    analyze_snapshot, analyze_snapshot_incremental,
};

/// The repository under edit: path → text.
struct Repo {
    files: BTreeMap<String, String>,
}

impl Repo {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            commit: None,
            files: self
                .files
                .iter()
                .map(|(path, contents)| SourceFile {
                    path: path.clone(),
                    contents: contents.clone(),
                })
                .collect(),
        }
    }

    fn set(&mut self, path: &str, text: String) {
        self.files.insert(path.to_owned(), text);
    }
}

fn app(name: &str, component_type: &str, image: &str, traits: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  components:\n    - name: {name}\n      type: {component_type}\n      properties:\n        image: {image}\n{traits}"
    )
}

const PDB: &str = "      traits:\n        - type: pod-disruption-budget\n          properties:\n            minAvailable: 1\n";

/// Analyzes `repo` with and without the cache, asserts both outputs are identical (every app,
/// object, diagnostic and file id), and returns what the cache did.
fn step(
    repo: &Repo,
    definitions: &Definitions,
    options: &AnalysisOptions,
    cache: &mut AnalysisCache,
) -> CacheStats {
    let snapshot = repo.snapshot();
    let (uncached, uncached_sources) = analyze_snapshot(&snapshot, definitions, options);
    let (cached, cached_sources) =
        analyze_snapshot_incremental(&snapshot, definitions, options, cache);
    assert_eq!(format!("{cached:#?}"), format!("{uncached:#?}"));
    // Same spans resolve to the same places (the maps are built from the same snapshot).
    for app in &cached.apps {
        for diagnostic in &app.diagnostics {
            if let Some(span) = diagnostic.span {
                assert_eq!(cached_sources.locate(span), uncached_sources.locate(span));
            }
        }
    }
    cache.last_run()
}

fn stats(reused: usize, analyzed: usize, evicted: usize) -> CacheStats {
    CacheStats {
        reused,
        analyzed,
        evicted,
    }
}

#[test]
fn cached_analysis_equals_uncached_across_edits() {
    let definitions = Definitions::builtin();
    let mut options = AnalysisOptions::default();
    let mut repo = Repo {
        files: BTreeMap::new(),
    };
    repo.set(
        "definitions/pod-disruption-budget.cue",
        include_str!("../../../examples/repo/definitions/pod-disruption-budget.cue").to_owned(),
    );
    repo.set(
        "definitions/stateless-api.yaml",
        include_str!("../../../examples/repo/definitions/stateless-api.yaml").to_owned(),
    );
    // b: the `latest` tag is a warning with a span; c: a repo trait; d: a repo component type
    // defined in YAML (its template's spans are embedded in the YAML file); e: an error.
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:latest", ""));
    repo.set("apps/c.yaml", app("c", "webservice", "nginx:1.27", PDB));
    repo.set("apps/d.yaml", app("d", "stateless-api", "api:1.0", PDB));
    repo.set(
        "apps/e.yaml",
        app("e", "stateless-api", "", "        port: 0\n"),
    );
    repo.set("apps/f.yaml", app("f", "nope", "nginx:1.27", ""));
    let mut cache = AnalysisCache::new();

    // First analysis: nothing to reuse.
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 5, 0)
    );
    assert_eq!(cache.len(), 5);
    // Same snapshot: everything reused.
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(5, 0, 0)
    );

    // One app changes: only it is analyzed again.
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:1.26", ""));
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(4, 1, 0)
    );

    // A definition changes: the apps using it (c and d use the trait) are analyzed again.
    let pdb = repo.files["definitions/pod-disruption-budget.cue"].replace("*1 | int", "*2 | int");
    repo.set("definitions/pod-disruption-budget.cue", pdb);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(3, 2, 0)
    );
    // The YAML component definition changes: its users d and e.
    let api = repo.files["definitions/stateless-api.yaml"].replace("*2 | int", "*3 | int");
    repo.set("definitions/stateless-api.yaml", api);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(3, 2, 0)
    );

    // An option changes (another cluster version): every app.
    options.render.cluster_version = ClusterVersion::release(1, 18);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 5, 0)
    );

    // An app is removed from the front of the path order: every later file id shifts, the
    // others are reused, re-pointed at the new ids.
    repo.files.remove("apps/b.yaml");
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(4, 0, 1)
    );
    // An app is added in front: ids shift back.
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:latest", PDB));
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(4, 1, 0)
    );

    // A cross-app rule: a second app renders c's objects (same name, same namespace). It
    // reports on the reused app c too; removing it again leaves c without that diagnostic.
    repo.set(
        "apps/z.yaml",
        app("c", "webservice", "nginx:1.27", "")
            .replace("name: c\n  namespace", "name: z\n  namespace"),
    );
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(5, 1, 0)
    );
    repo.files.remove("apps/z.yaml");
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(5, 0, 1)
    );

    // A new repository definition with a name no app uses still drops everything (the set of
    // names is read by every app's rules).
    repo.set(
        "definitions/other.cue",
        include_str!("../../../examples/repo/definitions/pod-disruption-budget.cue")
            .replace("\"pod-disruption-budget\": {", "\"other-budget\": {"),
    );
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 5, 0)
    );
}

#[test]
fn apps_with_loading_problems_are_not_cached() {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    let mut repo = Repo {
        files: BTreeMap::new(),
    };
    // The same Application twice: duplicate-app, with a label in the other file.
    repo.set("apps/one.yaml", app("web", "webservice", "nginx:1.27", ""));
    repo.set("apps/two.yaml", app("web", "webservice", "nginx:1.27", ""));
    let mut cache = AnalysisCache::new();
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 1, 0)
    );
    assert!(cache.is_empty());
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 1, 0)
    );
    // Moving the second copy's lines moves the label; the reused output would be stale.
    repo.set(
        "apps/two.yaml",
        format!("# moved\n\n{}", app("web", "webservice", "nginx:1.27", "")),
    );
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 1, 0)
    );
}
