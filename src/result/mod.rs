//! Room `result`: the data contract. What a run measured, as plain serde data: the case's
//! configuration, each role's histograms (encoded, not precomputed percentiles), counters and CPU
//! usage, the floor it divides by and the environment. Results travel between processes (a peer
//! returns its role's result in-band) and are read back by `msgperf report`. Imports nothing.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Bumped when a field changes meaning or disappears.
pub const SCHEMA_VERSION: u32 = 1;

/// One invocation of msgperf.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub msgperf_version: String,
    pub command_line: Vec<String>,
    pub environment: Environment,
    pub cases: Vec<CaseResult>,
    /// Stopped by Ctrl-C: the cases hold what was measured until then.
    pub interrupted: bool,
}

/// The machine and its clock.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: usize,
    pub allowed_cpus: Vec<usize>,
    pub started_utc: String,
    pub clock: ClockInfo,
}

/// The clock every figure was taken with, measured on this machine.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClockInfo {
    pub source: String,
    /// What clock_getres claims.
    pub resolution_ns: u64,
    /// The smallest step seen between two reads.
    pub smallest_step_ns: u64,
    /// Cost of one timestamp.
    pub read_cost_ns: f64,
    /// Cost of recording one sample in a histogram.
    pub record_cost_ns: f64,
}

/// Where the roles of a case run.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Both roles pinned to one CPU.
    SameCpu,
    /// Roles pinned to two different CPUs.
    CrossCpu,
    /// Pinned to the CPUs the user named with `--pin`.
    Pinned,
    /// Not pinned: the scheduler decides, and may change its mind.
    Any,
}

impl Placement {
    pub fn label(self) -> &'static str {
        match self {
            Placement::SameCpu => "same-cpu",
            Placement::CrossCpu => "cross-cpu",
            Placement::Pinned => "pinned",
            Placement::Any => "any",
        }
    }
}

/// How a reader waits for a message.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Wait {
    /// Sleeps in the kernel until a message comes.
    Block,
    /// Spins on non-blocking reads (NML's poll option).
    Poll,
}

/// A case: one workload on one transport at one size, in one placement.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CaseConfig {
    pub workload: String,
    pub transport: String,
    pub options: BTreeMap<String, String>,
    pub size_bytes: usize,
    /// Stop after this many measured messages (round trips for pingpong)...
    pub count: Option<u64>,
    /// ...or after this long.
    pub duration: Option<Duration>,
    pub warmup: Duration,
    pub wait: Wait,
    /// The writer waits for an acknowledgement of every message (NML's confirm_write).
    pub confirm: bool,
    /// Every message carries a CRC32 of its payload, checked by the receiver.
    pub checksum: bool,
    /// Bound on every wait.
    pub timeout: Duration,
    pub placement: Placement,
    /// CPUs of the active role (initiator, writer) and the passive one (responder, reader).
    pub cpus: (Option<usize>, Option<usize>),
    /// Roles as threads of one process instead of two processes.
    pub threads: bool,
    /// Any defect in delivery is an error (the transport is reliable).
    pub strict: bool,
    /// Messages are built and read in the transport's memory (`--opt zero-copy=true`).
    #[serde(default)]
    pub zero_copy: bool,
    /// The transport keeps only the newest message: gaps are overwritten, not lost.
    #[serde(default)]
    pub latest: bool,
    /// Messages sent on an open-loop schedule at this rate (None: as fast as possible); with
    /// several publishers, each one's rate.
    #[serde(default)]
    pub rate_hz: Option<f64>,
    /// Publishers and subscribers (pubsub); 1 and 1 for the two-role workloads.
    #[serde(default = "one")]
    pub pubs: usize,
    #[serde(default = "one")]
    pub subs: usize,
    /// The first subscriber spends this long on every message (a slow consumer, to show
    /// back-pressure or loss).
    #[serde(default)]
    pub slow_subscriber: Option<Duration>,
}

fn one() -> usize {
    1
}

impl CaseConfig {
    /// More than two roles: publishers and subscribers meet through a fan-out.
    pub fn fans_out(&self) -> bool {
        self.pubs > 1 || self.subs > 1
    }
}

/// What one case measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    pub config: CaseConfig,
    /// Active role first, then passive.
    pub roles: Vec<RoleResult>,
    /// The transport's plain loop, same size and placement (absent with `--no-floor`).
    pub floor: Option<FloorResult>,
    /// Why the case failed, if it did; the roles hold what was measured before.
    pub error: Option<String>,
    pub interrupted: bool,
    /// Share of the pinned CPUs' time that other programs used during the case, in percent.
    pub other_load_pct: Option<f64>,
    /// Network transports: bytes and packets the loopback interface carried during the case
    /// (all of it, so other loopback traffic would count too).
    #[serde(default)]
    pub wire: Option<WireCount>,
    /// How each publisher reached its subscribers (pubsub with more than two roles).
    #[serde(default)]
    pub fan_out: Option<FanOut>,
}

/// How a publisher reaches several subscribers.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FanOut {
    /// The transport's native fan-out: each message written once, read by every subscriber.
    Shared,
    /// A channel per subscriber, and a copy of each message written to each.
    Copy,
}

impl FanOut {
    pub fn label(self) -> &'static str {
        match self {
            FanOut::Shared => "one shared write per message (native fan-out)",
            FanOut::Copy => "a copy per subscriber",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WireCount {
    pub bytes: u64,
    pub packets: u64,
}

/// The transport's plain loop (see `msgperf floor`): what every ratio divides by.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FloorResult {
    /// Round trips (pingpong) or reads (stream) measured.
    pub samples: u64,
    pub rtt_min_ns: u64,
    pub rtt_p50_ns: u64,
    pub rtt_mean_ns: u64,
    pub msgs_per_s: f64,
    pub bytes_per_s: f64,
}

/// What one role measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RoleResult {
    /// `initiator`, `responder`, `writer`, `reader`.
    pub role: String,
    pub pid: u32,
    /// The CPUs the role was seen on (at its start and end).
    pub cpus_seen: Vec<usize>,
    /// Length of the measured window.
    pub measured_ns: u64,
    /// Active role: messages sent in all, warm-up included (the measured ones are counted).
    #[serde(default)]
    pub sent_total: u64,
    /// Histograms by metric name (`rtt_ns`, `one_way_ns`, `send_call_ns`, `recv_call_ns`).
    pub histograms: BTreeMap<String, EncodedHistogram>,
    pub counters: Counters,
    pub cpu: CpuUsage,
    /// Mean of the primary metric in consecutive 100 ms intervals (for the warm-up warning).
    pub interval_means_ns: Vec<u64>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counters {
    pub messages_sent: u64,
    pub bytes_sent: u64,
    pub messages_received: u64,
    pub bytes_received: u64,
    /// Read calls made; above `messages_received` when polling finds nothing.
    pub read_calls: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// Latest-value transports: messages overwritten before any read saw them.
    #[serde(default)]
    pub overwritten: u64,
    /// Sends refused because the queue was full (`--opt full=fail`); never sent.
    #[serde(default)]
    pub send_full: u64,
    /// Samples beyond the histograms' range (recorded at the range's top).
    pub out_of_range: u64,
}

/// CPU and memory of a role over its measured window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CpuUsage {
    pub user_ns: u64,
    pub sys_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Peak resident memory of the role's process.
    pub peak_rss_kib: u64,
}

/// An HdrHistogram in its V2 deflate encoding, base64: compact, lossless, mergeable.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EncodedHistogram(pub String);

impl EncodedHistogram {
    pub fn encode(h: &Histogram<u64>) -> Self {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(h, &mut bytes)
            .expect("serializing a histogram into memory cannot fail");
        EncodedHistogram(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn decode(&self) -> Result<Histogram<u64>, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.0)
            .map_err(|e| format!("histogram is not base64: {e}"))?;
        Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("histogram does not decode: {e:?}"))
    }
}

impl RoleResult {
    pub fn histogram(&self, key: &str) -> Option<Histogram<u64>> {
        self.histograms.get(key).and_then(|h| h.decode().ok())
    }

    /// One role out of several parts of it (a subscriber's channels from each publisher):
    /// histograms added bucket by bucket, counters and CPU summed, the window the longest.
    pub fn merge(role: &str, parts: Vec<RoleResult>) -> RoleResult {
        let mut hists: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
        let mut out = RoleResult {
            role: role.to_string(),
            ..RoleResult::default()
        };
        for p in parts {
            for (k, h) in &p.histograms {
                let Ok(h) = h.decode() else { continue };
                match hists.get_mut(k) {
                    Some(m) => {
                        // Same bounds on every side, so adding cannot fail; saturate if it does.
                        if m.add(&h).is_err() {
                            out.counters.out_of_range += h.len();
                        }
                    }
                    None => {
                        hists.insert(k.clone(), h);
                    }
                }
            }
            out.pid = p.pid;
            for c in p.cpus_seen {
                if !out.cpus_seen.contains(&c) {
                    out.cpus_seen.push(c);
                }
            }
            out.measured_ns = out.measured_ns.max(p.measured_ns);
            out.sent_total += p.sent_total;
            out.counters.add(&p.counters);
            out.cpu.user_ns += p.cpu.user_ns;
            out.cpu.sys_ns += p.cpu.sys_ns;
            out.cpu.voluntary_switches += p.cpu.voluntary_switches;
            out.cpu.involuntary_switches += p.cpu.involuntary_switches;
            out.cpu.peak_rss_kib = out.cpu.peak_rss_kib.max(p.cpu.peak_rss_kib);
            if out.interval_means_ns.is_empty() {
                out.interval_means_ns = p.interval_means_ns;
            }
            out.error = out.error.or(p.error);
        }
        out.histograms = hists
            .iter()
            .map(|(k, h)| (k.clone(), EncodedHistogram::encode(h)))
            .collect();
        out
    }
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.messages_sent += o.messages_sent;
        self.bytes_sent += o.bytes_sent;
        self.messages_received += o.messages_received;
        self.bytes_received += o.bytes_received;
        self.read_calls += o.read_calls;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.corrupted += o.corrupted;
        self.overwritten += o.overwritten;
        self.send_full += o.send_full;
        self.out_of_range += o.out_of_range;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_survive_encoding() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for v in [100u64, 2_000, 50_000, 1_000_000] {
            h.record_n(v, 7).unwrap();
        }
        let back = EncodedHistogram::encode(&h).decode().unwrap();
        assert_eq!(back.len(), 28);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert_eq!(back.max(), h.max());
    }
}
