//! One fetch from a remote: where it goes ([`RemoteUrl`]), who we are (credentials), whom we
//! trust (the system's CAs plus the source's `caFile` for HTTPS, `knownHosts` for SSH), and its
//! network budget (through a [`Relay`]).
//!
//! libgit2 replaces the message of a rejected certificate or host key with its own, so the
//! callbacks keep their verdict on the side ([`Verdicts`]) and the error reports that instead.
//! Credentials only travel through the credential callback: no message here can contain one.

use std::sync::{Arc, Mutex, PoisonError};

use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509VerifyParam;
use openssl::x509::{X509, X509StoreContext};

use super::git::SourceError;
use super::known_hosts::HostKeyCheck;
use super::relay::{BudgetExceeded, FetchBudget, Relay, RelayMode};
use crate::config::{GitCredentials, SourceConfig};

/// The transport of a source URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteUrl {
    /// `http://` or `https://`, as written.
    Http { url: String },
    /// `ssh://[user@]host[:port]/path` or `[user@]host:path`.
    Ssh {
        user: Option<String>,
        host: String,
        port: u16,
        path: String,
    },
    /// `file://` and local paths: no network, no relay.
    Local { url: String },
}

impl RemoteUrl {
    /// Splits a source URL by transport; `None` for an SSH URL whose host or port cannot be read.
    pub fn parse(url: &str) -> Option<RemoteUrl> {
        if url.starts_with("http://") || url.starts_with("https://") {
            return Some(RemoteUrl::Http {
                url: url.to_owned(),
            });
        }
        if let Some(rest) = url.strip_prefix("ssh://") {
            let (authority, path) = rest.split_once('/')?;
            let (user, host_port) = match authority.rsplit_once('@') {
                Some((user, host_port)) => (Some(user.to_owned()), host_port),
                None => (None, authority),
            };
            let (host, port) = split_host_port(host_port)?;
            return Some(RemoteUrl::Ssh {
                user,
                host,
                port,
                path: format!("/{path}"),
            });
        }
        if url.contains("://") {
            return Some(RemoteUrl::Local {
                url: url.to_owned(),
            });
        }
        // scp-like `user@host:path`; anything else is a local path.
        match url.split_once(':') {
            Some((user_host, path)) if !user_host.contains('/') && !path.is_empty() => {
                let (user, host) = match user_host.rsplit_once('@') {
                    Some((user, host)) => (Some(user.to_owned()), host.to_owned()),
                    None => (None, user_host.to_owned()),
                };
                // A relative path is relative to the login's home; forges serve `/owner/repo`
                // the same, and libgit2 reads `/~/path` as the home again.
                let path = if path.starts_with('/') {
                    path.to_owned()
                } else {
                    format!("/{path}")
                };
                Some(RemoteUrl::Ssh {
                    user,
                    host,
                    port: 22,
                    path,
                })
            }
            _ => Some(RemoteUrl::Local {
                url: url.to_owned(),
            }),
        }
    }

    /// The host name, for messages and host key checks.
    pub fn host(&self) -> Option<&str> {
        match self {
            RemoteUrl::Ssh { host, .. } => Some(host),
            _ => None,
        }
    }
}

fn split_host_port(host_port: &str) -> Option<(String, u16)> {
    if let Some(rest) = host_port.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => port.parse().ok()?,
            None => 22,
        };
        return Some((host.to_owned(), port));
    }
    match host_port.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((host_port.to_owned(), 22)),
    }
}

/// A source's own certificate authorities (`caFile`), trusted beside the system's.
#[derive(Clone)]
pub struct CaBundle {
    certificates: Vec<X509>,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CaBundle({} certificates)", self.certificates.len())
    }
}

impl CaBundle {
    /// Reads PEM certificates.
    ///
    /// # Errors
    ///
    /// When the text holds no PEM certificate.
    pub fn from_pem(pem: &[u8]) -> Result<CaBundle, String> {
        let certificates =
            X509::stack_from_pem(pem).map_err(|error| format!("not PEM certificates: {error}"))?;
        if certificates.is_empty() {
            return Err("holds no PEM certificate".to_owned());
        }
        Ok(CaBundle { certificates })
    }

    /// Whether `leaf` (DER) chains to one of these authorities and names `host`.
    fn verifies(&self, leaf: &[u8], host: &str) -> bool {
        let check = || -> Result<bool, openssl::error::ErrorStack> {
            let leaf = X509::from_der(leaf)?;
            let mut store = X509StoreBuilder::new()?;
            for certificate in &self.certificates {
                store.add_cert(certificate.clone())?;
            }
            let mut param = X509VerifyParam::new()?;
            match host.parse::<std::net::IpAddr>() {
                Ok(ip) => param.set_ip(ip)?,
                Err(_) => param.set_host(host)?,
            }
            store.set_param(&param)?;
            let store = store.build();
            let chain = openssl::stack::Stack::new()?;
            let mut context = X509StoreContext::new()?;
            context.init(&store, &leaf, &chain, |context| context.verify_cert())
        };
        check().unwrap_or(false)
    }
}

/// What the certificate and credential callbacks decided, kept for the error message.
#[derive(Debug, Default)]
struct Verdicts {
    host_key: Option<HostKeyCheck>,
    credentials_rejected: bool,
}

/// The refspecs of one fetch: the tracked branch, or one pull or merge request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchTarget<'a> {
    Branch(&'a str),
    Pull(u64),
}

impl FetchTarget<'_> {
    fn refspecs(self) -> Vec<String> {
        match self {
            FetchTarget::Branch(branch) => {
                vec![format!(
                    "+refs/heads/{branch}:refs/driftless/heads/{branch}"
                )]
            }
            // One of the two exists, by forge; a missing source ref fetches nothing.
            FetchTarget::Pull(number) => vec![
                format!("+refs/pull/{number}/head:refs/driftless/pull/{number}"),
                format!("+refs/merge-requests/{number}/head:refs/driftless/pull/{number}"),
            ],
        }
    }
}

/// Fetches `target` of the source into `repo`, within the source's budget.
///
/// # Errors
///
/// [`SourceError::AuthFailed`], [`SourceError::HostKeyRejected`], [`SourceError::OverBudget`],
/// [`SourceError::Unreachable`] or [`SourceError::FetchFailed`].
pub fn fetch(
    repo: &git2::Repository,
    config: &SourceConfig,
    target: FetchTarget<'_>,
) -> Result<(), SourceError> {
    let url = &config.url;
    let remote_url = RemoteUrl::parse(url).ok_or_else(|| SourceError::FetchFailed {
        url: url.clone(),
        message: "cannot read the host and port of this SSH URL".to_owned(),
    })?;
    let (relay, libgit2_url) = start_relay(&remote_url, &config.fetch, url)?;
    let verdicts = Arc::new(Mutex::new(Verdicts::default()));
    let result = fetch_through(
        repo,
        config,
        &remote_url,
        &libgit2_url,
        relay.as_ref(),
        target,
        &verdicts,
    );
    let exceeded = relay.and_then(Relay::finish);
    let verdicts = verdicts.lock().unwrap_or_else(PoisonError::into_inner);
    match (result, exceeded) {
        (Ok(()), _) => Ok(()),
        (Err(_), Some(BudgetExceeded::Connect { message, .. })) => Err(SourceError::Unreachable {
            url: url.clone(),
            message,
        }),
        (Err(_), Some(exceeded)) => Err(SourceError::OverBudget {
            url: url.clone(),
            message: exceeded.to_string(),
        }),
        (Err(_), None) if verdicts.host_key.is_some() => Err(SourceError::HostKeyRejected {
            url: url.clone(),
            message: verdicts
                .host_key
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        }),
        (Err(error), None) if verdicts.credentials_rejected => Err(SourceError::AuthFailed {
            url: url.clone(),
            message: format!(
                "the remote rejected the configured credentials ({})",
                error.message()
            ),
        }),
        (Err(error), None) => Err(super::git::classify(url, &error)),
    }
}

/// The relay for a networked URL, and the URL libgit2 is given (SSH goes to the relay's port).
fn start_relay(
    remote_url: &RemoteUrl,
    budget: &FetchBudget,
    url: &str,
) -> Result<(Option<Relay>, String), SourceError> {
    let relay_failed = |error: std::io::Error| SourceError::FetchFailed {
        url: url.to_owned(),
        message: format!("starting the loopback fetch relay: {error}"),
    };
    match remote_url {
        RemoteUrl::Local { url } => Ok((None, url.clone())),
        RemoteUrl::Http { url } if url.starts_with("https://") => {
            let relay =
                Relay::start(RelayMode::ConnectProxy, budget.clone()).map_err(relay_failed)?;
            Ok((Some(relay), url.clone()))
        }
        RemoteUrl::Http { url } => {
            // Plain http: libgit2 connects straight to the server even with a proxy set, so
            // it is given the relay's address instead.
            let rest = url.trim_start_matches("http://");
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host_port = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            // `host:port`, `[v6]:port`, or the default port 80.
            let has_port = match host_port.strip_prefix('[') {
                Some(v6) => v6.contains("]:"),
                None => host_port.contains(':'),
            };
            let target = if has_port {
                host_port.to_owned()
            } else {
                format!("{host_port}:80")
            };
            let relay =
                Relay::start(RelayMode::Forward(target), budget.clone()).map_err(relay_failed)?;
            let local = format!("http://{}/{path}", relay.addr());
            Ok((Some(relay), local))
        }
        RemoteUrl::Ssh {
            user,
            host,
            port,
            path,
        } => {
            let target = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            let relay =
                Relay::start(RelayMode::Forward(target), budget.clone()).map_err(relay_failed)?;
            let user = user
                .as_ref()
                .map(|user| format!("{user}@"))
                .unwrap_or_default();
            let local = format!("ssh://{user}{}{path}", relay.addr());
            Ok((Some(relay), local))
        }
    }
}

fn fetch_through(
    repo: &git2::Repository,
    config: &SourceConfig,
    remote_url: &RemoteUrl,
    libgit2_url: &str,
    relay: Option<&Relay>,
    target: FetchTarget<'_>,
    verdicts: &Arc<Mutex<Verdicts>>,
) -> Result<(), git2::Error> {
    let mut remote = repo.remote_anonymous(libgit2_url)?;
    let mut callbacks = git2::RemoteCallbacks::new();
    let credentials = config.credentials.clone();
    let credential_verdicts = verdicts.clone();
    let mut attempts = 0u32;
    callbacks.credentials(move |_url, username_from_url, allowed| {
        // libgit2 calls back again after a rejected credential; offering the same one
        // forever would loop, so the second call is an authentication failure.
        attempts += 1;
        if attempts > 1 {
            credential_verdicts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .credentials_rejected = true;
            return Err(auth_error("the remote rejected the configured credentials"));
        }
        credential(credentials.as_ref(), username_from_url, allowed)
    });
    let ca = config.ca.clone();
    let known_hosts = config.known_hosts.clone().unwrap_or_default();
    let ssh_target = match remote_url {
        RemoteUrl::Ssh { host, port, .. } => Some((host.clone(), *port)),
        _ => None,
    };
    let check_verdicts = verdicts.clone();
    callbacks.certificate_check(move |cert, host| {
        if let Some(hostkey) = cert.as_hostkey() {
            let Some((host, port)) = &ssh_target else {
                return Ok(git2::CertificateCheckStatus::CertificatePassthrough);
            };
            let check = match hostkey.hostkey() {
                Some(key) => known_hosts.check(host, *port, key),
                None => HostKeyCheck::Unknown { host: host.clone() },
            };
            if check == HostKeyCheck::Trusted {
                return Ok(git2::CertificateCheckStatus::CertificateOk);
            }
            let message = check.to_string();
            check_verdicts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .host_key = Some(check);
            return Err(git2::Error::new(
                git2::ErrorCode::Certificate,
                git2::ErrorClass::Ssh,
                message,
            ));
        }
        match (cert.as_x509(), &ca) {
            (Some(x509), Some(ca)) if ca.verifies(x509.data(), host) => {
                Ok(git2::CertificateCheckStatus::CertificateOk)
            }
            // The system's verdict (its CA store, as OpenSSL found it).
            _ => Ok(git2::CertificateCheckStatus::CertificatePassthrough),
        }
    });
    let mut options = git2::FetchOptions::new();
    options
        .remote_callbacks(callbacks)
        .prune(git2::FetchPrune::On)
        .download_tags(git2::AutotagOption::None);
    // libgit2's local transport cannot fetch shallow; a local remote costs no network anyway.
    if config.depth > 0 && !matches!(remote_url, RemoteUrl::Local { .. }) {
        options.depth(i32::try_from(config.depth).unwrap_or(i32::MAX));
    }
    if let (Some(relay), RemoteUrl::Http { url }) = (relay, remote_url)
        && url.starts_with("https://")
    {
        let mut proxy = git2::ProxyOptions::new();
        proxy.url(&format!("http://{}", relay.addr()));
        options.proxy_options(proxy);
    }
    remote.fetch(&target.refspecs(), Some(&mut options), None)
}

fn auth_error(message: &str) -> git2::Error {
    git2::Error::new(git2::ErrorCode::Auth, git2::ErrorClass::Net, message)
}

fn credential(
    credentials: Option<&GitCredentials>,
    username_from_url: Option<&str>,
    allowed: git2::CredentialType,
) -> Result<git2::Cred, git2::Error> {
    match credentials {
        Some(GitCredentials::Token { username, token })
            if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT) =>
        {
            git2::Cred::userpass_plaintext(username, token.expose())
        }
        Some(GitCredentials::SshKey {
            username,
            private_key,
            passphrase,
        }) if allowed.contains(git2::CredentialType::SSH_KEY)
            || allowed.contains(git2::CredentialType::USERNAME) =>
        {
            let user = username_from_url.unwrap_or(username);
            if allowed.contains(git2::CredentialType::USERNAME) {
                git2::Cred::username(user)
            } else {
                git2::Cred::ssh_key_from_memory(
                    user,
                    None,
                    private_key.expose(),
                    passphrase.as_ref().map(|p| p.expose()),
                )
            }
        }
        Some(GitCredentials::GithubApp(tokens))
            if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT) =>
        {
            let token = tokens
                .token_blocking()
                .map_err(|error| auth_error(&error.to_string()))?;
            git2::Cred::userpass_plaintext(crate::source::github_app::GIT_USER, token.expose())
        }
        _ => Err(auth_error(
            "the remote asks for credentials and none (of the right kind) are configured",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_by_transport() {
        assert_eq!(
            RemoteUrl::parse("git@github.com:org/repo.git"),
            Some(RemoteUrl::Ssh {
                user: Some("git".to_owned()),
                host: "github.com".to_owned(),
                port: 22,
                path: "/org/repo.git".to_owned(),
            })
        );
        assert_eq!(
            RemoteUrl::parse("ssh://git@[::1]:2222/org/repo.git"),
            Some(RemoteUrl::Ssh {
                user: Some("git".to_owned()),
                host: "::1".to_owned(),
                port: 2222,
                path: "/org/repo.git".to_owned(),
            })
        );
        assert_eq!(
            RemoteUrl::parse("ssh://host.example/repo").and_then(|url| match url {
                RemoteUrl::Ssh { port, user, .. } => Some((port, user)),
                _ => None,
            }),
            Some((22, None))
        );
        assert!(matches!(
            RemoteUrl::parse("https://git.example.com/a/b.git"),
            Some(RemoteUrl::Http { .. })
        ));
        assert!(matches!(
            RemoteUrl::parse("/srv/git/repo"),
            Some(RemoteUrl::Local { .. })
        ));
        assert!(matches!(
            RemoteUrl::parse("file:///srv/git/repo"),
            Some(RemoteUrl::Local { .. })
        ));
        assert_eq!(RemoteUrl::parse("ssh://host:notaport/repo"), None);
    }
}
