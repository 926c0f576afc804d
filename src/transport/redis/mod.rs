//! `redis`: Redis through `redis-rs`, in one of two modes. `pubsub` (the default): each end
//! publishes with PUBLISH on one channel and reads its SUBSCRIBE connection on another; a topic
//! is one channel that the server copies to every subscriber. `streams`: each direction is a
//! stream key, written with XADD and read with XREAD from the first entry on; a topic is one
//! key that every reader reads. Without `--opt broker=URL` each case runs a `redis-server` of
//! its own (`transport/broker.rs`). Cargo feature `redis`.
//!
//! Commands (PUBLISH, XADD, XREAD) each wait for their answer, as `redis-benchmark`'s do, on a
//! synchronous connection: through redis-rs's tokio connection each call cost more (a 64 B
//! stream between two CPUs ran at 14-18 k PUBLISH/s against 20-24 k). A subscription, which a
//! polling read must look at without waiting, is read through redis-rs's tokio connection, on
//! a runtime of the end's own that the role's thread runs while it waits.

mod floor;

use super::broker::{self, Config, Program};
use super::runtime::Local;
use super::{
    as_it_is, reads_in_place, Capabilities, ChannelSpec, DeliveryMap, Endpoint, Floor, Need,
    OptionSpec, Options, Rendezvous, Setup, SetupPlan, Side, Take, Transport, TransportError,
};
use crate::delivery::{Delivery, Setting};
use crate::transport::OpenResult;
use futures_util::{FutureExt, StreamExt};
use redis::aio::PubSubStream;
use redis::streams::StreamReadReply;
use redis::{Commands, Value};
use std::collections::VecDeque;
use std::time::Duration;

pub struct Redis;

/// The largest message msgperf sends through Redis (its own limit is 512 MB).
const MAX_MESSAGE: usize = 64 << 20;

/// Entries one XREAD takes at most.
const BATCH: usize = 256;

pub(super) static SERVER: Program = Program::plain(
    "redis-server",
    "redis-server",
    |_| vec!["redis.conf".into()],
    Some(Config {
        file: "redis.conf",
        text: config,
    }),
);

/// Its host's address only (loopback unless placed), nothing saved; a subscriber may fall 256 MB
/// behind before the server drops it.
fn config(b: &broker::Bind) -> String {
    let (host, port, dir) = (b.host, b.port, b.dir.display());
    format!("port {port}\nbind {host}\nprotected-mode no\nsave \"\"\nappendonly no\ndir {dir}\nclient-output-buffer-limit pubsub 256mb 256mb 0\n")
}

fn check_broker(v: &str) -> Result<(), String> {
    broker::check_url(v, "redis")
}

fn check_maxlen(v: &str) -> Result<(), String> {
    match v.parse::<u64>() {
        Ok(n) if n > 0 => Ok(()),
        _ => Err("a number of entries, at least 1".into()),
    }
}

/// Deletes the case's keys (streams mode) from a server msgperf did not start.
fn remove(url: &str, name: &str, _: &SetupPlan, timeout: Duration) {
    let Ok(mut con) = redis::Client::open(url).and_then(|c| commands(&c, timeout)) else {
        return;
    };
    let keys: Vec<String> = con.keys(format!("{name}:*")).unwrap_or_default();
    if !keys.is_empty() {
        let _: redis::RedisResult<()> = con.del(keys);
    }
}

/// A synchronous connection to `client` whose every call is bounded: writes by `timeout`,
/// answers by `timeout` and a second (XREAD BLOCK's own wait is `timeout` at most).
pub(super) fn commands(
    client: &redis::Client,
    timeout: Duration,
) -> redis::RedisResult<redis::Connection> {
    let con = client.get_connection_with_timeout(timeout)?;
    con.set_write_timeout(Some(timeout))?;
    con.set_read_timeout(Some(timeout + Duration::from_secs(1)))?;
    Ok(con)
}

/// A subscription to `channel` through redis-rs's tokio connection, subscribed (the server has
/// answered SUBSCRIBE) when this returns.
pub(super) async fn subscribe(
    client: &redis::Client,
    channel: String,
) -> redis::RedisResult<PubSubStream> {
    let mut ps = client.get_async_pubsub().await?;
    ps.subscribe(channel).await?;
    Ok(ps.into_on_message())
}

impl Transport for Redis {
    fn name(&self) -> &'static str {
        "redis"
    }
    fn about(&self) -> &'static str {
        "Redis (redis-rs) pub/sub or streams through a redis-server that msgperf starts per case, or --opt broker=URL (feature `redis`)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        #[rustfmt::skip]
        const O: &[OptionSpec] = &[
            OptionSpec { key: "broker", default: "start", about: "start (msgperf runs redis-server for the case, on a free loopback port) or redis://HOST:PORT of a running server (msgperf uses only names of its own there, and deletes its keys afterwards)", values: &[], check: Some(check_broker) },
            OptionSpec { key: "mode", default: "pubsub", about: "pubsub (PUBLISH and SUBSCRIBE: at most once) or streams (XADD and XREAD: kept in the server up to `maxlen` entries)", values: &["pubsub", "streams"], check: None },
            OptionSpec { key: "maxlen", default: "1000000", about: "streams: entries a stream keeps (XADD MAXLEN ~); a reader further behind loses the trimmed ones (counted)", values: &[], check: Some(check_maxlen) },
        ];
        O
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        broker::capabilities(false, MAX_MESSAGE)
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let mut m = as_it_is(self.name(), &self.capabilities(options), d)?;
        let s = if options.get("mode").is_some_and(|m| m == "streams") {
            Setting::new(
                "delivery",
                "XADD/XREAD",
                "every entry stays in the stream until it is trimmed (--opt maxlen): a reader further behind than that loses the trimmed entries, counted; the writer never waits",
            )
        } else {
            Setting::new(
                "delivery",
                "at most once",
                "PUBLISH reaches the subscribers connected now; the server disconnects a subscriber whose output buffer passes 256 MB (client-output-buffer-limit); it subscribes again at once, and what it missed is counted as lost",
            )
        };
        m.settings.insert(0, s);
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        // Only streams leave keys behind; a channel is gone with its last subscriber.
        let streams = spec.options.get("mode").is_some_and(|m| m == "streams");
        let remove = streams.then_some(remove as broker::Remove);
        broker::setup(self.name(), &SERVER, "redis", plan, spec, remove)
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let (url, name) = broker::meeting(at)?;
        let streams = spec.options.get("mode").is_some_and(|m| m == "streams");
        let maxlen = spec
            .options
            .get("maxlen")
            .and_then(|m| m.parse().ok())
            .unwrap_or(1_000_000);
        let (out, inbound) = broker::names(name, ':', side);
        let client = redis::Client::open(url).map_err(|e| {
            TransportError::middleware("redis-rs", format!("connecting to {url}"), e)
        })?;
        let refused = |e: redis::RedisError| broker::not_there(url, e, "redis-server");
        let con = commands(&client, spec.timeout).map_err(refused)?;
        let inbox = match inbound {
            // Subscribed before this end says it is bound (SUBSCRIBE has answered): every end
            // is bound before any writes, so nothing is published to no one.
            Some(ch) if !streams => {
                let rt = Local::new()?;
                let messages = rt
                    .wait(spec.timeout, subscribe(&client, ch.clone()))?
                    .map_err(refused)?;
                Some(Inbox::Channel {
                    messages,
                    client: client.clone(),
                    channel: ch,
                    rt,
                })
            }
            // A fresh key: reading from its first entry misses nothing written after binding.
            Some(key) => Some(Inbox::Stream {
                key,
                last: "0".into(),
                got: VecDeque::new(),
            }),
            None => None,
        };
        Ok(Box::new(broker::Greeting(
            RedisEnd {
                con,
                out,
                inbox,
                streams,
                maxlen,
                timeout: spec.timeout,
            },
            side,
        )))
    }

    fn needs(&self) -> Vec<Need> {
        vec![SERVER.needs()]
    }
    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::RedisFloor)
    }
}

enum Inbox {
    Channel {
        messages: PubSubStream,
        /// To subscribe again after the server dropped a subscriber that fell behind.
        client: redis::Client,
        channel: String,
        /// Last: the connection's tasks go with it, after their handles.
        rt: Local,
    },
    Stream {
        key: String,
        /// The last entry read.
        last: String,
        /// Entries one XREAD brought and the role has not taken yet.
        got: VecDeque<Vec<u8>>,
    },
}

struct RedisEnd {
    /// PUBLISH's, XADD's and XREAD's connection.
    con: redis::Connection,
    out: Option<String>,
    inbox: Option<Inbox>,
    streams: bool,
    maxlen: u64,
    timeout: Duration,
}

fn failed(e: redis::RedisError, timeout: Duration) -> TransportError {
    if e.is_timeout() {
        TransportError::Timeout(timeout)
    } else if e.is_connection_dropped() || e.is_connection_refusal() || e.is_io_error() {
        TransportError::PeerClosed
    } else {
        TransportError::middleware("redis-rs", "a Redis command", e)
    }
}

impl RedisEnd {
    /// The next message, handed to `take` where redis-rs delivered it, waiting at most
    /// `timeout` (zero: only what is there now).
    fn next(
        &mut self,
        take: &mut Take,
        timeout: Duration,
    ) -> Result<Option<usize>, TransportError> {
        let Some(inbox) = self.inbox.as_mut() else {
            return Err(TransportError::Unsupported(
                "redis: a topic's publisher only writes".into(),
            ));
        };
        match inbox {
            Inbox::Channel {
                messages,
                client,
                channel,
                rt,
            } => {
                let mut resubscribed = false;
                loop {
                    // What the connection has already taken is had without a timed wait (which
                    // costs a timer).
                    let msg = match messages.next().now_or_never() {
                        Some(m) => m,
                        None if timeout.is_zero() => match rt.now(messages.next()) {
                            Some(m) => m,
                            None => return Ok(None),
                        },
                        None => rt.wait(timeout, messages.next())?,
                    };
                    match msg {
                        Some(m) => return take(m.get_payload_bytes()).map(Some),
                        // The server closes a subscriber whose unread output passes its
                        // client-output-buffer-limit (pubsub): at most once, as a slow NATS
                        // consumer is, so subscribe again at once; what was missed is counted
                        // as lost. Once per call: a server that is gone ends the case.
                        None if !resubscribed => {
                            resubscribed = true;
                            *messages = rt
                                .wait(self.timeout, subscribe(client, channel.clone()))?
                                .map_err(|e| failed(e, self.timeout))?;
                            if timeout.is_zero() {
                                return Ok(None);
                            }
                        }
                        None => return Err(TransportError::PeerClosed),
                    }
                }
            }
            Inbox::Stream { key, last, got } => {
                if got.is_empty() {
                    let mut read = redis::cmd("XREAD");
                    read.arg("COUNT").arg(BATCH);
                    if !timeout.is_zero() {
                        // The server's own wait, bounded by ours.
                        read.arg("BLOCK").arg(timeout.as_millis().max(1) as u64);
                    }
                    read.arg("STREAMS").arg(&*key).arg(&*last);
                    let reply: Option<StreamReadReply> =
                        read.query(&mut self.con).map_err(|e| failed(e, timeout))?;
                    for s in reply.into_iter().flat_map(|r| r.keys) {
                        for mut id in s.ids {
                            if let Some(Value::BulkString(data)) = id.map.remove("d") {
                                got.push_back(data);
                            }
                            *last = id.id;
                        }
                    }
                }
                match got.pop_front() {
                    Some(data) => take(&data).map(Some),
                    None if timeout.is_zero() => Ok(None),
                    None => Err(TransportError::Timeout(timeout)),
                }
            }
        }
    }
}

impl Endpoint for RedisEnd {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let Some(out) = self.out.as_deref() else {
            return Err(TransportError::Unsupported(
                "redis: a subscriber only reads".into(),
            ));
        };
        let con = &mut self.con;
        let failed = |e| failed(e, self.timeout);
        if self.streams {
            let add = redis::cmd("XADD")
                .arg(out)
                .arg("MAXLEN")
                .arg("~")
                .arg(self.maxlen)
                .arg("*")
                .arg("d")
                .arg(msg)
                .to_owned();
            let _: Value = add.query(con).map_err(failed)?;
        } else {
            let _: i64 = con.publish(out, msg).map_err(failed)?;
        }
        Ok(())
    }

    reads_in_place!();
}
