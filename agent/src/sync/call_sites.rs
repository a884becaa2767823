//! The sync engine has one caller in the CLI and one in the agent: every way of planning and
//! applying against a cluster goes through the same path. Read from the source tree, so a
//! second call anywhere fails here, naming the files.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, depth first, in name order.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| Some(entry.ok()?.path()))
        .collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// The code of a file without its tests (a `#[cfg(test)]` module ends our files) and without
/// comments.
fn code_of(text: &str) -> String {
    text.lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Per file under `dir` (but `skip`), its calls of `sync::run`, and whether it imports `run`
/// unqualified (which would hide calls from the count).
fn calls_under(dir: &Path, skip: &Path) -> Vec<(String, usize)> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    let mut calls = Vec::new();
    for file in files {
        let is_test_file = file.file_name().is_some_and(|name| name == "tests.rs")
            || file.components().any(|part| part.as_os_str() == "tests");
        if file.starts_with(skip) || is_test_file {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let flat: String = code.split_whitespace().collect();
        let imported = flat.contains("sync::run;")
            || flat.split("sync::{").skip(1).any(|rest| {
                rest.split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .any(|name| name == "run")
            });
        assert!(
            !imported,
            "{} imports sync::run: call it as `sync::run(..)` so its call sites can be counted",
            file.display()
        );
        let n = flat.matches("sync::run(").count();
        if n > 0 {
            calls.push((file.display().to_string(), n));
        }
    }
    calls
}

#[test]
fn the_cli_and_the_agent_each_call_the_sync_engine_once() {
    let agent = Path::new(env!("CARGO_MANIFEST_DIR"));
    let agent_src = agent.join("src");
    let sync = agent_src.join("sync");
    let cli = agent.join("../src/cli");
    let count = |calls: &[(String, usize)]| calls.iter().map(|(_, n)| n).sum::<usize>();

    let in_agent = calls_under(&agent_src, &sync);
    assert_eq!(
        count(&in_agent),
        1,
        "calls of sync::run in agent/src: {in_agent:?}"
    );
    assert!(
        in_agent[0].0.ends_with("agent_loop/pass.rs"),
        "{in_agent:?}"
    );

    let in_cli = calls_under(&cli, &sync);
    assert_eq!(
        count(&in_cli),
        1,
        "calls of sync::run in src/cli: {in_cli:?}"
    );
    assert!(in_cli[0].0.ends_with("cli/live.rs"), "{in_cli:?}");
}
