//! The drift schedule: when the next drift check is due, from a cron expression and a `now`
//! the caller reads from its clock (this module never reads the clock itself).

use std::time::Duration;

use chrono::{DateTime, Utc};

/// Drift-check timing for one source.
#[derive(Debug, Clone)]
pub struct DriftTimer {
    schedule: cron::Schedule,
    next: Option<DateTime<Utc>>,
}

impl DriftTimer {
    /// A timer whose first firing is the schedule's first time after `now`.
    pub fn new(schedule: cron::Schedule, now: DateTime<Utc>) -> DriftTimer {
        let next = schedule.after(&now).next();
        DriftTimer { schedule, next }
    }

    /// The next firing; `None` when the schedule never fires again.
    pub fn next(&self) -> Option<DateTime<Utc>> {
        self.next
    }

    /// How long until the next firing (zero when due, `None` when never).
    pub fn until_next(&self, now: DateTime<Utc>) -> Option<Duration> {
        self.next
            .map(|next| (next - now).to_std().unwrap_or(Duration::ZERO))
    }

    /// True when a check is due at `now`; the timer then moves to the first firing after
    /// `now`, so missed firings (the agent was busy or asleep) collapse into one check.
    pub fn take_due(&mut self, now: DateTime<Utc>) -> bool {
        match self.next {
            Some(next) if next <= now => {
                self.next = self.schedule.after(&now).next();
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_cron;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn fires_once_per_due_time_and_collapses_missed_ones() {
        let mut timer = DriftTimer::new(
            parse_cron("*/5 * * * *").unwrap(),
            at("2026-01-01T10:01:00Z"),
        );
        assert_eq!(timer.next(), Some(at("2026-01-01T10:05:00Z")));
        assert_eq!(
            timer.until_next(at("2026-01-01T10:04:00Z")),
            Some(Duration::from_secs(60))
        );
        assert!(!timer.take_due(at("2026-01-01T10:04:59Z")));
        assert!(timer.take_due(at("2026-01-01T10:05:00Z")));
        assert_eq!(timer.next(), Some(at("2026-01-01T10:10:00Z")));
        // Asleep for half an hour: one check, then back on the grid.
        assert!(timer.take_due(at("2026-01-01T10:41:00Z")));
        assert!(!timer.take_due(at("2026-01-01T10:41:01Z")));
        assert_eq!(timer.next(), Some(at("2026-01-01T10:45:00Z")));
        assert_eq!(
            timer.until_next(at("2026-01-01T11:00:00Z")),
            Some(Duration::ZERO)
        );
    }
}
