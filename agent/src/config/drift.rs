//! The drift schedule: `drift` as written ([`DriftFile`]) and checked ([`DriftConfig`]): a cron
//! expression and what to do about drift ([`DriftMode`]).

use std::str::FromStr;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::Checker;

/// The drift schedule as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DriftFile {
    pub schedule: Spanned<String>,
    #[serde(default)]
    pub mode: DriftMode,
}

/// What the drift schedule does about drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftMode {
    /// Report drift as a commit status and a metric.
    #[default]
    Report,
    /// Re-apply the deployed revision.
    Correct,
}

/// The checked drift schedule.
#[derive(Debug, Clone)]
pub struct DriftConfig {
    pub schedule: cron::Schedule,
    pub mode: DriftMode,
}

/// Checks the drift schedule; `None` (with a problem recorded) when the cron expression is bad.
pub(super) fn check_drift(checker: &mut Checker<'_>, drift: DriftFile) -> Option<DriftConfig> {
    match parse_cron(&drift.schedule.value) {
        Ok(schedule) => Some(DriftConfig {
            schedule,
            mode: drift.mode,
        }),
        Err(message) => {
            checker.problem("drift.schedule", &drift.schedule, message);
            None
        }
    }
}

/// Parses a cron expression. Standard five-field expressions (minute hour day month weekday)
/// get a leading `0` seconds field, because the `cron` crate wants six or seven fields.
///
/// # Errors
///
/// A message saying why the expression is invalid.
pub fn parse_cron(text: &str) -> Result<cron::Schedule, String> {
    let text = text.trim();
    let n_fields = text.split_whitespace().count();
    let full = if n_fields == 5 {
        format!("0 {text}")
    } else {
        text.to_owned()
    };
    cron::Schedule::from_str(&full).map_err(|error| {
        format!("invalid cron expression {text:?}: {error} (use 5 fields: minute hour day month weekday)")
    })
}
