//! Exponential backoff with a cap, as plain data: the caller owns the clock and the sleeping.
//! Used for git fetch failures and forge API retries, so a failing remote is retried ever more
//! slowly but never given up on, and never in a tight loop.

use std::time::Duration;

/// Exponential backoff state: `base · 2^failures`, capped at `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    failures: u32,
}

impl Backoff {
    /// A backoff starting at `base` and never waiting longer than `cap`.
    pub fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff {
            base,
            cap: cap.max(base),
            failures: 0,
        }
    }

    /// Records a failure and returns how long to wait before the next attempt.
    pub fn fail(&mut self) -> Duration {
        let delay = self.current();
        self.failures = self.failures.saturating_add(1);
        delay
    }

    /// Records a success: the next failure starts from `base` again.
    pub fn succeed(&mut self) {
        self.failures = 0;
    }

    /// Failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The wait that the next [`Backoff::fail`] will return.
    pub fn current(&self) -> Duration {
        // 2^20 · base is far past any sane cap; stop doubling there to avoid overflow.
        let factor = 1u32 << self.failures.min(20);
        self.base.saturating_mul(factor).min(self.cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets_on_success() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let delays: Vec<u64> = (0..6).map(|_| backoff.fail().as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 10, 10]);
        assert_eq!(backoff.failures(), 6);
        backoff.succeed();
        assert_eq!(backoff.fail(), Duration::from_secs(1));
    }

    #[test]
    fn many_failures_do_not_overflow() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(300));
        for _ in 0..1000 {
            backoff.fail();
        }
        assert_eq!(backoff.current(), Duration::from_secs(300));
    }
}
