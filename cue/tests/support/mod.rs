//! Helpers shared by the corpus tests: locating the read-only reference material in `shared/`
//! and reading txtar archives (CUE's test format: `-- name --` headers, each followed by the
//! file's content).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The shared reference folder beside the repository (`/work/shared` for `/work/main`).
///
/// # Panics
/// When the folder is missing: corpus tests must fail loudly, never pass by skipping.
pub fn shared_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    assert!(
        dir.join("cue").is_dir() && dir.join("kubevela").is_dir(),
        "the shared reference folder is missing: expected {} to hold cue/ and kubevela/ \
         (the corpus tests read CUE's test suite and KubeVela's definitions from there)",
        dir.display()
    );
    dir
}

/// Every file under `dir` whose name ends with `suffix`, sorted.
pub fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", current.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// One file of a txtar archive.
pub struct TxtarFile {
    pub name: String,
    pub content: String,
}

/// Splits a txtar archive into its files (the leading comment is dropped).
pub fn parse_txtar(text: &str) -> Vec<TxtarFile> {
    let mut files: Vec<TxtarFile> = Vec::new();
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_end_matches(['\n', '\r']);
        if let Some(name) = trimmed
            .strip_prefix("-- ")
            .and_then(|rest| rest.strip_suffix(" --"))
        {
            files.push(TxtarFile {
                name: name.trim().to_owned(),
                content: String::new(),
            });
        } else if let Some(file) = files.last_mut() {
            file.content.push_str(line);
        }
    }
    files
}
