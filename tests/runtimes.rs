//! The workloads around the message (CML's and the Tcl report's tests): pairs released at one
//! instant, spawn cost, timers, connection set-up and holding. Exact counts, figures present,
//! refusals; no timing is asserted.

mod support;

use msgperf::result::{CaseResult, Metric, RunResult};
use std::time::Duration;
use support::*;

fn figure(c: &CaseResult, name: &str) -> f64 {
    c.roles
        .iter()
        .flat_map(|r| &r.figures)
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no figure `{name}` in {}", c.key))
        .value
}

fn samples(c: &CaseResult, m: Metric) -> u64 {
    c.roles
        .iter()
        .filter_map(|r| r.histogram(m))
        .map(|h| h.len())
        .sum()
}

#[test]
fn pairs_deliver_every_message_of_every_pair_on_each_channel_crate() {
    let _pace = sharing();
    for t in ["inproc,mpsc,flume,tokio-mpsc", "uds"] {
        let cases = cases_of(&[
            "run",
            "pairs",
            "-t",
            t,
            "--n",
            "1,50",
            "--count",
            "7",
            "--checksum",
        ]);
        for c in &cases {
            let n = n_of(c);
            let what = format!("{} n={n}", c.config.transport);
            assert_eq!(c.error, None, "{what}");
            let (senders, receivers) = (&c.roles[0], &c.roles[1]);
            assert_eq!(senders.counters.messages_sent, 7 * n, "{what}");
            assert_eq!(receivers.counters.messages_received, 7 * n, "{what}");
            assert_eq!(
                (receivers.counters.lost, receivers.counters.corrupted),
                (0, 0),
                "{what}"
            );
            assert_eq!(
                samples(c, Metric::ONE_WAY),
                7 * n,
                "{what}: a delay per message"
            );
            assert!(figure(c, "first deliveries spread over") >= 0.0);
            assert!(figure(c, "senders all sending within") >= 0.0);
        }
        assert_eq!(cases.len(), if t == "uds" { 2 } else { 8 });
    }
}

#[test]
fn pairs_on_tokio_tasks_deliver_every_message_on_both_runtimes() {
    let _pace = sharing();
    let cases = cases_of(&[
        "run",
        "pairs",
        "--runtime",
        "tokio,tokio-multi",
        "--n",
        "1,300",
        "--count",
        "5",
        "--checksum",
    ]);
    assert_eq!(cases.len(), 4, "a row per runtime and n");
    for c in &cases {
        let n = n_of(c);
        let what = format!("{} n={n}", runtime_of(c));
        assert_eq!(c.error, None, "{what}");
        assert_eq!(
            c.config.transport, "tokio-mpsc",
            "{what}: tokio's own channel"
        );
        assert_eq!(c.roles.len(), 1, "{what}: every task in one role");
        let k = &c.roles[0].counters;
        assert_eq!(
            (k.messages_sent, k.messages_received),
            (5 * n, 5 * n),
            "{what}"
        );
        assert_eq!((k.lost, k.duplicated, k.corrupted), (0, 0, 0), "{what}");
        assert_eq!(
            samples(c, Metric::ONE_WAY),
            5 * n,
            "{what}: a delay per message"
        );
        assert_eq!(
            samples(c, Metric::SEND_CALL),
            5 * n,
            "{what}: a time per send"
        );
        assert!(figure(c, "first deliveries spread over") >= 0.0);
        assert!(figure(c, "senders all sending within") >= 0.0);
    }
}

#[test]
fn spawn_starts_exactly_n_threads_or_tasks_and_measures_each() {
    let _pace = sharing();
    let cases = cases_of(&[
        "run",
        "spawn",
        "--n",
        "1,300",
        "--runtime",
        "threads,tokio,tokio-multi",
    ]);
    assert_eq!(cases.len(), 6, "a row per N and runtime");
    for c in &cases {
        let n = n_of(c);
        let what = format!("{} n={n}", runtime_of(c));
        assert_eq!(c.error, None, "{what}");
        let r = &c.roles[0];
        assert_eq!(
            (r.counters.messages_sent, r.counters.messages_received),
            (n, n),
            "{what}"
        );
        assert_eq!(samples(c, key("spawn_call_ns")), n, "{what}");
        assert_eq!(samples(c, key("start_delay_ns")), n, "{what}");
        let unit = if runtime_of(c) == "threads" {
            "thread"
        } else {
            "task"
        };
        assert!(
            figure(c, &format!("resident memory per {unit}")) >= 0.0,
            "{what}"
        );
        assert!(
            figure(c, &format!("spawns per second ({unit}s)")) > 0.0,
            "{what}"
        );
    }
}

#[test]
fn timers_wake_every_waiter_once_for_a_shared_and_for_distinct_deadlines() {
    let _pace = sharing();
    let cases = cases_of(&[
        "run",
        "timers",
        "--n",
        "1,200",
        "--runtime",
        "threads,tokio",
    ]);
    assert_eq!(cases.len(), 4);
    for c in &cases {
        let n = n_of(c);
        let what = format!("{} n={n}", runtime_of(c));
        assert_eq!(c.error, None, "{what}");
        assert_eq!(
            c.roles[0].counters.messages_received,
            2 * n,
            "{what}: every waiter woke"
        );
        assert_eq!(samples(c, key("timer_late_ns")), n, "{what}");
        assert_eq!(samples(c, key("timer_late_distinct_ns")), n, "{what}");
        // A waiter's lateness is measured from its deadline, which lies after the release.
        let late = c.roles[0].histogram(key("timer_late_ns")).unwrap();
        assert!(late.max() < 60_000_000_000, "{what}: sane");
        if runtime_of(c) != "threads" {
            assert_eq!(
                samples(c, key("timer_register_ns")),
                2 * n,
                "{what}: registrations"
            );
        }
        assert!(figure(c, "shared deadline: wake-ups spread over") >= 0.0);
    }
}

#[test]
fn connect_times_every_step_of_every_connection() {
    let _pace = sharing();
    let cases = cases_of(&[
        "run",
        "connect",
        "-t",
        "tcp,uds,uds-seqpacket",
        "--n",
        "500",
        "--size",
        "100",
    ]);
    for c in &cases {
        let what = &c.config.transport;
        assert_eq!(c.error, None, "{what}");
        let r = &c.roles[0];
        assert_eq!(r.counters.messages_sent, 500, "{what}: --n connections");
        assert_eq!(
            r.counters.bytes_received,
            500 * 100,
            "{what}: every exchange echoed"
        );
        for m in [
            key("connection_ns"),
            key("connect_call_ns"),
            Metric::RTT,
            key("close_call_ns"),
        ] {
            assert_eq!(samples(c, m), 500, "{what} {m:?}");
        }
        // Every measured connection was accepted (the warm-up's are not timed).
        assert!(samples(c, key("accept_call_ns")) >= 500, "{what}");
    }
}

#[test]
fn connect_hold_names_what_stopped_it_and_restores_the_descriptor_limit() {
    let _pace = sharing();
    // In a process of its own, under a low limit that the role raises to the hard one.
    let cases = cases_of(&[
        "run",
        "connect",
        "-t",
        "uds,tcp,uds-seqpacket",
        "--hold",
        "--n",
        "300",
        "--timeout",
        "2s",
    ]);
    for c in &cases {
        let r = &c.roles[0];
        assert_eq!(r.counters.messages_sent, 300, "{}", c.key);
        assert_eq!(r.stopped_by.as_deref(), Some("--n 300 reached"));
        assert!(figure(c, "descriptor limit while holding") >= 600.0);
    }
    // Until the descriptor limit, lowered to a hard 1024 for the run: the role raises its soft
    // limit to that, meets it, and names it.
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 256; ulimit -Hn 1024; exec {MSGPERF} run connect -t uds,tcp,uds-seqpacket --hold --timeout 2s --duration 60s --json {}",
            json.display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run: RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for c in &run.cases {
        let r = &c.roles[0];
        let why = r.stopped_by.clone().unwrap_or_default();
        assert!(
            why.contains("descriptor limit (RLIMIT_NOFILE 1024, raised from 256"),
            "{why}"
        );
        // Each connection made costs a descriptor, and each accepted one another, both in this
        // process: together they reached the limit, less the few the process holds besides.
        // How many the acceptor took before the limit depends on how fast it ran.
        let (made, accepted) = (r.counters.messages_sent, r.counters.messages_received);
        assert!((300..1024).contains(&made), "{}: {made}", c.key);
        assert!(accepted <= made, "{}: {accepted} of {made}", c.key);
        assert!(
            (1024 - 64..=1024).contains(&(made + accepted)),
            "{}: {made} made and {accepted} accepted against a limit of 1024",
            c.key
        );
        assert_eq!(figure(c, "descriptor limit while holding"), 1024.0);
    }
}

#[test]
fn a_listener_that_never_accepts_fills_its_backlog_and_the_next_connect_times_out_counted() {
    let _pace = sharing();
    let cases = cases_of(&[
        "run",
        "connect",
        "-t",
        "tcp,uds,uds-seqpacket",
        "--hold",
        "--no-accept",
        "--backlog",
        "8",
        "--timeout",
        "2s",
    ]);
    assert_eq!(cases.len(), 3);
    for c in &cases {
        assert_eq!(c.error, None, "{}", c.key);
        let r = &c.roles[0];
        // The kernel queues one more than the backlog, on both families.
        let made = r.counters.messages_sent;
        assert!((8..=9).contains(&made), "{}: {made} made", c.key);
        assert_eq!(
            r.counters.messages_received, 0,
            "{}: nothing accepted",
            c.key
        );
        assert_eq!(figure(c, "connects timed out"), 1.0, "{}", c.key);
        assert_eq!(figure(c, "listen backlog"), 8.0, "{}", c.key);
        let why = r.stopped_by.clone().unwrap_or_default();
        assert!(why.contains("backlog was full"), "{}: {why}", c.key);
    }
}

#[test]
fn runtime_workloads_refuse_what_does_not_apply_with_the_fix() {
    for (args, says) in [
        (vec!["run", "spawn", "-t", "tcp"], "drop -t tcp"),
        (vec!["run", "spawn", "--n", "0"], "whole numbers from 1"),
        (
            vec!["run", "spawn", "--runtime", "go"],
            "threads, tokio or tokio-multi",
        ),
        (vec!["run", "timers", "--duration", "1s"], "drop --duration"),
        (
            vec!["run", "pingpong", "-t", "uds", "--n", "5"],
            "--n is for",
        ),
        (
            vec!["run", "pairs", "-t", "uds", "--runtime", "tokio"],
            "give -t tokio-mpsc",
        ),
        (
            vec!["run", "stream", "-t", "uds", "--runtime", "tokio"],
            "--runtime is for pairs, spawn, timers, not stream",
        ),
        (
            vec!["run", "connect", "-t", "shm"],
            "which `shm` does not have",
        ),
        (
            vec!["run", "connect", "-t", "tcp", "--size", "8"],
            "--size 32 or more",
        ),
        (
            vec!["run", "connect", "-t", "tcp", "--no-accept"],
            "add --hold",
        ),
        (
            vec!["run", "pingpong", "-t", "tcp", "--backlog", "4"],
            "--backlog is for connect",
        ),
        (
            vec!["run", "stream", "-t", "uds", "--hold"],
            "--hold is for connect",
        ),
    ] {
        let out = run(&args, Duration::from_secs(30));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn a_killed_or_stopped_receivers_process_ends_pairs_within_the_timeout_with_the_senders_kept() {
    let _pace = alone();
    for sig in [libc::SIGKILL, libc::SIGSTOP] {
        let dir = temp_dir();
        let json = dir.path().join("r.json");
        let mut child = spawn(&[
            "run",
            "pairs",
            "-t",
            "uds",
            "--n",
            "20",
            "--count",
            "100000000",
            "--timeout",
            "3s",
            "--json",
            json.to_str().unwrap(),
        ]);
        let pid = child.id();
        let receivers = wait_for_role(&mut child, "receivers");
        let senders = wait_for_role(&mut child, "senders");
        std::thread::sleep(Duration::from_millis(1000));
        let start = std::time::Instant::now();
        signal(receivers, sig);
        let out = wait_output(child, Duration::from_secs(60));
        let took = start.elapsed();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "signal {sig}: {err}");
        // The stopped one is judged hung after --timeout; a bound only a hang reaches.
        assert!(
            took < Duration::from_secs(9),
            "signal {sig}: ended {took:?} after: {err}"
        );
        assert!(
            err.contains("receivers"),
            "signal {sig}: names the role: {err}"
        );
        assert_eq!(
            err.trim().lines().count(),
            1,
            "signal {sig}: one line: {err}"
        );
        let run: RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let c = &run.cases[0];
        assert!(c.error.as_deref().is_some_and(|e| e.contains("receivers")));
        assert!(
            c.roles[0].counters.messages_sent > 0,
            "signal {sig}: the senders' result is kept"
        );
        for k in [receivers, senders] {
            assert!(!alive(k), "signal {sig}: role {k} outlived the run");
        }
        assert!(leftovers_of(pid).is_empty(), "signal {sig}");
    }
}

#[test]
fn split_gathered_and_text_writes_deliver_every_byte_and_a_slow_reader_leaves_nothing_stuck() {
    let _pace = sharing();
    // Many small writes per message, messages gathered in a buffer smaller and larger than a
    // message, and messages as lines of text; the reader slow, so the writer is held back.
    for (opt, sizes, n) in [
        ("write-size=7,1k", "64,4k", 8),
        ("buffer=64k", "64,100k", 4),
        ("framing=text", "64,4k", 4),
    ] {
        let cases = cases_of(&[
            "run",
            "stream",
            "-t",
            "uds,tcp",
            "--opt",
            opt,
            "--size",
            sizes,
            "--count",
            "3000",
            "--checksum",
            "--slow-subscriber",
            "5us",
            "--warmup",
            "0s",
        ]);
        for c in &cases {
            let what = &c.key;
            assert_eq!(c.error, None, "{what}");
            let (w, r) = (&c.roles[0], &c.roles[1]);
            assert_eq!(w.counters.messages_sent, 3000, "{what}");
            assert_eq!(r.counters.messages_received, 3000, "{what}: nothing stuck");
            assert_eq!(
                r.counters.bytes_received, w.counters.bytes_sent,
                "{what}: every byte"
            );
            assert_eq!((r.counters.lost, r.counters.corrupted), (0, 0), "{what}");
            let blocked = figure(c, "writer's time in write calls");
            assert!((0.0..=100.5).contains(&blocked), "{what}: {blocked}");
            // The plain loop writes whole binary messages: no ratio, and the reason recorded.
            assert!(c.floor.is_none() && c.floor_error.is_some(), "{what}");
        }
        assert_eq!(cases.len(), n, "transports x sizes x option values");
    }
    let out = run(
        &["run", "pingpong", "-t", "uds", "--opt", "buffer=4k"],
        Duration::from_secs(30),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs a reply"),
        "a buffered writer is one-way: {err}"
    );
}

/// A workload's metric, by its key in results.
fn key(k: &'static str) -> Metric {
    Metric::new(k, 0)
}

/// A case's `--n`.
fn n_of(c: &msgperf::result::CaseResult) -> u64 {
    c.config.param("n").unwrap().parse().unwrap()
}

/// A case's `--runtime`.
fn runtime_of(c: &msgperf::result::CaseResult) -> &str {
    c.config.param("runtime").unwrap()
}
