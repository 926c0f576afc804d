//! The middleware adapters against their real libraries (no mocks), each behind its Cargo
//! feature: exact counts for ping-pong and streams in processes, publish/subscribe 1 to 5 and 5
//! to 1 at 1 kHz losing nothing when reliable, losses counted when best-effort, a killed peer
//! ending the case within the timeout, and refusals that name what the middleware lacks. The
//! contract itself is `tests/conformance.rs`, generated for every registry entry.

// Without a middleware feature the helpers have no caller.
#![cfg_attr(not(feature = "zmq"), allow(dead_code))]

mod support;

use msgperf::result::RunResult;
use std::time::{Duration, Instant};
use support::*;

fn result_of(args: &[&str], json: &std::path::Path) -> RunResult {
    let mut all = args.to_vec();
    all.extend(["--json", json.to_str().unwrap()]);
    let out = run(&all, Duration::from_secs(180));
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
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
    let child = spawn(&args);
    let peer = wait_for_role(child.id(), "responder");
    std::thread::sleep(Duration::from_millis(800));
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
    assert!(
        r.cases[0].roles[0].counters.messages_sent > 100,
        "{transport}"
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
        let dir = temp_dir();
        let r = result_of(
            &[
                "run",
                "pubsub",
                "-t",
                "zmq",
                "--subs",
                "2",
                "--size",
                "1000",
                "--duration",
                "500ms",
                "--warmup",
                "0s",
                "--delivery",
                "best-effort",
                "--slow-subscriber",
                "2ms",
                "--opt",
                "hwm=10",
                "--no-floor",
            ],
            &dir.path().join("best-effort.json"),
        );
        let c = &r.cases[0];
        assert_eq!(c.error, None);
        assert!(!c.config.strict);
        let sent = c.roles[0].counters.messages_sent;
        let slow = &c.roles[1].counters;
        assert!(slow.lost > 0, "the slow subscriber lost nothing: {slow:?}");
        assert_eq!(slow.messages_received + slow.lost, sent, "{slow:?}");
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
