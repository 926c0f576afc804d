//! `zenoh`: Eclipse Zenoh (the `zenoh` crate) in peer mode, without a router. Each end is a
//! session of its own: the accepting end of a channel, and a topic's writer, listen on a
//! loopback port (or a unix socket in the case's directory); the other ends connect to it.
//! Multicast and gossip scouting are off, so a session meets only the peer it was told of. A
//! channel is two key expressions, one per direction; a topic is one, which Zenoh routes to
//! every subscriber from a single put.
//!
//! An end counts as open once its publisher matches a subscriber (a channel), or once every
//! reader of a topic said hello on a key of its own after declaring its subscriber (Zenoh
//! keeps a link's declarations and data in order), so nothing measured is lost to discovery.
//! A peer that dies leaves a subscriber nothing but silence: the runner's liveness ends the
//! case. Cargo feature `zenoh`.

mod floor;

use super::{
    check_flag, dir_of, dir_setup, host_of, host_setup, reads_in_place, Capabilities, ChannelSpec,
    DeliveryMap, Endpoint, Exchange, Floor, Opening, OptionSpec, Options, Place, Rendezvous, Setup,
    SetupPlan, Side, Take, Transport, TransportError,
};
use crate::deadline::Deadline;
use crate::delivery::{Delivery, History, Reliability, Setting};
use crate::transport::{EndpointResult, OpenResult};
use std::time::{Duration, Instant};
use zenoh::handlers::{FifoChannel, FifoChannelHandler, RingChannel, RingChannelHandler};
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::qos::CongestionControl;
use zenoh::sample::Sample;
use zenoh::{Session, Wait};

pub struct Zenoh;

impl Transport for Zenoh {
    fn name(&self) -> &'static str {
        "zenoh"
    }
    fn about(&self) -> &'static str {
        "Eclipse Zenoh in peer mode: a key per direction, Zenoh's own fan-out (feature `zenoh`)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec { key: "endpoint", default: "tcp", about: "tcp (loopback) or unix (unix-socket streams in the case's directory)", values: &["tcp", "unix"], check: None },
            OptionSpec { key: "congestion", default: "block", about: "CongestionControl of publishers: block (a full transmit queue makes put wait) or drop (the message is dropped, counted as lost)", values: &["block", "drop"], check: None },
            OptionSpec { key: "express", default: "true", about: "express: send each message at once instead of batching it with the next ones", values: &[], check: Some(check_flag) },
            OptionSpec { key: "shm", default: "false", about: "Zenoh's shared memory on both ends: every message goes through a shared-memory pool instead of the socket (transport/shared_memory)", values: &[], check: Some(check_flag) },
            OptionSpec { key: "queue", default: "256", about: "samples a subscriber's FIFO holds before Zenoh's receive task waits for it (back-pressure); with --history latest, the ring's size", values: &[], check: Some(check_queue) },
            OptionSpec { key: "history", default: "fifo", about: "fifo (a FIFO channel that waits when full) or latest (a ring of `queue` samples that overwrites the oldest, counted)", values: &["fifo", "latest"], check: None },
        ]
    }
    fn capabilities(&self, o: &Options) -> Capabilities {
        let latest = o.get("history").is_some_and(|h| h == "latest");
        Capabilities {
            reliable: o.get("congestion").is_none_or(|c| c == "block") && !latest,
            max_message_bytes: 16 << 20,
            cross_process: true,
            cross_host: o.get("endpoint").is_none_or(|e| e == "tcp"),
            latest_value: latest,
            native_fan_out: 1024,
            allocates_per_message: true,
            reads_in_place: true,
            exchange: Exchange::Both,
            ..Capabilities::default()
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let given = |k: &str| options.get(k).map(String::as_str);
        let latest = match (d.history, given("history")) {
            (History::KeepLast(1), _) => true,
            (History::KeepLast(n), _) => return Err(format!("zenoh's ring keeps `--opt queue` samples: use --history latest with --opt queue={n}")),
            (History::KeepAll, h) => h == Some("latest"),
        };
        if latest && d.reliability == Some(Reliability::Reliable) {
            return Err("--history latest overwrites unread samples, so it cannot be --delivery reliable: use --delivery best-effort".into());
        }
        let mut m = DeliveryMap::default();
        let congestion = match (d.reliability, given("congestion")) {
            (Some(Reliability::Reliable), Some("drop")) => return Err("--delivery reliable waits when Zenoh's queue is full, but --opt congestion=drop was given: drop one of them".into()),
            (Some(Reliability::BestEffort), Some("block")) => return Err("--delivery best-effort drops when Zenoh's queue is full, but --opt congestion=block was given: drop one of them".into()),
            (Some(Reliability::BestEffort), _) => {
                m.options.insert("congestion".into(), "drop".into());
                "drop"
            }
            (_, Some(c)) => if c == "drop" { "drop" } else { "block" },
            (_, None) => "block",
        };
        if latest {
            m.options.insert("history".into(), "latest".into());
            m.settings.push(Setting::new("subscriber handler", "RingChannel", "--history latest: a ring of `--opt queue` samples; the oldest unread ones are overwritten, counted"));
        } else {
            m.settings.push(Setting::new("subscriber handler", "FifoChannel", "every sample in order; a full FIFO makes Zenoh's receive task wait, which pushes back on the link"));
        }
        m.settings.insert(0, if congestion == "block" {
            Setting::new("CongestionControl", "Block", "reliable: a publisher whose transmit queue is full waits (TCP and the subscriber's FIFO push back); a loss fails the case")
        } else {
            Setting::new("CongestionControl", "Drop", "best-effort: a message that finds the transmit queue full is dropped; losses are counted")
        });
        m.settings.push(Setting::new(
            "durability",
            "volatile",
            "a subscriber gets what is put after it was declared",
        ));
        m.strict =
            congestion == "block" && !latest && d.reliability != Some(Reliability::BestEffort);
        m.latest = latest;
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        let setup = if spec.option("endpoint") == Some("unix") {
            dir_setup(self.name())?
        } else {
            host_setup(self.name(), plan)
        };
        if !spec.flag("shm", false) {
            return Ok(setup);
        }
        // Zenoh's shared memory leaves its segments in /dev/shm when a process exits (its own
        // sweep runs while they are still mapped): remove them once the case's roles are gone.
        let rendezvous = setup.rendezvous.clone();
        Ok(Setup::new(rendezvous, (setup, ShmSweep)))
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let binds = matches!(side, Side::Accept(_) | Side::Publish { .. });
        if !binds {
            return Ok(Box::new(ZenohOpening {
                session: None,
                side,
                address: None,
            }));
        }
        let (session, address) = listen(at, side, spec)?;
        Ok(Box::new(ZenohOpening {
            session: Some(session),
            side,
            address: Some(address),
        }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::ZenohFloor)
    }
}

/// Removes Zenoh's shared-memory segments (`/dev/shm/*.zenoh`) that no other live process maps,
/// when dropped.
struct ShmSweep;

impl Drop for ShmSweep {
    fn drop(&mut self) {
        sweep_shm();
    }
}

pub(super) fn sweep_shm() {
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    let ours: Vec<std::path::PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "zenoh"))
        .collect();
    if ours.is_empty() {
        return;
    }
    // What every other process maps now (this one's mappings go with it: msgperf's roles in
    // other processes are gone by the time a case's set-up is dropped).
    let me = std::process::id().to_string();
    let mut mapped = std::collections::HashSet::new();
    for pid in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = pid.file_name();
        let name = name.to_string_lossy();
        if name == me || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(maps) = std::fs::read_to_string(pid.path().join("maps")) {
            for line in maps.lines().filter(|l| l.contains(".zenoh")) {
                if let Some(path) = line.split_whitespace().nth(5) {
                    mapped.insert(path.to_string());
                }
            }
        }
    }
    for p in ours {
        if !mapped.contains(&p.display().to_string()) {
            let _ = std::fs::remove_file(&p);
        }
    }
}

fn check_queue(v: &str) -> Result<(), String> {
    v.parse::<usize>()
        .ok()
        .filter(|n| (1..=1_000_000).contains(n))
        .map(|_| ())
        .ok_or_else(|| "give a count of samples from 1 to 1000000, e.g. 256".into())
}

fn zenoh_error(what: &str, e: zenoh::Error) -> TransportError {
    TransportError::middleware("zenoh", what, e)
}

/// A peer-mode session's configuration: no scouting, no router, listening on or connecting
/// to one endpoint, shared memory as asked.
pub(super) fn config(
    listen: Option<&str>,
    connect: Option<&str>,
    spec: &ChannelSpec,
) -> Result<zenoh::Config, TransportError> {
    let mut c = zenoh::Config::default();
    let shm = spec.flag("shm", false);
    let max = spec.max_message.max(64 << 10);
    let endpoints = |e: Option<&str>| match e {
        Some(e) => format!("[\"{e}\"]"),
        None => "[]".into(),
    };
    let settings = [
        ("mode", "\"peer\"".to_string()),
        ("scouting/multicast/enabled", "false".into()),
        ("scouting/gossip/enabled", "false".into()),
        ("listen/endpoints", endpoints(listen)),
        ("connect/endpoints", endpoints(connect)),
        ("transport/shared_memory/enabled", shm.to_string()),
        // With shm, every message goes through the pool (a threshold of 0 bytes); the pool
        // holds a few of the largest.
        (
            "transport/shared_memory/transport_optimization/enabled",
            shm.to_string(),
        ),
        (
            "transport/shared_memory/transport_optimization/message_size_threshold",
            "0".into(),
        ),
        (
            "transport/shared_memory/transport_optimization/pool_size",
            (16usize << 20).max(8 * max).to_string(),
        ),
        // A put blocked on a full queue (a link gone down) gives up after the case's
        // timeout, not Zenoh's 5 s: a writer told to stop is not held past the timeout.
        (
            "transport/link/tx/queue/congestion_control/block/wait_before_close",
            spec.timeout.as_micros().max(1).to_string(),
        ),
    ];
    for (k, v) in settings {
        c.insert_json5(k, &v)
            .map_err(|e| zenoh_error(&format!("setting {k} to {v}"), e))?;
    }
    Ok(c)
}

/// Opens a session that listens where this side's peers will connect: a free loopback port
/// (or a socket path); the endpoint it listens on.
fn listen(
    at: &Rendezvous,
    side: Side,
    spec: &ChannelSpec,
) -> Result<(Session, String), TransportError> {
    let mut last = None;
    // A port found free may be taken before Zenoh binds it: try a few.
    for _ in 0..5 {
        let endpoint = match &at.place {
            Place::Dir(_) => format!(
                "unixsock-stream/{}",
                dir_of(at)?
                    .join(format!("{}.sock", side.meeting().replace(' ', "-")))
                    .display()
            ),
            _ => {
                let host = host_of(at)?;
                let port = std::net::TcpListener::bind((host, 0))
                    .and_then(|l| l.local_addr())
                    .map_err(TransportError::Io)?
                    .port();
                format!("tcp/{host}:{port}")
            }
        };
        match zenoh::open(config(Some(&endpoint), None, spec)?).wait() {
            Ok(s) => return Ok((s, endpoint)),
            Err(e) => last = Some(zenoh_error(&format!("listening on {endpoint}"), e)),
        }
        if matches!(at.place, Place::Dir(_)) {
            break;
        }
    }
    Err(last.unwrap_or_else(|| TransportError::Unsupported("zenoh: no endpoint".into())))
}

/// The key expressions of a side: where it writes and where it reads.
fn keys(side: Side) -> (Option<String>, Option<String>) {
    match side {
        Side::Accept(n) => (
            Some(format!("msgperf/channel-{n}/back")),
            Some(format!("msgperf/channel-{n}/forth")),
        ),
        Side::Connect(n) => (
            Some(format!("msgperf/channel-{n}/forth")),
            Some(format!("msgperf/channel-{n}/back")),
        ),
        Side::Publish { topic, .. } => (Some(format!("msgperf/topic-{topic}")), None),
        Side::Subscribe { topic, .. } => (None, Some(format!("msgperf/topic-{topic}"))),
    }
}

/// A subscriber's queue: FIFO (waits when full) or a ring (overwrites the oldest).
pub(super) enum Inbox {
    Fifo(Subscriber<FifoChannelHandler<Sample>>),
    Ring(Subscriber<RingChannelHandler<Sample>>),
}

impl Inbox {
    pub(super) fn declare(
        session: &Session,
        key: &str,
        spec: &ChannelSpec,
    ) -> Result<Inbox, TransportError> {
        let queue = spec
            .option("queue")
            .and_then(|q| q.parse().ok())
            .unwrap_or(256);
        let b = session.declare_subscriber(key.to_string());
        let err = |e| zenoh_error(&format!("a subscriber on {key}"), e);
        Ok(if spec.option("history") == Some("latest") {
            Inbox::Ring(b.with(RingChannel::new(queue)).wait().map_err(err)?)
        } else {
            Inbox::Fifo(b.with(FifoChannel::new(queue)).wait().map_err(err)?)
        })
    }

    /// The next sample, waiting at most `timeout` (None: none came).
    pub(super) fn recv(&self, timeout: Duration) -> zenoh::Result<Option<Sample>> {
        match self {
            Inbox::Fifo(s) => s.recv_timeout(timeout),
            Inbox::Ring(s) => s.recv_timeout(timeout),
        }
    }

    pub(super) fn try_recv(&self) -> zenoh::Result<Option<Sample>> {
        match self {
            Inbox::Fifo(s) => s.try_recv(),
            Inbox::Ring(s) => s.try_recv(),
        }
    }
}

pub(super) fn publisher(
    session: &Session,
    key: &str,
    spec: &ChannelSpec,
) -> Result<Publisher<'static>, TransportError> {
    session
        .declare_publisher(key.to_string())
        .congestion_control(if spec.option("congestion") == Some("drop") {
            CongestionControl::Drop
        } else {
            CongestionControl::Block
        })
        .express(spec.flag("express", true))
        .wait()
        .map_err(|e| zenoh_error(&format!("a publisher on {key}"), e))
}

/// Waits until `p` matches a subscriber, at most `timeout`. One blocking wait on zenoh's
/// matching listener (which says at once if a subscriber is already there), not a polling loop:
/// the wait costs no wake-ups, and a role's wake-ups count its exchanges.
pub(super) fn wait_matched(p: &Publisher<'_>, timeout: Duration) -> Result<(), TransportError> {
    let deadline = Instant::now() + timeout;
    let listener = p
        .matching_listener()
        .wait()
        .map_err(|e| zenoh_error("a publisher's matching listener", e))?;
    loop {
        match listener.recv_deadline(deadline) {
            Ok(Some(status)) if status.matching() => return Ok(()),
            Ok(Some(_)) => {}
            Ok(None) => return Err(TransportError::Timeout(timeout)),
            Err(e) => return Err(zenoh_error("a publisher's matching listener", e)),
        }
    }
}

/// Copies a sample's payload into `buf`: its length.
pub(super) fn copy_out(sample: &Sample, buf: &mut [u8]) -> Result<usize, TransportError> {
    let payload = sample.payload();
    let len = payload.len();
    if len > buf.len() {
        return Err(TransportError::TooLarge {
            len,
            max: buf.len(),
        });
    }
    let mut at = 0;
    for s in payload.slices() {
        buf[at..at + s.len()].copy_from_slice(s);
        at += s.len();
    }
    Ok(len)
}

struct ZenohOpening {
    /// The listening session of a binding side; a connecting side makes its own in finish.
    session: Option<Session>,
    side: Side,
    address: Option<String>,
}

impl Opening for ZenohOpening {
    fn address(&self) -> Option<String> {
        self.address.clone()
    }

    fn finish(self: Box<Self>, at: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let ZenohOpening { session, side, .. } = *self;
        let session = match session {
            Some(s) => s,
            None => {
                let to = at.bound_at(side)?;
                zenoh::open(config(None, Some(to), spec)?)
                    .wait()
                    .map_err(|e| zenoh_error(&format!("connecting to {to}"), e))?
            }
        };
        let (out, inn) = keys(side);
        let inbox = inn
            .map(|k| Inbox::declare(&session, &k, spec))
            .transpose()?;
        let publisher = out.map(|k| publisher(&session, &k, spec)).transpose()?;
        let hello_key = format!("msgperf/{}/hello", side.meeting().replace(' ', "-"));
        match side {
            Side::Accept(_) | Side::Connect(_) => {
                if let Some(p) = &publisher {
                    wait_matched(p, spec.timeout)?;
                }
            }
            Side::Publish { readers, .. } => {
                // Each reader says hello once its subscriber is declared: then it gets every
                // put from now on.
                let hellos = Inbox::Fifo(
                    session
                        .declare_subscriber(hello_key.clone())
                        .with(FifoChannel::new(1024))
                        .wait()
                        .map_err(|e| zenoh_error("the hello subscriber", e))?,
                );
                let deadline = Deadline::after(spec.timeout);
                let mut seen = std::collections::BTreeSet::new();
                while (seen.len() as u32) < readers {
                    match hellos.recv(deadline.remaining_nonzero()) {
                        Ok(Some(s)) => {
                            seen.insert(s.payload().to_bytes().to_vec());
                        }
                        Ok(None) if deadline.expired() => {
                            return Err(TransportError::Timeout(spec.timeout))
                        }
                        Ok(None) => {}
                        Err(e) => return Err(zenoh_error("a hello", e)),
                    }
                }
            }
            Side::Subscribe { reader, .. } => {
                let hello = session
                    .declare_publisher(hello_key)
                    .wait()
                    .map_err(|e| zenoh_error("the hello publisher", e))?;
                wait_matched(&hello, spec.timeout)?;
                hello
                    .put(reader.to_le_bytes().to_vec())
                    .wait()
                    .map_err(|e| zenoh_error("a hello", e))?;
            }
        }
        Ok(Box::new(ZenohEndpoint {
            publisher,
            inbox,
            timeout: spec.timeout,
            session,
        }))
    }
}

struct ZenohEndpoint {
    publisher: Option<Publisher<'static>>,
    inbox: Option<Inbox>,
    timeout: Duration,
    session: Session,
}

impl Drop for ZenohEndpoint {
    fn drop(&mut self) {
        // Undeclared and closed now, not in the background after the role returned; but a
        // session to a peer out of reach (a link down) takes Zenoh's own 10 s to close, so the
        // close is waited for at most a second, then left to the role's exit.
        self.publisher.take();
        self.inbox.take();
        let session = self.session.clone();
        let (closed, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = session.close().wait();
            let _ = closed.send(());
        });
        let _ = done.recv_timeout(self.timeout.min(Duration::from_secs(1)));
    }
}

impl ZenohEndpoint {
    fn inbox(&self) -> Result<&Inbox, TransportError> {
        self.inbox
            .as_ref()
            .ok_or_else(|| TransportError::Unsupported("zenoh: this end only writes".into()))
    }

    /// The next sample's payload, handed to `take` where Zenoh keeps it (gathered into one
    /// piece only if it came in several), waiting at most `timeout` (zero: only what is there
    /// now).
    fn next(
        &mut self,
        take: &mut Take,
        timeout: Duration,
    ) -> Result<Option<usize>, TransportError> {
        let inbox = self.inbox()?;
        let got = if timeout.is_zero() {
            inbox.try_recv()
        } else {
            inbox.recv(timeout)
        };
        match got {
            Ok(Some(s)) => take(&s.payload().to_bytes()).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(zenoh_error("a receive", e)),
        }
    }
}

impl Endpoint for ZenohEndpoint {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let Some(p) = &self.publisher else {
            return Err(TransportError::Unsupported(
                "zenoh: this end only reads".into(),
            ));
        };
        p.put(msg.to_vec())
            .wait()
            .map_err(|e| zenoh_error("a put", e))
    }

    reads_in_place!();
}
