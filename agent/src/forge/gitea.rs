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
    rest: RestClient,
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
}

#[derive(Deserialize)]
pub(crate) struct BranchBody {
    #[serde(rename = "ref", default)]
    pub(crate) branch: String,
    pub(crate) sha: String,
}

#[derive(Deserialize)]
pub(crate) struct CommentBody {
    pub(crate) id: u64,
    #[serde(default)]
    pub(crate) body: String,
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
            Ok(PullRequest {
                number: pull.number,
                title: pull.title,
                head_commit,
                base_branch: pull.base.branch,
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

impl Forge for GiteaForge {
    fn set_status<'a>(
        &'a self,
        repo: &'a RepoSlug,
        commit: &'a CommitId,
        status: &'a CommitStatus,
    ) -> BoxFuture<'a, Result<(), ForgeError>> {
        Box::pin(async move {
            let path = format!(
                "/repos/{}/{}/statuses/{}",
                segment(&repo.owner),
                segment(&repo.name),
                commit
            );
            self.rest
                .send_raw("POST", &path, Some(&StatusBody::from_status(status)))
                .await
                .map(drop)
        })
    }

    fn open_pulls<'a>(
        &'a self,
        repo: &'a RepoSlug,
    ) -> BoxFuture<'a, Result<Vec<PullRequest>, ForgeError>> {
        Box::pin(async move {
            let mut pulls = Vec::new();
            for page in 1.. {
                let path = format!(
                    "/repos/{}/{}/pulls?state=open&limit={PAGE_SIZE}&page={page}",
                    segment(&repo.owner),
                    segment(&repo.name)
                );
                let bodies: Vec<PullBody> = self.rest.send::<(), _>("GET", &path, None).await?;
                let n_bodies = bodies.len();
                pulls.extend(pulls_from(bodies, &path)?);
                if n_bodies < PAGE_SIZE {
                    break;
                }
            }
            pulls.sort();
            Ok(pulls)
        })
    }

    fn upsert_comment<'a>(
        &'a self,
        repo: &'a RepoSlug,
        pull: u64,
        marker: &'a str,
        body: &'a str,
    ) -> BoxFuture<'a, Result<CommentId, ForgeError>> {
        Box::pin(async move {
            let (owner, name) = (segment(&repo.owner), segment(&repo.name));
            let mut comments = Vec::new();
            for page in 1.. {
                let path = format!(
                    "/repos/{owner}/{name}/issues/{pull}/comments?limit={PAGE_SIZE}&page={page}"
                );
                let bodies: Vec<CommentBody> = self.rest.send::<(), _>("GET", &path, None).await?;
                let n_bodies = bodies.len();
                comments.extend(bodies);
                if n_bodies < PAGE_SIZE {
                    break;
                }
            }
            let new_body = NewCommentBody { body };
            match find_marked(&comments, marker) {
                Some(CommentId(id)) => {
                    let path = format!("/repos/{owner}/{name}/issues/comments/{id}");
                    let _: CommentBody = self.rest.send("PATCH", &path, Some(&new_body)).await?;
                    Ok(CommentId(id))
                }
                None => {
                    let path = format!("/repos/{owner}/{name}/issues/{pull}/comments");
                    let created: CommentBody =
                        self.rest.send("POST", &path, Some(&new_body)).await?;
                    Ok(CommentId(created.id))
                }
            }
        })
    }

    fn comment_limit(&self) -> usize {
        COMMENT_LIMIT
    }
}
