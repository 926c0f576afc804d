//! The recorder: everything a role measures, preallocated when the role starts so that the
//! measurement loop only increments counters and histogram buckets.

use crate::result::{Counters, CpuUsage, EncodedHistogram, RoleResult};
use crate::sys;
use hdrhistogram::Histogram;

/// What a sample measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Send to reply received, on the initiator.
    Rtt = 0,
    /// Send timestamp in the message to arrival, on the receiver (one host clock).
    OneWay = 1,
    /// Time inside one send call.
    SendCall = 2,
    /// Time inside one receive call, including the wait for the message (a pingpong
    /// responder's runs from the return of its previous send, a few ns earlier).
    RecvCall = 3,
    /// Paced sends: from the message's intended send time to arrival (coordinated omission
    /// corrected).
    OneWayIntended = 4,
    /// Paced sends: how late the sender was behind its schedule.
    SendLag = 5,
    /// Paced sends, one-way, for messages sent while the reader was already waiting for one:
    /// a blocking reader had to be woken.
    OneWayReaderIdle = 6,
    /// Paced sends, one-way, for messages sent before the reader asked for them: it was
    /// busy, so no wake-up (the steady-state figure).
    OneWayReaderBusy = 7,
}

impl Metric {
    pub const ALL: [Metric; 8] = [
        Metric::Rtt,
        Metric::OneWay,
        Metric::SendCall,
        Metric::RecvCall,
        Metric::OneWayIntended,
        Metric::SendLag,
        Metric::OneWayReaderIdle,
        Metric::OneWayReaderBusy,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Metric::Rtt => "rtt_ns",
            Metric::OneWay => "one_way_ns",
            Metric::SendCall => "send_call_ns",
            Metric::RecvCall => "recv_call_ns",
            Metric::OneWayIntended => "one_way_from_intended_ns",
            Metric::SendLag => "send_lag_ns",
            Metric::OneWayReaderIdle => "one_way_reader_idle_ns",
            Metric::OneWayReaderBusy => "one_way_reader_busy_ns",
        }
    }
}

/// Histogram range: 1 ns to an hour, 3 significant digits (0.1% error).
const HIGHEST_NS: u64 = 3_600_000_000_000;
/// Interval length for the warm-up check.
const INTERVAL_NS: u64 = 100_000_000;
const MAX_INTERVALS: usize = 36_000;

pub struct Recorder {
    hists: [Histogram<u64>; 8],
    pub counters: Counters,
    start_ns: u64,
    end_ns: u64,
    usage_start: sys::Usage,
    cpus: Vec<usize>,
    interval_end: u64,
    interval_sum: u64,
    interval_count: u64,
    interval_means: Vec<u64>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        let h =
            || Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, 3).expect("valid histogram bounds");
        let mut r = Recorder {
            hists: std::array::from_fn(|_| h()),
            counters: Counters::default(),
            start_ns: 0,
            end_ns: 0,
            usage_start: sys::Usage::default(),
            cpus: Vec::with_capacity(4),
            interval_end: 0,
            interval_sum: 0,
            interval_count: 0,
            interval_means: Vec::with_capacity(MAX_INTERVALS),
        };
        r.reset();
        r
    }

    /// Starts the measured window now: forgets the warm-up.
    pub fn reset(&mut self) {
        for h in &mut self.hists {
            h.reset();
        }
        self.counters = Counters::default();
        self.usage_start = sys::thread_usage();
        self.start_ns = super::clock::now();
        self.end_ns = self.start_ns;
        self.interval_end = self.start_ns + INTERVAL_NS;
        self.interval_sum = 0;
        self.interval_count = 0;
        self.interval_means.clear();
        self.cpus.clear();
        self.note_cpu();
    }

    fn note_cpu(&mut self) {
        if let Some(c) = sys::current_cpu() {
            if !self.cpus.contains(&c) {
                self.cpus.push(c);
            }
        }
    }

    #[inline(always)]
    pub fn record(&mut self, m: Metric, ns: u64) {
        let h = &mut self.hists[m as usize];
        if h.record(ns.max(1)).is_err() {
            self.counters.out_of_range += 1;
            h.saturating_record(ns);
        }
    }

    /// Records the role's primary figure, also into 100 ms interval means.
    #[inline(always)]
    pub fn record_primary(&mut self, m: Metric, ns: u64, now: u64) {
        self.record(m, ns);
        if now >= self.interval_end {
            if self.interval_count > 0 && self.interval_means.len() < MAX_INTERVALS {
                self.interval_means
                    .push(self.interval_sum / self.interval_count);
            }
            self.interval_sum = 0;
            self.interval_count = 0;
            self.interval_end = now + INTERVAL_NS;
        }
        self.interval_sum += ns;
        self.interval_count += 1;
    }

    /// Marks the end of the measured window (the last message); `finish` uses it.
    #[inline(always)]
    pub fn mark_end(&mut self, now: u64) {
        self.end_ns = now;
    }

    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Closes the window: reads CPU usage and encodes the histograms that hold samples.
    pub fn finish(mut self, role: &str, error: Option<String>) -> RoleResult {
        let u = sys::thread_usage();
        self.note_cpu();
        let s = self.usage_start;
        RoleResult {
            role: role.to_string(),
            pid: std::process::id(),
            cpus_seen: self.cpus.clone(),
            measured_ns: self.end_ns.saturating_sub(self.start_ns),
            sent_total: 0,
            histograms: Metric::ALL
                .iter()
                .filter(|m| !self.hists[**m as usize].is_empty())
                .map(|m| {
                    (
                        m.key().to_string(),
                        EncodedHistogram::encode(&self.hists[*m as usize]),
                    )
                })
                .collect(),
            counters: self.counters.clone(),
            cpu: CpuUsage {
                user_ns: u.user_ns.saturating_sub(s.user_ns),
                sys_ns: u.sys_ns.saturating_sub(s.sys_ns),
                voluntary_switches: u.voluntary_switches.saturating_sub(s.voluntary_switches),
                involuntary_switches: u
                    .involuntary_switches
                    .saturating_sub(s.involuntary_switches),
                peak_rss_kib: u.max_rss_kib,
            },
            interval_means_ns: std::mem::take(&mut self.interval_means),
            error,
        }
    }
}
