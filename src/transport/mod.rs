//! Room `transport`: how bytes get from one role to another. Imports nothing of `measure`,
//! `result`, `report` or `workload`; the measurement loop lives elsewhere and only speaks to
//! [`Endpoint`].
//!
//! # The contract every transport keeps (checked by `tests/conformance.rs`)
//! - Messages are self-delimiting: bytes 0..4 of every message hold its whole length as a
//!   little-endian `u32`. Byte-stream transports split the stream with it; datagram and channel
//!   transports deliver whole messages and ignore it.
//! - [`Transport::listen`] creates what peers meet on and returns a [`Listener`] whose
//!   [`Rendezvous`] is plain data, so it can travel to another process or host. Dropping the
//!   listener removes every file it created.
//! - [`Transport::connect`] and [`Listener::accept`] return within the spec's timeout, with
//!   [`TransportError::Timeout`] if the peer never came.
//! - [`Endpoint::recv`] returns one whole message or an error within the spec's timeout (or,
//!   when the spec is `watched`, when msgperf ends a peer that stopped); it never returns
//!   part of a message. A peer that closed or died is [`TransportError::PeerClosed`].
//! - [`Endpoint::try_recv`] never blocks for want of a message (in `--poll` mode endpoints are
//!   opened non-blocking).
//! - A message longer than the receiver's buffer is [`TransportError::TooLarge`], never a silent
//!   truncation.

mod fanout;
mod floor;
mod framing;
#[cfg(feature = "iceoryx2")]
mod iceoryx2;
mod inproc;
mod pipe;
mod shm;
mod tcp;
mod udp;
mod uds;
mod uds_dgram;

pub use fanout::{CopyFanOut, Multicast, MulticastListener, OneReader};
pub use floor::{memcpy_bandwidth, spin_pingpong, Floor, FloorFigure, FloorKind, FloorRoles};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The transports msgperf knows, in the order help and tables list them. Adding one is one
/// module above and one line here.
pub static REGISTRY: &[&dyn Transport] = &[
    &inproc::Inproc,
    &pipe::Pipe,
    &uds::Uds,
    &uds_dgram::UdsDgram,
    &tcp::Tcp,
    &udp::Udp,
    &shm::Shm,
    #[cfg(feature = "iceoryx2")]
    &iceoryx2::Iceoryx2,
];

/// Finds a transport by its CLI name.
pub fn find(name: &str) -> Result<&'static dyn Transport, String> {
    REGISTRY
        .iter()
        .copied()
        .find(|t| t.name() == name)
        .ok_or_else(|| {
            let names: Vec<_> = REGISTRY.iter().map(|t| t.name()).collect();
            format!(
                "unknown transport `{name}`: use one of {} (see `msgperf transports`)",
                names.join(", ")
            )
        })
}

/// A transport: a unit struct listed in [`REGISTRY`].
pub trait Transport: Sync {
    /// The CLI name, e.g. `uds-dgram`.
    fn name(&self) -> &'static str;
    /// One line for help and `msgperf transports`.
    fn about(&self) -> &'static str;
    /// The `--opt key=value` keys this transport accepts.
    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }
    /// What it can do with default options.
    fn capabilities(&self) -> Capabilities;
    /// What it can do with these `--opt` values (some options change it).
    fn capabilities_with(&self, _options: &BTreeMap<String, String>) -> Capabilities {
        self.capabilities()
    }
    /// Creates the meeting point (socket, path, channel) and waits for no one yet.
    fn listen(&self, spec: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError>;
    /// Joins a listener's meeting point.
    fn connect(
        &self,
        at: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError>;
    /// A native fan-out for `readers` readers, who join it with `connect`; only transports
    /// whose capabilities say `native_fan_out` make one (the others get [`CopyFanOut`]).
    fn multicast(
        &self,
        _spec: &ChannelSpec,
        _readers: usize,
    ) -> Result<Box<dyn MulticastListener>, TransportError> {
        Err(TransportError::Unsupported(format!(
            "transport `{}` has no native fan-out",
            self.name()
        )))
    }
    /// The plainest loop of this transport, which every ratio divides by.
    fn floor(&self) -> Option<&'static dyn Floor> {
        None
    }
    /// The `--opt` values that make this transport drop rather than wait when a reader falls
    /// behind (`best_effort`) or keep only the newest message (`latest`). By default a
    /// transport offers neither: it never drops and keeps every message in order.
    fn delivery_options(
        &self,
        best_effort: bool,
        latest: bool,
    ) -> Result<BTreeMap<String, String>, String> {
        let _ = best_effort;
        if latest {
            return Err(format!(
                "transport `{}` keeps every message in order (fifo only): use --history fifo, or a transport with a latest-value buffer (shm)",
                self.name()
            ));
        }
        Ok(BTreeMap::new())
    }
}

/// The passive side of a channel before a peer arrived.
pub trait Listener: Send {
    /// Where a peer connects: printed by `msgperf serve`, passed to a peer process.
    fn rendezvous(&self) -> Rendezvous;
    /// Waits, at most the spec's timeout, for one peer.
    fn accept(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError>;
}

/// One end of an open channel: all the measurement loop touches.
pub trait Endpoint: Send {
    /// Sends one whole message (blocks, within the timeout, while the transport is full).
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError>;
    /// Receives one whole message into `buf`, returning its length.
    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError>;
    /// Receives one message if one is there now.
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError>;
    /// Builds a message of `len` bytes in place, in the transport's own memory, and sends it.
    /// Only transports with [`Capabilities::zero_copy`] implement it.
    fn send_with(
        &mut self,
        _len: usize,
        _build: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        Err(TransportError::Unsupported(
            "this transport has no zero-copy send".into(),
        ))
    }
    /// Receives one message and hands it to `read` in place; returns its length.
    fn recv_with(&mut self, _read: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        Err(TransportError::Unsupported(
            "this transport has no zero-copy receive".into(),
        ))
    }
    /// Shortens (or restores) the receive timeout, for the end-of-case exchange on transports
    /// that may drop the END message. Reliable transports need not implement it.
    fn set_recv_timeout(&mut self, _timeout: Duration) -> Result<(), TransportError> {
        Ok(())
    }
}

/// Where peers meet: plain data that can travel between processes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rendezvous {
    pub transport: String,
    /// A socket address, a path or a key, as the transport defines.
    pub address: String,
}

/// How a channel is opened: the same on both sides.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChannelSpec {
    /// `--opt` values, validated against [`Transport::options`].
    pub options: BTreeMap<String, String>,
    /// Bound on every blocking call: connect, accept, send and receive.
    pub timeout: Duration,
    /// Open non-blocking for `--poll` (reads spin on `try_recv`).
    pub poll: bool,
    /// The largest message either side will send or receive.
    pub max_message: usize,
    /// Where to listen, if the user said (`--listen`); otherwise a fresh address.
    pub listen_at: Option<String>,
    /// msgperf ends the session itself if the peer stops: the peer is a thread of this process
    /// (its end closes when it returns) or a process that msgperf started and kills if it does
    /// not run for `timeout`. A blocking wait then needs no timer of its own: pipes block
    /// plainly (else they wait in poll(2)), and stream sockets skip SO_RCVTIMEO and SO_SNDTIMEO,
    /// whose kernel timer on every wait costs about 5% of a same-CPU unix-socket round trip.
    /// Datagram sockets keep theirs: it is how a lost datagram is noticed, and a peer that dies
    /// leaves a datagram reader no end of file.
    pub watched: bool,
}

impl ChannelSpec {
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    /// A boolean `--opt`, `true`/`false`/`1`/`0`/`on`/`off`.
    pub fn flag(&self, key: &str, default: bool) -> bool {
        match self.option(key) {
            Some("true" | "1" | "on" | "yes") => true,
            Some("false" | "0" | "off" | "no") => false,
            _ => default,
        }
    }
}

/// One `--opt` key a transport accepts.
pub struct OptionSpec {
    pub key: &'static str,
    pub default: &'static str,
    pub about: &'static str,
    /// The values accepted; empty means any.
    pub values: &'static [&'static str],
}

/// Checks `--opt` pairs against a transport's [`OptionSpec`]s.
pub fn validate_options(t: &dyn Transport, opts: &BTreeMap<String, String>) -> Result<(), String> {
    for (k, v) in opts {
        let Some(spec) = t.options().iter().find(|o| o.key == k) else {
            let keys: Vec<_> = t.options().iter().map(|o| o.key).collect();
            return Err(if keys.is_empty() {
                format!("transport `{}` takes no --opt, but got `{k}`", t.name())
            } else {
                format!(
                    "transport `{}` has no option `{k}`: its options are {}",
                    t.name(),
                    keys.join(", ")
                )
            });
        };
        if !spec.values.is_empty() && !spec.values.contains(&v.as_str()) {
            return Err(format!(
                "--opt {k}={v}: `{v}` is not accepted; use one of {}",
                spec.values.join(", ")
            ));
        }
    }
    Ok(())
}

/// What a transport can do; workloads check their needs against it before anything starts.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Capabilities {
    /// Nothing is lost or duplicated while both peers live.
    pub reliable: bool,
    /// Messages arrive in the order sent.
    pub ordered: bool,
    /// Largest message it carries.
    pub max_message_bytes: usize,
    /// Peers may be separate processes (false: threads of one process only).
    pub cross_process: bool,
    /// Peers may be on separate hosts.
    pub cross_host: bool,
    /// A reader gets the newest message; older unread ones are overwritten (counted, not lost).
    pub latest_value: bool,
    /// Messages are built and read in the transport's own memory ([`Endpoint::send_with`]).
    pub zero_copy: bool,
    /// One listener serves several peers at once (several publishers to one subscriber).
    pub many_peers: bool,
    /// Readers one write can reach ([`Transport::multicast`]); 0: none, a copy per reader.
    pub native_fan_out: usize,
}

/// Errors a transport reports, each one the caller can act on.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the peer closed the channel or died")]
    PeerClosed,
    #[error("message of {len} B is larger than the {max} B this transport or buffer takes")]
    TooLarge { len: usize, max: usize },
    #[error("address {0} is in use: pick another with --listen or stop what holds it")]
    AddressInUse(String),
    #[error("connection refused at {0}: is the peer (`msgperf serve`) running there?")]
    Refused(String),
    #[error("corrupt stream: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Unsupported(String),
    /// The queue is full and the transport was told not to wait (`--opt full=fail`).
    #[error("the queue is full")]
    Full,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl TransportError {
    /// Maps an I/O error from a data call, given the timeout in force.
    pub fn from_io(e: std::io::Error, timeout: Duration) -> Self {
        use std::io::ErrorKind::*;
        match e.kind() {
            WouldBlock | TimedOut => TransportError::Timeout(timeout),
            BrokenPipe | ConnectionReset | ConnectionAborted | UnexpectedEof | NotConnected
            | ConnectionRefused => TransportError::PeerClosed,
            _ => TransportError::Io(e),
        }
    }
}

/// The length a message declares in its first four bytes.
#[inline(always)]
pub fn declared_len(msg: &[u8]) -> usize {
    u32::from_le_bytes([msg[0], msg[1], msg[2], msg[3]]) as usize
}

/// Removes what msgperf processes that no longer exist left behind (one killed hard cannot
/// clean up after itself): private directories in the temp dir and shm segments, both named
/// `msgperf-PID-N`.
pub fn remove_stale_dirs() {
    for dir in [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.starts_with("msgperf-") {
                continue;
            }
            let pid = name
                .strip_prefix("msgperf-")
                .and_then(|r| r.split_once('-'))
                .and_then(|(p, _)| p.parse::<u32>().ok());
            let Some(pid) = pid else {
                // A named shm segment: its header says who made it.
                shm::remove_if_stale(&e.path());
                continue;
            };
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let p = e.path();
                let _ = if p.is_dir() {
                    std::fs::remove_dir_all(p)
                } else {
                    std::fs::remove_file(p)
                };
            }
        }
    }
}

/// A fresh private directory for socket paths and FIFOs; removed by its owner's `Drop`.
pub(crate) fn private_dir() -> std::io::Result<std::path::PathBuf> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "msgperf-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// Accepts on a non-blocking listener, waiting at most the spec's timeout.
pub(crate) fn accept_within<L: std::os::fd::AsRawFd, S>(
    listener: &L,
    spec: &ChannelSpec,
    accept: impl Fn(&L) -> std::io::Result<S>,
) -> Result<S, TransportError> {
    let deadline = crate::deadline::Deadline::after(spec.timeout);
    loop {
        match accept(listener) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if deadline.expired() {
                    return Err(TransportError::Timeout(spec.timeout));
                }
                crate::sys::wait_readable(
                    listener.as_raw_fd(),
                    deadline.remaining_nonzero().as_millis() as i32,
                )?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}
