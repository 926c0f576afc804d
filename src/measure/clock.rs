//! The clock: CLOCK_MONOTONIC in nanoseconds, shared by all processes on a host (so one-way
//! latency between two local processes is one subtraction), with its resolution and the cost of
//! reading it measured on this machine, as the NML report asked of every figure.
//!
//! Where every role of a case runs on this host and its TSC is the kernel's clocksource (so
//! one counter, ticking at one rate on every CPU), the roles stamp messages with the TSC
//! instead, mapped to CLOCK_MONOTONIC's nanoseconds by one calibration that the runner hands to
//! each of them ([`SharedTsc`]): a stamp taken in one process and a reading in another then
//! subtract exactly, for less than a vDSO read costs (two a message at each end of a stream).

use crate::result::ClockInfo;
use crate::sys;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Now, in nanoseconds of CLOCK_MONOTONIC: through the host's shared TSC mapping while one
/// is in use ([`use_shared_tsc`]), else read from the kernel.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if INSTALLED.on.load(Ordering::Acquire) {
        return INSTALLED.read();
    }
    sys::monotonic_ns()
}

/// One mapping from the TSC to CLOCK_MONOTONIC's nanoseconds, the same in every process of a
/// case on this host: `mono0 + (tsc - tsc0) * ns_per_tick`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct SharedTsc {
    pub tsc0: u64,
    pub mono0: u64,
    pub ns_per_tick: f64,
}

impl SharedTsc {
    /// Now, through this mapping (CLOCK_MONOTONIC's reading where the TSC is not x86's).
    #[inline(always)]
    pub fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            self.at(sys::tsc())
        }
        #[cfg(not(target_arch = "x86_64"))]
        sys::monotonic_ns()
    }

    #[inline(always)]
    fn at(&self, tsc: u64) -> u64 {
        // Signed: a CPU's counter read just before the calibration's must not wrap.
        let ticks = tsc.wrapping_sub(self.tsc0) as i64;
        self.mono0
            .wrapping_add_signed((ticks as f64 * self.ns_per_tick) as i64)
    }
}

/// The mapping in use in this process, if any (read on every stamp: plain words, no lock).
struct Installed {
    on: AtomicBool,
    tsc0: AtomicU64,
    mono0: AtomicU64,
    ns_per_tick: AtomicU64,
}

static INSTALLED: Installed = Installed {
    on: AtomicBool::new(false),
    tsc0: AtomicU64::new(0),
    mono0: AtomicU64::new(0),
    ns_per_tick: AtomicU64::new(0),
};

impl Installed {
    /// The mapping stored (meaningful while `on`).
    #[inline(always)]
    fn map(&self) -> SharedTsc {
        SharedTsc {
            tsc0: self.tsc0.load(Ordering::Relaxed),
            mono0: self.mono0.load(Ordering::Relaxed),
            ns_per_tick: f64::from_bits(self.ns_per_tick.load(Ordering::Relaxed)),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn read(&self) -> u64 {
        self.map().now()
    }
}

/// Stamps with `map` from now on in this process, or with CLOCK_MONOTONIC again (`None`).
/// Called while no role of the process measures: between cases, or before a role starts.
pub fn use_shared_tsc(map: Option<SharedTsc>) {
    if installed() == map {
        return;
    }
    INSTALLED.on.store(false, Ordering::Release);
    if let Some(m) = map.filter(|_| cfg!(target_arch = "x86_64")) {
        INSTALLED.tsc0.store(m.tsc0, Ordering::Relaxed);
        INSTALLED.mono0.store(m.mono0, Ordering::Relaxed);
        INSTALLED
            .ns_per_tick
            .store(m.ns_per_tick.to_bits(), Ordering::Relaxed);
        INSTALLED.on.store(true, Ordering::Release);
    }
}

/// The shared TSC mapping this process stamps with now, if any.
pub fn installed() -> Option<SharedTsc> {
    INSTALLED
        .on
        .load(Ordering::Acquire)
        .then(|| INSTALLED.map())
}

/// Set to `monotonic` to stamp with CLOCK_MONOTONIC even where the TSC could be shared (to
/// compare the two, or on a host whose TSC is suspect).
pub const STAMPS_ENV: &str = "MSGPERF_STAMPS";

/// This host's shared TSC mapping, calibrated once per process (20 ms), or None where the TSC
/// is not the kernel's clocksource (it then may differ between CPUs or change its rate), the
/// CPU is not x86_64, or [`STAMPS_ENV`] says `monotonic`.
pub fn host_shared_tsc() -> Option<SharedTsc> {
    static HOST: OnceLock<Option<SharedTsc>> = OnceLock::new();
    *HOST.get_or_init(|| {
        let asked = std::env::var(STAMPS_ENV).unwrap_or_default();
        let source = clocksource();
        (cfg!(target_arch = "x86_64") && source == "tsc" && asked != "monotonic")
            .then(calibrate_shared_tsc)
            .flatten()
    })
}

/// The kernel's current clocksource (`tsc`, `kvm-clock`, `hpet`...).
fn clocksource() -> String {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Two TSC and CLOCK_MONOTONIC pairs 20 ms apart, each the tightest of 64 tries (the TSC read
/// on both sides of the kernel's, their middle taken).
fn calibrate_shared_tsc() -> Option<SharedTsc> {
    #[cfg(target_arch = "x86_64")]
    {
        let pair = || {
            let mut best = (u64::MAX, 0, 0);
            for _ in 0..64 {
                let a = sys::tsc();
                let m = sys::monotonic_ns();
                let b = sys::tsc();
                if b >= a && b - a < best.0 {
                    best = (b - a, a + (b - a) / 2, m);
                }
            }
            (best.1, best.2)
        };
        let (tsc0, mono0) = pair();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (tsc1, mono1) = pair();
        let ns_per_tick = (mono1.checked_sub(mono0)? as f64) / (tsc1.checked_sub(tsc0)? as f64);
        (ns_per_tick.is_finite() && ns_per_tick > 0.0).then_some(SharedTsc {
            tsc0,
            mono0,
            ns_per_tick,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

pub use crate::sys::IntervalClock;

/// Measures the clock: claimed resolution, smallest step seen, cost of one read, and the cost
/// of recording one sample in a histogram.
pub fn calibrate() -> ClockInfo {
    const READS: u64 = 200_000;
    let mut tick = u64::MAX;
    let mut last = sys::monotonic_ns();
    let start = last;
    for _ in 0..READS {
        let t = sys::monotonic_ns();
        if t > last {
            tick = tick.min(t - last);
        }
        last = t;
    }
    let read_cost_ns = (last - start) as f64 / READS as f64;

    let mut rec = super::Recorder::new(&[super::Metric::RTT], std::time::Duration::from_secs(1));
    let t0 = sys::monotonic_ns();
    for i in 0..READS {
        rec.record(super::Metric::RTT, 1_000 + (i & 0xFFFF));
    }
    let record_cost_ns = (sys::monotonic_ns() - t0) as f64 / READS as f64;
    let interval = IntervalClock::new();
    let t0 = sys::monotonic_ns();
    let mut sink = 0u64;
    for _ in 0..READS {
        sink = sink.wrapping_add(interval.now());
    }
    std::hint::black_box(sink);
    let interval_read_cost_ns = (sys::monotonic_ns() - t0) as f64 / READS as f64;
    let shared_tsc_stamp_cost_ns = host_shared_tsc().map(|m| {
        let t0 = sys::monotonic_ns();
        for _ in 0..READS {
            sink = sink.wrapping_add(m.now());
        }
        std::hint::black_box(sink);
        (sys::monotonic_ns() - t0) as f64 / READS as f64
    });
    ClockInfo {
        source: clocksource(),
        resolution_ns: sys::monotonic_resolution_ns(),
        smallest_step_ns: if tick == u64::MAX { 0 } else { tick },
        read_cost_ns,
        record_cost_ns,
        interval_read_cost_ns,
        shared_tsc_stamp_cost_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_mapping_counts_ticks_from_its_calibration_both_ways() {
        let (tsc0, mono0) = (1_000_000, 5_000_000);
        let map = SharedTsc {
            tsc0,
            mono0,
            ns_per_tick: 0.4,
        };
        assert_eq!(map.at(tsc0), mono0);
        assert_eq!(map.at(tsc0 + 2_500), mono0 + 1_000);
        // A counter read just before the calibration's, on another CPU: earlier, not wrapped.
        assert_eq!(map.at(tsc0 - 10), mono0 - 4);
        // An hour at 2.5 GHz: still to the nanosecond.
        let at = map.at(tsc0 + 3_600 * 2_500_000_000u64);
        assert_eq!(at, mono0 + 3_600_000_000_000);
    }

    #[test]
    fn a_shared_mapping_reads_as_the_monotonic_clock_does() {
        let Some(map) = host_shared_tsc() else {
            return; // no TSC to share here: CLOCK_MONOTONIC stamps every message
        };
        // The closest of many tries: a preempted one is far off, a wrong mapping every one.
        let closest = (0..1_000)
            .map(|_| {
                let before = sys::monotonic_ns();
                let t = map.now();
                let after = sys::monotonic_ns();
                t.abs_diff(before / 2 + after / 2)
                    .saturating_sub(after.saturating_sub(before) / 2)
            })
            .min()
            .unwrap();
        assert!(closest < 100_000, "{closest} ns from CLOCK_MONOTONIC");
        let (a, b) = (map.now(), map.now());
        assert!(b >= a, "{a} then {b}");
    }
}
