//! The clock: CLOCK_MONOTONIC in nanoseconds, shared by all processes on a host (so one-way
//! latency between two local processes is one subtraction), with its resolution and the cost of
//! reading it measured on this machine, as the NML report asked of every figure.

use crate::result::ClockInfo;
use crate::sys;

/// Now, in nanoseconds of CLOCK_MONOTONIC.
#[inline(always)]
pub fn now() -> u64 {
    sys::monotonic_ns()
}

pub use crate::sys::IntervalClock;

/// Measures the clock: claimed resolution, smallest step seen, cost of one read, and the cost
/// of recording one sample in a histogram.
pub fn calibrate() -> ClockInfo {
    const READS: u64 = 200_000;
    let mut tick = u64::MAX;
    let mut last = now();
    let start = last;
    for _ in 0..READS {
        let t = now();
        if t > last {
            tick = tick.min(t - last);
        }
        last = t;
    }
    let read_cost_ns = (last - start) as f64 / READS as f64;

    let mut rec = super::Recorder::new(&[super::Metric::RTT], std::time::Duration::from_secs(1));
    let t0 = now();
    for i in 0..READS {
        rec.record(super::Metric::RTT, 1_000 + (i & 0xFFFF));
    }
    let record_cost_ns = (now() - t0) as f64 / READS as f64;
    let interval = IntervalClock::new();
    let t0 = now();
    let mut sink = 0u64;
    for _ in 0..READS {
        sink = sink.wrapping_add(interval.now());
    }
    std::hint::black_box(sink);
    let interval_read_cost_ns = (now() - t0) as f64 / READS as f64;
    ClockInfo {
        source: std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into()),
        resolution_ns: sys::monotonic_resolution_ns(),
        smallest_step_ns: if tick == u64::MAX { 0 } else { tick },
        read_cost_ns,
        record_cost_ns,
        interval_read_cost_ns,
    }
}
