//! The command line tried with generated values (proptest): every combination either runs to a
//! successful end or is refused with exit 2 and one line (clap's own: its line and usage), never a panic, a hang or a run that
//! outlives its bound.

mod support;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use std::time::{Duration, Instant};
use support::*;

/// A value for an option: mostly one a user would write that should run (so that runs are
/// tried, not only refusals), else one that should be refused, or any short string.
fn value(
    good: &'static [&'static str],
    bad: &'static [&'static str],
    junk: &'static str,
) -> impl Strategy<Value = String> {
    prop_oneof![
        7 => proptest::sample::select(good).prop_map(str::to_string),
        1 => proptest::sample::select(bad).prop_map(str::to_string),
        1 => junk.prop_map(|s: String| s),
    ]
}

fn args() -> impl Strategy<Value = Vec<String>> {
    (
        proptest::sample::select(&["pingpong", "stream", "pubsub", "burst"][..]),
        value(
            &["", "64", "1k", "4KiB", "64kb", "32", "64,4k", "1.5k"],
            &["0", "31", "2G", "-1", "k", "1MB,2MB,3MB"],
            "[0-9kKMiBb.,]{0,6}",
        ),
        value(
            &["", "", "10khz", "1khz", "max"],
            &["0.001hz", "0hz", "-5hz", "1e9hz", "10", "fast"],
            "[0-9a-z.]{0,6}",
        ),
        value(
            &["150ms", "100ms", "50ms"],
            // (A bare number is seconds: "200" would be a valid 200 s run, not a refusal.)
            &["0s", "0", "abc", "1us", "200x", "-1s"],
            "[0-9]{1,3}(ms|us|ns)",
        ),
        value(&["", "0s", "20ms"], &["-1s", "x"], "[0-9]{1,2}(ms|us)"),
        value(&["", "10s", "5s"], &["0s", "1ms", "1x"], "[0-9]{1,2}s"),
        value(&["", "1", "2"], &["0", "100000", "-2"], "[0-9]{1,2}"),
        value(
            &["", "buffer=none", "framing=length"],
            &["write-size=7", "nope=1", "buffer"],
            "[a-z=]{0,8}",
        ),
        value(&["", "100ms", "1s"], &["0s", "no"], "[0-9]{1,2}ms"),
        value(&["", "1", "2"], &["0", "1001"], "[0-9]"),
    )
        .prop_map(
            |(workload, size, rate, duration, warmup, timeout, subs, opt, interval, repeat)| {
                let mut a: Vec<String> = vec![
                    "run".into(),
                    workload.into(),
                    "-t".into(),
                    "uds".into(),
                    "--no-floor".into(),
                ];
                let mut flag = |name: &str, v: &str| {
                    if !v.is_empty() {
                        a.push(format!("--{name}={v}"));
                    }
                };
                flag("size", &size);
                flag("rate", &rate);
                flag("duration", &duration);
                flag("warmup", &warmup);
                flag("timeout", &timeout);
                flag("subs", &subs);
                flag("opt", &opt);
                flag("interval", &interval);
                flag("repeat", &repeat);
                a
            },
        )
}

proptest! {
    #![proptest_config(Config {
        cases: 48,
        // Each case is a whole run: report the failing line rather than search long for a
        // smaller one.
        max_shrink_iters: 8,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    })]

    #[test]
    fn any_command_line_runs_or_is_refused_in_one_line(args in args()) {
        let _shared = sharing();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let start = Instant::now();
        // The longest a valid line here may run: repetitions x sizes x (warm-up, duration and
        // a case's set-up), far under this bound; only a hang reaches it.
        let out = run(&refs, Duration::from_secs(120));
        let err = text(&out.stderr);
        let code = out.status.code();
        prop_assert!(
            code == Some(0) || code == Some(2),
            "{args:?}: exit {code:?}: {err}"
        );
        if code == Some(2) {
            // msgperf's own refusal is one line; clap's (a number that is not one) is its
            // error line, then usage and a pointer to --help.
            if err.starts_with("msgperf: ") {
                prop_assert_eq!(err.trim().lines().count(), 1, "{:?}: {}", args, err);
            } else {
                prop_assert!(err.starts_with("error: "), "{args:?}: {err}");
                prop_assert!(err.trim().lines().count() <= 6, "{args:?}: {err}");
            }
            prop_assert!(out.stdout.is_empty(), "{args:?}: refused, yet printed");
            prop_assert!(start.elapsed() < Duration::from_secs(30), "{args:?}: refused late");
        }
        prop_assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
