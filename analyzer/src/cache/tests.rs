//! The cache's contract: for every snapshot in a sequence of edits, the incremental analysis
//! gives exactly the uncached analysis's output, and reuses only the apps whose inputs did not
//! change.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{
    AnalysisCache, AnalysisOptions, CacheStats, ClusterVersion, Definitions, FileChange, Snapshot,
    SourceFile, analyze_changes, analyze_snapshot, analyze_snapshot_incremental,
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

    /// The current texts of `changed` as changes (`None` for a path no longer in the repo).
    fn changes(&self, changed: &[&str]) -> Vec<FileChange> {
        changed
            .iter()
            .map(|path| FileChange {
                path: (*path).to_owned(),
                contents: self.files.get(*path).cloned(),
                blob_id: None,
            })
            .collect()
    }

    /// A repository holding only the example repository's `pod-disruption-budget` trait.
    fn with_pdb_definition() -> Repo {
        let mut repo = Repo {
            files: BTreeMap::new(),
        };
        repo.set(
            "definitions/pod-disruption-budget.cue",
            include_str!("../../../examples/repo/definitions/pod-disruption-budget.cue").to_owned(),
        );
        repo
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

fn stats(reused: usize, analyzed: usize, evicted: usize, files_reused: usize) -> CacheStats {
    CacheStats {
        reused,
        analyzed,
        evicted,
        files_reused,
    }
}

#[test]
fn cached_analysis_equals_uncached_across_edits() {
    let definitions = Definitions::builtin();
    let mut options = AnalysisOptions::default();
    let mut repo = Repo::with_pdb_definition();
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
        stats(0, 5, 0, 0)
    );
    assert_eq!(cache.len(), 5);
    // Same snapshot: everything reused.
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(5, 0, 0, 7)
    );

    // One app changes: only it is analyzed again.
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:1.26", ""));
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(4, 1, 0, 6)
    );

    // A definition changes: the apps using it (c and d use the trait) are analyzed again.
    let pdb = repo.files["definitions/pod-disruption-budget.cue"].replace("*1 | int", "*2 | int");
    repo.set("definitions/pod-disruption-budget.cue", pdb);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(3, 2, 0, 6)
    );
    // The YAML component definition changes: its users d and e.
    let api = repo.files["definitions/stateless-api.yaml"].replace("*2 | int", "*3 | int");
    repo.set("definitions/stateless-api.yaml", api);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(3, 2, 0, 6)
    );

    // An option changes (another cluster version): every app.
    options.render.cluster_version = ClusterVersion::release(1, 18);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 5, 0, 7)
    );

    // An app is removed from the front of the path order: every later file id shifts, the
    // others are reused, re-pointed at the new ids.
    repo.files.remove("apps/b.yaml");
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(4, 0, 1, 0)
    );
    // An app is added in front: ids shift back.
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:latest", PDB));
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(4, 1, 0, 0)
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
        stats(5, 1, 0, 5)
    );
    repo.files.remove("apps/z.yaml");
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(5, 0, 1, 5)
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
        stats(0, 5, 0, 5)
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
        stats(0, 1, 0, 0)
    );
    assert!(cache.is_empty());
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 1, 0, 2)
    );
    // Moving the second copy's lines moves the label; the reused output would be stale.
    repo.set(
        "apps/two.yaml",
        format!("# moved\n\n{}", app("web", "webservice", "nginx:1.27", "")),
    );
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 1, 0, 1)
    );
}

#[test]
fn renamed_files_and_apps_moved_between_files() {
    let definitions = Definitions::builtin();
    let mut options = AnalysisOptions::default();
    let mut repo = Repo {
        files: BTreeMap::new(),
    };
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:1.27", ""));
    repo.set("apps/m.yaml", app("m", "webservice", "nginx:1.27", PDB));
    repo.set("apps/z.yaml", app("z", "webservice", "nginx:latest", ""));
    repo.set(
        "definitions/pod-disruption-budget.cue",
        include_str!("../../../examples/repo/definitions/pod-disruption-budget.cue").to_owned(),
    );
    let mut cache = AnalysisCache::new();
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 3, 0, 0)
    );

    // A file renamed to a path of the same rank: same id, another path. The parse is not
    // reused (its path differs) and neither is the app (its manifest path is part of its key).
    let text = repo.files.remove("apps/m.yaml").unwrap();
    repo.set("apps/n.yaml", text);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(2, 1, 0, 3)
    );

    // App z moves into a's file (two documents); z's old file is gone. Both apps are read
    // from a changed file, so both are analyzed; the output still equals the uncached one.
    // Of the files, n keeps its id and is reused; the definition moves up one id and is
    // parsed again.
    let z = repo.files.remove("apps/z.yaml").unwrap();
    let both = format!("{}\n---\n{z}", repo.files["apps/a.yaml"]);
    repo.set("apps/a.yaml", both);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(1, 2, 0, 1)
    );

    // A definition edited in place: only its user n is analyzed; every file but the
    // definition is parsed from the cache.
    let pdb = repo.files["definitions/pod-disruption-budget.cue"].replace("*1 | int", "*2 | int");
    repo.set("definitions/pod-disruption-budget.cue", pdb);
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(2, 1, 0, 2)
    );

    // Other namespace rules decide other namespaces while parsing: nothing is reused.
    options.render.default_namespace = "elsewhere".to_owned();
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 3, 0, 0)
    );
}

/// The top-level diagnostics of `repo`'s analysis with the rule `rule`.
fn top_level(repo: &Repo, definitions: &Definitions, rule: &str) -> usize {
    let (output, _) = analyze_snapshot(&repo.snapshot(), definitions, &AnalysisOptions::default());
    output
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.rule == rule)
        .count()
}

#[test]
fn a_broken_definition_is_reported_while_no_reused_app_uses_it() {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    let pdb = include_str!("../../../examples/repo/definitions/pod-disruption-budget.cue");
    let mut repo = Repo {
        files: BTreeMap::new(),
    };
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:1.27", ""));
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:1.27", PDB));
    // A second trait with a syntax error in its template: reported on its own while unused.
    repo.set(
        "definitions/broken.cue",
        pdb.replace("\"pod-disruption-budget\": {", "\"broken-budget\": {")
            .replace("selector: matchLabels:", "selector: ) matchLabels:"),
    );
    repo.set("definitions/pod-disruption-budget.cue", pdb.to_owned());
    let mut cache = AnalysisCache::new();
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 2, 0, 0)
    );
    assert_eq!(top_level(&repo, &definitions, "cue-syntax"), 1);
    // a changes, b is reused: the broken trait is still unused.
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:1.26", ""));
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(1, 1, 0, 3)
    );
    // b uses the broken trait: the error is b's now, not the repository's.
    repo.set(
        "apps/b.yaml",
        app(
            "b",
            "webservice",
            "nginx:1.27",
            &PDB.replace("pod-disruption", "broken"),
        ),
    );
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(1, 1, 0, 3)
    );
    assert_eq!(top_level(&repo, &definitions, "cue-syntax"), 0);
    // a changes again: b is reused, and its use of the broken trait still counts.
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:1.25", ""));
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(1, 1, 0, 3)
    );
}

#[test]
fn parameter_schemas_follow_definition_edits() {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    let pdb = include_str!("../../../examples/repo/definitions/pod-disruption-budget.cue");
    let mut repo = Repo {
        files: BTreeMap::new(),
    };
    // A property the trait does not declare: `unknown-property` on c.
    repo.set(
        "apps/c.yaml",
        app(
            "c",
            "webservice",
            "nginx:1.27",
            &PDB.replace("minAvailable", "minAvailabel"),
        ),
    );
    repo.set("apps/d.yaml", app("d", "webservice", "nginx:1.27", ""));
    repo.set("definitions/pod-disruption-budget.cue", pdb.to_owned());
    let unknown = |repo: &Repo| {
        let (output, _) =
            analyze_snapshot(&repo.snapshot(), &definitions, &AnalysisOptions::default());
        output
            .apps
            .iter()
            .flat_map(|app| &app.diagnostics)
            .filter(|diagnostic| diagnostic.rule == "unknown-property")
            .count()
    };
    let mut cache = AnalysisCache::new();
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 2, 0, 0)
    );
    assert_eq!(unknown(&repo), 1);
    assert_eq!(top_level(&repo, &definitions, "undocumented-parameter"), 0);
    // The trait declares the property, without a `+usage=` line: the schema kept from the
    // last analysis is stale and must not be used.
    repo.set(
        "definitions/pod-disruption-budget.cue",
        pdb.replace(
            "maxUnavailable?: int | string",
            "maxUnavailable?: int | string\n\t\tminAvailabel?: int",
        ),
    );
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(1, 1, 0, 2)
    );
    assert_eq!(unknown(&repo), 0);
    assert_eq!(top_level(&repo, &definitions, "undocumented-parameter"), 1);
    // Back to the first text: its schema is evaluated again, not taken from an older entry.
    repo.set("definitions/pod-disruption-budget.cue", pdb.to_owned());
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(1, 1, 0, 2)
    );
    assert_eq!(unknown(&repo), 1);
    assert_eq!(top_level(&repo, &definitions, "undocumented-parameter"), 0);
}

/// [`step`] through [`analyze_snapshot_shared_with_ids`], with `ids` as the files' blob ids.
fn step_with_ids(
    repo: &Repo,
    ids: &[crate::BlobId],
    definitions: &Definitions,
    cache: &mut AnalysisCache,
) -> CacheStats {
    let options = AnalysisOptions::default();
    let snapshot = repo.snapshot();
    let (uncached, _) = analyze_snapshot(&snapshot, definitions, &options);
    let (cached, _) =
        crate::analyze_snapshot_shared_with_ids(&snapshot, ids, definitions, &options, cache);
    assert_eq!(
        format!("{:#?}", cached.into_output()),
        format!("{uncached:#?}")
    );
    cache.last_run()
}

/// A 20-byte digest of each file's text, in the snapshot's file order.
fn text_ids(repo: &Repo) -> Vec<crate::BlobId> {
    use sha2::Digest;
    repo.snapshot()
        .files
        .iter()
        .map(|file| {
            let digest: [u8; 32] = sha2::Sha256::digest(file.contents.as_bytes()).into();
            let mut id = [0; 20];
            id.copy_from_slice(&digest[..20]);
            id
        })
        .collect()
}

#[test]
fn blob_ids_stand_for_the_texts() {
    let definitions = Definitions::builtin();
    let mut repo = Repo {
        files: BTreeMap::new(),
    };
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:1.27", ""));
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:latest", ""));
    let mut cache = AnalysisCache::new();
    assert_eq!(
        step_with_ids(&repo, &text_ids(&repo), &definitions, &mut cache),
        stats(0, 2, 0, 0)
    );
    // Same ids: both files and apps reused.
    assert_eq!(
        step_with_ids(&repo, &text_ids(&repo), &definitions, &mut cache),
        stats(2, 0, 0, 2)
    );
    // b's text and id change: only b is parsed and analyzed again.
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:1.26", ""));
    assert_eq!(
        step_with_ids(&repo, &text_ids(&repo), &definitions, &mut cache),
        stats(1, 1, 0, 1)
    );
    // Another id for the same text (ids need only be equal for equal texts): b's file is
    // parsed again, and its app, whose manifest digest is unchanged, still reused.
    let mut ids = text_ids(&repo);
    ids[1][0] ^= 1;
    assert_eq!(
        step_with_ids(&repo, &ids, &definitions, &mut cache),
        stats(2, 0, 0, 1)
    );
    // Not one id per file: ignored, the texts are compared.
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:1.24", ""));
    assert_eq!(
        step_with_ids(&repo, &text_ids(&repo)[..1], &definitions, &mut cache),
        stats(1, 1, 0, 1)
    );
}

/// [`analyze_changes`] with the texts of `changed` in `repo` (`None` for a path no longer in
/// it): when it patches, asserts its output and source map are the uncached analysis's of
/// `repo`, and returns what the cache did.
fn patch_step(
    repo: &Repo,
    changed: &[&str],
    definitions: &Definitions,
    options: &AnalysisOptions,
    cache: &mut AnalysisCache,
) -> Option<CacheStats> {
    let changes = repo.changes(changed);
    let (patched, patched_sources) = analyze_changes(&changes, definitions, options, cache)?;
    let (uncached, uncached_sources) = analyze_snapshot(&repo.snapshot(), definitions, options);
    assert_eq!(
        format!("{:#?}", patched.into_output()),
        format!("{uncached:#?}")
    );
    assert_eq!(patched_sources.len(), uncached_sources.len());
    for index in 0..uncached_sources.len() {
        let file = cue::FileId(index as u32);
        assert_eq!(patched_sources.path(file), uncached_sources.path(file));
        assert_eq!(patched_sources.text(file), uncached_sources.text(file));
    }
    Some(cache.last_run())
}

#[test]
fn patched_analysis_equals_uncached_or_declines() {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    let mut repo = Repo::with_pdb_definition();
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:latest", ""));
    repo.set("apps/c.yaml", app("c", "webservice", "nginx:1.27", PDB));
    repo.set("apps/e.yaml", app("e", "nope", "nginx:1.27", ""));
    // Two apps in one file; `dup` renders b's Deployment (`duplicate-object`, a cross-app
    // rule).
    let y = |component: &str| {
        app("dup", "webservice", "nginx:1.27", "")
            .replace("- name: dup", &format!("- name: {component}"))
    };
    repo.set(
        "apps/two.yaml",
        format!(
            "{}---\n{}",
            app("g", "webservice", "nginx:1.27", ""),
            y("b")
        ),
    );
    repo.set("README.md", "# shop\n".to_owned());
    let mut cache = AnalysisCache::new();
    // Nothing analysed yet: nothing to patch.
    assert_eq!(
        patch_step(&repo, &["apps/b.yaml"], &definitions, &options, &mut cache),
        None
    );
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 5, 0, 0)
    );
    assert!(
        format!(
            "{:?}",
            analyze_snapshot(&repo.snapshot(), &definitions, &options).0
        )
        .contains("duplicate-object")
    );

    // An app edited in place: only it is analysed; b keeps its duplicate-object finding.
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:1.26", ""));
    assert_eq!(
        patch_step(&repo, &["apps/b.yaml"], &definitions, &options, &mut cache),
        Some(stats(4, 1, 0, 4))
    );
    // dup now collides with c instead of b: both findings move (b's copy is dropped).
    repo.set(
        "apps/two.yaml",
        format!(
            "{}---\n{}",
            app("g", "webservice", "nginx:1.26", ""),
            y("c")
        ),
    );
    assert_eq!(
        patch_step(
            &repo,
            &["apps/two.yaml"],
            &definitions,
            &options,
            &mut cache
        ),
        Some(stats(3, 2, 0, 4))
    );
    // No collision left; a path the loader ignores and an unchanged blob id change nothing.
    repo.set(
        "apps/two.yaml",
        format!(
            "{}---\n{}",
            app("g", "webservice", "nginx:1.26", ""),
            y("dup")
        ),
    );
    repo.set("README.md", "# shop, again\n".to_owned());
    assert_eq!(
        patch_step(
            &repo,
            &["README.md", "apps/two.yaml"],
            &definitions,
            &options,
            &mut cache
        ),
        Some(stats(3, 2, 0, 4))
    );
    assert_eq!(
        patch_step(&repo, &[], &definitions, &options, &mut cache),
        Some(stats(5, 0, 0, 5))
    );

    // What it declines, leaving the cache as it was (the full analysis after each still
    // reuses every unchanged app): a file added, ...
    let declined = |repo: &Repo, changed: &[&str], cache: &mut AnalysisCache| {
        assert_eq!(
            patch_step(repo, changed, &definitions, &options, cache),
            None
        );
        step(repo, &definitions, &options, cache)
    };
    // (the files after it in path order, two.yaml and the definition, shift ids: parsed again)
    repo.set("apps/f.yaml", app("f", "webservice", "nginx:1.27", ""));
    assert_eq!(
        declined(&repo, &["apps/f.yaml"], &mut cache),
        stats(5, 1, 0, 3)
    );
    // ... a definition changed (its users c then analysed again), ...
    let pdb = repo.files["definitions/pod-disruption-budget.cue"].replace("*1 | int", "*2 | int");
    repo.set("definitions/pod-disruption-budget.cue", pdb);
    assert_eq!(
        declined(
            &repo,
            &["definitions/pod-disruption-budget.cue"],
            &mut cache
        ),
        stats(5, 1, 0, 5)
    );
    // ... an app renamed, ...
    repo.set("apps/f.yaml", app("f2", "webservice", "nginx:1.27", ""));
    assert_eq!(
        declined(&repo, &["apps/f.yaml"], &mut cache),
        stats(5, 1, 1, 5)
    );
    // ... a file that no longer parses (and while its problem lasts, any change), ...
    repo.set("apps/f.yaml", "kind: [".to_owned());
    assert_eq!(
        declined(&repo, &["apps/f.yaml"], &mut cache),
        stats(5, 0, 1, 5)
    );
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:1.25", ""));
    assert_eq!(
        declined(&repo, &["apps/b.yaml"], &mut cache),
        stats(4, 1, 0, 5)
    );
    // ... a file removed (the files after it shift ids back), and other options.
    repo.files.remove("apps/f.yaml");
    assert_eq!(
        declined(&repo, &["apps/f.yaml"], &mut cache),
        stats(5, 0, 0, 3)
    );
    repo.set("apps/c.yaml", app("c", "webservice", "nginx:1.25", PDB));
    let mut other = options.clone();
    other.render.default_namespace = "elsewhere".to_owned();
    assert_eq!(
        patch_step(&repo, &["apps/c.yaml"], &definitions, &other, &mut cache),
        None
    );
    // And patches again once the last analysis can be patched.
    assert_eq!(
        patch_step(&repo, &["apps/c.yaml"], &definitions, &options, &mut cache),
        Some(stats(4, 1, 0, 4))
    );
}

#[test]
fn cached_apps_are_kept_without_their_yaml_value_in_one_copy() {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    let mut repo = Repo {
        files: BTreeMap::new(),
    };
    repo.set("apps/a.yaml", app("a", "webservice", "nginx:1.27", ""));
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:1.27", PDB));
    let mut cache = AnalysisCache::new();
    // Each step also checks the output equals the uncached analysis's.
    let check = |cache: &AnalysisCache| {
        assert_eq!(cache.entries.len(), 2);
        for entry in &cache.entries {
            assert!(
                super::slim::is_slim(&entry.app),
                "{} keeps its YAML value",
                entry.app.app_ref
            );
            // The positions and the model's names and types stay (cross-app rules and settings
            // read them); its properties go with the YAML value.
            assert_ne!(entry.app.document.positions, Default::default());
            let component = &entry.app.app.spec.components[0];
            assert_eq!(
                (component.name.as_str(), component.component_type.as_str()),
                (entry.app.app_ref.name.as_str(), "webservice")
            );
            assert!(component.properties.is_none());
            assert!(component.traits.iter().all(|t| t.properties.is_none()));
            // The same slim copy in the per-file parse and the loaded state the cache keeps.
            let path = format!("apps/{}.yaml", entry.app.app_ref.name);
            let Some((_, _, parsed)) = cache.files.get(&path) else {
                panic!("{path} not cached");
            };
            let super::ParsedFile::Yaml(documents) = parsed.as_ref() else {
                panic!("{path} is not YAML");
            };
            assert!(matches!(&documents[..],
                [super::ParsedDocument::App(Ok(app))] if Arc::ptr_eq(app, &entry.app)));
            let last = cache.last.as_ref().map(|last| &last.loaded.apps);
            assert!(last.is_some_and(|apps| apps.iter().any(|app| Arc::ptr_eq(app, &entry.app))));
        }
    };
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(0, 2, 0, 0)
    );
    check(&cache);
    // Reused from the slim parse.
    assert_eq!(
        step(&repo, &definitions, &options, &mut cache),
        stats(2, 0, 0, 2)
    );
    check(&cache);
    // Rendered again from the slim parse (another option): parsed again for the render, the
    // output still the uncached one's.
    let mut other = options.clone();
    other.render.cluster_version = ClusterVersion::release(1, 18);
    assert_eq!(
        step(&repo, &definitions, &other, &mut cache),
        stats(0, 2, 0, 2)
    );
    check(&cache);
    // A patched analysis slims the app it parsed anew.
    let changed = app("b", "webservice", "nginx:1.28", PDB);
    let changes = [FileChange {
        path: "apps/b.yaml".to_owned(),
        contents: Some(changed.clone()),
        blob_id: None,
    }];
    assert!(analyze_changes(&changes, &definitions, &other, &mut cache).is_some());
    repo.set("apps/b.yaml", changed);
    check(&cache);
    assert_eq!(
        step(&repo, &definitions, &other, &mut cache),
        stats(2, 0, 0, 2)
    );
}

/// The address of each packed object's text, per app: equal addresses across two analyses mean
/// the objects were not serialised again.
fn packed_texts(output: &crate::SharedOutput) -> Vec<(String, Vec<usize>)> {
    output
        .apps
        .iter()
        .map(|app| {
            let texts = app
                .objects
                .iter()
                .map(|object| object.text().map_or(0, |text| text.as_ptr() as usize))
                .collect();
            (app.app.name.clone(), texts)
        })
        .collect()
}

#[test]
fn cached_objects_are_packed_once_and_give_back_the_rendered_objects() {
    let definitions = Definitions::builtin();
    let options = AnalysisOptions::default();
    let mut repo = Repo::with_pdb_definition();
    repo.set("apps/b.yaml", app("b", "webservice", "nginx:1.26", ""));
    repo.set("apps/c.yaml", app("c", "webservice", "nginx:1.27", PDB));
    let mut cache = AnalysisCache::new();
    let (first, _) =
        crate::analyze_snapshot_shared(&repo.snapshot(), &definitions, &options, &mut cache);
    // The packed objects are the rendered ones, in order (the uncached analysis keeps values).
    let (uncached, _) = analyze_snapshot(&repo.snapshot(), &definitions, &options);
    for (packed, values) in first.apps.iter().zip(&uncached.apps) {
        use crate::ObjectsForm;
        assert!(!values.objects.is_empty());
        assert_eq!(packed.objects.len(), values.objects.len());
        assert_eq!(*packed.objects.values(), *values.objects);
        assert!(packed.objects.iter().all(|object| object.text().is_some()));
    }
    let before = packed_texts(&first);

    // c changes: b keeps its packed objects (the same texts, not serialised again), c's are new.
    repo.set("apps/c.yaml", app("c", "webservice", "nginx:1.28", PDB));
    let (second, _) =
        crate::analyze_snapshot_shared(&repo.snapshot(), &definitions, &options, &mut cache);
    assert_eq!(cache.last_run().reused, 1);
    let after = packed_texts(&second);
    assert_eq!(after[0], before[0]);
    assert_eq!(after[1].1.len(), before[1].1.len());
    assert!(after[1].1.iter().zip(&before[1].1).all(|(a, b)| a != b));
    // Through the patch path too (`analyze_changes`).
    repo.set("apps/c.yaml", app("c", "webservice", "nginx:1.29", PDB));
    let (third, _) = patch_step_output(&repo, &["apps/c.yaml"], &definitions, &mut cache);
    let patched = packed_texts(&third);
    assert_eq!(patched[0], before[0]);
    assert!(patched[1].1.iter().zip(&after[1].1).all(|(a, b)| a != b));
}

fn patch_step_output(
    repo: &Repo,
    changed: &[&str],
    definitions: &Definitions,
    cache: &mut AnalysisCache,
) -> (crate::SharedOutput, crate::SourceMap) {
    let changes = repo.changes(changed);
    analyze_changes(&changes, definitions, &AnalysisOptions::default(), cache)
        .expect("an in-place edit of an Application file is patched")
}
