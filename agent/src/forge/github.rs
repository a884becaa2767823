//! GitHub's REST API: the same shapes as Gitea's for statuses, pulls and issue comments, with
//! `Bearer` auth, `per_page` paging and the versioned media type.

use futures::future::BoxFuture;

use super::gitea::{self, Paging};
use super::rest::RestClient;
use super::{CommentId, CommitStatus, Forge, ForgeError, PullRequest};
use crate::config::{RepoSlug, Secret};
use crate::source::git::CommitId;

/// GitHub rejects issue comments over 65,536 characters.
const COMMENT_LIMIT: usize = 65_536;
const PAGE_SIZE: usize = 100;

/// GitHub or GitHub Enterprise.
#[derive(Debug, Clone)]
pub struct GitHubForge {
    pub(super) rest: RestClient,
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

const GITHUB_PAGING: Paging = Paging {
    param: "per_page",
    size: PAGE_SIZE,
};

impl Forge for GitHubForge {
    fn set_status<'a>(
        &'a self,
        repo: &'a RepoSlug,
        commit: &'a CommitId,
        status: &'a CommitStatus,
    ) -> BoxFuture<'a, Result<(), ForgeError>> {
        Box::pin(gitea::set_status(&self.rest, repo, commit, status))
    }

    fn open_pulls<'a>(
        &'a self,
        repo: &'a RepoSlug,
    ) -> BoxFuture<'a, Result<Vec<PullRequest>, ForgeError>> {
        Box::pin(gitea::open_pulls(&self.rest, GITHUB_PAGING, repo))
    }

    fn upsert_comment<'a>(
        &'a self,
        repo: &'a RepoSlug,
        pull: u64,
        marker: &'a str,
        body: &'a str,
    ) -> BoxFuture<'a, Result<CommentId, ForgeError>> {
        Box::pin(gitea::upsert_comment(
            &self.rest,
            GITHUB_PAGING,
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
            GITHUB_PAGING,
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
        Box::pin(gitea::comments(&self.rest, GITHUB_PAGING, repo, pull))
    }
}
