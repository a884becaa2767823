//! SSH host keys a source trusts: OpenSSH `known_hosts` lines (`host[,host…] type base64`, with
//! `[host]:port` for other ports than 22, as `ssh-keyscan` prints them). Checking is strict: a
//! host with no line is refused as unknown, and a key that matches no line of its host is
//! refused as a mismatch. Hashed host names (`|1|…`, `ssh-keyscan -H`) are refused at load time
//! with a hint to drop `-H`.

use std::fmt;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// A parsed set of `known_hosts` lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownHosts {
    entries: Vec<KnownHost>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct KnownHost {
    /// Host patterns as written, lowercased: `github.com`, `[git.example.com]:2222`.
    hosts: Vec<String>,
    key_type: String,
    key: Vec<u8>,
}

/// The verdict on a presented host key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyCheck {
    Trusted,
    /// No line names the host.
    Unknown {
        host: String,
    },
    /// Lines name the host but none holds the presented key.
    Mismatch {
        host: String,
        presented: String,
        known_types: Vec<String>,
    },
}

impl fmt::Display for HostKeyCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostKeyCheck::Trusted => f.write_str("trusted"),
            HostKeyCheck::Unknown { host } => write!(
                f,
                "the SSH host {host} is not in the source's knownHosts; add its keys (the output \
                 of `ssh-keyscan {}`) after checking them",
                keyscan_args(host)
            ),
            HostKeyCheck::Mismatch {
                host,
                presented,
                known_types,
            } => write!(
                f,
                "the SSH host key of {host} does not match knownHosts (presented {presented}; \
                 known: {}): refusing to connect. If the host's key really changed, update \
                 knownHosts",
                known_types.join(", ")
            ),
        }
    }
}

fn keyscan_args(host: &str) -> String {
    match host
        .strip_prefix('[')
        .and_then(|rest| rest.split_once("]:"))
    {
        Some((name, port)) => format!("-p {port} {name}"),
        None => host.to_owned(),
    }
}

impl KnownHosts {
    /// Parses `known_hosts` text. Blank lines and `#` comments are skipped; markers
    /// (`@revoked`, `@cert-authority`) are not supported.
    ///
    /// # Errors
    ///
    /// The 1-based line number and what is wrong with it.
    pub fn parse(text: &str) -> Result<KnownHosts, (usize, String)> {
        let mut entries = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let problem = |message: &str| (index + 1, message.to_owned());
            if line.starts_with('@') {
                return Err(problem(
                    "markers (@cert-authority, @revoked) are not supported; list the host keys",
                ));
            }
            let mut fields = line.split_whitespace();
            let (Some(hosts), Some(key_type), Some(key)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(problem("expected `host key-type base64-key`"));
            };
            if hosts.starts_with('|') {
                return Err(problem(
                    "hashed host names are not supported; use `ssh-keyscan` without -H",
                ));
            }
            let key = base64::engine::general_purpose::STANDARD
                .decode(key)
                .map_err(|_| problem("the key is not valid base64"))?;
            entries.push(KnownHost {
                hosts: hosts.split(',').map(str::to_ascii_lowercase).collect(),
                key_type: key_type.to_owned(),
                key,
            });
        }
        Ok(KnownHosts { entries })
    }

    /// Whether no line was given.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks the key `host` (and `port`) presented, as its raw SSH wire blob.
    pub fn check(&self, host: &str, port: u16, key: &[u8]) -> HostKeyCheck {
        let host = host.to_ascii_lowercase();
        let name = if port == 22 {
            host.clone()
        } else {
            format!("[{host}]:{port}")
        };
        let known: Vec<&KnownHost> = self
            .entries
            .iter()
            .filter(|entry| entry.hosts.contains(&name))
            .collect();
        if known.is_empty() {
            return HostKeyCheck::Unknown { host: name };
        }
        if known.iter().any(|entry| entry.key == key) {
            return HostKeyCheck::Trusted;
        }
        HostKeyCheck::Mismatch {
            host: name,
            presented: fingerprint(key),
            known_types: known.iter().map(|entry| entry.key_type.clone()).collect(),
        }
    }
}

/// `type SHA256:…`, as `ssh-keygen -l` prints a key.
pub fn fingerprint(key: &[u8]) -> String {
    let key_type = key
        .get(..4)
        .map(|len| u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize)
        .and_then(|len| key.get(4..4 + len))
        .and_then(|name| std::str::from_utf8(name).ok())
        .unwrap_or("unknown");
    let digest = base64::engine::general_purpose::STANDARD_NO_PAD.encode(Sha256::digest(key));
    format!("{key_type} SHA256:{digest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(key_type: &str, body: &[u8]) -> Vec<u8> {
        let mut blob = (key_type.len() as u32).to_be_bytes().to_vec();
        blob.extend_from_slice(key_type.as_bytes());
        blob.extend_from_slice(body);
        blob
    }

    fn line(host: &str, key: &[u8]) -> String {
        format!(
            "{host} ssh-ed25519 {}\n",
            base64::engine::general_purpose::STANDARD.encode(key)
        )
    }

    #[test]
    fn trusts_listed_keys_and_refuses_others() {
        let good = blob("ssh-ed25519", b"good key");
        let other = blob("ssh-ed25519", b"other key");
        let text = format!(
            "# comment\n{}{}",
            line("git.example.com,10.0.0.1", &good),
            line("[git.example.com]:2222", &other)
        );
        let hosts = KnownHosts::parse(&text).expect("valid lines");
        assert_eq!(
            hosts.check("GIT.example.com", 22, &good),
            HostKeyCheck::Trusted
        );
        assert_eq!(hosts.check("10.0.0.1", 22, &good), HostKeyCheck::Trusted);
        assert_eq!(
            hosts.check("git.example.com", 2222, &other),
            HostKeyCheck::Trusted
        );
        let mismatch = hosts.check("git.example.com", 2222, &good);
        assert!(
            matches!(mismatch, HostKeyCheck::Mismatch { .. }),
            "{mismatch:?}"
        );
        assert!(
            mismatch.to_string().contains("does not match knownHosts"),
            "{mismatch}"
        );
        let unknown = hosts.check("elsewhere.example.com", 2222, &good);
        assert_eq!(
            unknown.to_string(),
            "the SSH host [elsewhere.example.com]:2222 is not in the source's knownHosts; add its \
             keys (the output of `ssh-keyscan -p 2222 elsewhere.example.com`) after checking them"
        );
    }

    #[test]
    fn bad_lines_name_their_line() {
        assert_eq!(
            KnownHosts::parse("\nhost ssh-ed25519 ###\n"),
            Err((2, "the key is not valid base64".to_owned()))
        );
        assert_eq!(
            KnownHosts::parse("|1|abc|def ssh-ed25519 AAAA\n").map_err(|(line, _)| line),
            Err(1)
        );
        assert_eq!(
            KnownHosts::parse("host-only\n").map_err(|(line, _)| line),
            Err(1)
        );
    }
}
