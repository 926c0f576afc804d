//! The adapters against their real libraries (no mocks): the helpers their tests share (exact
//! counts for ping-pong and streams in processes, publish/subscribe 1 to 5 and 5 to 1 at 1 kHz
//! losing nothing when reliable, losses counted when best-effort, a killed peer or broker
//! ending the case within the timeout, refusals that name what a middleware lacks), and each
//! adapter's own tests, which live in its folder (`src/transport/NAME/tests.rs`, behind its
//! feature) and are included here from the list `build.rs` makes. The contract itself is
//! `tests/conformance.rs`, generated for every registry entry.

// A build with some of the adapters calls some of the helpers.
#![cfg_attr(not(feature = "all-middlewares"), allow(dead_code))]

mod support;

use msgperf::result::RunResult;
use std::time::{Duration, Instant};
use support::*;

/// Waits until role process `pid` has been woken 2000 times: the case is measuring, however
/// long its broker took to start. Its main thread blocks about once per message (1.0-1.6 times
/// unloaded, AMQP the most, more under load), and the callers want more than 100 messages.
/// Or 30 s with the role alive: a slow middleware on a loaded machine exchanges by then (a
/// Kafka round trip took 25 ms and more beside two busy loops: 2000 wakes took over a minute).
fn exchanging(child: &mut std::process::Child, pid: u32) {
    exchanging_by(child, pid, 1);
}

/// [`exchanging`] with both marks `times` higher: for a try again after a role was found busy
/// too early (an opening that waits in short sleeps is woken often too, and on a loaded machine
/// it can wait long).
/// A role that ends first fails the test with what msgperf `child` said.
fn exchanging_by(child: &mut std::process::Child, pid: u32, times: u64) {
    // Or a second of CPU: a reader that polls is never woken (and no role's opening takes
    // that much).
    if let Err(e) = wait_until_busy_or_after(pid, 2000 * times, 100 * times, EXCHANGES_WITHIN) {
        fail_with_output(child, &format!("a role exchanging messages: {e}"));
    }
}

/// How long a role that is alive takes at most to exchange messages (see [`exchanging`]).
const EXCHANGES_WITHIN: Duration = Duration::from_secs(30);

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

/// Runs a command line (`run ...`) and returns its first case, which ran without an error.
fn case_of(line: &str) -> msgperf::result::CaseResult {
    let dir = temp_dir();
    let mut r = result_of(&words(line), &dir.path().join("result.json"));
    let c = r.cases.remove(0);
    assert_eq!(c.error, None, "{line}");
    c
}

/// The value that a case's delivery mapping gives `setting`, if it has it.
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
            // A bound only a hang reaches: a broker just started, on CPUs the rest of the
            // suite keeps busy, once took more than the default 10 s to seat a case's roles.
            "--timeout",
            "60s",
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
            // As in exact_counts: a bound only a hang reaches.
            "--timeout",
            "60s",
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
            .filter(|r| r.role.kind == msgperf::result::RoleKind::new("subscriber"))
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

/// The `--timeout` of a fault test, in seconds: what a fault must be noticed within, and what
/// each role has to get ready in.
const FAULT_TIMEOUT: u64 = 3;

/// How long after a fault a case with `timeout` may end: only a hang passes it.
fn fault_noticed_within(timeout: u64) -> Duration {
    Duration::from_secs(timeout + 12)
}

/// A responder killed mid-run ends the case within the timeout (`timeout` seconds), naming
/// it, and the initiator's round trips until then are kept.
fn killed_peer_ends_the_case(transport: &str, extra: &[&str], timeout: u64) {
    // A peer that polls (Aeron's) spends its second of CPU, or is woken its 2000 times while
    // it waits in short sleeps for its publication to connect, before the case measures when
    // the machine is loaded, and is killed before the first round trip, which tests nothing:
    // tried again, twice at most, waiting three times as long each time.
    for times in [1, 3] {
        if kill_peer_once(transport, extra, times, timeout) {
            return;
        }
        eprintln!("{transport}: killed before its first round trip: again");
    }
    assert!(
        kill_peer_once(transport, extra, 9, timeout),
        "{transport}: the peer was killed before its first round trip, three times"
    );
}

/// One try of [`killed_peer_ends_the_case`], waiting for the peer to be `busier` times as busy
/// as [`exchanging`] does: whether the initiator had measured a round trip by then (how many
/// depends on how loaded the machine is: under two busy loops an Aeron case made 4 to 92).
fn kill_peer_once(transport: &str, extra: &[&str], busier: u64, timeout: u64) -> bool {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let timeout_arg = format!("{timeout}s");
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
        &timeout_arg,
        "--no-floor",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut child = spawn(&args);
    let peer = wait_for_role(&mut child, "responder");
    exchanging_by(&mut child, peer, busier);
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
        start.elapsed() < fault_noticed_within(timeout),
        "{transport}: {:?}",
        start.elapsed()
    );
    assert!(
        text(&out.stderr).contains("responder"),
        "{}",
        text(&out.stderr)
    );
    let r: RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let case = &r.cases[0];
    let initiator = case.roles.first();
    let initiator =
        initiator.unwrap_or_else(|| panic!("{transport}: no initiator: {}", text(&out.stderr)));
    let sent = initiator.counters.messages_sent;
    let samples = initiator
        .histograms
        .get(&case.latency_metric)
        .map_or(0, |h| h.decode().unwrap().len());
    // Each round trip it finished is kept, as a sample of its latency.
    assert!(
        samples <= sent,
        "{transport}: {samples} samples of {sent} sent"
    );
    samples > 0
}

/// A command line the middleware cannot carry out: exit 2, naming what it lacks.
/// A command line written as one string: its words (no argument here holds a space).
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// A killed peer, a killed and a stopped broker (`program`) each end the case within the
/// timeout (`timeout` seconds), and the broker dies with msgperf.
#[cfg(feature = "_broker")]
fn peer_and_broker_faults_end_the_case(transport: &str, program: &str, timeout: u64) {
    killed_peer_ends_the_case(transport, &[], timeout);
    broker_fault_ends_the_case(transport, program, libc::SIGKILL, timeout);
    broker_fault_ends_the_case(transport, program, libc::SIGSTOP, timeout);
    broker_dies_with_msgperf(transport, program);
}

/// A broker URL where nobody listens fails the case in one line that asks `question`.
fn names_an_absent_broker(transport: &str, url: &str, question: &str) {
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            transport,
            "--opt",
            &format!("broker={url}"),
            "--timeout",
            "2s",
            "--no-floor",
        ],
        Duration::from_secs(60),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(question), "{err}");
}

fn refused(args: &[&str], says: &str) {
    let out = run(args, Duration::from_secs(30));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
}

/// The broker msgperf `child` started for its case: a child (of any of its threads) running
/// `program`.
#[cfg(feature = "_service")]
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
fn broker_fault_ends_the_case(transport: &str, program: &str, sig: i32, timeout: u64) {
    service_fault_ends_the_case(transport, program, "broker", sig, timeout)
}

/// A process the case's set-up started (a broker, a media driver: `label` in the error),
/// whose command line has `program`, killed or stopped mid-run: as for a broker.
///
/// From outside, a role that polls looks the same opening and exchanging: a fault that struck
/// before the exchange (nothing sent) must still end the case naming the process, leaving
/// nothing, and the run is tried again, waiting longer before the fault.
#[cfg(feature = "_service")]
fn service_fault_ends_the_case(
    transport: &str,
    program: &str,
    label: &str,
    sig: i32,
    timeout: u64,
) {
    for attempt in 0..3 {
        let sent = service_fault_once(transport, program, label, sig, attempt * 3, timeout);
        if sent > 100 {
            return;
        }
    }
    panic!("{transport}: the {label} was signalled before the exchange in 3 tries");
}

/// One run of [`service_fault_ends_the_case`], the fault `after` seconds more: what was sent.
#[cfg(feature = "_service")]
fn service_fault_once(
    transport: &str,
    program: &str,
    label: &str,
    sig: i32,
    after: u64,
    timeout: u64,
) -> u64 {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let timeout_arg = format!("{timeout}s");
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
        &timeout_arg,
        "--no-floor",
        "--json",
        json.to_str().unwrap(),
    ]);
    let pid = child.id();
    let broker = broker_of(&mut child, program);
    let responder = wait_for_role(&mut child, "responder");
    exchanging(&mut child, responder);
    std::thread::sleep(Duration::from_secs(after));
    let start = Instant::now();
    signal(broker, sig);
    let out = wait_output(child, Duration::from_secs(60));
    let took = start.elapsed();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{transport}: {err}");
    assert!(took < fault_noticed_within(timeout), "{took:?}");
    assert!(
        err.contains(label),
        "signal {sig}, the case ended {took:?} after it: {err}"
    );
    assert!(!alive(broker), "{program} {broker} is still there");
    assert_eq!(leftovers_of(pid), Vec::<String>::new());
    let r: RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    r.cases[0].roles[0].counters.messages_sent
}

/// A minute's ping-pong on `transport`, its pid, and the pid of its broker `program` once
/// that has started.
#[cfg(feature = "_broker")]
fn long_run_with_broker(transport: &str, program: &str) -> (std::process::Child, u32, u32) {
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
    (child, pid, broker)
}

/// Waits (10 s at most) for the broker `program` at `broker` to be gone.
#[cfg(feature = "_broker")]
fn broker_gone(program: &str, broker: u32) {
    let end = Instant::now() + Duration::from_secs(10);
    while alive(broker) {
        assert!(Instant::now() < end, "{program} {broker} outlived msgperf");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A broker dies with the msgperf that started it, even one killed with SIGKILL.
#[cfg(feature = "_broker")]
fn broker_dies_with_msgperf(transport: &str, program: &str) {
    let (mut child, pid, broker) = long_run_with_broker(transport, program);
    wait_for_role(&mut child, "responder");
    signal(pid, libc::SIGKILL);
    let _ = wait_output(child, Duration::from_secs(30));
    broker_gone(program, broker);
    // A process killed with SIGKILL removes nothing: its broker's directory is the test's to
    // remove.
    for d in leftovers_of(pid) {
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(d));
    }
}

/// Ctrl-C while the broker starts acts at once: the run ends interrupted (exit 130) within
/// seconds, not once the broker has booted, and the broker goes with it.
#[cfg(feature = "_broker")]
fn stopped_while_the_broker_starts(transport: &str, program: &str) {
    let (child, pid, broker) = long_run_with_broker(transport, program);
    let stopped = Instant::now();
    signal(pid, libc::SIGINT);
    let out = wait_output(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "{transport}: Ctrl-C took {:?}",
        stopped.elapsed()
    );
    broker_gone(program, broker);
    assert!(leftovers_of(pid).is_empty(), "{:?}", leftovers_of(pid));
}

/// The broker is a role of the case: pinned with the non-driving roles, its CPU measured over
/// the messages the driving roles sent through it.
#[cfg(feature = "_broker")]
fn broker_is_measured(r: &RunResult) {
    for c in &r.cases {
        let b = c
            .roles
            .iter()
            .find(|r| r.role.kind == msgperf::result::RoleKind::BROKER)
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

// Each adapter's own tests, from its folder.
include!(concat!(env!("OUT_DIR"), "/transport_tests.rs"));

/// `msgperf run pubsub -t TRANSPORT` at 500 Hz for 1 s, reliable, with hosts b and c made as
/// namespaces, and `args` (subscribers, placements): its one case, once it ran without an
/// error, more than 100 messages were sent, and no namespace is left behind.
fn pubsub_across_namespaces(transport: &str, args: &[&str]) -> msgperf::result::CaseResult {
    let dir = temp_dir();
    let out = dir.path().join("r.json");
    let mut all = vec![
        "run",
        "pubsub",
        "-t",
        transport,
        "--rate",
        "500hz",
        "--duration",
        "1s",
        "--delivery",
        "reliable",
        "--host",
        "b=netns",
        "--host",
        "c=netns",
    ];
    all.extend_from_slice(args);
    let out_arg = out.display().to_string();
    all.extend(["--json", &out_arg]);
    let child = spawn(&all);
    let pid = child.id();
    let o = wait_output(child, Duration::from_secs(180));
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    let mut r: RunResult = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let c = r.cases.remove(0);
    assert_eq!(c.error, None);
    let sent = c.roles[0].counters.messages_sent;
    assert!(sent >= 100, "{sent}");
    assert_eq!(beds_of(pid), Vec::<String>::new());
    c
}

/// Publish/subscribe 1 to 3 with the subscribers on two namespace hosts (b, c, c), the
/// publisher here: every message reaches every subscriber, and the namespaces are gone
/// afterwards. For transports that find their peers by address across hosts.
fn subscribers_on_namespace_hosts_count_every_message(transport: &str) {
    if !namespaces_work() {
        return;
    }
    let c = pubsub_across_namespaces(
        transport,
        &["--subs", "3", "--no-floor", "--place", "subscriber=b,c,c"],
    );
    let sent = c.roles[0].counters.messages_sent;
    let hosts: Vec<_> = c
        .roles
        .iter()
        .filter(|r| r.role.kind.label() == "subscriber")
        .map(|s| {
            assert_eq!(s.counters.messages_received, sent, "{}", s.role);
            s.host.as_ref().map(|h| h.name.clone()).unwrap_or_default()
        })
        .collect();
    assert_eq!(hosts, ["b", "c", "c"]);
}

/// Publish/subscribe 1 to 2 with the broker msgperf starts placed on a namespace host and the
/// subscribers on another: every message arrives, the broker's CPU is measured on its host,
/// and the namespaces are gone afterwards.
fn placed_broker_counts_every_message(transport: &str) {
    if !namespaces_work() {
        return;
    }
    let c = pubsub_across_namespaces(
        transport,
        &[
            "--subs",
            "2",
            "--place",
            "subscriber=b",
            "--place",
            "broker=c",
        ],
    );
    let sent = c.roles[0].counters.messages_sent;
    let subs: Vec<_> = c
        .roles
        .iter()
        .filter(|r| r.role.kind.label() == "subscriber")
        .collect();
    assert_eq!(subs.len(), 2);
    for s in subs {
        assert_eq!(s.counters.messages_received, sent);
        assert_eq!(s.host.as_ref().map(|h| h.name.as_str()), Some("b"));
    }
    let broker = c
        .roles
        .iter()
        .find(|r| r.role.kind.label() == "broker")
        .unwrap();
    assert_eq!(broker.host.as_ref().map(|h| h.name.as_str()), Some("c"));
    assert!(
        broker.cpu.user_ns + broker.cpu.sys_ns > 0,
        "{:?}",
        broker.cpu
    );
}

/// Publish/subscribe 1 to 2 with the broker placed on a host reached through ssh (an sshd of
/// the test's own in a namespace): a msgperf there starts it, measures its CPU on its host
/// and removes it; every message arrives; nothing is left under that sshd. Then the same with
/// the broker killed mid-run there: the case ends within the timeout naming it and its host.
fn broker_on_an_ssh_host_counts_every_message(transport: &str, program: &str) {
    if !namespaces_work() {
        return;
    }
    let Some(sshd) = Sshd::start(70) else {
        return;
    };
    let dir = temp_dir();
    let out = dir.path().join("r.json");
    let launcher = sshd.launcher();
    let args = |length: &'static str| {
        let mut a = two_subscribers(transport, "64");
        a.extend("--rate 500hz --delivery reliable --timeout 3s --place broker=b".split(' '));
        a.extend(["--duration", length, "--host", &launcher]);
        a
    };
    let (o, r) = output_and_result(&args("1s"), &out);
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    let c = &r.cases[0];
    assert_eq!(c.error, None);
    let sent = c.roles[0].counters.messages_sent;
    assert!(sent >= 100, "{sent}");
    for s in c
        .roles
        .iter()
        .filter(|r| r.role.kind.label() == "subscriber")
    {
        assert_eq!(s.counters.messages_received, sent, "{}", s.role);
    }
    let broker = c
        .roles
        .iter()
        .find(|r| r.role.kind.label() == "broker")
        .expect("the broker's row");
    let host = broker.host.as_ref().expect("the broker's host");
    assert_eq!(host.name, "b");
    assert!(host.launcher.starts_with("ssh -T"), "{}", host.launcher);
    assert!(
        broker.cpu.user_ns + broker.cpu.sys_ns > 0,
        "{:?}",
        broker.cpu
    );
    assert!(broker.counters.relayed >= sent, "{:?}", broker.counters);
    sshd.waits_for_its_roles_to_end("a far broker outlived its case");

    // Killed there mid-run: named with its host, within the timeout.
    let mut child = spawn(&args("60s"));
    let broker = wait_for(&mut child, "the far broker", |_| {
        sshd.descendants().into_iter().find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| program.starts_with(c.trim()))
        })
    });
    wait_until_woken(
        wait_for_role(&mut child, "subscriber 1"),
        1200,
        "a subscriber",
    );
    signal(broker, libc::SIGKILL);
    let killed = Instant::now();
    let o = wait_output(child, Duration::from_secs(60));
    let err = text(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        killed.elapsed() < Duration::from_secs(12),
        "ended {:?} after the kill: {err}",
        killed.elapsed()
    );
    assert!(
        err.contains("the broker on host b") && err.contains("died"),
        "{err}"
    );
    sshd.waits_for_its_roles_to_end("a far broker outlived its killed broker");
}
