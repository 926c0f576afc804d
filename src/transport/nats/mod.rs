//! `nats`: core NATS through `async-nats`, the official client, on the process's tokio runtime.
//! Without `--opt broker=URL` each case runs a `nats-server` of its own (`transport/broker.rs`).
//! Every end is a client connection of its own; a channel is two subjects, one per direction,
//! and a topic one subject that the server copies to every subscriber (its native fan-out).
//! Subjects are named per case, so a shared server carries nothing else of msgperf's.
//!
//! Core NATS delivers at most once: the server drops messages for a client that falls behind
//! (a slow consumer), and so does the client when a subscription's queue is full; readers
//! count those losses. With `--opt jetstream=memory|file`, a case's subjects are a JetStream
//! stream instead: every publish is acknowledged by the server once it stored it (each waited
//! for before the next, or up to `--opt acks-in-flight` outstanding: asynchronous publish),
//! every reader is a push consumer of its own that acknowledges each message. Cargo feature
//! `nats`.

mod floor;

use super::broker::{self, Config, Program};
use super::runtime::{runtime, wait};
use super::{
    as_it_is, reads_in_place, Capabilities, ChannelSpec, DeliveryMap, Endpoint, Floor, Need,
    OptionSpec, Options, Rendezvous, Setup, SetupPlan, Side, Take, Transport, TransportError,
};
use crate::delivery::{Delivery, Setting};
use crate::transport::OpenResult;
use async_nats::jetstream::{self, consumer::push, context::PublishAckFuture, stream::StorageType};
use async_nats::{Client, Subject, Subscriber};
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use std::collections::VecDeque;
use std::time::Duration;

pub struct Nats;

/// The largest message: nats-server's `max_payload` as msgperf configures it.
const MAX_PAYLOAD: usize = 8 << 20;

pub(super) static SERVER: Program = Program::plain(
    "nats-server",
    "nats-server",
    |_| vec!["-c".into(), "nats.conf".into()],
    Some(Config {
        file: "nats.conf",
        text: config,
    }),
);

/// Its host's address only (loopback unless placed); payloads as large as msgperf's largest, and
/// room to queue them; JetStream on, storing in the case's directory (idle unless a case asks for
/// a stream).
fn config(b: &broker::Bind) -> String {
    let (host, port, store) = (b.host, b.port, b.dir.join("jetstream"));
    let store = store.display();
    format!("listen: {host}:{port}\nmax_payload: {MAX_PAYLOAD}\nmax_pending: 256MB\njetstream {{\n  store_dir: \"{store}\"\n}}\n")
}

/// The JetStream storage a case asks for, if it does.
fn jetstream_of(o: &Options) -> Option<StorageType> {
    match o.get("jetstream").map(String::as_str) {
        Some("memory") => Some(StorageType::Memory),
        Some("file") => Some(StorageType::File),
        _ => None,
    }
}

fn check_capacity(v: &str) -> Result<(), String> {
    match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(()),
        _ => Err("a number of messages, at least 1".into()),
    }
}

/// The most acknowledgements a JetStream publisher leaves outstanding: async-nats's own limit
/// (its context's default), past which its publish would wait anyway.
const MAX_ACKS_IN_FLIGHT: usize = 5000;

fn check_acks_in_flight(v: &str) -> Result<(), String> {
    match v.parse::<usize>() {
        Ok(n) if (1..=MAX_ACKS_IN_FLIGHT).contains(&n) => Ok(()),
        _ => Err(format!("a number of publishes, 1 to {MAX_ACKS_IN_FLIGHT}")),
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
            OptionSpec { key: "acks-in-flight", default: "1", about: "with jetstream: 1 waits for each publish's acknowledgement before the next (synchronous publish); N publishes asynchronously, waiting for the oldest acknowledgement once N are outstanding (as nats bench js pub async)", values: &[], check: Some(check_acks_in_flight) },
            OptionSpec { key: "jetstream", default: "false", about: "false: core NATS (at most once); memory or file: the case's subjects are a JetStream stream with that storage, every publish acknowledged once stored, every message acknowledged by its reader (a push consumer of its own)", values: &["false", "memory", "file"], check: None },
        ];
        O
    }
    fn capabilities(&self, o: &Options) -> Capabilities {
        // Room for the header that NATS adds stays under the server's limit.
        broker::capabilities(jetstream_of(o).is_some(), MAX_PAYLOAD - 4096)
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        if jetstream_of(options).is_none() && acks_in_flight(options) != 1 {
            return Err("nats: --opt acks-in-flight counts JetStream's acknowledgements, and core NATS has none: add --opt jetstream=memory or file".into());
        }
        let mut m = as_it_is(self.name(), &self.capabilities(options), d)?;
        m.settings.insert(
            0,
            match jetstream_of(options) {
                None => Setting::new(
                    "delivery",
                    "at most once",
                    "core NATS: the server drops messages for a client that falls behind, and the client for a full subscription queue (--opt capacity); readers count the losses",
                ),
                Some(storage) => Setting::new(
                    "delivery",
                    "at least once",
                    &format!(
                        "JetStream: the case's subjects are a stream in {} storage; the server acknowledges each publish once it stored it, and each reader, a push consumer of its own with flow control, acknowledges every message (AckExplicit; unacknowledged ones come again)",
                        if storage == StorageType::Memory { "memory" } else { "file" }
                    ),
                ),
            },
        );
        if jetstream_of(options).is_some() {
            let window = acks_in_flight(options);
            m.settings.insert(
                1,
                if window == 1 {
                    Setting::new("publish", "sync", "each publish waits for its acknowledgement before the next")
                } else {
                    Setting::new(
                        "publish",
                        &format!("async, {window} in flight"),
                        "a publish returns once sent; the oldest acknowledgement is awaited when this many are outstanding (a failed one fails the publish that waits for it) and the rest after the end; a message the server did not store is missing at its readers, which count it lost",
                    )
                },
            );
        }
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        // Subjects need no removal: the server keeps nothing once the clients are gone. A
        // stream on a server msgperf did not start is deleted when the case ends.
        let storage = jetstream_of(&spec.options);
        let remove = storage.is_some().then_some(delete_stream as broker::Remove);
        let setup = broker::setup(self.name(), &SERVER, "nats", plan, spec, remove)?;
        let Some(storage) = storage else {
            return Ok(setup);
        };
        let (url, name) = broker::meeting(&setup.rendezvous)?;
        let js = jetstream_context(connect(url, spec)?);
        create_stream(&js, name, storage, spec.timeout)?;
        Ok(setup)
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let (url, name) = broker::meeting(at)?;
        let (out, inbound) = broker::names(name, '.', side);
        let out: Option<Subject> = out.map(Into::into);
        let client = connect(url, spec)?;
        let js = jetstream_of(&spec.options).map(|_| jetstream_context(client.clone()));
        let refused = |e: async_nats::Error| TransportError::Refused(format!("{url} ({e})"));
        // Subscribed before this end says it is bound, and known to the server: every end is
        // bound before any writes, so nothing is sent to no one.
        let sub = match (inbound, &js) {
            (Some(s), None) => Some(Inbox::Core(
                wait(spec.timeout, async {
                    let sub = client.subscribe(s).await?;
                    synced(&client).await?;
                    Ok::<_, async_nats::Error>(sub)
                })?
                .map_err(refused)?,
            )),
            (Some(s), Some(js)) => Some(Inbox::Stream(Box::new(
                wait(spec.timeout, consume(js, &client, name, s))?.map_err(refused)?,
            ))),
            (None, _) => None,
        };
        Ok(Box::new(broker::Greeting(
            NatsEnd {
                client,
                js,
                acks: Acks::of(&spec.options),
                out,
                sub,
                timeout: spec.timeout,
            },
            side,
        )))
    }

    fn needs(&self) -> Vec<Need> {
        vec![SERVER.needs()]
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
    wait(spec.timeout, options.connect(url))?.map_err(|e| broker::not_there(url, e, "nats-server"))
}

/// A JetStream context over `client` (made inside the runtime, which it needs).
pub(super) fn jetstream_context(client: Client) -> jetstream::Context {
    let _in = runtime().enter();
    jetstream::new(client)
}

/// Creates the case's stream, `name`, holding every subject under it.
pub(super) fn create_stream(
    js: &jetstream::Context,
    name: &str,
    storage: StorageType,
    timeout: Duration,
) -> Result<(), TransportError> {
    let config = jetstream::stream::Config {
        name: name.into(),
        subjects: vec![format!("{name}.>")],
        storage,
        ..Default::default()
    };
    wait(timeout, js.create_stream(config))?
        .map(|_| ())
        .map_err(|e| {
            TransportError::Unsupported(format!(
                "nats: could not create JetStream stream `{name}` ({e}): does the server run with JetStream on (-js)?"
            ))
        })
}

/// A push consumer of `subject` in stream `stream`, acknowledging each message, and its
/// messages, subscribed and known to the server.
pub(super) async fn consume(
    js: &jetstream::Context,
    client: &Client,
    stream: &str,
    subject: String,
) -> Result<push::Messages, async_nats::Error> {
    let config = push::Config {
        deliver_subject: client.new_inbox(),
        filter_subject: subject,
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        deliver_policy: jetstream::consumer::DeliverPolicy::All,
        // Without flow control the server pushes up to the consumer's 1000 unacknowledged
        // messages at once, and drops what overflows the connection's pending bytes (64 MB by
        // default: 1000 of 64 KiB) as a slow consumer's, to redeliver only after the ack wait.
        // Flow control needs heartbeats; the client answers both.
        flow_control: true,
        idle_heartbeat: Duration::from_secs(5),
        ..Default::default()
    };
    let consumer: jetstream::consumer::Consumer<push::Config> =
        js.create_consumer_on_stream(config, stream).await?;
    let messages = consumer.messages().await?;
    synced(client).await?;
    Ok(messages)
}

/// Returns once the server has handled everything this client sent before: a message to a
/// subject of the client's own has come back. The server handles one connection's operations
/// in order, but another connection's concurrently, and `flush` only writes them out: a
/// subscription flushed but not yet handled missed a peer's first message (1 case in 40 here).
pub(super) async fn synced(client: &Client) -> Result<(), async_nats::Error> {
    let probe = client.new_inbox();
    let mut sub = client.subscribe(probe.clone()).await?;
    client.publish(probe, Bytes::new()).await?;
    sub.next()
        .await
        .ok_or("the connection closed before the server answered")?;
    sub.unsubscribe().await?;
    Ok(())
}

/// A JetStream publisher's acknowledgements not yet awaited.
pub(super) struct Acks {
    pending: VecDeque<PublishAckFuture>,
    /// Outstanding acknowledgements at which a publish waits for the oldest (1: for its own).
    window: usize,
}

/// The publishes whose acknowledgements a case leaves outstanding (`--opt acks-in-flight`).
fn acks_in_flight(o: &Options) -> usize {
    o.get("acks-in-flight")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

impl Acks {
    pub(super) fn of(o: &Options) -> Acks {
        let window = acks_in_flight(o);
        Acks {
            pending: VecDeque::with_capacity(window),
            window,
        }
    }

    /// Publishes `data` on `subject`, then awaits the oldest acknowledgements until fewer
    /// than the window are outstanding.
    pub(super) async fn publish(
        &mut self,
        js: &jetstream::Context,
        subject: Subject,
        data: Bytes,
    ) -> Result<(), async_nats::Error> {
        self.pending.push_back(js.publish(subject, data).await?);
        while self.pending.len() >= self.window {
            if let Some(ack) = self.pending.pop_front() {
                ack.await?;
            }
        }
        Ok(())
    }

    /// Awaits every outstanding acknowledgement.
    pub(super) async fn settle(&mut self) -> Result<(), async_nats::Error> {
        while let Some(ack) = self.pending.pop_front() {
            ack.await?;
        }
        Ok(())
    }
}

/// Deletes a case's stream from a server msgperf did not start (one it started goes with its
/// directory).
fn delete_stream(url: &str, name: &str, _: &SetupPlan, t: Duration) {
    let _ = wait(t, async {
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(t)
            .max_reconnects(Some(1))
            .connect(url)
            .await?;
        jetstream::new(client).delete_stream(name).await?;
        Ok::<_, async_nats::Error>(())
    });
}

/// What an end reads: a core subscription, or a JetStream consumer's messages.
enum Inbox {
    Core(Subscriber),
    // Boxed: a consumer's messages are some 500 B.
    Stream(Box<push::Messages>),
}

struct NatsEnd {
    client: Client,
    /// Publishes go through JetStream, acknowledged, when the case asks for it.
    js: Option<jetstream::Context>,
    acks: Acks,
    out: Option<Subject>,
    sub: Option<Inbox>,
    timeout: Duration,
}

impl NatsEnd {
    fn subscriber(&mut self) -> Result<&mut Inbox, TransportError> {
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
        if let Some(js) = &self.js {
            return wait(self.timeout, self.acks.publish(js, out, data))?
                .map_err(|e| TransportError::middleware("async-nats", "a JetStream publish", e));
        }
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
            Err(e) => Err(TransportError::middleware("async-nats", "a publish", e)),
        }
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        // Every publish acknowledged before the connection goes.
        wait(self.timeout, self.acks.settle())?
            .map_err(|e| TransportError::middleware("async-nats", "a JetStream publish", e))
    }

    reads_in_place!();
}

impl NatsEnd {
    /// The next message's payload, handed to `take` where async-nats keeps it (a JetStream
    /// message acknowledged after that), waiting at most `timeout` (zero: only what is there
    /// now).
    fn next(
        &mut self,
        take: &mut Take,
        timeout: Duration,
    ) -> Result<Option<usize>, TransportError> {
        let limit = self.timeout;
        match self.subscriber()? {
            Inbox::Core(sub) => {
                // What is queued is taken without a timed wait (which costs a timer).
                let next = match sub.next().now_or_never() {
                    Some(m) => m,
                    None if timeout.is_zero() => return Ok(None),
                    None => wait(timeout, sub.next())?,
                };
                match next {
                    Some(m) => take(&m.payload).map(Some),
                    None => Err(TransportError::PeerClosed),
                }
            }
            Inbox::Stream(msgs) => {
                let next = match polled(msgs) {
                    Some(m) => m,
                    None if timeout.is_zero() => return Ok(None),
                    None => wait(timeout, msgs.next())?,
                };
                stored(next, take, limit).map(Some)
            }
        }
    }
}

/// A consumer's next message if one is there now. Polled inside the runtime: a consumer with
/// heartbeats starts a timer when it finds none.
fn polled(
    msgs: &mut push::Messages,
) -> Option<Option<Result<jetstream::Message, push::MessagesError>>> {
    let _in = runtime().enter();
    msgs.next().now_or_never()
}

/// A JetStream message handed to `take`, then acknowledged.
fn stored(
    next: Option<Result<jetstream::Message, push::MessagesError>>,
    take: &mut Take,
    timeout: Duration,
) -> Result<usize, TransportError> {
    let m = match next {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            return Err(TransportError::middleware(
                "async-nats",
                "a JetStream message",
                e,
            ))
        }
        None => return Err(TransportError::PeerClosed),
    };
    let n = take(&m.payload);
    wait(timeout, m.ack())?
        .map_err(|e| TransportError::middleware("async-nats", "an acknowledgement", e))?;
    n
}
