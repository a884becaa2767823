//! Builds an [`analyzer::Snapshot`] from a directory or a single file on disk (a work tree, as
//! opposed to a git tree at a commit).
//!
//! Which files go in: every `.yaml`, `.yml` and `.cue` file under the root, with paths relative
//! to the root and `/`-separated, sorted, so the snapshot is the same on every machine. Hidden
//! directories (`.git`, `.github`) and build output (`target`, `node_modules`) are skipped, and
//! symlinked directories are not followed.
//! Deliberately absent: `.gitignore` handling. A checkout's ignored files are rarely manifests,
//! and reading them is harmless because the analyzer decides what a file means.
//!
//! For a single file, the snapshot is that file plus the `definitions/` of its enclosing
//! repository, so a repo-local definition still overrides a built-in when one app is rendered.

use std::path::{Path, PathBuf};

use analyzer::{Snapshot, SourceFile};

/// A snapshot read from disk and where it was read from.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// The repository root: the directory given, or for a single file the nearest ancestor
    /// that looks like a repository (see [`find_repo_root`]).
    pub root: PathBuf,
    pub snapshot: Snapshot,
}

/// The error returned by [`read_worktree`].
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("cannot read {path}")]
    ReadFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is neither a directory nor a .yaml, .yml or .cue file")]
    NotAManifest { path: PathBuf },
}

/// Directory names never descended into.
const SKIPPED_DIRECTORIES: &[&str] = &["target", "node_modules"];

/// Files that mark a repository root when a single file is given.
const ROOT_MARKERS: &[&str] = &[".git", "driftless.yaml", "driftless.yml"];

/// Reads the snapshot for `path`, a repository checkout or a single manifest file.
///
/// # Errors
///
/// [`WorktreeError::ReadFailed`] when a directory or file cannot be read, and
/// [`WorktreeError::NotAManifest`] when `path` is a file of another type.
pub fn read_worktree(path: &Path) -> Result<Worktree, WorktreeError> {
    let metadata = std::fs::metadata(path).map_err(|source| WorktreeError::ReadFailed {
        path: path.to_owned(),
        source,
    })?;
    if metadata.is_dir() {
        let mut files = Vec::new();
        collect_manifests(path, path, &mut files)?;
        files.sort_by(|a, b| a.path.cmp(&b.path));
        return Ok(Worktree {
            root: path.to_owned(),
            snapshot: Snapshot {
                commit: None,
                files,
            },
        });
    }
    if !is_manifest(path) {
        return Err(WorktreeError::NotAManifest {
            path: path.to_owned(),
        });
    }
    let absolute = std::fs::canonicalize(path).map_err(|source| WorktreeError::ReadFailed {
        path: path.to_owned(),
        source,
    })?;
    let parent = absolute.parent().unwrap_or(Path::new("/")).to_owned();
    let root = find_repo_root(&parent).unwrap_or(parent);
    let mut files = vec![read_source_file(&root, &absolute)?];
    let definitions = root.join("definitions");
    if definitions.is_dir() {
        collect_manifests(&root, &definitions, &mut files)?;
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.dedup_by(|a, b| a.path == b.path);
    Ok(Worktree {
        root,
        snapshot: Snapshot {
            commit: None,
            files,
        },
    })
}

/// The nearest directory at or above `start` that holds `.git`, `driftless.yaml` or a
/// `definitions/` directory, if any.
pub fn find_repo_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| {
            ROOT_MARKERS.iter().any(|marker| dir.join(marker).exists())
                || dir.join("definitions").is_dir()
        })
        .map(Path::to_owned)
}

fn collect_manifests(
    root: &Path,
    dir: &Path,
    files: &mut Vec<SourceFile>,
) -> Result<(), WorktreeError> {
    let entries = std::fs::read_dir(dir).map_err(|source| WorktreeError::ReadFailed {
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| WorktreeError::ReadFailed {
            path: dir.to_owned(),
            source,
        })?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let file_type = entry
            .file_type()
            .map_err(|source| WorktreeError::ReadFailed {
                path: path.clone(),
                source,
            })?;
        if file_type.is_dir() {
            if !SKIPPED_DIRECTORIES.contains(&name.as_ref()) {
                collect_manifests(root, &path, files)?;
            }
        } else if is_manifest(&path) && (file_type.is_file() || points_to_file(&path)) {
            // Symlinked files are read; symlinked directories are not followed (like git and
            // ripgrep), so a link to an ancestor cannot make the walk endless.
            files.push(read_source_file(root, &path)?);
        }
    }
    Ok(())
}

fn points_to_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|metadata| metadata.is_file())
}

fn is_manifest(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|extension| extension.to_str()),
        Some("yaml" | "yml" | "cue")
    )
}

fn read_source_file(root: &Path, path: &Path) -> Result<SourceFile, WorktreeError> {
    let bytes = std::fs::read(path).map_err(|source| WorktreeError::ReadFailed {
        path: path.to_owned(),
        source,
    })?;
    let contents = match String::from_utf8(bytes) {
        Ok(contents) => contents,
        Err(error) => {
            // A manifest that is not UTF-8 is the user's problem, not an environment failure:
            // it goes in lossily and the analyzer reports what it makes of it.
            tracing::warn!(path = %path.display(), "file is not valid UTF-8; invalid bytes replaced");
            String::from_utf8_lossy(error.as_bytes()).into_owned()
        }
    };
    Ok(SourceFile {
        path: relative_path(root, path),
        contents,
    })
}

/// `path` relative to `root`, `/`-separated (the snapshot's path convention).
fn relative_path(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    relative
        .components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, contents: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    fn paths(worktree: &Worktree) -> Vec<&str> {
        worktree
            .snapshot
            .files
            .iter()
            .map(|file| file.path.as_str())
            .collect()
    }

    #[test]
    fn a_directory_gives_sorted_relative_manifest_paths() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "apps/team-b/web.yaml", "b");
        write(dir.path(), "apps/team-a/web.yml", "a");
        write(dir.path(), "definitions/my-trait.cue", "c");
        write(dir.path(), "README.md", "not a manifest");
        write(dir.path(), ".git/config.yaml", "hidden");
        write(dir.path(), ".github/workflows/ci.yaml", "hidden");
        write(dir.path(), "target/out.yaml", "build output");
        let worktree = read_worktree(dir.path()).unwrap();
        assert_eq!(
            paths(&worktree),
            [
                "apps/team-a/web.yml",
                "apps/team-b/web.yaml",
                "definitions/my-trait.cue"
            ]
        );
        assert_eq!(worktree.snapshot.files[0].contents, "a");
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_files_are_read_and_symlinked_directories_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "shared/base.yaml", "base");
        write(dir.path(), "apps/web.yaml", "web");
        std::os::unix::fs::symlink(
            dir.path().join("shared/base.yaml"),
            dir.path().join("apps/base.yaml"),
        )
        .unwrap();
        std::os::unix::fs::symlink(dir.path(), dir.path().join("apps/loop")).unwrap();
        let worktree = read_worktree(dir.path()).unwrap();
        assert_eq!(
            paths(&worktree),
            ["apps/base.yaml", "apps/web.yaml", "shared/base.yaml"]
        );
    }

    #[test]
    fn a_single_file_brings_its_repos_definitions() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "driftless.yaml", "sources: []");
        write(dir.path(), "apps/team-a/web.yaml", "web");
        write(dir.path(), "apps/team-a/other.yaml", "other");
        write(dir.path(), "definitions/traits/my-trait.cue", "trait");
        let worktree = read_worktree(&dir.path().join("apps/team-a/web.yaml")).unwrap();
        assert_eq!(
            paths(&worktree),
            ["apps/team-a/web.yaml", "definitions/traits/my-trait.cue"]
        );
        assert_eq!(worktree.root, std::fs::canonicalize(dir.path()).unwrap());
    }

    #[test]
    fn a_lone_file_is_its_own_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "app.yaml", "app");
        let worktree = read_worktree(&dir.path().join("app.yaml")).unwrap();
        assert_eq!(paths(&worktree), ["app.yaml"]);
    }

    #[test]
    fn other_files_and_missing_paths_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "notes.txt", "text");
        let error = read_worktree(&dir.path().join("notes.txt")).unwrap_err();
        assert!(
            matches!(error, WorktreeError::NotAManifest { .. }),
            "{error}"
        );
        let error = read_worktree(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(error, WorktreeError::ReadFailed { .. }), "{error}");
    }
}
