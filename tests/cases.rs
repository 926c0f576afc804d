//! Every transport x workload for a short run: exact message counts, integrity, every figure
//! present and sane. Threads through the library, processes through the binary.

mod support;

use msgperf::exec::Runner;
use msgperf::plan::{self, RunOptions};
use msgperf::report::summary::summarize;
use msgperf::result::{CaseResult, Metric};
use msgperf::transport::REGISTRY;
use serde_json::Value;
use std::time::Duration;
use support::*;

fn request(workload: &str, transport: &str) -> RunOptions {
    short_request(workload, transport)
}

fn check(c: &CaseResult, count: u64) {
    let what = format!(
        "{} {} {} B",
        c.config.transport, c.config.workload, c.config.size_bytes
    );
    assert_eq!(c.error, None, "{what}");
    // A broker that the case started reports as a role of its own, after them.
    let brokers = c
        .roles
        .iter()
        .filter(|r| r.role.kind == msgperf::result::RoleKind::BROKER)
        .count();
    assert_eq!(c.roles.len() - brokers, 2, "{what}: both roles report");
    let (active, passive) = (&c.roles[0], &c.roles[1]);
    assert!(
        active.cpu.user_ns + active.cpu.sys_ns > 0,
        "{what}: active CPU time"
    );
    assert!(
        !active.cpus_seen.is_empty() && !passive.cpus_seen.is_empty(),
        "{what}"
    );
    assert!(active.cpu.peak_rss_kib > 0, "{what}");
    let s = summarize(c);
    let Some(d) = s.latency.as_ref() else {
        // A flood over udp may lose every measured message when the reader falls a socket
        // buffer behind during the warm-up; then the losses must say so.
        assert!(
            !c.config.strict && s.lost == count,
            "{what}: no latency, and {} lost",
            s.lost
        );
        return;
    };
    assert!(
        d.min_ns > 0 && d.min_ns <= d.max_ns && d.mean_ns > 0.0,
        "{what}: {d:?}"
    );
    assert!(s.msgs_per_s > 0.0, "{what}");
    if c.config.strict {
        assert_eq!(active.counters.messages_sent, count, "{what}: sent");
        assert_eq!(
            passive.counters.messages_received, count,
            "{what}: received"
        );
        assert_eq!(
            (s.lost, s.duplicated, s.reordered, s.corrupted),
            (0, 0, 0, 0),
            "{what}"
        );
        assert_eq!(d.samples, count, "{what}: samples");
    }
}

#[test]
fn every_transport_runs_pingpong_and_stream_in_threads_with_exact_counts() {
    for t in REGISTRY.iter() {
        for w in ["pingpong", "stream"] {
            let cases = plan::cases(&request(w, t.name())).unwrap();
            let mut runner = Runner::new(None, false);
            for case in &cases {
                check(&runner.run_case(case), 300);
            }
        }
    }
}

#[test]
fn polling_and_confirmed_streams_count_reads_and_acknowledgements() {
    for t in ["uds", "tcp", "inproc", "pipe"] {
        let mut r = request("stream", t);
        r.poll = Some(true);
        r.params.0.insert("confirm".into(), "true".into());
        r.size = Some("256".into());
        let case = &plan::cases(&r).unwrap()[0];
        let c = Runner::new(None, false).run_case(case);
        check(&c, 300);
        let writer = &c.roles[0];
        assert_eq!(
            writer.counters.messages_received, 300,
            "{t}: one ack per message"
        );
        assert!(c.roles[1].counters.read_calls >= 300, "{t}: reads counted");
        assert!(
            writer.histogram(Metric::RTT).is_some(),
            "{t}: write-to-ack round trip"
        );
    }
}

/// Every transport with a plain loop has it measured (an adapter without one, iceoryx2, is
/// compared with its peer, shm, in the same run).
#[test]
fn the_floor_of_every_transport_that_has_one_is_measured() {
    let with_floor: Vec<_> = REGISTRY.iter().filter(|t| t.floor().is_some()).collect();
    assert!(
        with_floor.len() >= 10,
        "the built-in transports have floors"
    );
    for t in with_floor {
        let mut r = request("pingpong", t.name());
        r.size = Some("64".into());
        r.count = None;
        // A transport whose figures take long to settle (a JVM broker's first round trips
        // take more than 100 ms) runs longer.
        let slow = t.capabilities(&Default::default()).warmup > Duration::from_millis(200);
        r.duration = Some(if slow { "2s" } else { "100ms" }.into());
        let case = &plan::cases(&r).unwrap()[0];
        let f = Runner::new(None, true)
            .floor(case)
            .unwrap_or_else(|e| panic!("{}: the floor failed: {e}", t.name()))
            .unwrap_or_else(|| panic!("{}: no floor", t.name()));
        // Any positive count: a slow machine may fit few round trips into 100 ms.
        let (min, p50) = (f.rtt_min_ns.unwrap(), f.rtt_p50_ns.unwrap());
        assert!(
            f.samples > 0 && p50 > 0 && min <= p50 && f.bytes_per_s.is_none(),
            "{}: {f:?}",
            t.name()
        );
    }
}

/// Processes: the real binary, its JSON read back.
#[test]
fn every_process_transport_runs_both_workloads_through_the_binary() {
    let dir = temp_dir();
    for w in ["pingpong", "stream"] {
        let json = dir.path().join(format!("{w}.json"));
        let out = run(
            &[
                "run",
                w,
                "-t",
                "pipe,uds,uds-dgram,tcp,udp",
                "--size",
                "64,1k",
                "--count",
                "500",
                "--warmup",
                "10ms",
                "--placement",
                "any",
                "--no-floor",
                "--json",
                json.to_str().unwrap(),
            ],
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{w}: {}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let cases = v["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 10);
        for c in cases {
            let t = c["config"]["transport"].as_str().unwrap();
            let roles = c["roles"].as_array().unwrap();
            assert_eq!(roles.len(), 2, "{t}");
            assert_ne!(
                roles[0]["pid"], roles[1]["pid"],
                "{t}: roles in two processes"
            );
            if t != "udp" {
                assert_eq!(roles[0]["counters"]["messages_sent"], 500, "{t} {w}");
                assert_eq!(roles[1]["counters"]["messages_received"], 500, "{t} {w}");
                assert_eq!(c["summary"]["latency"]["samples"], 500, "{t} {w}");
                assert!(
                    c["summary"]["latency"]["p50_ns"].as_u64().unwrap() > 0,
                    "{t} {w}"
                );
            }
        }
    }
}

/// One host's roles in processes stamp messages from the TSC they share where the kernel's
/// clock is the TSC, and from CLOCK_MONOTONIC where it is not or `MSGPERF_STAMPS=monotonic`
/// asks; either way a stamp of one process and a reading of another give a one-way latency
/// above zero for every message.
#[test]
fn one_hosts_processes_stamp_from_a_shared_tsc_or_the_monotonic_clock() {
    let dir = temp_dir();
    let tsc_host =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
            && cfg!(target_arch = "x86_64");
    for (asked, expected) in [
        ("", if tsc_host { "tsc" } else { "CLOCK_MONOTONIC" }),
        ("monotonic", "CLOCK_MONOTONIC"),
    ] {
        let json = dir.path().join(format!("stamps{asked}.json"));
        let mut cmd = msgperf(&[
            "run",
            "stream",
            "-t",
            "shm,uds",
            "--size",
            "64",
            "--count",
            "2000",
            "--warmup",
            "0s",
            "--no-floor",
            "--json",
            json.to_str().unwrap(),
        ]);
        cmd.env(msgperf::measure::clock::STAMPS_ENV, asked);
        let out = run_command(cmd, Duration::from_secs(120));
        assert!(out.status.success(), "{asked}: {}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let stamp_cost = &v["environment"]["clock"]["shared_tsc_stamp_cost_ns"];
        assert_eq!(
            stamp_cost.is_number(),
            expected == "tsc",
            "{asked}: {stamp_cost}"
        );
        for c in v["cases"].as_array().unwrap() {
            let t = &c["config"]["transport"];
            assert_eq!(c["stamps"], expected, "{asked} {t}");
            let latency = &c["summary"]["latency"];
            assert_eq!(latency["samples"], 2000, "{asked} {t}");
            assert!(
                latency["min_ns"].as_u64().unwrap() > 0,
                "{asked} {t}: {latency}"
            );
            let reader = &c["roles"][1]["counters"];
            let negative = reader["negative"].as_u64().unwrap_or(0);
            assert_eq!(negative, 0, "{asked} {t}: read before sent: {reader}");
        }
    }
}

/// Paced streams (`--rate`): exact counts, and latency measured from the intended send time
/// as well as from the actual one (never less). Rate accuracy is the pacing unit tests' job
/// (fake clock) and the benchmark's, not a timed test's.
#[test]
fn paced_streams_record_latency_from_the_intended_send_time() {
    for t in ["uds", "shm", "udp"] {
        let mut r = request("stream", t);
        r.rate = Some("5khz".into());
        r.size = Some("200".into());
        r.count = Some(500);
        let case = &plan::cases(&r).unwrap()[0];
        let c = Runner::new(None, false).run_case(case);
        assert_eq!(c.error, None, "{t}");
        let s = summarize(&c);
        let (from_send, from_intended) = (
            s.latency.unwrap(),
            s.latency_from_intended.expect("intended-time histogram"),
        );
        assert_eq!(from_intended.samples, from_send.samples, "{t}");
        assert!(
            from_intended.min_ns >= from_send.min_ns && from_intended.max_ns >= from_send.max_ns,
            "{t}"
        );
        assert!(s.send_lag.is_some() && s.rate_error_pct.is_some(), "{t}");
        if t != "udp" {
            assert_eq!(c.roles[1].counters.messages_received, 500, "{t}");
        }
    }
}

/// `--stamp-every N`: every message counted and checked, 1 in N stamped and timed (paced ones
/// too), and the rate counts the messages received up to the last one timed.
#[test]
fn a_stream_that_stamps_every_nth_message_counts_every_one_and_times_one_in_n() {
    for (t, rate) in [
        ("uds", None),
        ("shm", None),
        ("inproc", None),
        ("uds", Some("20khz")),
    ] {
        let what = format!("{t} {rate:?}");
        let mut r = request("stream", t);
        r.params.0.insert("stamp-every".into(), "10".into());
        r.size = Some("64".into());
        r.count = Some(1000);
        r.rate = rate.map(String::from);
        let case = &plan::cases(&r).unwrap()[0];
        let c = Runner::new(None, false).run_case(case);
        assert_eq!(c.error, None, "{what}");
        let (writer, reader) = (&c.roles[0].counters, &c.roles[1].counters);
        assert_eq!(writer.messages_sent, 1000, "{what}");
        assert_eq!(reader.messages_received, 1000, "{what}");
        let s = summarize(&c);
        assert_eq!(
            (s.lost, s.duplicated, s.reordered, s.corrupted),
            (0, 0, 0, 0),
            "{what}"
        );
        // Any 1000 consecutive sequence numbers hold 100 multiples of 10.
        let d = s.latency.expect("one-way latency");
        assert_eq!(d.samples, 100, "{what}");
        assert!(d.min_ns > 0 && d.min_ns <= d.max_ns, "{what}: {d:?}");
        let samples = |role: usize, m: Metric| c.roles[role].histogram(m).map_or(0, |h| h.len());
        assert_eq!(
            samples(0, Metric::SEND_CALL),
            100,
            "{what}: send calls timed"
        );
        // One read call a message, the reader counting its calls from its first: 100 of the
        // 1000 measured ones are timed.
        let reads = samples(1, Metric::RECV_CALL);
        assert_eq!(reads, 100, "{what}: read calls timed");
        // The window ends at the last stamped message: at most 9 arrive after it.
        let in_window = reader.received_in_window();
        assert!((991..=1000).contains(&in_window), "{what}: {in_window}");
        assert!(s.msgs_per_s > 0.0, "{what}");
        if rate.is_some() {
            let intended = s.latency_from_intended.expect("intended-time latency");
            assert_eq!(intended.samples, 100, "{what}");
        }
    }
}

/// `pingpong --time-calls-every N`: every round trip's latency measured and every message
/// counted, the send and read calls of 1 round trip in N timed by each role.
#[test]
fn a_pingpong_that_times_every_nth_call_still_measures_every_round_trip() {
    for t in ["uds", "shm", "inproc"] {
        let mut r = request("pingpong", t);
        r.params.0.insert("time-calls-every".into(), "10".into());
        r.size = Some("64".into());
        r.count = Some(1000);
        let case = &plan::cases(&r).unwrap()[0];
        let c = Runner::new(None, false).run_case(case);
        assert_eq!(c.error, None, "{t}");
        let (initiator, responder) = (&c.roles[0].counters, &c.roles[1].counters);
        assert_eq!(
            (initiator.messages_sent, initiator.messages_received),
            (1000, 1000),
            "{t}"
        );
        assert_eq!(
            (responder.messages_received, responder.messages_sent),
            (1000, 1000),
            "{t}"
        );
        let s = summarize(&c);
        let d = s.latency.expect("round trips");
        assert_eq!(d.samples, 1000, "{t}: every round trip");
        assert!(d.min_ns > 0 && d.min_ns <= d.max_ns, "{t}: {d:?}");
        let samples = |role: usize, m: Metric| c.roles[role].histogram(m).map_or(0, |h| h.len());
        // The initiator's multiples of 10 by sequence number; the responder's every 10th
        // read by its own count: 100 of 1000 consecutive ones either way.
        for (role, name) in [(0, "initiator"), (1, "responder")] {
            assert_eq!(samples(role, Metric::SEND_CALL), 100, "{t}: {name}");
            assert_eq!(samples(role, Metric::RECV_CALL), 100, "{t}: {name}");
        }
        // The responder's window ends at the last request it timed: at most 9 come after it.
        let in_window = responder.received_in_window();
        assert!((991..=1000).contains(&in_window), "{t}: {in_window}");
    }
    let mut r = request("pingpong", "uds");
    r.params.0.insert("time-calls-every".into(), "0".into());
    let refused = plan::cases(&r).unwrap_err().to_string();
    assert!(refused.contains("time-calls-every"), "{refused}");
}

/// `burst`: every burst acknowledged at its last message, every message counted once by both
/// roles, in processes; refused where a lost message would leave a burst unacknowledged.
#[test]
fn bursts_are_acknowledged_at_their_last_message_and_every_message_is_counted() {
    let dir = temp_dir();
    let json = dir.path().join("burst.json");
    let out = run(
        &[
            "run",
            "burst",
            "-t",
            "uds,shm",
            "--burst",
            "1,7",
            "--count",
            "700",
            "--warmup",
            "20ms",
            "--checksum",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: msgperf::result::RunResult =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r.cases.len(), 4, "2 transports x 2 burst sizes");
    for c in &r.cases {
        let burst: u64 = c.config.param("burst").unwrap().parse().unwrap();
        let what = format!("{} burst={burst}", c.config.transport);
        assert_eq!(c.error, None, "{what}");
        let (sender, receiver) = (&c.roles[0], &c.roles[1]);
        assert_eq!(sender.counters.messages_sent, 700, "{what}");
        assert_eq!(receiver.counters.messages_received, 700, "{what}");
        assert_eq!(receiver.counters.lost, 0, "{what}");
        let bursts = sender
            .histogram(Metric::new("burst_rtt_ns", 0))
            .map_or(0, |h| h.len());
        assert_eq!(bursts, 700 / burst, "{what}: a round trip per burst");
        assert_eq!(c.latency_kind.label, "burst round trip", "{what}");
        assert_ne!(sender.pid, receiver.pid, "{what}: two processes");
    }
    let refused = run(&["run", "burst", "-t", "udp"], Duration::from_secs(20));
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("use a reliable transport"),
        "{}",
        text(&refused.stderr)
    );
}
