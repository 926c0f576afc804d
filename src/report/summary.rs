//! Figures computed from a case's recorded results: percentiles from the histograms (never
//! stored precomputed), rates, CPU per message, and the ratio to the floor.

use crate::result::{
    CaseResult, FloorKind, Metric, RoleId, RoleKind, RoleResult, Wait, ENCODED_BYTES, MEMCPY_NS,
};
use hdrhistogram::Histogram;
use serde::Serialize;

/// The percentiles a table shows, with the sample count each one needs: at least ten samples
/// beyond it, or it is not shown as if it were known.
pub const PERCENTILES: [(f64, &str); 5] = [
    (50.0, "p50"),
    (90.0, "p90"),
    (99.0, "p99"),
    (99.9, "p99.9"),
    (99.99, "p99.99"),
];

pub fn samples_needed(pct: f64) -> u64 {
    (10.0 / (1.0 - pct / 100.0)).round() as u64
}

/// A latency distribution in nanoseconds; a percentile the sample count cannot support is None.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Distribution {
    pub samples: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub stdev_ns: f64,
    pub p50_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub p99_9_ns: Option<u64>,
    pub p99_99_ns: Option<u64>,
    pub max_ns: u64,
}

impl Distribution {
    pub fn of(h: &Histogram<u64>) -> Self {
        let n = h.len();
        let p = |i: usize| {
            let pct = PERCENTILES[i].0;
            (n >= samples_needed(pct)).then(|| h.value_at_percentile(pct))
        };
        Distribution {
            samples: n,
            min_ns: h.min(),
            mean_ns: h.mean(),
            stdev_ns: h.stdev(),
            p50_ns: p(0),
            p90_ns: p(1),
            p99_ns: p(2),
            p99_9_ns: p(3),
            p99_99_ns: p(4),
            max_ns: h.max(),
        }
    }

    /// The percentiles of [`PERCENTILES`], in that order.
    pub fn percentiles(&self) -> [Option<u64>; 5] {
        [
            self.p50_ns,
            self.p90_ns,
            self.p99_ns,
            self.p99_9_ns,
            self.p99_99_ns,
        ]
    }
}

/// Figures of one role.
#[derive(Clone, Debug, Serialize)]
pub struct RoleSummary {
    pub role: String,
    pub role_id: RoleId,
    pub pid: u32,
    pub cpus_seen: Vec<usize>,
    /// The host it ran on, if not the runner's (`--place`).
    pub host: Option<String>,
    /// How far its clock's measured offset from the runner's may be off (a role on another
    /// host), ns.
    pub clock_bound_ns: Option<u64>,
    /// Messages this role sent or received, whichever is more: the "per message" divisor.
    pub messages: u64,
    pub send_call_avg_ns: Option<f64>,
    pub send_call_max_ns: Option<u64>,
    pub recv_call_avg_ns: Option<f64>,
    pub recv_call_max_ns: Option<u64>,
    pub cpu_user_ns_per_msg: f64,
    pub cpu_sys_ns_per_msg: f64,
    /// Share of the measured window this role spent on a CPU.
    pub cpu_utilization_pct: f64,
    pub context_switches_per_msg: f64,
    /// The involuntary ones among them: the role's thread, runnable, lost its CPU to another
    /// thread (on one CPU, which of two peers runs first can decide a round trip).
    pub preempted_per_msg: f64,
    pub read_calls_per_s: f64,
    pub new_messages_per_s: f64,
    pub peak_rss_kib: u64,
    /// CPU of the role's process outside its thread (a middleware's own threads) per message;
    /// None where roles were threads of one process or the role is a broker.
    pub other_threads_ns_per_msg: Option<f64>,
    /// A receiving role's own one-way latency and delivery counts (each subscriber's).
    pub latency: Option<Distribution>,
    /// How far its one-way figures may be off across hosts: its clock's bound plus its
    /// senders' (those on other hosts), ns.
    pub one_way_bound_ns: Option<u64>,
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub overwritten: u64,
    pub error: Option<String>,
}

/// Typed payloads: what encoding and decoding a body cost, beside a copy of as many bytes on
/// the same CPUs, timed the same way.
#[derive(Clone, Debug, Serialize)]
pub struct Marshalling {
    /// `TYPE:FORMAT`.
    pub payload: String,
    /// The mean encoded body, bytes.
    pub encoded_bytes: f64,
    /// A copy of that many bytes (the median, over the roles that timed one), ns.
    pub memcpy_ns: f64,
    pub encode: Option<Distribution>,
    pub decode: Option<Distribution>,
    /// Zero-copy formats (`codec`): checking a body and reading its fields in place.
    pub access: Option<Distribution>,
    /// p50 / memcpy.
    pub encode_vs_memcpy: Option<f64>,
    pub decode_vs_memcpy: Option<f64>,
}

/// Figures of one case, for the table, JSON and CSV.
#[derive(Clone, Debug, Serialize)]
pub struct CaseSummary {
    pub transport: String,
    /// The transport's `--opt` values, `key=value` separated by spaces.
    pub options: String,
    pub workload: String,
    pub size_bytes: usize,
    pub placement: String,
    /// CPUs the roles were pinned to, `a/b` (`-` unpinned).
    pub cpus: String,
    pub roles_as: String,
    /// How readers waited: `poll`, or the transport's own strategy inside a blocking call
    /// (`spin`, `spin-yield`, `block`).
    pub wait: String,
    /// What the latency figures are (`round trip`), as the workload recorded it...
    pub latency_kind: String,
    /// ...and what that means, for the notes under a table.
    pub latency_meaning: String,
    pub latency: Option<Distribution>,
    pub msgs_per_s: f64,
    /// The primary rate's messages in bytes, one direction, in MiB/s (2^20 B/s).
    pub mib_per_s: f64,
    /// The floor's figure this case divides by: round-trip p50 (ns) or MB/s.
    pub floor_kind: Option<FloorKind>,
    pub floor_p50_ns: Option<u64>,
    pub floor_mib_per_s: Option<f64>,
    /// p50 / floor p50 for round trips, MB/s / floor MB/s for streams.
    pub vs_floor: Option<f64>,
    /// Why the ratio to the floor is outside 0.8x-1.25x, where it is.
    pub floor_note: Option<String>,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// Latest-value transports: messages overwritten before a read saw them.
    pub overwritten: u64,
    /// Paced sends (`--rate`): the target (per publisher), and how far the achieved rate is
    /// from it (deliveries per second over publishers x subscribers).
    pub rate_hz: Option<f64>,
    pub rate_error_pct: Option<f64>,
    /// Paced sends: latency from each message's intended send time (coordinated omission
    /// corrected), and how late the sender was behind its schedule.
    pub latency_from_intended: Option<Distribution>,
    pub send_lag: Option<Distribution>,
    /// Paced sends, split by what the message found: a reader already waiting for it (so a
    /// blocking reader had to be woken) or a busy one (the steady-state figure).
    pub latency_reader_idle: Option<Distribution>,
    pub latency_reader_busy: Option<Distribution>,
    /// pubsub: the roles and how copies reach the subscribers.
    pub fan_out: Option<String>,
    /// Network transports: bytes on the wire per message sent (both directions, headers and
    /// acknowledgements included), and how much of that is not payload.
    pub wire_bytes_per_msg: Option<f64>,
    pub wire_overhead_bytes_per_msg: Option<f64>,
    /// Across hosts, the largest of its readers' one-way bounds, ns.
    pub one_way_bound_ns: Option<u64>,
    pub roles: Vec<RoleSummary>,
    pub error: Option<String>,
    pub interrupted: bool,
    /// `--n`, and what ran the workload's concurrent parts (pairs, spawn, timers, connect).
    /// The workload's parameters that tables name beside it, `key=value` separated by spaces.
    pub params: String,
    /// The workload's own figures, every role's, as `name [unit]` and value.
    pub figures: Vec<(String, f64)>,
    /// Typed payloads: encode, decode and their ratio to a copy.
    pub marshalling: Option<Marshalling>,
    /// Why a role stopped where that is a finding (`connect --hold`).
    pub stopped_by: Option<String>,
}

fn rate(n: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 * 1e9 / ns as f64
    }
}

fn role_summary(r: &RoleResult, own_process: bool) -> RoleSummary {
    let c = &r.counters;
    let messages = c
        .messages_sent
        .max(c.messages_received)
        .max(c.relayed)
        .max(1);
    let call = |m: Metric| {
        r.histogram(m)
            .filter(|h| !h.is_empty())
            .map(|h| (h.mean(), h.max()))
    };
    let send = call(Metric::SEND_CALL);
    let recv = call(Metric::RECV_CALL);
    RoleSummary {
        role: r.role.to_string(),
        role_id: r.role,
        pid: r.pid,
        host: r.host.as_ref().map(|h| h.name.clone()),
        clock_bound_ns: r
            .host
            .as_ref()
            .and_then(|h| h.clock.as_ref())
            .map(|c| c.bound_ns),
        cpus_seen: r.cpus_seen.clone(),
        messages,
        send_call_avg_ns: send.map(|s| s.0),
        send_call_max_ns: send.map(|s| s.1),
        recv_call_avg_ns: recv.map(|s| s.0),
        recv_call_max_ns: recv.map(|s| s.1),
        cpu_user_ns_per_msg: r.cpu.user_ns as f64 / messages as f64,
        cpu_sys_ns_per_msg: r.cpu.sys_ns as f64 / messages as f64,
        cpu_utilization_pct: if r.measured_ns == 0 {
            0.0
        } else {
            (r.cpu.user_ns + r.cpu.sys_ns) as f64 * 100.0 / r.measured_ns as f64
        },
        context_switches_per_msg: (r.cpu.voluntary_switches + r.cpu.involuntary_switches) as f64
            / messages as f64,
        preempted_per_msg: r.cpu.involuntary_switches as f64 / messages as f64,
        read_calls_per_s: rate(c.read_calls, r.measured_ns),
        new_messages_per_s: rate(c.received_in_window(), r.measured_ns),
        peak_rss_kib: r.cpu.peak_rss_kib,
        other_threads_ns_per_msg: (own_process && r.role.kind != RoleKind::BROKER)
            .then(|| r.cpu.other_threads_ns as f64 / messages as f64),
        latency: r
            .histogram(Metric::ONE_WAY)
            .filter(|h| !h.is_empty())
            .map(|h| Distribution::of(&h)),
        one_way_bound_ns: None,
        received: c.messages_received,
        lost: c.lost,
        duplicated: c.duplicated,
        reordered: c.reordered,
        overwritten: c.overwritten,
        error: r.error.clone(),
    }
}

/// Each reading role's one-way bound across hosts: its clock's bound plus the largest of the
/// roles that send to it (the others that measure no one-way latency, brokers aside).
fn with_one_way_bounds(mut roles: Vec<RoleSummary>) -> Vec<RoleSummary> {
    let senders = roles
        .iter()
        .filter(|r| r.latency.is_none() && r.role_id.kind != RoleKind::BROKER)
        .filter_map(|r| r.clock_bound_ns)
        .max();
    for r in roles.iter_mut().filter(|r| r.latency.is_some()) {
        r.one_way_bound_ns = match (r.clock_bound_ns, senders) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
    }
    roles
}

/// A metric over every role that recorded it, histograms added (a fan-out's subscribers).
pub(crate) fn merged(case: &CaseResult, m: Metric) -> Option<Histogram<u64>> {
    let mut out: Option<Histogram<u64>> = None;
    for h in case.roles.iter().filter_map(|r| r.histogram(m)) {
        match out.as_mut() {
            Some(m) => {
                let _ = m.add(&h);
            }
            None => out = Some(h),
        }
    }
    out.filter(|h| !h.is_empty())
}

/// The histogram that carries a case's latency (the metric the workload named, every role
/// that recorded it merged), the message rate behind it, and how many roles recorded it.
fn primary(case: &CaseResult) -> Option<(Histogram<u64>, f64, usize)> {
    let m = case.latency_metric;
    let h = merged(case, m)?;
    let roles: Vec<&RoleResult> = case
        .roles
        .iter()
        .filter(|r| r.histograms.contains_key(&m))
        .collect();
    let rate = roles
        .iter()
        .map(|r| {
            // A reader's window opens at its first message, so the messages inside it are one
            // fewer; a round trip's opens before its first send.
            let n = if case.latency_kind.from_send {
                r.counters.messages_sent
            } else {
                r.counters.received_in_window().saturating_sub(1)
            };
            rate(n, r.measured_ns)
        })
        .sum();
    Some((h, rate, roles.len()))
}

/// Loopback bytes per message and payload bytes per message. The wire also carried the
/// warm-up, so the measured message count is scaled by the active role's total to measured
/// ratio (the session's few control messages are left in: a small overcount).
fn wire_per_msg(case: &CaseResult) -> Option<(f64, f64)> {
    let w = case.wire?;
    let active = case.roles.first()?;
    let measured: u64 = case.roles.iter().map(|r| r.counters.messages_sent).sum();
    let payload: u64 = case.roles.iter().map(|r| r.counters.bytes_sent).sum();
    if measured == 0 || active.counters.messages_sent == 0 {
        return None;
    }
    let scale = (active.sent_total as f64 / active.counters.messages_sent as f64).max(1.0);
    // A fan-out sends a copy per subscriber: the wire figure is per delivered copy.
    let msgs = measured as f64 * scale * case.config.subs as f64;
    Some((w.bytes as f64 / msgs, payload as f64 / measured as f64))
}

/// Bytes in a MiB: sizes (`4k` = 4096 B) and rates (MiB/s) use one convention, binary.
const MIB: f64 = 1_048_576.0;

/// Why a ratio to the floor falls outside 0.8x-1.25x, from what the case recorded.
fn floor_note(case: &CaseResult, ratio: f64, latency: Option<&Distribution>) -> Option<String> {
    if (0.8..=1.25).contains(&ratio) {
        return None;
    }
    let cfg = &case.config;
    let samples = latency.map_or(0, |d| d.samples);
    let window = cfg.duration.unwrap_or_default();
    let cross = cfg.cpus.0.is_some() && cfg.cpus.1.is_some() && cfg.cpus.0 != cfg.cpus.1;
    let spins = cfg
        .effective_options
        .get("wait")
        .is_some_and(|w| w == "spin");
    Some(
        if let Some(pct) = case.other_load_pct.filter(|&p| p >= 20.0) {
            format!("other programs used {pct:.0}% of the pinned CPUs: stop them, or pin elsewhere")
        } else if ratio > 1.0 && cfg.param("payload").is_some_and(|p| p != "bytes") {
            "the floor moves bytes; this case also encodes and decodes every body (see the marshalling table for what that costs)".into()
        } else if samples < 1000 {
            format!("only {samples} samples: measure longer (--duration)")
        } else if window < std::time::Duration::from_secs(1) {
            format!(
            "measured for {} ms only, and the floor as briefly: on this kind of VM short runs swing; use --duration 2s or bench/ratios.py --repeat 5",
            window.as_millis()
        )
        } else if cross && !spins {
            "between two CPUs a blocking reader's pace depends on how soon its idle CPU wakes, which swings from run to run on a VM: compare medians of several runs (bench/ratios.py --repeat 5)".into()
        } else {
            "outside 0.8x-1.25x: msgperf's own work per message (framing, timestamps, checks) or noise; compare medians of several runs (bench/ratios.py --repeat 5)".into()
        },
    )
}

/// The marshalling figures of a case with a typed payload.
fn marshalling(case: &CaseResult) -> Option<Marshalling> {
    let payload = case.config.param("payload").filter(|p| *p != "bytes")?;
    let mean = |name: &str| {
        let v: Vec<f64> = case
            .roles
            .iter()
            .flat_map(|r| &r.figures)
            .filter(|f| f.name == name)
            .map(|f| f.value)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let memcpy_ns = mean(MEMCPY_NS).unwrap_or(0.0);
    let dist = |m: Metric| merged(case, m).map(|h| Distribution::of(&h));
    let (encode, decode) = (dist(Metric::ENCODE), dist(Metric::DECODE));
    let ratio = |d: &Option<Distribution>| {
        d.as_ref()
            .and_then(|d| d.p50_ns)
            .filter(|_| memcpy_ns > 0.0)
            .map(|p| p as f64 / memcpy_ns)
    };
    Some(Marshalling {
        payload: payload.to_string(),
        encoded_bytes: mean(ENCODED_BYTES).unwrap_or(0.0),
        memcpy_ns,
        encode_vs_memcpy: ratio(&encode),
        decode_vs_memcpy: ratio(&decode),
        encode,
        decode,
        access: dist(Metric::ACCESS),
    })
}

pub fn summarize(case: &CaseResult) -> CaseSummary {
    let cfg = &case.config;
    let roles = with_one_way_bounds(
        case.roles
            .iter()
            .map(|r| role_summary(r, !cfg.threads))
            .collect(),
    );
    let (msgs_per_s, latency, receivers) = match primary(case) {
        Some((h, rate, n)) => (rate, Some(Distribution::of(&h)), n),
        None => (0.0, None, 0),
    };
    let mib_per_s = msgs_per_s * cfg.size_bytes as f64 / MIB;
    let floor = case.floor.as_ref();
    let floor_p50_ns = floor.and_then(|f| f.rtt_p50_ns).filter(|&v| v > 0);
    let floor_mib_per_s = floor
        .and_then(|f| f.bytes_per_s)
        .map(|b| b / MIB)
        .filter(|&v| v > 0.0);
    // Like with like only: a poll loop does other work than the floor's blocking one, and a
    // latest-value buffer delivers what it has not overwritten.
    let comparable = cfg.wait == Wait::Block && !cfg.latest;
    let vs_floor = match (
        floor.map(|f| f.kind),
        latency.as_ref().and_then(|d| d.p50_ns),
    ) {
        _ if !comparable => None,
        (Some(FloorKind::RoundTrip), Some(p50)) => floor_p50_ns.map(|f| p50 as f64 / f as f64),
        (Some(FloorKind::Stream), _) if mib_per_s > 0.0 => floor_mib_per_s.map(|f| mib_per_s / f),
        _ => None,
    };
    let floor_note = vs_floor.and_then(|r| floor_note(case, r, latency.as_ref()));
    let sum = |f: fn(&RoleResult) -> u64| case.roles.iter().map(f).sum::<u64>();
    let dist = |m: Metric| merged(case, m).map(|h| Distribution::of(&h));
    let wire = wire_per_msg(case);
    // Each publisher's schedule reaches each subscriber that reported (one that died is not
    // counted against the rate).
    let deliveries_per_tick = (cfg.pubs * receivers.max(1)) as f64;
    CaseSummary {
        transport: cfg.transport.clone(),
        options: cfg
            .options
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        workload: cfg.workload.clone(),
        size_bytes: cfg.size_bytes,
        placement: cfg.placement.label().into(),
        cpus: match cfg.cpus {
            // One role that was not pinned (a multi-thread runtime's).
            _ if case.roles.len() == 1 && case.roles[0].pinned_cpu.is_none() => "-".into(),
            // One role: where it ran.
            _ if case.roles.len() == 1 => case.roles[0]
                .cpus_seen
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(","),
            (Some(a), Some(b)) => format!("{a}/{b}"),
            (Some(a), None) => format!("{a}/-"),
            _ => "-".into(),
        },
        roles_as: if cfg.threads { "threads" } else { "processes" }.into(),
        wait: match cfg.wait {
            _ if cfg.transport == crate::result::NO_TRANSPORT => "-".into(),
            Wait::Poll => "poll".to_string(),
            Wait::Block => cfg
                .effective_options
                .get("wait")
                .cloned()
                .unwrap_or_else(|| "block".into()),
        },
        latency_kind: case.latency_kind.label.to_string(),
        latency_meaning: case.latency_kind.meaning.to_string(),
        latency,
        msgs_per_s,
        mib_per_s,
        floor_kind: floor.map(|f| f.kind),
        floor_p50_ns,
        floor_mib_per_s,
        vs_floor,
        floor_note,
        lost: sum(|r| r.counters.lost),
        duplicated: sum(|r| r.counters.duplicated),
        reordered: sum(|r| r.counters.reordered),
        corrupted: sum(|r| r.counters.corrupted),
        overwritten: sum(|r| r.counters.overwritten),
        rate_hz: cfg.rate_hz,
        rate_error_pct: cfg
            .rate_hz
            .filter(|_| msgs_per_s > 0.0)
            .map(|r| (msgs_per_s / deliveries_per_tick - r) / r * 100.0),
        fan_out: case.fan_out.map(|f| {
            format!(
                "{} publisher(s) x {} subscriber(s), {}",
                cfg.pubs,
                cfg.subs,
                f.label()
            )
        }),
        latency_reader_idle: dist(Metric::ONE_WAY_READER_IDLE),
        latency_reader_busy: dist(Metric::ONE_WAY_READER_BUSY),
        wire_bytes_per_msg: wire.map(|w| w.0),
        wire_overhead_bytes_per_msg: wire.map(|w| w.0 - w.1),
        latency_from_intended: dist(Metric::ONE_WAY_INTENDED),
        send_lag: dist(Metric::SEND_LAG),
        // Only where the case's own figures are one-way: a round trip is one clock's.
        one_way_bound_ns: roles
            .iter()
            .filter_map(|r| r.one_way_bound_ns)
            .max()
            .filter(|_| case.latency_metric == Metric::ONE_WAY),
        roles,
        error: case.error.clone(),
        interrupted: case.interrupted,
        params: cfg
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        marshalling: marshalling(case),
        figures: case
            .roles
            .iter()
            .flat_map(|r| &r.figures)
            .filter(|f| f.name != ENCODED_BYTES && f.name != MEMCPY_NS)
            .map(|f| match f.unit.as_str() {
                "" => (f.name.clone(), f.value),
                unit => (format!("{} [{unit}]", f.name), f.value),
            })
            .collect(),
        stopped_by: case.roles.iter().find_map(|r| r.stopped_by.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: impl Iterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn percentiles_of_a_uniform_distribution() {
        // 1..=100000 ns, each once: pN is N% of the range, within the histogram's 0.1%.
        let d = Distribution::of(&hist(1..=100_000));
        assert_eq!(d.samples, 100_000);
        assert_eq!(d.min_ns, 1);
        assert!((d.mean_ns - 50_000.5).abs() < 50.0, "mean {}", d.mean_ns);
        let expect = [50_000.0, 90_000.0, 99_000.0, 99_900.0, 99_990.0];
        for (got, want) in d.percentiles().iter().zip(expect) {
            let got = got.expect("supported") as f64;
            assert!((got - want).abs() / want < 0.001, "{got} vs {want}");
        }
        assert!((d.max_ns as f64 - 100_000.0).abs() < 100.0);
    }

    #[test]
    fn a_bimodal_distribution_has_its_median_in_the_lower_mode() {
        // 70% at 10 us, 30% at 100 us: p50 = 10 us, p90 = 100 us, mean = 37 us.
        let d = Distribution::of(&hist(
            (0..7000).map(|_| 10_000).chain((0..3000).map(|_| 100_000)),
        ));
        assert!((d.p50_ns.unwrap() as f64 - 10_000.0).abs() < 10.0);
        assert!((d.p90_ns.unwrap() as f64 - 100_000.0).abs() < 100.0);
        assert!((d.mean_ns - 37_000.0).abs() < 40.0);
    }

    #[test]
    fn unsupported_percentiles_are_withheld() {
        let d = Distribution::of(&hist(1..=2_000));
        assert!(d.p99_ns.is_some(), "p99 from 2000 samples is supported");
        assert_eq!(d.p99_9_ns, None, "p99.9 needs 10000 samples");
        assert_eq!(d.p99_99_ns, None, "p99.99 needs 100000 samples");
        assert_eq!(samples_needed(99.99), 100_000);
    }
}
