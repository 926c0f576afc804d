//! Room `result`: the data contract. What a run measured, as plain serde data: the case's
//! configuration, each role's histograms (encoded, not precomputed percentiles), counters and CPU
//! usage, the floor it divides by and the environment. Identities are typed (role kind and
//! number, metric, latency kind, floor kind, a stable case key), so that `report`, the CSV and
//! a later `compare` never re-derive meaning from display strings. Results travel between
//! processes (a role returns its result over the control channel) and are read back by
//! `msgperf report`. Imports nothing.

pub mod place;
pub mod suite;

pub use crate::histogram::EncodedHistogram;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

pub use crate::delivery::{Delivery, Durability, History, Reliability, Setting};

/// The transport of a case that moves no message (`spawn`, `timers`): not one a user picks.
pub const NO_TRANSPORT: &str = "none";

/// Bumped when a field changes meaning or disappears.
pub const SCHEMA_VERSION: u32 = 3;

/// One invocation of msgperf.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub msgperf_version: String,
    pub command_line: Vec<String>,
    /// How many times each case was to run (`--repeat`).
    #[serde(default = "first")]
    pub repeat: u32,
    pub environment: Environment,
    pub cases: Vec<CaseResult>,
    /// Stopped by Ctrl-C, SIGTERM or SIGHUP: the cases hold what was measured until then.
    pub interrupted: bool,
    /// `msgperf suite`: the report's table and its conclusions checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<suite::SuiteOutcome>,
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
    /// How the processes' allocator was set (msgperf keeps freed memory: `sys::keep_freed_memory`).
    #[serde(default)]
    pub malloc: String,
    /// What a VM's host does with the memory its guest frees, where it takes it back (free
    /// page reporting); empty where msgperf sees no such host.
    #[serde(default)]
    pub host_memory: String,
    /// The time daemon's own account of this clock, where one answers (chrony): its bound on
    /// the clock's error, beside what msgperf measures between hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_sync: Option<TimeSync>,
}

/// A time daemon's report of its clock.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TimeSync {
    /// Which daemon, and what it follows (`chrony, stratum 3, 192.0.2.1`).
    pub source: String,
    /// Its bound on the clock's error: root dispersion plus half the root delay.
    pub bound_ns: u64,
    /// Its last measured offset of the system clock.
    pub offset_ns: i64,
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
    /// Cost of one reading of the interval clock (the TSC, where the CPU has an invariant one),
    /// which times intervals within one process.
    #[serde(default)]
    pub interval_read_cost_ns: f64,
    /// Cost of one message stamp from the TSC mapping this host's roles share, where the TSC
    /// can be shared (see `measure::clock`): the stamps of every case whose roles all run here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_tsc_stamp_cost_ns: Option<f64>,
}

/// Where the roles of a case run.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Every role pinned to one CPU.
    SameCpu,
    /// The driving roles pinned to one CPU, the others to another.
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

/// How a reader waits for a message at the call msgperf makes (`--poll` or not); what the
/// transport does inside a blocking call (spin, yield, sleep) is its `wait` option.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Wait {
    /// Blocks in the transport's receive until a message comes.
    Block,
    /// Spins on non-blocking reads (NML's poll option).
    Poll,
}

/// A case: one workload on one transport at one size, in one placement.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CaseConfig {
    pub workload: String,
    pub transport: String,
    /// The `--opt` values as given (and those the delivery asked for).
    pub options: BTreeMap<String, String>,
    /// Every option of the transport as the case ran it, defaults included.
    pub effective_options: BTreeMap<String, String>,
    /// What the transport asks a reader of its rows to keep in mind (the table prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_note: Option<String>,
    pub delivery: Delivery,
    /// How the transport carried out `delivery`.
    pub delivery_mapping: Vec<Setting>,
    pub size_bytes: usize,
    /// Stop after this many measured messages (round trips for pingpong)...
    pub count: Option<u64>,
    /// ...or after this long.
    #[serde(rename = "duration_ns", with = "crate::units::opt_nanos")]
    pub duration: Option<Duration>,
    #[serde(rename = "warmup_ns", with = "crate::units::nanos")]
    pub warmup: Duration,
    pub wait: Wait,
    /// Every message carries a CRC32 of its payload, checked by the receiver.
    pub checksum: bool,
    /// Bound on every wait.
    #[serde(rename = "timeout_ns", with = "crate::units::nanos")]
    pub timeout: Duration,
    /// Length of the intervals each role keeps a histogram of its primary metric for.
    #[serde(
        rename = "interval_ns",
        with = "crate::units::nanos",
        default = "default_interval"
    )]
    pub interval: Duration,
    pub placement: Placement,
    /// Roles on other hosts (`--place`): role kind → `host[:cpu]` per role, or one for all.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub place: BTreeMap<String, Vec<String>>,
    /// CPUs of the driving roles (initiator, writer, publishers) and of the others.
    pub cpus: (Option<usize>, Option<usize>),
    /// Roles as threads of one process instead of processes.
    pub threads: bool,
    /// Any defect in delivery is an error (the delivery is reliable).
    pub strict: bool,
    /// Messages are built and read in the transport's memory (`--opt zero-copy=true`).
    pub zero_copy: bool,
    /// Readers check each message where the transport's library keeps it, with no copy of
    /// msgperf's (zero-copy transports, and libraries that hand over their own buffer).
    #[serde(default)]
    pub read_in_place: bool,
    /// The transport keeps only the newest message: gaps are overwritten, not lost.
    pub latest: bool,
    /// Messages sent on an open-loop schedule at this rate (None: as fast as possible); with
    /// several publishers, each one's rate.
    pub rate_hz: Option<f64>,
    /// Publishers and subscribers (pubsub); 1 and 1 for the two-role workloads.
    pub pubs: usize,
    pub subs: usize,
    /// The workload's own parameters (`n`, `hold`, ...) that tables name beside it: those
    /// given, and those it always names.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Every parameter of the workload as the case ran it, defaults included.
    #[serde(default)]
    pub effective_params: BTreeMap<String, String>,
}

fn first() -> u32 {
    1
}

fn default_interval() -> Duration {
    Duration::from_secs(1)
}

impl CaseConfig {
    /// A stable key naming what was measured (not how long): two runs of the same case have the
    /// same key, so results can be matched across runs. Its readable head names the workload,
    /// transport, size and placement; its tail is a digest of every other setting of the
    /// case as serialized, so a setting added later joins it with no change here.
    pub fn key(&self) -> String {
        let digest = crc32fast::hash(
            serde_json::Value::Object(self.measured())
                .to_string()
                .as_bytes(),
        );
        format!(
            "{}/{}/{}B/{}/{digest:08x}",
            self.workload,
            self.transport,
            self.size_bytes,
            self.placement.label()
        )
    }

    /// The settings that say what was measured, as serialized: all but how long (count,
    /// duration, warm-up, timeout, interval) and what only restates the rest (the options and
    /// parameters as given, the delivery's mapping, a note). Two cases alike here measured
    /// the same thing.
    pub fn measured(&self) -> serde_json::Map<String, serde_json::Value> {
        let serde_json::Value::Object(mut rest) =
            serde_json::to_value(self).expect("a case serializes")
        else {
            unreachable!("a case is an object")
        };
        for how in [
            "count",
            "duration_ns",
            "warmup_ns",
            "timeout_ns",
            "interval_ns",
            "options",
            "params",
            "delivery_mapping",
            "transport_note",
        ] {
            rest.remove(how);
        }
        rest
    }

    /// The value of the workload's parameter `key` (a default where none was given).
    pub fn param(&self, key: &str) -> Option<&str> {
        self.effective_params.get(key).map(String::as_str)
    }
}

/// What a latency figure measures, as the workload that records it says: a short label for
/// the table and a sentence for its notes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LatencyKind {
    pub label: Cow<'static, str>,
    pub meaning: Cow<'static, str>,
    /// Its window opens at the first send, so rates count what was sent (a round trip); else
    /// at the first arrival, so they count what arrived after it.
    pub from_send: bool,
}

impl LatencyKind {
    pub const fn new(label: &'static str, meaning: &'static str, from_send: bool) -> Self {
        LatencyKind {
            label: Cow::Borrowed(label),
            meaning: Cow::Borrowed(meaning),
            from_send,
        }
    }

    /// Send to reply, on the initiator.
    pub const ROUND_TRIP: LatencyKind = LatencyKind::new(
        "round trip",
        "send to reply on the initiator (a whole round trip, not half)",
        true,
    );
    /// Write to acknowledgement, on the writer.
    pub const WRITE_TO_ACK: LatencyKind = LatencyKind::new(
        "write to ack",
        "a write to its acknowledgement, on the writer (--confirm)",
        true,
    );
    /// The send timestamp carried in the message to its arrival at the reader.
    pub const ONE_WAY: LatencyKind = LatencyKind::new(
        "one-way",
        "the send timestamp to arrival at the reader, queueing included (one host clock)",
        false,
    );
}

/// What a histogram measures, by its key in results (`rtt_ns`: the unit is in the name). A
/// workload declares the metrics it records, each with a slot among its
/// role's histograms (distinct within the workload, from 0), so that recording one is an array
/// index; the ones every message workload shares, which the report reads, are named here.
/// Equal, ordered and hashed by key; serialized as its key.
#[derive(Clone, Copy, Debug)]
pub struct Metric {
    key: &'static str,
    slot: u8,
}

impl Metric {
    pub const fn new(key: &'static str, slot: u8) -> Self {
        Metric { key, slot }
    }
    pub const fn key(self) -> &'static str {
        self.key
    }
    /// Its slot among the histograms of a role that records it.
    pub fn slot(self) -> usize {
        self.slot as usize
    }

    /// Send to reply received, on the initiator (or write to ack, on a confirming writer).
    pub const RTT: Metric = Metric::new("rtt_ns", 0);
    /// Send timestamp in the message to arrival, on the receiver (one host clock).
    pub const ONE_WAY: Metric = Metric::new("one_way_ns", 1);
    /// Time inside one send call.
    pub const SEND_CALL: Metric = Metric::new("send_call_ns", 2);
    /// Time inside one receive call, including the wait for the message (a pingpong
    /// responder's runs from the return of its previous send, a few ns earlier).
    pub const RECV_CALL: Metric = Metric::new("recv_call_ns", 3);
    /// Paced sends: from the message's intended send time to arrival (coordinated omission
    /// corrected).
    pub const ONE_WAY_INTENDED: Metric = Metric::new("one_way_from_intended_ns", 4);
    /// Paced sends: how late the sender was behind its schedule.
    pub const SEND_LAG: Metric = Metric::new("send_lag_ns", 5);
    /// Paced sends, one-way, for messages sent while the reader was already waiting for one:
    /// a blocking reader had to be woken.
    pub const ONE_WAY_READER_IDLE: Metric = Metric::new("one_way_reader_idle_ns", 6);
    /// Paced sends, one-way, for messages sent before the reader asked for them: it was busy,
    /// so no wake-up (the steady-state figure).
    pub const ONE_WAY_READER_BUSY: Metric = Metric::new("one_way_reader_busy_ns", 7);
    /// Typed payloads: encoding one message's body, on its sender.
    pub const ENCODE: Metric = Metric::new("encode_ns", 8);
    /// Typed payloads: decoding one message's body in full, on its receiver.
    pub const DECODE: Metric = Metric::new("decode_ns", 9);
    /// Across hosts, one-way samples that came out below zero (a skew symptom): by how far.
    /// Each is in [`Metric::ONE_WAY`] too, at 0, so that every sample keeps its rank there.
    pub const ONE_WAY_BELOW_ZERO: Metric = Metric::new("one_way_below_zero_ns", 10);
    /// Typed payloads of a zero-copy format: checking a body and reading its fields in place.
    /// (`codec` records it; not a message workload's metric.)
    pub const ACCESS: Metric = Metric::new("access_ns", 11);
    /// Every metric a message workload (ping-pong, stream, pubsub) records.
    pub const MESSAGES: [Metric; 11] = [
        Metric::RTT,
        Metric::ONE_WAY,
        Metric::SEND_CALL,
        Metric::RECV_CALL,
        Metric::ONE_WAY_INTENDED,
        Metric::SEND_LAG,
        Metric::ONE_WAY_READER_IDLE,
        Metric::ONE_WAY_READER_BUSY,
        Metric::ENCODE,
        Metric::DECODE,
        Metric::ONE_WAY_BELOW_ZERO,
    ];
}

/// Typed payloads: a role's figure of the mean encoded body, bytes...
pub const ENCODED_BYTES: &str = "encoded size";
/// ...and of a copy of that many bytes on its CPU, timed as it times an encode, ns.
pub const MEMCPY_NS: &str = "memcpy of the encoded size";

impl PartialEq for Metric {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Metric {}
impl PartialOrd for Metric {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Metric {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(o.key)
    }
}
impl std::hash::Hash for Metric {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.key.hash(h)
    }
}
impl Serialize for Metric {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.key)
    }
}
impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Metric::new(intern(&String::deserialize(d)?), 0))
    }
}

/// `name` as a `&'static str`: the same one for the same name, made once (the names a result
/// holds are few: its metrics and role kinds).
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// Which plain loop a case's ratio divides by.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum FloorKind {
    /// Ping-pong of the case's size: ratios of round-trip p50s (lower is better).
    RoundTrip,
    /// A one-way stream of the case's size: ratios of bytes per second (higher is better).
    Stream,
}

/// What a role does in a case, by the name its workload gives it (`initiator`, `subscriber`);
/// serialized as that name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoleKind(&'static str);

impl RoleKind {
    pub const fn new(name: &'static str) -> Self {
        RoleKind(name)
    }
    pub fn label(self) -> &'static str {
        self.0
    }
    /// A broker the case started: not msgperf's, measured from outside.
    pub const BROKER: RoleKind = RoleKind("broker");
}

impl Serialize for RoleKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}
impl<'de> Deserialize<'de> for RoleKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(RoleKind(intern(&String::deserialize(d)?)))
    }
}

/// One role of a case: its kind, and its number where a case has several of that kind
/// (`subscriber 2`).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoleId {
    pub kind: RoleKind,
    /// 1-based; None where a case has one role of this kind.
    pub number: Option<u32>,
}

impl RoleId {
    pub fn one(kind: RoleKind) -> Self {
        RoleId { kind, number: None }
    }

    /// Role `index` (0-based) of its kind.
    pub fn nth(kind: RoleKind, index: usize) -> Self {
        RoleId {
            kind,
            number: Some(index as u32 + 1),
        }
    }
}

impl fmt::Display for RoleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.number {
            Some(n) => write!(f, "{} {n}", self.kind.label()),
            None => f.write_str(self.kind.label()),
        }
    }
}

/// What one case measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    /// [`CaseConfig::key`]: the same case in another run has the same key.
    pub key: String,
    /// Which run of this case it is (1-based; `--repeat N` runs each case N times).
    #[serde(default = "first")]
    pub repetition: u32,
    pub config: CaseConfig,
    /// What the case's latency figure measures, and the metric that holds it (as the workload
    /// says, not guessed from the histograms present).
    pub latency_kind: LatencyKind,
    pub latency_metric: Metric,
    /// Every role, in the workload's order (drivers first).
    pub roles: Vec<RoleResult>,
    /// The transport's plain loop, same size and placement (absent with `--no-floor`, for a
    /// paced case, or where the transport has none).
    pub floor: Option<FloorResult>,
    /// Why the floor could not be measured, where one applies (no ratio is printed then).
    pub floor_error: Option<String>,
    /// Why the case failed, if it did; the roles hold what was measured before.
    pub error: Option<String>,
    pub interrupted: bool,
    /// Share of the pinned CPUs' time that other programs used during the case, in percent.
    pub other_load_pct: Option<f64>,
    /// Network transports: bytes and packets sent over loopback during the case, and over
    /// the bed's bridge and veth links where roles ran on its namespace hosts (all of it, so
    /// other traffic there would count too); none where a role ran on a launcher's host.
    pub wire: Option<WireCount>,
    /// How each publisher reached its subscribers (pubsub).
    pub fan_out: Option<FanOut>,
    /// The clock that stamped its messages: `tsc` (one mapping shared by every role, all on
    /// this host) or `CLOCK_MONOTONIC` (roles elsewhere, or no TSC to share).
    #[serde(default = "monotonic")]
    pub stamps: String,
}

fn monotonic() -> String {
    STAMPS_MONOTONIC.into()
}

/// [`CaseResult::stamps`]' two values.
pub const STAMPS_MONOTONIC: &str = "CLOCK_MONOTONIC";
pub const STAMPS_TSC: &str = "tsc";

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

/// The transport's plain loop (see `msgperf floor`): what every ratio divides by. A figure the
/// loop does not produce is null (a stream floor has no round trip).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FloorResult {
    pub kind: FloorKind,
    /// Round trips (ping-pong) or messages (stream) measured.
    pub samples: u64,
    pub rtt_min_ns: Option<u64>,
    pub rtt_p50_ns: Option<u64>,
    pub rtt_mean_ns: Option<u64>,
    pub msgs_per_s: Option<f64>,
    pub bytes_per_s: Option<f64>,
    /// Every round trip of a ping-pong floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_histogram: Option<EncodedHistogram>,
    /// A floor between hosts: the addresses its two sides used, the measuring side's first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between: Option<[String; 2]>,
}

/// What one role measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoleResult {
    pub role: RoleId,
    pub pid: u32,
    /// The CPUs the role was seen on (at its start and end).
    pub cpus_seen: Vec<usize>,
    /// The CPU its thread was pinned to, if it was.
    #[serde(default)]
    pub pinned_cpu: Option<usize>,
    /// Length of the measured window.
    pub measured_ns: u64,
    /// Its start on the wall clock, in nanoseconds since the epoch (0: not known).
    #[serde(default)]
    pub started_unix_ns: u64,
    /// Driving roles: messages sent in all, warm-up included (the measured ones are counted).
    pub sent_total: u64,
    /// Histograms by metric.
    pub histograms: BTreeMap<Metric, EncodedHistogram>,
    pub counters: Counters,
    pub cpu: CpuUsage,
    /// Mean of the primary metric in consecutive intervals of `interval_ns` (for the warm-up
    /// warning).
    pub interval_ns: u64,
    pub interval_means_ns: Vec<u64>,
    /// The role's primary metric per `--interval` (latency over time, HdrHistogram logs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interval_histograms: Vec<IntervalHistogram>,
    pub error: Option<String>,
    /// What the workload measures beyond messages (memory per thread, how many connections
    /// were held), each named with its unit.
    #[serde(default)]
    pub figures: Vec<Figure>,
    /// Why the role stopped where that is a finding (`connect --hold`: the limit it met).
    #[serde(default)]
    pub stopped_by: Option<String>,
    /// Where it ran when not on the runner's host (`--place`): set by the runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<RoleHost>,
}

/// A role's host other than the runner's, as the run found it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoleHost {
    /// The name the run gave it (`--host NAME=...`).
    pub name: String,
    /// The command that started the role there (`ssh -T ...`, `ip netns exec ...`).
    pub launcher: String,
    /// The address its ends bound on.
    pub address: String,
    pub msgperf_version: String,
    pub build: String,
    pub environment: Environment,
    /// Its clock against the runner's, from probes on the control channel.
    pub clock: Option<ClockFit>,
}

/// A far clock against the runner's, fitted from four-timestamp probes (NTP's): `offset`
/// is far minus runner, at the start of the measured window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClockFit {
    pub offset_ns: i64,
    /// How far the true offset may be from the one used, over the whole window: half the
    /// lowest round trip of a probe, plus the drift the fit saw against the offset applied.
    pub bound_ns: u64,
    /// Parts per million the far clock gained over the run (0 with fewer than two windows).
    pub drift_ppm: f64,
    pub probes: u32,
    /// The lowest probe round trip seen.
    pub min_delay_ns: u64,
}

/// One interval's histogram of a role's primary metric; start and end are offsets from the
/// start of the role's measured window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IntervalHistogram {
    pub metric: Metric,
    pub start_ns: u64,
    pub end_ns: u64,
    pub histogram: EncodedHistogram,
}

/// A workload's own figure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    pub name: String,
    pub unit: String,
    pub value: f64,
}

impl RoleResult {
    /// A role that measured nothing (it died before reporting): its identity and why.
    pub fn missing(role: RoleId, pid: u32, error: String) -> Self {
        RoleResult {
            role,
            pid,
            cpus_seen: vec![],
            pinned_cpu: None,
            measured_ns: 0,
            started_unix_ns: 0,
            sent_total: 0,
            histograms: BTreeMap::new(),
            counters: Counters::default(),
            cpu: CpuUsage::default(),
            interval_ns: 0,
            interval_means_ns: vec![],
            interval_histograms: vec![],
            error: Some(error),
            figures: vec![],
            stopped_by: None,
            host: None,
        }
    }
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
    pub overwritten: u64,
    /// Sends refused because the queue was full (`--opt full=fail`); never sent.
    pub send_full: u64,
    /// Samples beyond the histograms' range (recorded at the range's top).
    pub out_of_range: u64,
    /// One-way samples that came out negative (arrival before the send time, once the
    /// sender's clock offset is corrected): a clock skew symptom; recorded at 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub negative: u64,
    /// The most negative of them, ns below zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub most_negative_ns: u64,
    /// A broker: the messages the driving roles sent through it from the start (warm-up
    /// included, as its CPU window is), which its CPU per message divides by.
    #[serde(default)]
    pub relayed: u64,
    /// A reader: the messages received up to its window's end (the last one it timed), which
    /// its rate divides; 0 where the window ends at the last message received.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub received_in_window: u64,
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
    /// CPU (user and system) of the role's process outside the role's own thread over the
    /// window: a middleware's threads (tokio's worker, ZeroMQ's I/O thread, Cyclone's receive
    /// threads) and msgperf's idle control thread. Meaningful where the role has a process of
    /// its own; the figures above are the role's thread only.
    #[serde(default)]
    pub other_threads_ns: u64,
}

impl RoleResult {
    pub fn histogram(&self, m: Metric) -> Option<Histogram<u64>> {
        self.histograms.get(&m).and_then(|h| h.decode().ok())
    }

    /// Adds another part of the same role (a subscriber's channel read by another thread):
    /// histograms added bucket by bucket, counters and CPU summed, the window the longest.
    pub fn add(&mut self, part: RoleResult) {
        for (m, h) in part.histograms {
            let Ok(h) = h.decode() else { continue };
            let merged = match self.histogram(m) {
                Some(mut mine) => {
                    // Same bounds on every side, so adding cannot fail; saturate if it does.
                    if mine.add(&h).is_err() {
                        self.counters.out_of_range += h.len();
                    }
                    mine
                }
                None => h,
            };
            self.histograms.insert(m, EncodedHistogram::encode(&merged));
        }
        for c in part.cpus_seen {
            if !self.cpus_seen.contains(&c) {
                self.cpus_seen.push(c);
            }
        }
        self.measured_ns = self.measured_ns.max(part.measured_ns);
        self.sent_total += part.sent_total;
        self.counters.add(&part.counters);
        self.cpu.add(&part.cpu);
        if self.interval_means_ns.is_empty() {
            self.interval_means_ns = part.interval_means_ns;
        }
        // The same intervals of the same window: added one by one.
        for (i, p) in part.interval_histograms.into_iter().enumerate() {
            match self.interval_histograms.get_mut(i) {
                Some(mine) => {
                    if let (Ok(mut a), Ok(b)) = (mine.histogram.decode(), p.histogram.decode()) {
                        a.add(&b).ok();
                        mine.histogram = EncodedHistogram::encode(&a);
                        mine.end_ns = mine.end_ns.max(p.end_ns);
                    }
                }
                None => self.interval_histograms.push(p),
            }
        }
        self.error = self.error.take().or(part.error);
        self.figures.extend(part.figures);
        self.stopped_by = self.stopped_by.take().or(part.stopped_by);
    }
}

impl Counters {
    /// The messages received inside the measured window: a rate's count.
    pub fn received_in_window(&self) -> u64 {
        match self.received_in_window {
            0 => self.messages_received,
            n => n,
        }
    }

    pub fn add(&mut self, o: &Counters) {
        // Before the received count changes: 0 stands for all of it.
        self.received_in_window = self.received_in_window() + o.received_in_window();
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
        self.negative += o.negative;
        self.most_negative_ns = self.most_negative_ns.max(o.most_negative_ns);
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CpuUsage {
    pub fn add(&mut self, o: &CpuUsage) {
        self.user_ns += o.user_ns;
        self.sys_ns += o.sys_ns;
        self.voluntary_switches += o.voluntary_switches;
        self.involuntary_switches += o.involuntary_switches;
        self.peak_rss_kib = self.peak_rss_kib.max(o.peak_rss_kib);
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

    #[test]
    fn identities_serialize_as_typed_data_and_display_as_words() {
        let id = RoleId::nth(RoleKind::new("subscriber"), 1);
        assert_eq!(id.to_string(), "subscriber 2");
        assert_eq!(RoleId::one(RoleKind::BROKER).to_string(), "broker");
        let v = serde_json::to_value(id).unwrap();
        assert_eq!(v, serde_json::json!({"kind": "subscriber", "number": 2}));
        let back: RoleId = serde_json::from_value(v).unwrap();
        assert_eq!(back, id);
        let mut m = BTreeMap::new();
        m.insert(Metric::ONE_WAY_INTENDED, 1);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"one_way_from_intended_ns":1}"#
        );
        let back: BTreeMap<Metric, i32> =
            serde_json::from_str(r#"{"one_way_from_intended_ns":1}"#).unwrap();
        assert_eq!(back, m);
        for m in Metric::MESSAGES {
            assert_eq!(serde_json::to_value(m).unwrap(), m.key());
        }
        let slots: std::collections::BTreeSet<usize> =
            Metric::MESSAGES.iter().map(|m| m.slot()).collect();
        assert_eq!(slots.len(), Metric::MESSAGES.len(), "distinct slots");
    }
}
