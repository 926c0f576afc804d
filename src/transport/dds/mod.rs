//! `dds`: Eclipse Cyclone DDS (the version `cyclors` builds from its bundled source), with a
//! real IDL-defined type serialized by Cyclone (see [`cyclone`]). A topic is DDS's own fan-out:
//! one writer, every subscriber a reader of it. A two-way channel is two topics, one per
//! direction, each end a writer on one and a reader on the other.
//!
//! Each case gets a domain id of its own in this process and a discovery tag only its peers
//! share, with multicast off: discovery is unicast to this host's participant ports on
//! loopback, or, across hosts, each role binds its host's address and asks every host's.
//! An end counts as open once its writer has matched all its readers and its reader a writer, so
//! nothing measured is lost to discovery. DDS notices a dead peer only through liveliness
//! leases (seconds), so a peer that died shows as the runner's liveness ending the case.
//! Cargo feature `dds` (needs cmake and libclang-dev to build Cyclone).

#![allow(unsafe_code)]

mod cyclone;
mod floor;

use super::{
    Capabilities, ChannelSpec, DeliveryMap, Endpoint, Exchange, Floor, Opening, OptionSpec,
    Options, Place, Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::delivery::{Delivery, History, Reliability, Setting};
use crate::transport::{EndpointResult, OpenResult};
use cyclone::{DdsError, Participant, Qos, Reader, Wake, Writer};
use std::sync::Arc;
use std::time::Duration;

pub struct Dds;

impl Transport for Dds {
    fn name(&self) -> &'static str {
        "dds"
    }
    fn about(&self) -> &'static str {
        "Eclipse Cyclone DDS: an IDL type per message, a topic per direction, DDS fan-out (feature `dds`)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec { key: "reliability", default: "reliable", about: "DDS reliability QoS of writers and readers: reliable (a writer waits for acknowledgements when its history is full) or best-effort (never retransmits)", values: &["reliable", "best-effort"], check: None },
            OptionSpec { key: "history", default: "keep-all", about: "DDS history QoS: keep-all, or keep-last-N (readers and writers keep the newest N; older unread samples are overwritten, counted)", values: &[], check: Some(check_history) },
            OptionSpec { key: "batching", default: "false", about: "writer batching (Cyclone's writer_batching QoS, as ddsperf's data writer has): samples gather in a packet sent when full or flushed; msgperf flushes after every write when replies are awaited (pingpong, stream --confirm) and after the end, so it only changes one-way streams and pubsub", values: &["true", "false"], check: None },
            OptionSpec { key: "read", default: "waitset", about: "how a reader waits: waitset (on a read condition, in the reading thread) or listener (Cyclone's receive thread calls back and wakes the reader)", values: &["waitset", "listener"], check: None },
        ]
    }
    fn capabilities(&self, o: &Options) -> Capabilities {
        let keep_last = o.get("history").is_some_and(|h| h != "keep-all");
        Capabilities {
            reliable: o.get("reliability").is_none_or(|r| r == "reliable") && !keep_last,
            max_message_bytes: 8 << 20,
            cross_process: true,
            // Discovery by unicast to the hosts' addresses (loopback on one host).
            cross_host: true,
            latest_value: keep_last,
            native_fan_out: 1024,
            allocates_per_message: true,
            exchange: Exchange::Both,
            ..Capabilities::default()
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let given = |k: &str| options.get(k).map(String::as_str);
        let mut m = DeliveryMap::default();
        let reliability = match (d.reliability, given("reliability")) {
            (Some(Reliability::Reliable), Some("best-effort")) => return Err("--delivery reliable asks for DDS's reliable QoS, but --opt reliability=best-effort was given: drop one of them".into()),
            (Some(Reliability::BestEffort), Some("reliable")) => return Err("--delivery best-effort asks for DDS's best-effort QoS, but --opt reliability=reliable was given: drop one of them".into()),
            (Some(Reliability::Reliable), _) => "reliable",
            (Some(Reliability::BestEffort), _) => "best-effort",
            (None, Some(r)) => r,
            (None, None) => "reliable",
        };
        let history = match (d.history, given("history")) {
            (History::KeepLast(n), Some(h)) if h != format!("keep-last-{n}") => return Err(format!("--history keeps the last {n}, but --opt history={h} was given: drop one of them")),
            (History::KeepLast(n), _) => format!("keep-last-{n}"),
            (History::KeepAll, Some(h)) => h.to_string(),
            (History::KeepAll, None) => "keep-all".into(),
        };
        let keep_last = history != "keep-all";
        if keep_last && d.reliability == Some(Reliability::Reliable) {
            return Err(format!("--delivery reliable loses nothing, but DDS's {history} history overwrites unread samples: use --delivery best-effort, or --history fifo"));
        }
        // Only what differs from the defaults, so a case's label stays short.
        if reliability != "reliable" {
            m.options.insert("reliability".into(), reliability.into());
        }
        if keep_last {
            m.options.insert("history".into(), history.clone());
        }
        m.settings.push(Setting::new(
            "reliability QoS",
            &reliability.to_uppercase().replace('-', "_"),
            if reliability == "reliable" {
                "reliable: lost packets are repaired (heartbeats and acknowledgements); a keep-all writer waits for its readers' acknowledgements when its history is full, up to --timeout"
            } else {
                "best-effort: nothing is repeated; a sample lost on the way or overwritten is counted"
            },
        ));
        m.settings.push(Setting::new(
            "history QoS",
            &history.to_uppercase().replace('-', "_"),
            if keep_last {
                "writers and readers keep the newest samples only: a slow reader's unread ones are overwritten (counted)"
            } else {
                "every sample is kept until every reader took it: nothing is overwritten"
            },
        ));
        m.settings.push(Setting::new(
            "durability QoS",
            "VOLATILE",
            "a reader gets what is written after it matched",
        ));
        if given("batching") == Some("true") {
            m.settings.push(Setting::new(
                "writer batching",
                "on",
                "a writer's samples gather in a packet that is sent when full; msgperf flushes it after each write when replies are awaited (pingpong, stream --confirm), and after END: a paced writer's samples wait for the packet to fill",
            ));
        }
        m.strict = reliability == "reliable" && !keep_last;
        m.latest = keep_last;
        Ok(m)
    }

    fn setup(&self, _: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        let (id, tag) = pick_domain().map_err(TransportError::Unsupported)?;
        Ok(Setup::new(
            Rendezvous::new(self.name(), Place::Key(format!("{id}/{tag}"))),
            (),
        ))
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let Place::Key(key) = &at.place else {
            return Err(TransportError::Unsupported("dds meets in a domain".into()));
        };
        let (id, tag) = key
            .split_once('/')
            .and_then(|(id, tag)| Some((id.parse::<u32>().ok()?, tag)))
            .ok_or_else(|| {
                TransportError::Foreign(format!(
                    "dds: a rendezvous key {key:?} that is not DOMAIN/TAG"
                ))
            })?;
        let participant =
            Participant::join(id, &cyclone::config(tag, at.hosts.as_ref(), spec.timeout))
                .map_err(|e| dds_error(e, spec))?;
        let qos = qos_of(spec);
        let wake = wake_of(spec);
        let topic = |what: String| format!("{tag}/{what}");
        let (writer, reader, readers) = match side {
            Side::Accept(n) => (
                Some(topic(format!("channel-{n}-back"))),
                Some(topic(format!("channel-{n}-forth"))),
                1,
            ),
            Side::Connect(n) => (
                Some(topic(format!("channel-{n}-forth"))),
                Some(topic(format!("channel-{n}-back"))),
                1,
            ),
            Side::Publish { topic: n, readers } => {
                (Some(topic(format!("topic-{n}"))), None, readers)
            }
            Side::Subscribe { topic: n, .. } => (None, Some(topic(format!("topic-{n}"))), 0),
        };
        let err = |e| dds_error(e, spec);
        let writer = writer
            .map(|t| Writer::new(&participant, &t, &qos))
            .transpose()
            .map_err(err)?;
        let reader = reader
            .map(|t| Reader::new(&participant, &t, &qos, wake))
            .transpose()
            .map_err(err)?;
        Ok(Box::new(DdsOpening {
            ends: DdsEndpoint {
                writer,
                reader,
                // Only a one-way writer lets its batches fill: any other waits for replies.
                flush_each: qos.batching && spec.exchange != Exchange::OneWay,
                timeout: spec.timeout,
                _participant: participant,
            },
            readers,
        }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::DdsFloor)
    }
}

/// A domain id free in this process (threads of one process share its domains) and a
/// discovery tag that keeps every other case and program out.
pub(super) fn pick_domain() -> Result<(u32, String), String> {
    let tag = super::fresh_name();
    let start = tag
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
    (0..200)
        .map(|i| start.wrapping_add(i) % 200 + 1)
        .find(|id| !cyclone::in_use(*id))
        .map(|id| (id, tag))
        .ok_or_else(|| "dds: every domain id from 1 to 200 is in use in this process".into())
}

fn check_history(v: &str) -> Result<(), String> {
    if v == "keep-all" {
        return Ok(());
    }
    v.strip_prefix("keep-last-")
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| (1..=1_000_000).contains(n))
        .map(|_| ())
        .ok_or_else(|| {
            "give keep-all or keep-last-N with N from 1 to 1000000, e.g. keep-last-1".into()
        })
}

/// The QoS a case's options ask for.
pub(super) fn qos_of(spec: &ChannelSpec) -> Qos {
    Qos {
        reliable: spec.option("reliability") != Some("best-effort"),
        keep_last: spec
            .option("history")
            .and_then(|h| h.strip_prefix("keep-last-"))
            .and_then(|n| n.parse().ok()),
        max_blocking: spec.timeout,
        batching: spec.option("batching") == Some("true"),
    }
}

pub(super) fn wake_of(spec: &ChannelSpec) -> Wake {
    if spec.option("read") == Some("listener") {
        Wake::Listener
    } else {
        Wake::Waitset
    }
}

fn dds_error(e: DdsError, spec: &ChannelSpec) -> TransportError {
    if e.code == cyclone::TIMEOUT {
        TransportError::Timeout(spec.timeout)
    } else {
        TransportError::middleware("Cyclone DDS", "a DDS call", e.to_string())
    }
}

/// An end made, before it matched its peers.
struct DdsOpening {
    ends: DdsEndpoint,
    /// Readers the writer waits for.
    readers: u32,
}

impl Opening for DdsOpening {
    fn address(&self) -> Option<String> {
        None
    }

    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let DdsOpening { ends, readers } = *self;
        // Matched both ways before anything is written: a volatile writer's samples reach only
        // the readers it has matched.
        let deadline = crate::deadline::Deadline::after(spec.timeout);
        if let Some(w) = &ends.writer {
            w.wait_matched(readers, deadline)
                .map_err(|e| dds_error(e, spec))?;
        }
        if let Some(r) = &ends.reader {
            r.wait_matched(deadline).map_err(|e| dds_error(e, spec))?;
        }
        Ok(Box::new(ends))
    }
}

struct DdsEndpoint {
    writer: Option<Writer>,
    reader: Option<Reader>,
    /// A batching writer sends each write at once.
    flush_each: bool,
    timeout: Duration,
    /// Outlives the writer and reader (dropped after them).
    _participant: Arc<Participant>,
}

impl DdsEndpoint {
    fn reader(&mut self) -> Result<&mut Reader, TransportError> {
        self.reader
            .as_mut()
            .ok_or_else(|| TransportError::Unsupported("dds: this end only writes".into()))
    }

    fn error(&self, e: DdsError) -> TransportError {
        if e.code == cyclone::TIMEOUT {
            TransportError::Timeout(self.timeout)
        } else {
            TransportError::middleware("Cyclone DDS", "a DDS call", e.to_string())
        }
    }
}

impl Endpoint for DdsEndpoint {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let Some(w) = self.writer.as_mut() else {
            return Err(TransportError::Unsupported(
                "dds: this end only reads".into(),
            ));
        };
        let mut sent = w.write(msg);
        if sent.is_ok() && self.flush_each {
            sent = w.flush();
        }
        sent.map_err(|e| self.error(e))
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        match self.writer.as_mut().map(Writer::flush) {
            Some(Err(e)) => Err(self.error(e)),
            _ => Ok(()),
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        let timeout = self.timeout;
        let deadline = crate::deadline::Deadline::after(timeout);
        loop {
            if let Some(n) = self.try_recv(buf)? {
                return Ok(n);
            }
            let left = deadline.remaining();
            if left.is_zero() {
                return Err(TransportError::Timeout(timeout));
            }
            let waited = self.reader()?.wait(left);
            if let Err(e) = waited {
                return Err(self.error(e));
            }
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let max = buf.len();
        match self.reader()?.take(buf) {
            Ok(Some(len)) if len > max => Err(TransportError::TooLarge { len, max }),
            Ok(got) => Ok(got),
            Err(e) => Err(self.error(e)),
        }
    }
}
