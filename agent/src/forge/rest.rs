//! The REST plumbing Gitea and GitHub share: JSON requests with a token header, paginated
//! lists, and errors that name the method and path but never a header.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ForgeError;
use crate::config::Secret;

/// A forge's API root plus its authorization header.
#[derive(Debug, Clone)]
pub(crate) struct RestClient {
    http: reqwest::Client,
    /// `https://gitea.example.com/api/v1`, `https://api.github.com`.
    api_root: String,
    /// The full `Authorization` header value (`token …`, `Bearer …`).
    authorization: Secret,
    extra_headers: Vec<(&'static str, &'static str)>,
}

/// Forge answers larger than this are cut off when read into an error message.
const ERROR_BODY_LIMIT: usize = 300;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl RestClient {
    pub(crate) fn new(
        api_root: String,
        authorization: Secret,
        extra_headers: Vec<(&'static str, &'static str)>,
    ) -> Result<RestClient, ForgeError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("driftless/", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|error| ForgeError::Unreachable {
                method: "-",
                path: api_root.clone(),
                message: format!("building the HTTP client: {error}"),
            })?;
        Ok(RestClient {
            http,
            api_root,
            authorization,
            extra_headers,
        })
    }

    pub(crate) fn with_scheme(scheme: &str, token: &Secret) -> Secret {
        Secret::new(format!("{scheme} {}", token.expose()))
    }

    /// Sends a request with an optional JSON body and reads a JSON answer.
    pub(crate) async fn send<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ForgeError> {
        let text = self.send_raw(method, path, body).await?;
        serde_json::from_str(&text).map_err(|error| ForgeError::BadResponse {
            method,
            path: path.to_owned(),
            message: error.to_string(),
        })
    }

    /// Every item of a paged list: GETs `path_of(1)`, `path_of(2)`, … until a page holds fewer
    /// than `page_size` items.
    pub(crate) async fn get_all<T: DeserializeOwned>(
        &self,
        page_size: usize,
        path_of: impl Fn(usize) -> String,
    ) -> Result<Vec<T>, ForgeError> {
        let mut items = Vec::new();
        for page in 1.. {
            let batch: Vec<T> = self.send::<(), _>("GET", &path_of(page), None).await?;
            let n_batch = batch.len();
            items.extend(batch);
            if n_batch < page_size {
                break;
            }
        }
        Ok(items)
    }

    /// Sends a request and returns the answer's body text.
    pub(crate) async fn send_raw<B: Serialize + ?Sized>(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&B>,
    ) -> Result<String, ForgeError> {
        let url = format!("{}{path}", self.api_root);
        let http_method = match method {
            "POST" => reqwest::Method::POST,
            "PATCH" => reqwest::Method::PATCH,
            "PUT" => reqwest::Method::PUT,
            "DELETE" => reqwest::Method::DELETE,
            _ => reqwest::Method::GET,
        };
        let mut request = self
            .http
            .request(http_method, &url)
            .header(reqwest::header::AUTHORIZATION, self.authorization.expose())
            .header(reqwest::header::ACCEPT, "application/json");
        for (name, value) in &self.extra_headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        tracing::trace!(method, path, "forge request");
        let response = request
            .send()
            .await
            .map_err(|error| ForgeError::Unreachable {
                method,
                path: path.to_owned(),
                // reqwest's Display names the URL (no credentials in it) and the cause.
                message: error_chain(&error),
            })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|error| ForgeError::Unreachable {
                method,
                path: path.to_owned(),
                message: error_chain(&error),
            })?;
        if !status.is_success() {
            return Err(ForgeError::RequestFailed {
                method,
                path: path.to_owned(),
                status: status.as_u16(),
                message: redact(
                    &super::truncate_chars(text.trim(), ERROR_BODY_LIMIT),
                    &self.authorization,
                ),
            });
        }
        Ok(text)
    }
}

/// Removes the token from a forge-provided message, in case a forge echoes it back.
fn redact(message: &str, authorization: &Secret) -> String {
    let token = authorization
        .expose()
        .split_once(' ')
        .map_or(authorization.expose(), |(_, token)| token);
    if token.is_empty() {
        message.to_owned()
    } else {
        message.replace(token, "***")
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Escapes one path segment (owner, repository name).
pub(crate) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_echoed_tokens() {
        let auth = RestClient::with_scheme("token", &Secret::new("abc123"));
        assert_eq!(redact("bad token abc123 here", &auth), "bad token *** here");
    }

    #[test]
    fn escapes_segments() {
        assert_eq!(segment("my org/x"), "my%20org%2Fx");
        assert_eq!(segment("demo-1.2_x"), "demo-1.2_x");
    }
}
