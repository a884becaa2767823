//! The terminal edge: logging to stderr, colour and progress decisions, and writing results to
//! stdout. The environment (`NO_COLOR`, `RUST_LOG`, whether stderr is a terminal) is read here
//! and only here.

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use agent::report::DiagnosticStyle;
use anyhow::Context as _;

use super::ColorWhen;

/// Installs the tracing subscriber: human-readable logs on stderr, filtered by `RUST_LOG` or
/// else by the `-v` count (warnings by default).
pub fn init_tracing(verbose: u8) {
    let default_level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Colours for diagnostics on stderr.
pub fn diagnostic_style(color: ColorWhen) -> DiagnosticStyle {
    let colored = match color {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    if colored {
        DiagnosticStyle::Color
    } else {
        DiagnosticStyle::Plain
    }
}

/// A spinner on stderr for a long step, shown only when stderr is a terminal so pipes, files
/// and CI logs stay clean. Cleared when dropped.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    pub fn start(message: impl Into<String>) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_message(message.into());
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress { bar: Some(bar) }
    }

    pub fn set_message(&self, message: impl Into<String>) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.into());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Writes a command's result to stdout.
///
/// # Errors
///
/// When stdout is closed; `main` treats a broken pipe as success.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
}

/// Writes diagnostics (already drawn) to stderr.
pub fn write_stderr(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut stderr = std::io::stderr().lock();
    // Nothing useful can be done when stderr itself is gone; the exit code still reports.
    let _ = stderr.write_all(text.as_bytes());
}
