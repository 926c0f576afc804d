//! Leaf: `Deadline`, the only way msgperf waits. Every blocking call takes one (or the idle
//! timeout derived from one), so no wait in the tool is unbounded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by Ctrl-C, SIGTERM or SIGHUP: the running case ends early, no further case starts, and
/// any wait that can end early (a broker's start) gives up at once.
pub static STOP: AtomicBool = AtomicBool::new(false);

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// A point in time after which a wait gives up.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    pub fn after(d: Duration) -> Self {
        Deadline {
            at: Instant::now() + d,
        }
    }

    /// Time left, zero once passed.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub fn expired(&self) -> bool {
        Instant::now() >= self.at
    }

    /// Time left, at least one millisecond: for APIs where zero means "forever".
    pub fn remaining_nonzero(&self) -> Duration {
        self.remaining().max(Duration::from_millis(1))
    }
}
