//! Git sources: a bare clone per source in the cache directory, fetched with git2, and
//! snapshots built straight from a commit's tree (no checkout).
//!
//! [`GitRepo`] is the blocking layer (every method does git I/O; call it from `spawn_blocking`).
//! [`GitSource`] is the async poller the agent loop drives: one fetch per call, exponential
//! backoff with a cap after failures, and the last good revision kept through any failure, so a
//! broken remote never crashes the loop or blocks other sources.
//!
//! What counts as "changed": the paths that differ between the last seen commit and the new one
//! (renames count on both sides). If none of them passes the source's include/exclude filter,
//! nothing needs rendering. Otherwise the snapshot is rendered and each app's `input_hash` (which
//! covers its manifest and the definitions it uses) decides which apps go on to plan and apply,
//! so a change under `definitions/` reaches exactly the apps using the changed definitions.
//!
//! Only what is deployed or previewed is fetched, shallow (`fetch.depth`, 1 by default): the
//! tracked branch into `refs/driftless/heads/<branch>`, and the head of each open pull request
//! the agent previews into `refs/driftless/pull/<n>` (GitHub's and Gitea's `refs/pull/<n>/head`,
//! GitLab's `refs/merge-requests/<n>/head`). A deleted branch is pruned and a force-push simply
//! moves the ref. Transports, trust, credentials and the network budget are in
//! [`super::fetch`]; reading a commit's tree is in `git/tree.rs`. Files over the size cap fail
//! the snapshot with a clear error, and git submodules (which are not followed) are reported as
//! warnings naming their path.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use analyzer::Snapshot;
use sha2::{Digest, Sha256};

use super::fetch::{self, FetchTarget};
use crate::backoff::Backoff;
use crate::config::SourceConfig;

/// A full commit id (40 hex digits).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitId(String);

impl CommitId {
    /// Parses a full hex commit id.
    pub fn parse(text: &str) -> Option<CommitId> {
        (text.len() == 40 && text.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| CommitId(text.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 digits, for messages.
    pub fn short(&self) -> &str {
        &self.0[..12]
    }

    fn from_oid(oid: git2::Oid) -> CommitId {
        CommitId(oid.to_string())
    }

    fn oid(&self) -> Result<git2::Oid, git2::Error> {
        git2::Oid::from_str(&self.0)
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A git source failed. Messages never contain credentials: URLs with passwords are refused by
/// the config, and tokens only travel through the credential callback.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SourceError {
    #[error("opening the cache repository {}: {message}", path.display())]
    OpenFailed { path: PathBuf, message: String },
    #[error("authenticating to {url}: {message}")]
    AuthFailed { url: String, message: String },
    #[error("reaching {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("fetching {url}: {message}")]
    FetchFailed { url: String, message: String },
    #[error("connecting to {url}: {message}")]
    HostKeyRejected { url: String, message: String },
    #[error("fetching {url}: {message}")]
    OverBudget { url: String, message: String },
    #[error(
        "reading commit {commit}: {path} is {size} bytes, over the {cap}-byte cap per file \
         (fetch.maxFileSize); exclude it with `paths.exclude` or raise the cap"
    )]
    FileTooLarge {
        commit: String,
        path: String,
        size: u64,
        cap: u64,
    },
    #[error("branch {branch} does not exist on {url} (deleted?)")]
    BranchMissing { url: String, branch: String },
    #[error("reading commit {commit}: {message}")]
    ReadFailed { commit: String, message: String },
    #[error("git work panicked or was cancelled: {message}")]
    TaskFailed { message: String },
}

/// What a fetch found on the tracked branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchUpdate {
    /// The first commit seen.
    Initial,
    /// The new commit descends from the previous one.
    FastForward,
    /// History was rewritten: the previous commit is not an ancestor of the new one.
    ForcePush,
}

/// The blocking git layer over one bare cache repository.
#[derive(Debug, Clone)]
pub struct GitRepo {
    config: Arc<SourceConfig>,
    dir: PathBuf,
    /// The texts of the last snapshot's files by blob id: a commit that changes one file of
    /// 10,000 reads one blob, not 10,000. Replaced by each snapshot, so it holds one
    /// revision's texts at most.
    texts: Arc<std::sync::Mutex<std::collections::HashMap<git2::Oid, String>>>,
}

impl GitRepo {
    /// The cache repository for `config` under `cache_dir`, created (bare, empty) if missing.
    /// The directory name is the source name plus a hash of its URL, so changing a source's URL
    /// never reuses another remote's objects.
    ///
    /// # Errors
    ///
    /// [`SourceError::OpenFailed`] when the directory cannot be created or opened.
    pub fn open(cache_dir: &Path, config: Arc<SourceConfig>) -> Result<GitRepo, SourceError> {
        let url_hash = hex::encode(Sha256::digest(config.url.as_bytes()));
        let dir = cache_dir
            .join("git")
            .join(format!("{}-{}", config.name, &url_hash[..16]));
        let open_failed = |error: git2::Error| SourceError::OpenFailed {
            path: dir.clone(),
            message: error.message().to_owned(),
        };
        if dir.join("HEAD").exists() {
            git2::Repository::open_bare(&dir).map_err(open_failed)?;
        } else {
            std::fs::create_dir_all(&dir).map_err(|error| SourceError::OpenFailed {
                path: dir.clone(),
                message: error.to_string(),
            })?;
            git2::Repository::init_bare(&dir).map_err(open_failed)?;
        }
        Ok(GitRepo {
            config,
            dir,
            texts: Arc::default(),
        })
    }

    /// The source's configuration.
    pub fn config(&self) -> &SourceConfig {
        &self.config
    }

    fn repository(&self) -> Result<git2::Repository, SourceError> {
        git2::Repository::open_bare(&self.dir).map_err(|error| SourceError::OpenFailed {
            path: self.dir.clone(),
            message: error.message().to_owned(),
        })
    }

    /// Fetches the tracked branch (shallow, at the source's `fetch.depth`), pruning it when it
    /// was deleted on the remote.
    ///
    /// # Errors
    ///
    /// [`SourceError::AuthFailed`], [`SourceError::HostKeyRejected`],
    /// [`SourceError::OverBudget`], [`SourceError::Unreachable`] or
    /// [`SourceError::FetchFailed`].
    pub fn fetch(&self) -> Result<(), SourceError> {
        let repo = self.repository()?;
        fetch::fetch(
            &repo,
            &self.config,
            FetchTarget::Branch(&self.config.branch),
        )
    }

    /// Fetches the head of pull request `number` (GitHub's and Gitea's `refs/pull/N/head`), for
    /// a preview of an open pull request: closed ones are never fetched.
    ///
    /// # Errors
    ///
    /// As [`GitRepo::fetch`].
    pub fn fetch_pull(&self, number: u64) -> Result<(), SourceError> {
        let repo = self.repository()?;
        fetch::fetch(&repo, &self.config, FetchTarget::Pull(number))
    }

    /// The commit at the tip of the tracked branch, as of the last fetch.
    ///
    /// # Errors
    ///
    /// [`SourceError::BranchMissing`] when the branch does not exist on the remote.
    pub fn branch_head(&self) -> Result<CommitId, SourceError> {
        self.ref_head(&format!("refs/driftless/heads/{}", self.config.branch))?
            .ok_or_else(|| SourceError::BranchMissing {
                url: crate::redact::url_credentials(&self.config.url),
                branch: self.config.branch.clone(),
            })
    }

    /// The head commit of pull request `number`, as of the last fetch; `None` if not fetched.
    ///
    /// # Errors
    ///
    /// [`SourceError::OpenFailed`] when the cache repository cannot be opened.
    pub fn pull_head(&self, number: u64) -> Result<Option<CommitId>, SourceError> {
        self.ref_head(&format!("refs/driftless/pull/{number}"))
    }

    /// Whether the commit's objects are present in the cache.
    ///
    /// # Errors
    ///
    /// [`SourceError::OpenFailed`] when the cache repository cannot be opened.
    pub fn has_commit(&self, commit: &CommitId) -> Result<bool, SourceError> {
        let repo = self.repository()?;
        Ok(commit.oid().is_ok_and(|oid| repo.find_commit(oid).is_ok()))
    }

    /// A commit's parents, first parent first (a merge commit's second parent is the merged
    /// head).
    ///
    /// # Errors
    ///
    /// [`SourceError::ReadFailed`] when the commit is unknown.
    pub fn parents(&self, commit: &CommitId) -> Result<Vec<CommitId>, SourceError> {
        let repo = self.repository()?;
        let read_failed = |message: String| SourceError::ReadFailed {
            commit: commit.to_string(),
            message,
        };
        let oid = commit
            .oid()
            .map_err(|error| read_failed(error.message().to_owned()))?;
        let found = repo
            .find_commit(oid)
            .map_err(|error| read_failed(error.message().to_owned()))?;
        Ok(found
            .parent_ids()
            .map(|parent| CommitId(parent.to_string()))
            .collect())
    }

    /// A commit's author name, the first line of its message and its commit time (seconds
    /// since the epoch), for people (the web UI's history).
    ///
    /// # Errors
    ///
    /// [`SourceError::ReadFailed`] when the commit is unknown.
    pub fn commit_summary(&self, commit: &CommitId) -> Result<(String, String, i64), SourceError> {
        let repo = self.repository()?;
        let read_failed = |message: String| SourceError::ReadFailed {
            commit: commit.to_string(),
            message,
        };
        let oid = commit
            .oid()
            .map_err(|error| read_failed(error.message().to_owned()))?;
        let found = repo
            .find_commit(oid)
            .map_err(|error| read_failed(error.message().to_owned()))?;
        let author = found.author().name().unwrap_or_default().to_owned();
        let summary = found
            .summary()
            .ok()
            .flatten()
            .unwrap_or_default()
            .to_owned();
        Ok((author, summary, found.time().seconds()))
    }

    fn ref_head(&self, name: &str) -> Result<Option<CommitId>, SourceError> {
        let repo = self.repository()?;
        let Ok(reference) = repo.find_reference(name) else {
            return Ok(None);
        };
        Ok(reference
            .peel_to_commit()
            .ok()
            .map(|commit| CommitId::from_oid(commit.id())))
    }

    /// How `new` relates to `previous`.
    ///
    /// # Errors
    ///
    /// [`SourceError::ReadFailed`] when either commit is unknown.
    pub fn classify_update(
        &self,
        previous: Option<&CommitId>,
        new: &CommitId,
    ) -> Result<BranchUpdate, SourceError> {
        let Some(previous) = previous else {
            return Ok(BranchUpdate::Initial);
        };
        let repo = self.repository()?;
        let new_oid = read_oid(new)?;
        let previous_oid = read_oid(previous)?;
        if new_oid == previous_oid {
            return Ok(BranchUpdate::FastForward);
        }
        // The previous commit may have been garbage: after a force-push and a prune it can
        // still be in the object store (we never gc), but if it is gone, it is a rewrite.
        match repo.graph_descendant_of(new_oid, previous_oid) {
            Ok(true) => Ok(BranchUpdate::FastForward),
            Ok(false) | Err(_) => Ok(BranchUpdate::ForcePush),
        }
    }
}

fn read_oid(commit: &CommitId) -> Result<git2::Oid, SourceError> {
    commit.oid().map_err(|error| SourceError::ReadFailed {
        commit: commit.to_string(),
        message: error.message().to_owned(),
    })
}

pub(super) fn classify(url: &str, error: &git2::Error) -> SourceError {
    // A token in the URL (`https://TOKEN@host`) must not reach an error or a log.
    let message = crate::redact::url_credentials(error.message());
    let url = crate::redact::url_credentials(url);
    // libgit2 reports HTTP 401/403 as class Http with code Auth (or a generic code and a
    // "status code: 401" message, depending on the transport).
    let auth_message = message.contains("401")
        || message.contains("403")
        || message.contains("authentication")
        || message.contains("credentials");
    if error.code() == git2::ErrorCode::Auth || auth_message {
        return SourceError::AuthFailed { url, message };
    }
    match error.class() {
        git2::ErrorClass::Net
        | git2::ErrorClass::Os
        | git2::ErrorClass::Ssl
        | git2::ErrorClass::Ssh => SourceError::Unreachable { url, message },
        git2::ErrorClass::Http if !message.contains("404") => {
            SourceError::Unreachable { url, message }
        }
        _ => SourceError::FetchFailed { url, message },
    }
}

// ---- the async poller ------------------------------------------------------------------------

/// What one poll of a source found.
#[derive(Debug, Clone)]
pub enum PollOutcome {
    /// The branch still points at the last good commit.
    Unchanged { commit: CommitId },
    /// The branch moved.
    Changed(BranchChange),
    /// The poll failed; the last good commit (if any) stays deployed. Retry after `retry_in`.
    Failed {
        error: SourceError,
        retry_in: Duration,
        last_good: Option<CommitId>,
    },
}

/// A move of the tracked branch.
#[derive(Debug, Clone)]
pub struct BranchChange {
    pub previous: Option<CommitId>,
    pub commit: CommitId,
    pub update: BranchUpdate,
    /// Every path that changed, sorted.
    pub changed_paths: Vec<String>,
    /// Whether any changed path passes the source's filter (if not, nothing needs rendering).
    pub touches_source: bool,
}

/// The poller of one git source: fetch, find the branch head, compare with the last good
/// commit. Git work runs on `spawn_blocking`.
#[derive(Debug)]
pub struct GitSource {
    repo: GitRepo,
    last_good: Option<CommitId>,
    backoff: Backoff,
}

/// The first retry after a failed fetch waits this long; later ones double up to the source's
/// poll interval times [`RETRY_CAP_FACTOR`] (at least [`RETRY_CAP_MIN`]).
const RETRY_BASE: Duration = Duration::from_secs(2);
const RETRY_CAP_FACTOR: u32 = 10;
const RETRY_CAP_MIN: Duration = Duration::from_secs(60);

impl GitSource {
    /// A poller over the cache repository for `config`.
    ///
    /// # Errors
    ///
    /// [`SourceError::OpenFailed`] when the cache repository cannot be created.
    pub async fn open(
        cache_dir: PathBuf,
        config: Arc<SourceConfig>,
    ) -> Result<GitSource, SourceError> {
        let cap = config
            .poll_interval
            .saturating_mul(RETRY_CAP_FACTOR)
            .max(RETRY_CAP_MIN);
        let repo = blocking(move || GitRepo::open(&cache_dir, config)).await?;
        Ok(GitSource {
            repo,
            last_good: None,
            backoff: Backoff::new(RETRY_BASE, cap),
        })
    }

    /// The blocking layer, for snapshots of other commits (pull requests).
    pub fn repo(&self) -> &GitRepo {
        &self.repo
    }

    /// The last commit that was fetched successfully.
    pub fn last_good(&self) -> Option<&CommitId> {
        self.last_good.as_ref()
    }

    /// Fetches once and reports what changed. Never panics and never loses the last good
    /// commit: failures come back as [`PollOutcome::Failed`] with the backoff to wait.
    pub async fn poll(&mut self) -> PollOutcome {
        let repo = self.repo.clone();
        let previous = self.last_good.clone();
        let result = blocking(move || {
            repo.fetch()?;
            let commit = repo.branch_head()?;
            if previous.as_ref() == Some(&commit) {
                return Ok(None);
            }
            let update = repo.classify_update(previous.as_ref(), &commit)?;
            let changed_paths = repo.changed_paths(previous.as_ref(), &commit)?;
            let touches_source = repo.touches_source(&changed_paths);
            Ok(Some(BranchChange {
                previous,
                commit,
                update,
                changed_paths,
                touches_source,
            }))
        })
        .await;
        match result {
            Ok(None) => {
                self.backoff.succeed();
                match &self.last_good {
                    Some(commit) => PollOutcome::Unchanged {
                        commit: commit.clone(),
                    },
                    None => PollOutcome::Failed {
                        error: SourceError::TaskFailed {
                            message: "no commit after a successful fetch".to_owned(),
                        },
                        retry_in: self.backoff.fail(),
                        last_good: None,
                    },
                }
            }
            Ok(Some(change)) => {
                self.backoff.succeed();
                self.last_good = Some(change.commit.clone());
                PollOutcome::Changed(change)
            }
            Err(error) => PollOutcome::Failed {
                error,
                retry_in: self.backoff.fail(),
                last_good: self.last_good.clone(),
            },
        }
    }

    /// Fetches the head of pull request `number` on the blocking pool.
    ///
    /// # Errors
    ///
    /// See [`GitRepo::fetch_pull`].
    pub async fn fetch_pull(&self, number: u64) -> Result<(), SourceError> {
        let repo = self.repo.clone();
        blocking(move || repo.fetch_pull(number)).await
    }

    /// A snapshot of `commit`, built on the blocking pool.
    ///
    /// # Errors
    ///
    /// See [`GitRepo::snapshot`].
    pub async fn snapshot(&self, commit: CommitId) -> Result<Snapshot, SourceError> {
        let repo = self.repo.clone();
        blocking(move || repo.snapshot(&commit)).await
    }

    /// The source's files changed between two commits, read on the blocking pool.
    ///
    /// # Errors
    ///
    /// See [`GitRepo::changes`].
    pub async fn changes(
        &self,
        previous: CommitId,
        new: CommitId,
    ) -> Result<Vec<analyzer::FileChange>, SourceError> {
        let repo = self.repo.clone();
        blocking(move || repo.changes(&previous, &new)).await
    }

    /// A snapshot of `commit` with its files' blob ids, built on the blocking pool.
    ///
    /// # Errors
    ///
    /// See [`GitRepo::snapshot`].
    pub async fn snapshot_with_ids(
        &self,
        commit: CommitId,
    ) -> Result<(Snapshot, Vec<analyzer::BlobId>), SourceError> {
        let repo = self.repo.clone();
        blocking(move || repo.snapshot_with_ids(&commit)).await
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SourceError> + Send + 'static,
) -> Result<T, SourceError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| SourceError::TaskFailed {
            message: error.to_string(),
        })?
}

#[cfg(test)]
mod tests;
mod tree;
