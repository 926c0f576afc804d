//! `mqtt`: MQTT 3.1.1 through `rumqttc` (its event loop a task on the process's tokio runtime)
//! and a `mosquitto` broker. Every end is a client of its own; a channel is two topics, one per
//! direction, and a topic one MQTT topic that the broker copies to every subscriber. QoS 0, 1 or 2
//! (`--opt qos`). Without `--opt broker=URL` each case runs a mosquitto of its own
//! (`transport/broker.rs`). Cargo feature `mqtt`.

mod floor;

use super::broker::{self, Config, Program};
use super::runtime::{runtime, wait};
use super::{
    as_it_is, reads_in_place, Capabilities, ChannelSpec, DeliveryMap, Endpoint, Floor, Need,
    OptionSpec, Options, Rendezvous, Setup, SetupPlan, Side, Take, Transport, TransportError,
};
use crate::delivery::{Delivery, Reliability, Setting};
use crate::transport::OpenResult;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub struct Mqtt;

/// The largest message msgperf sends through MQTT (the protocol's own limit is 256 MiB).
const MAX_MESSAGE: usize = 64 << 20;

/// Messages a client's event loop hands to its role before it waits (and the broker's queue
/// for it grows).
const INBOX: usize = 1024;

/// QoS 2 publishes a client has in flight: mosquitto's default receive quota.
const QOS2_INFLIGHT: u16 = 20;

pub(super) static SERVER: Program = Program::plain(
    "mosquitto",
    "mosquitto",
    |_| vec!["-c".into(), "mosquitto.conf".into()],
    Some(Config {
        file: "mosquitto.conf",
        text: config,
    }),
);

/// Its host's address only (loopback unless placed), TCP_NODELAY, nothing persisted, no limit on
/// what it queues for a slow subscriber. Started as root, mosquitto switches to the user named
/// here: it must stay the user it was started as, since a change of user clears the signal that
/// kills it with msgperf (PR_SET_PDEATHSIG), and an orphan would outlive the run.
fn config(b: &broker::Bind) -> String {
    let (host, port) = (b.host, b.port);
    let user = crate::sys::user_name().unwrap_or_else(|| "root".into());
    format!("listener {port} {host}\nset_tcp_nodelay true\nallow_anonymous true\npersistence false\nmax_queued_messages 0\nmax_queued_bytes 0\nuser {user}\n")
}

fn check_broker(v: &str) -> Result<(), String> {
    broker::check_url(v, "mqtt")
}

fn qos_of(options: &Options) -> QoS {
    match options.get("qos").map(String::as_str) {
        Some("0") => QoS::AtMostOnce,
        Some("2") => QoS::ExactlyOnce,
        _ => QoS::AtLeastOnce,
    }
}

impl Transport for Mqtt {
    fn name(&self) -> &'static str {
        "mqtt"
    }
    fn about(&self) -> &'static str {
        "MQTT 3.1.1 (rumqttc) through a mosquitto that msgperf starts per case, or --opt broker=URL (feature `mqtt`)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        #[rustfmt::skip]
        const O: &[OptionSpec] = &[
            OptionSpec { key: "broker", default: "start", about: "start (msgperf runs mosquitto for the case, on a free loopback port) or mqtt://HOST:PORT of a running broker (msgperf uses only topics of its own there)", values: &[], check: Some(check_broker) },
            OptionSpec { key: "qos", default: "1", about: "MQTT QoS of publishes and subscriptions: 0 (at most once), 1 (at least once: acknowledged, repeated if not) or 2 (exactly once: received, released and completed, four packets per hop)", values: &["0", "1", "2"], check: None },
        ];
        O
    }
    fn capabilities(&self, o: &Options) -> Capabilities {
        broker::capabilities(qos_of(o) != QoS::AtMostOnce, MAX_MESSAGE)
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let given = options.get("qos").map(String::as_str);
        let mut effective = options.clone();
        match (d.reliability, given) {
            (Some(Reliability::Reliable), Some("0")) => return Err(
                "--delivery reliable needs QoS 1 or 2, but --opt qos=0 was given: drop one of them"
                    .into(),
            ),
            (Some(Reliability::BestEffort), Some("1" | "2")) => return Err(
                "--delivery best-effort is QoS 0, but --opt qos=1 or 2 was given: drop one of them"
                    .into(),
            ),
            (Some(Reliability::BestEffort), None) => {
                effective.insert("qos".into(), "0".into());
            }
            _ => {}
        }
        let mut m = as_it_is(self.name(), &self.capabilities(&effective), d)?;
        if given.is_none() && effective.contains_key("qos") {
            m.options.insert("qos".into(), "0".into());
        }
        let s = match qos_of(&effective) {
            QoS::AtMostOnce => Setting::new("QoS", "0", "at most once: nothing is acknowledged or repeated; losses are counted"),
            QoS::AtLeastOnce => Setting::new("QoS", "1", "at least once: every publish is acknowledged (PUBACK) and the broker queues for a slow subscriber without limit (max_queued_messages 0)"),
            QoS::ExactlyOnce => Setting::new("QoS", "2", "exactly once: every publish is received (PUBREC), released (PUBREL) and completed (PUBCOMP), at most 20 in flight per client (mosquitto's receive quota); the broker delivers it once, on its release"),
        };
        m.settings.insert(0, s);
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        // Topics need no removal: nothing is retained or persisted.
        broker::setup(self.name(), &SERVER, "mqtt", plan, spec, None)
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let (url, name) = broker::meeting(at)?;
        let (out, inbound) = broker::names(name, '/', side);
        let id = format!("{name}-{}", side.meeting().replace(' ', "-"))
            + &match side {
                Side::Subscribe { reader, .. } => format!("-r{reader}"),
                Side::Accept(_) => "-a".into(),
                _ => String::new(),
            };
        let qos = qos_of(&spec.options);
        let mut end = Client::connect(url, &id, spec)?;
        if let Some(topic) = inbound {
            // Subscribed (SUBACK) before this end says it is bound: every end is bound before
            // any writes, so nothing is published to no one.
            wait(spec.timeout, end.client.subscribe(topic, qos))?.map_err(failed)?;
            end.until(spec.timeout, |p| matches!(p, Packet::SubAck(_)))?;
        }
        Ok(Box::new(broker::Greeting(
            MqttEnd {
                end,
                out,
                qos,
                timeout: spec.timeout,
            },
            side,
        )))
    }

    fn needs(&self) -> Vec<Need> {
        vec![SERVER.needs()]
    }
    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::MqttFloor)
    }
}

fn failed(e: impl std::fmt::Display) -> TransportError {
    TransportError::middleware("rumqttc", "an MQTT call", e.to_string())
}

/// What a client's event loop saw.
enum Seen {
    Packet(Packet),
    /// The connection failed or closed.
    Gone,
}

/// A client and what its event loop (a task on the runtime) hands on.
pub(super) struct Client {
    pub client: AsyncClient,
    seen: mpsc::Receiver<Seen>,
    task: tokio::task::JoinHandle<()>,
    /// Publishes at QoS 1 or 2 handed to the client, and those the broker has completed
    /// (PUBACK, PUBCOMP): the connection stays until they match.
    sent: u64,
    completed: Arc<AtomicU64>,
}

impl Client {
    /// Connects to the broker at `url` (CONNACK received) within the timeout.
    pub fn connect(url: &str, id: &str, spec: &ChannelSpec) -> Result<Client, TransportError> {
        let (host, port) = url
            .strip_prefix("mqtt://")
            .and_then(|a| a.rsplit_once(':'))
            .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
            .ok_or_else(|| failed(format!("{url} is not mqtt://HOST:PORT")))?;
        let mut o = MqttOptions::new(id, host, port);
        o.set_max_packet_size(MAX_MESSAGE + 4096, MAX_MESSAGE + 4096)
            .set_keep_alive(Duration::from_secs(60))
            .set_clean_session(true);
        if qos_of(&spec.options) == QoS::ExactlyOnce {
            // mosquitto holds a client's QoS 2 publishes until it releases them (PUBREL), at
            // most `max_inflight_messages` (20 by default) of them, and drops a client that
            // sends more (PUBREC with reason 151, quota exceeded); rumqttc's default is 100.
            o.set_inflight(QOS2_INFLIGHT);
        }
        let (client, mut events) = AsyncClient::new(o, 64);
        // Like the broker's (set_tcp_nodelay): a small publish leaves at once instead of
        // waiting out a delayed acknowledgement (40 ms).
        let mut net = events.network_options();
        net.set_tcp_nodelay(true);
        events.set_network_options(net);
        let (tx, seen) = mpsc::channel(INBOX);
        let completed = Arc::new(AtomicU64::new(0));
        let done = completed.clone();
        let task = runtime().spawn(async move {
            loop {
                let what = match events.poll().await {
                    Ok(Event::Incoming(Packet::PubAck(_) | Packet::PubComp(_))) => {
                        done.fetch_add(1, Ordering::Release);
                        continue;
                    }
                    // Only what a role waits for: acknowledgements of its own publishes are
                    // the event loop's business, and an end that only writes never reads them.
                    Ok(Event::Incoming(
                        p @ (Packet::Publish(_) | Packet::ConnAck(_) | Packet::SubAck(_)),
                    )) => Seen::Packet(p),
                    Ok(_) => continue,
                    Err(_) => Seen::Gone,
                };
                let gone = matches!(what, Seen::Gone);
                if tx.send(what).await.is_err() || gone {
                    return;
                }
            }
        });
        let mut c = Client {
            client,
            seen,
            task,
            sent: 0,
            completed,
        };
        c.until(spec.timeout, |p| matches!(p, Packet::ConnAck(_)))
            .map_err(|e| match e {
                TransportError::PeerClosed | TransportError::Timeout(_) => {
                    broker::not_there(url, "no CONNACK", "mosquitto")
                }
                e => e,
            })?;
        Ok(c)
    }

    /// Hands a publish to the client: into its queue at once if it has room (a timed wait
    /// costs a timer), else waiting at most `timeout`.
    pub fn publish(
        &mut self,
        topic: &str,
        qos: QoS,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<(), TransportError> {
        if self.client.try_publish(topic, qos, false, payload).is_err() {
            wait(timeout, self.client.publish(topic, qos, false, payload))?
                .map_err(|_| TransportError::PeerClosed)?;
        }
        if qos != QoS::AtMostOnce {
            self.sent += 1;
        }
        Ok(())
    }

    /// Waits for a packet that `want` picks, dropping the others (acknowledgements).
    pub fn until(
        &mut self,
        timeout: Duration,
        want: impl Fn(&Packet) -> bool,
    ) -> Result<Packet, TransportError> {
        let deadline = crate::deadline::Deadline::after(timeout);
        loop {
            if deadline.expired() {
                return Err(TransportError::Timeout(timeout));
            }
            match self.next(deadline.remaining_nonzero())? {
                Some(p) if want(&p) => return Ok(p),
                Some(_) => {}
                None => return Err(TransportError::Timeout(timeout)),
            }
        }
    }

    /// The next packet: what is there now if `timeout` is zero, else waiting at most that.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<Packet>, TransportError> {
        // What is queued is taken without a timed wait (which costs a timer).
        let seen = match self.seen.try_recv() {
            Ok(s) => Some(s),
            Err(mpsc::error::TryRecvError::Empty) if timeout.is_zero() => return Ok(None),
            Err(mpsc::error::TryRecvError::Empty) => match wait(timeout, self.seen.recv()) {
                Ok(s) => s,
                Err(TransportError::Timeout(_)) => return Ok(None),
                Err(e) => return Err(e),
            },
            Err(mpsc::error::TryRecvError::Disconnected) => None,
        };
        match seen {
            Some(Seen::Packet(p)) => Ok(Some(p)),
            Some(Seen::Gone) | None => Err(TransportError::PeerClosed),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // What was published reaches the broker before the connection goes: a QoS 2 publish
        // is delivered only once the client has released it (PUBREL), which needs the
        // broker's PUBREC first, and a clean session's disconnect drops it before that.
        let end = Instant::now() + Duration::from_secs(1);
        while self.completed.load(Ordering::Acquire) < self.sent
            && !self.task.is_finished()
            && Instant::now() < end
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = wait(Duration::from_secs(1), self.client.disconnect());
        let _ = wait(Duration::from_secs(1), &mut self.task);
        self.task.abort();
    }
}

struct MqttEnd {
    end: Client,
    out: Option<String>,
    qos: QoS,
    timeout: Duration,
}

impl MqttEnd {
    /// The next message, handed to `take` where rumqttc delivered it, waiting at most
    /// `timeout` (zero: only what is there now).
    fn next(
        &mut self,
        take: &mut Take,
        timeout: Duration,
    ) -> Result<Option<usize>, TransportError> {
        let deadline = crate::deadline::Deadline::after(timeout);
        loop {
            let left = if timeout.is_zero() {
                Duration::ZERO
            } else {
                deadline.remaining_nonzero()
            };
            match self.end.next(left)? {
                Some(Packet::Publish(p)) => return take(&p.payload).map(Some),
                Some(_) => continue,
                None if timeout.is_zero() => return Ok(None),
                None => return Err(TransportError::Timeout(timeout)),
            }
        }
    }
}

impl Endpoint for MqttEnd {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let Some(out) = self.out.clone() else {
            return Err(TransportError::Unsupported(
                "mqtt: a subscriber only reads".into(),
            ));
        };
        self.end.publish(&out, self.qos, msg, self.timeout)
    }

    reads_in_place!();
}
