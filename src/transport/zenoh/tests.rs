//! The `zenoh` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "zenoh")]

use super::*;

fn zenoh_files() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".zenoh"))
        .collect()
}

#[test]
fn zenoh_counts_every_message_over_tcp_unix_sockets_and_shared_memory() {
    exact_counts("zenoh", &[]);
    exact_counts("zenoh", &["--opt", "endpoint=unix"]);
    exact_counts("zenoh", &["--opt", "shm=true"]);
}

#[test]
fn zenoh_pubsub_fans_out_without_loss_and_counts_best_effort_drops() {
    pubsub_loses_nothing("zenoh", &[]);
    // A slow subscriber with a small queue: its link backs up, the publisher's put finds
    // the transmit queue full and drops, and the subscriber counts every drop.
    slow_subscriber_counts_what_it_missed("zenoh", "16k", "1s", &["--opt", "queue=4"]);
}

#[test]
fn zenoh_a_killed_peer_ends_the_case_and_leaves_no_segment() {
    killed_peer_ends_the_case("zenoh", &[], FAULT_TIMEOUT);
    killed_peer_ends_the_case("zenoh", &["--opt", "shm=true"], FAULT_TIMEOUT);
    let left = zenoh_files();
    // Another zenoh program may be running: only a leftover of a dead process is a leak.
    for f in &left {
        let path = format!("/dev/shm/{f}");
        let mapped = std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            std::fs::read_to_string(p.path().join("maps")).is_ok_and(|m| m.contains(&path))
        });
        assert!(mapped, "{path} was left behind");
    }
}

#[test]
fn zenoh_refuses_what_it_cannot_promise() {
    refused(
        &words("run stream -t zenoh --delivery reliable --history latest"),
        "cannot be --delivery reliable",
    );
    refused(
        &words("run stream -t zenoh --delivery reliable --opt congestion=drop"),
        "drop one of them",
    );
    refused(
        &["run", "stream", "-t", "zenoh", "--opt", "queue=0"],
        "--opt queue=0",
    );
}
