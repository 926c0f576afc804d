//! `nats`: core NATS through `async-nats`, the official client, on the process's tokio runtime.
//! Without `--opt broker=URL` each case runs a `nats-server` of its own (`transport/broker.rs`).
//! Every end is a client connection of its own; a channel is two subjects, one per direction,
//! and a topic one subject that the server copies to every subscriber (its native fan-out).
//! Subjects are named per case, so a shared server carries nothing else of msgperf's.
//!
//! Core NATS delivers at most once: the server drops messages for a client that falls behind
//! (a slow consumer), and so does the client when a subscription's queue is full; readers
//! count those losses. Cargo feature `nats`.

mod floor;

use super::broker::{self, Program};
use super::runtime::{runtime, wait};
use super::{
    as_it_is, copy_out, Capabilities, ChannelSpec, DeliveryMap, Endpoint, Exchange, Floor, Opening,
    OptionSpec, Options, Place, Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::delivery::{Delivery, Setting};
use async_nats::{Client, Subject, Subscriber};
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use std::path::Path;
use std::time::Duration;

pub struct Nats;

/// The largest message: nats-server's `max_payload` as msgperf configures it.
const MAX_PAYLOAD: usize = 8 << 20;

pub(super) static SERVER: Program = Program {
    name: "nats-server",
    install: "apt-get install nats-server",
    args: |_, _| vec!["-c".into(), "nats.conf".into()],
    configure: Some(configure),
};

fn configure(port: u16, dir: &Path) -> std::io::Result<()> {
    // Loopback only; payloads as large as msgperf's largest, and room to queue them.
    std::fs::write(
        dir.join("nats.conf"),
        format!("listen: 127.0.0.1:{port}\nmax_payload: {MAX_PAYLOAD}\nmax_pending: 256MB\n"),
    )
}

fn check_capacity(v: &str) -> Result<(), String> {
    match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(()),
        _ => Err("a number of messages, at least 1".into()),
    }
}

fn check_broker(v: &str) -> Result<(), String> {
    broker::check_url(v, "nats")
}

impl Transport for Nats {
    fn name(&self) -> &'static str {
        "nats"
    }
    fn about(&self) -> &'static str {
        "core NATS (async-nats) through a nats-server that msgperf starts per case, or --opt broker=URL (feature `nats`)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        #[rustfmt::skip]
        const O: &[OptionSpec] = &[
            OptionSpec { key: "broker", default: "start", about: "start (msgperf runs nats-server for the case, on a free loopback port) or nats://HOST:PORT of a running server (msgperf uses only subjects of its own there)", values: &[], check: Some(check_broker) },
            OptionSpec { key: "capacity", default: "65536", about: "messages the client queues per subscription before it drops them (a slow consumer, counted as lost)", values: &[], check: Some(check_capacity) },
        ];
        O
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: false,
            // Room for the header that NATS adds stays under the server's limit.
            max_message_bytes: MAX_PAYLOAD - 4096,
            cross_process: true,
            cross_host: true,
            native_fan_out: 1024,
            needs_server: true,
            allocates_per_message: true,
            exchange: Exchange::Both,
            ..Capabilities::default()
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let mut m = as_it_is(self.name(), &self.capabilities(options), d)?;
        m.settings.insert(
            0,
            Setting::new(
                "delivery",
                "at most once",
                "core NATS: the server drops messages for a client that falls behind, and the client for a full subscription queue (--opt capacity); readers count the losses",
            ),
        );
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        // Subjects need no removal: the server keeps nothing once the clients are gone.
        broker::setup(self.name(), &SERVER, "nats", plan, spec, |_, _| {})
    }

    fn open(
        &self,
        at: &Rendezvous,
        side: Side,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Opening>, TransportError> {
        let Place::Broker { url, name } = &at.place else {
            return Err(TransportError::Unsupported(format!(
                "nats meets at a broker, not {:?}",
                at.place
            )));
        };
        let (out, inbound) = broker::names(name, '.', side);
        let out: Option<Subject> = out.map(Into::into);
        let client = connect(url, spec)?;
        // Subscribed before this end says it is bound, and known to the server (flush waits for
        // its answer): every end is bound before any writes, so nothing is sent to no one.
        let sub = match inbound {
            Some(s) => Some(
                wait(spec.timeout, async {
                    let sub = client.subscribe(s).await?;
                    client.flush().await?;
                    Ok::<_, async_nats::Error>(sub)
                })?
                .map_err(|e| TransportError::Refused(format!("{url} ({e})")))?,
            ),
            None => None,
        };
        Ok(Box::new(NatsOpening(
            NatsEnd {
                client,
                out,
                sub,
                timeout: spec.timeout,
            },
            side,
        )))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::NatsFloor)
    }
}

/// A client of the server at `url`, connected within the timeout.
pub(super) fn connect(url: &str, spec: &ChannelSpec) -> Result<Client, TransportError> {
    let capacity = spec
        .options
        .get("capacity")
        .and_then(|c| c.parse().ok())
        .unwrap_or(65536);
    let options = async_nats::ConnectOptions::new()
        .connection_timeout(spec.timeout)
        .subscription_capacity(capacity)
        // A server that is gone stays gone: the case ends instead of reconnecting forever.
        .max_reconnects(Some(1));
    wait(spec.timeout, options.connect(url))?.map_err(|e| {
        TransportError::Refused(format!(
            "{url} ({e}): is nats-server running there? (without --opt broker, msgperf starts one)"
        ))
    })
}

struct NatsOpening(NatsEnd, Side);

impl Opening for NatsOpening {
    fn finish(
        self: Box<Self>,
        _: &Rendezvous,
        _: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let NatsOpening(mut end, side) = *self;
        broker::greet(&mut end, side)?;
        Ok(Box::new(end))
    }
}

struct NatsEnd {
    client: Client,
    out: Option<Subject>,
    sub: Option<Subscriber>,
    timeout: Duration,
}

impl NatsEnd {
    fn subscriber(&mut self) -> Result<&mut Subscriber, TransportError> {
        self.sub.as_mut().ok_or_else(|| {
            TransportError::Unsupported("nats: a topic's publisher only writes".into())
        })
    }
}

impl Drop for NatsEnd {
    fn drop(&mut self) {
        // What was published is handed to the server before the connection goes.
        let _ = wait(Duration::from_secs(1), self.client.flush());
    }
}

impl Endpoint for NatsEnd {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let Some(out) = self.out.clone() else {
            return Err(TransportError::Unsupported(
                "nats: a subscriber only reads".into(),
            ));
        };
        let data = Bytes::copy_from_slice(msg);
        // Into the client's queue at once if it has room: a timed wait costs a timer.
        let sent = match self
            .client
            .publish(out.clone(), data.clone())
            .now_or_never()
        {
            Some(r) => r,
            None => wait(self.timeout, self.client.publish(out, data))?,
        };
        match sent {
            Ok(()) => Ok(()),
            Err(e) => Err(TransportError::Unsupported(format!("nats: publish: {e}"))),
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        let timeout = self.timeout;
        let sub = self.subscriber()?;
        // What is queued is taken without a timed wait (which costs a timer).
        let next = match sub.next().now_or_never() {
            Some(m) => m,
            None => wait(timeout, sub.next())?,
        };
        match next {
            Some(m) => copy_out(&m.payload, buf),
            None => Err(TransportError::PeerClosed),
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        match self.subscriber()?.next().now_or_never() {
            None => Ok(None),
            Some(Some(m)) => copy_out(&m.payload, buf).map(Some),
            Some(None) => Err(TransportError::PeerClosed),
        }
    }
}
