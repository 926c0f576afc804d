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

mod connect;
pub mod message;
mod pairs;
mod pingpong;
mod pubsub;
mod runtime;
mod spawn;
mod stream;
mod timers;

use crate::deadline::Deadline;
use crate::measure::Recorder;
use crate::result::{
    CaseConfig, Counters, FanOut, FloorKind, LatencyKind, Metric, RoleId, Runtime, Wait,
};
use crate::transport::{Capabilities, Endpoint, Exchange, SetupPlan, Side, TransportError};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};

/// The workloads msgperf knows; adding one is one module and one line here.
pub static REGISTRY: &[&dyn Workload] = &[
    &pingpong::PingPong,
    &stream::Stream,
    &pubsub::PubSub,
    &pairs::Pairs,
    &spawn::Spawn,
    &timers::Timers,
    &connect::Connect,
];

pub fn find(name: &str) -> Result<&'static dyn Workload, String> {
    REGISTRY
        .iter()
        .copied()
        .find(|w| w.name() == name)
        .ok_or_else(|| {
            let names: Vec<_> = REGISTRY.iter().map(|w| w.name()).collect();
            format!("unknown workload `{name}`: use one of {}", names.join(", "))
        })
}

pub trait Workload: Sync {
    fn name(&self) -> &'static str;
    fn about(&self) -> &'static str;
    /// What this case's latency figure measures, and the metric that holds it.
    fn latency(&self, case: &CaseConfig) -> (LatencyKind, Metric);
    /// Which plain loop of the transport this case's figures divide by; None where no floor
    /// compares like with like (a paced case moves what its schedule says).
    fn floor_kind(&self, case: &CaseConfig) -> Option<FloorKind>;
    /// Refuses a case this workload cannot run on a transport, naming the fix.
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String>;
    /// The case's roles and their ends, and what the transport's set-up makes for them.
    fn topology(&self, case: &CaseConfig, caps: &Capabilities) -> Topology;
    /// What it measures, which decides the options it takes (`--n`, `--runtime`, `--hold`).
    fn subject(&self) -> Subject {
        Subject::Messages
    }
    /// What it moves on each two-way channel (a transport may pick its calls by it).
    fn exchange(&self, _case: &CaseConfig) -> Exchange {
        Exchange::Both
    }
    /// Runs one role over its opened ends (in the order of `role.ends`). A driving role
    /// returns what it sent.
    fn run(
        &self,
        role: &RoleSpec,
        ends: &mut [Box<dyn Endpoint>],
        case: &CaseConfig,
        rec: &mut Recorder,
        ctl: &RoleControl,
    ) -> Result<Option<Sent>, RoleError>;
}

/// What a workload measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    /// Messages over a transport, for a measured window (pingpong, stream, pubsub).
    Messages,
    /// `--n` channels of a transport, each a pair of threads: a fixed amount of work (pairs).
    Channels,
    /// A runtime's threads or tasks, over no transport: a fixed amount of work (spawn, timers).
    Runtime,
    /// A transport's connections, for a window or up to `--n` (connect).
    Connections,
}

impl Subject {
    /// The transport a case on `runtime` takes when none is given: two processes over unix
    /// sockets for channel pairs on threads (one process could not map 20000 threads), tokio's
    /// channel for pairs on tasks, no channel for a runtime.
    pub fn default_transport(self, runtime: Runtime) -> Option<&'static str> {
        match self {
            Subject::Channels if runtime == Runtime::Threads => Some("uds"),
            Subject::Channels => Some(pairs::TOKIO_CHANNEL),
            Subject::Runtime => Some(crate::transport::NO_CHANNEL.name()),
            _ => None,
        }
    }
    /// The `--n` a case takes when none is given.
    pub fn default_n(self) -> Option<u64> {
        matches!(self, Subject::Channels | Subject::Runtime).then_some(100)
    }
    pub fn takes_n(self) -> bool {
        self != Subject::Messages
    }
    /// What may run its concurrent parts (`--runtime`).
    pub fn runtimes(self) -> &'static [Runtime] {
        match self {
            Subject::Runtime | Subject::Channels => &Runtime::ALL,
            _ => &[Runtime::Threads],
        }
    }
    /// A fixed amount of work (`--n`), not a measured window: no --duration, no warm-up.
    pub fn fixed_work(self) -> bool {
        matches!(self, Subject::Channels | Subject::Runtime)
    }
}

/// A case's roles and what they meet on.
#[derive(Clone, Debug)]
pub struct Topology {
    pub roles: Vec<RoleSpec>,
    pub setup: SetupPlan,
    /// How publishers reach several subscribers, where the workload has them.
    pub fan_out: Option<FanOut>,
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

/// What a running role gets from its runner besides its ends.
pub struct RoleControl<'a> {
    /// Raised to end the case early (Ctrl-C, another role died): a driving role stops sending.
    pub stop: &'a AtomicBool,
}

impl RoleControl<'_> {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
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

/// Refuses publishers and subscribers for a workload of two roles.
pub(crate) fn check_two_roles(case: &CaseConfig) -> Result<(), String> {
    if case.pubs != 1 || case.subs != 1 {
        return Err(format!(
            "--pubs and --subs are for the pubsub workload, not {}: write `msgperf run pubsub ...`",
            case.workload
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
        _ => Err(RoleError::Transport(TransportError::Unsupported(format!(
            "this role takes one channel end, not {}",
            ends.len()
        )))),
    }
}
