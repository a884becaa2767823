//! Property test: the tracker record, webhook requests and `driftless.yaml` never panic their
//! readers, on deterministic mutations of the seeds of the matching cargo-fuzz targets
//! (`fuzz/seeds/`), and a tracker record that reads back survives a round trip. Runs in every
//! `cargo test`; the fuzz targets explore further (see FUZZING.md).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use agent::config::{Config, Environment, RepoSlug, Secret};
use agent::server::webhook::{
    WebhookFlavor, matches_source, parse_repository, sign, verify_signature,
};
use agent::tracker::TrackerRecord;

/// A small deterministic generator (xorshift64*), so failures reproduce exactly.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1) as u64) as usize
    }
}

/// Bytes that matter to JSON and YAML.
const SYNTAX: &[u8] = b"{}[]\":,-#&*!|>'\n \t0\\";

fn mutate(source: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bytes = source.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(5) {
            0 => bytes.truncate(at),
            1 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
            2 if at < bytes.len() => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(at..end);
            }
            3 => bytes.insert(at, SYNTAX[rng.below(SYNTAX.len())]),
            _ => {
                let end = (at + rng.below(64)).min(bytes.len());
                let slice = bytes[at..end].to_vec();
                let to = rng.below(bytes.len() + 1);
                bytes.splice(to..to, slice);
            }
        }
    }
    bytes
}

/// Each seed of `target`, then 200 mutations of each.
fn inputs(target: &str) -> Vec<Vec<u8>> {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    for seed in seeds {
        let bytes = std::fs::read(&seed).unwrap();
        out.push(bytes.clone());
        for _ in 0..200 {
            out.push(mutate(&bytes, &mut rng));
        }
    }
    out
}

#[test]
fn tracker_records_read_safely_and_round_trip() {
    let mut read = 0;
    for input in inputs("tracker_record") {
        let Ok(json) = std::str::from_utf8(&input) else {
            continue;
        };
        let Ok(record) = TrackerRecord::from_json("t", json, Some("7".to_owned())) else {
            continue;
        };
        read += 1;
        let written = record.to_json();
        let again = TrackerRecord::from_json("t", &written, Some("7".to_owned())).unwrap();
        assert_eq!(again, record, "round trip of {json}");
    }
    assert!(read > 10, "only {read} mutated records were readable");
}

#[test]
fn webhook_requests_never_panic() {
    let secret = Secret::new("fuzz-secret");
    let slug = RepoSlug::parse("platform/apps");
    for input in inputs("webhook_payload") {
        let (header, body) = match input.iter().position(|byte| *byte == b'\n') {
            Some(at) => (&input[..at], &input[at + 1..]),
            None => (&input[..0], &input[..]),
        };
        let header = String::from_utf8_lossy(header);
        for flavor in [WebhookFlavor::Gitea, WebhookFlavor::GitHub] {
            let _ = verify_signature(flavor, &secret, Some(&header), body);
        }
        let signed = sign(&secret, body);
        assert!(verify_signature(WebhookFlavor::Gitea, &secret, Some(&signed), body).is_ok());
        if let Ok(event) = parse_repository(body) {
            let _ = matches_source(
                &event,
                "https://git.example.com/platform/apps.git",
                slug.as_ref(),
            );
        }
    }
}

#[test]
fn driftless_yaml_never_panics_its_readers() {
    let env = Environment::from_pairs([("TOKEN", "t0ken")]);
    let base = tempfile::tempdir().unwrap();
    let mut accepted = 0;
    for input in inputs("driftless_yaml") {
        let Ok(text) = std::str::from_utf8(&input) else {
            continue;
        };
        let _ = analyzer::AnalysisConfig::from_agent_config(text);
        if Config::parse(text, Path::new("driftless.yaml"), base.path(), &env).is_ok() {
            accepted += 1;
        }
    }
    // Most mutations break the file; the loader must still have accepted some.
    assert!(accepted > 0, "no config was accepted");
}
