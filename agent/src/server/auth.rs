//! Who may read plan pages and the web UI (and any API after them): a bearer token from
//! `server.apiToken`, or a header an authenticating proxy in front of the agent sets
//! (`server.trustedHeader`). With neither configured the pages are closed: a plan shows the
//! shape of the cluster, and the agent must not publish it to whoever can reach its port.
//! Health, readiness and metrics stay open for probes and scrapers; webhooks carry their own
//! signature.
//!
//! Acting (resuming a workflow, approving a rollout batch) takes the [`Role::Operator`]: the
//! bearer token `server.operatorToken`, or, behind the proxy, a group of `server.operatorGroups`
//! in the header `server.groupsHeader`. A browser signs in once with either token at
//! `/ui/login`; its cookie holds a digest of the token, never the token itself.

use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::config::Secret;

/// How requests to protected endpoints authenticate.
#[derive(Debug, Clone, Default)]
pub struct ApiAuth {
    /// `Authorization: Bearer <token>` with this token passes.
    pub token: Option<Secret>,
    /// A request carrying this header (non-empty) passes: set only when every request reaches
    /// the agent through a proxy that authenticates and sets (or strips) it.
    pub trusted_header: Option<HeaderName>,
    /// `Authorization: Bearer <token>` with this token passes as an operator.
    pub operator_token: Option<Secret>,
    /// The header the proxy lists the user's groups in (comma-separated).
    pub groups_header: Option<HeaderName>,
    /// Trusted-header users in any of these groups are operators.
    pub operator_groups: Vec<String>,
}

/// What an authenticated request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Read plan pages and the UI.
    Viewer,
    /// Also resume workflows and approve rollout batches.
    Operator,
}

/// The cookie a signed-in browser sends.
pub const SESSION_COOKIE: &str = "driftless_session";

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Nothing configured: the endpoint is closed to everyone.
    NotConfigured,
    /// No or wrong credentials.
    Unauthenticated,
}

impl ApiAuth {
    /// Whether a request with these headers may pass.
    ///
    /// # Errors
    ///
    /// The [`Refusal`] when it may not.
    pub fn check(&self, headers: &axum::http::HeaderMap) -> Result<(), Refusal> {
        self.role(headers).map(|_| ())
    }

    /// What a request with these headers may do.
    ///
    /// # Errors
    ///
    /// The [`Refusal`] when it may do nothing.
    pub fn role(&self, headers: &axum::http::HeaderMap) -> Result<Role, Refusal> {
        if self.token.is_none() && self.trusted_header.is_none() && self.operator_token.is_none() {
            return Err(Refusal::NotConfigured);
        }
        if let Some(name) = &self.trusted_header
            && headers
                .get(name)
                .is_some_and(|value| !value.as_bytes().iter().all(u8::is_ascii_whitespace))
        {
            return Ok(if self.in_operator_group(headers) {
                Role::Operator
            } else {
                Role::Viewer
            });
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim);
        if let Some(presented) = presented {
            // Compared by digest: equal digests take the same time whatever the prefix shared.
            let presented = Sha256::digest(presented.as_bytes());
            for (token, role) in self.tokens() {
                if presented == Sha256::digest(token.expose().as_bytes()) {
                    return Ok(role);
                }
            }
        }
        if let Some(session) = session_cookie(headers) {
            for (token, role) in self.tokens() {
                if session == session_value(token.expose()) {
                    return Ok(role);
                }
            }
        }
        Err(Refusal::Unauthenticated)
    }

    /// The cookie value that signs a browser in with `token`, if it is one of ours.
    pub fn session_for(&self, token: &str) -> Option<(String, Role)> {
        let token = token.trim();
        let digest = Sha256::digest(token.as_bytes());
        self.tokens()
            .find(|(known, _)| Sha256::digest(known.expose().as_bytes()) == digest)
            .map(|(_, role)| (session_value(token), role))
    }

    /// The configured tokens, the operator's first (a token configured as both is an
    /// operator's).
    fn tokens(&self) -> impl Iterator<Item = (&Secret, Role)> {
        self.operator_token
            .iter()
            .map(|token| (token, Role::Operator))
            .chain(self.token.iter().map(|token| (token, Role::Viewer)))
    }

    fn in_operator_group(&self, headers: &axum::http::HeaderMap) -> bool {
        let Some(name) = &self.groups_header else {
            return false;
        };
        headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .any(|group| self.operator_groups.iter().any(|wanted| wanted == group))
    }
}

/// The session cookie's value for a token: a digest, so the browser never stores the token.
fn session_value(token: &str) -> String {
    hex::encode(Sha256::digest(
        format!("driftless-ui-session\0{token}").as_bytes(),
    ))
}

fn session_cookie(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// The middleware guarding protected routes.
pub async fn require(State(auth): State<ApiAuth>, request: Request, next: Next) -> Response {
    match auth.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(Refusal::NotConfigured) => (
            StatusCode::FORBIDDEN,
            "plan pages are closed: set server.apiToken (and send `Authorization: Bearer \
             <token>`) or server.trustedHeader behind an authenticating proxy\n",
        )
            .into_response(),
        Err(Refusal::Unauthenticated) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "credentials required: send `Authorization: Bearer <server.apiToken>`\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    #[test]
    fn nothing_configured_refuses_everyone() {
        let auth = ApiAuth::default();
        assert_eq!(
            auth.check(&headers(&[("authorization", "Bearer x")])),
            Err(Refusal::NotConfigured)
        );
    }

    #[test]
    fn the_bearer_token_must_match() {
        let auth = ApiAuth {
            token: Some(Secret::new("s3cret")),
            ..ApiAuth::default()
        };
        assert_eq!(
            auth.check(&headers(&[("authorization", "Bearer s3cret")])),
            Ok(())
        );
        assert_eq!(
            auth.check(&headers(&[("authorization", "Bearer s3cre")])),
            Err(Refusal::Unauthenticated)
        );
        assert_eq!(
            auth.check(&headers(&[("authorization", "s3cret")])),
            Err(Refusal::Unauthenticated)
        );
        assert_eq!(auth.check(&headers(&[])), Err(Refusal::Unauthenticated));
        // The trusted header is not configured, so it counts for nothing.
        assert_eq!(
            auth.check(&headers(&[("x-forwarded-user", "alice")])),
            Err(Refusal::Unauthenticated)
        );
    }

    #[test]
    fn a_configured_trusted_header_passes_when_present() {
        let auth = ApiAuth {
            trusted_header: Some(HeaderName::from_static("x-forwarded-user")),
            ..ApiAuth::default()
        };
        assert_eq!(
            auth.check(&headers(&[("x-forwarded-user", "alice")])),
            Ok(())
        );
        assert_eq!(
            auth.check(&headers(&[("x-forwarded-user", " ")])),
            Err(Refusal::Unauthenticated)
        );
        assert_eq!(
            auth.check(&headers(&[("authorization", "Bearer anything")])),
            Err(Refusal::Unauthenticated)
        );
    }

    #[test]
    fn operators_are_told_apart_from_viewers() {
        let auth = ApiAuth {
            token: Some(Secret::new("viewer-token")),
            trusted_header: Some(HeaderName::from_static("x-forwarded-user")),
            operator_token: Some(Secret::new("operator-token")),
            groups_header: Some(HeaderName::from_static("x-forwarded-groups")),
            operator_groups: vec!["platform".into()],
        };
        assert_eq!(
            auth.role(&headers(&[("authorization", "Bearer viewer-token")])),
            Ok(Role::Viewer)
        );
        assert_eq!(
            auth.role(&headers(&[("authorization", "Bearer operator-token")])),
            Ok(Role::Operator)
        );
        assert_eq!(
            auth.role(&headers(&[
                ("x-forwarded-user", "alice"),
                ("x-forwarded-groups", "dev, platform")
            ])),
            Ok(Role::Operator)
        );
        assert_eq!(
            auth.role(&headers(&[
                ("x-forwarded-user", "bob"),
                ("x-forwarded-groups", "platform-readers")
            ])),
            Ok(Role::Viewer)
        );
        // Groups count only with the trusted header.
        assert_eq!(
            auth.role(&headers(&[("x-forwarded-groups", "platform")])),
            Err(Refusal::Unauthenticated)
        );
        let (cookie, role) = auth.session_for("operator-token").unwrap();
        assert_eq!(role, Role::Operator);
        assert!(!cookie.contains("operator-token"));
        let mut with_cookie = HeaderMap::new();
        with_cookie.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {SESSION_COOKIE}={cookie}")).unwrap(),
        );
        assert_eq!(auth.role(&with_cookie), Ok(Role::Operator));
        assert_eq!(auth.session_for("wrong"), None);
    }
}
