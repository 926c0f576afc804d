//! The shared-memory transport beyond the common contract: both buffer modes and wait
//! strategies with exact counts under load, zero-copy, crashes of either side, foreign and
//! leftover segments.

mod support;

use msgperf::exec::Runner;
use msgperf::plan::{self, PlacementArg, RunOptions};
use serde_json::Value;
use std::time::{Duration, Instant};
use support::*;

fn request(workload: &str, opts: &[(&str, &str)]) -> RunOptions {
    RunOptions {
        size: Some("64,8k".into()),
        count: Some(50_000),
        warmup: Some("10ms".into()),
        opts: opts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..short_request(workload, "shm")
    }
}

fn shm_files() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("msgperf-"))
        .collect()
}

#[test]
fn every_wait_strategy_delivers_every_message_under_load() {
    for wait in ["spin-yield", "block", "spin"] {
        for zero_copy in ["false", "true"] {
            for workload in ["stream", "pingpong"] {
                // A small ring keeps the writer waiting for space, so both sides' wake-ups run.
                let mut r = request(
                    workload,
                    &[
                        ("wait", wait),
                        ("zero-copy", zero_copy),
                        ("capacity", "64k"),
                    ],
                );
                if wait == "spin" {
                    // Two spinning threads on one CPU would only measure the scheduler.
                    r.placement = Some(PlacementArg::CrossCpu);
                    r.count = Some(20_000);
                }
                for case in plan::cases(&r).unwrap() {
                    let c = Runner::new(None, false).run_case(&case);
                    let what = format!(
                        "{workload} wait={wait} zero-copy={zero_copy} {} B",
                        case.size_bytes
                    );
                    assert_eq!(c.error, None, "{what}");
                    let (a, p) = (&c.roles[0].counters, &c.roles[1].counters);
                    assert_eq!(a.messages_sent, r.count.unwrap(), "{what}");
                    assert_eq!(p.messages_received, r.count.unwrap(), "{what}");
                    assert_eq!(
                        (p.lost, p.corrupted, p.duplicated, p.reordered),
                        (0, 0, 0, 0),
                        "{what}"
                    );
                }
            }
        }
    }
}

#[test]
fn latest_value_mode_counts_overwrites_and_never_tears_a_message() {
    let mut r = request("stream", &[("buffer", "latest")]);
    r.count = Some(200_000);
    r.placement = Some(PlacementArg::CrossCpu);
    let mut seen = 0;
    for case in plan::cases(&r).unwrap() {
        assert!(case.latest && !case.strict);
        let c = Runner::new(None, false).run_case(&case);
        assert_eq!(c.error, None);
        let reader = &c.roles[1].counters;
        // Every message carries a CRC32: a torn read would count as corrupted.
        assert_eq!(reader.corrupted, 0, "{} B", case.size_bytes);
        assert_eq!(reader.lost, 0);
        seen += reader.messages_received;
        assert_eq!(
            reader.messages_received + reader.overwritten,
            200_000,
            "{} B: seen + overwritten = sent",
            case.size_bytes
        );
        assert!(reader.read_calls >= reader.messages_received);
    }
    // A reader kept off its CPU for a whole case sees only END (which overwrites the last
    // value): legitimate for one size, but not for all of them.
    assert!(seen > 0, "no case's reader saw a message");
}

#[test]
fn a_full_queue_can_fail_and_count_instead_of_waiting() {
    let mut r = request("stream", &[("full", "fail"), ("capacity", "16k")]);
    r.size = Some("4096".into());
    r.placement = Some(PlacementArg::SameCpu);
    r.count = Some(100_000);
    let case = &plan::cases(&r).unwrap()[0];
    assert!(!case.strict);
    let c = Runner::new(None, false).run_case(case);
    assert_eq!(c.error, None);
    let (w, rd) = (&c.roles[0].counters, &c.roles[1].counters);
    assert!(w.send_full > 0, "a 16 KiB ring of 4 KiB messages fills");
    assert_eq!(w.messages_sent + w.send_full, 100_000);
    assert_eq!(rd.messages_received, w.messages_sent);
    assert_eq!(
        rd.lost, w.send_full,
        "each refused message is a gap the reader counts"
    );
}

#[test]
fn a_foreign_file_where_a_named_server_should_be_is_refused_by_name() {
    let path = "/dev/shm/msgperf-foreign-test";
    std::fs::write(path, vec![0xAB; 8192]).unwrap();
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "shm",
            "--name",
            "foreign-test",
            "--count",
            "10",
            "--timeout",
            "2s",
        ],
        Duration::from_secs(20),
    );
    let _ = std::fs::remove_file(path);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not a msgperf server"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn leftovers_of_dead_processes_are_swept() {
    let stale = "/dev/shm/msgperf-999999999-7-c0";
    std::fs::write(stale, b"left by a killed msgperf").unwrap();
    // A named server's socket whose server died: nothing listens on it any more.
    let dead = "/dev/shm/msgperf-swept-test";
    drop(std::os::unix::net::UnixListener::bind(dead).unwrap());
    let out = run(&["transports"], Duration::from_secs(10));
    assert!(out.status.success());
    assert!(!std::path::Path::new(stale).exists());
    assert!(!std::path::Path::new(dead).exists());
}

#[test]
fn a_named_server_serves_cases_and_outlives_a_client_killed_mid_run() {
    let name = format!("t{}", std::process::id());
    let server = Server::start(&["serve", "-t", "shm", "--name", &name, "--timeout", "2s"]);
    // A named server's control socket.
    let seg = format!("/dev/shm/msgperf-{name}");
    let end = Instant::now() + Duration::from_secs(10);
    while !std::path::Path::new(&seg).exists() {
        assert!(Instant::now() < end, "the server never made its socket");
        std::thread::sleep(Duration::from_millis(10));
    }
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "shm",
            "--name",
            &name,
            "--size",
            "64,4k",
            "--count",
            "5000",
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
    assert_eq!(v["cases"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["cases"][1]["roles"][1]["counters"]["messages_received"],
        5000
    );

    // A client killed hard sets no flag: the server notices by its process id, within its timeout.
    let mut client = msgperf(&[
        "run",
        "stream",
        "-t",
        "shm",
        "--name",
        &name,
        "--duration",
        "60s",
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    client.kill().unwrap();
    client.wait().unwrap();
    // Still serving: another client gets through.
    let out = run(
        &[
            "run", "pingpong", "-t", "shm", "--name", &name, "--count", "1000",
        ],
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    unsafe { libc::kill(server.id() as i32, libc::SIGINT) };
    let out = wait_output(server.take(), Duration::from_secs(10));
    assert!(
        text(&out.stderr).contains("closed"),
        "the server reported the dead client: {}",
        text(&out.stderr)
    );
    assert!(
        !std::path::Path::new(&seg).exists(),
        "the socket is removed"
    );
}

#[test]
fn killing_either_side_leaves_no_segment() {
    let before = shm_files();
    // The reader dies: the controller notices, fails the case, and nothing is left.
    let mut child = long_run("stream", "shm", None);
    let peer = wait_for_role(&mut child, "reader") as i32;
    std::thread::sleep(Duration::from_millis(500));
    unsafe { libc::kill(peer, libc::SIGKILL) };
    let out = wait_output(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("reader") && text(&out.stdout).contains("died"),
        "{}",
        text(&out.stdout)
    );
    // The controller dies as soon as its responder has started, before the roles may have
    // mapped their segment: its peer dies with it, and nothing is left either (the roles open
    // segments through the controller's descriptors, the names gone once made).
    let mut child = long_run("pingpong", "shm", None);
    wait_for_role(&mut child, "responder");
    child.kill().unwrap();
    child.wait().unwrap();
    let new_files = || -> Vec<String> {
        shm_files()
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect()
    };
    // The peer ends at once (PR_SET_PDEATHSIG); a bound that only a hang reaches.
    let end = Instant::now() + Duration::from_secs(10);
    while !new_files().is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = new_files();
    assert!(after.is_empty(), "left in /dev/shm: {after:?}");
}

#[test]
fn the_stream_floor_is_a_plain_ring_between_the_same_roles() {
    roles_run_msgperf();
    for wait in ["spin-yield", "block"] {
        for threads in [true, false] {
            let mut r = request("stream", &[("wait", wait)]);
            r.size = Some("4096".into());
            r.threads = Some(threads);
            r.count = None;
            r.duration = Some("100ms".into());
            let case = &plan::cases(&r).unwrap()[0];
            let f = Runner::new(None, true)
                .floor(case)
                .unwrap_or_else(|e| panic!("{wait}: the stream floor failed: {e}"))
                .unwrap_or_else(|| panic!("{wait}: no stream floor"));
            let (bytes, msgs) = (f.bytes_per_s.unwrap(), f.msgs_per_s.unwrap());
            assert!(
                f.samples > 0 && bytes > 0.0 && msgs > 0.0 && f.rtt_p50_ns.is_none(),
                "{wait} threads={threads}: {f:?}"
            );
            let expect = msgs * 4096.0;
            assert!((bytes - expect).abs() / expect < 1e-6, "{f:?}");
        }
    }
}

#[test]
fn a_ring_smaller_than_two_messages_grows_to_carry_them() {
    for size in [8192usize, 65536, 100_000] {
        let mut r = request("stream", &[("capacity", "4k")]);
        r.size = Some(size.to_string());
        r.count = Some(2_000);
        let case = &plan::cases(&r).unwrap()[0];
        let c = Runner::new(None, false).run_case(case);
        assert_eq!(c.error, None, "{size} B");
        assert_eq!(c.roles[1].counters.messages_received, 2_000, "{size} B");
    }
}
