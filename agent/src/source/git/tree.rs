//! Reading a commit's tree: snapshots of the files a source deploys (with their blob ids), the
//! paths two commits differ in, and the size cap.

use std::collections::BTreeSet;
use std::path::Path;

use analyzer::{Snapshot, SourceFile};

use super::{CommitId, GitRepo, SourceError, read_oid};
use crate::config::PathMatch;

impl GitRepo {
    /// The files of `commit` that pass the source's path filter, as an analyzer snapshot.
    /// Files that are not UTF-8 are skipped (the analyzer reads YAML and CUE only).
    ///
    /// # Errors
    ///
    /// [`SourceError::ReadFailed`] when the commit or one of its objects cannot be read.
    pub fn snapshot(&self, commit: &CommitId) -> Result<Snapshot, SourceError> {
        self.snapshot_with_ids(commit).map(|(snapshot, _)| snapshot)
    }

    /// [`GitRepo::snapshot`] with each file's blob id (`ids[i]` for `files[i]`), so the
    /// analysis recognises unchanged files by id instead of comparing their texts
    /// ([`analyzer::analyze_snapshot_shared_with_ids`]). No ids (an empty list) in a
    /// repository whose object ids are not 20 bytes.
    ///
    /// # Errors
    ///
    /// As [`GitRepo::snapshot`].
    pub fn snapshot_with_ids(
        &self,
        commit: &CommitId,
    ) -> Result<(Snapshot, Vec<analyzer::BlobId>), SourceError> {
        let repo = self.repository()?;
        let read_failed = |message: String| SourceError::ReadFailed {
            commit: commit.to_string(),
            message,
        };
        let tree = repo
            .find_commit(read_oid(commit)?)
            .and_then(|commit| commit.tree())
            .map_err(|error| read_failed(error.message().to_owned()))?;
        let mut blobs = Vec::new();
        let mut submodules = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            if let Ok(name) = entry.name() {
                let path = format!("{root}{name}");
                let included = self.config.paths.check(&path) == PathMatch::Included;
                match entry.kind() {
                    Some(git2::ObjectType::Blob) if included => blobs.push((path, entry.id())),
                    Some(git2::ObjectType::Commit) if included => submodules.push(path),
                    _ => {}
                }
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(|error| read_failed(error.message().to_owned()))?;
        report_submodules(&self.config.name, commit, &submodules);
        let odb = repo
            .odb()
            .map_err(|error| read_failed(error.message().to_owned()))?;
        let mut files: Vec<(SourceFile, Option<analyzer::BlobId>)> =
            Vec::with_capacity(blobs.len());
        // A poisoned lock only means a snapshot panicked half-way: its texts are still right.
        let mut texts = self
            .texts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut previous = std::mem::take(&mut *texts);
        for (path, oid) in blobs {
            // Moved out of the last snapshot's map, not copied: one copy per file (the
            // snapshot's) instead of two.
            let known = previous.remove(&oid).or_else(|| texts.get(&oid).cloned());
            let text = match known {
                Some(text) => text,
                None => {
                    self.check_size(&odb, commit, &path, oid)?;
                    let blob = repo
                        .find_blob(oid)
                        .map_err(|error| read_failed(format!("{path}: {}", error.message())))?;
                    match std::str::from_utf8(blob.content()) {
                        Ok(text) => text.to_owned(),
                        Err(_) => {
                            tracing::trace!(path, "skipping a file that is not UTF-8");
                            continue;
                        }
                    }
                }
            };
            files.push((
                SourceFile {
                    path,
                    contents: text.clone(),
                },
                analyzer::BlobId::try_from(oid.as_bytes()).ok(),
            ));
            texts.insert(oid, text);
        }
        drop(texts);
        files.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        let complete = files.iter().all(|(_, id)| id.is_some());
        let (files, ids): (Vec<SourceFile>, Vec<Option<analyzer::BlobId>>) =
            files.into_iter().unzip();
        let ids = if complete {
            ids.into_iter().flatten().collect()
        } else {
            Vec::new()
        };
        Ok((
            Snapshot {
                commit: Some(commit.to_string()),
                files,
            },
            ids,
        ))
    }

    /// The files of the source (those passing its path filter) that differ between two
    /// commits, with their new text and blob id (`None` text: removed, or no longer UTF-8 and so
    /// out of the snapshot), from a tree-to-tree diff: unchanged subtrees are skipped by id
    /// and only the changed blobs are read, so a commit that changes one file of 10,000 costs
    /// one file. For [`analyzer::analyze_changes`].
    ///
    /// # Errors
    ///
    /// [`SourceError::ReadFailed`] when a commit or a changed blob cannot be read.
    pub fn changes(
        &self,
        previous: &CommitId,
        new: &CommitId,
    ) -> Result<Vec<analyzer::FileChange>, SourceError> {
        let repo = self.repository()?;
        let read_failed = |commit: &CommitId, message: String| SourceError::ReadFailed {
            commit: commit.to_string(),
            message,
        };
        let tree_of = |commit: &CommitId| {
            repo.find_commit(read_oid(commit)?)
                .and_then(|c| c.tree())
                .map_err(|error| read_failed(commit, error.message().to_owned()))
        };
        let (old_tree, new_tree) = (tree_of(previous)?, tree_of(new)?);
        let diff = repo
            .diff_tree_to_tree(Some(&old_tree), Some(&new_tree), None)
            .map_err(|error| read_failed(new, error.message().to_owned()))?;
        let included = |path: &str| self.config.paths.check(path) == PathMatch::Included;
        let odb = repo
            .odb()
            .map_err(|error| read_failed(new, error.message().to_owned()))?;
        let mut changes: Vec<analyzer::FileChange> = Vec::new();
        for delta in diff.deltas() {
            let (old_file, new_file) = (delta.old_file(), delta.new_file());
            let old_path = old_file.path().and_then(Path::to_str);
            let new_path = new_file.path().and_then(Path::to_str);
            let removed = delta.status() == git2::Delta::Deleted;
            if let Some(path) = old_path
                && (removed || new_path != Some(path))
                && included(path)
            {
                changes.push(analyzer::FileChange {
                    path: path.to_owned(),
                    contents: None,
                    blob_id: None,
                });
            }
            let Some(path) = new_path.filter(|path| !removed && included(path)) else {
                continue;
            };
            if new_file.mode() == git2::FileMode::Commit {
                report_submodules(&self.config.name, new, &[path.to_owned()]);
                continue;
            }
            self.check_size(&odb, new, path, new_file.id())?;
            let blob = repo
                .find_blob(new_file.id())
                .map_err(|error| read_failed(new, format!("{path}: {}", error.message())))?;
            let contents = std::str::from_utf8(blob.content()).ok().map(str::to_owned);
            changes.push(analyzer::FileChange {
                path: path.to_owned(),
                blob_id: contents
                    .as_ref()
                    .and_then(|_| analyzer::BlobId::try_from(new_file.id().as_bytes()).ok()),
                contents,
            });
        }
        Ok(changes)
    }

    /// The paths that differ between two commits (both sides of renames), sorted, whether or not
    /// they pass the path filter. With no previous commit, every path of `new`.
    ///
    /// # Errors
    ///
    /// [`SourceError::ReadFailed`] when a commit cannot be read.
    pub fn changed_paths(
        &self,
        previous: Option<&CommitId>,
        new: &CommitId,
    ) -> Result<Vec<String>, SourceError> {
        let repo = self.repository()?;
        let read_failed = |commit: &CommitId, error: git2::Error| SourceError::ReadFailed {
            commit: commit.to_string(),
            message: error.message().to_owned(),
        };
        let tree_of = |commit: &CommitId| {
            repo.find_commit(read_oid(commit)?)
                .and_then(|c| c.tree())
                .map_err(|error| read_failed(commit, error))
        };
        let new_tree = tree_of(new)?;
        let old_tree = match previous {
            Some(previous) => Some(tree_of(previous)?),
            None => None,
        };
        let diff = repo
            .diff_tree_to_tree(old_tree.as_ref(), Some(&new_tree), None)
            .map_err(|error| read_failed(new, error))?;
        let mut paths = BTreeSet::new();
        for delta in diff.deltas() {
            for file in [delta.old_file(), delta.new_file()] {
                if let Some(path) = file.path().and_then(Path::to_str) {
                    paths.insert(path.to_owned());
                }
            }
        }
        Ok(paths.into_iter().collect())
    }

    /// Refuses a blob over the source's per-file cap, from its header (the blob is not read).
    fn check_size(
        &self,
        odb: &git2::Odb<'_>,
        commit: &CommitId,
        path: &str,
        oid: git2::Oid,
    ) -> Result<(), SourceError> {
        let cap = self.config.fetch.max_file_bytes;
        let (size, _) = odb
            .read_header(oid)
            .map_err(|error| SourceError::ReadFailed {
                commit: commit.to_string(),
                message: format!("{path}: {}", error.message()),
            })?;
        if size as u64 > cap {
            return Err(SourceError::FileTooLarge {
                commit: commit.to_string(),
                path: path.to_owned(),
                size: size as u64,
                cap,
            });
        }
        Ok(())
    }

    /// Whether any of `paths` passes the source's filter.
    pub fn touches_source(&self, paths: &[String]) -> bool {
        paths
            .iter()
            .any(|path| self.config.paths.check(path) == PathMatch::Included)
    }
}

/// Submodules are not followed: their files are not part of the snapshot. Said once per
/// snapshot, with the paths, so a missing file is easy to trace.
fn report_submodules(source: &str, commit: &CommitId, paths: &[String]) {
    if !paths.is_empty() {
        tracing::warn!(
            source,
            commit = commit.short(),
            submodules = ?paths,
            "the commit has git submodules under the source's paths; submodules are not \
             followed, so their files are not deployed (vendor them, or add the submodule's \
             repository as a source of its own)"
        );
    }
}
