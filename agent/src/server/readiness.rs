//! `/readyz`: the agent is ready once every source has fetched successfully at least once, and
//! the answer names the sources that cannot fetch (with the reason, which never holds a
//! credential). A source that fails later keeps the agent ready (its last good revision stays
//! deployed) but is still listed, so a forge outage does not take every replica out of service.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

/// The fetch state of every source, written by the source loops and read by `/readyz`.
#[derive(Debug, Default)]
pub struct SourceReadiness {
    sources: Mutex<BTreeMap<String, FetchState>>,
}

#[derive(Debug, Default, Clone)]
struct FetchState {
    fetched_once: bool,
    error: Option<String>,
}

impl SourceReadiness {
    /// Readiness over these sources, none fetched yet.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> SourceReadiness {
        SourceReadiness {
            sources: Mutex::new(
                names
                    .into_iter()
                    .map(|name| (name.to_owned(), FetchState::default()))
                    .collect(),
            ),
        }
    }

    /// `source` fetched successfully.
    pub fn fetched(&self, source: &str) {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let state = sources.entry(source.to_owned()).or_default();
        state.fetched_once = true;
        state.error = None;
    }

    /// `source` could not fetch, for `reason`.
    pub fn failed(&self, source: &str, reason: String) {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.entry(source.to_owned()).or_default().error = Some(reason);
    }

    /// Whether every source has fetched once, and the text of `/readyz`.
    pub fn report(&self) -> (bool, String) {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let ready = sources.values().all(|state| state.fetched_once);
        let mut text = String::from(if ready { "ready\n" } else { "not ready\n" });
        for (name, state) in sources.iter() {
            match (&state.error, state.fetched_once) {
                (Some(error), true) => {
                    let _ = writeln!(
                        text,
                        "source {name}: cannot fetch (last good revision kept): {error}"
                    );
                }
                (Some(error), false) => {
                    let _ = writeln!(text, "source {name}: cannot fetch: {error}");
                }
                (None, false) => {
                    let _ = writeln!(text, "source {name}: waiting for its first fetch");
                }
                (None, true) => {}
            }
        }
        (ready, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_every_source_fetched_and_failures_listed() {
        let readiness = SourceReadiness::new(["a", "b"]);
        let (ready, text) = readiness.report();
        assert!(!ready);
        assert_eq!(
            text,
            "not ready\nsource a: waiting for its first fetch\nsource b: waiting for its first fetch\n"
        );
        readiness.fetched("a");
        readiness.failed(
            "b",
            "reaching https://git.example/b.git: refused".to_owned(),
        );
        let (ready, text) = readiness.report();
        assert!(!ready);
        assert_eq!(
            text,
            "not ready\nsource b: cannot fetch: reaching https://git.example/b.git: refused\n"
        );
        readiness.fetched("b");
        assert_eq!(readiness.report(), (true, "ready\n".to_owned()));
        readiness.failed("a", "timed out".to_owned());
        assert_eq!(
            readiness.report(),
            (
                true,
                "ready\nsource a: cannot fetch (last good revision kept): timed out\n".to_owned()
            )
        );
    }
}
