//! How a source is reached: `knownHosts` (SSH), `caFile` (HTTPS) and the `fetch` budget, checked
//! into the types the fetch uses ([`KnownHosts`], [`CaBundle`], [`FetchBudget`]).
//!
//! ```yaml
//! sources:
//!   - name: platform
//!     url: ssh://git@git.example.com:2222/platform/apps.git
//!     knownHosts: |
//!       [git.example.com]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA...
//!     fetch: { depth: 1, connectTimeout: 15s, lowSpeedLimit: 1024, lowSpeedTime: 30s,
//!              timeout: 5m, maxSize: 1Gi, maxFileSize: 16Mi }
//! ```

use std::path::PathBuf;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::Checker;
use super::sources::parse_duration;
use crate::source::fetch::{CaBundle, RemoteUrl};
use crate::source::known_hosts::KnownHosts;
use crate::source::relay::FetchBudget;

/// The default depth of a fetch: the tip commit only.
pub const DEFAULT_DEPTH: u32 = 1;

/// `fetch:` as written. Every field is optional; see [`FetchBudget::default`].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FetchFile {
    /// Commits of history to fetch; 0 fetches the whole history.
    pub depth: Option<u32>,
    pub connect_timeout: Option<String>,
    /// Bytes per second under which a transfer counts as stalled.
    pub low_speed_limit: Option<u64>,
    pub low_speed_time: Option<String>,
    /// The whole fetch.
    pub timeout: Option<String>,
    /// Bytes received in one fetch: `512Mi`, `1Gi`, or a plain number of bytes.
    pub max_size: Option<String>,
    /// Size of one file read from a commit.
    pub max_file_size: Option<String>,
}

/// The checked transport settings of one source.
#[derive(Debug, Clone)]
pub(super) struct Transport {
    pub known_hosts: Option<KnownHosts>,
    pub ca: Option<CaBundle>,
    pub fetch: FetchBudget,
    pub depth: u32,
}

pub(super) fn check_transport(
    checker: &mut Checker<'_>,
    field: &str,
    url: &str,
    known_hosts: Option<Spanned<String>>,
    ca_file: Option<Spanned<PathBuf>>,
    fetch: Option<Spanned<FetchFile>>,
) -> Transport {
    let is_ssh = matches!(RemoteUrl::parse(url), Some(RemoteUrl::Ssh { .. }));
    let known_hosts = match known_hosts {
        Some(text) => match KnownHosts::parse(&text.value) {
            Ok(hosts) if !hosts.is_empty() => Some(hosts),
            Ok(_) => {
                checker.problem(
                    format!("{field}.knownHosts"),
                    &text,
                    "holds no host key line",
                );
                None
            }
            Err((line, message)) => {
                checker.problem(
                    format!("{field}.knownHosts"),
                    &text,
                    format!("line {line} of the known hosts: {message}"),
                );
                None
            }
        },
        None if is_ssh => {
            let host = RemoteUrl::parse(url)
                .and_then(|url| match url {
                    RemoteUrl::Ssh { host, port, .. } if port != 22 => {
                        Some(format!("-p {port} {host}"))
                    }
                    RemoteUrl::Ssh { host, .. } => Some(host),
                    _ => None,
                })
                .unwrap_or_default();
            checker.problem_unplaced(
                format!("{field}.knownHosts"),
                format!(
                    "an SSH source needs the host keys it trusts: add `knownHosts` with the \
                     lines of `ssh-keyscan {host}`, checked against the forge's published keys"
                ),
            );
            None
        }
        None => None,
    };
    let ca = ca_file.and_then(|file| {
        let path = checker.resolve_path(&file.value);
        let read = std::fs::read(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))
            .and_then(|pem| {
                CaBundle::from_pem(&pem).map_err(|message| format!("{}: {message}", path.display()))
            });
        match read {
            Ok(bundle) => Some(bundle),
            Err(message) => {
                checker.problem(format!("{field}.caFile"), &file, message);
                None
            }
        }
    });
    let (fetch, depth) = match fetch {
        Some(fetch) => check_fetch(checker, &format!("{field}.fetch"), &fetch),
        None => (FetchBudget::default(), DEFAULT_DEPTH),
    };
    Transport {
        known_hosts,
        ca,
        fetch,
        depth,
    }
}

fn check_fetch(
    checker: &mut Checker<'_>,
    field: &str,
    fetch: &Spanned<FetchFile>,
) -> (FetchBudget, u32) {
    let mut budget = FetchBudget::default();
    let value = &fetch.value;
    let mut duration = |name: &str, text: &Option<String>, slot: &mut std::time::Duration| {
        if let Some(text) = text {
            match parse_duration(text) {
                Some(parsed) if !parsed.is_zero() => *slot = parsed,
                _ => checker.problem(
                    format!("{field}.{name}"),
                    fetch,
                    format!("invalid duration {text:?} (use a number with a unit: 30s, 5m)"),
                ),
            }
        }
    };
    duration(
        "connectTimeout",
        &value.connect_timeout,
        &mut budget.connect_timeout,
    );
    duration(
        "lowSpeedTime",
        &value.low_speed_time,
        &mut budget.low_speed_time,
    );
    duration("timeout", &value.timeout, &mut budget.timeout);
    if let Some(limit) = value.low_speed_limit {
        budget.low_speed_limit = limit;
    }
    let mut size = |name: &str, text: &Option<String>, slot: &mut u64| {
        if let Some(text) = text {
            match parse_size(text) {
                Some(parsed) if parsed > 0 => *slot = parsed,
                _ => checker.problem(
                    format!("{field}.{name}"),
                    fetch,
                    format!("invalid size {text:?} (use bytes or a unit: 512Ki, 16Mi, 1Gi)"),
                ),
            }
        }
    };
    size("maxSize", &value.max_size, &mut budget.max_fetch_bytes);
    size(
        "maxFileSize",
        &value.max_file_size,
        &mut budget.max_file_bytes,
    );
    (budget, value.depth.unwrap_or(DEFAULT_DEPTH))
}

/// Parses `1048576`, `512Ki`, `16Mi`, `1Gi`.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let number: u64 = number.parse().ok()?;
    let factor: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(factor)
}
