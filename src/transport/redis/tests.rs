//! The `redis` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "redis")]

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
    peer_and_broker_faults_end_the_case("redis", "redis-server", FAULT_TIMEOUT);
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
    names_an_absent_broker(
        "redis",
        "redis://127.0.0.1:1",
        "is redis-server running there?",
    );
    refused(
        &words("run pingpong -t redis --opt broker=localhost"),
        "redis://",
    );
    refused(
        &["run", "stream", "-t", "redis", "--history", "latest"],
        "fifo only",
    );
}

#[test]
fn redis_without_its_server_is_refused_before_anything_starts_naming_the_package() {
    // Where msgperf looks for it (PATH and the sbin directories), redis-server is not.
    let out = run_command(
        {
            let mut c = msgperf(&["run", "pingpong", "-t", "redis", "--size", "64,1k"]);
            c.env("PATH", "/nonexistent");
            c
        },
        Duration::from_secs(30),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "said once: {err}");
    assert!(
        err.contains("`redis` needs redis-server, which this machine does not have: apt-get install redis-server (or use a broker that runs elsewhere: --opt broker=URL)"),
        "{err}"
    );
}
