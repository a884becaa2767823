//! Tests of the git source against real repositories made with git2 in temp dirs.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::{PathFilter, SourceConfig};
use crate::source::relay::FetchBudget;

/// A "remote" repository the tests commit to directly.
struct Remote {
    _dir: tempfile::TempDir,
    repo: git2::Repository,
    url: String,
}

impl Remote {
    fn new() -> Remote {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(dir.path()).unwrap();
        let url = format!("file://{}", dir.path().display());
        Remote {
            _dir: dir,
            repo,
            url,
        }
    }

    /// Commits exactly `files` as the whole tree on top of `parent`, and points `branch` at it
    /// (forcibly, so this can also rewrite history).
    fn commit(&self, branch: &str, parent: Option<git2::Oid>, files: &[(&str, &str)]) -> git2::Oid {
        // An in-memory index has no repository to write blobs to: write them here.
        let entries: Vec<(&str, u32, git2::Oid)> = files
            .iter()
            .map(|(path, contents)| {
                (
                    *path,
                    0o100644,
                    self.repo.blob(contents.as_bytes()).unwrap(),
                )
            })
            .collect();
        self.commit_entries(branch, parent, &entries)
    }

    /// Commits exactly these `(path, mode, object)` entries (a gitlink has mode 0o160000).
    fn commit_entries(
        &self,
        branch: &str,
        parent: Option<git2::Oid>,
        files: &[(&str, u32, git2::Oid)],
    ) -> git2::Oid {
        let mut index = git2::Index::new().unwrap();
        for (path, mode, id) in files {
            let entry = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: *mode,
                uid: 0,
                gid: 0,
                file_size: 0,
                id: *id,
                flags: 0,
                flags_extended: 0,
                path: path.as_bytes().to_vec(),
            };
            index.add(&entry).unwrap();
        }
        let tree_id = index.write_tree_to(&self.repo).unwrap();
        let tree = self.repo.find_tree(tree_id).unwrap();
        let signature = git2::Signature::new(
            "test",
            "test@example.invalid",
            &git2::Time::new(1_700_000_000, 0),
        )
        .unwrap();
        let parents: Vec<git2::Commit> = parent
            .iter()
            .map(|oid| self.repo.find_commit(*oid).unwrap())
            .collect();
        let parent_refs: Vec<&git2::Commit> = parents.iter().collect();
        let message = format!("commit {}", files.len());
        let oid = self
            .repo
            .commit(None, &signature, &signature, &message, &tree, &parent_refs)
            .unwrap();
        self.repo
            .reference(&format!("refs/heads/{branch}"), oid, true, "test")
            .unwrap();
        oid
    }
}

fn source_config(url: &str, include: &[&str], exclude: &[&str]) -> Arc<SourceConfig> {
    source_config_with(url, include, exclude, FetchBudget::default())
}

fn source_config_with(
    url: &str,
    include: &[&str],
    exclude: &[&str],
    fetch: FetchBudget,
) -> Arc<SourceConfig> {
    Arc::new(SourceConfig {
        name: "test".to_owned(),
        url: url.to_owned(),
        branch: "main".to_owned(),
        paths: PathFilter::new(include, exclude).unwrap(),
        poll_interval: Duration::from_secs(1),
        credentials: None,
        forge_repo: None,
        boundary: Arc::default(),
        previews: Default::default(),
        service_account: None,
        create_namespaces: crate::namespaces::CreateNamespaces::default(),
        prune: Default::default(),
        known_hosts: None,
        ca: None,
        fetch,
        depth: 1,
        reviewed_plan: None,
    })
}

fn expect_changed(outcome: PollOutcome) -> BranchChange {
    match outcome {
        PollOutcome::Changed(change) => change,
        other => panic!("expected a change, got {other:?}"),
    }
}

const APP: &str = "apiVersion: core.oam.dev/v1beta1\nkind: Application\n";

#[tokio::test]
async fn first_poll_snapshots_filtered_files_then_tracks_changes() {
    let remote = Remote::new();
    let first = remote.commit(
        "main",
        None,
        &[
            ("apps/web.yaml", APP),
            ("apps/README.md", "docs"),
            ("docs/guide.md", "guide"),
            ("definitions/web.cue", "web: {}"),
        ],
    );
    let cache = tempfile::tempdir().unwrap();
    let config = source_config(&remote.url, &["apps/**", "definitions/**"], &["**/*.md"]);
    let mut source = GitSource::open(cache.path().to_owned(), config)
        .await
        .unwrap();

    let change = expect_changed(source.poll().await);
    assert_eq!(change.update, BranchUpdate::Initial);
    assert_eq!(change.commit.as_str(), first.to_string());
    assert!(change.touches_source);
    let snapshot = source.snapshot(change.commit.clone()).await.unwrap();
    let paths: Vec<&str> = snapshot
        .files
        .iter()
        .map(|file| file.path.as_str())
        .collect();
    assert_eq!(paths, vec!["apps/web.yaml", "definitions/web.cue"]);
    assert_eq!(snapshot.files[0].contents, APP);
    assert_eq!(snapshot.commit.as_deref(), Some(first.to_string().as_str()));

    // Nothing moved: one fetch, no change.
    match source.poll().await {
        PollOutcome::Unchanged { commit } => assert_eq!(commit, change.commit),
        other => panic!("expected unchanged, got {other:?}"),
    }

    // Only an excluded file changes: the branch moved but the source is untouched.
    let second = remote.commit(
        "main",
        Some(first),
        &[
            ("apps/web.yaml", APP),
            ("apps/README.md", "more docs"),
            ("docs/guide.md", "guide"),
            ("definitions/web.cue", "web: {}"),
        ],
    );
    let change = expect_changed(source.poll().await);
    assert_eq!(change.update, BranchUpdate::FastForward);
    assert_eq!(
        change.previous.as_ref().map(CommitId::as_str),
        Some(first.to_string().as_str())
    );
    assert_eq!(change.changed_paths, vec!["apps/README.md"]);
    assert!(!change.touches_source);

    // A definition changes and an app is renamed: both sides of the rename are reported.
    let _third = remote.commit(
        "main",
        Some(second),
        &[
            ("apps/web-renamed.yaml", APP),
            ("apps/README.md", "more docs"),
            ("docs/guide.md", "guide"),
            ("definitions/web.cue", "web: { changed: true }"),
        ],
    );
    let change = expect_changed(source.poll().await);
    assert_eq!(
        change.changed_paths,
        vec![
            "apps/web-renamed.yaml",
            "apps/web.yaml",
            "definitions/web.cue"
        ]
    );
    assert!(change.touches_source);
    // Snapshots reuse the texts of unchanged blobs from the previous one; changed files are
    // read anew, and an older commit still reads as it was.
    let snapshot = source.snapshot(change.commit.clone()).await.unwrap();
    let files: Vec<(&str, &str)> = snapshot
        .files
        .iter()
        .map(|file| (file.path.as_str(), file.contents.as_str()))
        .collect();
    assert_eq!(
        files,
        vec![
            ("apps/web-renamed.yaml", APP),
            ("definitions/web.cue", "web: { changed: true }")
        ]
    );
    let first_commit = CommitId::parse(&first.to_string()).unwrap();
    let snapshot = source.snapshot(first_commit).await.unwrap();
    assert_eq!(snapshot.files[1].contents, "web: {}");
}

#[tokio::test]
async fn force_push_is_detected() {
    let remote = Remote::new();
    let root = remote.commit("main", None, &[("apps/a.yaml", APP)]);
    let _abandoned = remote.commit("main", Some(root), &[("apps/a.yaml", "kind: Old\n")]);
    let cache = tempfile::tempdir().unwrap();
    let mut source = GitSource::open(
        cache.path().to_owned(),
        source_config(&remote.url, &[], &[]),
    )
    .await
    .unwrap();
    expect_changed(source.poll().await);

    let rewritten = remote.commit("main", Some(root), &[("apps/a.yaml", "kind: New\n")]);
    let change = expect_changed(source.poll().await);
    assert_eq!(change.update, BranchUpdate::ForcePush);
    assert_eq!(change.commit.as_str(), rewritten.to_string());
    let snapshot = source.snapshot(change.commit).await.unwrap();
    assert_eq!(snapshot.files[0].contents, "kind: New\n");
}

#[tokio::test]
async fn deleted_branch_keeps_last_good_and_backs_off() {
    let remote = Remote::new();
    let first = remote.commit("main", None, &[("apps/a.yaml", APP)]);
    remote.commit("other", None, &[("x", "y")]);
    let cache = tempfile::tempdir().unwrap();
    let mut source = GitSource::open(
        cache.path().to_owned(),
        source_config(&remote.url, &[], &[]),
    )
    .await
    .unwrap();
    expect_changed(source.poll().await);

    remote
        .repo
        .find_reference("refs/heads/main")
        .unwrap()
        .delete()
        .unwrap();
    let mut delays = Vec::new();
    for _ in 0..3 {
        match source.poll().await {
            PollOutcome::Failed {
                error,
                retry_in,
                last_good,
            } => {
                assert!(
                    matches!(error, SourceError::BranchMissing { .. }),
                    "{error}"
                );
                assert!(
                    error.to_string().contains("branch main does not exist"),
                    "{error}"
                );
                assert_eq!(
                    last_good.as_ref().map(CommitId::as_str),
                    Some(first.to_string().as_str())
                );
                delays.push(retry_in);
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }
    assert_eq!(
        delays,
        vec![
            Duration::from_secs(2),
            Duration::from_secs(4),
            Duration::from_secs(8)
        ]
    );
    assert_eq!(
        source.last_good().map(CommitId::as_str),
        Some(first.to_string().as_str())
    );

    // The branch comes back: polling recovers.
    let back = remote.commit("main", Some(first), &[("apps/a.yaml", "kind: Back\n")]);
    let change = expect_changed(source.poll().await);
    assert_eq!(change.commit.as_str(), back.to_string());
}

#[tokio::test]
async fn unreachable_remote_is_an_error_not_a_panic() {
    let cache = tempfile::tempdir().unwrap();
    let missing = cache.path().join("no-such-repo");
    let url = format!("file://{}", missing.display());
    let mut source = GitSource::open(cache.path().to_owned(), source_config(&url, &[], &[]))
        .await
        .unwrap();
    match source.poll().await {
        PollOutcome::Failed {
            error, last_good, ..
        } => {
            assert!(last_good.is_none());
            assert!(error.to_string().contains("no-such-repo"), "{error}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    // Unreachable HTTP: nothing listens on port 9 of loopback.
    let mut source = GitSource::open(
        cache.path().to_owned(),
        source_config("http://127.0.0.1:9/o/r.git", &[], &[]),
    )
    .await
    .unwrap();
    match source.poll().await {
        PollOutcome::Failed { error, .. } => {
            assert!(
                matches!(error, SourceError::Unreachable { .. }),
                "{error:?}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn pull_request_heads_are_fetched_on_demand() {
    let remote = Remote::new();
    let base = remote.commit("main", None, &[("apps/a.yaml", APP)]);
    let head = remote.commit("feature", Some(base), &[("apps/a.yaml", "kind: Feature\n")]);
    remote
        .repo
        .reference("refs/pull/7/head", head, true, "pr")
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut source = GitSource::open(
        cache.path().to_owned(),
        source_config(&remote.url, &[], &[]),
    )
    .await
    .unwrap();
    expect_changed(source.poll().await);
    // Only the tracked branch is fetched by a poll; a pull request's head on demand.
    assert_eq!(source.repo().pull_head(7).unwrap(), None);
    source.fetch_pull(7).await.unwrap();
    let pull_head = source.repo().pull_head(7).unwrap().unwrap();
    assert_eq!(pull_head.as_str(), head.to_string());
    assert!(source.repo().has_commit(&pull_head).unwrap());
    assert_eq!(source.repo().pull_head(8).unwrap(), None);
}

#[test]
fn commit_ids() {
    assert!(CommitId::parse("0123456789abcdef0123456789ABCDEF01234567").is_some());
    assert!(CommitId::parse("0123").is_none());
    assert!(CommitId::parse("g123456789abcdef0123456789abcdef01234567").is_none());
}

#[tokio::test]
async fn changes_between_commits_carry_the_new_texts_of_the_source_files() {
    let remote = Remote::new();
    let first = remote.commit(
        "main",
        None,
        &[
            ("apps/a.yaml", "a: 1\n"),
            ("apps/b.yaml", "b: 1\n"),
            ("apps/gone.yaml", "gone: 1\n"),
            ("apps/notes.md", "notes"),
            ("other/x.yaml", "x: 1\n"),
        ],
    );
    let second = remote.commit(
        "main",
        Some(first),
        &[
            ("apps/a.yaml", "a: 2\n"),
            ("apps/b.yaml", "b: 1\n"),
            ("apps/new.yaml", "new: 1\n"),
            ("apps/notes.md", "more notes"),
            ("other/x.yaml", "x: 2\n"),
        ],
    );
    let cache = tempfile::tempdir().unwrap();
    let config = source_config(&remote.url, &["apps/**"], &["**/*.md"]);
    let mut source = GitSource::open(cache.path().to_owned(), config)
        .await
        .unwrap();
    expect_changed(source.poll().await);
    let (first, second) = (CommitId::from_oid(first), CommitId::from_oid(second));
    let changes = source.changes(first, second.clone()).await.unwrap();
    let found: Vec<(&str, Option<&str>)> = changes
        .iter()
        .map(|change| (change.path.as_str(), change.contents.as_deref()))
        .collect();
    // Only the source's files (not other/, not *.md), unchanged b.yaml left out; in path order.
    assert_eq!(
        found,
        vec![
            ("apps/a.yaml", Some("a: 2\n")),
            ("apps/gone.yaml", None),
            ("apps/new.yaml", Some("new: 1\n")),
        ]
    );
    // Each new text carries its blob id: the id the snapshot gives the same file.
    let (snapshot, ids) = source.snapshot_with_ids(second).await.unwrap();
    for change in changes.iter().filter(|change| change.contents.is_some()) {
        let index = snapshot
            .files
            .iter()
            .position(|file| file.path == change.path)
            .unwrap();
        assert_eq!(change.blob_id, Some(ids[index]));
    }
    assert_eq!(changes[1].blob_id, None);
}

/// A TCP server that accepts every connection and then sends nothing (a black-holed remote).
fn silent_server() -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        // Hold every connection open, read nothing, until the test process ends.
        while let Ok((stream, _)) = listener.accept() {
            held.push(stream);
        }
    });
    (addr, handle)
}

/// Polls a source at `url` (a silent server) and expects the low-speed limit to end the fetch.
async fn expect_stall(url: String) {
    let budget = FetchBudget {
        low_speed_time: Duration::from_secs(1),
        ..FetchBudget::default()
    };
    let cache = tempfile::tempdir().unwrap();
    let config = source_config_with(&url, &[], &[], budget);
    let mut source = GitSource::open(cache.path().to_owned(), config)
        .await
        .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(30), source.poll())
        .await
        .unwrap_or_else(|_| panic!("{url}: the fetch hung past its low-speed limit"));
    match outcome {
        PollOutcome::Failed { error, .. } => {
            assert!(
                matches!(error, SourceError::OverBudget { .. }),
                "{url}: {error:?}"
            );
            assert!(
                error.to_string().contains("the transfer stalled"),
                "{url}: {error}"
            );
        }
        other => panic!("{url}: expected a failure, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_http_remote_that_accepts_and_sends_nothing_times_out() {
    let (addr, _server) = silent_server();
    expect_stall(format!("http://{addr}/owner/repo.git")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_https_remote_that_accepts_and_sends_nothing_times_out() {
    let (addr, _server) = silent_server();
    expect_stall(format!("https://{addr}/owner/repo.git")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_ssh_remote_that_accepts_and_sends_nothing_times_out() {
    let (addr, _server) = silent_server();
    expect_stall(format!("ssh://git@{addr}/owner/repo.git")).await;
}

#[tokio::test]
async fn an_unreachable_ssh_host_is_unreachable_within_the_connect_timeout() {
    // Nothing listens on port 9 of loopback: refused at once.
    let cache = tempfile::tempdir().unwrap();
    let config = source_config("ssh://git@127.0.0.1:9/owner/repo.git", &[], &[]);
    let mut source = GitSource::open(cache.path().to_owned(), config)
        .await
        .unwrap();
    match source.poll().await {
        PollOutcome::Failed { error, .. } => {
            assert!(
                matches!(error, SourceError::Unreachable { .. }),
                "{error:?}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_file_over_the_cap_fails_the_snapshot_by_name() {
    let remote = Remote::new();
    let big = "x".repeat(4096);
    remote.commit(
        "main",
        None,
        &[("apps/a.yaml", APP), ("apps/big.yaml", &big)],
    );
    let cache = tempfile::tempdir().unwrap();
    let budget = FetchBudget {
        max_file_bytes: 1024,
        ..FetchBudget::default()
    };
    let mut source = GitSource::open(
        cache.path().to_owned(),
        source_config_with(&remote.url, &[], &[], budget),
    )
    .await
    .unwrap();
    let change = expect_changed(source.poll().await);
    let error = source.snapshot(change.commit.clone()).await.unwrap_err();
    assert!(
        matches!(
            error,
            SourceError::FileTooLarge {
                size: 4096,
                cap: 1024,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("apps/big.yaml is 4096 bytes"),
        "{error}"
    );
    // Excluded, it is never read.
    let budget = FetchBudget {
        max_file_bytes: 1024,
        ..FetchBudget::default()
    };
    let cache = tempfile::tempdir().unwrap();
    let config = source_config_with(&remote.url, &[], &["apps/big.yaml"], budget);
    let mut source = GitSource::open(cache.path().to_owned(), config)
        .await
        .unwrap();
    let change = expect_changed(source.poll().await);
    let snapshot = source.snapshot(change.commit).await.unwrap();
    assert_eq!(snapshot.files.len(), 1);
}

#[tokio::test]
async fn submodules_are_left_out_of_the_snapshot() {
    let remote = Remote::new();
    let blob = remote.repo.blob(APP.as_bytes()).unwrap();
    // A gitlink: a commit of another repository, which the cache never has.
    let elsewhere = git2::Oid::from_str("0123456789abcdef0123456789abcdef01234567").unwrap();
    remote.commit_entries(
        "main",
        None,
        &[
            ("apps/a.yaml", 0o100644, blob),
            ("vendor/charts", 0o160000, elsewhere),
        ],
    );
    let cache = tempfile::tempdir().unwrap();
    let mut source = GitSource::open(
        cache.path().to_owned(),
        source_config(&remote.url, &[], &[]),
    )
    .await
    .unwrap();
    let change = expect_changed(source.poll().await);
    let snapshot = source.snapshot(change.commit).await.unwrap();
    let paths: Vec<&str> = snapshot
        .files
        .iter()
        .map(|file| file.path.as_str())
        .collect();
    assert_eq!(paths, vec!["apps/a.yaml"]);
}
