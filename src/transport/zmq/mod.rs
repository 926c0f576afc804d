//! `zmq`: ZeroMQ through libzmq (the `zmq` crate, which builds its own libzmq). A two-way channel
//! is two sockets of `--opt pattern`: PAIR and PAIR (either end sends), PUSH to PULL (one way),
//! or REQ and REP (a request, then its reply). A topic is ZeroMQ's own fan-out: an XPUB that
//! every SUB reads, each message written once. The accepting end (and a topic's writer) binds
//! on a port the kernel picks (`tcp`) or a path in the case's directory (`ipc`); the other end
//! connects. ZeroMQ reconnects a peer that went away without a word, so a dead peer shows as a
//! timeout here, never as end of file: the runner's liveness says which role died.
//!
//! Delivery: `full=wait` (the default) makes a writer wait at the high-water mark (an XPUB with
//! ZMQ_XPUB_NODROP, so the slowest subscriber holds the publisher back: reliable); `full=drop`
//! drops instead (a PUB's own behaviour, or a refused send on the other patterns), and every
//! drop is a loss the readers count. Cargo feature `zmq`.

// One unsafe call: ZMQ_XPUB_NODROP, which the `zmq` crate does not wrap.
#![allow(unsafe_code)]

mod floor;

use super::{
    as_it_is, check_flag, dir_of, dir_setup, host_of, host_setup, Capabilities, ChannelSpec,
    DeliveryMap, Endpoint, Exchange, Floor, Opening, OptionSpec, Options, Place, Rendezvous, Setup,
    SetupPlan, Side, Transport, TransportError,
};
use crate::deadline::Deadline;
use crate::delivery::{Delivery, Reliability, Setting};
use crate::transport::{EndpointResult, OpenResult};
use std::sync::OnceLock;
use std::time::Duration;

pub struct Zmq;

/// The one ZeroMQ context of a process (its I/O thread): made on first use, never ended
/// (ending it waits for every socket's pending messages).
fn context() -> &'static zmq::Context {
    static CTX: OnceLock<zmq::Context> = OnceLock::new();
    CTX.get_or_init(zmq::Context::new)
}

/// A hello both ends of a channel trade before it counts as open; shorter than any message.
const HELLO: &[u8] = b"hi";

impl Transport for Zmq {
    fn name(&self) -> &'static str {
        "zmq"
    }
    fn about(&self) -> &'static str {
        "ZeroMQ (libzmq): PAIR, PUSH/PULL or REQ/REP channels, XPUB/SUB fan-out (feature `zmq`)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec { key: "pattern", default: "pair", about: "a channel's sockets: pair (PAIR and PAIR: either end sends), push-pull (one way), req-rep (a request, then its reply)", values: &["pair", "push-pull", "req-rep"], check: None },
            OptionSpec { key: "endpoint", default: "tcp", about: "tcp (loopback, or a msgperf serve's host) or ipc (unix sockets in the case's directory)", values: &["tcp", "ipc"], check: None },
            OptionSpec { key: "hwm", default: "1000", about: "high-water mark: messages a socket queues per peer before it waits or drops (ZMQ_SNDHWM and ZMQ_RCVHWM; 0: no limit)", values: &[], check: Some(check_hwm) },
            OptionSpec { key: "full", default: "wait", about: "at the high-water mark a writer waits (an XPUB with ZMQ_XPUB_NODROP) or drops (counted as lost)", values: &["wait", "drop"], check: None },
            OptionSpec { key: "immediate", default: "false", about: "ZMQ_IMMEDIATE: queue only to connections that are complete", values: &[], check: Some(check_flag) },
        ]
    }
    fn capabilities(&self, o: &Options) -> Capabilities {
        Capabilities {
            reliable: o.get("full").is_none_or(|f| f == "wait"),
            max_message_bytes: 64 << 20,
            cross_process: true,
            cross_host: o.get("endpoint").is_none_or(|e| e == "tcp"),
            // XPUB serves any number of subscribers.
            native_fan_out: 1024,
            allocates_per_message: true,
            exchange: match o.get("pattern").map(String::as_str) {
                Some("push-pull") => Exchange::OneWay,
                Some("req-rep") => Exchange::Alternate,
                _ => Exchange::Both,
            },
            ..Capabilities::default()
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let mut m = as_it_is(self.name(), &self.capabilities(options), d)?;
        m.settings.retain(|s| s.setting != "reliability");
        let full = match (d.reliability, options.get("full").map(String::as_str)) {
            (Some(Reliability::BestEffort), Some("wait")) => {
                return Err("--delivery best-effort drops at the high-water mark, but --opt full=wait was given: drop one of them".into())
            }
            (Some(Reliability::Reliable), Some("drop")) => {
                return Err("--delivery reliable waits at the high-water mark, but --opt full=drop was given: drop one of them".into())
            }
            (Some(Reliability::BestEffort), _) => {
                m.options.insert("full".into(), "drop".into());
                "drop"
            }
            (_, Some(f)) => if f == "drop" { "drop" } else { "wait" },
            (_, None) => "wait",
        };
        m.strict = full == "wait" && d.reliability != Some(Reliability::BestEffort);
        m.settings.insert(
            0,
            if full == "wait" {
                Setting::new("--opt full", "wait", "reliable: at the high-water mark a writer waits (ZMQ_XPUB_NODROP on a topic: the slowest subscriber holds the publisher back); a loss fails the case")
            } else {
                Setting::new("--opt full", "drop", "best-effort: at the high-water mark a message is dropped (a PUB's own behaviour; ZMQ_DONTWAIT on a channel, counted as send_full); losses are counted")
            },
        );
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        if spec.option("endpoint") == Some("ipc") {
            dir_setup(self.name())
        } else {
            Ok(host_setup(self.name(), plan))
        }
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let pattern = spec.option("pattern").unwrap_or("pair");
        let kind = match (side, pattern) {
            (Side::Accept(_), "push-pull") => zmq::PULL,
            (Side::Connect(_), "push-pull") => zmq::PUSH,
            (Side::Accept(_), "req-rep") => zmq::REP,
            (Side::Connect(_), "req-rep") => zmq::REQ,
            (Side::Accept(_) | Side::Connect(_), _) => zmq::PAIR,
            (Side::Publish { .. }, _) => zmq::XPUB,
            (Side::Subscribe { .. }, _) => zmq::SUB,
        };
        let socket = socket(kind, spec)?;
        let binds = matches!(side, Side::Accept(_) | Side::Publish { .. });
        let address = if binds {
            let want = match &at.place {
                Place::Dir(_) => format!(
                    "ipc://{}",
                    dir_of(at)?
                        .join(format!("{}.ipc", side.meeting().replace(' ', "-")))
                        .display()
                ),
                _ => format!("tcp://{}:*", host_of(at)?),
            };
            socket.bind(&want).map_err(|e| zmq_error(&want, e))?;
            let bound = socket
                .get_last_endpoint()
                .map_err(|e| zmq_error("the bound address", e))?
                .map_err(|_| TransportError::Corrupt("a bound address that is not text".into()))?;
            Some(bound)
        } else {
            None
        };
        Ok(Box::new(ZmqOpening {
            socket,
            side,
            kind,
            address,
        }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::ZmqFloor)
    }
}

fn check_hwm(v: &str) -> Result<(), String> {
    v.parse::<u32>()
        .ok()
        .filter(|n| *n <= 10_000_000)
        .map(|_| ())
        .ok_or_else(|| "give a count of messages from 0 (no limit) to 10000000, e.g. 1000".into())
}

fn zmq_error(what: &str, e: zmq::Error) -> TransportError {
    match e {
        zmq::Error::EADDRINUSE => TransportError::AddressInUse(what.into()),
        zmq::Error::ECONNREFUSED => TransportError::Refused(what.into()),
        e => TransportError::middleware("libzmq", what, e),
    }
}

/// A socket of `kind` with the case's settings.
pub(super) fn socket(
    kind: zmq::SocketType,
    spec: &ChannelSpec,
) -> Result<zmq::Socket, TransportError> {
    let mut s = context()
        .socket(kind)
        .map_err(|e| zmq_error("a socket", e))?;
    let hwm: i32 = spec
        .option("hwm")
        .and_then(|h| h.parse().ok())
        .unwrap_or(1000);
    let ms = spec.timeout.as_millis().min(i32::MAX as u128) as i32;
    let set = |r: zmq::Result<()>, what: &str| r.map_err(|e| zmq_error(what, e));
    set(s.set_sndhwm(hwm), "ZMQ_SNDHWM")?;
    set(s.set_rcvhwm(hwm), "ZMQ_RCVHWM")?;
    // Every wait is bounded: a dead peer is a reconnecting one to ZeroMQ, never an end of file.
    set(s.set_rcvtimeo(ms), "ZMQ_RCVTIMEO")?;
    set(s.set_sndtimeo(ms), "ZMQ_SNDTIMEO")?;
    set(s.set_linger(1000), "ZMQ_LINGER")?;
    set(
        s.set_immediate(spec.flag("immediate", false)),
        "ZMQ_IMMEDIATE",
    )?;
    if kind == zmq::XPUB {
        // Every subscription is reported, so the writer can wait for all its readers.
        set(s.set_xpub_verbose(true), "ZMQ_XPUB_VERBOSE")?;
        set(
            set_xpub_nodrop(&mut s, spec.option("full") != Some("drop")),
            "ZMQ_XPUB_NODROP",
        )?;
    }
    if kind == zmq::SUB {
        set(s.set_subscribe(b""), "ZMQ_SUBSCRIBE")?;
    }
    Ok(s)
}

/// ZMQ_XPUB_NODROP, which the `zmq` crate does not wrap: at the high-water mark an XPUB's send
/// waits (or fails with EAGAIN) instead of dropping the message for that subscriber.
fn set_xpub_nodrop(s: &mut zmq::Socket, on: bool) -> zmq::Result<()> {
    let v: libc::c_int = on.into();
    // SAFETY: a live socket, an option libzmq knows, and a pointer to an int of its size.
    let rc = unsafe {
        zmq_sys::zmq_setsockopt(
            s.as_mut_ptr(),
            zmq_sys::ZMQ_XPUB_NODROP as libc::c_int,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(zmq::Error::from_raw(unsafe { zmq_sys::zmq_errno() }))
    }
}

/// An end bound (or not yet connected), before it met its peers.
struct ZmqOpening {
    socket: zmq::Socket,
    side: Side,
    kind: zmq::SocketType,
    address: Option<String>,
}

impl Opening for ZmqOpening {
    fn address(&self) -> Option<String> {
        self.address.clone()
    }

    fn finish(self: Box<Self>, at: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let ZmqOpening {
            socket,
            side,
            kind,
            address,
        } = *self;
        if address.is_none() {
            let to = at.bound_at(side)?;
            socket.connect(to).map_err(|e| zmq_error(to, e))?;
        }
        let deadline = Deadline::after(spec.timeout);
        let mut buf = [0u8; 64];
        let recv_hello = |buf: &mut [u8]| -> Result<(), TransportError> {
            loop {
                match socket.recv_into(buf, 0) {
                    Ok(n) if buf[..n.min(buf.len())] == *HELLO => return Ok(()),
                    Ok(_) => {}
                    Err(zmq::Error::EAGAIN) => return Err(TransportError::Timeout(spec.timeout)),
                    Err(e) => return Err(zmq_error("the peer's hello", e)),
                }
                if deadline.expired() {
                    return Err(TransportError::Timeout(spec.timeout));
                }
            }
        };
        let send_hello = || socket.send(HELLO, 0).map_err(|e| zmq_error("a hello", e));
        // Each channel is open once a hello has crossed it (both ways where it can go both).
        match (side, kind) {
            (Side::Connect(_), zmq::PUSH) => send_hello()?,
            (Side::Accept(_), zmq::PULL) => recv_hello(&mut buf)?,
            (Side::Connect(_), _) => {
                send_hello()?;
                recv_hello(&mut buf)?;
            }
            (Side::Accept(_), _) => {
                recv_hello(&mut buf)?;
                send_hello()?;
            }
            (Side::Publish { readers, .. }, _) => {
                // One subscription message from each reader: then every one of them gets
                // everything written from now on.
                let mut joined = 0;
                while joined < readers {
                    match socket.recv_into(&mut buf, 0) {
                        Ok(n) if n >= 1 && buf[0] == 1 => joined += 1,
                        Ok(_) => {}
                        Err(zmq::Error::EAGAIN) => {
                            return Err(TransportError::Timeout(spec.timeout))
                        }
                        Err(e) => return Err(zmq_error("a subscription", e)),
                    }
                    if deadline.expired() {
                        return Err(TransportError::Timeout(spec.timeout));
                    }
                }
            }
            (Side::Subscribe { .. }, _) => {}
        }
        Ok(Box::new(ZmqEndpoint {
            socket,
            timeout: spec.timeout,
            drop_when_full: spec.option("full") == Some("drop") && kind != zmq::XPUB,
        }))
    }
}

struct ZmqEndpoint {
    socket: zmq::Socket,
    timeout: Duration,
    /// Send without waiting: at the high-water mark the message is refused (counted).
    drop_when_full: bool,
}

impl ZmqEndpoint {
    fn next(&mut self, buf: &mut [u8], flags: i32) -> Result<Option<usize>, TransportError> {
        loop {
            match self.socket.recv_into(buf, flags) {
                // A hello repeated, or a subscription reaching a topic's writer.
                Ok(n) if n < 4 => continue,
                Ok(n) if n > buf.len() => {
                    return Err(TransportError::TooLarge {
                        len: n,
                        max: buf.len(),
                    })
                }
                Ok(n) => return Ok(Some(n)),
                Err(zmq::Error::EAGAIN) if flags == zmq::DONTWAIT => return Ok(None),
                Err(zmq::Error::EAGAIN) => return Err(TransportError::Timeout(self.timeout)),
                // The runner's stop (SIGUSR1) ends a wait for a peer that may never come.
                Err(zmq::Error::EINTR) if crate::deadline::role_told_to_stop() => {
                    return Err(TransportError::Stopped)
                }
                Err(zmq::Error::EINTR) => {}
                Err(e) => return Err(zmq_error("a receive", e)),
            }
        }
    }
}

impl Endpoint for ZmqEndpoint {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let flags = if self.drop_when_full {
            zmq::DONTWAIT
        } else {
            0
        };
        loop {
            match self.socket.send(msg, flags) {
                Ok(()) => return Ok(()),
                Err(zmq::Error::EAGAIN) if self.drop_when_full => return Err(TransportError::Full),
                Err(zmq::Error::EAGAIN) => return Err(TransportError::Timeout(self.timeout)),
                Err(zmq::Error::EINTR) if crate::deadline::role_told_to_stop() => {
                    return Err(TransportError::Stopped)
                }
                Err(zmq::Error::EINTR) => {}
                Err(zmq::Error::EFSM) => {
                    return Err(TransportError::Unsupported(
                        "zmq: a send out of turn (req-rep alternates a request and a reply)".into(),
                    ))
                }
                Err(e) => return Err(zmq_error("a send", e)),
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        Ok(self.next(buf, 0)?.unwrap_or(0))
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        self.next(buf, zmq::DONTWAIT)
    }
}
