//! The `grpc` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "grpc")]

use super::*;

#[test]
fn grpc_counts_every_message_in_unary_calls_and_client_streams() {
    exact_counts("grpc", &[]);
    // A stream with acknowledgements runs on a bidirectional stream.
    let c =
        &case_of("run stream -t grpc --confirm --count 2000 --warmup 20ms --checksum --no-floor");
    assert_eq!(c.roles[1].counters.messages_received, 2000);
}

#[test]
fn grpc_pubsub_server_streams_lose_nothing() {
    pubsub_loses_nothing("grpc", &[]);
}

#[test]
fn grpc_a_killed_peer_ends_the_case_within_the_timeout() {
    killed_peer_ends_the_case("grpc", &[], FAULT_TIMEOUT);
}

#[test]
fn grpc_says_it_never_drops_and_refuses_a_latest_value() {
    let c = &case_of("run stream -t grpc --delivery best-effort --count 500 --no-floor");
    assert!(
        c.config
            .delivery_mapping
            .iter()
            .any(|s| s.value == "never drops"),
        "{:?}",
        c.config.delivery_mapping
    );
    assert_eq!(c.roles[1].counters.lost, 0);
    refused(
        &["run", "stream", "-t", "grpc", "--history", "latest"],
        "fifo only",
    );
}
