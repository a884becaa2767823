//! GitLab's REST API (`/api/v4`): commit statuses, open merge requests and merge request notes.
//!
//! GitLab names things differently from Gitea and GitHub, so it has its own calls:
//! - a project is addressed by its URL-encoded path (`owner%2Fname`);
//! - `POST /projects/:id/statuses/:sha` takes `name` for the context and knows no `error` state
//!   (both failure and error become `failed`);
//! - merge requests are listed with `state=opened` and numbered by `iid`; their head is `sha`;
//! - comments are notes: `GET/POST /projects/:id/merge_requests/:iid/notes`, edited with `PUT`.
//!
//! Authentication is `Authorization: Bearer <token>`, which GitLab accepts for personal,
//! project and group access tokens.
//!
//! GitLab cannot run on the test machine, so this client is tested against a local HTTP server
//! that checks every request's method, path, query, headers and body against GitLab's
//! documented API (see the tests below); it has not been run against a real GitLab.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::gitea::{CommentBody, NewCommentBody, find_marked};
use super::rest::{RestClient, segment};
use super::{CommentId, CommitStatus, Forge, ForgeError, PullRequest, StatusState};
use crate::config::{RepoSlug, Secret};
use crate::source::git::CommitId;

/// GitLab accepts notes up to 1,000,000 characters, but one limit across forges keeps the plan
/// comment the same everywhere (and readable).
const COMMENT_LIMIT: usize = 65_536;
/// GitLab's largest page.
const PAGE_SIZE: usize = 100;

/// GitLab.com or a self-managed GitLab.
#[derive(Debug, Clone)]
pub struct GitLabForge {
    pub(super) rest: RestClient,
}

impl GitLabForge {
    /// A client for the GitLab at `base_url` (its web root, e.g. `https://gitlab.example.com`).
    ///
    /// # Errors
    ///
    /// [`ForgeError::Unreachable`] when the HTTP client cannot be built.
    pub fn new(base_url: &str, token: Secret) -> Result<GitLabForge, ForgeError> {
        let api_root = format!("{}/api/v4", base_url.trim_end_matches('/'));
        Ok(GitLabForge {
            rest: RestClient::new(
                api_root,
                RestClient::with_scheme("Bearer", &token),
                Vec::new(),
            )?,
        })
    }
}

#[derive(Serialize)]
struct StatusBody<'a> {
    state: &'static str,
    name: &'a str,
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_url: Option<&'a str>,
}

#[derive(Deserialize)]
struct MergeRequestBody {
    iid: u64,
    #[serde(default)]
    title: String,
    sha: String,
    target_branch: String,
    #[serde(default)]
    author: Option<AuthorBody>,
    #[serde(default)]
    source_project_id: Option<u64>,
    #[serde(default)]
    target_project_id: Option<u64>,
}

#[derive(Deserialize)]
struct AuthorBody {
    #[serde(default)]
    username: String,
}

/// GitLab's name for a state: it has `failed` where the others have `failure` and `error`.
fn gitlab_state(state: StatusState) -> &'static str {
    match state {
        StatusState::Pending => "pending",
        StatusState::Success => "success",
        StatusState::Failure | StatusState::Error => "failed",
    }
}

/// `owner%2Fname`: GitLab's id for a project given by path.
fn project(repo: &RepoSlug) -> String {
    segment(&format!("{}/{}", repo.owner, repo.name))
}

async fn set_status(
    rest: &RestClient,
    repo: &RepoSlug,
    commit: &CommitId,
    status: &CommitStatus,
) -> Result<(), ForgeError> {
    let path = format!("/projects/{}/statuses/{commit}", project(repo));
    let body = StatusBody {
        state: gitlab_state(status.state),
        name: &status.context,
        description: &status.description,
        target_url: status.target_url.as_deref(),
    };
    rest.send_raw("POST", &path, Some(&body)).await.map(drop)
}

async fn open_pulls(rest: &RestClient, repo: &RepoSlug) -> Result<Vec<PullRequest>, ForgeError> {
    let path_of = |page: usize| {
        format!(
            "/projects/{}/merge_requests?state=opened&per_page={PAGE_SIZE}&page={page}",
            project(repo)
        )
    };
    let bodies: Vec<MergeRequestBody> = rest.get_all(PAGE_SIZE, path_of).await?;
    let mut pulls = Vec::with_capacity(bodies.len());
    for body in bodies {
        let head_commit = CommitId::parse(&body.sha).ok_or_else(|| ForgeError::BadResponse {
            method: "GET",
            path: path_of(1),
            message: format!("merge request {} has head sha {:?}", body.iid, body.sha),
        })?;
        // A source project that is unknown counts as a fork: previews fail closed.
        let from_fork = match (body.source_project_id, body.target_project_id) {
            (Some(source), Some(target)) => source != target,
            _ => true,
        };
        pulls.push(PullRequest {
            number: body.iid,
            title: body.title,
            head_commit,
            base_branch: body.target_branch,
            author: body
                .author
                .map(|author| author.username)
                .unwrap_or_default(),
            from_fork,
        });
    }
    pulls.sort();
    Ok(pulls)
}

/// Every note on the merge request, oldest first (GitLab lists them newest first).
async fn notes(
    rest: &RestClient,
    repo: &RepoSlug,
    merge_request: u64,
) -> Result<Vec<crate::forge::Comment>, ForgeError> {
    let notes_path = format!(
        "/projects/{}/merge_requests/{merge_request}/notes",
        project(repo)
    );
    let notes: Vec<CommentBody> = rest
        .get_all(PAGE_SIZE, |page| {
            format!("{notes_path}?per_page={PAGE_SIZE}&page={page}")
        })
        .await?;
    let mut notes: Vec<_> = notes.into_iter().map(CommentBody::into_comment).collect();
    notes.sort_by_key(|note| note.id);
    Ok(notes)
}

async fn upsert_note(
    rest: &RestClient,
    repo: &RepoSlug,
    merge_request: u64,
    marker: &str,
    body: &str,
) -> Result<CommentId, ForgeError> {
    let notes_path = format!(
        "/projects/{}/merge_requests/{merge_request}/notes",
        project(repo)
    );
    let notes: Vec<CommentBody> = rest
        .get_all(PAGE_SIZE, |page| {
            format!("{notes_path}?per_page={PAGE_SIZE}&page={page}")
        })
        .await?;
    // GitLab lists notes newest first; `find_marked` picks the oldest marked one by id.
    let ours = find_marked(&notes, marker).map(|CommentId(id)| id);
    let new_body = NewCommentBody { body };
    match ours {
        Some(id) => {
            let path = format!("{notes_path}/{id}");
            let _: CommentBody = rest.send("PUT", &path, Some(&new_body)).await?;
            Ok(CommentId(id))
        }
        None => {
            let created: CommentBody = rest.send("POST", &notes_path, Some(&new_body)).await?;
            Ok(CommentId(created.id))
        }
    }
}

impl Forge for GitLabForge {
    fn set_status<'a>(
        &'a self,
        repo: &'a RepoSlug,
        commit: &'a CommitId,
        status: &'a CommitStatus,
    ) -> BoxFuture<'a, Result<(), ForgeError>> {
        Box::pin(set_status(&self.rest, repo, commit, status))
    }

    fn open_pulls<'a>(
        &'a self,
        repo: &'a RepoSlug,
    ) -> BoxFuture<'a, Result<Vec<PullRequest>, ForgeError>> {
        Box::pin(open_pulls(&self.rest, repo))
    }

    fn upsert_comment<'a>(
        &'a self,
        repo: &'a RepoSlug,
        pull: u64,
        marker: &'a str,
        body: &'a str,
    ) -> BoxFuture<'a, Result<CommentId, ForgeError>> {
        Box::pin(upsert_note(&self.rest, repo, pull, marker, body))
    }

    fn comment_limit(&self) -> usize {
        COMMENT_LIMIT
    }

    fn sync_issue<'a>(
        &'a self,
        repo: &'a RepoSlug,
        marker: &'a str,
        state: crate::forge::issues::IssueState<'a>,
    ) -> BoxFuture<'a, Result<(), ForgeError>> {
        Box::pin(async move {
            let project = project(repo);
            crate::forge::issues::sync_gitlab(&self.rest, PAGE_SIZE, &project, marker, state).await
        })
    }

    fn comments<'a>(
        &'a self,
        repo: &'a RepoSlug,
        pull: u64,
    ) -> BoxFuture<'a, Result<Vec<crate::forge::Comment>, ForgeError>> {
        Box::pin(notes(&self.rest, repo, pull))
    }
}

#[cfg(test)]
mod tests;
