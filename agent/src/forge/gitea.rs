//! Gitea's API (`/api/v1`): commit statuses, open pull requests, issue comments.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::rest::{RestClient, segment};
use super::{CommentId, CommitStatus, Forge, ForgeError, PullRequest};
use crate::config::{RepoSlug, Secret};
use crate::source::git::CommitId;

/// Gitea keeps comments in a TEXT column with no documented cap; stay at GitHub's limit so one
/// report fits both.
const COMMENT_LIMIT: usize = 65_536;
const PAGE_SIZE: usize = 50;

/// A Gitea instance.
#[derive(Debug, Clone)]
pub struct GiteaForge {
    pub(super) rest: RestClient,
}

impl GiteaForge {
    /// A client for the Gitea at `base_url` (its web root, e.g. `http://127.0.0.1:3000`).
    ///
    /// # Errors
    ///
    /// [`ForgeError::Unreachable`] when the HTTP client cannot be built.
    pub fn new(base_url: &str, token: Secret) -> Result<GiteaForge, ForgeError> {
        let api_root = format!("{}/api/v1", base_url.trim_end_matches('/'));
        Ok(GiteaForge {
            rest: RestClient::new(
                api_root,
                RestClient::with_scheme("token", &token),
                Vec::new(),
            )?,
        })
    }
}

#[derive(Serialize)]
pub(crate) struct StatusBody<'a> {
    pub(crate) state: &'a str,
    pub(crate) context: &'a str,
    pub(crate) description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) target_url: Option<&'a str>,
}

impl<'a> StatusBody<'a> {
    pub(crate) fn from_status(status: &'a CommitStatus) -> StatusBody<'a> {
        StatusBody {
            state: status.state.as_str(),
            context: &status.context,
            description: &status.description,
            target_url: status.target_url.as_deref(),
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct PullBody {
    pub(crate) number: u64,
    #[serde(default)]
    pub(crate) title: String,
    pub(crate) head: BranchBody,
    pub(crate) base: BranchBody,
    #[serde(default)]
    pub(crate) user: Option<UserBody>,
}

#[derive(Deserialize)]
pub(crate) struct BranchBody {
    #[serde(rename = "ref", default)]
    pub(crate) branch: String,
    pub(crate) sha: String,
    /// `null` when the head's repository was deleted.
    #[serde(default)]
    pub(crate) repo: Option<RepoBody>,
}

#[derive(Deserialize)]
pub(crate) struct RepoBody {
    #[serde(default)]
    pub(crate) full_name: String,
}

#[derive(Deserialize)]
pub(crate) struct UserBody {
    #[serde(default)]
    pub(crate) login: String,
}

#[derive(Deserialize)]
pub(crate) struct CommentBody {
    pub(crate) id: u64,
    #[serde(default)]
    pub(crate) body: String,
    /// Gitea's and GitHub's author.
    #[serde(default)]
    pub(crate) user: Option<UserBody>,
    /// GitLab's author.
    #[serde(default)]
    pub(crate) author: Option<AuthorBody>,
}

#[derive(Deserialize)]
pub(crate) struct AuthorBody {
    #[serde(default)]
    pub(crate) username: String,
}

impl CommentBody {
    pub(crate) fn into_comment(self) -> crate::forge::Comment {
        let author = match (self.user, self.author) {
            (Some(user), _) => user.login,
            (None, Some(author)) => author.username,
            (None, None) => String::new(),
        };
        crate::forge::Comment {
            id: CommentId(self.id),
            author,
            body: self.body,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct NewCommentBody<'a> {
    pub(crate) body: &'a str,
}

pub(crate) fn pulls_from(
    bodies: Vec<PullBody>,
    path: &str,
) -> Result<Vec<PullRequest>, ForgeError> {
    bodies
        .into_iter()
        .map(|pull| {
            let head_commit =
                CommitId::parse(&pull.head.sha).ok_or_else(|| ForgeError::BadResponse {
                    method: "GET",
                    path: path.to_owned(),
                    message: format!(
                        "pull request {} has head sha {:?}",
                        pull.number, pull.head.sha
                    ),
                })?;
            // A head whose repository is unknown counts as a fork: previews fail closed.
            let from_fork = match (&pull.head.repo, &pull.base.repo) {
                (Some(head), Some(base)) => head.full_name != base.full_name,
                _ => true,
            };
            Ok(PullRequest {
                number: pull.number,
                title: pull.title,
                head_commit,
                base_branch: pull.base.branch,
                author: pull.user.map(|user| user.login).unwrap_or_default(),
                from_fork,
            })
        })
        .collect()
}

/// Our comment is the oldest one carrying the marker (a later copy would be a user quoting it).
pub(crate) fn find_marked(comments: &[CommentBody], marker: &str) -> Option<CommentId> {
    comments
        .iter()
        .filter(|comment| comment.body.starts_with(marker))
        .map(|comment| CommentId(comment.id))
        .min()
}

/// How a forge pages its lists: the query parameter and the page size. The only difference
/// between Gitea's and GitHub's status, pull and comment endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    pub(crate) param: &'static str,
    pub(crate) size: usize,
}

const GITEA_PAGING: Paging = Paging {
    param: "limit",
    size: PAGE_SIZE,
};

/// `POST /repos/{owner}/{repo}/statuses/{sha}`, the same on Gitea and GitHub.
pub(crate) async fn set_status(
    rest: &RestClient,
    repo: &RepoSlug,
    commit: &CommitId,
    status: &CommitStatus,
) -> Result<(), ForgeError> {
    let path = format!(
        "/repos/{}/{}/statuses/{}",
        segment(&repo.owner),
        segment(&repo.name),
        commit
    );
    rest.send_raw("POST", &path, Some(&StatusBody::from_status(status)))
        .await
        .map(drop)
}

/// Every open pull request, page by page, sorted.
pub(crate) async fn open_pulls(
    rest: &RestClient,
    paging: Paging,
    repo: &RepoSlug,
) -> Result<Vec<PullRequest>, ForgeError> {
    let path_of = |page: usize| {
        format!(
            "/repos/{}/{}/pulls?state=open&{}={}&page={page}",
            segment(&repo.owner),
            segment(&repo.name),
            paging.param,
            paging.size
        )
    };
    let bodies: Vec<PullBody> = rest.get_all(paging.size, path_of).await?;
    let mut pulls = pulls_from(bodies, &path_of(1))?;
    pulls.sort();
    Ok(pulls)
}

/// Every comment on the pull request, oldest first.
pub(crate) async fn comments(
    rest: &RestClient,
    paging: Paging,
    repo: &RepoSlug,
    pull: u64,
) -> Result<Vec<crate::forge::Comment>, ForgeError> {
    let (owner, name) = (segment(&repo.owner), segment(&repo.name));
    let comments: Vec<CommentBody> = rest
        .get_all(paging.size, |page| {
            format!(
                "/repos/{owner}/{name}/issues/{pull}/comments?{}={}&page={page}",
                paging.param, paging.size
            )
        })
        .await?;
    let mut comments: Vec<_> = comments
        .into_iter()
        .map(CommentBody::into_comment)
        .collect();
    comments.sort_by_key(|comment| comment.id);
    Ok(comments)
}

/// Edits our marked comment on the pull request in place, or creates it.
pub(crate) async fn upsert_comment(
    rest: &RestClient,
    paging: Paging,
    repo: &RepoSlug,
    pull: u64,
    marker: &str,
    body: &str,
) -> Result<CommentId, ForgeError> {
    let (owner, name) = (segment(&repo.owner), segment(&repo.name));
    let comments: Vec<CommentBody> = rest
        .get_all(paging.size, |page| {
            format!(
                "/repos/{owner}/{name}/issues/{pull}/comments?{}={}&page={page}",
                paging.param, paging.size
            )
        })
        .await?;
    let new_body = NewCommentBody { body };
    match find_marked(&comments, marker) {
        Some(CommentId(id)) => {
            let path = format!("/repos/{owner}/{name}/issues/comments/{id}");
            let _: CommentBody = rest.send("PATCH", &path, Some(&new_body)).await?;
            Ok(CommentId(id))
        }
        None => {
            let path = format!("/repos/{owner}/{name}/issues/{pull}/comments");
            let created: CommentBody = rest.send("POST", &path, Some(&new_body)).await?;
            Ok(CommentId(created.id))
        }
    }
}

impl Forge for GiteaForge {
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
        Box::pin(open_pulls(&self.rest, GITEA_PAGING, repo))
    }

    fn upsert_comment<'a>(
        &'a self,
        repo: &'a RepoSlug,
        pull: u64,
        marker: &'a str,
        body: &'a str,
    ) -> BoxFuture<'a, Result<CommentId, ForgeError>> {
        Box::pin(upsert_comment(
            &self.rest,
            GITEA_PAGING,
            repo,
            pull,
            marker,
            body,
        ))
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
        Box::pin(crate::forge::issues::sync(
            &self.rest,
            GITEA_PAGING,
            repo,
            marker,
            state,
        ))
    }

    fn comments<'a>(
        &'a self,
        repo: &'a RepoSlug,
        pull: u64,
    ) -> BoxFuture<'a, Result<Vec<crate::forge::Comment>, ForgeError>> {
        Box::pin(comments(&self.rest, GITEA_PAGING, repo, pull))
    }
}
