//! The recorder: everything a role measures, preallocated when the role starts so that the
//! measurement loop only increments counters and histogram buckets.

pub use crate::result::Metric;
use crate::result::{Counters, CpuUsage, EncodedHistogram, IntervalHistogram, RoleId, RoleResult};
use crate::sys;
use hdrhistogram::Histogram;

/// Interval length for the warm-up check.
const INTERVAL_NS: u64 = 100_000_000;
const MAX_INTERVALS: usize = 36_000;
/// At most this many interval histograms are kept (an hour of 1 s intervals); a longer run's
/// later intervals count in the whole-run histogram only.
const MAX_INTERVAL_HISTOGRAMS: usize = 3_600;

/// A histogram of the primary metric for one interval (`--interval`): 2 significant digits,
/// so that starting the next one (zeroed memory, in the loop) costs a few microseconds.
fn interval_histogram() -> Histogram<u64> {
    crate::histogram::new(2)
}

pub struct Recorder {
    /// The role's metrics, and a histogram for each at its metric's slot.
    metrics: &'static [Metric],
    hists: Vec<Histogram<u64>>,
    figures: Vec<crate::result::Figure>,
    stopped_by: Option<String>,
    pub counters: Counters,
    start_ns: u64,
    /// The window's start on the wall clock (nanoseconds since the epoch), for logs.
    start_unix_ns: u64,
    end_ns: u64,
    usage_start: sys::Usage,
    process_start_ns: u64,
    cpus: Vec<usize>,
    interval_end: u64,
    interval_sum: u64,
    interval_count: u64,
    interval_means: Vec<u64>,
    /// The primary metric's histogram per `--interval`: the one being filled, when it ends,
    /// and those done (start and end as offsets from the window's start).
    interval_len_ns: u64,
    interval_metric: Option<Metric>,
    interval_hist: Histogram<u64>,
    interval_hist_start: u64,
    interval_hist_end: u64,
    interval_hists: Vec<(u64, u64, Histogram<u64>)>,
    /// Parts of this role that other threads measured (a subscriber's other channels).
    absorbed: Option<RoleResult>,
}

impl Recorder {
    /// A recorder for a role that records `metrics` (a workload's, with distinct slots), with a
    /// histogram of its primary metric per `interval`.
    pub fn new(metrics: &'static [Metric], interval: std::time::Duration) -> Self {
        // 3 significant digits: 0.1% error.
        let h = || crate::histogram::new(3);
        let slots = metrics.iter().map(|m| m.slot() + 1).max().unwrap_or(0);
        debug_assert_eq!(slots, metrics.len(), "a workload's metrics fill slots 0..n");
        let mut r = Recorder {
            metrics,
            hists: (0..slots).map(|_| h()).collect(),
            figures: Vec::new(),
            stopped_by: None,
            counters: Counters::default(),
            start_ns: 0,
            start_unix_ns: 0,
            end_ns: 0,
            usage_start: sys::Usage::default(),
            process_start_ns: 0,
            cpus: Vec::with_capacity(4),
            interval_end: 0,
            interval_sum: 0,
            interval_count: 0,
            interval_means: Vec::with_capacity(MAX_INTERVALS),
            interval_len_ns: (interval.as_nanos() as u64).max(1_000_000),
            interval_metric: None,
            interval_hist: interval_histogram(),
            interval_hist_start: 0,
            interval_hist_end: 0,
            interval_hists: Vec::new(),
            absorbed: None,
        };
        r.reset();
        r
    }

    /// Starts the measured window now: forgets the warm-up.
    pub fn reset(&mut self) {
        // An empty histogram is left untouched: zeroing it would make all its pages resident,
        // for metrics this role never records.
        for h in self.hists.iter_mut().filter(|h| !h.is_empty()) {
            h.reset();
        }
        self.counters = Counters::default();
        self.usage_start = sys::thread_usage();
        self.process_start_ns = sys::process_cpu_ns();
        self.start_ns = super::clock::now();
        self.start_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.end_ns = self.start_ns;
        self.interval_end = self.start_ns + INTERVAL_NS;
        self.interval_sum = 0;
        self.interval_count = 0;
        self.interval_means.clear();
        if !self.interval_hist.is_empty() {
            self.interval_hist.reset();
        }
        self.interval_hist_start = self.start_ns;
        self.interval_hist_end = self.start_ns + self.interval_len_ns;
        self.interval_hists.clear();
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
        let h = &mut self.hists[m.slot()];
        if h.record(ns.max(1)).is_err() {
            self.counters.out_of_range += 1;
            h.saturating_record(ns);
        }
    }

    /// Records the role's primary figure, also into 100 ms interval means and the histogram
    /// of the current `--interval`.
    #[inline(always)]
    pub fn record_primary(&mut self, m: Metric, ns: u64, now: u64) {
        self.record(m, ns);
        if now >= self.interval_hist_end {
            self.next_interval_histogram(now);
        }
        self.interval_metric = Some(m);
        self.interval_hist.saturating_record(ns.max(1));
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

    /// Closes the current interval's histogram and starts the one `now` falls in (intervals
    /// with no sample are kept, empty, so that times line up).
    #[cold]
    fn next_interval_histogram(&mut self, now: u64) {
        while now >= self.interval_hist_end {
            if self.interval_hists.len() < MAX_INTERVAL_HISTOGRAMS {
                let done = std::mem::replace(&mut self.interval_hist, interval_histogram());
                self.interval_hists.push((
                    self.interval_hist_start - self.start_ns,
                    self.interval_hist_end - self.start_ns,
                    done,
                ));
            } else {
                self.interval_hist.reset();
            }
            self.interval_hist_start = self.interval_hist_end;
            self.interval_hist_end += self.interval_len_ns;
        }
    }

    /// All the time recorded in metric `m` (its samples' sum, within the histogram's 0.1%).
    pub fn total_ns(&self, m: Metric) -> u64 {
        let h = &self.hists[m.slot()];
        (h.mean() * h.len() as f64) as u64
    }

    /// A figure of the workload's own (outside the measurement loop).
    pub fn figure(&mut self, name: &str, unit: &str, value: f64) {
        self.figures.push(crate::result::Figure {
            name: name.into(),
            unit: unit.into(),
            value,
        });
    }

    /// Why the role stopped, where that is a finding.
    pub fn stopped_by(&mut self, why: String) {
        self.stopped_by = Some(why);
    }

    /// Marks the end of the measured window (the last message); `finish` uses it.
    #[inline(always)]
    pub fn mark_end(&mut self, now: u64) {
        self.end_ns = now;
    }

    /// Marks the end of the window at a message just received and counted: the rate counts
    /// the messages received up to it (a reader that times every Nth message ends its window
    /// at the last one it timed, and those after it are outside).
    #[inline(always)]
    pub fn mark_end_received(&mut self, now: u64) {
        self.end_ns = now;
        self.counters.received_in_window = self.counters.messages_received;
    }

    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// The measured window so far: its start to the last mark.
    pub fn window_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Adds a part of this role that another thread measured (its histograms, counters, CPU
    /// and window), taken when this recorder finishes.
    pub fn absorb(&mut self, part: RoleResult) {
        self.absorbed = Some(match self.absorbed.take() {
            Some(mut a) => {
                RoleResult::add(&mut a, part);
                a
            }
            None => part,
        });
    }

    /// The intervals' histograms, the last one (cut by the window's end) included.
    fn interval_histograms(&mut self) -> Vec<IntervalHistogram> {
        let Some(metric) = self.interval_metric else {
            return Vec::new();
        };
        if !self.interval_hist.is_empty() && self.interval_hists.len() < MAX_INTERVAL_HISTOGRAMS {
            let end = self.end_ns.max(self.interval_hist_start);
            let last = std::mem::replace(&mut self.interval_hist, interval_histogram());
            self.interval_hists.push((
                self.interval_hist_start - self.start_ns,
                end - self.start_ns,
                last,
            ));
        }
        self.interval_hists
            .drain(..)
            .map(|(start_ns, end_ns, h)| IntervalHistogram {
                metric,
                start_ns,
                end_ns,
                histogram: EncodedHistogram::encode(&h),
            })
            .collect()
    }

    /// Closes the window: reads CPU usage and encodes the histograms that hold samples.
    pub fn finish(mut self, role: RoleId, error: Option<String>) -> RoleResult {
        let u = sys::thread_usage();
        let process_ns = sys::process_cpu_ns().saturating_sub(self.process_start_ns);
        self.note_cpu();
        let s = self.usage_start;
        let mut out = RoleResult {
            role,
            pid: std::process::id(),
            cpus_seen: self.cpus.clone(),
            pinned_cpu: None,
            measured_ns: self.end_ns.saturating_sub(self.start_ns),
            started_unix_ns: self.start_unix_ns,
            sent_total: 0,
            histograms: self
                .metrics
                .iter()
                .filter(|m| !self.hists[m.slot()].is_empty())
                .map(|m| (*m, EncodedHistogram::encode(&self.hists[m.slot()])))
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
                other_threads_ns: process_ns
                    .saturating_sub((u.user_ns + u.sys_ns).saturating_sub(s.user_ns + s.sys_ns)),
            },
            interval_ns: INTERVAL_NS,
            interval_means_ns: std::mem::take(&mut self.interval_means),
            interval_histograms: self.interval_histograms(),
            error,
            figures: std::mem::take(&mut self.figures),
            stopped_by: self.stopped_by.take(),
            host: None,
        };
        if let Some(part) = self.absorbed.take() {
            RoleResult::add(&mut out, part);
        }
        out
    }
}
