//! GitHub App installation tokens, for git over HTTPS (`credentials.githubApp`).
//!
//! The app's private key signs a short JWT (RS256, with the `openssl` the git transports
//! already link), which is exchanged at `POST {apiUrl}/app/installations/{id}/access_tokens`
//! for an installation token. The token is cached and reused until [`REFRESH_BEFORE`] its
//! `expires_at`, then exchanged again; git sends it as the password of the user
//! `x-access-token`, as GitHub documents. Neither the key, the JWT nor the token is ever
//! logged or put in an error message.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;

use crate::config::Secret;

/// An installation token is exchanged again this long before it expires.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);
/// The JWT's lifetime (GitHub allows at most 10 minutes), and how far its `iat` is back-dated
/// against clock skew.
const JWT_LIFETIME: Duration = Duration::from_secs(9 * 60);
const JWT_SKEW: Duration = Duration::from_secs(60);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The git user name an installation token goes with.
pub const GIT_USER: &str = "x-access-token";

/// A GitHub App installation, as configured.
#[derive(Clone)]
pub struct GithubApp {
    pub app_id: u64,
    pub installation_id: u64,
    /// The app's private key (PEM).
    pub private_key: Secret,
    /// The API root: `https://api.github.com`, or GitHub Enterprise's `https://HOST/api/v3`.
    pub api_url: String,
}

/// Why no installation token could be had. Never holds the key or a token.
#[derive(Debug, thiserror::Error)]
pub enum GithubAppError {
    #[error("the GitHub App's private key is not an RSA key in PEM form")]
    BadKey,
    #[error("signing the GitHub App's JWT failed: {0}")]
    Sign(String),
    #[error("asking {url} for an installation token failed: {message}")]
    Exchange { url: String, message: String },
}

/// An installation token and when it expires.
struct Cached {
    token: Secret,
    expires_at: SystemTime,
}

/// The installation tokens of one app installation: exchanged when needed, cached until
/// shortly before they expire. Shared by every fetch of the sources that use it.
pub struct InstallationTokens {
    app: GithubApp,
    client: reqwest::Client,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

impl fmt::Debug for InstallationTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstallationTokens")
            .field("app_id", &self.app.app_id)
            .field("installation_id", &self.app.installation_id)
            .field("api_url", &self.app.api_url)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct AccessToken {
    token: String,
    expires_at: String,
}

impl InstallationTokens {
    /// # Errors
    /// The key is not an RSA private key in PEM form.
    pub fn new(app: GithubApp) -> Result<InstallationTokens, GithubAppError> {
        openssl::rsa::Rsa::private_key_from_pem(app.private_key.expose().as_bytes())
            .map_err(|_| GithubAppError::BadKey)?;
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("driftless/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| GithubAppError::Exchange {
                url: app.api_url.clone(),
                message: error.to_string(),
            })?;
        Ok(InstallationTokens {
            app,
            client,
            cached: tokio::sync::Mutex::new(None),
        })
    }

    /// A token valid for at least [`REFRESH_BEFORE`]: the cached one, or a new exchange.
    ///
    /// # Errors
    /// The JWT could not be signed or the exchange failed.
    pub async fn token(&self) -> Result<Secret, GithubAppError> {
        let mut cached = self.cached.lock().await;
        if let Some(current) = cached.as_ref()
            && SystemTime::now() + REFRESH_BEFORE < current.expires_at
        {
            return Ok(current.token.clone());
        }
        let fresh = self.exchange().await?;
        let token = fresh.token.clone();
        *cached = Some(fresh);
        Ok(token)
    }

    /// [`InstallationTokens::token`] from blocking code (the git transports' credential
    /// callback, which runs on `spawn_blocking`).
    ///
    /// # Errors
    /// As [`InstallationTokens::token`].
    pub fn token_blocking(&self) -> Result<Secret, GithubAppError> {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle.block_on(self.token()),
            Err(_) => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| GithubAppError::Exchange {
                    url: self.app.api_url.clone(),
                    message: error.to_string(),
                })?
                .block_on(self.token()),
        }
    }

    async fn exchange(&self) -> Result<Cached, GithubAppError> {
        let url = format!(
            "{}/app/installations/{}/access_tokens",
            self.app.api_url.trim_end_matches('/'),
            self.app.installation_id
        );
        let failed = |message: String| GithubAppError::Exchange {
            url: url.clone(),
            message,
        };
        let jwt = self.jwt(SystemTime::now())?;
        let response = self
            .client
            .post(&url)
            .bearer_auth(jwt.expose())
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .send()
            .await
            .map_err(|error| failed(error.without_url().to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(failed(format!(
                "HTTP {status}; check the app id, the installation id and that the key is the app's"
            )));
        }
        let body: AccessToken = response
            .json()
            .await
            .map_err(|error| failed(format!("unreadable answer: {}", error.without_url())))?;
        let expires_at = chrono::DateTime::parse_from_rfc3339(&body.expires_at)
            .map_err(|error| failed(format!("expires_at {:?}: {error}", body.expires_at)))?;
        let expires_at = UNIX_EPOCH
            + Duration::from_secs(u64::try_from(expires_at.timestamp()).unwrap_or_default());
        Ok(Cached {
            token: Secret::new(body.token),
            expires_at,
        })
    }

    /// The app's JWT at `now`: RS256 over `{iat, exp, iss}`.
    fn jwt(&self, now: SystemTime) -> Result<Secret, GithubAppError> {
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "iat": (now - JWT_SKEW).as_secs(),
            "exp": (now + JWT_LIFETIME).as_secs(),
            "iss": self.app.app_id.to_string(),
        });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{claims}");
        let key =
            openssl::pkey::PKey::private_key_from_pem(self.app.private_key.expose().as_bytes())
                .map_err(|_| GithubAppError::BadKey)?;
        let sign = || -> Result<Vec<u8>, openssl::error::ErrorStack> {
            let mut signer =
                openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), &key)?;
            signer.update(signing_input.as_bytes())?;
            signer.sign_to_vec()
        };
        let signature = sign().map_err(|error| GithubAppError::Sign(error.to_string()))?;
        Ok(Secret::new(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(key: &openssl::pkey::PKey<openssl::pkey::Private>) -> GithubApp {
        let pem = key.private_key_to_pem_pkcs8().expect("PEM");
        GithubApp {
            app_id: 4242,
            installation_id: 7,
            private_key: Secret::new(String::from_utf8(pem).expect("PEM is text")),
            api_url: "http://127.0.0.1:1".to_owned(),
        }
    }

    #[test]
    fn the_jwt_is_rs256_signed_by_the_apps_key_and_names_the_app() {
        let rsa = openssl::rsa::Rsa::generate(2048).expect("an RSA key");
        let key = openssl::pkey::PKey::from_rsa(rsa).expect("a key");
        let tokens = InstallationTokens::new(app(&key)).expect("the key loads");
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let jwt = tokens.jwt(now).expect("signed");
        let parts: Vec<&str> = jwt.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("base64url"))
                .expect("JSON claims");
        assert_eq!(claims["iss"], "4242");
        assert_eq!(claims["iat"], 1_800_000_000 - 60);
        assert_eq!(claims["exp"], 1_800_000_000 + 540);
        let mut verifier =
            openssl::sign::Verifier::new(openssl::hash::MessageDigest::sha256(), &key)
                .expect("a verifier");
        verifier
            .update(format!("{}.{}", parts[0], parts[1]).as_bytes())
            .expect("update");
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).expect("base64url");
        assert!(verifier.verify(&signature).expect("verify"));
    }

    #[test]
    fn a_key_that_is_not_pem_is_refused_without_echoing_it() {
        let mut bad = app(&openssl::pkey::PKey::from_rsa(
            openssl::rsa::Rsa::generate(2048).expect("key"),
        )
        .expect("key"));
        bad.private_key = Secret::new("not-a-key-but-secret".to_owned());
        let error = InstallationTokens::new(bad).expect_err("refused");
        assert!(!error.to_string().contains("not-a-key-but-secret"));
    }
}
