//! The command line as a user meets it: bad input gets exit 2 and a line naming the fix; JSON
//! and CSV hold every figure; the README's table and commands stay true.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::*;

fn usage_error(args: &[&str], fix: &str) {
    let out = run(args, Duration::from_secs(30));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(fix), "{args:?}: `{err}` does not say `{fix}`");
    assert!(
        err.trim().lines().count() <= 6,
        "{args:?}: a short message, got {err}"
    );
}

#[test]
fn bad_options_exit_2_naming_the_fix() {
    usage_error(
        &["run", "pingpong", "-t", "carrier-pigeon"],
        "use one of inproc, mpsc, flume, tokio-mpsc, pipe, uds",
    );
    usage_error(
        &["run", "pingpong", "-t", "tcp", "--opt", "nodelay=maybe"],
        "use one of true, false",
    );
    usage_error(
        &["run", "pingpong", "-t", "tcp", "--opt", "nodelay"],
        "key=value",
    );
    usage_error(
        &["run", "pingpong", "-t", "pipe", "--opt", "nodelay=true"],
        "takes no --opt",
    );
    usage_error(
        &["run", "pingpong", "-t", "tcp", "--size", "0"],
        "--size 32 or more",
    );
    usage_error(
        &["run", "pingpong", "-t", "udp", "--size", "1M"],
        "use a smaller --size",
    );
    usage_error(
        &["run", "pingpong", "-t", "tcp", "--size", "abc"],
        "write e.g. 64, 4k or 1M",
    );
    usage_error(
        &["run", "pingpong", "-t", "tcp", "--count", "0"],
        "at least 1",
    );
    usage_error(&["run", "pingpong", "-t", "tcp", "--confirm"], "drop it");
    usage_error(
        &["run", "pingpong", "-t", "tcp", "--pin", "0,9999"],
        "pick from those",
    );
    usage_error(
        &["run", "pingpong", "-t", "tcp", "--duration", "soon"],
        "write e.g. 500ms",
    );
    usage_error(
        &["run", "juggle", "-t", "tcp"],
        "use one of pingpong, stream",
    );
    usage_error(
        &[
            "run",
            "pingpong",
            "-t",
            "inproc",
            "--connect",
            "127.0.0.1:1",
        ],
        "cannot --connect",
    );
    usage_error(&["report", "/nonexistent.json"], "cannot read");
    usage_error(&["frobnicate"], "unrecognized subcommand");
}

/// Input this machine or the transport cannot run is refused before anything starts (issue 40,
/// class 1): exit 2, one line naming the limit or the form, nothing made.
#[test]
fn what_cannot_run_here_is_refused_before_anything_starts() {
    let dir = temp_dir();
    // More roles than any machine starts: its descriptors, tasks or memory say so at once.
    let out = run_command(
        {
            let mut c = msgperf(&["run", "pubsub", "-t", "uds", "--subs", "100000"]);
            c.current_dir(dir.path());
            c
        },
        Duration::from_secs(30),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("100001 roles need about"), "{err}");
    // A descriptor limit that the roles asked for would pass.
    let out = run_command(
        {
            let mut c = std::process::Command::new("sh");
            c.arg("-c").arg(format!(
                "ulimit -Sn 200; ulimit -Hn 200; exec {MSGPERF} run pubsub -t uds --subs 100"
            ));
            c
        },
        Duration::from_secs(30),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "101 roles need about 367 descriptors, over this process's limit of 200 (ulimit -Hn)"
        ),
        "{err}"
    );
    // An address that is not host:port is not taken for a file name here.
    let out = run_command(
        {
            let mut c = msgperf(&[
                "serve",
                "-t",
                "tcp",
                "--listen",
                "127.0.0.1:99999",
                "--once",
            ]);
            c.current_dir(dir.path());
            c
        },
        Duration::from_secs(30),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not host:port") && err.contains("e.g. 127.0.0.1:7000"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing made"
    );
    usage_error(
        &[
            "run",
            "stream",
            "-t",
            "uds",
            "--rate",
            "0.001hz",
            "--duration",
            "1s",
        ],
        "none within --duration 1s",
    );
    usage_error(
        &["run", "pingpong", "-t", "udp", "--timeout", "1ms"],
        "--timeout 1ms is shorter than a busy machine may keep a role off its CPU",
    );
    usage_error(
        &["run", "pingpong", "-t", "tcp", "--connect", "nowhere"],
        "--connect nowhere: not host:port",
    );
}

/// A temp dir that cannot take msgperf's sockets is named, with the fix, before anything starts.
#[test]
fn an_unusable_tmpdir_is_named_before_anything_starts() {
    let dir = temp_dir();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let read_only = dir.path().join("read-only");
    std::fs::create_dir(&read_only).unwrap();
    std::fs::set_permissions(
        &read_only,
        std::os::unix::fs::PermissionsExt::from_mode(0o555),
    )
    .unwrap();
    let mut cases = vec![
        (dir.path().join("missing"), "no such directory"),
        (file, "not a directory"),
    ];
    // Root writes where the mode says it may not.
    if std::fs::File::create(read_only.join("probe")).is_err() {
        cases.push((read_only, "cannot make a directory in it"));
    }
    for (tmp, why) in cases {
        let mut c = msgperf(&["run", "pingpong", "-t", "uds", "--count", "10"]);
        c.env("TMPDIR", &tmp);
        let out = run_command(c, Duration::from_secs(30));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("TMPDIR={}: {why}", tmp.display()))
                && err.contains("set TMPDIR to a writable directory"),
            "{err}"
        );
    }
}

/// A low descriptor limit is no reason for a role not to start: its control socket moves to
/// fd 3 through a copy just above its range, not at 100.
#[test]
fn roles_start_under_a_descriptor_limit_of_64() {
    let out = run_command(
        {
            let mut c = std::process::Command::new("sh");
            c.arg("-c").arg(format!(
                "ulimit -Sn 64; exec {MSGPERF} run pingpong -t uds --count 200 --no-floor"
            ));
            c
        },
        Duration::from_secs(60),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(text(&out.stdout).contains("all 1 cases ran without an error"));
}

#[test]
fn json_and_csv_hold_every_figure_and_the_environment() {
    let dir = temp_dir();
    let (json, csv) = (dir.path().join("r.json"), dir.path().join("r.csv"));
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "uds,tcp",
            "--size",
            "64,4k",
            "--duration",
            "150ms",
            "--warmup",
            "20ms",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        !stdout.contains('\u{1b}'),
        "no escape codes when stdout is not a terminal"
    );
    for col in [
        "p50 [us]",
        "p99.99 [us]",
        "rate [/s]",
        "MiB/s",
        "vs floor",
        "write max [us]",
        "user [us/msg]",
        "ctx sw/msg",
        "preempted/msg",
        "peak RSS [MiB]",
    ] {
        assert!(stdout.contains(col), "table lacks `{col}`");
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let env = &v["environment"];
    for k in [
        "hostname",
        "kernel",
        "cpu_model",
        "cores",
        "allowed_cpus",
        "started_utc",
    ] {
        assert!(!env[k].is_null(), "environment.{k}");
    }
    for k in [
        "source",
        "resolution_ns",
        "smallest_step_ns",
        "read_cost_ns",
        "record_cost_ns",
    ] {
        assert!(!env["clock"][k].is_null(), "clock.{k}");
    }
    assert!(env["clock"]["read_cost_ns"].as_f64().unwrap() > 0.0);
    let malloc = env["malloc"].as_str().unwrap();
    assert!(
        malloc.contains("keeping freed memory") || malloc.contains("GLIBC_TUNABLES"),
        "the allocator's setting: {malloc}"
    );
    // Empty unless the host takes back freed memory, which it then names.
    let host = env["host_memory"].as_str().unwrap();
    assert!(
        host.is_empty() || host.contains("free page reporting"),
        "the host's memory: {host}"
    );
    assert_eq!(v["msgperf_version"], env!("CARGO_PKG_VERSION"));
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for c in cases {
        let s = &c["summary"];
        assert_eq!(s["latency_kind"], "round trip");
        assert_eq!(
            c["latency_kind"]["label"], "round trip",
            "recorded, not guessed"
        );
        assert!(c["latency_kind"]["meaning"]
            .as_str()
            .is_some_and(|m| m.contains("reply")));
        let l = &s["latency"];
        for p in ["p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "p99_99_ns"] {
            assert!(l.get(p).is_some(), "labelled percentile {p}");
        }
        assert!(l["p50_ns"].as_u64().unwrap() >= l["min_ns"].as_u64().unwrap());
        assert!(s["vs_floor"].as_f64().unwrap() > 0.0, "ratio to the floor");
        assert!(c["floor"]["rtt_p50_ns"].as_u64().unwrap() > 0);
        assert!(
            c["floor"]["bytes_per_s"].is_null(),
            "null where it does not apply"
        );
        assert!(c["config"]["duration_ns"].as_u64().unwrap() == 150_000_000);
        assert!(c["config"]["effective_options"].is_object());
        assert!(c["roles"][0]["interval_ns"].as_u64().unwrap() > 0);
        assert!(c["key"].as_str().unwrap().starts_with("pingpong/"));
        for r in s["roles"].as_array().unwrap() {
            for k in [
                "send_call_avg_ns",
                "send_call_max_ns",
                "recv_call_avg_ns",
                "recv_call_max_ns",
                "cpu_user_ns_per_msg",
                "cpu_sys_ns_per_msg",
                "context_switches_per_msg",
                "preempted_per_msg",
                "peak_rss_kib",
            ] {
                assert!(!r[k].is_null(), "role {} lacks {k}", r["role"]);
            }
            let preempted = r["preempted_per_msg"].as_f64().unwrap();
            assert!(
                (0.0..=r["context_switches_per_msg"].as_f64().unwrap()).contains(&preempted),
                "a role's preemptions are some of its context switches: {r}"
            );
        }
        assert_eq!(c["config"]["placement"], "cross-cpu");
        // The wire: loopback counters for tcp (at least an IP header per message), none for uds.
        match c["config"]["transport"].as_str().unwrap() {
            "tcp" => assert!(
                s["wire_overhead_bytes_per_msg"].as_f64().unwrap() >= 20.0,
                "{}",
                s["wire_overhead_bytes_per_msg"]
            ),
            _ => assert!(s["wire_bytes_per_msg"].is_null()),
        }
        assert!(
            c["roles"][0]["histograms"]["rtt_ns"].is_string(),
            "the histogram itself is kept"
        );
    }
    let cases_csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = cases_csv.lines();
    let header = lines.next().unwrap();
    for col in [
        "key",
        "size_bytes",
        "rate_hz",
        "duration_ns",
        "count",
        "pubs",
        "subs",
        "placement",
        "effective_options",
        "p99_99_ns",
        "msgs_per_s",
        "mib_per_s",
        "vs_floor",
        "hostname",
    ] {
        assert!(header.split(',').any(|h| h == col), "csv lacks {col}");
    }
    assert_eq!(lines.count(), 4);
    // Every role of every case, in the file beside it.
    let roles_csv = std::fs::read_to_string(dir.path().join("r.roles.csv")).unwrap();
    let mut lines = roles_csv.lines();
    let header = lines.next().unwrap();
    for col in [
        "key",
        "role",
        "role_kind",
        "cpu_user_ns_per_msg",
        "send_call_max_ns",
        "recv_call_avg_ns",
        "preempted_per_msg",
        "peak_rss_kib",
    ] {
        assert!(header.split(',').any(|h| h == col), "roles csv lacks {col}");
    }
    assert_eq!(lines.count(), 8, "two roles of four cases");

    // The saved file renders again, with no run.
    let out = run(&["report", json.to_str().unwrap()], Duration::from_secs(20));
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("round trip"));
}

/// The README's transport table is `msgperf transports --markdown`: docs cannot drift.
#[test]
fn readme_lists_every_transport_as_the_tool_does() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let out = run(&["transports", "--markdown"], Duration::from_secs(10));
    let table = text(&out.stdout);
    assert!(
        readme.contains(table.trim()),
        "README.md's transport table differs from `msgperf transports --markdown`:\n{table}"
    );
}

/// The README opens with the two commands a newcomer types; the survey runs end to end.
#[test]
fn readme_opens_with_the_survey_and_the_tests() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let commands: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("cargo "))
        .take(2)
        .collect();
    assert_eq!(
        commands,
        ["cargo run --release", "cargo test --release --all-features"]
    );
    // `cargo run --release` is `msgperf` with no command: the survey (shortened here) of what
    // a build without features has.
    let out = run(
        &[
            "survey",
            "-t",
            BUILT_IN,
            "--duration",
            "30ms",
            "--warmup",
            "5ms",
        ],
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for t in ["inproc", "pipe", "uds-dgram", "tcp", "udp"] {
        assert!(stdout.contains(t), "survey lacks {t}");
    }
    let rows = stdout
        .lines()
        .filter(|l| l.contains("pingpong") || l.contains("stream"))
        .count();
    assert!(rows >= 18, "survey rows: {rows}");
    // Only what was named, although this binary may have more.
    let named: Vec<&str> = BUILT_IN.split(',').collect();
    let ran: std::collections::BTreeSet<&str> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|t| msgperf::transport::find(t).is_ok())
        .collect();
    assert!(
        ran.iter().all(|t| named.contains(t)),
        "survey ran {ran:?}, not only {named:?}"
    );
    let bad = run(&["survey", "-t", "tcp,nosuch"], Duration::from_secs(30));
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(
        text(&bad.stderr).contains("nosuch"),
        "{}",
        text(&bad.stderr)
    );
}

/// A command line printed as a template runs the same cases; a bad template is refused with
/// the line, the column and the keys expected.
#[test]
fn scenarios_round_trip_and_bad_ones_are_located() {
    let dir = temp_dir();
    let args = [
        "run",
        "stream",
        "-t",
        "uds,tcp",
        "--size",
        "64,1k",
        "--rate",
        "2khz",
        "--count",
        "200",
        "--warmup",
        "0s",
        "--placement",
        "any",
        "--no-floor",
    ];
    let printed = run(
        &[&args[..], &["--print-scenario"]].concat(),
        Duration::from_secs(10),
    );
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let file = dir.path().join("s.toml");
    std::fs::write(&file, &printed.stdout).unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let direct = run(
        &[&args[..], &["--json", a.to_str().unwrap()]].concat(),
        Duration::from_secs(60),
    );
    assert!(direct.status.success(), "{}", text(&direct.stderr));
    let templ = run(
        &[
            "run",
            "--scenario",
            file.to_str().unwrap(),
            "--json",
            b.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(templ.status.success(), "{}", text(&templ.stderr));
    let configs = |p: &std::path::Path| -> Vec<Value> {
        let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["config"].clone())
            .collect()
    };
    assert_eq!(configs(&a), configs(&b));
    assert_eq!(configs(&a).len(), 4);

    std::fs::write(
        &file,
        "workload = \"stream\"\ntransports = [\"uds\"]\nrtae = \"1khz\"\n",
    )
    .unwrap();
    let out = run(
        &["run", "--scenario", file.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("line 3, column 1") && err.contains("`rtae`") && err.contains("`rate`"),
        "{err}"
    );
    usage_error(
        &["run", "stream", "--scenario", file.to_str().unwrap()],
        "not both",
    );
}

#[test]
fn the_users_own_malloc_tunables_are_left_as_they_are() {
    let mut command = msgperf(&["run", "pingpong", "-t", "uds", "--count", "100"]);
    command.env("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072");
    let out = run_command(command, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("memory: glibc malloc as GLIBC_TUNABLES sets it"),
        "{}",
        text(&out.stdout)
    );
}

/// Completions and the manual page come from the parser's own definition: every command and
/// every workload's parameter is in them.
#[test]
fn completions_and_the_manual_page_cover_every_command_and_parameter() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell], Duration::from_secs(20));
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in ["survey", "transports", "floor"] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
        for flag in ["opt", "runtime", "hold"] {
            // fish names a long flag `-l opt`, the others `--opt`.
            let named = [format!("--{flag}"), format!("-l {flag}")];
            assert!(
                named.iter().any(|n| script.contains(n.as_str())),
                "{shell} completions lack --{flag}"
            );
        }
    }
    let out = run(&["completions", "tcsh"], Duration::from_secs(20));
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
    let out = run(&["man"], Duration::from_secs(20));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH msgperf"),
        "roff: {page:.200}"
    );
    assert!(page.contains("survey") && page.contains("completions"));
}

/// `msgperf transports --needs` says, a line each, what this machine lacks for the transports
/// built in: Debian packages, then the scripts that use them (what `.ci/run` installs).
#[test]
fn needs_are_packages_then_scripts_one_a_line() {
    let out = run(&["transports", "--needs"], Duration::from_secs(20));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l.split_once(' ').map_or("", |(k, _)| k))
        .collect();
    assert!(
        kinds.iter().all(|k| *k == "debian" || *k == "script"),
        "{lines:?}"
    );
    assert!(
        kinds
            .windows(2)
            .all(|w| !(w[0] == "script" && w[1] == "debian")),
        "packages first: {lines:?}"
    );
    for l in lines.iter().filter(|l| l.starts_with("script ")) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(&l[7..]);
        assert!(path.is_file(), "{l}: the script is in the repository");
    }
}

/// A warning that concerns many cases is one line naming them; `--details` gives each its own.
#[test]
fn a_warning_shared_by_cases_is_one_line_naming_them() {
    let _shared = sharing();
    let args = |details: &str| {
        run(
            &[
                "run",
                "pingpong",
                "-t",
                "uds,pipe",
                "-s",
                "64,128",
                "--count",
                "50",
                "--no-floor",
                details,
            ],
            Duration::from_secs(60),
        )
    };
    let out = args("--details=false");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let few: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("only 50 samples"))
        .collect();
    assert_eq!(few.len(), 1, "{table}");
    assert!(
        few[0].starts_with("warning #1 (so do #2 #3 #4: 4 cases"),
        "{}",
        few[0]
    );
    let out = args("--details=true");
    let table = text(&out.stdout);
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains("only 50 samples"))
            .count(),
        4,
        "{table}"
    );
}
