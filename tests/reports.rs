//! Reports people keep and compare: every export format written and read back (the interval log
//! by an independent HdrHistogram reader, the HTML report by a real headless browser), and
//! `compare` giving the verdicts it should on real runs.

mod support;

use msgperf::result::RunResult;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::*;

/// A tool a test needs from outside Rust; `.ci/run` installs it. Missing, the test says so and
/// is skipped, unless MSGPERF_CI says the machine must have it.
fn tool_present(check: &mut Command, what: &str) -> bool {
    let ok = check
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("MSGPERF_CI").is_none(),
            "{what} is missing here and CI needs it: `.ci/run` installs it"
        );
        eprintln!("skipped: {what} is not installed (`.ci/run` installs it)");
    }
    ok
}

fn read_run(path: &Path) -> RunResult {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn every_export_is_written_and_the_interval_log_reads_back_elsewhere() {
    let _shared = sharing();
    let dir = temp_dir();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let exports = format!(
        "json={},csv={},md={},hlog={},hgrm={},html={}",
        p("r.json"),
        p("r.csv"),
        p("r.md"),
        p("r.hlog"),
        p("hgrm"),
        p("r.html")
    );
    let out = run(
        &[
            "run",
            "pingpong",
            "-t",
            "uds",
            "--duration",
            "600ms",
            "--interval",
            "100ms",
            "--no-floor",
            "--export",
            &exports,
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = read_run(&dir.path().join("r.json"));
    let case = &run.cases[0];
    let initiator = &case.roles[0];

    // The intervals hold every sample of the whole-run histogram, once.
    let whole = initiator.histogram(case.latency_metric).unwrap();
    let intervals: Vec<_> = initiator
        .interval_histograms
        .iter()
        .map(|iv| iv.histogram.decode().unwrap())
        .collect();
    assert!(
        intervals.len() >= 5,
        "{} intervals in 600ms",
        intervals.len()
    );
    assert_eq!(
        intervals.iter().map(|h| h.len()).sum::<u64>(),
        whole.len(),
        "the intervals add up to the run"
    );
    for w in initiator.interval_histograms.windows(2) {
        assert!(w[0].end_ns <= w[1].start_ns + 1, "intervals in order");
    }

    // Markdown: the table, with the case's p50 as the terminal prints it.
    let md = std::fs::read_to_string(dir.path().join("r.md")).unwrap();
    assert!(md.contains("| # | transport |"), "{md}");
    let summary: Value = serde_json::from_slice(&std::fs::read(p("r.json")).unwrap()).unwrap();
    let p50_ns = summary["cases"][0]["summary"]["latency"]["p50_ns"]
        .as_u64()
        .unwrap();
    assert!(md.contains(&us(p50_ns)), "md holds p50 {}", us(p50_ns));

    // hgrm: a file per role, the percentile text HdrHistogram plotters read, ending at 100%.
    let hgrm: Vec<_> = std::fs::read_dir(dir.path().join("hgrm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let recording = case
        .roles
        .iter()
        .filter(|r| r.histogram(case.latency_metric).is_some())
        .count();
    assert_eq!(
        hgrm.len(),
        recording,
        "a file per role that records the latency: {hgrm:?}"
    );
    let first = std::fs::read_to_string(
        hgrm.iter()
            .find(|p| p.to_string_lossy().contains("initiator"))
            .unwrap(),
    )
    .unwrap();
    assert!(first.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)"));
    let last_row = first
        .lines()
        .rfind(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap();
    let cols: Vec<&str> = last_row.split_whitespace().collect();
    assert_eq!(cols[1], "1.000000000000", "{last_row}");
    assert_eq!(cols[2].parse::<u64>().unwrap(), whole.len());

    // hlog: read by the Python HdrHistogram reader, interval by interval.
    let hlog = std::fs::read_to_string(dir.path().join("r.hlog")).unwrap();
    assert!(
        hlog.starts_with("#[Histogram log format version 1.3]"),
        "{hlog}"
    );
    assert!(hlog.contains("#[StartTime: ") && hlog.contains("#[BaseTime: "));
    if !tool_present(
        Command::new("python3").args(["-c", "import hdrh.log"]),
        "the Python HdrHistogram reader (pip package hdrhistogram)",
    ) {
        return;
    }
    let script = r#"
import json, sys
from hdrh.log import HistogramLogReader
from hdrh.histogram import HdrHistogram
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600000000000, 3))
out = []
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    out.append({"tag": h.get_tag(), "count": h.get_total_count(),
                "max": h.get_max_value(),
                "buckets": [[i.value_iterated_to, i.count_at_value_iterated_to]
                            for i in h.get_recorded_iterator()]})
print(json.dumps(out))
"#;
    let py = Command::new("python3")
        .args(["-c", script, &p("r.hlog")])
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", text(&py.stderr));
    let read: Vec<Value> = serde_json::from_slice(&py.stdout).unwrap();
    let tag = format!("{}/initiator", case.key);
    let theirs: Vec<&Value> = read.iter().filter(|v| v["tag"] == tag.as_str()).collect();
    assert_eq!(theirs.len(), intervals.len(), "{tag}: {read:?}");
    // Bucket by bucket the same histogram, so any percentile rule gives the same answer on
    // both sides (Java's and Python's round the count at a percentile, Rust's takes its ceiling).
    for (h, v) in intervals.iter().zip(theirs) {
        assert_eq!(v["count"].as_u64().unwrap(), h.len());
        let ours: Vec<(u64, u64)> = h
            .iter_recorded()
            .map(|b| {
                (
                    h.highest_equivalent(b.value_iterated_to()),
                    b.count_at_value(),
                )
            })
            .collect();
        let read: Vec<(u64, u64)> = v["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b[0].as_u64().unwrap(), b[1].as_u64().unwrap()))
            .collect();
        assert_eq!(read, ours, "the buckets read back");
        assert!(h.equivalent(h.max(), v["max"].as_u64().unwrap()));
    }
}

/// Microseconds as the tables print them.
fn us(ns: u64) -> String {
    let v = ns as f64 / 1e3;
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

#[test]
fn the_html_report_loads_offline_in_a_browser_with_the_jsons_numbers() {
    let _shared = sharing();
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let html = dir.path().join("r.html");
    let out = run(
        &[
            "run",
            "stream",
            "-t",
            "uds,pipe",
            "-s",
            "64,4k",
            "--duration",
            "200ms",
            "--no-floor",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Made again from the saved result, as a user would.
    let out = run(
        &[
            "report",
            json.to_str().unwrap(),
            "--export",
            &format!("html={}", html.display()),
        ],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    // Self-contained: nothing to fetch, nothing to run.
    for needle in [
        "<script", "src=", "href=", "url(", "@import", "<link", "<img",
    ] {
        assert!(!page.contains(needle), "the report holds `{needle}`");
    }
    assert!(
        page.matches("<svg").count() >= 4,
        "spectrum, size plots, CPU, over time"
    );
    let summary: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cases = summary["cases"].as_array().unwrap();
    // Every case's p50 from the JSON, in a cell as the tables print it.
    let shows_every_p50 = |html: &str, what: &str| {
        for c in cases {
            let p50 = us(c["summary"]["latency"]["p50_ns"].as_u64().unwrap());
            assert!(
                html.contains(&format!("<td>{p50}</td>")),
                "{what}: p50 {p50}"
            );
        }
    };
    shows_every_p50(&page, "the file");

    let mut version = Command::new("chromium");
    version.arg("--version");
    if !tool_present(&mut version, "chromium") {
        return;
    }
    let profile = dir.path().join("profile");
    let browser = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            // Any request would fail and be logged: the page must make none.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.display()),
            "--dump-dom",
            &format!("file://{}", html.display()),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(browser, Duration::from_secs(90));
    let (dom, log) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "chromium: {log}");
    assert!(!log.contains("CONSOLE"), "console messages: {log}");
    assert!(!log.contains("net::ERR"), "a request was made: {log}");
    shows_every_p50(&dom, "the page as rendered");
    assert!(dom.matches("<svg").count() >= 4, "the plots rendered");
}

/// `--repeat 10` of one case, split into the odd and the even runs: two runs of the same
/// configuration taken under the same conditions (interleaved), so any difference is noise.
fn split_runs(json: &Path, dir: &Path) -> (String, String) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    let cases = v["cases"].as_array().unwrap().clone();
    let mut paths = Vec::new();
    for parity in [1, 0] {
        v["cases"] = Value::Array(
            cases
                .iter()
                .filter(|c| c["repetition"].as_u64().unwrap() % 2 == parity)
                .cloned()
                .collect(),
        );
        let p = dir.join(format!("half{parity}.json"));
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        paths.push(p.display().to_string());
    }
    (paths[0].clone(), paths[1].clone())
}

fn verdicts(base: &str, new: &str, dir: &Path, extra: &[&str]) -> (i32, Vec<(String, String)>) {
    let out_json = dir.join("compare.json");
    let mut args = vec!["compare", base, new, "--export"];
    let export = format!("json={}", out_json.display());
    args.push(&export);
    args.extend_from_slice(extra);
    let out = run(&args, Duration::from_secs(30));
    let code = out.status.code().unwrap();
    assert!(code == 0 || code == 1, "{}", text(&out.stderr));
    let c: Value = serde_json::from_slice(&std::fs::read(&out_json).unwrap()).unwrap();
    let rows = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["figure"].as_str().unwrap().to_string(),
                r["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (code, rows)
}

#[test]
fn compare_finds_no_change_between_like_runs_and_a_busy_cpu_slower() {
    let _alone = alone();
    let dir = temp_dir();
    let args = |json: &Path| -> Vec<String> {
        [
            "run",
            "stream",
            "-t",
            "uds",
            "--pin",
            "0,1",
            "--rate",
            "5khz",
            "--duration",
            "200ms",
            "--warmup",
            "50ms",
            "--no-floor",
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([json.display().to_string()])
        .collect()
    };
    let base_json = dir.path().join("base.json");
    let mut a = args(&base_json);
    a.extend(["--repeat".into(), "10".into()]);
    let out = run(
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Like runs: never slower (nor faster) on latency.
    let (odd, even) = split_runs(&base_json, dir.path());
    let (_, rows) = verdicts(&odd, &even, dir.path(), &["--fail-on", "slower"]);
    for (figure, verdict) in &rows {
        if figure.starts_with('p') {
            assert!(
                verdict == "same" || verdict == "inconclusive",
                "{figure}: {verdict} between like runs"
            );
        }
    }
    assert!(rows.iter().any(|(f, _)| f == "p50"));

    // The same runs as two directories of one run each, as a bench alternating two builds
    // writes them: pooled, they compare alike.
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let v: Value = serde_json::from_slice(&std::fs::read(&base_json).unwrap()).unwrap();
    for (i, case) in v["cases"].as_array().unwrap().iter().enumerate() {
        let side = if i % 2 == 0 { &a_dir } else { &b_dir };
        std::fs::create_dir_all(side).unwrap();
        let mut one = v.clone();
        one["cases"] = Value::Array(vec![case.clone()]);
        std::fs::write(
            side.join(format!("{i:02}.json")),
            serde_json::to_vec(&one).unwrap(),
        )
        .unwrap();
    }
    let out_json = dir.path().join("pooled.json");
    let out = run(
        &[
            "compare",
            a_dir.to_str().unwrap(),
            b_dir.to_str().unwrap(),
            "--export",
            &format!("json={}", out_json.display()),
        ],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let c: Value = serde_json::from_slice(&std::fs::read(&out_json).unwrap()).unwrap();
    let p50 = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["figure"] == "p50")
        .unwrap();
    assert_eq!(
        (p50["base_runs"].as_u64(), p50["new_runs"].as_u64()),
        (Some(5), Some(5)),
        "{p50}"
    );
    assert!(
        ["same", "inconclusive"].contains(&p50["verdict"].as_str().unwrap()),
        "{p50}"
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run(
        &["compare", empty.to_str().unwrap(), b_dir.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("holds no .json result"),
        "{}",
        text(&out.stderr)
    );

    // The same case with a CPU hog beside the reader: slower on latency. The hog runs in
    // bursts at a real-time priority, so it takes the CPU from the reader whatever else the
    // machine is doing (a plain busy loop does not: on this VM it spares the reader the slow
    // wake-up of an idle CPU, and the median gets faster).
    let hog_script = "import os,time\n\
        try:\n    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))\n    print('fifo', flush=True)\nexcept OSError:\n    print('no', flush=True)\n\
        os.sched_setaffinity(0, {1})\n\
        end = time.time() + 60\n\
        while time.time() < end:\n    t = time.time()\n    while time.time() - t < 0.002:\n        pass\n    time.sleep(0.001)\n";
    let mut hog = Command::new("python3")
        .args(["-c", hog_script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(hog.stdout.take().unwrap()),
        &mut said,
    )
    .unwrap();
    if said.trim() != "fifo" {
        let _ = hog.kill();
        let _ = hog.wait();
        eprintln!("skipped the injected slowdown: a real-time priority needs root here");
        return;
    }
    std::thread::sleep(Duration::from_millis(200));
    let new_json = dir.path().join("new.json");
    let mut a = args(&new_json);
    a.extend(["--repeat".into(), "5".into()]);
    let out = run(
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        Duration::from_secs(120),
    );
    let _ = hog.kill();
    let _ = hog.wait();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (code, rows) = verdicts(
        &odd,
        &new_json.display().to_string(),
        dir.path(),
        &["--fail-on", "slower"],
    );
    let p50 = rows.iter().find(|(f, _)| f == "p50").unwrap();
    assert_eq!(p50.1, "slower", "{rows:?}");
    assert_eq!(code, 1, "--fail-on slower");
}

#[test]
fn compare_refuses_runs_that_differ_unless_allowed() {
    let _shared = sharing();
    let dir = temp_dir();
    let mut paths = Vec::new();
    for (name, nodelay) in [("a.json", "true"), ("b.json", "false")] {
        let p = dir.path().join(name);
        let out = run(
            &[
                "run",
                "pingpong",
                "-t",
                "tcp",
                "--duration",
                "100ms",
                "--no-floor",
                "--opt",
                &format!("nodelay={nodelay}"),
                "--json",
                p.to_str().unwrap(),
            ],
            Duration::from_secs(60),
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        paths.push(p.display().to_string());
    }
    let out = run(&["compare", &paths[0], &paths[1]], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(all.contains("nodelay"), "names the setting: {all}");
    assert!(all.contains("--allow-different"), "{all}");
    let out = run(
        &["compare", &paths[0], &paths[1], "--allow-different"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("inconclusive"), "one run each: {table}");
    assert!(table.contains("--repeat 5"), "says what is needed: {table}");
}
