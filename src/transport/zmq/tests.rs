//! The `zmq` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "zmq")]

use super::*;

#[test]
fn zmq_counts_every_message_in_each_pattern() {
    exact_counts("zmq", &[]);
    exact_counts("zmq", &["--opt", "endpoint=ipc"]);
    // One way for a stream, request and reply for round trips.
    let dir = temp_dir();
    for (workload, pattern) in [("stream", "push-pull"), ("pingpong", "req-rep")] {
        let r = result_of(
            &[
                "run",
                workload,
                "-t",
                "zmq",
                "--opt",
                &format!("pattern={pattern}"),
                "--count",
                "2000",
                "--warmup",
                "20ms",
                "--no-floor",
            ],
            &dir.path().join(format!("{pattern}.json")),
        );
        assert_eq!(r.cases[0].error, None, "{pattern}");
        assert_eq!(
            r.cases[0].roles[1].counters.messages_received, 2000,
            "{pattern}"
        );
    }
}

#[test]
fn zmq_pubsub_fans_out_without_loss_and_counts_best_effort_drops() {
    pubsub_loses_nothing("zmq", &[]);
    // A slow subscriber behind a small high-water mark: the publisher drops, and every
    // drop is counted by the subscriber that missed it.
    slow_subscriber_counts_what_it_missed("zmq", "1000", "500ms", &["--opt", "hwm=10"]);
}

#[test]
fn zmq_a_killed_peer_ends_the_case_within_the_timeout() {
    killed_peer_ends_the_case("zmq", &[], FAULT_TIMEOUT);
}

#[test]
fn zmq_refuses_what_a_pattern_cannot_carry() {
    refused(
        &["run", "pingpong", "-t", "zmq", "--opt", "pattern=push-pull"],
        "one way only",
    );
    refused(
        &["run", "stream", "-t", "zmq", "--opt", "pattern=req-rep"],
        "strictly in turn",
    );
    refused(
        &words("run pubsub -t zmq --delivery reliable --opt full=drop"),
        "drop one of them",
    );
    refused(
        &["run", "pingpong", "-t", "zmq", "--opt", "hwm=many"],
        "--opt hwm=many",
    );
}
