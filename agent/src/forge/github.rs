//! GitHub's REST API: the same shapes as Gitea's for statuses, pulls and issue comments, with
//! `Bearer` auth, `per_page` paging and the versioned media type.

use futures::future::BoxFuture;

use super::gitea::{CommentBody, NewCommentBody, PullBody, StatusBody, find_marked, pulls_from};
use super::rest::{RestClient, segment};
use super::{CommentId, CommitStatus, Forge, ForgeError, PullRequest};
use crate::config::{RepoSlug, Secret};
use crate::source::git::CommitId;

/// GitHub rejects issue comments over 65,536 characters.
const COMMENT_LIMIT: usize = 65_536;
const PAGE_SIZE: usize = 100;

/// GitHub or GitHub Enterprise.
#[derive(Debug, Clone)]
pub struct GitHubForge {
    rest: RestClient,
}

impl GitHubForge {
    /// A client for the API at `api_root` (`https://api.github.com`, or
    /// `https://ghe.example.com/api/v3`).
    ///
    /// # Errors
    ///
    /// [`ForgeError::Unreachable`] when the HTTP client cannot be built.
    pub fn new(api_root: &str, token: Secret) -> Result<GitHubForge, ForgeError> {
        Ok(GitHubForge {
            rest: RestClient::new(
                api_root.trim_end_matches('/').to_owned(),
                RestClient::with_scheme("Bearer", &token),
                vec![
                    ("accept", "application/vnd.github+json"),
                    ("x-github-api-version", "2022-11-28"),
                ],
            )?,
        })
    }
}

impl Forge for GitHubForge {
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
                    "/repos/{}/{}/pulls?state=open&per_page={PAGE_SIZE}&page={page}",
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
                    "/repos/{owner}/{name}/issues/{pull}/comments?per_page={PAGE_SIZE}&page={page}"
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
