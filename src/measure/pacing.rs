//! Open-loop pacing: message `i` is due at `start + i * period`, whatever happened to message
//! `i - 1`. A sender that stalls does not push the schedule back, so the latency measured from
//! each message's intended send time includes the stall (no coordinated omission), and the
//! sender's lag behind its schedule is a figure of its own.

use std::sync::atomic::{AtomicBool, Ordering};

/// Time as the pacer sees it: the real monotonic clock, or a fake one in tests.
pub trait Clock {
    fn now(&mut self) -> u64;
    /// Returns at or soon after `t` (never before).
    fn wait_until(&mut self, t: u64);
}

/// The real clock: sleeps in the kernel for long waits, spins the last stretch, because a
/// sleeping thread wakes tens of microseconds late on this kind of machine. A raised `stop`
/// ends a wait early (within a slice), so a slow schedule does not delay the end of a case.
pub struct RealClock<'a> {
    pub stop: &'a AtomicBool,
}

/// Below this, waiting spins instead of sleeping.
const SPIN_NS: u64 = 100_000;
/// The longest sleep between looks at `stop`.
const SLICE_NS: u64 = 50_000_000;

impl Clock for RealClock<'_> {
    fn now(&mut self) -> u64 {
        super::clock::now()
    }
    fn wait_until(&mut self, t: u64) {
        loop {
            let now = super::clock::now();
            if now >= t || self.stop.load(Ordering::Relaxed) {
                return;
            }
            let left = t - now;
            if left > SPIN_NS {
                std::thread::sleep(std::time::Duration::from_nanos(
                    (left - SPIN_NS).min(SLICE_NS),
                ));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// A schedule at a fixed rate, or none (`max`: every message is due at once).
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    start_ns: u64,
    period_ns: u64,
}

impl Schedule {
    /// `rate_hz` None or 0 means as fast as possible.
    pub fn new(start_ns: u64, rate_hz: Option<f64>) -> Self {
        let period_ns = rate_hz
            .filter(|r| *r > 0.0)
            .map_or(0, |r| (1e9 / r).round().max(1.0) as u64);
        Schedule {
            start_ns,
            period_ns,
        }
    }

    pub fn paced(&self) -> bool {
        self.period_ns > 0
    }

    /// When message `i` (counted from the schedule's start) is due.
    #[inline(always)]
    pub fn intended(&self, i: u64) -> u64 {
        self.start_ns + i * self.period_ns
    }

    /// Waits until message `i` is due; returns its intended send time. A late sender does not
    /// wait at all: it sends at once, and its lag shows in `now - intended`.
    #[inline(always)]
    pub fn wait_for(&self, i: u64, clock: &mut impl Clock) -> u64 {
        let due = self.intended(i);
        if self.paced() {
            clock.wait_until(due);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Time moves only when someone waits or works.
    struct FakeClock {
        now: u64,
    }

    impl Clock for FakeClock {
        fn now(&mut self) -> u64 {
            self.now
        }
        fn wait_until(&mut self, t: u64) {
            self.now = self.now.max(t);
        }
    }

    /// Sends `n` messages at `rate`, each send costing `cost(i)` ns; returns the send times
    /// and the intended ones.
    fn simulate(rate: f64, n: u64, cost: impl Fn(u64) -> u64) -> (Vec<u64>, Vec<u64>) {
        let mut clock = FakeClock { now: 1_000 };
        let s = Schedule::new(clock.now, Some(rate));
        let (mut sent, mut intended) = (Vec::new(), Vec::new());
        for i in 0..n {
            intended.push(s.wait_for(i, &mut clock));
            sent.push(clock.now());
            clock.now += cost(i);
        }
        (sent, intended)
    }

    #[test]
    fn a_sender_that_keeps_up_holds_the_rate_exactly() {
        // 1 kHz for 10 s, each send taking 20 us.
        let (sent, _) = simulate(1_000.0, 10_000, |_| 20_000);
        let span = (sent[sent.len() - 1] - sent[0]) as f64 / 1e9;
        let rate = (sent.len() - 1) as f64 / span;
        assert!((rate - 1_000.0).abs() / 1_000.0 < 0.001, "rate {rate}");
    }

    #[test]
    fn a_stall_is_not_hidden_coordinated_omission_is_corrected() {
        // 1 kHz; message 500's send stalls the sender for 100 ms.
        let (sent, intended) =
            simulate(
                1_000.0,
                1_000,
                |i| if i == 500 { 100_000_000 } else { 10_000 },
            );
        // The messages queued behind the stall were due long before they were sent: measured
        // from their intended time, the worst one waited the whole stall.
        let worst_lag = sent
            .iter()
            .zip(&intended)
            .map(|(s, i)| s - i)
            .max()
            .unwrap();
        assert!(worst_lag >= 99_000_000, "worst lag {worst_lag} ns");
        // The schedule did not move: the sender catches up and message 999 is due at 999 ms.
        assert_eq!(intended[999] - intended[0], 999_000_000);
        // A closed-loop sender (next send = previous + period) would have hidden it: its
        // latency from "send time" never sees more than one message's stall.
        let lag_after = sent[700] - intended[700];
        assert_eq!(lag_after, 0, "caught up by message 700");
    }

    #[test]
    fn max_rate_never_waits() {
        let mut clock = FakeClock { now: 5 };
        let s = Schedule::new(clock.now, None);
        assert!(!s.paced());
        assert_eq!(s.wait_for(1_000_000, &mut clock), 5);
        assert_eq!(clock.now(), 5);
    }
}
