//! The middleware adapters against their real libraries (no mocks), each behind its Cargo
//! feature: exact counts for ping-pong and streams in processes, publish/subscribe 1 to 5 and 5
//! to 1 at 1 kHz losing nothing when reliable, losses counted when best-effort, a killed peer
//! ending the case within the timeout, and refusals that name what the middleware lacks. The
//! contract itself is `tests/conformance.rs`, generated for every registry entry.

// Without a middleware feature the helpers have no caller.
#![cfg_attr(
    not(any(feature = "zmq", feature = "dds", feature = "zenoh", feature = "grpc")),
    allow(dead_code)
)]

mod support;

use msgperf::result::RunResult;
use std::time::{Duration, Instant};
use support::*;

/// Waits until role process `pid` has been woken 2000 times: the case is measuring, however
/// long its broker took to start. Its main thread blocks about once per message (1.0-1.6 times
/// unloaded, AMQP the most, more under load), and the callers want more than 100 messages.
fn exchanging(pid: u32) {
    let end = Instant::now() + Duration::from_secs(60);
    let woken = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    while woken() < 2000 {
        assert!(
            Instant::now() < end,
            "role {pid} was woken fewer than 2000 times"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs msgperf with `--json`: what it printed and what it wrote, whether or not it failed.
fn output_and_result(args: &[&str], json: &std::path::Path) -> (std::process::Output, RunResult) {
    let mut all = args.to_vec();
    all.extend(["--json", json.to_str().unwrap()]);
    let out = run(&all, Duration::from_secs(180));
    let said = format!("{args:?}: {}{}", text(&out.stdout), text(&out.stderr));
    let written = std::fs::read(json).unwrap_or_else(|e| panic!("no JSON ({e}): {said}"));
    (out, serde_json::from_slice(&written).unwrap())
}

fn result_of(args: &[&str], json: &std::path::Path) -> RunResult {
    let (out, r) = output_and_result(args, json);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    r
}

/// The value that a case's delivery mapping gives `setting`, if it has it.
#[cfg(any(feature = "dds", feature = "amqp"))]
fn mapped<'a>(c: &'a msgperf::result::CaseResult, setting: &str) -> Option<&'a str> {
    c.config
        .delivery_mapping
        .iter()
        .find(|s| s.setting == setting)
        .map(|s| s.value.as_str())
}

/// Ping-pong and a stream in role processes: every message counted exactly.
fn exact_counts(transport: &str, extra: &[&str]) {
    let dir = temp_dir();
    for workload in ["pingpong", "stream"] {
        let mut args = vec![
            "run",
            workload,
            "-t",
            transport,
            "--size",
            "64,4k",
            "--count",
            "2000",
            "--warmup",
            "20ms",
            "--checksum",
            "--no-floor",
        ];
        args.extend_from_slice(extra);
        let r = result_of(&args, &dir.path().join(format!("{workload}.json")));
        for c in &r.cases {
            let what = format!("{transport} {workload} {} B", c.config.size_bytes);
            assert_eq!(c.error, None, "{what}");
            assert_eq!(c.roles[0].counters.messages_sent, 2000, "{what}");
            assert_eq!(c.roles[1].counters.messages_received, 2000, "{what}");
            let k = &c.roles[1].counters;
            assert_eq!(
                (k.lost, k.duplicated, k.reordered, k.corrupted),
                (0, 0, 0, 0),
                "{what}"
            );
            assert_ne!(c.roles[0].pid, c.roles[1].pid, "{what}: two processes");
            // Checked (and checksummed) where the library keeps it, if it hands one over.
            let caps = msgperf::transport::find(transport)
                .unwrap()
                .capabilities(&c.config.effective_options);
            assert_eq!(
                c.config.read_in_place,
                caps.reads_in_place || caps.zero_copy,
                "{what}: how its reader read"
            );
        }
    }
}

/// pubsub 1 to 5 and 5 to 1 at 1 kHz, 200 B, reliable: every subscriber gets every message.
fn pubsub_loses_nothing(transport: &str, extra: &[&str]) {
    let dir = temp_dir();
    for (pubs, subs) in [("1", "5"), ("5", "1")] {
        let mut args = vec![
            "run",
            "pubsub",
            "-t",
            transport,
            "--pubs",
            pubs,
            "--subs",
            subs,
            "--size",
            "200",
            "--rate",
            "1khz",
            "--count",
            "300",
            "--warmup",
            "50ms",
            "--delivery",
            "reliable",
            "--checksum",
            "--no-floor",
        ];
        args.extend_from_slice(extra);
        let r = result_of(&args, &dir.path().join(format!("{pubs}x{subs}.json")));
        let c = &r.cases[0];
        let what = format!("{transport} {pubs}x{subs}");
        assert_eq!(c.error, None, "{what}");
        let (p, s): (u64, u64) = (pubs.parse().unwrap(), subs.parse().unwrap());
        let subscribers: Vec<_> = c
            .roles
            .iter()
            .filter(|r| r.role.kind == msgperf::result::RoleKind::Subscriber)
            .collect();
        assert_eq!(subscribers.len() as u64, s, "{what}");
        for r in subscribers {
            assert_eq!(r.counters.messages_received, p * 300, "{what}: {}", r.role);
            assert_eq!(r.counters.lost, 0, "{what}: {}", r.role);
        }
    }
}

/// A pubsub of one publisher and 2 subscribers of messages of `size`, measured from the
/// start, without a floor: what the helpers below add to.
#[cfg(any(
    feature = "zmq",
    feature = "dds",
    feature = "zenoh",
    feature = "_broker"
))]
fn two_subscribers<'a>(transport: &'a str, size: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "pubsub",
        "-t",
        transport,
        "--subs",
        "2",
        "--size",
        size,
        "--warmup",
        "0s",
        "--no-floor",
    ]
}

/// Best effort with a subscriber that sleeps 2 ms a message, behind the bound that `extra`
/// sets: it misses messages, and counts each one it missed (lost, or overwritten in its
/// reader's history), so that what it got and what it missed add up to what was sent.
#[cfg(any(
    feature = "zmq",
    feature = "dds",
    feature = "zenoh",
    feature = "nats",
    feature = "redis",
    feature = "amqp"
))]
fn slow_subscriber_counts_what_it_missed(
    transport: &str,
    size: &str,
    duration: &str,
    extra: &[&str],
) {
    let dir = temp_dir();
    let mut args = two_subscribers(transport, size);
    args.extend([
        "--duration",
        duration,
        "--delivery",
        "best-effort",
        "--slow-subscriber",
        "2ms",
    ]);
    args.extend_from_slice(extra);
    let r = result_of(&args, &dir.path().join("best-effort.json"));
    let c = &r.cases[0];
    assert_eq!(c.error, None, "{transport}");
    assert!(!c.config.strict, "{transport}");
    let sent = c.roles[0].counters.messages_sent;
    let slow = &c.roles[1].counters;
    assert!(
        slow.overwritten + slow.lost > 0,
        "{transport}: the slow subscriber missed nothing: {slow:?}"
    );
    assert_eq!(
        slow.messages_received + slow.overwritten + slow.lost,
        sent,
        "{transport}: {slow:?}"
    );
}

/// A responder killed mid-run ends the case within the timeout, naming it, and the
/// initiator's round trips until then are kept.
fn killed_peer_ends_the_case(transport: &str, extra: &[&str]) {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let mut args = vec![
        "run",
        "pingpong",
        "-t",
        transport,
        "--duration",
        "60s",
        "--warmup",
        "0s",
        "--timeout",
        "3s",
        "--no-floor",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut child = spawn(&args);
    let peer = wait_for_role(&mut child, "responder");
    exchanging(peer);
    let start = Instant::now();
    signal(peer, libc::SIGKILL);
    let out = wait_output(child, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{transport}: {}",
        text(&out.stderr)
    );
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{transport}: {:?}",
        start.elapsed()
    );
    assert!(
        text(&out.stderr).contains("responder"),
        "{}",
        text(&out.stderr)
    );
    let r: RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let sent = r.cases[0].roles.first().map(|i| i.counters.messages_sent);
    assert!(
        sent.is_some_and(|n| n > 100),
        "{transport}: {sent:?} sent: {}",
        text(&out.stderr)
    );
}

/// A command line the middleware cannot carry out: exit 2, naming what it lacks.
fn refused(args: &[&str], says: &str) {
    let out = run(args, Duration::from_secs(30));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
}

#[cfg(feature = "zmq")]
mod zmq {
    use super::*;

    #[test]
    fn zmq_counts_every_message_in_each_pattern() {
        exact_counts("zmq", &[]);
        exact_counts("zmq", &["--opt", "endpoint=ipc"]);
        // One way for a stream, request and reply for round trips.
        let dir = temp_dir();
        for (workload, pattern) in [("stream", "push-pull"), ("pingpong", "req-rep")] {
            let r = result_of(
                &[
                    "run",
                    workload,
                    "-t",
                    "zmq",
                    "--opt",
                    &format!("pattern={pattern}"),
                    "--count",
                    "2000",
                    "--warmup",
                    "20ms",
                    "--no-floor",
                ],
                &dir.path().join(format!("{pattern}.json")),
            );
            assert_eq!(r.cases[0].error, None, "{pattern}");
            assert_eq!(
                r.cases[0].roles[1].counters.messages_received, 2000,
                "{pattern}"
            );
        }
    }

    #[test]
    fn zmq_pubsub_fans_out_without_loss_and_counts_best_effort_drops() {
        pubsub_loses_nothing("zmq", &[]);
        // A slow subscriber behind a small high-water mark: the publisher drops, and every
        // drop is counted by the subscriber that missed it.
        slow_subscriber_counts_what_it_missed("zmq", "1000", "500ms", &["--opt", "hwm=10"]);
    }

    #[test]
    fn zmq_a_killed_peer_ends_the_case_within_the_timeout() {
        killed_peer_ends_the_case("zmq", &[]);
    }

    #[test]
    fn zmq_refuses_what_a_pattern_cannot_carry() {
        refused(
            &["run", "pingpong", "-t", "zmq", "--opt", "pattern=push-pull"],
            "one way only",
        );
        refused(
            &["run", "stream", "-t", "zmq", "--opt", "pattern=req-rep"],
            "strictly in turn",
        );
        refused(
            &[
                "run",
                "pubsub",
                "-t",
                "zmq",
                "--delivery",
                "reliable",
                "--opt",
                "full=drop",
            ],
            "drop one of them",
        );
        refused(
            &["run", "pingpong", "-t", "zmq", "--opt", "hwm=many"],
            "--opt hwm=many",
        );
    }
}

#[cfg(feature = "dds")]
mod dds {
    use super::*;

    #[test]
    fn dds_counts_every_message_with_a_waitset_and_with_a_listener() {
        exact_counts("dds", &[]);
        exact_counts("dds", &["--opt", "read=listener"]);
    }

    #[test]
    fn dds_batching_writers_lose_nothing_and_say_so() {
        // Ping-pong flushes each write (else it would wait out the timeout); a stream's last
        // batch goes out with the flush after END.
        exact_counts("dds", &["--opt", "batching=true"]);
        pubsub_loses_nothing("dds", &["--opt", "batching=true"]);
        let dir = temp_dir();
        let r = result_of(
            &[
                "run",
                "stream",
                "-t",
                "dds",
                "--count",
                "100",
                "--no-floor",
                "--opt",
                "batching=true",
            ],
            &dir.path().join("mapping.json"),
        );
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert_eq!(c.roles[1].counters.messages_received, 100);
        assert_eq!(
            mapped(c, "writer batching"),
            Some("on"),
            "{:?}",
            c.config.delivery_mapping
        );
    }

    #[test]
    fn dds_pubsub_fans_out_without_loss_and_counts_what_best_effort_overwrites() {
        pubsub_loses_nothing("dds", &[]);
        // A slow subscriber whose reader keeps the last 4 samples: the older unread ones are
        // overwritten, and each is counted.
        slow_subscriber_counts_what_it_missed(
            "dds",
            "1000",
            "500ms",
            &["--opt", "history=keep-last-4"],
        );
    }

    #[test]
    fn dds_a_killed_peer_ends_the_case_within_the_timeout() {
        killed_peer_ends_the_case("dds", &[]);
    }

    #[test]
    fn dds_refuses_what_its_qos_cannot_promise() {
        refused(
            &[
                "run",
                "stream",
                "-t",
                "dds",
                "--delivery",
                "reliable",
                "--history",
                "latest",
            ],
            "overwrites unread samples",
        );
        refused(
            &[
                "run",
                "stream",
                "-t",
                "dds",
                "--delivery",
                "reliable",
                "--opt",
                "reliability=best-effort",
            ],
            "drop one of them",
        );
        refused(
            &["run", "stream", "-t", "dds", "--opt", "history=keep-last-0"],
            "keep-last-N",
        );
    }
}

#[cfg(feature = "zenoh")]
mod zenoh {
    use super::*;

    fn zenoh_files() -> Vec<String> {
        std::fs::read_dir("/dev/shm")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.ends_with(".zenoh"))
            .collect()
    }

    #[test]
    fn zenoh_counts_every_message_over_tcp_unix_sockets_and_shared_memory() {
        exact_counts("zenoh", &[]);
        exact_counts("zenoh", &["--opt", "endpoint=unix"]);
        exact_counts("zenoh", &["--opt", "shm=true"]);
    }

    #[test]
    fn zenoh_pubsub_fans_out_without_loss_and_counts_best_effort_drops() {
        pubsub_loses_nothing("zenoh", &[]);
        // A slow subscriber with a small queue: its link backs up, the publisher's put finds
        // the transmit queue full and drops, and the subscriber counts every drop.
        slow_subscriber_counts_what_it_missed("zenoh", "16k", "1s", &["--opt", "queue=4"]);
    }

    #[test]
    fn zenoh_a_killed_peer_ends_the_case_and_leaves_no_segment() {
        killed_peer_ends_the_case("zenoh", &[]);
        killed_peer_ends_the_case("zenoh", &["--opt", "shm=true"]);
        let left = zenoh_files();
        // Another zenoh program may be running: only a leftover of a dead process is a leak.
        for f in &left {
            let path = format!("/dev/shm/{f}");
            let mapped = std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
                std::fs::read_to_string(p.path().join("maps")).is_ok_and(|m| m.contains(&path))
            });
            assert!(mapped, "{path} was left behind");
        }
    }

    #[test]
    fn zenoh_refuses_what_it_cannot_promise() {
        refused(
            &[
                "run",
                "stream",
                "-t",
                "zenoh",
                "--delivery",
                "reliable",
                "--history",
                "latest",
            ],
            "cannot be --delivery reliable",
        );
        refused(
            &[
                "run",
                "stream",
                "-t",
                "zenoh",
                "--delivery",
                "reliable",
                "--opt",
                "congestion=drop",
            ],
            "drop one of them",
        );
        refused(
            &["run", "stream", "-t", "zenoh", "--opt", "queue=0"],
            "--opt queue=0",
        );
    }
}

#[cfg(feature = "grpc")]
mod grpc {
    use super::*;

    #[test]
    fn grpc_counts_every_message_in_unary_calls_and_client_streams() {
        exact_counts("grpc", &[]);
        // A stream with acknowledgements runs on a bidirectional stream.
        let dir = temp_dir();
        let r = result_of(
            &[
                "run",
                "stream",
                "-t",
                "grpc",
                "--confirm",
                "--count",
                "2000",
                "--warmup",
                "20ms",
                "--checksum",
                "--no-floor",
            ],
            &dir.path().join("confirm.json"),
        );
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert_eq!(c.roles[1].counters.messages_received, 2000);
    }

    #[test]
    fn grpc_pubsub_server_streams_lose_nothing() {
        pubsub_loses_nothing("grpc", &[]);
    }

    #[test]
    fn grpc_a_killed_peer_ends_the_case_within_the_timeout() {
        killed_peer_ends_the_case("grpc", &[]);
    }

    #[test]
    fn grpc_says_it_never_drops_and_refuses_a_latest_value() {
        let dir = temp_dir();
        let r = result_of(
            &[
                "run",
                "stream",
                "-t",
                "grpc",
                "--delivery",
                "best-effort",
                "--count",
                "500",
                "--no-floor",
            ],
            &dir.path().join("best-effort.json"),
        );
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert!(
            c.config
                .delivery_mapping
                .iter()
                .any(|s| s.value == "never drops"),
            "{:?}",
            c.config.delivery_mapping
        );
        assert_eq!(c.roles[1].counters.lost, 0);
        refused(
            &["run", "stream", "-t", "grpc", "--history", "latest"],
            "fifo only",
        );
    }
}

/// The broker msgperf `child` started for its case: a child (of any of its threads) running
/// `program`.
#[cfg(feature = "_broker")]
fn broker_of(child: &mut std::process::Child, program: &str) -> u32 {
    wait_for(child, program, |pid| {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten();
        tasks
            .flatten()
            .flat_map(|t| {
                std::fs::read_to_string(t.path().join("children"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok())
                    .collect::<Vec<_>>()
            })
            .find(|c| {
                std::fs::read_to_string(format!("/proc/{c}/cmdline"))
                    .unwrap_or_default()
                    .contains(program)
            })
    })
}

/// A broker killed (SIGKILL) or stopped (SIGSTOP) mid-run ends the case within the timeout,
/// naming the broker; what was measured until then is kept, and no broker process or
/// directory is left.
#[cfg(feature = "_broker")]
fn broker_fault_ends_the_case(transport: &str, program: &str, sig: i32) {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let mut child = spawn(&[
        "run",
        "pingpong",
        "-t",
        transport,
        "--duration",
        "60s",
        "--warmup",
        "0s",
        "--timeout",
        "3s",
        "--no-floor",
        "--json",
        json.to_str().unwrap(),
    ]);
    let pid = child.id();
    let broker = broker_of(&mut child, program);
    exchanging(wait_for_role(&mut child, "responder"));
    let start = Instant::now();
    signal(broker, sig);
    let out = wait_output(child, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{transport}: {err}");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert!(err.contains("broker"), "{err}");
    let r: RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let sent = r.cases[0].roles[0].counters.messages_sent;
    assert!(sent > 100, "{sent} sent: {err}");
    assert!(!alive(broker), "{program} {broker} is still there");
    assert_eq!(leftovers_of(pid), Vec::<String>::new());
}

/// A broker dies with the msgperf that started it, even one killed with SIGKILL.
#[cfg(feature = "_broker")]
fn broker_dies_with_msgperf(transport: &str, program: &str) {
    let mut child = spawn(&[
        "run",
        "pingpong",
        "-t",
        transport,
        "--duration",
        "60s",
        "--no-floor",
    ]);
    let pid = child.id();
    let broker = broker_of(&mut child, program);
    wait_for_role(&mut child, "responder");
    signal(pid, libc::SIGKILL);
    let _ = wait_output(child, Duration::from_secs(30));
    let end = Instant::now() + Duration::from_secs(10);
    while alive(broker) {
        assert!(Instant::now() < end, "{program} {broker} outlived msgperf");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A process killed with SIGKILL removes nothing: its broker's directory is the test's to
    // remove.
    for d in leftovers_of(pid) {
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(d));
    }
}

/// The broker is a role of the case: pinned with the non-driving roles, its CPU measured over
/// the messages the driving roles sent through it.
#[cfg(feature = "_broker")]
fn broker_is_measured(r: &RunResult) {
    for c in &r.cases {
        let b = c
            .roles
            .iter()
            .find(|r| r.role.kind == msgperf::result::RoleKind::Broker)
            .expect("a broker role");
        assert_eq!(b.error, None);
        assert!(b.counters.relayed > 0, "{:?}", b.counters);
        assert!(b.measured_ns > 0);
        assert!(b.cpu.user_ns + b.cpu.sys_ns > 0, "{:?}", b.cpu);
        if let Some(cpu) = c.config.cpus.1 {
            assert_eq!(b.cpus_seen, vec![cpu], "pinned with the others");
        }
    }
}

/// A pubsub of 2 subscribers at 1 kHz, 1000 B, `extra` given: the case runs and its result
/// measures the broker (its process's CPU a message, its role beside the clients').
#[cfg(feature = "_broker")]
fn broker_measured_at_1khz(transport: &str, extra: &[&str]) -> RunResult {
    let dir = temp_dir();
    let mut args = two_subscribers(transport, "1000");
    args.extend(["--rate", "1khz", "--count", "500"]);
    args.extend_from_slice(extra);
    let r = result_of(&args, &dir.path().join("measured.json"));
    broker_is_measured(&r);
    r
}

#[cfg(feature = "nats")]
mod nats {
    use super::*;

    #[test]
    fn nats_counts_every_message_through_its_own_server() {
        exact_counts("nats", &[]);
    }

    #[test]
    fn nats_jetstream_counts_every_message_acknowledged_and_fans_out_to_every_consumer() {
        exact_counts("nats", &["--opt", "jetstream=memory"]);
        pubsub_loses_nothing("nats", &["--opt", "jetstream=file"]);
        // Reliable: a loss would fail the case, and the stream is gone with the case.
        let dir = temp_dir();
        let r = result_of(
            &[
                "run",
                "pingpong",
                "-t",
                "nats",
                "--opt",
                "jetstream=file",
                "--delivery",
                "reliable",
                "--count",
                "200",
                "--warmup",
                "0s",
            ],
            &dir.path().join("js.json"),
        );
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert!(c
            .config
            .delivery_mapping
            .iter()
            .any(|s| s.value == "at least once"));
        assert!(
            c.floor.is_some(),
            "the JetStream floor: {:?}",
            c.floor_error
        );
    }

    /// Asynchronous JetStream publish: up to 64 acknowledgements outstanding, every message
    /// still delivered once, and the floor (written the same way) settles its publishes.
    #[test]
    fn nats_jetstream_async_publish_counts_every_message_and_measures_its_floor() {
        let async_publish = ["--opt", "jetstream=memory", "--opt", "acks-in-flight=64"];
        exact_counts("nats", &async_publish);
        let dir = temp_dir();
        let mut args = vec![
            "run",
            "stream",
            "-t",
            "nats",
            "--duration",
            "300ms",
            "--warmup",
            "0s",
        ];
        args.extend_from_slice(&async_publish);
        let r = result_of(&args, &dir.path().join("async.json"));
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert_eq!(c.roles[1].counters.lost, 0);
        assert!(c
            .config
            .delivery_mapping
            .iter()
            .any(|s| s.setting == "publish" && s.value == "async, 64 in flight"));
        assert!(
            c.floor.is_some(),
            "the async-publish floor: {:?}",
            c.floor_error
        );
        // A window of none is refused before anything starts, naming the option; core NATS
        // has no acknowledgements to keep in flight, and the refusal names the fix.
        let nats = ["run", "stream", "-t", "nats", "--opt"];
        refused(
            &[&nats[..], &["acks-in-flight=0"]].concat(),
            "acks-in-flight",
        );
        refused(
            &[&nats[..], &["acks-in-flight=8"]].concat(),
            "jetstream=memory",
        );
    }

    #[test]
    fn nats_pubsub_fans_out_without_loss_measures_the_broker_and_counts_slow_consumer_drops() {
        pubsub_loses_nothing("nats", &[]);
        broker_measured_at_1khz("nats", &[]);
        // A slow subscriber behind a small client queue: the client drops (a slow consumer),
        // and the subscriber counts every message it missed.
        slow_subscriber_counts_what_it_missed("nats", "1000", "500ms", &["--opt", "capacity=10"]);
    }

    #[test]
    fn nats_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
        killed_peer_ends_the_case("nats", &[]);
        broker_fault_ends_the_case("nats", "nats-server", libc::SIGKILL);
        broker_fault_ends_the_case("nats", "nats-server", libc::SIGSTOP);
        broker_dies_with_msgperf("nats", "nats-server");
    }

    #[test]
    fn nats_names_a_server_that_is_not_there() {
        let out = run(
            &[
                "run",
                "pingpong",
                "-t",
                "nats",
                "--opt",
                "broker=nats://127.0.0.1:1",
                "--timeout",
                "2s",
                "--no-floor",
            ],
            Duration::from_secs(60),
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("is nats-server running there?"), "{err}");
        refused(
            &["run", "pingpong", "-t", "nats", "--opt", "broker=localhost"],
            "nats://",
        );
        refused(
            &["run", "stream", "-t", "nats", "--history", "latest"],
            "fifo only",
        );
    }
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;

    #[test]
    fn redis_counts_every_message_in_pubsub_and_streams_modes() {
        exact_counts("redis", &[]);
        exact_counts("redis", &["--opt", "mode=streams"]);
    }

    #[test]
    fn redis_pubsub_fans_out_without_loss_measures_the_broker_and_counts_trimmed_entries() {
        pubsub_loses_nothing("redis", &[]);
        pubsub_loses_nothing("redis", &["--opt", "mode=streams"]);
        broker_measured_at_1khz("redis", &[]);
        // A slow reader of a short stream: entries are trimmed before it reads them, and it
        // counts every one it missed.
        slow_subscriber_counts_what_it_missed(
            "redis",
            "1000",
            "500ms",
            &["--opt", "mode=streams", "--opt", "maxlen=10"],
        );
    }

    #[test]
    fn redis_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
        killed_peer_ends_the_case("redis", &[]);
        broker_fault_ends_the_case("redis", "redis-server", libc::SIGKILL);
        broker_fault_ends_the_case("redis", "redis-server", libc::SIGSTOP);
        broker_dies_with_msgperf("redis", "redis-server");
    }

    /// `redis-cli` with `args` against the redis-server at `port`.
    fn redis_cli(port: u16, args: &[&str]) -> std::process::Output {
        std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli (apt-get install redis-tools)")
    }

    /// The names of run `pid` on the redis-server at `port`.
    fn keys_of(port: u16, pid: u32) -> Vec<String> {
        let out = redis_cli(port, &["--scan", "--pattern", &format!("msgperf-{pid}-*")]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).lines().map(String::from).collect()
    }

    /// The notes in a ledger directory of run `pid`.
    fn notes_of(ledger: &std::path::Path, pid: u32) -> Vec<String> {
        std::fs::read_dir(ledger.join("msgperf/left-on-brokers"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|n| n.starts_with(&format!("msgperf-{pid}-")))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A redis-server of the test's own on a free port, answering when this returns.
    fn shared_server(dir: &std::path::Path) -> (Server, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = std::process::Command::new("redis-server");
        server.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ]);
        server.args(["--appendonly", "no", "--dir"]).arg(dir);
        let server = Server(Some(
            server
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server (apt-get install redis-server)"),
        ));
        let up = Instant::now() + Duration::from_secs(10);
        while !redis_cli(port, &["ping"]).stdout.starts_with(b"PONG") {
            assert!(Instant::now() < up, "redis-server never answered on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        (server, port)
    }

    /// The server drops a subscriber that falls behind (its output buffer limit); here it is
    /// dropped mid-case by CLIENT KILL: the reader subscribes again, the case ends without an
    /// error, and what it missed is counted as lost, not lost from the count.
    #[test]
    fn redis_a_dropped_subscriber_subscribes_again_and_counts_what_it_missed() {
        let dir = temp_dir();
        let (_server, port) = shared_server(dir.path());
        let json = dir.path().join("run.json");
        let url = format!("broker=redis://127.0.0.1:{port}");
        let child = msgperf(&[
            "run",
            "stream",
            "-t",
            "redis",
            "--opt",
            &url,
            "--duration",
            "3s",
            "--no-floor",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
        let cli = |args: &[&str]| text(&redis_cli(port, args).stdout);
        // Once the stream flows (subscribers, and a second gone by), drop them all.
        let end = Instant::now() + Duration::from_secs(60);
        while cli(&["pubsub", "channels"]).trim().is_empty() {
            assert!(Instant::now() < end, "no subscriber appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_secs(1));
        let killed = cli(&["client", "kill", "type", "pubsub"]);
        // The reader's subscription, and the writer's (its way back, unused by a stream).
        assert!(killed.trim().parse::<u32>().unwrap() >= 1, "{killed}");
        let out = wait_output(child, Duration::from_secs(60));
        assert!(out.status.success(), "{}", text(&out.stderr));
        let r: RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        let (sent, got) = (&c.roles[0].counters, &c.roles[1].counters);
        assert!(got.messages_received > 0);
        // Every message sent after warm-up was either had or counted as lost.
        assert_eq!(
            got.messages_received + got.lost,
            sent.messages_sent,
            "lost {}",
            got.lost
        );
    }

    /// What a run killed with SIGKILL made on a server msgperf did not start stays there
    /// (nothing of it runs to remove it), noted in the ledger; the next case on that server
    /// removes it, and says so.
    #[test]
    fn redis_a_killed_runs_keys_on_a_shared_server_are_removed_by_the_next_case() {
        let dir = temp_dir();
        let (_server, port) = shared_server(dir.path());
        let url = format!("broker=redis://127.0.0.1:{port}");
        let state = dir.path().join("state");
        let args = |workload: &'static str, duration: &'static str| {
            let mut c = msgperf(&[
                "run",
                workload,
                "-t",
                "redis",
                "--opt",
                &url,
                "--opt",
                "mode=streams",
                "--duration",
                duration,
                "--no-floor",
            ]);
            c.env("XDG_STATE_HOME", &state)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c
        };
        let end = Instant::now() + Duration::from_secs(60);
        let child = args("stream", "60s").spawn().unwrap();
        let pid = child.id();
        while keys_of(port, pid).is_empty() {
            assert!(Instant::now() < end, "run {pid} made no key");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(notes_of(&state, pid).len(), 1);
        signal(pid, libc::SIGKILL);
        let _ = wait_output(child, Duration::from_secs(30));
        for d in leftovers_of(pid) {
            let _ = std::fs::remove_dir_all(std::env::temp_dir().join(d));
        }
        assert!(!keys_of(port, pid).is_empty(), "nothing was left to remove");
        assert_eq!(notes_of(&state, pid).len(), 1);

        let next = wait_output(
            args("pingpong", "100ms").spawn().unwrap(),
            Duration::from_secs(60),
        );
        let err = text(&next.stderr);
        assert!(next.status.success(), "{err}");
        assert!(
            err.contains(&format!("what run {pid} made there and, killed, left")),
            "{err}"
        );
        assert_eq!(keys_of(port, pid), Vec::<String>::new());
        assert_eq!(notes_of(&state, pid), Vec::<String>::new());
        // The next case removed its own names too, and its note.
        let done = std::fs::read_dir(state.join("msgperf/left-on-brokers"))
            .unwrap()
            .count();
        assert_eq!(done, 0);
    }

    #[test]
    fn redis_names_a_server_that_is_not_there() {
        let out = run(
            &[
                "run",
                "pingpong",
                "-t",
                "redis",
                "--opt",
                "broker=redis://127.0.0.1:1",
                "--timeout",
                "2s",
                "--no-floor",
            ],
            Duration::from_secs(60),
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("is redis-server running there?"), "{err}");
        refused(
            &[
                "run",
                "pingpong",
                "-t",
                "redis",
                "--opt",
                "broker=localhost",
            ],
            "redis://",
        );
        refused(
            &["run", "stream", "-t", "redis", "--history", "latest"],
            "fifo only",
        );
    }
}

#[cfg(feature = "mqtt")]
mod mqtt {
    use super::*;

    #[test]
    fn mqtt_counts_every_message_at_qos_1() {
        exact_counts("mqtt", &[]);
    }

    #[test]
    fn mqtt_counts_every_message_at_qos_2_and_measures_its_floor() {
        exact_counts("mqtt", &["--opt", "qos=2"]);
        pubsub_loses_nothing("mqtt", &["--opt", "qos=2"]);
        // The floor's last ping (its end) is released before its client disconnects: it
        // stalled until its side timed out when the disconnect went first.
        let dir = temp_dir();
        let r = result_of(
            &[
                "run",
                "pingpong",
                "-t",
                "mqtt",
                "--opt",
                "qos=2",
                "--duration",
                "300ms",
                "--warmup",
                "0s",
            ],
            &dir.path().join("floor.json"),
        );
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert_eq!(c.floor_error, None);
        let f = c.floor.as_ref().expect("the QoS 2 ping-pong's floor");
        assert!(f.samples > 0 && f.rtt_p50_ns.unwrap_or(0) > 0, "{f:?}");
    }

    #[test]
    fn mqtt_pubsub_fans_out_without_loss_and_measures_the_broker() {
        pubsub_loses_nothing("mqtt", &[]);
        broker_measured_at_1khz("mqtt", &[]);
    }

    #[test]
    fn mqtt_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
        killed_peer_ends_the_case("mqtt", &[]);
        broker_fault_ends_the_case("mqtt", "mosquitto", libc::SIGKILL);
        broker_fault_ends_the_case("mqtt", "mosquitto", libc::SIGSTOP);
        broker_dies_with_msgperf("mqtt", "mosquitto");
    }

    #[test]
    fn mqtt_names_a_broker_that_is_not_there_and_refuses_conflicting_qos() {
        let out = run(
            &[
                "run",
                "pingpong",
                "-t",
                "mqtt",
                "--opt",
                "broker=mqtt://127.0.0.1:1",
                "--timeout",
                "2s",
                "--no-floor",
            ],
            Duration::from_secs(60),
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("is mosquitto running there?"), "{err}");
        refused(
            &[
                "run",
                "pingpong",
                "-t",
                "mqtt",
                "--delivery",
                "reliable",
                "--opt",
                "qos=0",
            ],
            "needs QoS 1 or 2",
        );
        refused(
            &["run", "stream", "-t", "mqtt", "--history", "latest"],
            "fifo only",
        );
    }
}

#[cfg(feature = "amqp")]
mod amqp {
    use super::*;

    #[test]
    fn amqp_counts_every_message_plain_and_with_confirms_acks_and_quorum_queues() {
        exact_counts("amqp", &[]);
        exact_counts(
            "amqp",
            &[
                "--opt",
                "confirm=true",
                "--opt",
                "ack=manual",
                "--opt",
                "prefetch=50",
                "--opt",
                "queue=quorum",
            ],
        );
    }

    #[test]
    fn amqp_persistent_messages_are_counted_and_their_mapping_printed() {
        let dir = temp_dir();
        let json = dir.path().join("persistent.json");
        let (out, r) = output_and_result(
            &[
                "run",
                "stream",
                "-t",
                "amqp",
                "--size",
                "64k",
                "--count",
                "1000",
                "--warmup",
                "20ms",
                "--checksum",
                "--no-floor",
                "--opt",
                "persistent=true",
                "--opt",
                "confirm=true",
            ],
            &json,
        );
        let said = text(&out.stdout);
        assert!(out.status.success(), "{said}{}", text(&out.stderr));
        assert!(
            said.contains("persistence = on disk: durable queues, messages with delivery_mode 2"),
            "{said}"
        );
        assert!(
            said.contains("queue = classic: classic queues, durable"),
            "{said}"
        );
        let c = &r.cases[0];
        assert_eq!(c.roles[0].counters.messages_sent, 1000);
        let k = &c.roles[1].counters;
        assert_eq!(k.messages_received, 1000);
        assert_eq!(
            (k.lost, k.duplicated, k.reordered, k.corrupted),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn amqp_streams_count_every_message_share_one_log_and_refuse_what_they_cannot_do() {
        exact_counts("amqp", &["--opt", "queue=stream", "--opt", "confirm=true"]);
        pubsub_loses_nothing("amqp", &["--opt", "queue=stream"]);
        let dir = temp_dir();
        let r = result_of(
            &[
                "run",
                "pubsub",
                "-t",
                "amqp",
                "--subs",
                "2",
                "--count",
                "200",
                "--rate",
                "1khz",
                "--warmup",
                "0s",
                "--no-floor",
                "--opt",
                "queue=stream",
            ],
            &dir.path().join("mapping.json"),
        );
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert_eq!(mapped(c, "queue"), Some("stream"));
        assert_eq!(mapped(c, "acks"), Some("manual"));
        assert_eq!(mapped(c, "persistence"), Some("on disk"));
        // What the readers ran with is recorded, though not given.
        let opts = &c.config.effective_options;
        assert_eq!(opts.get("ack").map(String::as_str), Some("manual"));
        assert_eq!(opts.get("prefetch").map(String::as_str), Some("1000"));
        for (extra, says) in [
            (["--opt", "ack=auto"], "must acknowledge"),
            (["--opt", "prefetch=0"], "needs a prefetch"),
            (["--opt", "max-length=10"], "not a number of messages"),
            (["--history", "latest"], "by size or age"),
            (["--delivery", "best-effort"], "keeps every message"),
        ] {
            let mut args = vec!["run", "stream", "-t", "amqp", "--opt", "queue=stream"];
            args.extend_from_slice(&extra);
            refused(&args, says);
        }
    }

    #[test]
    fn amqp_pubsub_fans_out_without_loss_measures_the_broker_and_counts_a_bounded_queues_drops() {
        pubsub_loses_nothing("amqp", &[]);
        broker_measured_at_1khz("amqp", &[]);
        // A slow reader that takes one message at a time (prefetch 1, acknowledged) from a
        // queue bounded at 10: the broker drops the oldest, and the reader counts each one.
        slow_subscriber_counts_what_it_missed(
            "amqp",
            "1000",
            "500ms",
            &[
                "--opt",
                "ack=manual",
                "--opt",
                "prefetch=1",
                "--opt",
                "max-length=10",
            ],
        );
    }

    #[test]
    fn amqp_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
        killed_peer_ends_the_case("amqp", &[]);
        broker_fault_ends_the_case("amqp", "beam.smp", libc::SIGKILL);
        broker_fault_ends_the_case("amqp", "beam.smp", libc::SIGSTOP);
        broker_dies_with_msgperf("amqp", "beam.smp");
    }

    #[test]
    fn amqps_port_mapper_goes_with_its_broker() {
        let mut child = spawn(&[
            "run",
            "pingpong",
            "-t",
            "amqp",
            "--duration",
            "60s",
            "--no-floor",
        ]);
        let pid = child.id();
        let epmd = broker_of(&mut child, "epmd");
        wait_for_role(&mut child, "responder");
        signal(pid, libc::SIGKILL);
        let _ = wait_output(child, Duration::from_secs(30));
        let end = Instant::now() + Duration::from_secs(10);
        while alive(epmd) {
            assert!(Instant::now() < end, "epmd {epmd} outlived msgperf");
            std::thread::sleep(Duration::from_millis(20));
        }
        for d in leftovers_of(pid) {
            let _ = std::fs::remove_dir_all(std::env::temp_dir().join(d));
        }
    }

    #[test]
    fn amqp_names_a_broker_that_is_not_there_and_refuses_conflicting_delivery() {
        let out = run(
            &[
                "run",
                "pingpong",
                "-t",
                "amqp",
                "--opt",
                "broker=amqp://127.0.0.1:1",
                "--timeout",
                "2s",
                "--no-floor",
            ],
            Duration::from_secs(60),
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("is rabbitmq-server running there?"), "{err}");
        refused(
            &["run", "stream", "-t", "amqp", "--delivery", "best-effort"],
            "bound it with --history latest",
        );
        refused(
            &[
                "run",
                "stream",
                "-t",
                "amqp",
                "--delivery",
                "reliable",
                "--history",
                "latest",
            ],
            "drop one of them",
        );
        refused(
            &["run", "stream", "-t", "amqp", "--opt", "prefetch=70000"],
            "from 0 to 65535",
        );
    }
}

#[cfg(feature = "kafka")]
mod kafka {
    use super::*;

    #[test]
    fn kafka_counts_every_message_async_and_acknowledged_one_by_one() {
        exact_counts("kafka", &[]);
        exact_counts(
            "kafka",
            &[
                "--opt",
                "sync=true",
                "--opt",
                "idempotence=false",
                "--opt",
                "linger=1",
            ],
        );
    }

    #[test]
    fn kafka_a_writer_ahead_of_the_broker_waits_for_room_and_loses_nothing() {
        // librdkafka queues 100,000 messages at most: a writer of 300,000 finds its queue full
        // and waits for delivery reports to make room.
        let dir = temp_dir();
        let r = result_of(
            &[
                "run",
                "stream",
                "-t",
                "kafka",
                "--size",
                "64",
                "--count",
                "300000",
                "--warmup",
                "0s",
                "--checksum",
                "--no-floor",
            ],
            &dir.path().join("full.json"),
        );
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert_eq!(c.roles[0].counters.messages_sent, 300_000);
        let k = &c.roles[1].counters;
        assert_eq!(
            (
                k.messages_received,
                k.lost,
                k.duplicated,
                k.reordered,
                k.corrupted
            ),
            (300_000, 0, 0, 0, 0)
        );
        // A message larger than the whole queue is named at once, not waited on; the writer
        // still ends its stream, so its reader ends on that, not on its own timeout.
        let json = dir.path().join("too-large.json");
        let (out, r) = output_and_result(
            &[
                "run",
                "stream",
                "-t",
                "kafka",
                "--size",
                "2m",
                "--opt",
                "queue=1",
                "--count",
                "3",
                "--no-floor",
                "--timeout",
                "60s",
            ],
            &json,
        );
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!out.status.success(), "{all}");
        assert!(all.contains("give --opt queue=MiB above it"), "{all}");
        let (writer, reader) = (&r.cases[0].roles[0], &r.cases[0].roles[1]);
        assert!(
            writer
                .error
                .as_deref()
                .is_some_and(|e| e.contains("--opt queue")),
            "{:?}",
            writer.error
        );
        assert_eq!(
            reader.error, None,
            "the reader should end on the writer's END"
        );
        assert_eq!(reader.counters.messages_received, 0);
    }

    #[test]
    fn kafka_a_reader_behind_its_topic_s_retention_fails_naming_it_with_results_kept() {
        // A 4 MiB log in 1 MiB segments, checked every second; a reader that takes 20 ms a
        // message (its client fetches some 64 MiB ahead of it) falls hundreds of MiB behind
        // 6,000 messages of 64 KiB (375 MiB), however fast the writer goes. Its next message
        // is deleted: it fails, naming the option, instead of jumping ahead. (4 s of writing
        // was too little with one CPU kept busy: the writer wrote 123 MiB.)
        let dir = temp_dir();
        let json = dir.path().join("behind.json");
        let (out, r) = output_and_result(
            &[
                "run",
                "stream",
                "-t",
                "kafka",
                "--size",
                "64k",
                "--count",
                "6000",
                "--warmup",
                "0s",
                "--slow-subscriber",
                "20ms",
                "--opt",
                "retention=4",
                "--no-floor",
            ],
            &json,
        );
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            all.contains("the broker deleted messages this reader had not read")
                && all.contains("--opt retention=MiB"),
            "{all}"
        );
        let c = &r.cases[0];
        assert!(
            c.error.as_deref().is_some_and(|e| e.contains("retention")),
            "{:?}",
            c.error
        );
        // What was measured before is kept: the writer's messages, the reader's first ones.
        assert!(c.roles[0].counters.messages_sent > 0, "{:?}", c.roles[0]);
        assert!(
            c.roles[1].counters.messages_received > 0,
            "{:?}",
            c.roles[1]
        );
        assert_eq!(
            c.config.options.get("retention").map(String::as_str),
            Some("4")
        );
    }

    #[test]
    fn kafka_pubsub_fans_out_without_loss_measures_the_broker_and_counts_best_effort() {
        pubsub_loses_nothing("kafka", &[]);
        // acks=0: the producer does not wait for the broker; the readers count what it did
        // not take (nothing, on a healthy broker) instead of failing the case.
        let r = broker_measured_at_1khz("kafka", &["--delivery", "best-effort"]);
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert!(!c.config.strict);
        assert!(
            c.config.delivery_mapping.iter().any(|s| s.value == "0"),
            "{:?}",
            c.config.delivery_mapping
        );
        let sent = c.roles[0].counters.messages_sent;
        for r in &c.roles[1..3] {
            let k = &r.counters;
            assert_eq!(k.messages_received + k.lost, sent, "{k:?}");
        }
    }

    #[test]
    fn kafka_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
        killed_peer_ends_the_case("kafka", &[]);
        broker_fault_ends_the_case("kafka", "kafka.Kafka", libc::SIGKILL);
        broker_fault_ends_the_case("kafka", "kafka.Kafka", libc::SIGSTOP);
        broker_dies_with_msgperf("kafka", "kafka.Kafka");
    }

    #[test]
    fn kafka_names_what_is_missing_and_refuses_what_its_log_cannot_do() {
        let out = run(
            &[
                "run",
                "pingpong",
                "-t",
                "kafka",
                "--opt",
                "broker=kafka://127.0.0.1:1",
                "--timeout",
                "2s",
                "--no-floor",
            ],
            Duration::from_secs(60),
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("is a Kafka broker running there?"), "{err}");
        // Without its jars, the broker is not started, and the error says how to get them.
        let out = msgperf(&["run", "pingpong", "-t", "kafka", "--no-floor"])
            .env("MSGPERF_KAFKA", "/nonexistent/kafka")
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{err}");
        assert!(
            err.contains("/nonexistent/kafka/libs") && err.contains("tools/fetch-kafka"),
            "{err}"
        );
        refused(
            &["run", "stream", "-t", "kafka", "--history", "latest"],
            "it has no keep-last",
        );
        refused(
            &[
                "run",
                "stream",
                "-t",
                "kafka",
                "--delivery",
                "best-effort",
                "--opt",
                "acks=1",
            ],
            "drop one of them",
        );
        refused(
            &[
                "run",
                "stream",
                "-t",
                "kafka",
                "--opt",
                "idempotence=true",
                "--opt",
                "acks=1",
            ],
            "needs acks=all",
        );
        refused(
            &["run", "stream", "-t", "kafka", "--opt", "linger=soon"],
            "--opt linger=soon",
        );
        refused(
            &["run", "stream", "-t", "kafka", "--opt", "retention=2"],
            "give whole MiB from 4",
        );
    }
}
