//! Drift issues on the forge: one open issue per drifted app, found again by the hidden marker
//! its body opens with, edited in place as the drift changes and closed when it is gone.
//! Gitea and GitHub share the REST shapes; GitLab has its own (`iid`, `description`,
//! `state_event`).

use serde::{Deserialize, Serialize};

use crate::config::RepoSlug;
use crate::forge::ForgeError;
use crate::forge::gitea::Paging;
use crate::forge::rest::{RestClient, segment};

/// What an issue should be: open with this title and body, or closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssueState<'a> {
    Open { title: &'a str, body: &'a str },
    Closed,
}

#[derive(Deserialize)]
struct IssueBody {
    number: u64,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Serialize)]
struct EditIssue<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a str>,
}

/// Gitea and GitHub: creates, edits or closes the open issue whose body opens with `marker`.
pub(crate) async fn sync(
    rest: &RestClient,
    paging: Paging,
    repo: &RepoSlug,
    marker: &str,
    state: IssueState<'_>,
) -> Result<(), ForgeError> {
    let (owner, name) = (segment(&repo.owner), segment(&repo.name));
    // GitHub lists pull requests among issues; only ours open with the marker.
    let open: Vec<IssueBody> = rest
        .get_all(paging.size, |page| {
            format!(
                "/repos/{owner}/{name}/issues?state=open&{}={}&page={page}",
                paging.param, paging.size
            )
        })
        .await?;
    let ours = open
        .iter()
        .filter(|issue| {
            issue
                .body
                .as_deref()
                .is_some_and(|body| body.starts_with(marker))
        })
        .map(|issue| issue.number)
        .min();
    let edit = |title, body, state| EditIssue { title, body, state };
    match (ours, state) {
        (Some(number), IssueState::Open { title, body }) => {
            let path = format!("/repos/{owner}/{name}/issues/{number}");
            let _: serde_json::Value = rest
                .send("PATCH", &path, Some(&edit(Some(title), Some(body), None)))
                .await?;
        }
        (None, IssueState::Open { title, body }) => {
            let path = format!("/repos/{owner}/{name}/issues");
            let _: serde_json::Value = rest
                .send("POST", &path, Some(&edit(Some(title), Some(body), None)))
                .await?;
        }
        (Some(number), IssueState::Closed) => {
            let path = format!("/repos/{owner}/{name}/issues/{number}");
            let _: serde_json::Value = rest
                .send("PATCH", &path, Some(&edit(None, None, Some("closed"))))
                .await?;
        }
        (None, IssueState::Closed) => {}
    }
    Ok(())
}

#[derive(Deserialize)]
struct GitLabIssue {
    iid: u64,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Serialize)]
struct GitLabEdit<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state_event: Option<&'a str>,
}

/// GitLab: the same over `/projects/:id/issues`.
pub(crate) async fn sync_gitlab(
    rest: &RestClient,
    page_size: usize,
    project: &str,
    marker: &str,
    state: IssueState<'_>,
) -> Result<(), ForgeError> {
    let issues_path = format!("/projects/{project}/issues");
    let open: Vec<GitLabIssue> = rest
        .get_all(page_size, |page| {
            format!("{issues_path}?state=opened&per_page={page_size}&page={page}")
        })
        .await?;
    let ours = open
        .iter()
        .filter(|issue| (issue.description.as_deref()).is_some_and(|body| body.starts_with(marker)))
        .map(|issue| issue.iid)
        .min();
    let edit = |title, description, state_event| GitLabEdit {
        title,
        description,
        state_event,
    };
    match (ours, state) {
        (Some(iid), IssueState::Open { title, body }) => {
            let path = format!("{issues_path}/{iid}");
            let _: serde_json::Value = rest
                .send("PUT", &path, Some(&edit(Some(title), Some(body), None)))
                .await?;
        }
        (None, IssueState::Open { title, body }) => {
            let _: serde_json::Value = rest
                .send(
                    "POST",
                    &issues_path,
                    Some(&edit(Some(title), Some(body), None)),
                )
                .await?;
        }
        (Some(iid), IssueState::Closed) => {
            let path = format!("{issues_path}/{iid}");
            let _: serde_json::Value = rest
                .send("PUT", &path, Some(&edit(None, None, Some("close"))))
                .await?;
        }
        (None, IssueState::Closed) => {}
    }
    Ok(())
}
