//! Who may read plan pages (and any API after them): a bearer token from `server.apiToken`, or
//! a header an authenticating proxy in front of the agent sets (`server.trustedHeader`). With
//! neither configured the pages are closed: a plan shows the shape of the cluster, and the
//! agent must not publish it to whoever can reach its port. Health, readiness and metrics stay
//! open for probes and scrapers; webhooks carry their own signature.

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
}

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
        if self.token.is_none() && self.trusted_header.is_none() {
            return Err(Refusal::NotConfigured);
        }
        if let Some(name) = &self.trusted_header
            && headers
                .get(name)
                .is_some_and(|value| !value.as_bytes().iter().all(u8::is_ascii_whitespace))
        {
            return Ok(());
        }
        if let Some(token) = &self.token {
            let presented = headers
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
                .map(str::trim);
            // Compared by digest: equal digests take the same time whatever the prefix shared.
            if let Some(presented) = presented
                && Sha256::digest(presented.as_bytes()) == Sha256::digest(token.expose().as_bytes())
            {
                return Ok(());
            }
        }
        Err(Refusal::Unauthenticated)
    }
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
            trusted_header: None,
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
            token: None,
            trusted_header: Some(HeaderName::from_static("x-forwarded-user")),
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
}
