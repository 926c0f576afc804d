//! Typed payloads (`--payload TYPE:FORMAT`): every body encoded by its sender and decoded in
//! full by its receiver, on each path a message takes (copied, built and read in place, with
//! and without a checksum), counted exactly; `run codec` alone; refusals. No timing is
//! asserted.

mod support;

use msgperf::result::{CaseResult, Metric, RoleResult, ENCODED_BYTES, MEMCPY_NS};
use std::time::Duration;
use support::*;

fn samples(r: &RoleResult, m: Metric) -> u64 {
    r.histogram(m).map_or(0, |h| h.len())
}

fn figure(r: &RoleResult, name: &str) -> Option<f64> {
    r.figures.iter().find(|f| f.name == name).map(|f| f.value)
}

/// Every role timed a copy of its mean body and says how large that body is.
fn check_figures(c: &CaseResult) {
    for r in &c.roles {
        let bytes = figure(r, ENCODED_BYTES).unwrap_or_else(|| panic!("{}: no size", c.key));
        assert!(
            bytes > 0.0 && (bytes as usize) < c.config.size_bytes,
            "{}",
            c.key
        );
        let copy = figure(r, MEMCPY_NS).unwrap_or_else(|| panic!("{}: no memcpy", c.key));
        assert!(copy > 0.0 && copy < 1e6, "{}: memcpy {copy} ns", c.key);
    }
}

#[test]
fn round_trips_encode_and_decode_every_body_on_each_path() {
    let _pace = sharing();
    for (t, opt) in [
        ("uds,inproc", None),
        ("shm", None),
        ("shm", Some("zero-copy=true")),
    ] {
        let mut args = vec![
            "run",
            "pingpong",
            "-t",
            t,
            "--payload",
            "struct256:postcard,pointcloud:20:rkyv,nml:protobuf,seq:10:capnp,string:50:flatbuffers",
            "--count",
            "300",
            "--checksum",
        ];
        if let Some(o) = opt {
            args.extend(["--opt", o]);
        }
        let cases = cases_of(&args);
        assert_eq!(cases.len(), 5 * t.split(',').count());
        for c in &cases {
            assert!(c.error.is_none(), "{}: {:?}", c.key, c.error);
            let [initiator, responder] = &c.roles[..] else {
                panic!("{}: two roles", c.key)
            };
            assert_eq!(
                initiator.counters.corrupted + responder.counters.corrupted,
                0
            );
            // The initiator encodes each request and decodes each reply; the responder
            // decodes each request and encodes its reply.
            for r in [initiator, responder] {
                assert_eq!(samples(r, Metric::ENCODE), 300, "{}", c.key);
                assert_eq!(samples(r, Metric::DECODE), 300, "{}", c.key);
            }
            assert_eq!(samples(initiator, Metric::RTT), 300, "{}", c.key);
            check_figures(c);
        }
    }
}

#[test]
fn streams_and_fan_out_decode_every_message_they_count() {
    let _pace = sharing();
    for args in [
        &["stream", "-t", "uds,shm"][..],
        &["stream", "-t", "shm", "--opt", "zero-copy=true"][..],
        &["pubsub", "-t", "uds", "--subs", "2"][..],
    ] {
        let mut all = vec!["run"];
        all.extend(args);
        all.extend([
            "--payload",
            "nml:cdr,array:100:json,seq:10:raw,struct4k:capnp,pointcloud:30:flatbuffers",
            "--count",
            "500",
            "--checksum",
        ]);
        for c in cases_of(&all) {
            assert!(c.error.is_none(), "{}: {:?}", c.key, c.error);
            let (writers, readers): (Vec<&RoleResult>, Vec<&RoleResult>) =
                c.roles.iter().partition(|r| r.counters.messages_sent > 0);
            assert_eq!(writers.len(), 1, "{}", c.key);
            assert_eq!(samples(writers[0], Metric::ENCODE), 500, "{}", c.key);
            assert!(!readers.is_empty(), "{}", c.key);
            for r in readers {
                assert_eq!(r.counters.messages_received, 500, "{}", c.key);
                assert_eq!(r.counters.corrupted, 0, "{}", c.key);
                assert_eq!(samples(r, Metric::DECODE), 500, "{}", c.key);
            }
            check_figures(&c);
        }
    }
}

#[test]
fn codec_times_each_format_alone_and_reads_in_place_where_it_can() {
    let _pace = sharing();
    let cases = cases_of(&["run", "codec", "--payload", "struct16:*", "--count", "1000"]);
    let formats: Vec<&str> = cases
        .iter()
        .map(|c| {
            c.config
                .param("payload")
                .unwrap()
                .trim_start_matches("struct16:")
        })
        .collect();
    assert_eq!(
        formats,
        [
            "raw",
            "postcard",
            "protobuf",
            "cdr",
            "rkyv",
            "flatbuffers",
            "capnp",
            "json"
        ]
    );
    for c in &cases {
        assert!(c.error.is_none(), "{}: {:?}", c.key, c.error);
        let r = &c.roles[0];
        assert_eq!(samples(r, Metric::ENCODE), 1000, "{}", c.key);
        assert_eq!(samples(r, Metric::DECODE), 1000, "{}", c.key);
        let in_place = c.config.param("payload") == Some("struct16:rkyv");
        assert_eq!(samples(r, Metric::ACCESS), if in_place { 1000 } else { 0 });
        for name in [
            "encode, batch mean",
            "decode, batch mean",
            "memcpy, batch mean",
        ] {
            let v = figure(r, name).unwrap_or_else(|| panic!("{}: no {name}", c.key));
            assert!(v > 0.0, "{}: {name} {v}", c.key);
        }
        assert_eq!(
            figure(r, "in place, batch mean").is_some(),
            in_place,
            "{}",
            c.key
        );
        check_figures(c);
    }
}

#[test]
fn bad_payloads_are_refused_naming_the_fix() {
    for (args, says) in [
        (
            &["pingpong", "-t", "uds", "--payload", "struct256"][..],
            "names no format",
        ),
        (
            &["pingpong", "-t", "uds", "--payload", "struct256:bincode"][..],
            "not a format",
        ),
        (
            &["pingpong", "-t", "uds", "--payload", "array:cdr"][..],
            "needs a count",
        ),
        (
            &[
                "pingpong",
                "-t",
                "uds",
                "--payload",
                "struct16:raw",
                "--size",
                "1k",
            ][..],
            "drop --size",
        ),
        (&["codec"][..], "needs a typed payload"),
        (
            &["codec", "-t", "uds", "--payload", "struct16:raw"][..],
            "drop -t uds",
        ),
        (
            &["pairs", "-t", "uds", "--payload", "struct16:raw"][..],
            "--payload is for",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend(args);
        let out = run(&all, Duration::from_secs(60));
        let err = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?} ran");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(err.lines().count() <= 3, "{args:?}: {err}");
    }
}
