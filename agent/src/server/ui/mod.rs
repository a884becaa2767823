//! The web UI under `/ui`: the apps list, one page per app, and a server-sent event stream
//! that makes open pages refresh themselves. Pages are rendered on the server ([`page`]) from
//! the [`FleetState`] the agent loop keeps ([`record`]); the only script (`assets/ui.js`)
//! listens to the stream, swaps the page's live region and adds keyboard shortcuts. Assets
//! are embedded in the binary.
//!
//! Authentication is the plan pages' ([`super::auth`]): a bearer token, the trusted header of an
//! authenticating proxy, or the session cookie `/ui/login` sets. Resuming a workflow (or
//! approving a rollout batch) takes the operator role; the form posts are refused across
//! sites (`Sec-Fetch-Site`, `Origin`) and the cookie is `SameSite=Strict`.

pub mod live_tree;
pub mod page;
pub mod record;
pub mod state;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use analyzer::AppRef;
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::Stream;

use super::ServerState;
use super::auth::{Refusal, Role, SESSION_COOKIE};
use crate::cluster::Cluster;
use page::Viewer;
pub use state::{AppFilter, FleetState};

/// Rows per page of the apps list.
pub const PAGE_SIZE: usize = 50;

const CSS: &str = include_str!("assets/ui.css");
const JS: &str = include_str!("assets/ui.js");

/// Pages may load only their own stylesheet and script, and talk only to the agent.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; script-src 'self'; \
     connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the UI's handlers share, besides the server's state.
#[derive(Clone, Default)]
pub struct UiState {
    pub fleet: FleetState,
    /// Where workflow states are resumed; `None` serves the pages without actions.
    pub cluster: Option<Arc<Cluster>>,
    /// The namespace of trackers and workflow states.
    pub tracker_namespace: String,
    /// The session cookie is sent over https only (the agent's external URL is https).
    pub secure_cookies: bool,
    /// Sources whose deployed revision should be deployed again (a workflow was resumed).
    redeploy: Arc<Mutex<BTreeSet<String>>>,
}

impl std::fmt::Debug for UiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiState")
            .field("fleet", &self.fleet)
            .field("tracker_namespace", &self.tracker_namespace)
            .finish_non_exhaustive()
    }
}

impl UiState {
    /// The UI of `fleet`, resuming workflows in `cluster`; cookies are https-only when the
    /// agent's `external_url` is https.
    pub fn new(
        fleet: FleetState,
        cluster: Option<Arc<Cluster>>,
        tracker_namespace: &str,
        external_url: &str,
    ) -> Self {
        UiState {
            fleet,
            cluster,
            tracker_namespace: tracker_namespace.to_owned(),
            secure_cookies: external_url.starts_with("https://"),
            redeploy: Arc::default(),
        }
    }

    /// Whether `source` was asked to deploy its revision again; clears the request.
    pub fn take_redeploy(&self, source: &str) -> bool {
        self.redeploy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(source)
    }

    fn request_redeploy(&self, source: &str) {
        self.redeploy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(source.to_owned());
    }
}

/// The UI's routes, to merge into the server's router.
pub fn routes(state: &ServerState) -> Router<ServerState> {
    let protected = Router::new()
        .route("/ui/apps", get(apps))
        .route("/ui/apps/{namespace}/{name}", get(app))
        .route("/ui/apps/{namespace}/{name}/resume", post(resume))
        .route("/ui/events", get(events))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_viewer,
        ));
    Router::new()
        .route("/ui", get(|| async { Redirect::to("/ui/apps") }))
        .route("/ui/", get(|| async { Redirect::to("/ui/apps") }))
        .route(
            "/ui/assets/ui.css",
            get(|| async { asset("text/css", CSS) }),
        )
        .route(
            "/ui/assets/ui.js",
            get(|| async { asset("text/javascript", JS) }),
        )
        .route("/ui/login", get(login_form).post(login))
        .route("/ui/logout", post(logout))
        .merge(protected)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

fn html(status: StatusCode, document: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        document,
    )
        .into_response()
}

/// Lets requests of a viewer or operator through (with their [`Role`] in the extensions);
/// sends browsers without credentials to the sign-in page.
async fn require_viewer(
    State(state): State<ServerState>,
    mut request: Request,
    next: Next,
) -> Response {
    match state.auth.role(request.headers()) {
        Ok(role) => {
            request.extensions_mut().insert(role);
            next.run(request).await
        }
        Err(Refusal::NotConfigured) => html(
            StatusCode::FORBIDDEN,
            message_page(
                "The UI is closed",
                "Set server.apiToken (or server.trustedHeader behind an authenticating proxy) \
                 in driftless.yaml to open it.",
            ),
        ),
        Err(Refusal::Unauthenticated) => {
            let next = request
                .uri()
                .path_and_query()
                .map_or("/ui/apps", |path| path.as_str());
            if request.method() == axum::http::Method::GET && next != "/ui/events" {
                Redirect::to(&format!("/ui/login?next={}", encode_query(next))).into_response()
            } else {
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "credentials required: sign in at /ui/login or send `Authorization: Bearer <token>`\n",
                )
                    .into_response()
            }
        }
    }
}

fn viewer_of(role: Role) -> Viewer {
    match role {
        Role::Viewer => Viewer::ReadOnly,
        Role::Operator => Viewer::Operator,
    }
}

/// The apps list's query.
#[derive(Debug, Default, serde::Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub q: String,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub health: String,
    #[serde(default)]
    pub state: String,
    /// 1-based.
    #[serde(default)]
    pub page: Option<usize>,
}

impl ListQuery {
    /// The filter and the 0-based page.
    pub fn filter(&self) -> (AppFilter, usize) {
        let filter = AppFilter {
            source: self.source.trim().to_owned(),
            namespace: self.namespace.trim().to_owned(),
            health: self.health.trim().to_owned(),
            sync: state::SyncState::from_slug(self.state.trim()),
            search: self.q.trim().to_owned(),
        };
        (filter, self.page.unwrap_or(1).saturating_sub(1))
    }
}

/// The whole apps list document for `query`: what `GET /ui/apps` serves.
pub fn render_apps(fleet: &FleetState, query: &ListQuery, viewer: Viewer) -> String {
    let (filter, page_index) = query.filter();
    let page = fleet.page(&filter, page_index, PAGE_SIZE);
    page::layout(
        "Apps",
        viewer,
        &page::apps_page(&filter, &page, page_index, PAGE_SIZE),
    )
}

async fn apps(
    State(state): State<ServerState>,
    axum::Extension(role): axum::Extension<Role>,
    Query(query): Query<ListQuery>,
) -> Response {
    html(
        StatusCode::OK,
        render_apps(&state.ui.fleet, &query, viewer_of(role)),
    )
}

#[derive(Debug, Default, serde::Deserialize)]
struct AppQuery {
    #[serde(default)]
    done: String,
}

async fn app(
    State(state): State<ServerState>,
    axum::Extension(role): axum::Extension<Role>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<AppQuery>,
) -> Response {
    let notice = match query.done.as_str() {
        "resumed" => Some("Resumed: the agent continues the workflow now."),
        _ => None,
    };
    app_response(
        &state,
        role,
        &AppRef { namespace, name },
        StatusCode::OK,
        notice,
    )
    .await
}

async fn app_response(
    state: &ServerState,
    role: Role,
    app: &AppRef,
    status: StatusCode,
    notice: Option<&str>,
) -> Response {
    let Some(view) = state.ui.fleet.app(app) else {
        return html(
            StatusCode::NOT_FOUND,
            message_page(
                "No such app",
                &format!("The agent has not planned an app {app} (yet)."),
            ),
        );
    };
    let tree = match &state.ui.cluster {
        Some(cluster) => live_tree::read(cluster, &view.objects).await,
        None => Err("No cluster connected: live objects are not shown.".to_owned()),
    };
    let links = state.ui.fleet.links(&view.source);
    let body = page::app_page(&page::AppPageInput {
        view: &view,
        links: links.as_ref(),
        tree,
        viewer: viewer_of(role),
        notice,
    });
    html(
        status,
        page::layout(&app.to_string(), viewer_of(role), &body),
    )
}

#[derive(Debug, serde::Deserialize)]
struct ResumeForm {
    step: String,
}

async fn resume(
    State(state): State<ServerState>,
    axum::Extension(role): axum::Extension<Role>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<ResumeForm>,
) -> Response {
    let app = AppRef { namespace, name };
    if !same_site(&headers) {
        return (StatusCode::FORBIDDEN, "cross-site form posts are refused\n").into_response();
    }
    if role != Role::Operator {
        tracing::warn!(app.namespace = %app.namespace, app.name = %app.name, "resume from the UI refused: not an operator");
        return app_response(
            &state,
            role,
            &app,
            StatusCode::FORBIDDEN,
            Some("Refused: only operators may resume (server.operatorToken, or server.operatorGroups behind a proxy)."),
        )
        .await;
    }
    match resume_workflow(&state, &app, &form.step).await {
        Ok(resumed) => {
            tracing::info!(app.namespace = %app.namespace, app.name = %app.name, steps = ?resumed, "resumed from the web UI");
            Redirect::to(&format!("{}?done=resumed", page::app_url(&app))).into_response()
        }
        Err(message) => {
            app_response(&state, role, &app, StatusCode::CONFLICT, Some(&message)).await
        }
    }
}

/// Marks `step` resumed in the stored workflow state and wakes the app's source to deploy its
/// revision again, which continues the workflow.
async fn resume_workflow(
    state: &ServerState,
    app: &AppRef,
    step: &str,
) -> Result<Vec<String>, String> {
    let Some(cluster) = &state.ui.cluster else {
        return Err("No cluster connected: nothing can be resumed.".to_owned());
    };
    let Some(view) = state.ui.fleet.app(app) else {
        return Err(format!("No app {app}."));
    };
    let store = crate::workflow::WorkflowStore::new(cluster, &state.ui.tracker_namespace);
    let mut stored = store
        .read(app)
        .await
        .map_err(|error| format!("Reading the workflow state failed: {error}. Try again."))?
        .ok_or_else(|| format!("App {app} has no stored workflow state."))?;
    let resumed = crate::workflow::resume(&mut stored.state, Some(step)).map_err(|error| {
        format!("Nothing resumed: {error}. Reload the page to see the workflow now.")
    })?;
    store.write(app, &mut stored).await.map_err(|error| {
        format!("Writing the workflow state failed: {error}. Reload and try again.")
    })?;
    state.ui.request_redeploy(&view.source);
    for trigger in state.triggers.iter() {
        if trigger.source == view.source {
            trigger.notify.notify_one();
        }
    }
    let workflow = stored.state;
    state
        .ui
        .fleet
        .update(app, &view.source, |view| view.workflow = Some(workflow));
    Ok(resumed)
}

/// Refuses form posts another site makes the browser send: browsers say where a request
/// comes from in `Sec-Fetch-Site`, and older ones in `Origin`.
fn same_site(headers: &HeaderMap) -> bool {
    let fetch_site = headers
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok());
    if let Some(site) = fetch_site {
        return matches!(site, "same-origin" | "none");
    }
    match (
        headers
            .get(header::ORIGIN)
            .and_then(|value| value.to_str().ok()),
        headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok()),
    ) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, origin_host)| origin_host == host),
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// `change` events whenever the fleet changes, at most four a second.
async fn events(
    State(state): State<ServerState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receiver = state.ui.fleet.subscribe();
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.changed().await.ok()?;
        // Coalesces a deploy's many updates into one refresh.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let version = *receiver.borrow_and_update();
        Some((
            Ok(Event::default().event("change").data(version.to_string())),
            receiver,
        ))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

#[derive(Debug, Default, serde::Deserialize)]
struct LoginQuery {
    #[serde(default)]
    next: String,
}

async fn login_form(Query(query): Query<LoginQuery>) -> Response {
    html(StatusCode::OK, login_page(&query.next, None))
}

#[derive(Debug, serde::Deserialize)]
struct LoginForm {
    token: String,
    #[serde(default)]
    next: String,
}

async fn login(
    State(state): State<ServerState>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<LoginForm>,
) -> Response {
    if !same_site(&headers) {
        return (StatusCode::FORBIDDEN, "cross-site form posts are refused\n").into_response();
    }
    let Some((session, role)) = state.auth.session_for(&form.token) else {
        tracing::warn!("UI sign-in refused: unknown token");
        return html(
            StatusCode::UNAUTHORIZED,
            login_page(&form.next, Some("That token is not one of this agent's.")),
        );
    };
    tracing::info!(?role, "UI sign-in");
    let secure = if state.ui.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!("{SESSION_COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict{secure}");
    let mut response = Redirect::to(safe_next(&form.next)).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn logout() -> Response {
    let mut response = Redirect::to("/ui/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "driftless_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    response
}

/// Only paths of this agent's UI: never a redirect to another site.
fn safe_next(next: &str) -> &str {
    if next.starts_with("/ui/") && !next.starts_with("//") && !next.contains('\\') {
        next
    } else {
        "/ui/apps"
    }
}

fn login_page(next: &str, error: Option<&str>) -> String {
    let esc = super::plan_page::escape;
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Sign in · driftless</title><link rel=\"stylesheet\" href=\"/ui/assets/ui.css\"></head>\
         <body><main id=\"main\" class=\"login\"><h1>driftless</h1>{error}\
         <form method=\"post\" action=\"/ui/login\"><label>Token \
         <input type=\"password\" name=\"token\" id=\"token\" autocomplete=\"current-password\" required autofocus></label>\
         <input type=\"hidden\" name=\"next\" value=\"{next}\">\
         <button type=\"submit\">Sign in</button></form>\
         <p>Use <code>server.apiToken</code> to read, or <code>server.operatorToken</code> to also resume \
         and approve. Behind an authenticating proxy no sign-in is needed.</p></main></body></html>\n",
        error = error.map_or_else(String::new, |error| format!(
            "<p class=\"notice\" role=\"alert\">{}</p>",
            esc(error)
        )),
        next = esc(safe_next(next)),
    )
}

fn message_page(title: &str, message: &str) -> String {
    let esc = super::plan_page::escape;
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · driftless</title><link rel=\"stylesheet\" href=\"/ui/assets/ui.css\"></head>\
         <body><main id=\"main\"><h1>{title}</h1><p>{message}</p><p><a href=\"/ui/apps\">All apps</a></p></main></body></html>\n",
        title = esc(title),
        message = esc(message)
    )
}

fn encode_query(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
