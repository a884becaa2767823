//! The GitLab client against a local HTTP server standing in for GitLab: each test scripts
//! GitLab's answers and then checks the exact requests the client made (method, path and
//! query, `Authorization` header, JSON body), following GitLab's REST API documentation for
//! commit statuses, merge requests and notes.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::*;

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    method: String,
    path: String,
    authorization: String,
    body: Value,
}

/// The scripted server: answers are matched by `METHOD path` (with query), in order.
#[derive(Clone, Default)]
struct Mock {
    answers: Arc<Mutex<Vec<(String, u16, Value)>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn handle(State(mock): State<Mock>, request: Request) -> impl IntoResponse {
    let method = request.method().to_string();
    let path = request
        .uri()
        .path_and_query()
        .map(|pq| pq.as_str().to_owned())
        .unwrap_or_default();
    let authorization = request
        .headers()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let bytes = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    mock.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        path: path.clone(),
        authorization,
        body,
    });
    let key = format!("{method} {path}");
    let mut answers = mock.answers.lock().unwrap();
    match answers.iter().position(|(route, _, _)| *route == key) {
        Some(idx) => {
            let (_, status, body) = answers.remove(idx);
            (StatusCode::from_u16(status).unwrap(), body.to_string()).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            format!("no scripted answer for {key}"),
        )
            .into_response(),
    }
}

async fn start(answers: Vec<(&str, u16, Value)>) -> (GitLabForge, Mock) {
    let mock = Mock::default();
    *mock.answers.lock().unwrap() = answers
        .into_iter()
        .map(|(route, status, body)| (route.to_owned(), status, body))
        .collect();
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(mock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let forge = GitLabForge::new(&base, Secret::new("glpat-secret-token")).unwrap();
    (forge, mock)
}

fn repo() -> RepoSlug {
    RepoSlug::parse("platform/apps").unwrap()
}

fn sha(digit: char) -> CommitId {
    CommitId::parse(&digit.to_string().repeat(40)).unwrap()
}

fn seen(method: &str, path: &str, body: Value) -> Seen {
    Seen {
        method: method.to_owned(),
        path: path.to_owned(),
        authorization: "Bearer glpat-secret-token".to_owned(),
        body,
    }
}

#[tokio::test]
async fn statuses_use_name_and_gitlab_states() {
    let commit = sha('a');
    let route = format!("POST /api/v4/projects/platform%2Fapps/statuses/{commit}");
    let (forge, mock) = start(vec![
        (route.as_str(), 201, json!({"id": 1})),
        (route.as_str(), 201, json!({"id": 2})),
    ])
    .await;
    let pending = CommitStatus::new(
        "driftless/team/web",
        StatusState::Pending,
        "planning",
        Some("http://agent/plans/x".into()),
    );
    forge.set_status(&repo(), &commit, &pending).await.unwrap();
    let error = CommitStatus::new("driftless", StatusState::Error, "cluster down", None);
    forge.set_status(&repo(), &commit, &error).await.unwrap();
    let path = format!("/api/v4/projects/platform%2Fapps/statuses/{commit}");
    assert_eq!(
        *mock.seen.lock().unwrap(),
        vec![
            seen(
                "POST",
                &path,
                json!({"state": "pending", "name": "driftless/team/web", "description": "planning", "target_url": "http://agent/plans/x"})
            ),
            seen(
                "POST",
                &path,
                json!({"state": "failed", "name": "driftless", "description": "cluster down"})
            ),
        ]
    );
}

#[tokio::test]
async fn open_merge_requests_are_paged_and_sorted() {
    let first_page: Vec<Value> = (0..100)
        .map(|idx| json!({"iid": 200 - idx, "title": format!("mr {idx}"), "sha": sha('b').to_string(), "target_branch": "main", "source_branch": "x"}))
        .collect();
    let (forge, mock) = start(vec![
        (
            "GET /api/v4/projects/platform%2Fapps/merge_requests?state=opened&per_page=100&page=1",
            200,
            Value::Array(first_page),
        ),
        (
            "GET /api/v4/projects/platform%2Fapps/merge_requests?state=opened&per_page=100&page=2",
            200,
            json!([{"iid": 7, "title": "seven", "sha": sha('c').to_string(), "target_branch": "release", "source_branch": "y", "author": {"username": "alice"}, "source_project_id": 4, "target_project_id": 4}]),
        ),
    ])
    .await;
    let pulls = forge.open_pulls(&repo()).await.unwrap();
    assert_eq!(pulls.len(), 101);
    assert_eq!(
        pulls[0],
        PullRequest {
            number: 7,
            title: "seven".into(),
            head_commit: sha('c'),
            base_branch: "release".into(),
            author: "alice".into(),
            from_fork: false,
        }
    );
    assert_eq!(pulls[100].number, 200);
    let paths: Vec<String> = mock
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
}

#[tokio::test]
async fn a_bad_head_sha_is_a_bad_response() {
    let (forge, _mock) = start(vec![(
        "GET /api/v4/projects/platform%2Fapps/merge_requests?state=opened&per_page=100&page=1",
        200,
        json!([{"iid": 1, "sha": "not-a-sha", "target_branch": "main"}]),
    )])
    .await;
    let error = forge.open_pulls(&repo()).await.unwrap_err();
    assert!(matches!(error, ForgeError::BadResponse { .. }), "{error}");
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn the_plan_note_is_created_then_edited_in_place() {
    let marker = "<!-- driftless:plan source=platform -->";
    let notes = "/api/v4/projects/platform%2Fapps/merge_requests/5/notes";
    let list = format!("GET {notes}?per_page=100&page=1");
    let (forge, mock) = start(vec![
        // No note of ours yet: one from a person only.
        (list.as_str(), 200, json!([{"id": 10, "body": "looks good"}])),
        (&format!("POST {notes}"), 201, json!({"id": 11, "body": "x"})),
        // GitLab lists newest first; a later quote of our marker must not be edited.
        (
            list.as_str(),
            200,
            json!([{"id": 12, "body": format!("{marker} quoted")}, {"id": 11, "body": format!("{marker}\nold")}, {"id": 10, "body": "looks good"}]),
        ),
        (&format!("PUT {notes}/11"), 200, json!({"id": 11, "body": "x"})),
    ])
    .await;
    let first_body = format!("{marker}\nplan one");
    let created = forge
        .upsert_comment(&repo(), 5, marker, &first_body)
        .await
        .unwrap();
    assert_eq!(created, CommentId(11));
    let second_body = format!("{marker}\nplan two");
    let edited = forge
        .upsert_comment(&repo(), 5, marker, &second_body)
        .await
        .unwrap();
    assert_eq!(edited, CommentId(11));
    let list_path = format!("{notes}?per_page=100&page=1");
    assert_eq!(
        *mock.seen.lock().unwrap(),
        vec![
            seen("GET", &list_path, Value::Null),
            seen("POST", notes, json!({"body": first_body})),
            seen("GET", &list_path, Value::Null),
            seen("PUT", &format!("{notes}/11"), json!({"body": second_body})),
        ]
    );
}

#[tokio::test]
async fn errors_name_the_call_and_never_the_token() {
    let commit = sha('d');
    let route = format!("POST /api/v4/projects/platform%2Fapps/statuses/{commit}");
    let (forge, _mock) = start(vec![(
        route.as_str(),
        401,
        json!({"message": "401 Unauthorized: token glpat-secret-token is revoked"}),
    )])
    .await;
    let status = CommitStatus::new("driftless", StatusState::Success, "ok", None);
    let error = forge
        .set_status(&repo(), &commit, &status)
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("POST /projects/platform%2Fapps/statuses/"),
        "{text}"
    );
    assert!(text.contains("HTTP 401"), "{text}");
    assert!(!text.contains("glpat-secret-token"), "{text}");
    assert!(!error.is_retryable());
}
