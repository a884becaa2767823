//! The HTTP server settings: `server` as written ([`ServerFile`]) and checked
//! ([`ServerConfig`]): listen address, external URL for status links, webhook secret, and who
//! may read plan pages (an API token, or a header set by an authenticating proxy).

use std::net::SocketAddr;
use std::str::FromStr;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Checker, Secret, SecretRef};

const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The HTTP server as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerFile {
    pub listen: Option<Spanned<String>>,
    /// The URL the agent is reachable at, for commit status links to plan pages.
    pub external_url: Option<Spanned<String>>,
    pub webhook_secret: Option<Spanned<SecretRef>>,
    /// The bearer token plan pages ask for.
    pub api_token: Option<Spanned<SecretRef>>,
    /// A header an authenticating proxy sets (`X-Forwarded-User`): requests carrying it pass.
    pub trusted_header: Option<Spanned<String>>,
    /// The bearer token of operators: it reads what `apiToken` reads, and may also resume
    /// workflows and approve rollout batches in the web UI.
    pub operator_token: Option<Spanned<SecretRef>>,
    /// The header the proxy lists a user's groups in (`X-Forwarded-Groups`, comma-separated).
    pub groups_header: Option<Spanned<String>>,
    /// Trusted-header users in any of these groups are operators.
    pub operator_groups: Option<Spanned<Vec<String>>>,
}

/// The checked HTTP server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// The agent's public URL, without a trailing `/`.
    pub external_url: String,
    /// `None` disables the webhook endpoints.
    pub webhook_secret: Option<Secret>,
    /// Who may read plan pages; nobody when neither is set.
    pub api_token: Option<Secret>,
    pub trusted_header: Option<axum::http::HeaderName>,
    /// Who may also act in the web UI (resume, approve).
    pub operator_token: Option<Secret>,
    pub groups_header: Option<axum::http::HeaderName>,
    pub operator_groups: Vec<String>,
}

pub(super) fn check_server(checker: &mut Checker<'_>, server: Option<ServerFile>) -> ServerConfig {
    let default_listen: SocketAddr = DEFAULT_LISTEN
        .parse()
        .expect("the default listen address is a valid socket address");
    let Some(server) = server else {
        return ServerConfig {
            listen: default_listen,
            external_url: format!("http://{default_listen}"),
            webhook_secret: None,
            api_token: None,
            trusted_header: None,
            operator_token: None,
            groups_header: None,
            operator_groups: Vec::new(),
        };
    };
    let listen = match &server.listen {
        None => default_listen,
        Some(listen) => match SocketAddr::from_str(listen.value.trim()) {
            Ok(addr) => addr,
            Err(_) => {
                checker.problem(
                    "server.listen",
                    listen,
                    format!(
                        "invalid address {:?} (use host:port, e.g. 0.0.0.0:8080)",
                        listen.value
                    ),
                );
                default_listen
            }
        },
    };
    let external_url = match &server.external_url {
        None => format!("http://{listen}"),
        Some(url) => {
            let trimmed = url.value.trim().trim_end_matches('/');
            if !(trimmed.starts_with("https://") || trimmed.starts_with("http://")) {
                checker.problem(
                    "server.externalUrl",
                    url,
                    "must be an http:// or https:// URL",
                );
            }
            trimmed.to_owned()
        }
    };
    let webhook_secret = server
        .webhook_secret
        .as_ref()
        .and_then(|secret| checker.spanned_secret("server.webhookSecret", secret))
        .map(|secret| Secret::new(secret.expose().trim()));
    let api_token = server
        .api_token
        .as_ref()
        .and_then(|secret| checker.spanned_secret("server.apiToken", secret))
        .map(|secret| Secret::new(secret.expose().trim()));
    if api_token
        .as_ref()
        .is_some_and(|token| token.expose().len() < 16)
        && let Some(spanned) = &server.api_token
    {
        checker.problem(
            "server.apiToken",
            spanned,
            "is shorter than 16 characters; use a long random token (openssl rand -hex 32)",
        );
    }
    let trusted_header = server.trusted_header.as_ref().and_then(|name| {
        match axum::http::HeaderName::from_bytes(name.value.trim().as_bytes()) {
            Ok(header) if header != axum::http::header::AUTHORIZATION => Some(header),
            _ => {
                checker.problem(
                    "server.trustedHeader",
                    name,
                    "must be an HTTP header name other than Authorization (e.g. X-Forwarded-User)",
                );
                None
            }
        }
    });
    let (operator_token, groups_header, operator_groups) = check_operators(checker, &server);
    ServerConfig {
        listen,
        external_url,
        webhook_secret,
        api_token,
        trusted_header,
        operator_token,
        groups_header,
        operator_groups,
    }
}

/// `operatorToken`, `groupsHeader` and `operatorGroups`: who may act in the web UI.
fn check_operators(
    checker: &mut Checker<'_>,
    server: &ServerFile,
) -> (Option<Secret>, Option<axum::http::HeaderName>, Vec<String>) {
    let operator_token = server
        .operator_token
        .as_ref()
        .and_then(|secret| checker.spanned_secret("server.operatorToken", secret))
        .map(|secret| Secret::new(secret.expose().trim()));
    if operator_token
        .as_ref()
        .is_some_and(|token| token.expose().len() < 16)
        && let Some(spanned) = &server.operator_token
    {
        checker.problem(
            "server.operatorToken",
            spanned,
            "is shorter than 16 characters; use a long random token (openssl rand -hex 32)",
        );
    }
    let groups_header = server.groups_header.as_ref().and_then(|name| {
        match axum::http::HeaderName::from_bytes(name.value.trim().as_bytes()) {
            Ok(header) if header != axum::http::header::AUTHORIZATION => Some(header),
            _ => {
                checker.problem(
                    "server.groupsHeader",
                    name,
                    "must be an HTTP header name other than Authorization (e.g. X-Forwarded-Groups)",
                );
                None
            }
        }
    });
    let operator_groups: Vec<String> = server
        .operator_groups
        .as_ref()
        .map(|groups| {
            groups
                .value
                .iter()
                .map(|group| group.trim().to_owned())
                .collect()
        })
        .unwrap_or_default();
    if let Some(groups) = &server.operator_groups
        && (server.groups_header.is_none() || server.trusted_header.is_none())
    {
        checker.problem(
            "server.operatorGroups",
            groups,
            "needs server.trustedHeader and server.groupsHeader (the proxy's user and groups headers)",
        );
    }
    (operator_token, groups_header, operator_groups)
}
