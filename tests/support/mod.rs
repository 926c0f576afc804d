//! Shared by the integration tests: the msgperf binary, temporary files, bounded child waits.
#![allow(dead_code)]

use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

pub const MSGPERF: &str = env!("CARGO_BIN_EXE_msgperf");

/// The transports of a build without features: what `cargo run --release` surveys. A survey
/// of them all would start every middleware's broker, which their own tests do.
pub const BUILT_IN: &str = "inproc,mpsc,flume,tokio-mpsc,pipe,uds,uds-dgram,tcp,udp,shm";

/// msgperf with arguments; its peers are this binary too.
pub fn msgperf(args: &[&str]) -> Command {
    let mut c = Command::new(MSGPERF);
    c.args(args).env("MSGPERF_EXE", MSGPERF);
    c
}

/// Runs msgperf to completion, killing it if it takes longer than `limit` (then panics).
pub fn run(args: &[&str], limit: Duration) -> Output {
    run_command(msgperf(args), limit)
}

/// `run` for a command set up further (its environment, say).
pub fn run_command(mut command: Command, limit: Duration) -> Output {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_output(child, limit)
}

pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let end = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "msgperf did not finish within {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// msgperf's private directories in the temp dir that belong to `pid`.
pub fn leftovers_of(pid: u32) -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(&format!("msgperf-{pid}-")))
        .collect()
}

/// The processes msgperf started: its peers.
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

pub fn wait_for_child(pid: u32) -> u32 {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(&c) = children(pid).first() {
            return c;
        }
        assert!(Instant::now() < end, "msgperf never started its peer");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn alive(pid: u32) -> bool {
    // A zombie is dead for our purpose, and so is a killed process that the kernel is still
    // tearing down (it runs none of its own code again).
    msgperf::sys::process_alive(pid)
}

pub fn signal(pid: u32, sig: i32) {
    unsafe { libc::kill(pid as i32, sig) };
}

pub fn spawn(args: &[&str]) -> std::process::Child {
    msgperf(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A server a test started: killed when the test ends, even by a panic, so no test leaves a
/// process behind.
pub struct Server(pub Option<Child>);

impl Server {
    pub fn start(args: &[&str]) -> Self {
        Server(Some(spawn(args)))
    }
    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }
    /// Hands the process over (to wait for its output); the guard no longer kills it.
    pub fn take(mut self) -> Child {
        self.0.take().expect("running")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Role processes that the library starts in this test process run the msgperf binary (not
/// the test binary, which `current_exe` would name).
pub fn roles_run_msgperf() {
    // Every test of a binary sets the same value, so the race of two setting it is harmless.
    std::env::set_var("MSGPERF_EXE", MSGPERF);
}

/// A short, threaded, unpinned run of `workload` on `transport` with exact counts; tests
/// change the fields they care about.
pub fn short_request(workload: &str, transport: &str) -> msgperf::plan::RunOptions {
    msgperf::plan::RunOptions {
        workload: Some(workload.into()),
        transports: vec![transport.into()],
        size: Some("64,4k".into()),
        count: Some(300),
        warmup: Some("20ms".into()),
        checksum: Some(true),
        timeout: Some("5s".into()),
        placement: Some(msgperf::plan::PlacementArg::Any),
        threads: Some(true),
        ..Default::default()
    }
}

/// The role processes msgperf `pid` started whose command line names `role` (`responder`,
/// `subscriber 2`), once there is one. Roles start once the case's broker answers: in a soak
/// run an AMQP case's responder had not appeared after 20 s, so the bound is one only a hang
/// reaches.
pub fn wait_for_role(pid: u32, role: &str) -> u32 {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(c) = children(pid).into_iter().find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ")
                .contains(&format!("role {role} "))
        }) {
            return c;
        }
        assert!(Instant::now() < end, "msgperf never started its {role}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A 60-second run in processes, to be killed or interrupted by the test; `json` collects
/// what it measured before that.
pub fn long_run(workload: &str, transport: &str, json: Option<&std::path::Path>) -> Child {
    let mut args = vec![
        "run",
        workload,
        "-t",
        transport,
        "--duration",
        "60s",
        "--warmup",
        "0s",
        "--no-floor",
        "--placement",
        "any",
    ];
    if let Some(j) = json {
        args.extend(["--json", j.to_str().unwrap()]);
    }
    spawn(&args)
}

/// Lets a running msgperf measure for a moment, sends it Ctrl-C and checks that it stopped
/// cleanly: exit 130, the JSON marked interrupted and its first case free of errors. Returns
/// the output and that case.
pub fn interrupt(
    child: Child,
    json: &std::path::Path,
    limit: Duration,
) -> (Output, serde_json::Value) {
    std::thread::sleep(Duration::from_millis(800));
    signal(child.id(), libc::SIGINT);
    let out = wait_output(child, limit);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    let case = v["cases"][0].clone();
    assert_eq!(
        case["error"],
        serde_json::Value::Null,
        "a clean stop: {}",
        case["error"]
    );
    (out, case)
}

/// Tests of one binary run in parallel; one that checks a time bound (an end within
/// `--timeout` + 1 s) runs alone, so that its siblings' role processes do not stand in for load
/// the bound was not set for. Every other test of such a binary shares.
static PACE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs beside the binary's other tests (not beside one that runs alone).
pub fn sharing() -> std::sync::RwLockReadGuard<'static, ()> {
    PACE.read().unwrap_or_else(|e| e.into_inner())
}

/// Runs alone among the binary's tests.
pub fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    PACE.write().unwrap_or_else(|e| e.into_inner())
}
