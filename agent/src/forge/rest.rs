//! The REST plumbing Gitea and GitHub share: JSON requests with a token header, paginated
//! lists, and errors that name the method and path but never a header.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// A GitHub App installation whose tokens replace the configured one, with its scheme.
    app_tokens: Option<std::sync::Arc<crate::source::github_app::InstallationTokens>>,
}

/// Forge answers larger than this are cut off when read into an error message.
const ERROR_BODY_LIMIT: usize = 300;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The wait after a rate-limited answer that does not say how long.
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// The longest wait a forge can ask for; beyond it we try again anyway.
const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(3600);

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
            app_tokens: None,
        })
    }

    /// Authenticates with `tokens`' installation tokens instead of the configured token.
    pub(crate) fn use_app_tokens(
        &mut self,
        tokens: Option<std::sync::Arc<crate::source::github_app::InstallationTokens>>,
    ) {
        self.app_tokens = tokens;
    }

    /// The `Authorization` value of the next request.
    async fn authorization(&self, method: &'static str, path: &str) -> Result<Secret, ForgeError> {
        let Some(tokens) = &self.app_tokens else {
            return Ok(self.authorization.clone());
        };
        let token = tokens
            .token()
            .await
            .map_err(|error| ForgeError::Unreachable {
                method,
                path: path.to_owned(),
                message: error.to_string(),
            })?;
        let scheme =
            (self.authorization.expose().split_once(' ')).map_or("Bearer", |(scheme, _)| scheme);
        Ok(RestClient::with_scheme(scheme, &token))
    }

    /// The `Authorization` value for `token`. A token read from a file keeps the file's
    /// trailing newline (`config::secret`), which no header value may hold.
    pub(crate) fn with_scheme(scheme: &str, token: &Secret) -> Secret {
        Secret::new(format!("{scheme} {}", token.expose().trim()))
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
        let authorization = self.authorization(method, path).await?;
        let mut request = self
            .http
            .request(http_method, &url)
            .header(reqwest::header::AUTHORIZATION, authorization.expose())
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
        let header_wait = rate_limit_wait(status.as_u16(), response.headers(), SystemTime::now());
        let text = response
            .text()
            .await
            .map_err(|error| ForgeError::Unreachable {
                method,
                path: path.to_owned(),
                message: error_chain(&error),
            })?;
        if !status.is_success() {
            let message = redact(
                &super::truncate_chars(text.trim(), ERROR_BODY_LIMIT),
                &authorization,
            );
            let wait = header_wait.or_else(|| rate_limit_wait_by_body(status.as_u16(), &text));
            if let Some(retry_after) = wait {
                return Err(ForgeError::RateLimited {
                    method,
                    path: path.to_owned(),
                    status: status.as_u16(),
                    retry_after,
                    message,
                });
            }
            return Err(ForgeError::RequestFailed {
                method,
                path: path.to_owned(),
                status: status.as_u16(),
                message,
            });
        }
        Ok(text)
    }
}

/// The wait a rate-limited answer asks for: `Retry-After` (seconds), or GitHub's
/// `x-ratelimit-remaining: 0` with `x-ratelimit-reset` (epoch seconds), on a 403 (GitHub's
/// primary and secondary limits) or a 429. `None` for any other answer, and for a 429 that
/// says nothing (retried with the usual backoff).
fn rate_limit_wait(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    now: SystemTime,
) -> Option<Duration> {
    if status != 403 && status != 429 {
        return None;
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    let wait = if let Some(retry_after) = header("retry-after") {
        // An HTTP date instead of seconds is rare; a minute is GitHub's advice without one.
        retry_after
            .parse::<u64>()
            .map_or(DEFAULT_RATE_LIMIT_WAIT, Duration::from_secs)
    } else if header("x-ratelimit-remaining") == Some("0") {
        let reset = header("x-ratelimit-reset")?.parse::<u64>().ok()?;
        let reset = UNIX_EPOCH.checked_add(Duration::from_secs(reset))?;
        reset.duration_since(now).unwrap_or_default()
    } else {
        return None;
    };
    Some(wait.clamp(Duration::from_secs(1), MAX_RATE_LIMIT_WAIT))
}

/// GitHub's secondary rate limit can come as a bare 403 whose message says so.
fn rate_limit_wait_by_body(status: u16, body: &str) -> Option<Duration> {
    (status == 403 && body.to_ascii_lowercase().contains("rate limit"))
        .then_some(DEFAULT_RATE_LIMIT_WAIT)
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
    fn a_token_from_a_file_loses_its_trailing_newline() {
        let header = RestClient::with_scheme("token", &Secret::new("abc123\n"));
        assert_eq!(header.expose(), "token abc123");
    }

    #[test]
    fn redacts_echoed_tokens() {
        let auth = RestClient::with_scheme("token", &Secret::new("abc123"));
        assert_eq!(redact("bad token abc123 here", &auth), "bad token *** here");
    }

    #[test]
    fn rate_limit_waits_come_from_the_headers() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_static(value));
            }
            map
        };
        // GitHub's secondary limit: 403 with Retry-After.
        assert_eq!(
            rate_limit_wait(403, &headers(&[("retry-after", "30")]), now),
            Some(Duration::from_secs(30))
        );
        // The primary limit: remaining 0, reset in 90 s.
        let exhausted = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1000090"),
        ]);
        assert_eq!(
            rate_limit_wait(403, &exhausted, now),
            Some(Duration::from_secs(90))
        );
        // A reset already past still waits a second; an absurd wait is capped.
        let past = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "999000"),
        ]);
        assert_eq!(
            rate_limit_wait(429, &past, now),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            rate_limit_wait(429, &headers(&[("retry-after", "99999999")]), now),
            Some(MAX_RATE_LIMIT_WAIT)
        );
        // A plain 403 is a permission problem; other statuses never wait.
        assert_eq!(rate_limit_wait(403, &headers(&[]), now), None);
        let remaining = headers(&[
            ("x-ratelimit-remaining", "12"),
            ("x-ratelimit-reset", "1000090"),
        ]);
        assert_eq!(rate_limit_wait(403, &remaining, now), None);
        assert_eq!(
            rate_limit_wait(500, &headers(&[("retry-after", "5")]), now),
            None
        );
        assert_eq!(
            rate_limit_wait_by_body(403, "You have exceeded a secondary rate limit."),
            Some(DEFAULT_RATE_LIMIT_WAIT)
        );
        assert_eq!(
            rate_limit_wait_by_body(403, "Resource not accessible"),
            None
        );
    }

    #[test]
    fn escapes_segments() {
        assert_eq!(segment("my org/x"), "my%20org%2Fx");
        assert_eq!(segment("demo-1.2_x"), "demo-1.2_x");
    }
}
