//! `kafka`: Apache Kafka through `rdkafka` (librdkafka, built from its bundled source; its own
//! threads do the I/O, so no runtime sits between a role and the client) and a Kafka 4 broker
//! in KRaft mode (no ZooKeeper), run from Maven Central's jars on Java 17. A channel is two
//! topics, one per direction; a topic is a Kafka topic that every subscriber reads whole with a
//! consumer of its own (Kafka's fan-out: readers share the log, nothing is copied per reader).
//! Every topic has one partition, so each reader sees one order. Set-up makes a case's topics
//! (and removes them from a broker msgperf did not start); readers are assigned their partition
//! from its first offset, with no consumer group to join. Without `--opt broker=URL` each case
//! runs a broker of its own (`transport/broker.rs`). Cargo feature `kafka`.

mod floor;

use super::broker::{self, Program};
use super::runtime::wait;
use super::{
    reads_in_place, Capabilities, ChannelSpec, DeliveryMap, Endpoint, Floor, Get, Need, OptionSpec,
    Options, Rendezvous, Setup, SetupPlan, Side, Take, Transport, TransportError,
};
use crate::delivery::{Delivery, History, Reliability, Setting};
use crate::transport::OpenResult;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer, ProducerContext, PurgeConfig, ThreadedProducer,
};
use rdkafka::{Offset, TopicPartitionList};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub struct Kafka;

/// The script that fetches them, from the repository's top.
const FETCH: &str = "src/transport/kafka/fetch-broker";

/// The Kafka release whose jars `src/transport/kafka/fetch-broker` fetches.
const VERSION: &str = "4.3.1";

/// The largest message msgperf sends through a broker it starts (configured for twice that).
const MAX_MESSAGE: usize = 8 << 20;

/// The largest through a broker it did not start: under its default message.max.bytes
/// (1 MiB and 12 B), with room for a batch's headers.
const MAX_MESSAGE_ELSEWHERE: usize = 1_000_000;

/// Where Kafka's jars are: `$MSGPERF_KAFKA/libs`, by default under `~/.cache/msgperf`.
pub(super) fn libs() -> PathBuf {
    let home = std::env::var_os("MSGPERF_KAFKA").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home)
                .join(".cache/msgperf")
                .join(format!("kafka-{VERSION}"))
        },
        PathBuf::from,
    );
    home.join("libs")
}

fn jars_present() -> Result<(), String> {
    let libs = libs();
    if libs.join(format!("kafka_2.13-{VERSION}.jar")).is_file() {
        Ok(())
    } else {
        Err(format!(
            "Kafka {VERSION}'s jars are not in {}: fetch them with `{FETCH}` (needs Java 17 and Maven), or set MSGPERF_KAFKA to where they are",
            libs.display()
        ))
    }
}

pub(super) static SERVER: Program = Program {
    name: "java",
    package: "openjdk-17-jre-headless",
    args: |b| {
        let mut a = jvm(b.dir);
        a.push("kafka.Kafka".into());
        a.push(b.dir.join("server.properties").display().to_string());
        a
    },
    config: None,
    configure: Some(configure),
    env: None,
    helper: None,
    // A JVM, then KRaft's election of its one controller: 3-5 s on this 2-CPU VM.
    boots_within: Duration::from_secs(60),
    // An ApiVersions request (v0, correlation id 1, no client id): the broker answers it once
    // it serves requests (its port takes connections before that).
    greeting: Some(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff"),
    needs: Some(jars_present),
};

/// The JVM's command line up to the main class: the heap and collector of Kafka's own
/// `kafka-server-start.sh`, its logging at warnings to its output, and no perf-data file in
/// /tmp (which a killed JVM would leave behind).
fn jvm(dir: &Path) -> Vec<String> {
    [
        "-Xmx1G",
        "-Xms1G",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
        "-XX:-UsePerfData",
        "-Djava.awt.headless=true",
    ]
    .map(String::from)
    .into_iter()
    .chain([
        format!(
            "-Dlog4j2.configurationFile={}",
            dir.join("log4j2.properties").display()
        ),
        "-cp".into(),
        format!("{}/*", libs().display()),
    ])
    .collect()
}

/// One KRaft node, broker and controller, on loopback, its log in the case's directory,
/// formatted before it starts (as `kafka-storage.sh format` does).
fn configure(b: &broker::Bind) -> std::io::Result<()> {
    let (port, dir, host) = (b.port, b.dir, b.host);
    // Picked with the broker's port, never the same.
    let controller = b.spare;
    let max = 2 * MAX_MESSAGE;
    std::fs::write(
        dir.join("server.properties"),
        format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.voters=1@{host}:{controller}\n\
             listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller}\n\
             advertised.listeners=PLAINTEXT://{host}:{port}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             inter.broker.listener.name=PLAINTEXT\n\
             log.dirs={}\n\
             num.partitions=1\n\
             offsets.topic.replication.factor=1\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             share.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\n\
             message.max.bytes={max}\n\
             replica.fetch.max.bytes={max}\n\
             log.retention.check.interval.ms=1000\n\
             log.initial.task.delay.ms=1000\n\
             socket.request.max.bytes={}\n",
            dir.join("data").display(),
            4 * max,
        ),
    )?;
    std::fs::write(
        dir.join("log4j2.properties"),
        "rootLogger.level = warn\n\
         rootLogger.appenderRef.out.ref = out\n\
         appender.out.type = Console\n\
         appender.out.name = out\n\
         appender.out.layout.type = PatternLayout\n\
         appender.out.layout.pattern = [%d] %p %m (%c)%n\n",
    )?;
    // A cluster id is 16 random bytes in URL-safe base64.
    let mut id = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut id)?;
    // Its first character must not be `-`, which the tool's argument parser takes for an option
    // (Kafka's own random ids avoid it too): the top bit clear keeps it a letter.
    id[0] &= 0x7f;
    use base64::Engine;
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id);
    let log = std::fs::File::create(dir.join("format.log"))?;
    let mut child = Command::new("java")
        // The tool runs once: no optimizing compiler to start.
        .arg("-XX:TieredStopAtLevel=1")
        .args(jvm(dir))
        .args(["kafka.tools.StorageTool", "format", "-t", &id, "-c"])
        .arg(dir.join("server.properties"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let end = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(
                "Kafka's storage format took over 60 s",
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !status.success() {
        let said = std::fs::read_to_string(dir.join("format.log")).unwrap_or_default();
        return Err(std::io::Error::other(format!(
            "Kafka's storage format failed ({status}): {}",
            super::said(&said)
        )));
    }
    Ok(())
}

fn check_broker(v: &str) -> Result<(), String> {
    broker::check_url(v, "kafka")
}

/// The producer's queue by default, in MiB: the Java client's (`buffer.memory`), not
/// librdkafka's 1 GiB. With 1 GiB a 64 KiB stream's writer ran 16,000 messages (4 s) ahead of
/// its reader, and spent its CPU faulting in that memory: 213-216 MiB/s at a one-way p50 of
/// 3.6 s, against 376-384 MiB/s at 88 ms with 32 MiB (2026-11-25).
const QUEUE_DEFAULT: &str = "32";

fn check_queue(v: &str) -> Result<(), String> {
    match v.parse::<u32>() {
        Ok(n) if (1..=2_097_151).contains(&n) => Ok(()),
        _ => Err("give whole MiB from 1 to 2097151".into()),
    }
}

/// How much of each topic's log the broker keeps by default, in MiB. Without a bound a 64 KiB
/// stream fills the disk at some 300 MiB/s (a 10-minute run: 180 GB), and on a VM whose host
/// takes back freed memory a log that only grows writes into pages the host took back: the
/// broker spent 127-194 us of system time a 64 KiB record on such a log, against 64-80 us on
/// one held to 512 MiB (2026-11-26).
const RETENTION_DEFAULT: &str = "1024";

fn check_retention(v: &str) -> Result<(), String> {
    match v.parse::<u64>() {
        Ok(n) if (4..=1 << 30).contains(&n) => Ok(()),
        _ => Err("give whole MiB from 4 to 1073741824".into()),
    }
}

fn check_linger(v: &str) -> Result<(), String> {
    match v.parse::<u32>() {
        Ok(n) if n <= 900_000 => Ok(()),
        _ => Err("give whole milliseconds from 0 to 900000".into()),
    }
}

/// The options as an end uses them.
#[derive(Clone)]
pub(super) struct Settings {
    /// The producer's acks: `all`, `1` or `0`.
    acks: String,
    linger_ms: u32,
    /// How much the producer queues ahead of the broker, in MiB.
    queue_mib: u32,
    /// Each send waits for its delivery report.
    sync: bool,
    idempotence: bool,
    /// How much of each of the case's topics the broker keeps, in MiB.
    retention_mib: u64,
    /// The broker is one msgperf started (configured for large messages).
    started: bool,
}

impl Settings {
    fn of(o: &Options) -> Settings {
        let flag = |k: &str| o.get(k).map(String::as_str) == Some("true");
        let acks = o.get("acks").cloned().unwrap_or_else(|| "all".into());
        // Without it a write that is retried (a partition whose leader is not ready yet) may
        // land after those sent behind it: seen once in 10 loaded test runs.
        let idempotence = match o.get("idempotence").map(String::as_str) {
            Some("true") => true,
            Some("false") => false,
            _ => acks == "all",
        };
        Settings {
            acks,
            linger_ms: o.get("linger").and_then(|v| v.parse().ok()).unwrap_or(0),
            queue_mib: o
                .get("queue")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| QUEUE_DEFAULT.parse().expect("a whole number of MiB")),
            sync: flag("sync"),
            idempotence,
            retention_mib: o
                .get("retention")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| RETENTION_DEFAULT.parse().expect("a whole number of MiB")),
            started: o.get("broker").is_none_or(|b| b == "start"),
        }
    }

    fn max_message(&self) -> usize {
        if self.started {
            MAX_MESSAGE
        } else {
            MAX_MESSAGE_ELSEWHERE
        }
    }

    /// What every client of the case is given: the broker, and no Nagle delay on its sockets.
    fn client(&self, url: &str) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", url.trim_start_matches("kafka://"))
            .set("socket.nagle.disable", "true")
            // librdkafka's own log (a broker that goes away) is not msgperf's output.
            .set("log_level", "0");
        c
    }

    /// A producer whose own thread serves its delivery reports as they come (a sending thread, as
    /// the Java client has).
    fn producer(&self, url: &str) -> Result<ThreadedProducer<Reports>, TransportError> {
        let mut c = self.client(url);
        c.set("acks", &self.acks)
            .set("linger.ms", self.linger_ms.to_string())
            .set(
                "queue.buffering.max.kbytes",
                (u64::from(self.queue_mib) * 1024).to_string(),
            )
            .set("enable.idempotence", self.idempotence.to_string())
            .set("message.max.bytes", (2 * self.max_message()).to_string());
        c.create_with_context(Reports::default()).map_err(failed)
    }

    /// A writer to `topic`.
    fn writer(&self, url: &str, topic: String) -> Result<Writer, TransportError> {
        Ok(Writer {
            producer: self.producer(url)?,
            topic,
            sync: self.sync,
            queue_mib: self.queue_mib,
            sent: 0,
            stalled: false,
        })
    }

    /// A consumer of `topic`'s one partition from its first message, in no group (a group's
    /// join takes seconds and its rebalances pause reading).
    fn consumer(
        &self,
        url: &str,
        topic: &str,
        timeout: Duration,
    ) -> Result<BaseConsumer, TransportError> {
        let max = (2 * self.max_message()).to_string();
        let c: BaseConsumer = self
            .client(url)
            // librdkafka wants a group id even for assigned partitions; none is joined, but
            // its coordinator is looked up before the first fetch.
            .set("group.id", format!("{topic}.reader"))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("fetch.message.max.bytes", &max)
            .set("fetch.max.bytes", &max)
            // A reader whose prefetch queue was full fetches again as soon as it has room
            // (librdkafka waits a second by default).
            .set("fetch.queue.backoff.ms", "1")
            // A reader whose next message retention deleted fails, instead of jumping ahead.
            .set("auto.offset.reset", "error")
            .create()
            .map_err(failed)?;
        // Connected before it is assigned: its group coordinator is then found at the first
        // look (else 500 ms later), and its first fetch follows in milliseconds.
        c.fetch_metadata(Some(topic), timeout)
            .map_err(|e| refused(url, &e.to_string()))?;
        let mut tp = TopicPartitionList::new();
        tp.add_partition_offset(topic, 0, Offset::Beginning)
            .map_err(failed)?;
        c.assign(&tp).map_err(failed)?;
        Ok(c)
    }
}

/// A producer's delivery reports: how many arrived, and the first failure.
#[derive(Default)]
pub(super) struct Reports {
    state: Mutex<Delivered>,
    arrived: Condvar,
}

#[derive(Default)]
struct Delivered {
    count: u64,
    failed: Option<String>,
    /// A writer waits for a report (its queue full, or a sync send): only then does a report
    /// wake it, as a wake is a system call whether or not anyone waits (at 64 B, one a report
    /// took a tenth of the writer's CPU).
    waiting: bool,
}

impl Reports {
    fn state(&self) -> MutexGuard<'_, Delivered> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a delivery report (`failed`: the broker's refusal), and wakes a waiting writer.
    fn report(&self, failed: Option<String>) {
        let mut d = self.state();
        match failed {
            None => d.count += 1,
            Some(e) => {
                d.failed.get_or_insert(e);
            }
        }
        let wake = d.waiting;
        drop(d);
        if wake {
            self.arrived.notify_all();
        }
    }

    /// Waits for reports while `wait` holds, `left` at most.
    fn wait_while<'a>(
        &self,
        mut d: MutexGuard<'a, Delivered>,
        left: Duration,
        wait: impl FnMut(&mut Delivered) -> bool,
    ) -> MutexGuard<'a, Delivered> {
        d.waiting = true;
        let (mut d, _) = self
            .arrived
            .wait_timeout_while(d, left, wait)
            .unwrap_or_else(|p| p.into_inner());
        d.waiting = false;
        d
    }
}

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        self.report(r.as_ref().err().map(|(e, _)| e.to_string()));
    }
}

impl Transport for Kafka {
    fn name(&self) -> &'static str {
        "kafka"
    }
    fn about(&self) -> &'static str {
        "Apache Kafka 4 (rdkafka) through a KRaft broker that msgperf starts per case, or --opt broker=URL (feature `kafka`)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        #[rustfmt::skip]
        const O: &[OptionSpec] = &[
            OptionSpec { key: "broker", default: "start", about: "start (msgperf runs a Kafka broker in KRaft mode for the case from the jars src/transport/kafka/fetch-broker fetched, on a free loopback port) or kafka://HOST:PORT of a running broker (msgperf uses only topics of its own there)", values: &[], check: Some(check_broker) },
            OptionSpec { key: "acks", default: "all", about: "what the broker confirms a write after: all (every in-sync replica has it; Kafka's default), 1 (the leader has it), 0 (nothing: the producer does not wait, and a write the broker does not take is lost)", values: &["all", "1", "0"], check: None },
            OptionSpec { key: "linger", default: "0", about: "linger.ms: how long the producer waits to fill a batch before it sends; 0 sends each message at once (librdkafka's default is 5, the Java client's 5 since Kafka 4)", values: &[], check: Some(check_linger) },
            OptionSpec { key: "queue", default: QUEUE_DEFAULT, about: "how many MiB the producer queues ahead of the broker (queue.buffering.max.kbytes, and 100,000 messages at most): 32 as the Java client's buffer.memory (librdkafka's own default is 1024); a full queue makes a send wait", values: &[], check: Some(check_queue) },
            OptionSpec { key: "sync", default: "false", about: "each send waits for the broker's acknowledgement (its delivery report); false: a send returns once the client has queued it", values: &["true", "false"], check: None },
            OptionSpec { key: "retention", default: RETENTION_DEFAULT, about: "how many MiB of each of the case's topics the broker keeps (retention.bytes, in segments of a quarter of it): older messages are deleted, which bounds the disk a long run fills; a reader that falls further behind its writer fails, naming this option", values: &[], check: Some(check_retention) },
            OptionSpec { key: "idempotence", default: "auto", about: "the idempotent producer: no duplicate and no reordering even when a write is retried (needs acks=all); auto: on with acks=all, as the Java client has it since Kafka 3, off otherwise", values: &["auto", "true", "false"], check: None },
        ];
        O
    }
    fn capabilities(&self, o: &Options) -> Capabilities {
        let s = Settings::of(o);
        Capabilities {
            // A fresh broker's JIT: a round trip's mean fell from 9.6 ms in its first second to
            // 1.8 ms in its sixth, and slowly after that (measured on 2 CPUs).
            warmup: Duration::from_secs(5),
            // Its broker boots in seconds (a floor starts its own).
            startup: SERVER.boots_within,
            ..broker::capabilities(s.acks != "0", s.max_message())
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        if let History::KeepLast(_) = d.history {
            return Err(
                "Kafka keeps its log by retention (time or size), not the last N messages: it has no keep-last; drop --history"
                    .into(),
            );
        }
        let given = options.get("acks").map(String::as_str);
        let mut effective = options.clone();
        let mut mapped = DeliveryMap::default();
        match d.reliability {
            Some(Reliability::BestEffort) => match given {
                None | Some("0") => {
                    effective.insert("acks".into(), "0".into());
                    mapped.options.insert("acks".into(), "0".into());
                }
                Some(a) => {
                    return Err(format!(
                        "--delivery best-effort is acks=0 on Kafka, but --opt acks={a} was given: drop one of them"
                    ))
                }
            },
            Some(Reliability::Reliable) if given == Some("0") => {
                return Err(
                    "--delivery reliable needs the broker's acknowledgement, but --opt acks=0 asks for none: drop one of them"
                        .into(),
                )
            }
            _ => {}
        }
        let s = Settings::of(&effective);
        if s.idempotence && s.acks != "all" {
            return Err(format!(
                "the idempotent producer needs acks=all, but acks={} was given: drop one of them",
                s.acks
            ));
        }
        mapped.strict = s.acks != "0";
        if !options.contains_key("idempotence") {
            // What `auto` came to is recorded with the case's options.
            mapped
                .options
                .insert("idempotence".into(), s.idempotence.to_string());
        }
        mapped.settings = vec![
            if s.acks == "0" {
                Setting::new("reliability", "best-effort", "acks=0: the producer does not wait for the broker, so a write it does not take is lost; readers count the losses")
            } else {
                Setting::new("reliability", "reliable", "every write is acknowledged by the broker and kept in its log; a reader reads the whole log, so a loss fails the case")
            },
            Setting::new(
                "acks",
                &s.acks,
                match s.acks.as_str() {
                    "all" => "the broker confirms a write once every in-sync replica has it (one here)",
                    "1" => "the broker confirms a write once the leader has it",
                    _ => "the broker confirms nothing",
                },
            ),
            Setting::new(
                "history",
                "keep-all",
                "the log keeps every message until its retention (time, size) deletes it; one partition, in order",
            ),
            Setting::new(
                "retention",
                &format!("{} MiB", s.retention_mib),
                "retention.bytes: how much of each topic the broker keeps; a reader further behind its writer fails",
            ),
            Setting::new(
                "linger",
                &format!("{} ms", s.linger_ms),
                "linger.ms: how long the producer waits to fill a batch",
            ),
            Setting::new(
                "queue",
                &format!("{} MiB", s.queue_mib),
                "queue.buffering.max.kbytes: how much the producer queues ahead of the broker",
            ),
            Setting::new(
                "send",
                if s.sync { "sync" } else { "async" },
                if s.sync {
                    "each send waits for its delivery report"
                } else {
                    "a send returns once the client has queued it; delivery reports are served on later sends"
                },
            ),
            Setting::on_off(
                "idempotence",
                s.idempotence,
                "the broker drops a retried write it already has, and keeps the order",
                "a retried write may be duplicated or reordered (counted)",
            ),
            Setting::new(
                "durability",
                "log",
                "written to the broker's log (page cache, flushed by the OS); a reader starts at the first message of a topic made for the case",
            ),
        ];
        Ok(mapped)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        let setup = broker::setup(
            self.name(),
            &SERVER,
            "kafka",
            plan,
            spec,
            Some(delete_topics),
        )?;
        let (url, name) = broker::meeting(&setup.rendezvous)?;
        // Every topic exists before any end opens: a reader is assigned to it, a writer never
        // waits for an automatic creation.
        let topics = broker::plan_names(name, '.', plan);
        let s = Settings::of(&spec.options);
        // A broker it started counts as up once a message has gone through it.
        let boot = if s.started {
            spec.timeout.max(SERVER.boots_within)
        } else {
            spec.timeout
        };
        if s.started {
            up(&s, url, name, boot)?;
        }
        create_topics(&s, url, &topics, boot)?;
        Ok(setup)
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let (url, name) = broker::meeting(at)?;
        let s = Settings::of(&spec.options);
        let (out, inbound) = broker::names(name, '.', side);
        let writer = match out {
            Some(topic) => Some(s.writer(url, topic)?),
            None => None,
        };
        let reader = match inbound {
            Some(topic) => Some(s.consumer(url, &topic, spec.timeout)?),
            None => None,
        };
        Ok(Box::new(broker::Greeting(
            KafkaEnd {
                writer,
                reader,
                timeout: spec.timeout,
            },
            side,
        )))
    }

    fn needs(&self) -> Vec<Need> {
        // Maven fetches the jars; Java runs them.
        vec![
            SERVER.needs(),
            Need {
                to_run: false,
                ..broker::program_need("mvn", "maven")
            },
            Need {
                what: format!("Kafka {VERSION}'s jars in {}", libs().display()),
                present: jars_present().is_ok(),
                to_run: true,
                get: Get::Script(FETCH),
            },
        ]
    }
    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::KafkaFloor)
    }
}

fn failed(e: impl std::fmt::Display) -> TransportError {
    TransportError::middleware("librdkafka", "a Kafka call", e.to_string())
}

fn admin(s: &Settings, url: &str) -> Result<AdminClient<DefaultClientContext>, TransportError> {
    s.client(url).create().map_err(failed)
}

/// Makes `topics` (one partition, one replica) at the broker, within `timeout`.
pub(super) fn create_topics(
    s: &Settings,
    url: &str,
    topics: &[String],
    timeout: Duration,
) -> Result<(), TransportError> {
    if topics.is_empty() {
        return Ok(());
    }
    let admin = admin(s, url)?;
    let retention = (s.retention_mib << 20).to_string();
    // A segment is deleted whole, once the log without it still holds `retention`.
    let segment = (s.retention_mib << 18).max(1 << 20).to_string();
    let new: Vec<_> = topics
        .iter()
        .map(|t| {
            NewTopic::new(t, 1, TopicReplication::Fixed(1))
                .set("retention.bytes", &retention)
                .set("segment.bytes", &segment)
                .set("file.delete.delay.ms", "0")
        })
        .collect();
    let end = Instant::now() + timeout;
    let mut left: Vec<&NewTopic> = new.iter().collect();
    loop {
        let o = AdminOptions::new()
            .operation_timeout(Some(end.saturating_duration_since(Instant::now())));
        let results = wait(
            end.saturating_duration_since(Instant::now()),
            admin.create_topics(left.iter().copied(), &o),
        )
        .map_err(|_| refused(url, "no answer"))?
        .map_err(|e| refused(url, &e.to_string()))?;
        let mut again = Vec::new();
        let mut why = String::new();
        for (r, t) in results.into_iter().zip(left) {
            use RDKafkaErrorCode::*;
            match r {
                Ok(_) | Err((_, TopicAlreadyExists)) => {}
                // A broker that has just started says so until its controller is elected and
                // it has registered itself.
                Err((
                    topic,
                    e @ (NotController
                    | LeaderNotAvailable
                    | BrokerNotAvailable
                    | RequestTimedOut
                    | NetworkException
                    | InvalidReplicationFactor),
                )) => {
                    why = format!("creating topic {topic}: {e}");
                    again.push(t)
                }
                Err((topic, e)) => return Err(failed(format!("creating topic {topic}: {e}"))),
            }
        }
        if again.is_empty() {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(failed(format!("{why} (for {timeout:?})")));
        }
        std::thread::sleep(Duration::from_millis(50));
        left = again;
    }
}

/// Waits, at most `timeout`, until a message has gone through the broker at `url` (on topic
/// `name.up`): a broker just started may still be electing its controller, and its first
/// produce and fetch load its classes (hundreds of ms), which neither a case's hello and warm-up
/// nor a floor's loop should pay.
pub(super) fn up(
    s: &Settings,
    url: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), TransportError> {
    let probe = format!("{name}.up");
    create_topics(s, url, std::slice::from_ref(&probe), timeout)?;
    let reader = s.consumer(url, &probe, timeout)?;
    let mut writer = s.writer(url, probe)?;
    writer.sync = true;
    writer.send(b"up", timeout)?;
    match read_next(&reader, &mut |m| Ok(m.len()), timeout)? {
        Some(_) => Ok(()),
        None => Err(TransportError::Timeout(timeout)),
    }
}

fn refused(url: &str, why: &str) -> TransportError {
    broker::not_there(url, why, "a Kafka broker")
}

/// Removes the case's topics (named `name.`...) from a broker msgperf did not start.
fn delete_topics(url: &str, name: &str, _: &SetupPlan, t: Duration) {
    let s = Settings::of(&Options::new());
    let Ok(admin) = admin(&s, url) else { return };
    let Ok(meta) = admin.inner().fetch_metadata(None, t) else {
        return;
    };
    let ours: Vec<String> = meta
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|t| t.starts_with(&format!("{name}.")))
        .collect();
    if !ours.is_empty() {
        let names: Vec<&str> = ours.iter().map(String::as_str).collect();
        let _ = wait(t, admin.delete_topics(&names, &AdminOptions::new()));
    }
}

/// A producer bound to its topic.
pub(super) struct Writer {
    producer: ThreadedProducer<Reports>,
    topic: String,
    sync: bool,
    /// The producer's queue, in MiB.
    queue_mib: u32,
    /// Messages handed to the client.
    sent: u64,
    /// Its end waited out a timeout or was stopped: the broker may be gone, so what is still
    /// queued is dropped rather than flushed for seconds at the end.
    stalled: bool,
}

impl Writer {
    /// Hands `msg` to the client (waiting, at most `timeout`, while its queue is full), and
    /// with `sync` waits for its delivery report.
    pub fn send(&mut self, msg: &[u8], timeout: Duration) -> Result<(), TransportError> {
        // Read the clock only once the client makes the send wait: at 64 B a read for every
        // send took 1.5% of the writer's CPU.
        let mut end = None;
        let mut deadline = || *end.get_or_insert_with(|| Instant::now() + timeout);
        let reports = self.producer.context();
        loop {
            // Every topic has one partition: naming it spares librdkafka's partitioner (a
            // random pick and an availability check for every message).
            let record = BaseRecord::<(), [u8]>::to(&self.topic)
                .partition(0)
                .payload(msg);
            match self.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    if self.producer.in_flight_count() == 0 {
                        // An empty queue that refuses it: waiting would not make room.
                        return Err(failed(format!(
                            "a {} B message does not fit the producer's queue of {} MiB: give --opt queue=MiB above it",
                            msg.len(),
                            self.queue_mib
                        )));
                    }
                    let left = deadline().saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(TransportError::Timeout(timeout));
                    }
                    // A delivery makes room.
                    let d = reports.state();
                    let count = d.count;
                    let wait = left.min(Duration::from_millis(1));
                    drop(reports.wait_while(d, wait, |d| d.count == count));
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), _)) => {
                    return Err(TransportError::TooLarge {
                        len: msg.len(),
                        max: 2 * MAX_MESSAGE,
                    })
                }
                Err((e, _)) => return Err(failed(e)),
            }
        }
        self.sent += 1;
        let mut d = reports.state();
        if self.sync {
            let sent = self.sent;
            let left = deadline().saturating_duration_since(Instant::now());
            d = reports.wait_while(d, left, |d| d.count < sent && d.failed.is_none());
            if d.count < sent && d.failed.is_none() {
                return Err(TransportError::Timeout(timeout));
            }
        }
        match &d.failed {
            None => Ok(()),
            Some(e) => Err(failed(format!("the broker did not take a write: {e}"))),
        }
    }
}

impl Writer {
    /// Drops what the client still holds instead of sending it.
    pub fn abandon(self) {
        self.producer
            .purge(PurgeConfig::default().queue().inflight());
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.stalled {
            // librdkafka would keep retrying a broker that died until the flush's bound.
            self.producer
                .purge(PurgeConfig::default().queue().inflight());
            return;
        }
        // What was queued leaves before the producer goes (dropped, it purges its queue).
        let _ = self.producer.flush(Duration::from_secs(5));
    }
}

/// The longest a reader waits in one poll: between two it sees whether the runner told its
/// role to stop (its broker died, Ctrl-C), which librdkafka's own wait cannot hear.
const POLL_SLICE: Duration = Duration::from_millis(100);

/// The next message of `reader`, handed to `take` where librdkafka keeps it, waiting at most
/// `timeout` (zero: only what is there).
pub(super) fn read_next(
    reader: &BaseConsumer,
    take: &mut Take,
    timeout: Duration,
) -> Result<Option<usize>, TransportError> {
    let end = Instant::now() + timeout;
    loop {
        match reader.poll(end.saturating_duration_since(Instant::now()).min(POLL_SLICE)) {
            Some(Ok(m)) => return take(m.payload().unwrap_or(&[])).map(Some),
            Some(Err(e)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::AutoOffsetReset) => {
                return Err(failed(
                    "the broker deleted messages this reader had not read: it fell further behind its writer than the topic's retention; give a larger --opt retention=MiB",
                ))
            }
            // A broker connection that failed and is made again: librdkafka retries; msgperf
            // ends the case if the broker is gone.
            Some(Err(_)) | None if Instant::now() < end => {
                if crate::deadline::role_told_to_stop() {
                    return Err(TransportError::Stopped);
                }
            }
            Some(Err(_)) | None => return Ok(None),
        }
    }
}

struct KafkaEnd {
    writer: Option<Writer>,
    reader: Option<BaseConsumer>,
    timeout: Duration,
}

impl Endpoint for KafkaEnd {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let timeout = self.timeout;
        match self.writer.as_mut() {
            Some(w) => w.send(msg, timeout),
            None => Err(TransportError::Unsupported(
                "kafka: a subscriber only reads".into(),
            )),
        }
    }

    // Its reader polls in slices and watches the stop flag itself; a wait it gives up on
    // purges the producer, one that only sliced the wait must not.
    reads_in_place!(unsliced);
}

impl KafkaEnd {
    /// [`read_next`] of this end's reader.
    fn next(
        &mut self,
        take: &mut Take,
        timeout: Duration,
    ) -> Result<Option<usize>, TransportError> {
        let Some(r) = self.reader.as_ref() else {
            return Err(TransportError::Unsupported(
                "kafka: a topic's publisher only writes".into(),
            ));
        };
        let got = read_next(r, take, timeout);
        let waited_out = matches!(got, Ok(None)) && !timeout.is_zero();
        if waited_out || matches!(got, Err(TransportError::Stopped)) {
            if let Some(w) = self.writer.as_mut() {
                w.stalled = true;
            }
        }
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_report_wakes_a_waiting_writer_and_a_failure_is_kept() {
        let reports = Arc::new(Reports::default());
        let waiter = {
            let reports = reports.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let d =
                    reports.wait_while(reports.state(), Duration::from_secs(30), |d| d.count < 2);
                (d.count, d.waiting, start.elapsed())
            })
        };
        // Reports that come before the writer waits are counted all the same.
        reports.report(None);
        let bound = Instant::now() + Duration::from_secs(20);
        while !reports.state().waiting {
            assert!(Instant::now() < bound, "the writer never waited");
            std::thread::yield_now();
        }
        reports.report(None);
        let (count, waiting, took) = waiter.join().unwrap();
        assert_eq!((count, waiting), (2, false));
        assert!(
            took < Duration::from_secs(20),
            "woken by the report: {took:?}"
        );
        reports.report(Some("first".into()));
        reports.report(Some("second".into()));
        reports.report(None);
        let d = reports.state();
        assert_eq!((d.count, d.failed.as_deref()), (3, Some("first")));
    }

    #[test]
    fn the_producer_is_idempotent_by_default_with_acks_all_only() {
        let reliable = Delivery::default();
        let with = |pairs: &[(&str, &str)]| -> Options {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let m = Kafka.map_delivery(&reliable, &Options::new()).unwrap();
        assert_eq!(
            m.options.get("idempotence").map(String::as_str),
            Some("true")
        );
        assert!(Settings::of(&with(&[])).idempotence);
        assert!(!Settings::of(&with(&[("acks", "1")])).idempotence);
        assert!(!Settings::of(&with(&[("idempotence", "false")])).idempotence);
        let m = Kafka
            .map_delivery(&reliable, &with(&[("acks", "1")]))
            .unwrap();
        assert_eq!(
            m.options.get("idempotence").map(String::as_str),
            Some("false")
        );
        // Given, it is kept as given; true with acks=1 is refused.
        let m = Kafka
            .map_delivery(&reliable, &with(&[("idempotence", "false")]))
            .unwrap();
        assert_eq!(m.options.get("idempotence"), None);
        let e = Kafka
            .map_delivery(&reliable, &with(&[("acks", "1"), ("idempotence", "true")]))
            .unwrap_err();
        assert!(e.contains("needs acks=all"), "{e}");
    }
}
