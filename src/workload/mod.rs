//! Room `workload`: what the roles of a case are and what each does with its channels. A
//! workload says, for a case, which roles exist and which channel ends each opens (its
//! topology), and runs one role over its opened ends, recording into a [`Recorder`]; where roles
//! run, how ends are opened and how results are shown are other rooms' business.
//!
//! # The contract
//! - [`Workload::topology`] lists the roles in the order results show them (driving roles
//!   first) and the channels and topics the transport's set-up makes for them.
//! - A driving role (initiator, writer, publisher) decides when the case ends (count,
//!   duration, stop) and returns what it sent; the runner then sends END on each of its ends.
//!   Any other role returns when END has come on each of its ends.
//! - Messages in the measured window carry the MEASURED flag; a receiving role starts its
//!   window at the first one.
//! - Nothing is allocated, formatted or locked between the first and last message.
//! - Only the workload's messages and END cross a channel: everything else (the case, the
//!   start, results) travels on the runner's control channel.

pub mod message;
mod oneway;
mod payload;
mod runtime;

use crate::deadline::Deadline;
use crate::measure::Recorder;
use crate::result::{CaseConfig, Counters, FanOut, FloorKind, LatencyKind, Metric, RoleId, Wait};
use crate::transport::{
    Capabilities, ChannelSpec, Endpoint, Exchange, SetupPlan, Side, TransportError,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Declares the workloads' modules (`src/workload/NAME.rs`, named as the workload) and lists
/// them in [`REGISTRY`].
macro_rules! registry {
    ($($module:ident: $workload:ident;)*) => {
        $(mod $module;)*

        /// The workloads msgperf knows, in the order help lists them.
        pub static REGISTRY: &[&dyn Workload] = &[$(&$module::$workload),*];
    };
}

// Adding a workload is its file and one line here.
registry! {
    pingpong: PingPong;
    stream: Stream;
    pubsub: PubSub;
    pairs: Pairs;
    spawn: Spawn;
    timers: Timers;
    connect: Connect;
    burst: Burst;
    codec: Codec;
}

pub fn find(name: &str) -> Result<&'static dyn Workload, crate::transport::UnknownName> {
    REGISTRY
        .iter()
        .copied()
        .find(|w| w.name() == name)
        .ok_or_else(|| crate::transport::UnknownName {
            kind: "workload",
            name: name.to_string(),
            known: REGISTRY.iter().map(|w| w.name()).collect(),
        })
}

pub trait Workload: Sync {
    fn name(&self) -> &'static str;
    fn about(&self) -> &'static str;
    /// The parameters it takes beyond every workload's (`--n`, `--hold`): each becomes a flag
    /// of `msgperf run` and a key of scenario files, and is refused for other workloads.
    fn params(&self) -> &'static [&'static Param] {
        &[]
    }
    /// Every histogram its roles record, with distinct slots from 0.
    fn metrics(&self) -> &'static [Metric];
    /// What this case's latency figure measures, and the metric that holds it.
    fn latency(&self, case: &CaseConfig) -> (LatencyKind, Metric);
    /// Which plain loop of the transport this case's figures divide by; None (the default)
    /// where no floor compares like with like (a paced case moves what its schedule says, no
    /// plain loop sends bursts or sets up connections).
    fn floor_kind(&self, _case: &CaseConfig) -> Option<FloorKind> {
        None
    }
    /// Refuses a case this workload cannot run on a transport, naming the fix.
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String>;
    /// The case's roles and their ends, and what the transport's set-up makes for them.
    fn topology(&self, case: &CaseConfig, caps: &Capabilities) -> Topology;
    /// The size its messages take with these parameters where they decide it (a typed
    /// `--payload`); None where `--size` does.
    fn message_size(&self, _params: &Params) -> Option<Result<usize, String>> {
        None
    }
    /// The message sizes at which `msgperf survey` runs it on every transport (none: not in the
    /// survey).
    fn survey_sizes(&self) -> &'static [usize] {
        &[]
    }
    /// The transport a case with these parameters runs over when none is given (None: one must
    /// be).
    fn default_transport(&self, _params: &Params) -> Option<&'static str> {
        None
    }
    /// It takes `--pubs` and `--subs`: roles that publish and subscribe.
    fn fans_out(&self) -> bool {
        false
    }
    /// It does a fixed amount of work (`--n`), not a measured window: no --duration, no
    /// warm-up.
    fn fixed_work(&self) -> bool {
        false
    }
    /// What it moves on each two-way channel (a transport may pick its calls by it).
    fn exchange(&self, _case: &CaseConfig) -> Exchange {
        Exchange::Both
    }
    /// Runs one role over its opened ends. A driving role returns what it sent.
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError>;
}

/// A case's parameter values by key.
pub type Params = BTreeMap<String, String>;

/// A parameter a workload declares: the flag `--KEY` of `msgperf run` and the key `KEY` (with
/// `_` for `-`) of scenario files, both made from this. A parameter that several workloads
/// take is one `const` they share.
#[derive(Debug)]
pub struct Param {
    pub key: &'static str,
    /// What its value is, for help (`N[,N...]`); empty for a flag.
    pub value_name: &'static str,
    /// Its value when not given (None: not set).
    pub default: Option<&'static str>,
    pub about: &'static str,
    pub kind: ParamKind,
    /// A comma list runs a case for each value, in order.
    pub sweeps: bool,
    /// Tables name it beside the workload (`n=100`) even at its default; else only when given.
    pub always_shown: bool,
}

/// What values a parameter takes.
#[derive(Debug)]
pub enum ParamKind {
    /// `--KEY` alone or `--KEY=true|false`.
    Flag,
    /// A whole number from `min` to `max`.
    Count { min: u64, max: u64 },
    /// A duration, e.g. `2ms`.
    Duration,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A value of a syntax of its own: `check` names the fix for a bad one, `expand` turns
    /// one value of a list into the values it stands for (a pattern into its matches).
    Parsed {
        check: fn(&str) -> Result<(), String>,
        expand: fn(&str) -> Vec<String>,
    },
}

impl Param {
    /// The scenario file's key.
    pub fn scenario_key(&self) -> String {
        self.key.replace('-', "_")
    }

    /// Checks one value, naming the fix.
    pub fn check(&self, v: &str) -> Result<(), String> {
        let bad = |what: String| Err(format!("--{} `{v}` {what}", self.key));
        match &self.kind {
            ParamKind::Flag if matches!(v, "true" | "false") => Ok(()),
            ParamKind::Flag => bad("is not true or false".into()),
            ParamKind::Count { min, max } => match v.replace('_', "").parse::<u64>() {
                Ok(n) if (*min..=*max).contains(&n) => Ok(()),
                _ => {
                    let up_to = match *max {
                        u64::MAX => String::new(),
                        max => format!(" to {max}"),
                    };
                    bad(format!(
                        "is not a count: give whole numbers from {min}{up_to}, e.g. --{} {}",
                        self.key,
                        self.default.unwrap_or("100")
                    ))
                }
            },
            ParamKind::Duration => crate::units::parse_duration(v)
                .map(|_| ())
                .or_else(|e| bad(format!("is not a duration: {e}"))),
            ParamKind::Choice(words) if words.contains(&v) => Ok(()),
            ParamKind::Choice(words) => bad(format!("is not one of {}", one_of(words))),
            ParamKind::Parsed { check, .. } => check(v).or_else(bad),
        }
    }

    /// The values given, one per case where it sweeps.
    pub fn values(&self, given: &str) -> Vec<String> {
        let values: Vec<String> = if self.sweeps {
            given
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect()
        } else {
            vec![given.trim().to_string()]
        };
        match self.kind {
            ParamKind::Parsed { expand, .. } => values.iter().flat_map(|v| expand(v)).collect(),
            _ => values,
        }
    }
}

/// `a, b or c`.
fn one_of(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [w] => w.to_string(),
        [first @ .., last] => format!("{} or {last}", first.join(", ")),
    }
}

/// How a case's channels open, the same at every role: the case's options and bounds, its
/// wait, its largest message and what `w` moves on them; `watched` as the runner knows it
/// (see `ChannelSpec::watched`).
pub fn channel_spec(w: &dyn Workload, case: &CaseConfig, watched: bool) -> ChannelSpec {
    ChannelSpec {
        options: case.effective_options.clone(),
        timeout: case.timeout,
        poll: case.wait == Wait::Poll,
        max_message: case.size_bytes.max(message::HEADER),
        watched,
        exchange: w.exchange(case),
    }
}

/// Every parameter some workload declares, once each by key, in registry order.
pub fn all_params() -> Vec<&'static Param> {
    let mut out: Vec<&'static Param> = Vec::new();
    for p in REGISTRY.iter().flat_map(|w| w.params().iter().copied()) {
        if !out.iter().any(|q| q.key == p.key) {
            out.push(p);
        }
    }
    out
}

/// The workloads that declare the parameter `key`.
pub fn declaring(key: &str) -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|w| w.params().iter().any(|p| p.key == key))
        .map(|w| w.name())
        .collect()
}

/// Typed reads of a case's parameters, made once before a role's loop (never in it).
pub(crate) mod param {
    use crate::result::CaseConfig;

    pub fn flag(case: &CaseConfig, key: &str) -> bool {
        case.param(key) == Some("true")
    }

    pub fn count(case: &CaseConfig, key: &str) -> Option<u64> {
        case.param(key)?.replace('_', "").parse().ok()
    }

    pub fn duration(case: &CaseConfig, key: &str) -> Option<std::time::Duration> {
        crate::units::parse_duration(case.param(key)?).ok()
    }
}

/// `--n`: how many of what a workload multiplies.
pub(crate) const N: Param = Param {
    key: "n",
    value_name: "N[,N...]",
    default: Some("100"),
    about: "how many channel pairs, threads or tasks, waiters or connections; a list runs a case for each, e.g. 1,100,1000,10000",
    kind: ParamKind::Count {
        min: 1,
        max: u64::MAX,
    },
    sweeps: true,
    always_shown: true,
};

/// A case's roles and what they meet on.
#[derive(Clone, Debug)]
pub struct Topology {
    pub roles: Vec<RoleSpec>,
    pub setup: SetupPlan,
    /// How publishers reach several subscribers, where the workload has them.
    pub fan_out: Option<FanOut>,
}

impl Topology {
    /// The descriptors its runner holds: a control socket and a stderr pipe for each role,
    /// one for each channel and topic where the transport's set-up holds one (shm's segments),
    /// and its own. A role needs its ends and its own.
    pub fn descriptors(&self, caps: &Capabilities) -> (u64, u64) {
        let ends = self.roles.iter().map(|r| r.ends.len()).max().unwrap_or(0) as u64;
        let made = if caps.set_up_holds_descriptors {
            u64::from(self.setup.channels) + self.setup.topics.len() as u64
        } else {
            0
        };
        (3 * self.roles.len() as u64 + made + 64, ends + 64)
    }
}

/// One role of a case: plain data, as it travels to a role process.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RoleSpec {
    pub id: RoleId,
    /// The channel ends it opens.
    pub ends: Vec<Side>,
    /// The CPU it is pinned to.
    pub cpu: Option<usize>,
    /// It decides when the case ends and sends END on its ends.
    pub drives: bool,
}

/// One role's run: what it is, its ends, its case, where it records, and its control.
pub struct RoleRun<'a> {
    pub role: &'a RoleSpec,
    /// Its opened ends, in the order of `role.ends`.
    pub ends: &'a mut [Box<dyn Endpoint>],
    pub case: &'a CaseConfig,
    pub rec: &'a mut Recorder,
    pub ctl: &'a RoleControl<'a>,
}

/// What a running role gets from its runner besides its ends.
pub struct RoleControl<'a> {
    /// Raised to end the case early (Ctrl-C, another role died): a driving role stops sending.
    pub stop: &'a AtomicBool,
    /// Per end: what to add to a received message's send time to put it on this role's clock
    /// (its sender runs on another host's clock; measured by the runner). Empty: all 0.
    pub clock_shifts_ns: &'a [i64],
}

impl RoleControl<'_> {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether a peer of this role runs on another host (its clock shifts were measured).
    pub fn across_hosts(&self) -> bool {
        !self.clock_shifts_ns.is_empty()
    }

    /// The clock shift of end `i` (see `clock_shifts_ns`).
    pub fn clock_shift(&self, i: usize) -> i64 {
        self.clock_shifts_ns.get(i).copied().unwrap_or(0)
    }
}

/// What a driving role sent: sequence numbers from `first_measured` to `next` (exclusive)
/// were measured; the ones before were warm-up. END carries both.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sent {
    pub first_measured: u64,
    pub next: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("integrity: {0}")]
    Integrity(String),
    /// A step of the workload's own that is not the transport's (a thread, a task, a runtime,
    /// a machine limit it met): the sentence names it.
    #[error("{0}")]
    Work(String),
    /// A typed payload's codec that does not round-trip its own values.
    #[error(transparent)]
    Payload(#[from] crate::codec::MarshalError),
    /// An OS call of the workload's own failed at `what` (a runtime, a thread).
    #[error("{what}: {cause}")]
    Os {
        what: &'static str,
        #[source]
        cause: std::io::Error,
    },
    /// A driving role failed after sending `sent`: its END can still tell its readers so.
    #[error("{cause}")]
    Ended { sent: Sent, cause: Box<RoleError> },
}

impl RoleError {
    /// `self`, from a driving role that had sent up to `next` (measured from `first_measured`).
    pub(crate) fn ended(self, first_measured: u64, next: u64) -> RoleError {
        RoleError::Ended {
            sent: Sent {
                first_measured,
                next,
            },
            cause: Box::new(self),
        }
    }
}

/// A driving role's two phases over one sequence of messages: a warm-up (unless it is zero),
/// then the measured window, each run by `phase(rec, seq, rule, record)`, which advances `seq`
/// past every message it sends. A role that fails still says how far it got
/// ([`RoleError::Ended`]): its END then tells its peers, which end at once instead of waiting
/// out --timeout for a message (on a broker, which does not close their channels).
pub(crate) fn phases(
    case: &CaseConfig,
    rec: &mut Recorder,
    mut phase: impl FnMut(&mut Recorder, &mut u64, StopRule, bool) -> Result<(), RoleError>,
) -> Result<Sent, RoleError> {
    // A call the runner's stop interrupted while it waited for the peer (the case is ending)
    // ends the phase as a stop between two messages does: what it had in flight is neither
    // measured nor lost.
    let stopped =
        |r: &Result<(), RoleError>| matches!(r, Err(RoleError::Transport(TransportError::Stopped)));
    let mut seq = 0;
    if !case.warmup.is_zero() {
        let r = phase(rec, &mut seq, StopRule::warmup(case), false);
        if stopped(&r) {
            rec.reset();
            return Ok(Sent {
                first_measured: seq,
                next: seq,
            });
        }
        r.map_err(|e| e.ended(seq, seq))?;
    }
    rec.reset();
    let first_measured = seq;
    let r = phase(rec, &mut seq, StopRule::measured(case), true);
    if !stopped(&r) {
        r.map_err(|e| e.ended(first_measured, seq))?;
    }
    Ok(Sent {
        first_measured,
        next: seq,
    })
}

/// When a driving role stops: after `count` measured messages or at `end_ns`.
#[derive(Clone, Copy)]
pub(crate) struct StopRule {
    count: u64,
    end_ns: u64,
}

impl StopRule {
    /// The measured phase, starting now.
    pub fn measured(case: &CaseConfig) -> Self {
        let now = crate::measure::clock::now();
        StopRule {
            count: case.count.unwrap_or(u64::MAX),
            end_ns: case
                .duration
                .map_or(u64::MAX, |d| now + d.as_nanos() as u64),
        }
    }

    /// The warm-up phase, starting now.
    pub fn warmup(case: &CaseConfig) -> Self {
        StopRule {
            count: u64::MAX,
            end_ns: crate::measure::clock::now() + case.warmup.as_nanos() as u64,
        }
    }

    #[inline(always)]
    pub fn done(&self, sent: u64, now: u64, stop: &AtomicBool) -> bool {
        sent >= self.count || now >= self.end_ns || stop.load(Ordering::Relaxed)
    }
}

/// Receives one message, blocking or polling as the case says; counts read calls.
#[inline(always)]
pub(crate) fn receive(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    case: &CaseConfig,
    counters: &mut Counters,
) -> Result<usize, TransportError> {
    if case.wait == Wait::Block {
        counters.read_calls += 1;
        return ep.recv(buf);
    }
    let mut spins: u64 = 0;
    let mut deadline: Option<Deadline> = None;
    loop {
        counters.read_calls += 1;
        if let Some(n) = ep.try_recv(buf)? {
            return Ok(n);
        }
        spins += 1;
        if spins.is_multiple_of(4096)
            && deadline
                .get_or_insert_with(|| Deadline::after(case.timeout))
                .expired()
        {
            return Err(TransportError::Timeout(case.timeout));
        }
        std::hint::spin_loop();
    }
}

/// Receives one message in place (zero-copy transports, and libraries that hand a reader their
/// own buffer), handing it to `read`.
#[inline(always)]
pub(crate) fn receive_in_place(
    ep: &mut dyn Endpoint,
    rec: &mut Recorder,
    read: &mut dyn FnMut(&[u8]),
) -> Result<usize, TransportError> {
    rec.counters.read_calls += 1;
    ep.recv_with(read)
}

/// Buffer for receiving: the case's size, or END's if that is larger.
pub(crate) fn receive_buffer(case: &CaseConfig) -> Vec<u8> {
    vec![0u8; case.size_bytes.max(message::HEADER)]
}

/// Checks shared by every workload.
pub(crate) fn check_common(case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
    if case.size_bytes < message::MIN_SIZE {
        return Err(format!(
            "--size {} is below msgperf's {} B message header (length, sequence, send time, checksum): use --size {} or more",
            case.size_bytes,
            message::MIN_SIZE,
            message::MIN_SIZE
        ));
    }
    if case.size_bytes > caps.max_message_bytes {
        return Err(format!(
            "--size {} is larger than the {} B that transport `{}` carries in one message: use a smaller --size",
            case.size_bytes, caps.max_message_bytes, case.transport
        ));
    }
    Ok(())
}

/// Refuses a case whose messages must go a way the transport's channels do not carry.
pub(crate) fn check_exchange(
    case: &CaseConfig,
    caps: &Capabilities,
    fits: &[Exchange],
    needs: &str,
) -> Result<(), String> {
    if fits.contains(&caps.exchange) {
        return Ok(());
    }
    Err(format!(
        "transport `{}` (with these options) carries messages {}, and {} {needs}: use other options or another transport (see `msgperf transports {}`)",
        case.transport,
        caps.exchange.label(),
        case.workload,
        case.transport
    ))
}

/// Refuses a case that sends message after message one way on a transport whose channels
/// carry none that way.
pub(crate) fn check_one_way(case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
    check_exchange(
        case,
        caps,
        &[Exchange::Both, Exchange::OneWay],
        "sends message after message with no reply",
    )
}

/// Refuses publishers and subscribers for a workload that has none, naming those that do.
pub(crate) fn check_two_roles(case: &CaseConfig) -> Result<(), String> {
    if case.pubs != 1 || case.subs != 1 {
        let fan: Vec<&str> = REGISTRY
            .iter()
            .filter(|w| w.fans_out())
            .map(|w| w.name())
            .collect();
        return Err(format!(
            "--pubs and --subs are for {}, not {}: write `msgperf run {} ...`, or drop them",
            fan.join(", "),
            case.workload,
            fan.first().unwrap_or(&"...")
        ));
    }
    Ok(())
}

/// The two roles of a workload with one channel: the driving one connects, the other accepts.
pub(crate) fn two_roles(
    case: &CaseConfig,
    driver: crate::result::RoleKind,
    other: crate::result::RoleKind,
) -> Topology {
    Topology {
        roles: vec![
            RoleSpec {
                id: RoleId::one(driver),
                ends: vec![Side::Connect(0)],
                cpu: case.cpus.0,
                drives: true,
            },
            RoleSpec {
                id: RoleId::one(other),
                ends: vec![Side::Accept(0)],
                cpu: case.cpus.1,
                drives: false,
            },
        ],
        setup: SetupPlan {
            channels: 1,
            ..SetupPlan::default()
        },
        fan_out: None,
    }
}

/// The one end of a two-role workload's role.
pub(crate) fn only_end(ends: &mut [Box<dyn Endpoint>]) -> Result<&mut dyn Endpoint, RoleError> {
    match ends {
        [ep] => Ok(&mut **ep),
        _ => Err(RoleError::Work(format!(
            "this role takes one channel end, not {}",
            ends.len()
        ))),
    }
}
