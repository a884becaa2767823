//! How much work one evaluation may do. A template can ask for unbounded work (two nested
//! comprehensions over `list.Range(0, 3000, 1)` make nine million values); the engine counts
//! its steps and stops at the budget or the deadline, and the evaluation then ends in one
//! [`ErrorKind::Budget`] or [`ErrorKind::Deadline`] error instead of its value.
//!
//! A step is one value (vertex), scope (environment) or conjunct made, 64 bytes of string
//! built, an error kept or copied (plus a step per 64 bytes of it), or 64 conjuncts or errors
//! compared when a value is given one more: what an evaluation's memory and time grow with. Counting is an addition and a comparison
//! per step; the clock is read only every [`CLOCK_EVERY`] steps.

use std::time::{Duration, Instant};

use crate::span::Span;
use crate::{Error, ErrorKind};

/// Limits on one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Steps one evaluation may take (see the module doc).
    pub steps: u64,
    /// When evaluation stops, if at some time. A renderer sets one per app, shared by the
    /// evaluations of its templates.
    pub deadline: Option<Deadline>,
}

/// A moment evaluation stops at, and the time limit it was set from (for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    pub at: Instant,
    pub limit: Duration,
}

impl Deadline {
    /// The deadline `limit` from now (none when that is past the clock's range).
    pub fn after(limit: Duration) -> Option<Deadline> {
        Instant::now()
            .checked_add(limit)
            .map(|at| Deadline { at, limit })
    }
}

impl Budget {
    /// Steps allowed by default: KubeVela's conformance examples take at most 2,863 steps per
    /// evaluation (`CUE_STATS=1`), so this leaves a margin of 170 times; a step
    /// costs at most a few hundred bytes (a vertex is the largest), so one evaluation stays
    /// within about 150 MB.
    pub const DEFAULT_STEPS: u64 = 500_000;

    /// This budget with a deadline `limit` from now.
    pub fn with_time_limit(mut self, limit: Duration) -> Budget {
        self.deadline = Deadline::after(limit);
        self
    }

    /// No step limit and no deadline.
    pub const UNLIMITED: Budget = Budget {
        steps: u64::MAX,
        deadline: None,
    };
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            steps: Budget::DEFAULT_STEPS,
            deadline: None,
        }
    }
}

/// Steps between two readings of the clock.
const CLOCK_EVERY: u64 = 1 << 14;

/// Bytes of built string that count as one step.
pub(super) const BYTES_PER_STEP: usize = 64;

/// Conjuncts or errors compared (when a vertex is given one more) that count as one step.
pub(super) const COMPARED_PER_STEP: u64 = 64;

/// Why an evaluation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exceeded {
    Steps(u64),
    Deadline(Duration),
}

/// The running count of one evaluation against its [`Budget`].
#[derive(Debug)]
pub(super) struct Meter {
    spent: u64,
    /// The step count at which [`Meter::check`] runs next: the limit, or the next clock
    /// reading when there is a deadline.
    check_at: u64,
    budget: Budget,
    exceeded: Option<Exceeded>,
}

impl Meter {
    pub(super) fn new(budget: Budget) -> Meter {
        let mut meter = Meter {
            spent: 0,
            check_at: 0,
            budget,
            exceeded: None,
        };
        meter.schedule();
        meter
    }

    /// Counts `steps`; past the next check point, checks the limit and the clock.
    #[inline]
    pub(super) fn charge(&mut self, steps: u64) {
        self.spent = self.spent.saturating_add(steps);
        if self.spent >= self.check_at {
            self.check();
        }
    }

    #[cold]
    fn check(&mut self) {
        if self.exceeded.is_some() {
            self.check_at = u64::MAX;
            return;
        }
        if self.spent > self.budget.steps {
            self.exceeded = Some(Exceeded::Steps(self.budget.steps));
        } else if let Some(deadline) = self.budget.deadline
            && Instant::now() >= deadline.at
        {
            self.exceeded = Some(Exceeded::Deadline(deadline.limit));
        }
        self.schedule();
    }

    fn schedule(&mut self) {
        self.check_at = if self.exceeded.is_some() {
            u64::MAX
        } else if self.budget.deadline.is_some() {
            self.spent
                .saturating_add(CLOCK_EVERY)
                .min(self.budget.steps.saturating_add(1))
        } else {
            self.budget.steps.saturating_add(1)
        };
    }

    /// Whether the evaluation must stop.
    #[inline]
    pub(super) fn exceeded(&self) -> bool {
        self.exceeded.is_some()
    }

    /// Steps counted so far.
    pub(super) fn spent(&self) -> u64 {
        self.spent
    }

    /// The error an evaluation over its budget ends in, at `span`.
    pub(super) fn error(&self, span: Span) -> Option<Error> {
        let (kind, message) = match self.exceeded? {
            Exceeded::Steps(steps) => (
                ErrorKind::Budget,
                format!("evaluation stopped: it exceeded its budget of {steps} steps"),
            ),
            Exceeded::Deadline(limit) => (
                ErrorKind::Deadline,
                format!("evaluation stopped: it ran past its deadline of {limit:?}"),
            ),
        };
        Some(Error::new(kind, message, span))
    }
}
