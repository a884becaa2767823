//! Go `time.ParseDuration` strings (`30s`, `1m30s`, `1.5h`, `500ms`), the format KubeVela uses
//! for step `timeout` and the `suspend` step's `duration`.

use std::time::Duration;

/// A duration string that Go's `time.ParseDuration` would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason}")]
pub struct DurationError {
    pub text: String,
    pub reason: &'static str,
}

/// Parses a Go duration. Negative durations are rejected: a timeout or pause below zero has no
/// meaning in a workflow.
///
/// # Errors
/// Empty text, a missing or unknown unit, or a number that does not parse.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let fail = |reason| DurationError {
        text: text.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    if trimmed == "0" {
        return Ok(Duration::ZERO);
    }
    if trimmed.is_empty() {
        return Err(fail("empty"));
    }
    let mut rest = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if rest.starts_with('-') {
        return Err(fail("negative"));
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(fail("expected a number"));
        }
        let number: f64 = rest[..number_len].parse().map_err(|_| fail("bad number"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(fail("missing unit")),
            _ => return Err(fail("unknown unit")),
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    Ok(Duration::from_secs_f64(total))
}
