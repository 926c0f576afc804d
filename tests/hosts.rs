//! Roles on other hosts (issue 38), with hosts made on this machine: network namespaces on a
//! bridge (`--host NAME=netns`), a launcher the test gives (`ip netns exec`), a far clock set
//! seconds ahead in a time namespace (`unshare --time`). Exact counts, the measured offset
//! against the one injected, faults named, and nothing left behind.

mod support;

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

/// Returns once the local subscriber 1 of msgperf `child` has blocked 1200 times waiting for
/// messages (once a message at most): past the warm-up's (200 ms at 1-2 kHz), so the case is
/// measuring, however slowly a loaded machine started it.
fn measuring(child: &mut std::process::Child) {
    let local = wait_for_role(child, "subscriber 1");
    wait_until_blocked(local, 1200, "the local subscriber");
}

/// `msgperf run pingpong -t tcp` with its responder on host `b`, reached by `launcher`
/// (`b=...`), within a timeout of 3 s: what it printed, and its exit status.
fn pingpong_through(launcher: &str) -> (Option<i32>, String) {
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "tcp",
            "--count",
            "100",
            "--no-floor",
            "--timeout",
            "3s",
            "--host",
            launcher,
            "--place",
            "responder=b",
        ],
        Duration::from_secs(60),
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    (out.status.code(), all)
}

/// A measured second after a warm-up, and a short run with no floor: the lengths of the
/// streams below.
const LONG: &[&str] = &["--duration", "1s", "--warmup", "100ms"];
const SHORT: &[&str] = &["--duration", "300ms", "--no-floor"];

/// `msgperf run stream -t tcp --rate 1khz` of `length`, with its `role` on host b reached as
/// `launcher` (`b=...`) says, its result written to `json`.
fn stream_with_b(launcher: &str, role: &str, length: &[&str], json: &std::path::Path) -> Command {
    let place = format!("{role}=b");
    let mut args = vec!["run", "stream", "-t", "tcp", "--rate", "1khz"];
    args.extend_from_slice(length);
    args.extend(["--host", launcher, "--place", &place]);
    args.extend(["--json", json.to_str().unwrap()]);
    msgperf(&args)
}

/// A minute's `msgperf run pubsub -t tcp` at 1 kHz to two subscribers, the second on host b
/// reached as `launcher` (`b=...`) says, with a timeout of 3 s: for faults injected mid-run.
fn pubsub_with_subscriber_on_b(launcher: &str, json: &std::path::Path) -> std::process::Child {
    spawn(&[
        "run",
        "pubsub",
        "-t",
        "tcp",
        "--subs",
        "2",
        "--rate",
        "1khz",
        "--duration",
        "60s",
        "--timeout",
        "3s",
        "--no-floor",
        "--host",
        launcher,
        "--place",
        "subscriber=local,b",
        "--json",
        json.to_str().unwrap(),
    ])
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn subscribers_on_three_namespace_hosts_get_every_message() {
    if !namespaces_work() {
        return;
    }
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let child = spawn(&[
        "run",
        "pubsub",
        "-t",
        "tcp,udp",
        "--subs",
        "3",
        "--rate",
        "500hz",
        "--duration",
        "1s",
        "--warmup",
        "100ms",
        "--host",
        "b=netns",
        "--host",
        "c=netns",
        "--host",
        "d=netns",
        "--place",
        "subscriber=b,c,d",
        "--json",
        out_file.to_str().unwrap(),
    ]);
    let pid = child.id();
    let out = wait_output(child, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("host b cpu"),
        "{}",
        text(&out.stdout)
    );
    let run = json(&out_file);
    for case in run["cases"].as_array().unwrap() {
        let t = case["config"]["transport"].as_str().unwrap();
        assert!(case["error"].is_null(), "{t}: {}", case["error"]);
        let roles = case["roles"].as_array().unwrap();
        let sent = roles[0]["counters"]["messages_sent"].as_u64().unwrap();
        assert!(sent >= 100, "{t}: the publisher sent {sent}");
        // Every delivered message crossed a namespace's link, which the bed's devices count.
        let delivered: u64 = roles[1..]
            .iter()
            .map(|r| r["counters"]["messages_received"].as_u64().unwrap())
            .sum();
        let size = case["config"]["size_bytes"].as_u64().unwrap();
        let wire = case["wire"]["bytes"].as_u64();
        assert!(
            wire.is_some_and(|b| b >= delivered * size),
            "{t}: {} on the wire for {delivered} messages of {size} B",
            case["wire"]
        );
        for (r, host) in roles[1..].iter().zip(["b", "c", "d"]) {
            let c = &r["counters"];
            let got = c["messages_received"].as_u64().unwrap();
            // Integrity is checked per message; a datagram may be dropped, and is counted.
            assert_eq!(got + c["lost"].as_u64().unwrap(), sent, "{t} {r}");
            assert_eq!(r["host"]["name"], host, "{t}");
            let clock = &r["host"]["clock"];
            assert!(clock["probes"].as_u64().unwrap() >= 16, "{t}: {clock}");
            assert!(clock["bound_ns"].as_u64().unwrap() > 0, "{t}: {clock}");
            // One machine, one clock: the offset is zero within its bound.
            let off = clock["offset_ns"].as_i64().unwrap().unsigned_abs();
            assert!(off <= clock["bound_ns"].as_u64().unwrap(), "{t}: {clock}");
        }
    }
    assert_eq!(beds_of(pid), Vec::<String>::new());
}

#[test]
fn a_far_clock_seconds_ahead_is_measured_within_its_bound() {
    if !namespaces_work() {
        return;
    }
    let ns = Netns::make("t", 61);
    let launcher = format!(
        "b=ip netns exec {} unshare --time --fork --kill-child --monotonic 5 --",
        ns.name
    );
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let out = run_command(
        stream_with_b(&launcher, "reader", LONG, &out_file),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let run = json(&out_file);
    let case = &run["cases"][0];
    let reader = &case["roles"][1];
    let clock = &reader["host"]["clock"];
    let offset = clock["offset_ns"].as_i64().unwrap();
    let bound = clock["bound_ns"].as_u64().unwrap();
    assert!(
        offset.abs_diff(5_000_000_000) <= bound,
        "offset {offset} ns, bound {bound} ns: {clock}"
    );
    assert_eq!(reader["host"]["address"], "10.251.61.2");
    // Two hosts share no counter: their messages are stamped from CLOCK_MONOTONIC.
    assert_eq!(case["stamps"], "CLOCK_MONOTONIC");
    // Corrected, one-way latency across the veth link is micro- to milliseconds, not seconds.
    let got = reader["counters"]["messages_received"].as_u64().unwrap();
    assert!(got >= 900, "{got}");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("clock +4.9999") || stdout.contains("clock +5.0000"),
        "{stdout}"
    );
    let h = msgperf::histogram::EncodedHistogram(
        reader["histograms"]["one_way_ns"].as_str().unwrap().into(),
    )
    .decode()
    .unwrap();
    assert!(
        h.value_at_quantile(0.5) < 50_000_000,
        "p50 {} ns",
        h.value_at_quantile(0.5)
    );
}

#[test]
fn a_far_role_killed_mid_run_is_named_and_the_others_are_kept() {
    if !namespaces_work() {
        return;
    }
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let mut child = pubsub_with_subscriber_on_b("b=netns", &out_file);
    let pid = child.id();
    // The far role: `ip netns exec` becomes `msgperf role --stdio`.
    let far = wait_for_role(&mut child, "--stdio subscriber 2");
    measuring(&mut child);
    let killed = Instant::now();
    signal(far, libc::SIGKILL);
    let out = wait_output(child, Duration::from_secs(60));
    let took = killed.elapsed();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{all}");
    assert!(took < Duration::from_secs(20), "{took:?}: {all}");
    assert!(all.contains("subscriber 2 on host b"), "{all}");
    let run = json(&out_file);
    let roles = run["cases"][0]["roles"].as_array().unwrap();
    let local = roles
        .iter()
        .find(|r| r["role"]["kind"] == "subscriber" && r["role"]["number"] == 1)
        .unwrap();
    assert!(
        local["counters"]["messages_received"].as_u64().unwrap() > 100,
        "{local}"
    );
    assert_eq!(beds_of(pid), Vec::<String>::new());
}

#[test]
fn a_launcher_that_fails_is_named_with_the_host() {
    for (launcher, said) in [
        (
            "b=/nonexistent/launcher -x",
            &["host b", "/nonexistent/launcher"][..],
        ),
        // A launcher that runs but brings no msgperf: the far side never says hello.
        (
            "b=sh -c 'echo nothing here >&2; exit 3' --",
            &["no msgperf answered", "nothing here"][..],
        ),
        // A launcher that hangs: ended after its log-in's bound, not tried at another path.
        (
            "b=sh -c 'sleep 61.25' --",
            &["no msgperf answered", "within 15s", "hung"][..],
        ),
    ] {
        let (code, all) = pingpong_through(launcher);
        assert_ne!(code, Some(0), "{all}");
        assert!(said.iter().all(|s| all.contains(s)), "{all}");
    }
    let hung = std::process::Command::new("pgrep")
        .args(["-f", "sleep 61.25"])
        .output();
    assert!(
        hung.is_ok_and(|o| o.stdout.is_empty()),
        "the hung launcher outlived msgperf"
    );
}

#[test]
fn placements_that_cannot_run_are_refused_before_anything_starts() {
    for (args, says) in [
        (
            vec!["--place", "responder=zz"],
            "no host `zz`: define it with --host zz=",
        ),
        (
            vec!["--host", "b=netns", "--place", "nobody=b"],
            "pingpong has no nobody; its roles are initiator, responder",
        ),
        (
            vec!["--host", "b=netns", "--place", "responder=b:x"],
            "`x` is not a CPU number",
        ),
        (
            vec!["-t", "uds", "--host", "b=netns", "--place", "responder=b"],
            "cannot join roles on different hosts: use one that can (",
        ),
        (vec!["--host", "local=netns"], "and not `local`"),
    ] {
        let mut all = vec!["run", "pingpong", "--count", "10"];
        if !args.contains(&"-t") {
            all.extend(["-t", "tcp"]);
        }
        all.extend(args.iter());
        let out = run(&all, Duration::from_secs(30));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(says), "{all:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // `msgperf serve` takes connections without authentication: never where others reach it.
    let out = run(
        &["serve", "-t", "tcp", "--listen", "0.0.0.0:7000", "--once"],
        Duration::from_secs(30),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("only on loopback") && err.contains("ssh -L"),
        "{err}"
    );
}

#[test]
fn pubsub_through_ssh_to_an_sshd_in_a_namespace() {
    if !namespaces_work() {
        return;
    }
    let Some(sshd) = Sshd::start(62) else {
        return;
    };
    let launcher = sshd.launcher();
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "pubsub",
            "-t",
            "tcp",
            "--subs",
            "3",
            "--rate",
            "500hz",
            "--duration",
            "1s",
            "--warmup",
            "100ms",
            "--host",
            &launcher,
            "--place",
            "subscriber=local,b,b",
            "--json",
            out_file.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let run = json(&out_file);
    let roles = run["cases"][0]["roles"].as_array().unwrap();
    let sent = roles[0]["counters"]["messages_sent"].as_u64().unwrap();
    for r in &roles[1..] {
        assert_eq!(
            r["counters"]["messages_received"].as_u64(),
            Some(sent),
            "{r}"
        );
    }
    for r in &roles[2..] {
        // ssh says where it came in: the far side's address on the link.
        assert_eq!(r["host"]["address"], "10.251.62.2", "{r}");
        assert!(r["host"]["launcher"]
            .as_str()
            .unwrap()
            .starts_with("ssh -T"));
    }
}

#[test]
fn a_namespace_whose_link_goes_down_mid_run_ends_the_case_within_the_timeout() {
    if !namespaces_work() {
        return;
    }
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let mut child = spawn(&[
        "run",
        "pubsub",
        "-t",
        "tcp",
        "--subs",
        "2",
        "--rate",
        "2khz",
        "--size",
        "4k",
        "--duration",
        "60s",
        "--timeout",
        "3s",
        "--no-floor",
        "--host",
        "b=netns",
        "--place",
        "subscriber=local,b",
        "--json",
        out_file.to_str().unwrap(),
    ]);
    let pid = child.id();
    measuring(&mut child);
    // The bridge's end of host b's link (the first netns host's).
    let link = format!("mp{pid}h0");
    let down = Command::new("ip")
        .args(["link", "set", &link, "down"])
        .status()
        .unwrap();
    assert!(down.success(), "ip link set {link} down");
    let at = Instant::now();
    let out = wait_output(child, Duration::from_secs(60));
    let took = at.elapsed();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{all}");
    assert!(took < Duration::from_secs(20), "{took:?}: {all}");
    let run = json(&out_file);
    let case = &run["cases"][0];
    assert!(!case["error"].is_null(), "{all}");
    let local = &case["roles"][1];
    assert_eq!(local["role"]["number"], 1);
    assert!(
        local["counters"]["messages_received"].as_u64().unwrap() > 100,
        "{local}"
    );
    assert_eq!(beds_of(pid), Vec::<String>::new());
}

#[test]
fn a_far_side_that_lies_is_refused_and_named() {
    use msgperf::exec::control::{write_frame, FarHello, FromRole};
    let dir = temp_dir();
    let frame = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let mut other_build = Vec::new();
    write_frame(
        &mut other_build,
        &FromRole::Hello(Box::new(FarHello {
            msgperf_version: env!("CARGO_PKG_VERSION").into(),
            build: "deadbeef".into(),
            addresses: vec!["127.0.0.1".into()],
            environment: Default::default(),
        })),
    )
    .unwrap();
    let mut oversized = b"MPC\x02".to_vec();
    oversized.extend(u32::MAX.to_le_bytes());
    let mut truncated = b"MPC\x02".to_vec();
    truncated.extend(100u32.to_le_bytes());
    truncated.extend(b"{\"He");
    for (said, bytes, hold) in [
        (
            "not a msgperf control frame",
            b"SSH-2.0-OpenSSH hello, not msgperf".to_vec(),
            true,
        ),
        (
            "speaks control version 1",
            b"MPC\x01\x02\x00\x00\x00{}".to_vec(),
            true,
        ),
        ("build deadbeef", other_build, true),
        ("over the", oversized, true),
        ("cut short", truncated, false),
    ] {
        let file = frame("said", &bytes);
        // The far side says this and, where `hold`, keeps its end open: no hang either way.
        let launcher = format!(
            "b=sh -c 'cat {}{}' --",
            file.display(),
            if hold { "; sleep 30" } else { "" }
        );
        let start = Instant::now();
        let (code, all) = pingpong_through(&launcher);
        assert_eq!(code, Some(1), "{said}: {all}");
        assert!(
            all.contains("host b") && all.contains(said),
            "{said}: {all}"
        );
        assert!(start.elapsed() < Duration::from_secs(20), "{said}: {all}");
    }
}

#[test]
fn deploy_copies_this_build_where_a_run_then_finds_it() {
    if !namespaces_work() {
        return;
    }
    let ns = Netns::make("d", 63);
    let home = temp_dir();
    // A far side whose filesystem lacks this binary's path: the launcher refuses absolute
    // programs (exit 127, as ssh does for a missing one) and starts the rest in its "home".
    let launcher = format!(
        "b=ip netns exec {} sh -c 'cd {} && case \"$0\" in /*) echo \"$0: not found\" >&2; exit 127;; esac; exec \"$0\" \"$@\"'",
        ns.name,
        home.path().display()
    );
    let out = run(&["deploy", "--host", &launcher], Duration::from_secs(120));
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    let copy = std::fs::read_dir(home.path().join(".cache/msgperf"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect::<Vec<_>>();
    assert_eq!(copy.len(), 1, "{copy:?}");
    assert!(std::fs::read(&copy[0]).unwrap() == std::fs::read(MSGPERF).unwrap());
    assert!(said.contains("host b: msgperf"), "{said}");
    // The run finds no msgperf at this binary's path there, then the deployed one.
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "tcp",
            "--count",
            "300",
            "--no-floor",
            "--host",
            &launcher,
            "--place",
            "responder=b",
        ],
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("host b cpu"));
}

#[test]
fn a_killed_ssh_launcher_ends_the_case_and_its_far_role() {
    if !namespaces_work() {
        return;
    }
    let Some(sshd) = Sshd::start(64) else {
        return;
    };
    let launcher = sshd.launcher();
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let mut child = pubsub_with_subscriber_on_b(&launcher, &out_file);
    // The launcher here: ssh, whose command line carries the far role's.
    let ssh = wait_for_role(&mut child, "--stdio subscriber 2");
    measuring(&mut child);
    let killed = Instant::now();
    signal(ssh, libc::SIGKILL);
    let out = wait_output(child, Duration::from_secs(60));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{all}");
    assert!(killed.elapsed() < Duration::from_secs(20), "{all}");
    assert!(all.contains("subscriber 2 on host b"), "{all}");
    let run = json(&out_file);
    let local = &run["cases"][0]["roles"][1];
    assert!(
        local["counters"]["messages_received"].as_u64().unwrap() > 100,
        "{local}"
    );
    // The far role, under this test's sshd, sees its stdin end and goes.
    sshd.waits_for_its_roles_to_end("a far role outlived its launcher");
}

/// The link to a host reached through ssh goes down mid-run: ssh notices nothing (its TCP
/// connection just goes quiet), so the runner finds the host lost by its silence, ends the case
/// within the timeout naming the role and host, keeps the local subscriber's figures, and stops
/// its ssh; the far role, hearing nothing from its runner, stops itself.
#[test]
fn a_link_to_an_ssh_host_that_goes_down_ends_the_case_and_its_far_role() {
    if !namespaces_work() {
        return;
    }
    let Some(sshd) = Sshd::start(67) else {
        return;
    };
    let launcher = sshd.launcher();
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let mut child = pubsub_with_subscriber_on_b(&launcher, &out_file);
    let pid = child.id();
    let ssh = wait_for_role(&mut child, "--stdio subscriber 2");
    measuring(&mut child);
    let down = Command::new("ip")
        .args(["link", "set", &sshd.link(), "down"])
        .status()
        .unwrap();
    assert!(down.success(), "ip link set {} down", sshd.link());
    let at = Instant::now();
    let out = wait_output(child, Duration::from_secs(60));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(at.elapsed() < Duration::from_secs(20), "{all}");
    assert!(all.contains("subscriber 2 on host b"), "{all}");
    let run = json(&out_file);
    let case = &run["cases"][0];
    assert!(
        case["error"].as_str().is_some_and(|e| e.contains("host b")),
        "{case}"
    );
    let local = &case["roles"][1];
    assert_eq!(local["role"]["number"], 1);
    assert!(
        local["counters"]["messages_received"].as_u64().unwrap() > 100,
        "{local}"
    );
    assert!(!alive(ssh), "the ssh launcher outlived the run");
    assert_eq!(children(pid), Vec::<u32>::new());
    sshd.waits_for_its_roles_to_end("a far role outlived its lost link");
}

#[test]
fn a_time_daemon_s_own_bound_is_recorded_beside_the_measured_one() {
    if !namespaces_work() {
        return;
    }
    // A chronyc that answers as chrony does (`-c tracking`), first on the PATH both sides see.
    let dir = temp_dir();
    let fake = dir.path().join("chronyc");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'C0000201,192.0.2.1,3,1764201600.1,-0.000012345,-0.00001,0.00002,-12.3,-0.001,0.05,0.004,0.0005,64.5,Normal'\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
    let out_file = dir.path().join("r.json");
    let mut cmd = stream_with_b("b=netns", "reader", SHORT, &out_file);
    cmd.env(
        "PATH",
        format!(
            "{}:{}",
            dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    );
    let out = run_command(cmd, Duration::from_secs(60));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let run = json(&out_file);
    assert_eq!(run["environment"]["time_sync"]["bound_ns"], 2_500_000);
    let far = &run["cases"][0]["roles"][1]["host"]["environment"]["time_sync"];
    assert_eq!(far["source"], "chrony, stratum 3, 192.0.2.1", "{far}");
    assert_eq!(far["offset_ns"], -12_345);
    assert!(
        stdout.contains("its time daemon says ± 2500.0 us"),
        "{stdout}"
    );
}

#[test]
fn a_far_role_stops_itself_when_its_runner_goes_silent() {
    if !namespaces_work() {
        return;
    }
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let mut child = pubsub_with_subscriber_on_b("b=netns", &out_file);
    let pid = child.id();
    let far = wait_for_role(&mut child, "--stdio subscriber 2");
    measuring(&mut child);
    // The runner frozen: its link to the far side stays open but says nothing, as behind a
    // partition. Thawed again however this test ends.
    struct Frozen(u32);
    impl Drop for Frozen {
        fn drop(&mut self) {
            signal(self.0, libc::SIGCONT);
        }
    }
    signal(pid, libc::SIGSTOP);
    let frozen = Frozen(pid);
    let gone = || {
        std::fs::read_to_string(format!("/proc/{far}/stat")).map_or(true, |s| {
            matches!(
                s.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next()),
                Some("Z" | "X")
            )
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !gone() {
        assert!(
            Instant::now() < deadline,
            "the far role outlived its runner's silence"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(frozen);
    let out = wait_output(child, Duration::from_secs(60));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("subscriber 2 on host b"), "{all}");
    assert!(all.contains("the runner sent nothing"), "{all}");
    let run = json(&out_file);
    let local = &run["cases"][0]["roles"][1];
    assert!(
        local["counters"]["messages_received"].as_u64().unwrap() > 100,
        "{local}"
    );
    assert_eq!(beds_of(pid), Vec::<String>::new());
}

/// A launcher that passes the far side's stdout on `delay` seconds late: a control path slower
/// one way than the other, which no probe can tell from a clock offset.
const SLOW_BACK: &str = r#"
import collections, os, subprocess, sys, threading, time
delay = float(sys.argv[1])
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE)
queue, ready = collections.deque(), threading.Condition()
def pump():
    while True:
        data = os.read(child.stdout.fileno(), 65536)
        with ready:
            queue.append((time.monotonic() + delay, data))
            ready.notify()
        if not data:
            return
threading.Thread(target=pump, daemon=True).start()
while True:
    with ready:
        while not queue:
            ready.wait()
        at, data = queue.popleft()
    time.sleep(max(0.0, at - time.monotonic()))
    if not data:
        break
    while data:
        data = data[os.write(1, data):]
sys.exit(child.wait())
"#;

#[test]
fn samples_below_zero_from_an_asymmetric_path_are_kept_and_marked() {
    if !namespaces_work() {
        return;
    }
    let ns = Netns::make("n", 65);
    let dir = temp_dir();
    let relay = dir.path().join("slow_back.py");
    std::fs::write(&relay, SLOW_BACK).unwrap();
    // Replies to the runner's probes come 20 ms late, its probes at once: the offset comes out
    // 10 ms off, and a writer there seems to send 10 ms later than it did.
    let launcher = format!(
        "b=python3 {} 0.02 ip netns exec {}",
        relay.display(),
        ns.name
    );
    let out_file = dir.path().join("r.json");
    let out = run_command(
        stream_with_b(&launcher, "writer", LONG, &out_file),
        Duration::from_secs(120),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let run = json(&out_file);
    let reader = &run["cases"][0]["roles"][1];
    assert_eq!(reader["role"]["kind"], "reader");
    let got = reader["counters"]["messages_received"].as_u64().unwrap();
    let negative = reader["counters"]["negative"].as_u64().unwrap();
    assert!(
        got >= 900 && negative * 10 >= got * 9,
        "{negative} of {got}"
    );
    // Kept as they came: one sample each, about 10 ms below zero.
    let below = msgperf::histogram::EncodedHistogram(
        reader["histograms"]["one_way_below_zero_ns"]
            .as_str()
            .unwrap()
            .into(),
    )
    .decode()
    .unwrap();
    assert_eq!(below.len(), negative);
    let median = below.value_at_quantile(0.5);
    assert!((3_000_000..15_000_000).contains(&median), "{median} ns");
    assert!(stdout.contains("came out negative (median -"), "{stdout}");
    // Every figure of the case lies under its bound (the writer's, 10 ms or more): marked.
    let row = stdout
        .lines()
        .find(|l| l.contains(" tcp ") && l.contains("one-way"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.matches(" 0.00*").count() >= 3, "{row}");
}

#[test]
fn a_round_trip_across_hosts_shows_its_way_there_beside_half_of_it() {
    if !namespaces_work() {
        return;
    }
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "tcp",
            "--count",
            "500",
            "--no-floor",
            "--host",
            "b=netns",
            "--place",
            "responder=b",
            "--json",
            out_file.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("one way #1: to the responder p50 "),
        "{stdout}"
    );
    let run = json(&out_file);
    let roles = run["cases"][0]["roles"].as_array().unwrap();
    let hist = |r: &Value, m: &str| {
        msgperf::histogram::EncodedHistogram(r["histograms"][m].as_str().unwrap().into())
            .decode()
            .unwrap()
    };
    let (rtt, there) = (hist(&roles[0], "rtt_ns"), hist(&roles[1], "one_way_ns"));
    // Every measured request timed on its way there, and that way no longer than the whole
    // round trip, give or take the clock's bound.
    assert_eq!((rtt.len(), there.len()), (500, 500));
    let bound = roles[1]["host"]["clock"]["bound_ns"].as_u64().unwrap();
    assert!(
        there.value_at_quantile(0.5) <= rtt.value_at_quantile(0.5) + bound,
        "there {} rtt {} bound {bound}",
        there.value_at_quantile(0.5),
        rtt.value_at_quantile(0.5)
    );
}

/// A floor between namespace hosts loops over their link, as the case's roles do: on a link
/// held to 10 Mbit/s, tcp's and udp's plain streams move about 1.2 MB/s, not loopback's
/// gigabytes; and the ratio to it is printed.
#[test]
fn a_floor_between_namespace_hosts_takes_their_link() {
    if !namespaces_work() {
        return;
    }
    let (_, cases) = stream_floors_with_reader_on("b=netns:rate=10mbit");
    for case in &cases {
        let t = case["config"]["transport"].as_str().unwrap();
        assert!(case["summary"]["floor_mib_per_s"].as_f64().is_some(), "{t}");
    }
}

/// A 1 KiB tcp and a udp stream whose reader runs on host `b` (`b=...` as given), over a link
/// held to 10 Mbit/s towards it: what the run printed and its cases, each with a floor that
/// moved about 1.2 MB/s, not loopback's gigabytes.
fn stream_floors_with_reader_on(host: &str) -> (String, Vec<Value>) {
    let dir = temp_dir();
    let out_file = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "stream",
            "-t",
            "tcp,udp",
            "--size",
            "1k",
            "--duration",
            "1s",
            "--host",
            host,
            "--place",
            "reader=b",
            "--json",
            out_file.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let cases = json(&out_file)["cases"].as_array().unwrap().clone();
    for case in &cases {
        let t = case["config"]["transport"].as_str().unwrap();
        assert!(
            case["floor_error"].is_null(),
            "{t}: {}",
            case["floor_error"]
        );
        let rate = case["floor"]["bytes_per_s"].as_f64().unwrap_or(0.0);
        // 10 Mbit/s is 1.25 MB/s; loopback or an unshaped veth would be a hundred times more.
        assert!(rate > 100e3 && rate < 3e6, "{t}: floor {rate} B/s");
    }
    (stdout, cases)
}

/// A host reached through `ip netns exec NS`, a namespace of this machine: the floor of tcp
/// and udp loops over its link too, each side in its namespace.
#[test]
fn a_floor_through_an_ip_netns_exec_launcher_takes_its_link() {
    if !namespaces_work() {
        return;
    }
    let ns = Netns::make("f", 68);
    hold_to_10mbit(&format!("{}a", ns.name));
    floors_between_reader_on(&format!("b=ip netns exec {}", ns.name), 68);
}

/// The tcp and udp stream floors with the reader on host `b` (`b=...`) at 10.251.`net`.2, over
/// a link held to 10 Mbit/s: each loops between that address and this host's end of the link,
/// the measuring side (a stream's reader) first, as the JSON and the note under the table say.
fn floors_between_reader_on(host: &str, net: u8) {
    let (stdout, cases) = stream_floors_with_reader_on(host);
    let (far, near) = (format!("10.251.{net}.2"), format!("10.251.{net}.1"));
    assert!(
        stdout.contains(&format!(
            "floor #1 #2: looped between the hosts, {far} and {near}"
        )),
        "{stdout}"
    );
    for case in &cases {
        let t = case["config"]["transport"].as_str().unwrap();
        assert_eq!(
            case["floor"]["between"],
            serde_json::json!([far, near]),
            "{t}"
        );
    }
}

/// Holds what device `dev` sends (towards a namespace: a stream's direction here) to 10 Mbit/s.
fn hold_to_10mbit(dev: &str) {
    let out = Command::new("tc")
        .args(["qdisc", "add", "dev", dev, "root", "tbf"])
        .args(["rate", "10mbit", "burst", "16kb", "latency", "50ms"])
        .output()
        .unwrap();
    assert!(out.status.success(), "tc: {}", text(&out.stderr));
}

/// A host reached through ssh: the floor's far side starts through the same launcher as the
/// case's reader and makes its own end there, so the floor loops over the link to that host.
#[test]
fn a_floor_through_ssh_takes_the_link_to_its_host() {
    if !namespaces_work() {
        return;
    }
    let Some(sshd) = Sshd::start(69) else {
        return;
    };
    hold_to_10mbit(&sshd.link());
    floors_between_reader_on(&sshd.launcher(), 69);
    sshd.waits_for_its_roles_to_end("a floor's far side outlived its run");
}

/// A bed sweeps what killed runs left (their process id is in the names), and nothing else:
/// a device of the user's whose name only begins as msgperf's do stays.
#[test]
fn a_bed_sweeps_what_killed_runs_left_and_nothing_else() {
    if !namespaces_work() {
        return;
    }
    let stale = "msgperf-999999999-b";
    let mine = format!("mpsh{}", std::process::id() % 100_000);
    let peer = format!("mpsi{}", std::process::id() % 100_000);
    for args in [
        vec!["netns", "add", stale],
        vec!["link", "add", &mine, "type", "veth", "peer", "name", &peer],
    ] {
        let out = Command::new("ip").args(&args).output().unwrap();
        assert!(out.status.success(), "ip {args:?}: {}", text(&out.stderr));
    }
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "tcp",
            "--host",
            "b=netns",
            "--place",
            "responder=b",
        ]
        .into_iter()
        .chain(SHORT.iter().copied())
        .collect::<Vec<_>>(),
        Duration::from_secs(60),
    );
    let exists = |args: &[&str], name: &str| {
        let out = Command::new("ip").args(args).output().unwrap();
        text(&out.stdout).contains(name)
    };
    let kept = exists(&["link", "show"], &mine);
    let _ = Command::new("ip").args(["link", "del", &mine]).status();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !exists(&["netns", "list"], stale),
        "the stale namespace stays"
    );
    assert!(kept, "the user's device {mine} was removed");
}

/// linuxptp's ptp4l, ended (SIGTERM, so that it removes its socket) however the test ends.
struct Ptp4l(std::process::Child);

impl Drop for Ptp4l {
    fn drop(&mut self) {
        signal(self.0.id(), libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.0.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_ptp_daemon_s_own_bound_is_recorded_on_the_far_host() {
    let have = |tool: &str| {
        Command::new(tool)
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let chrony_answers = Command::new("chronyc")
        .args(["-c", "tracking"])
        .output()
        .is_ok_and(|o| o.status.success());
    // Its management socket is the default one msgperf asks: only where no ptp4l runs.
    if !namespaces_work()
        || !have("ptp4l")
        || chrony_answers
        || std::path::Path::new("/var/run/ptp4l").exists()
    {
        eprintln!("skipped: needs linuxptp, root, and no ptp4l or chrony running here");
        return;
    }
    let ns = Netns::make("p", 66);
    let dir = temp_dir();
    // A grandmaster on this side of the test's veth link, a slave beyond it; software
    // timestamps, and neither adjusts a clock (free_running): they only measure.
    let config = |name: &str, lines: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("[global]\nfree_running 1\n{lines}")).unwrap();
        p.display().to_string()
    };
    let master = config(
        "master.cfg",
        &format!(
            "priority1 1\nuds_address {}\n",
            dir.path().join("master.sock").display()
        ),
    );
    let slave = config("slave.cfg", "slaveOnly 1\n");
    let quiet = || std::process::Stdio::null();
    let start = |args: &[&str]| {
        Ptp4l(
            Command::new(args[0])
                .args(&args[1..])
                .stdout(quiet())
                .stderr(quiet())
                .spawn()
                .unwrap(),
        )
    };
    let (outer, inner) = (format!("{}a", ns.name), format!("{}b", ns.name));
    let _master = start(&["ptp4l", "-S", "-4", "-i", &outer, "-f", &master]);
    let _slave = start(&[
        "ip", "netns", "exec", &ns.name, "ptp4l", "-S", "-4", "-i", &inner, "-f", &slave,
    ]);
    // The slave has its master once it is a step from it and has measured the path.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new("pmc")
            .args(["-u", "-b", "0", "GET CURRENT_DATA_SET"])
            .output()
            .unwrap();
        let said = text(&out.stdout);
        if said.contains("stepsRemoved     1") && !said.contains("meanPathDelay    0.0") {
            break;
        }
        assert!(Instant::now() < deadline, "{}", text(&out.stdout));
        std::thread::sleep(Duration::from_millis(500));
    }
    let out_file = dir.path().join("r.json");
    let launcher = format!("b=ip netns exec {}", ns.name);
    let out = run_command(
        stream_with_b(&launcher, "reader", SHORT, &out_file),
        Duration::from_secs(60),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let run = json(&out_file);
    let far = &run["cases"][0]["roles"][1]["host"]["environment"]["time_sync"];
    assert_eq!(
        far["source"], "ptp (linuxptp), 1 steps from its grandmaster",
        "{far}"
    );
    assert!(far["bound_ns"].as_u64().unwrap() > 0, "{far}");
    assert!(stdout.contains("its time daemon says ± "), "{stdout}");
}
