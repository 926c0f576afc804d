//! Figures and files a user can trust (issue 12): outputs that never replace what is not a
//! regular file and are checked before anything runs, signals that stop a run cleanly, errors
//! that clean up and name the right option, tables that fit the terminal, and a summary in words.

mod support;

use serde_json::Value;
use std::os::unix::fs::FileTypeExt;
use std::time::{Duration, Instant};
use support::*;

const QUICK: &[&str] = &[
    "run",
    "pingpong",
    "-t",
    "uds",
    "--count",
    "200",
    "--warmup",
    "0s",
    "--no-floor",
];

fn with(extra: &[&str]) -> Vec<String> {
    QUICK.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn run_args(args: &[String], limit: Duration) -> std::process::Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&refs, limit)
}

#[test]
fn a_device_a_fifo_and_a_symlink_are_written_through_never_replaced() {
    // /dev/null stays a device (msgperf runs as root here: renaming over it would replace it).
    let out = run_args(&with(&["--json", "/dev/null"]), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // A FIFO is written through, to whoever reads it.
    let dir = temp_dir();
    let fifo = dir.path().join("out.json");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = run_args(
        &with(&["--json", fifo.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let got = reader.join().unwrap();
    let v: Value = serde_json::from_slice(&got).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 1);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // A symlink is followed: the file it names gets the result, the link stays a link.
    let real = dir.path().join("real.json");
    std::fs::write(&real, b"old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = run_args(
        &with(&["--json", link.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    let v: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 1);
    // `-` is standard output: the JSON there, the table on stderr.
    let out = run_args(&with(&["--json", "-"]), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 1);
}

/// Output targets in odd states, as a user would meet them: a dangling link gets its file; a
/// FIFO nobody reads, or a directory removed during the run, fails the run with one line naming
/// it, and the table still shows every case measured.
#[test]
fn odd_output_targets_keep_the_table_and_name_the_path() {
    let dir = temp_dir();
    // A dangling symlink: the file it names is made, the link stays a link.
    let real = dir.path().join("made.json");
    let link = dir.path().join("dangling.json");
    std::os::unix::fs::symlink("made.json", &link).unwrap();
    let out = run_args(
        &with(&["--json", link.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    let v: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 1);

    // A FIFO with no reader: msgperf waits 10 s for one, then says so; the table is printed.
    let fifo = dir.path().join("nobody.json");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = run_args(
        &with(&["--json", fifo.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("nobody.json") && err.contains("FIFO"), "{err}");
    assert!(
        text(&out.stdout).contains("pingpong"),
        "the table still shows"
    );

    // The output's directory removed after the first case: the run stops there, the table
    // holds that case, and the error names the path.
    let gone = dir.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let json = gone.join("r.json");
    let child = msgperf(&[
        "run",
        "pingpong",
        "-t",
        "uds",
        "-s",
        "64,128,256,512",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--no-floor",
        "--json",
        json.to_str().unwrap(),
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let start = Instant::now();
    while !json.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "no result file");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&gone).unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("r.json") && err.contains("were not run"),
        "{err}"
    );
    let table = text(&out.stdout);
    assert!(
        table.contains("64 B"),
        "the first case is in the table: {table}"
    );
    assert!(!table.contains("512 B"), "the run stopped: {table}");
}

#[test]
fn an_output_that_cannot_be_written_is_refused_before_anything_runs() {
    let dir = temp_dir();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        "workload = \"pingpong\"\ntransports = [\"uds\"]\ncount = 100\n[output]\njson = \"/nonexistent/dir/x.json\"\n",
    )
    .unwrap();
    let bad: Vec<Vec<String>> = vec![
        with(&["--json", "/nonexistent/dir/x.json"]),
        with(&["--csv", dir.path().to_str().unwrap()]),
        with(&["--json", "/proc/version"]),
        vec![
            "run".into(),
            "--scenario".into(),
            scenario.to_str().unwrap().into(),
        ],
    ];
    for args in bad {
        let start = Instant::now();
        let out = run_args(&args, Duration::from_secs(60));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(
            err.contains("cannot write") || err.contains("directory") || err.contains("neither"),
            "{args:?}: {err}"
        );
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing measured or printed"
        );
        assert!(start.elapsed() < Duration::from_secs(30));
    }
}

#[test]
fn a_table_that_cannot_be_written_fails_with_one_line() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let child = msgperf(QUICK)
        .stdout(full)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("standard output"), "{err}");
}

#[test]
fn sigterm_and_sighup_stop_a_run_like_ctrl_c() {
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        let dir = temp_dir();
        let json = dir.path().join("r.json");
        let mut child = long_run("pingpong", "uds", Some(&json));
        wait_for_role(&mut child, "responder");
        std::thread::sleep(Duration::from_millis(800));
        signal(child.id(), sig);
        let out = wait_output(child, Duration::from_secs(30));
        assert_eq!(
            out.status.code(),
            Some(130),
            "signal {sig}: {}",
            text(&out.stderr)
        );
        assert!(text(&out.stdout).contains("interrupted"), "signal {sig}");
        let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(v["interrupted"], true, "signal {sig}");
        assert!(
            v["cases"][0]["summary"]["latency"]["samples"]
                .as_u64()
                .unwrap()
                > 100,
            "signal {sig}: what was measured is kept"
        );
    }
}

#[test]
fn ctrl_c_during_the_floor_measures_nothing_after_it() {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    // The floor runs first, for 3 s: the stop comes inside it.
    let mut child = spawn(&[
        "run",
        "pingpong",
        "-t",
        "uds",
        "--duration",
        "60s",
        "--warmup",
        "0s",
        "--json",
        json.to_str().unwrap(),
    ]);
    wait_for_role(&mut child, "floor");
    std::thread::sleep(Duration::from_millis(300));
    signal(child.id(), libc::SIGINT);
    let out = wait_output(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let case = &v["cases"][0];
    assert_eq!(case["interrupted"], true);
    assert_eq!(
        case["roles"].as_array().unwrap().len(),
        0,
        "no round trip is measured after the stop"
    );
}

#[test]
fn a_named_server_killed_leaves_its_name_free() {
    let name = format!("killed{}", std::process::id());
    let sock = format!("/dev/shm/msgperf-{name}");
    for round in 0..2 {
        let server = Server::start(&["serve", "-t", "shm", "--name", &name]);
        let end = Instant::now() + Duration::from_secs(10);
        while !std::path::Path::new(&sock).exists() {
            assert!(Instant::now() < end, "round {round}: serve never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        signal(server.id(), libc::SIGKILL);
        drop(server);
    }
    // Killed before anyone came: the next msgperf sweeps what it left.
    assert!(run(&["transports"], Duration::from_secs(10))
        .status
        .success());
    assert!(
        !std::path::Path::new(&sock).exists(),
        "{sock} was not swept"
    );
}

/// `script` run by sh (a limit set, then msgperf exec'd), its output piped.
fn in_shell(script: &str) -> std::process::Child {
    std::process::Command::new("sh")
        .args(["-c", script])
        .env("MSGPERF_EXE", MSGPERF)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_run_that_would_run_out_of_descriptors_is_refused_and_leaves_nothing() {
    // 16 channels and 8 role processes do not fit in 20 descriptors: refused before any starts.
    let script = format!(
        "ulimit -n 20; exec {MSGPERF} run pubsub -t uds --pubs 4 --subs 4 --count 50 --warmup 0s --no-floor --timeout 3s"
    );
    let child = in_shell(&script);
    let pid = child.id();
    let out = wait_output(child, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "8 roles need about 88 descriptors, over this process's limit of 20 (ulimit -Hn)"
        ),
        "{err}"
    );
    assert!(
        leftovers_of(pid).is_empty(),
        "left behind: {:?}",
        leftovers_of(pid)
    );
}

/// A pids cgroup of the test's own with `pids.max` set, removed when dropped; None where this
/// machine has no pids controller the test may use (not root, no cgroup).
struct PidsCgroup(std::path::PathBuf);

impl PidsCgroup {
    fn new(max: u32) -> Option<PidsCgroup> {
        let name = format!("msgperf-test-{}-{max}", std::process::id());
        ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]
            .iter()
            .find_map(|root| {
                let dir = std::path::Path::new(root).join(&name);
                std::fs::create_dir(&dir).ok()?;
                let g = PidsCgroup(dir);
                std::fs::write(g.0.join("pids.max"), max.to_string()).ok()?;
                Some(g)
            })
    }
    fn current(&self) -> u64 {
        std::fs::read_to_string(self.0.join("pids.current"))
            .ok()
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Under a limit on tasks (a pids cgroup's `pids.max`, as a container has), a run either runs
/// or ends in one line naming the limit (refused before its roles start, exit 2, or stopped
/// when a thread or process cannot start, exit 1): never a panic or a hang, and it leaves no
/// process or directory behind.
#[test]
fn a_limit_on_tasks_is_named_and_nothing_is_left() {
    let _pace = sharing();
    for max in [8, 14, 18, 22, 40] {
        let Some(group) = PidsCgroup::new(max) else {
            eprintln!("skipped: no pids cgroup to make here (needs root and a pids controller)");
            return;
        };
        let script = format!(
            "echo $$ > {}/cgroup.procs && exec {MSGPERF} run pubsub -t uds --subs 4 --count 100 --warmup 0s --no-floor --timeout 3s",
            group.0.display()
        );
        let child = in_shell(&script);
        let pid = child.id();
        let out = wait_output(child, Duration::from_secs(60));
        let err = text(&out.stderr);
        let last = err.trim().lines().last().unwrap_or("");
        match out.status.code() {
            Some(0) => {}
            Some(1 | 2) => assert!(
                last.contains(&format!("pids.max {max} of the pids cgroup"))
                    && last.contains("raise it or run fewer roles")
                        | last.contains("raise the limit, or run fewer roles"),
                "pids.max {max}: {err}"
            ),
            code => panic!("pids.max {max}: exit {code:?}: {err}"),
        }
        let end = Instant::now() + Duration::from_secs(10);
        while group.current() > 0 {
            assert!(
                Instant::now() < end,
                "pids.max {max}: processes left in the cgroup"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(leftovers_of(pid).is_empty(), "pids.max {max}");
    }
}

#[test]
fn bad_values_and_names_are_refused_before_any_process_starts() {
    for (args, says) in [
        (vec!["--opt", "capacity=1"], "--opt capacity=1"),
        (vec!["--opt", "capacity=abc"], "--opt capacity=abc"),
        (vec!["--name", "../../etc/passwd"], "not a server name"),
        (vec!["--name", ""], "not a server name"),
    ] {
        let mut all = vec![
            "run",
            "pingpong",
            "-t",
            "shm",
            "--count",
            "10",
            "--no-floor",
        ];
        all.extend(args.iter());
        let out = run(&all, Duration::from_secs(30));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let long = "x".repeat(300);
    let out = run(
        &["serve", "-t", "shm", "--name", &long],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("not a server name"));
    // A name in use is named by its option.
    let name = format!("busy{}", std::process::id());
    let server = Server::start(&["serve", "-t", "shm", "--name", &name]);
    let sock = format!("/dev/shm/msgperf-{name}");
    let end = Instant::now() + Duration::from_secs(10);
    while !std::path::Path::new(&sock).exists() {
        assert!(Instant::now() < end, "serve never listened");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = run(
        &["serve", "-t", "shm", "--name", &name],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("in use") && err.contains("--name"), "{err}");
    assert!(!err.contains("--listen"), "{err}");
    drop(server);
}

/// The widest line of `out`, in characters.
fn widest(out: &[u8]) -> usize {
    text(out)
        .lines()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
}

#[test]
fn tables_fit_a_100_column_terminal_and_wide_or_piped_output_keeps_every_column() {
    let args = [
        "run",
        "pingpong",
        "-t",
        "uds,tcp,shm",
        "--size",
        "64,4k",
        "--duration",
        "100ms",
        "--warmup",
        "10ms",
    ];
    let fit = msgperf(&args).env("COLUMNS", "100").output().unwrap();
    assert!(fit.status.success(), "{}", text(&fit.stderr));
    assert!(widest(&fit.stdout) <= 100, "{}", text(&fit.stdout));
    assert!(
        text(&fit.stdout).contains("--wide"),
        "says what was left out"
    );
    let wide = msgperf(&[&args[..], &["--wide"]].concat())
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(widest(&wide.stdout) > 100);
    assert!(text(&wide.stdout).contains("p99.99 [us]"));
    let piped = msgperf(&args).env_remove("COLUMNS").output().unwrap();
    assert!(
        text(&piped.stdout).contains("p99.99 [us]"),
        "piped: every column"
    );
    let survey = msgperf(&[
        "survey",
        "-t",
        BUILT_IN,
        "--duration",
        "20ms",
        "--warmup",
        "5ms",
    ])
    .env("COLUMNS", "100")
    .output()
    .unwrap();
    assert!(survey.status.success(), "{}", text(&survey.stderr));
    assert!(widest(&survey.stdout) <= 100, "{}", text(&survey.stdout));
    let transports = msgperf(&["transports"])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    assert!(
        widest(&transports.stdout) <= 80,
        "{}",
        text(&transports.stdout)
    );
    let shm = msgperf(&["transports", "shm"]).output().unwrap();
    let shm = text(&shm.stdout);
    assert!(
        shm.contains("capacity=256k") && !shm.contains("uds-dgram"),
        "{shm}"
    );
}

#[test]
fn a_run_ends_with_a_summary_in_words_and_a_report_names_its_run() {
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "uds,shm",
            "--count",
            "300",
            "--warmup",
            "0s",
            "--no-floor",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("summary: lowest round trip p50"),
        "{stdout}"
    );
    assert!(stdout.contains("x lower than the highest"), "{stdout}");
    assert!(stdout.contains("results written to"), "{stdout}");
    let report = run(&["report", json.to_str().unwrap()], Duration::from_secs(20));
    let text = text(&report.stdout);
    assert!(text.starts_with("run of 20"), "{text}");
    assert!(text.contains("--count 300"), "the command line: {text}");
    let help = run(&["run", "--help"], Duration::from_secs(10));
    assert!(support::text(&help.stdout).contains("Examples:"));
}
