//! Fuzz target: `driftless.yaml`, both as the agent reads it (`Config::parse`: every section
//! checked, problems named with their line) and as `driftless analyze` reads a repository's
//! copy, which a pull request can change (`AnalysisConfig::from_agent_config`). Neither may
//! panic, hang or overflow the stack on any text.

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use agent::config::{Config, Environment};
use libfuzzer_sys::fuzz_target;

fn environment() -> &'static Environment {
    static ENVIRONMENT: OnceLock<Environment> = OnceLock::new();
    ENVIRONMENT.get_or_init(|| Environment::from_pairs([("TOKEN", "t0ken"), ("EMPTY", "")]))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = analyzer::AnalysisConfig::from_agent_config(text);
    // The agent's own config may name any file as a secret; devices and kernel files are not
    // the loader's input (reading /dev/zero never ends), so such inputs are skipped.
    if ["/dev", "/proc", "/sys"].iter().any(|dir| text.contains(dir)) {
        return;
    }
    let base = std::env::temp_dir().join("driftless-fuzz-config");
    let _ = Config::parse(text, Path::new("driftless.yaml"), &base, environment());
});
