//! Room `workload`: what the roles do with a channel. A workload speaks only to
//! [`Endpoint`] and records into a [`Recorder`]; where it runs and how its results are shown
//! are other rooms' business.
//!
//! # The contract
//! - The active role (initiator, writer) decides when the case ends (count, duration, Ctrl-C)
//!   and returns how many messages it sent; the session then sends END.
//! - The passive role (responder, reader) returns when it receives END.
//! - Messages in the measured window carry the MEASURED flag; the passive role starts its
//!   window at the first one.
//! - Nothing is allocated, formatted or locked between the first and last message.

pub mod message;
mod pingpong;
mod pubsub;
mod stream;

use crate::deadline::Deadline;
use crate::measure::clock;
use crate::measure::Recorder;
use crate::result::{CaseConfig, Wait};
use crate::transport::{Capabilities, Endpoint, FloorKind, TransportError};
use std::sync::atomic::{AtomicBool, Ordering};

/// The workloads msgperf knows; adding one is one module and one line here.
pub static REGISTRY: &[&dyn Workload] = &[&pingpong::PingPong, &stream::Stream, &pubsub::PubSub];

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
    /// Names of the active and passive roles.
    fn roles(&self) -> [&'static str; 2];
    /// What the latency figure of this workload means, for the table.
    fn latency_kind(&self, case: &CaseConfig) -> &'static str;
    /// Which plain loop of the transport this workload's figures divide by.
    fn floor_kind(&self) -> FloorKind;
    /// Refuses a case this workload cannot run on a transport, naming the fix.
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String>;
    /// Runs the active role; returns what it sent.
    fn active(
        &self,
        ep: &mut dyn Endpoint,
        case: &CaseConfig,
        rec: &mut Recorder,
        stop: &AtomicBool,
    ) -> Result<Sent, RoleError>;
    /// Runs the passive role until END.
    fn passive(
        &self,
        ep: &mut dyn Endpoint,
        case: &CaseConfig,
        rec: &mut Recorder,
    ) -> Result<(), RoleError>;
}

/// What the active role sent: sequence numbers from `first_measured` to `next` (exclusive)
/// were measured; the ones before were warm-up. END carries both.
#[derive(Clone, Copy, Debug, Default)]
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
}

/// When the active role stops: after `count` measured messages or at `end_ns`.
#[derive(Clone, Copy)]
pub(crate) struct StopRule {
    count: u64,
    end_ns: u64,
}

impl StopRule {
    /// The measured phase, starting now.
    pub fn measured(case: &CaseConfig) -> Self {
        let now = clock::now();
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
            end_ns: clock::now() + case.warmup.as_nanos() as u64,
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
    rec: &mut Recorder,
) -> Result<usize, TransportError> {
    if case.wait == Wait::Block {
        rec.counters.read_calls += 1;
        return ep.recv(buf);
    }
    let mut spins: u64 = 0;
    let mut deadline: Option<Deadline> = None;
    loop {
        rec.counters.read_calls += 1;
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

/// Receives one message in place (zero-copy transports), handing it to `read`.
#[inline(always)]
pub(crate) fn receive_in_place(
    ep: &mut dyn Endpoint,
    rec: &mut Recorder,
    read: &mut dyn FnMut(&[u8]),
) -> Result<usize, TransportError> {
    rec.counters.read_calls += 1;
    ep.recv_with(read)
}

/// Buffer for receiving: the case's size or a control message, whichever is larger.
pub(crate) fn receive_buffer(case: &CaseConfig) -> Vec<u8> {
    vec![0u8; case.size_bytes.max(message::CONTROL_MAX)]
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
