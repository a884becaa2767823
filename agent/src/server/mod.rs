//! The agent's HTTP server (axum): `/healthz`, `/readyz`, `/metrics`, the webhook endpoints
//! `/webhooks/gitea`, `/webhooks/github` and `/webhooks/gitlab`, the read-only plan pages
//! `/plans/<commit>`, and the web UI under `/ui` ([`ui`]).
//!
//! The server holds no agent logic. A verified webhook only wakes the matching source's poller
//! through its [`SourceTrigger`]; plan pages are read from the [`PlanStore`] the loop fills.
//! Webhooks are refused (404) when no secret is configured: an unauthenticated endpoint that
//! makes the agent fetch on demand is an easy way to exhaust a remote's rate limit. Plan pages
//! need credentials ([`auth`]); `/healthz`, `/readyz` and `/metrics` stay open. Every request is
//! bounded in time ([`REQUEST_TIMEOUT`]) and body size ([`BODY_LIMIT`]).

pub mod auth;
pub mod plan_page;
pub mod readiness;
pub mod ui;
pub mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::Notify;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::config::{RepoSlug, Secret};
use crate::metrics::{ErrorKind, Metrics};
pub use auth::ApiAuth;
pub use plan_page::{PageApp, PlanPage, PlanStore};
pub use readiness::SourceReadiness;
use webhook::WebhookFlavor;

/// Wakes one source's poller.
#[derive(Debug, Clone)]
pub struct SourceTrigger {
    pub source: String,
    pub url: String,
    pub forge_repo: Option<RepoSlug>,
    pub notify: Arc<Notify>,
}

/// Everything the handlers read.
#[derive(Debug, Clone)]
pub struct ServerState {
    pub metrics: Arc<Metrics>,
    /// Which sources have fetched, and which cannot.
    pub readiness: Arc<SourceReadiness>,
    pub webhook_secret: Option<Secret>,
    pub triggers: Arc<Vec<SourceTrigger>>,
    pub plans: PlanStore,
    /// The replicas sharing the apps, for `/shards` (404 without sharding).
    pub shards: Option<crate::shard::Shards>,
    /// Who may read plan pages and the UI, and who may act in it.
    pub auth: ApiAuth,
    /// The web UI's fleet state and actions.
    pub ui: ui::UiState,
}

/// How long one request may take, body included: a client that sends slowly holds a
/// connection and a task no longer than this.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The largest request body accepted: webhook payloads of big pushes stay well under it.
pub const BODY_LIMIT: usize = 4 << 20;

/// Starting the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("binding {addr}")]
    BindFailed {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("serving HTTP")]
    ServeFailed(#[source] std::io::Error),
}

/// The router with every endpoint.
pub fn router(state: ServerState) -> Router {
    let protected = Router::new()
        .route("/plans/{commit}", get(plan))
        .route("/shards", get(shards_page))
        .route_layer(axum::middleware::from_fn_with_state(
            state.auth.clone(),
            auth::require,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/webhooks/gitea", post(gitea_webhook))
        .route("/webhooks/github", post(github_webhook))
        .route("/webhooks/gitlab", post(gitlab_webhook))
        .merge(protected)
        .merge(ui::routes(&state))
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .with_state(state)
}

/// Binds `addr` (port 0 picks a free port).
///
/// # Errors
///
/// [`ServerError::BindFailed`] when the address is taken or not local.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::BindFailed { addr, source })
}

/// Serves until `shutdown` resolves, then finishes in-flight requests.
///
/// # Errors
///
/// [`ServerError::ServeFailed`] when accepting connections fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::ServeFailed)
}

async fn shards_page(State(state): State<ServerState>) -> Response {
    match &state.shards {
        Some(shards) => crate::shard::page::render(shards).into_response(),
        None => (StatusCode::NOT_FOUND, "sharding is not configured\n").into_response(),
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<ServerState>) -> Response {
    let (ready, text) = state.readiness.report();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, text).into_response()
}

async fn metrics(State(state): State<ServerState>) -> Response {
    state.metrics.set_app_states(&state.ui.fleet);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

async fn plan(State(state): State<ServerState>, Path(commit): Path<String>) -> Response {
    match state.plans.get(&commit) {
        Some(page) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                // The page shows repository content; forbid scripts outright.
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'",
                ),
            ],
            plan_page::render_html(&page),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no plan for this commit\n").into_response(),
    }
}

async fn gitea_webhook(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle_webhook(&state, WebhookFlavor::Gitea, &headers, &body)
}

async fn github_webhook(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle_webhook(&state, WebhookFlavor::GitHub, &headers, &body)
}

async fn gitlab_webhook(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle_webhook(&state, WebhookFlavor::GitLab, &headers, &body)
}

fn handle_webhook(
    state: &ServerState,
    flavor: WebhookFlavor,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let Some(secret) = &state.webhook_secret else {
        return (
            StatusCode::NOT_FOUND,
            "webhooks are disabled (no server.webhookSecret)\n",
        )
            .into_response();
    };
    let signature = headers
        .get(flavor.signature_header())
        .and_then(|value| value.to_str().ok());
    if let Err(error) = webhook::verify_signature(flavor, secret, signature, body) {
        state.metrics.record_error(ErrorKind::Webhook);
        tracing::warn!(error = %error, ?flavor, "webhook rejected");
        return (StatusCode::UNAUTHORIZED, format!("{error}\n")).into_response();
    }
    let event = headers
        .get(flavor.event_header())
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    if event == "ping" {
        return (StatusCode::OK, "pong\n").into_response();
    }
    let repository = match webhook::parse_repository(body) {
        Ok(repository) => repository,
        Err(error) => {
            state.metrics.record_error(ErrorKind::Webhook);
            return (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response();
        }
    };
    let mut woken = Vec::new();
    for trigger in state.triggers.iter() {
        if webhook::matches_source(&repository, &trigger.url, trigger.forge_repo.as_ref()) {
            trigger.notify.notify_one();
            woken.push(trigger.source.as_str());
        }
    }
    if woken.is_empty() {
        tracing::info!(event, "webhook for a repository no source tracks");
        return (StatusCode::NOT_FOUND, "no source tracks this repository\n").into_response();
    }
    tracing::info!(event, sources = ?woken, "webhook: polling now");
    (
        StatusCode::ACCEPTED,
        format!("polling {}\n", woken.join(", ")),
    )
        .into_response()
}

#[cfg(test)]
mod tests;
