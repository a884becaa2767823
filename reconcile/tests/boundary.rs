//! The no-I/O crates stay free of effect crates: `reconcile`, `analyzer` and `cue` must not
//! reach kube's client, tokio, git2, an HTTP client or server, or tower through their normal
//! dependencies, however indirectly. Checked on the resolved graph of `cargo metadata` (the
//! workspace's, so a feature another member turns on counts too), and a failure prints the
//! path that brings the crate in.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, VecDeque};
use std::process::Command;

use serde_json::Value;

/// Crates that talk to a cluster, a repository or the network, or run an async runtime.
/// `kube-core` is not here: it is data only.
const EFFECT_CRATES: &[&str] = &[
    "kube",
    "kube-client",
    "kube-runtime",
    "tokio",
    "git2",
    "libgit2-sys",
    "reqwest",
    "hyper",
    "hyper-util",
    "axum",
    "tower",
    "tower-http",
];

/// The crates whose boundary is "no I/O".
const PURE_CRATES: &[&str] = &["reconcile", "analyzer", "cue"];

/// The resolved graph: package id to (name, normal dependencies' ids).
struct Graph {
    names: BTreeMap<String, String>,
    normal_deps: BTreeMap<String, Vec<String>>,
}

fn graph() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let id = package["id"].as_str().unwrap().to_owned();
            (id, package["name"].as_str().unwrap().to_owned())
        })
        .collect();
    let normal_deps = metadata["resolve"]["nodes"]
        .as_array()
        .expect("cargo metadata resolves the graph")
        .iter()
        .map(|node| {
            let deps = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|dep| {
                    // A normal dependency has kind null (dev and build ones say so).
                    dep["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|kind| kind["kind"].is_null())
                })
                .map(|dep| dep["pkg"].as_str().unwrap().to_owned())
                .collect();
            (node["id"].as_str().unwrap().to_owned(), deps)
        })
        .collect();
    Graph { names, normal_deps }
}

/// Every effect crate reachable from `root` through normal dependencies, each with the path
/// (crate names) that reaches it first.
fn effect_paths(graph: &Graph, root: &str) -> Vec<Vec<String>> {
    let root_id = graph
        .names
        .iter()
        .find(|(_, name)| name.as_str() == root)
        .map(|(id, _)| id.clone())
        .unwrap_or_else(|| panic!("{root} is a workspace package"));
    // Breadth first, remembering each package's parent, so a path is a shortest one.
    let mut parent: BTreeMap<String, Option<String>> = BTreeMap::from([(root_id.clone(), None)]);
    let mut queue = VecDeque::from([root_id]);
    let mut found = Vec::new();
    while let Some(id) = queue.pop_front() {
        let name = &graph.names[&id];
        if EFFECT_CRATES.contains(&name.as_str()) {
            let mut path = vec![name.clone()];
            let mut at = parent[&id].clone();
            while let Some(up) = at {
                path.push(graph.names[&up].clone());
                at = parent[&up].clone();
            }
            path.reverse();
            found.push(path);
            continue;
        }
        for dep in graph.normal_deps.get(&id).into_iter().flatten() {
            if !parent.contains_key(dep) {
                parent.insert(dep.clone(), Some(id.clone()));
                queue.push_back(dep.clone());
            }
        }
    }
    found
}

#[test]
fn pure_crates_reach_no_effect_crate() {
    let graph = graph();
    let mut problems = Vec::new();
    for root in PURE_CRATES {
        for path in effect_paths(&graph, root) {
            problems.push(path.join(" -> "));
        }
    }
    assert!(
        problems.is_empty(),
        "a crate that must do no I/O depends on an effect crate:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_sees_effect_crates_where_they_are() {
    // The agent is the edge: if the walk did not find tokio there, it could not find it anywhere.
    let graph = graph();
    let paths = effect_paths(&graph, "agent");
    assert!(
        paths
            .iter()
            .any(|path| path.first().map(String::as_str) == Some("agent")
                && path.last().map(String::as_str) == Some("tokio")),
        "{paths:?}"
    );
}
