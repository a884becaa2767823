//! Fuzz target: webhook requests come from the network, before any trust is established.
//! Signature checks and payload parsing must never panic on any body or signature header,
//! and a payload that parses must be matchable against the configured sources.
//!
//! The input's first line is the signature header, the rest the body.

#![no_main]

use agent::config::{RepoSlug, Secret};
use agent::server::webhook::{
    WebhookFlavor, matches_source, parse_repository, sign, verify_signature,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (header, body) = match data.iter().position(|byte| *byte == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&data[..0], data),
    };
    let secret = Secret::new("fuzz-secret");
    let header = String::from_utf8_lossy(header);
    for flavor in [WebhookFlavor::Gitea, WebhookFlavor::GitHub] {
        let _ = verify_signature(flavor, &secret, Some(&header), body);
        let _ = verify_signature(flavor, &secret, None, body);
    }
    // The body signed as Gitea signs it always verifies.
    let signed = sign(&secret, body);
    assert!(verify_signature(WebhookFlavor::Gitea, &secret, Some(&signed), body).is_ok());
    if let Ok(event) = parse_repository(body) {
        let slug = RepoSlug::parse("platform/apps");
        let _ = matches_source(&event, "https://git.example.com/platform/apps.git", slug.as_ref());
        let _ = matches_source(&event, "", None);
    }
});
