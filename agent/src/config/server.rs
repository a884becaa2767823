//! The HTTP server settings: `server` as written ([`ServerFile`]) and checked
//! ([`ServerConfig`]): listen address, external URL for status links, webhook secret.

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
}

/// The checked HTTP server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// The agent's public URL, without a trailing `/`.
    pub external_url: String,
    /// `None` disables the webhook endpoints.
    pub webhook_secret: Option<Secret>,
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
    ServerConfig {
        listen,
        external_url,
        webhook_secret,
    }
}
