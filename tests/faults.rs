//! Faults: a peer that dies, never connects, hangs, an address in use, Ctrl-C. Each ends in
//! bounded time with a clear error, the results measured before it, no orphan processes and no
//! files left behind.

mod support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::*;

#[test]
fn killing_the_peer_ends_the_run_with_an_error_and_keeps_what_was_measured() {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let mut child = long_run("pingpong", "uds", Some(&json));
    let pid = child.id();
    let peer = wait_for_role(&mut child, "responder");
    std::thread::sleep(Duration::from_millis(800));
    signal(peer, libc::SIGKILL);
    let out = wait_output(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("responder") && stdout.contains("died"),
        "names the role: {stdout}"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let case = &v["cases"][0];
    assert!(case["error"].is_string());
    assert!(
        case["summary"]["latency"]["samples"].as_u64().unwrap() > 100,
        "round trips before the kill are kept"
    );
    assert!(leftovers_of(peer).is_empty() && leftovers_of(pid).is_empty());
}

#[test]
fn connecting_to_nobody_fails_fast_with_the_cause() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let start = Instant::now();
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "tcp",
            "--connect",
            &addr,
            "--count",
            "10",
            "--timeout",
            "2s",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("refused"),
        "{}",
        text(&out.stdout)
    );
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_busy_address_is_named() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let out = run(
        &["serve", "-t", "tcp", "--listen", &addr, "--once"],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("in use"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn ctrl_c_stops_cleanly_and_writes_what_was_measured() {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let mut child = long_run("pingpong", "pipe", Some(&json));
    let pid = child.id();
    let peer = wait_for_child(&mut child);
    let (out, case) = interrupt(child, &json, Duration::from_secs(20));
    assert!(text(&out.stdout).contains("interrupted"));
    assert_eq!(
        case["roles"].as_array().unwrap().len(),
        2,
        "the peer's result came back"
    );
    assert!(case["summary"]["latency"]["samples"].as_u64().unwrap() > 100);
    assert!(!alive(peer), "no orphan peer");
    assert!(leftovers_of(peer).is_empty() && leftovers_of(pid).is_empty());
}

#[test]
fn a_hung_peer_is_killed_by_the_watchdog() {
    // A stopped peer neither reads nor closes its end: only the watchdog can end the case. The
    // count-bound cases have no known length, so only its stall check (the peer did not run
    // for --timeout) bounds them; uds and pipe waits have no timer of their own here.
    let cases: [&[&str]; 3] = [
        &["stream", "-t", "pipe", "--duration", "500ms"],
        &["pingpong", "-t", "uds", "--count", "1000000000"],
        &["pingpong", "-t", "pipe", "--count", "1000000000"],
    ];
    for case in cases {
        let mut args = vec!["run"];
        args.extend_from_slice(case);
        args.extend([
            "--warmup",
            "0s",
            "--timeout",
            "1s",
            "--no-floor",
            "--placement",
            "any",
        ]);
        let mut child = spawn(&args);
        let passive = if case[0] == "stream" {
            "reader"
        } else {
            "responder"
        };
        let peer = wait_for_role(&mut child, passive);
        std::thread::sleep(Duration::from_millis(100));
        signal(peer, libc::SIGSTOP);
        let start = Instant::now();
        let out = wait_output(child, Duration::from_secs(30));
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{case:?}: {stdout}");
        assert!(start.elapsed() < Duration::from_secs(15), "{case:?}");
        assert!(!alive(peer), "{case:?}");
        if case.contains(&"--count") {
            assert!(
                stdout.contains("was stopped for") && stdout.contains("hung"),
                "{case:?} names the stall: {stdout}"
            );
        }
    }
}

#[test]
fn a_hung_server_started_by_hand_times_out() {
    // msgperf does not watch a server started by hand: every wait on it carries the timeout
    // (a receive timeout on sockets, poll(2) on pipes), so a stopped server cannot hold the run.
    for transport in ["pipe", "uds"] {
        let dir = temp_dir();
        let at = dir.path().join("at");
        let server = Server::start(&["serve", "-t", transport, "--listen", at.to_str().unwrap()]);
        let end = Instant::now() + Duration::from_secs(10);
        while !at.exists() {
            assert!(Instant::now() < end, "{transport}: serve never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut child = spawn(&[
            "run",
            "pingpong",
            "-t",
            transport,
            "--connect",
            at.to_str().unwrap(),
            "--count",
            "1000000000",
            "--warmup",
            "0s",
            "--timeout",
            "1s",
            "--no-floor",
        ]);
        // Stopped while it measures (or, on a slow machine, while it still gets ready).
        wait_for_role(&mut child, "initiator");
        std::thread::sleep(Duration::from_millis(500));
        signal(server.id(), libc::SIGSTOP);
        let start = Instant::now();
        let out = wait_output(child, Duration::from_secs(30));
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{transport}: {stdout}");
        assert!(start.elapsed() < Duration::from_secs(15), "{transport}");
        assert!(
            ["no answer within 1s", "within 1s", "not even a heartbeat"]
                .iter()
                .any(|why| stdout.contains(why)),
            "{transport}: names the timeout: {stdout}"
        );
        signal(server.id(), libc::SIGCONT);
    }
}

#[test]
fn a_server_started_by_hand_serves_several_cases() {
    let dir = temp_dir();
    let sock = dir.path().join("s.sock");
    let server = Server::start(&["serve", "-t", "uds", "--listen", sock.to_str().unwrap()]);
    let end = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(Instant::now() < end, "serve never listened");
        std::thread::sleep(Duration::from_millis(10));
    }
    let json = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "uds",
            "--connect",
            sock.to_str().unwrap(),
            "--size",
            "64,1k",
            "--count",
            "200",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for c in v["cases"].as_array().unwrap() {
        assert_eq!(
            c["roles"][1]["counters"]["messages_received"], 200,
            "the server's role result came back in-band"
        );
    }
    signal(server.id(), libc::SIGINT);
    let out = wait_output(server.take(), Duration::from_secs(10));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).matches("served pingpong").count(), 2);
    assert!(!sock.exists(), "the socket file is removed");
}
