//! `amqp`: AMQP 0-9-1 through `lapin` (its I/O loop a thread per connection, its futures on
//! the process's tokio runtime) and a `rabbitmq-server`. Every end is a connection of its own.
//! A channel is two queues, one per direction, reached through the default exchange; a topic is
//! a fanout exchange, and each subscriber's own queue bound to it is the broker's fan-out.
//! Classic, quorum or stream queues, publisher confirms, manual acknowledgements and prefetch
//! are options; a stream is made at set-up and read by every reader, as Kafka's log is.
//! Without `--opt broker=URL` each case runs a RabbitMQ of its own (`transport/broker.rs`),
//! with its own Erlang port mapper. Cargo feature `amqp`.

mod floor;

use super::broker::{self, Helper, Program};
use super::runtime::wait;
use super::{
    reads_in_place, Capabilities, ChannelSpec, DeliveryMap, Endpoint, Floor, Need, OptionSpec,
    Options, Rendezvous, Setup, SetupPlan, Side, Take, Transport, TransportError,
};
use crate::delivery::{Delivery, History, Reliability, Setting};
use crate::transport::OpenResult;
use futures_util::{FutureExt, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, Consumer, ExchangeKind};
use std::time::Duration;

pub struct Amqp;

/// The largest message msgperf sends through RabbitMQ (its own default limit is 128 MiB).
const MAX_MESSAGE: usize = 64 << 20;

/// A stream's reader's prefetch unless `--opt prefetch` gives one: RabbitMQ requires one for a
/// stream, and sends a stream's messages in chunks that a small window would stall.
const STREAM_PREFETCH: u16 = 1000;

pub(super) static SERVER: Program = Program {
    // The server itself: Debian's /usr/sbin wrapper switches to the rabbitmq user (which
    // clears the signal that stops it with msgperf) and logs under /var/log.
    name: "/usr/lib/rabbitmq/bin/rabbitmq-server",
    package: "rabbitmq-server",
    args: |_| vec![],
    config: None,
    configure: Some(configure),
    env: Some(env),
    helper: Some(Helper {
        name: "epmd",
        args: |port, host| {
            vec![
                "-port".into(),
                port.to_string(),
                "-address".into(),
                host.into(),
            ]
        },
    }),
    // The Erlang VM and RabbitMQ's boot steps: 5-12 s on this 2-CPU VM.
    boots_within: Duration::from_secs(60),
    // AMQP 0-9-1's protocol header, answered with Connection.Start.
    greeting: Some(b"AMQP\x00\x00\x09\x01"),
    needs: None,
};

fn configure(b: &broker::Bind) -> std::io::Result<()> {
    let (port, dir, host) = (b.port, b.dir, b.host);
    // Its host's address only (loopback unless placed), no plugins, the log on the broker's own
    // output; the default user `guest` may log in from roles on other hosts (RabbitMQ allows it
    // from loopback only), as the broker lives only for the case.
    std::fs::write(
        dir.join("rabbitmq.conf"),
        format!(
            "listeners.tcp.1 = {host}:{port}\ntcp_listen_options.nodelay = true\nloopback_users = none\nlog.console = true\nlog.console.level = warning\nlog.file = false\n"
        ),
    )?;
    std::fs::write(dir.join("enabled_plugins"), "[].\n")
}

/// Everything RabbitMQ reads or writes in the case's directory, its node and ports its own, and
/// its Erlang distribution on loopback through msgperf's port mapper (`helper`).
fn env(b: &broker::Bind) -> broker::Env {
    let (port, helper, dir) = (b.port, b.helper, b.dir);
    let erlang_ip = format!("{{{}}}", b.host.replace('.', ","));
    let d = |f: &str| dir.join(f).display().to_string();
    vec![
        ("HOME", dir.display().to_string()),
        ("RABBITMQ_NODENAME", format!("msgperf{port}@localhost")),
        ("RABBITMQ_NODE_IP_ADDRESS", b.host.into()),
        ("RABBITMQ_NODE_PORT", port.to_string()),
        // A free port of its own (its default, the AMQP port + 20000, may not exist), picked
        // with the AMQP port and epmd's (picked after them, it was once the same as one).
        ("RABBITMQ_DIST_PORT", b.spare.to_string()),
        ("RABBITMQ_CONFIG_FILE", d("rabbitmq")),
        ("RABBITMQ_ADVANCED_CONFIG_FILE", d("advanced.config")),
        ("RABBITMQ_CONF_ENV_FILE", d("rabbitmq-env.conf")),
        ("RABBITMQ_ENABLED_PLUGINS_FILE", d("enabled_plugins")),
        ("RABBITMQ_MNESIA_BASE", d("mnesia")),
        ("RABBITMQ_LOG_BASE", d("log")),
        ("RABBITMQ_PID_FILE", d("pid")),
        ("RABBITMQ_LOGS", "-".into()),
        // The server script then runs the VM itself (exec) instead of waiting on it.
        ("RUNNING_UNDER_SYSTEMD", "true".into()),
        (
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
            format!("-kernel inet_dist_use_interface {erlang_ip}"),
        ),
        ("ERL_EPMD_ADDRESS", b.host.into()),
        ("ERL_EPMD_PORT", helper.unwrap_or(4369).to_string()),
    ]
}

fn check_broker(v: &str) -> Result<(), String> {
    broker::check_url(v, "amqp")
}

fn check_count(v: &str) -> Result<(), String> {
    match v.parse::<u32>() {
        Ok(n) if n <= u16::MAX as u32 => Ok(()),
        _ => Err("give a whole number from 0 to 65535".into()),
    }
}

fn check_length(v: &str) -> Result<(), String> {
    match v {
        "none" => Ok(()),
        _ => match v.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(()),
            _ => Err("give `none` or a whole number from 1".into()),
        },
    }
}

/// A queue's type (`x-queue-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Classic,
    /// Replicated with Raft; every message on disk.
    Quorum,
    /// An append-only log on disk that readers read without removing anything.
    Stream,
}

impl Kind {
    /// Its `x-queue-type`, and `--opt queue`'s value.
    fn name(self) -> &'static str {
        match self {
            Kind::Classic => "classic",
            Kind::Quorum => "quorum",
            Kind::Stream => "stream",
        }
    }
}

/// The options as an end uses them.
#[derive(Clone)]
pub(super) struct Settings {
    kind: Kind,
    /// Durable queues and messages published with delivery_mode 2: written to disk.
    persistent: bool,
    confirm: bool,
    manual_ack: bool,
    prefetch: u16,
    /// A bounded queue that drops its oldest (x-max-length, x-overflow drop-head).
    max_length: Option<u64>,
}

impl Settings {
    fn of(o: &Options) -> Settings {
        let flag = |k: &str| o.get(k).map(String::as_str) == Some("true");
        let kind = match o.get("queue").map(String::as_str) {
            Some("quorum") => Kind::Quorum,
            Some("stream") => Kind::Stream,
            _ => Kind::Classic,
        };
        let stream = kind == Kind::Stream;
        Settings {
            kind,
            persistent: flag("persistent"),
            confirm: flag("confirm"),
            // A stream's reader must acknowledge, within a prefetch (RabbitMQ refuses others).
            manual_ack: stream || o.get("ack").map(String::as_str) == Some("manual"),
            prefetch: match o.get("prefetch").and_then(|v| v.parse().ok()).unwrap_or(0) {
                0 if stream => STREAM_PREFETCH,
                n => n,
            },
            max_length: o.get("max-length").and_then(|v| v.parse().ok()),
        }
    }

    fn stream(&self) -> bool {
        self.kind == Kind::Stream
    }

    /// A queue's arguments: its type, a bound if any, and an expiry once unused, so that a
    /// queue a crashed run left on a shared broker goes by itself (a stream has no expiry:
    /// set-up deletes it).
    fn queue_args(&self) -> FieldTable {
        let mut a = FieldTable::default();
        if self.kind != Kind::Classic {
            let kind = self.kind.name();
            a.insert("x-queue-type".into(), AMQPValue::LongString(kind.into()));
        }
        if let Some(n) = self.max_length {
            a.insert("x-max-length".into(), AMQPValue::LongLongInt(n as i64));
            a.insert(
                "x-overflow".into(),
                AMQPValue::LongString("drop-head".into()),
            );
        }
        if !self.stream() {
            a.insert("x-expires".into(), AMQPValue::LongLongInt(60_000));
        }
        a
    }

    /// A consumer's arguments: a stream is read from its first message.
    fn consume_args(&self) -> FieldTable {
        let mut a = FieldTable::default();
        if self.stream() {
            a.insert(
                "x-stream-offset".into(),
                AMQPValue::LongString("first".into()),
            );
        }
        a
    }

    fn queue_options(&self) -> QueueDeclareOptions {
        QueueDeclareOptions {
            // Quorum queues and streams are always durable; a classic queue must be for its
            // persistent messages to outlive a broker's restart.
            durable: self.kind != Kind::Classic || self.persistent,
            ..QueueDeclareOptions::default()
        }
    }

    /// A message's properties: delivery_mode 2 (persistent) or 1 (transient).
    fn properties(&self) -> BasicProperties {
        BasicProperties::default().with_delivery_mode(if self.persistent { 2 } else { 1 })
    }
}

impl Transport for Amqp {
    fn name(&self) -> &'static str {
        "amqp"
    }
    fn about(&self) -> &'static str {
        "AMQP 0-9-1 (lapin) through a RabbitMQ that msgperf starts per case, or --opt broker=URL (feature `amqp`)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        #[rustfmt::skip]
        const O: &[OptionSpec] = &[
            OptionSpec { key: "broker", default: "start", about: "start (msgperf runs rabbitmq-server for the case, on a free loopback port) or amqp://HOST:PORT of a running broker (msgperf uses only queues and exchanges of its own there)", values: &[], check: Some(check_broker) },
            OptionSpec { key: "queue", default: "classic", about: "the queues' type: classic, quorum (replicated with Raft, durable: every message is written to disk), or stream (an append-only log on disk that every reader reads whole, with manual acknowledgements and a prefetch, 1000 by default)", values: &["classic", "quorum", "stream"], check: None },
            OptionSpec { key: "persistent", default: "false", about: "durable queues and persistent messages (delivery_mode 2): the broker writes to disk each message that is not consumed first, and confirms it (with confirm=true) once written or taken by every queue's reader; quorum queues write every message anyway", values: &["true", "false"], check: None },
            OptionSpec { key: "confirm", default: "false", about: "publisher confirms: each publish waits until the broker has taken it", values: &["true", "false"], check: None },
            OptionSpec { key: "ack", default: "auto", about: "auto: the broker forgets a message once it is sent to the reader; manual: the reader acknowledges each one", values: &["auto", "manual"], check: None },
            OptionSpec { key: "prefetch", default: "0", about: "messages the broker sends a reader ahead of its acknowledgements (basic.qos, with ack=manual); 0: no limit", values: &[], check: Some(check_count) },
            OptionSpec { key: "max-length", default: "none", about: "a bounded queue that drops its oldest message when full (x-max-length, x-overflow drop-head); none: unbounded", values: &[], check: Some(check_length) },
        ];
        O
    }
    fn capabilities(&self, o: &Options) -> Capabilities {
        Capabilities {
            // Its broker boots in seconds (a floor starts its own).
            startup: SERVER.boots_within,
            ..broker::capabilities(Settings::of(o).max_length.is_none(), MAX_MESSAGE)
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let given = options.get("max-length").filter(|v| *v != "none");
        let mut effective = options.clone();
        let mut mapped = DeliveryMap::default();
        if Settings::of(options).stream() {
            stream_refusals(d, options)?;
            // What a stream's reader runs with, recorded as the case's options.
            mapped.options.insert("ack".into(), "manual".into());
            if !options.contains_key("prefetch") {
                mapped
                    .options
                    .insert("prefetch".into(), STREAM_PREFETCH.to_string());
            }
        }
        match (d.history, given) {
            (History::KeepLast(n), Some(g)) if *g != n.to_string() => {
                return Err(format!(
                    "--history latest keeps the last {n}, but --opt max-length={g} was given: drop one of them"
                ))
            }
            (History::KeepLast(n), _) => {
                effective.insert("max-length".into(), n.to_string());
                mapped.options.insert("max-length".into(), n.to_string());
            }
            _ => {}
        }
        let s = Settings::of(&effective);
        if d.reliability == Some(Reliability::Reliable) && s.max_length.is_some() {
            return Err(
                "--delivery reliable keeps every message, but a bounded queue (--history latest or --opt max-length) drops its oldest: drop one of them"
                    .into(),
            );
        }
        if d.reliability == Some(Reliability::BestEffort) && s.max_length.is_none() {
            return Err(
                "an AMQP queue keeps every message until it is read: for best effort, bound it with --history latest or --opt max-length=N"
                    .into(),
            );
        }
        let latest = s.max_length == Some(1);
        mapped.strict = s.max_length.is_none();
        mapped.latest = latest;
        mapped.settings = vec![
            Setting::new(
                "queue",
                s.kind.name(),
                match (s.kind, s.persistent) {
                    (Kind::Quorum, _) => "quorum queues: replicated with Raft and written to disk before they are confirmed",
                    (Kind::Stream, _) => "streams: append-only logs on disk, made at set-up for the case and deleted after it; a channel's way is one stream, a topic one stream that every subscriber reads whole (nothing is copied per reader), from its first message (x-stream-offset first)",
                    (Kind::Classic, true) => "classic queues, durable: they and their persistent messages outlive a broker's restart",
                    (Kind::Classic, false) => "classic queues, not durable: held in memory, paged out under memory pressure",
                },
            ),
            match s.max_length {
                None => Setting::new("reliability", "reliable", "unbounded queues: nothing is dropped while the broker lives (it blocks a publisher it cannot keep up with); a loss fails the case"),
                Some(n) => Setting::new("reliability", "best-effort", &format!("queues bounded at {n} message(s) that drop their oldest (x-overflow drop-head); readers count the losses")),
            },
            Setting::new(
                "history",
                &match s.max_length {
                    None => "keep-all".to_string(),
                    Some(n) => format!("keep-last {n}"),
                },
                "per queue, in order",
            ),
            Setting::new(
                "persistence",
                if s.persistent || s.kind != Kind::Classic { "on disk" } else { "in memory" },
                match (s.persistent, s.kind) {
                    (_, Kind::Quorum) => "quorum queues write every message to their log on disk, whatever its delivery_mode",
                    (_, Kind::Stream) => "a stream writes every message to its segment files on disk, whatever its delivery_mode, and keeps it after it is read",
                    (true, Kind::Classic) => "durable queues, messages with delivery_mode 2: written to disk, and confirmed once there or once every queue's reader has taken it (RabbitMQ's rule: a message consumed at once need not reach the disk)",
                    (false, Kind::Classic) => "transient messages (delivery_mode 1) in queues that are not durable",
                },
            ),
            Setting::on_off(
                "confirms",
                s.confirm,
                "each publish waits for the broker's confirmation",
                "a publish returns once the client has it",
            ),
            Setting::new(
                "acks",
                if s.manual_ack { "manual" } else { "auto" },
                &if s.manual_ack {
                    format!(
                        "the reader acknowledges each message{}; prefetch {}",
                        if s.stream() { " (a stream's reader must)" } else { "" },
                        match s.prefetch {
                            0 => "unlimited".to_string(),
                            n => n.to_string(),
                        }
                    )
                } else {
                    "the broker forgets a message once sent (no_ack)".into()
                },
            ),
            Setting::new(
                "durability",
                "volatile",
                if s.stream() {
                    "a reader reads the case's stream from its first message: what was sent after set-up made it"
                } else {
                    "a reader gets what is sent after its queue was declared"
                },
            ),
        ];
        Ok(mapped)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        // Queues are deleted by their readers and exchanges go with their last queue
        // (auto-delete); what a crash leaves expires (x-expires). Streams take no x-expires:
        // on a broker msgperf did not start, those of a case are deleted when it ends.
        let s = Settings::of(&spec.options);
        let remove = s.stream().then_some(delete_streams as broker::Remove);
        let setup = broker::setup(self.name(), &SERVER, "amqp", plan, spec, remove)?;
        if !s.stream() {
            return Ok(setup);
        }
        // Streams are made here, before any end opens: each is read by every reader it has
        // and outlives them, so no reader may make or delete it. Should one fail, those made
        // before it go with `setup`.
        let (url, name) = broker::meeting(&setup.rendezvous)?;
        let client = Client::connect(url, spec.timeout)?;
        for q in broker::plan_names(name, '.', plan) {
            client.declare(&q, &s, spec.timeout)?;
        }
        Ok(setup)
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let (url, name) = broker::meeting(at)?;
        let s = Settings::of(&spec.options);
        let client = Client::connect(url, spec.timeout)?;
        let (out, inbound) = broker::names(name, '.', side);
        let t = spec.timeout;
        let ch = &client.channel;
        // Declared (and bound) before this end says it is bound: every end is bound before any
        // writes, so nothing is routed to no queue. Each queue is declared once, by its reader:
        // declaring one queue from two connections at once is a race that RabbitMQ has answered
        // with INTERNAL_ERROR (rabbitmq-server#13727), as a quorum queue's opening once did here.
        let (out, inbound) = match side {
            // Set-up made the streams; a stream's topic is written to, not through an exchange.
            _ if s.stream() => (out.map(|q| (String::new(), q)), inbound),
            Side::Accept(_) | Side::Connect(_) => {
                if let Some(q) = &inbound {
                    client.declare(q, &s, t)?;
                }
                (out.map(|q| (String::new(), q)), inbound)
            }
            Side::Publish { .. } => {
                let ex = out.expect("a publisher writes");
                client.exchange(&ex, t)?;
                (Some((ex, String::new())), None)
            }
            Side::Subscribe { reader, .. } => {
                let ex = inbound.expect("a subscriber reads");
                let q = format!("{ex}.r{reader}");
                client.exchange(&ex, t)?;
                client.declare(&q, &s, t)?;
                wait(
                    t,
                    ch.queue_bind(
                        q.as_str().into(),
                        ex.as_str().into(),
                        "".into(),
                        QueueBindOptions::default(),
                        FieldTable::default(),
                    ),
                )?
                .map_err(failed)?;
                (None, Some(q))
            }
        };
        if s.confirm && out.is_some() {
            wait(t, ch.confirm_select(ConfirmSelectOptions::default()))?.map_err(failed)?;
        }
        let consumer = match &inbound {
            Some(q) => {
                if s.manual_ack && s.prefetch > 0 {
                    wait(t, ch.basic_qos(s.prefetch, BasicQosOptions::default()))?
                        .map_err(failed)?;
                }
                Some(client.consume(q, &s, t)?)
            }
            None => None,
        };
        // A reader deletes its queue, but not a stream, which set-up deletes.
        let delete = inbound.filter(|_| !s.stream());
        Ok(Box::new(broker::Greeting(
            AmqpEnd {
                client,
                out,
                consumer,
                delete,
                settings: s,
                timeout: t,
            },
            side,
        )))
    }

    fn needs(&self) -> Vec<Need> {
        vec![SERVER.needs()]
    }
    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::AmqpFloor)
    }
}

/// Refuses what a stream cannot do, naming what to drop.
fn stream_refusals(d: &Delivery, given: &Options) -> Result<(), String> {
    if let History::KeepLast(n) = d.history {
        return Err(format!(
            "a RabbitMQ stream keeps its log by size or age, not the last {n} message(s): use --history fifo, or --opt queue=classic"
        ));
    }
    if given.get("max-length").is_some_and(|v| v != "none") {
        return Err(
            "a RabbitMQ stream keeps its log by size or age, not a number of messages: drop --opt max-length, or use --opt queue=classic"
                .into(),
        );
    }
    if d.reliability == Some(Reliability::BestEffort) {
        return Err(
            "a RabbitMQ stream keeps every message: use --delivery reliable, or --opt queue=classic with --opt max-length=N".into(),
        );
    }
    if given.get("ack").is_some_and(|v| v == "auto") {
        return Err(
            "a RabbitMQ stream's reader must acknowledge what it reads: drop --opt ack=auto".into(),
        );
    }
    if given.get("prefetch").is_some_and(|v| v == "0") {
        return Err(format!(
            "a RabbitMQ stream's reader needs a prefetch: give --opt prefetch=N from 1, or drop it for {STREAM_PREFETCH}"
        ));
    }
    Ok(())
}

/// The streams a case's set-up made, deleted when it ends, before its broker stops.
/// Deletes a case's streams from a broker msgperf did not start (one it started goes with
/// its directory).
fn delete_streams(url: &str, name: &str, plan: &SetupPlan, timeout: Duration) {
    if let Ok(client) = Client::connect(url, timeout) {
        client.delete(&broker::plan_names(name, '.', plan));
    }
}

fn login_refused(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(a)
        if *a.kind() == AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED))
}

fn failed(e: impl std::fmt::Display) -> TransportError {
    TransportError::middleware("lapin", "an AMQP call", e.to_string())
}

/// A connection and its one channel.
pub(super) struct Client {
    connection: Connection,
    pub channel: Channel,
    /// A call timed out or found the broker gone: closing politely would wait out its bound
    /// again (a link that went down), so the connection is just dropped.
    broken: bool,
}

impl Client {
    /// Connects to the broker at `url` and opens a channel, within the timeout.
    pub fn connect(url: &str, timeout: Duration) -> Result<Client, TransportError> {
        let connection = wait(
            timeout,
            Connection::connect(url, ConnectionProperties::default()),
        )
        .map_err(|e| broker::not_there(url, e, "rabbitmq-server"))?
        .map_err(|e| {
            // It answered, and refused the login: no question of whether it runs.
            if login_refused(&e) {
                TransportError::middleware(
                    "amqp",
                    format!("the broker at {url} refused the login (give a user it accepts from this host: amqp://USER:PASSWORD@HOST:PORT)"),
                    e.to_string(),
                )
            } else {
                broker::not_there(url, e, "rabbitmq-server")
            }
        })?;
        let channel = wait(timeout, connection.create_channel())?.map_err(failed)?;
        Ok(Client {
            connection,
            channel,
            broken: false,
        })
    }

    /// Declares queue `q` as the settings say.
    pub fn declare(&self, q: &str, s: &Settings, t: Duration) -> Result<(), TransportError> {
        wait(
            t,
            self.channel
                .queue_declare(q.into(), s.queue_options(), s.queue_args()),
        )?
        .map(|_| ())
        .map_err(failed)
    }

    /// Declares fanout exchange `ex`, gone with its last queue.
    fn exchange(&self, ex: &str, t: Duration) -> Result<(), TransportError> {
        let o = ExchangeDeclareOptions {
            auto_delete: true,
            ..ExchangeDeclareOptions::default()
        };
        wait(
            t,
            self.channel.exchange_declare(
                ex.into(),
                ExchangeKind::Fanout,
                o,
                FieldTable::default(),
            ),
        )?
        .map_err(failed)
    }

    /// Starts consuming queue `q`, acknowledging as the settings say.
    pub fn consume(&self, q: &str, s: &Settings, t: Duration) -> Result<Consumer, TransportError> {
        let o = BasicConsumeOptions {
            no_ack: !s.manual_ack,
            ..BasicConsumeOptions::default()
        };
        wait(
            t,
            self.channel
                .basic_consume(q.into(), "".into(), o, s.consume_args()),
        )?
        .map_err(failed)
    }

    /// Deletes `queues`, waiting at most a second for them all (a stopped broker answers
    /// none).
    pub fn delete(&self, queues: &[impl AsRef<str>]) {
        let _ = wait(Duration::from_secs(1), async {
            for q in queues {
                let o = QueueDeleteOptions::default();
                if self
                    .channel
                    .queue_delete(q.as_ref().into(), o)
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
    }

    /// Publishes `msg` to `exchange` with `key`, persistent and waiting for its confirmation
    /// as the settings say.
    pub async fn publish(
        &self,
        exchange: &str,
        key: &str,
        msg: &[u8],
        s: &Settings,
    ) -> Result<(), TransportError> {
        let c = self
            .channel
            .basic_publish(
                exchange.into(),
                key.into(),
                BasicPublishOptions::default(),
                msg,
                s.properties(),
            )
            .await
            .map_err(|_| TransportError::PeerClosed)?;
        if s.confirm {
            let c = c.await.map_err(|_| TransportError::PeerClosed)?;
            if !c.is_ack() {
                return Err(failed("the broker refused a publish (nack)"));
            }
        }
        Ok(())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if self.broken {
            return;
        }
        // What was published leaves before the connection goes.
        let _ = wait(
            Duration::from_secs(1),
            self.connection.close(200, "msgperf is done".into()),
        );
    }
}

struct AmqpEnd {
    client: Client,
    /// Where it publishes: an exchange (empty: the default one) and a routing key.
    out: Option<(String, String)>,
    consumer: Option<Consumer>,
    /// The queue it reads and deletes when it is done (not a stream).
    delete: Option<String>,
    settings: Settings,
    timeout: Duration,
}

impl AmqpEnd {
    /// The next delivery, handed to `take` where lapin delivered it (then acknowledged, with
    /// `ack=manual`), waiting at most `timeout` (zero: only what is there now).
    fn next(
        &mut self,
        take: &mut Take,
        timeout: Duration,
    ) -> Result<Option<usize>, TransportError> {
        let Some(c) = self.consumer.as_mut() else {
            return Err(TransportError::Unsupported(
                "amqp: a topic's publisher only writes".into(),
            ));
        };
        // What is queued is taken without a timed wait (which costs a timer).
        let next = match c.next().now_or_never() {
            Some(n) => n,
            None if timeout.is_zero() => return Ok(None),
            None => match wait(timeout, c.next()) {
                Ok(n) => n,
                Err(e) => return Err(self.broke(e)),
            },
        };
        let d = match next {
            Some(Ok(d)) => d,
            Some(Err(_)) | None => return Err(self.broke(TransportError::PeerClosed)),
        };
        let n = take(&d.data);
        if self.settings.manual_ack {
            let acked = wait(self.timeout, d.ack(BasicAckOptions::default()))
                .and_then(|r| r.map_err(|_| TransportError::PeerClosed));
            if let Err(e) = acked {
                return Err(self.broke(e));
            }
        }
        n.map(Some)
    }

    /// Notes a call that timed out or lost the broker, so that dropping this end does not wait
    /// on the broker again.
    fn broke(&mut self, e: TransportError) -> TransportError {
        if matches!(e, TransportError::Timeout(_) | TransportError::PeerClosed) {
            self.client.broken = true;
        }
        e
    }
}

impl Drop for AmqpEnd {
    fn drop(&mut self) {
        // A queue left by a broken end goes with its private broker, or with the ledger's sweep
        // of a user's broker.
        if let Some(q) = self.delete.as_ref().filter(|_| !self.client.broken) {
            self.client.delete(&[q]);
        }
    }
}

impl Endpoint for AmqpEnd {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let Some((exchange, key)) = &self.out else {
            return Err(TransportError::Unsupported(
                "amqp: a subscriber only reads".into(),
            ));
        };
        let sent = wait(
            self.timeout,
            self.client.publish(exchange, key, msg, &self.settings),
        )
        .and_then(|r| r);
        sent.map_err(|e| self.broke(e))
    }

    reads_in_place!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(opts: &[(&str, &str)]) -> Settings {
        Settings::of(
            &opts
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn persistent_messages_go_to_durable_queues_with_delivery_mode_2() {
        let p = settings(&[("persistent", "true")]);
        assert_eq!(p.properties().delivery_mode(), &Some(2));
        assert!(p.queue_options().durable);
        let t = settings(&[]);
        assert_eq!(t.properties().delivery_mode(), &Some(1));
        assert!(!t.queue_options().durable);
        // A quorum queue is durable whatever the messages are.
        assert!(settings(&[("queue", "quorum")]).queue_options().durable);
    }
}
