//! The `aeron` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "aeron")]

use super::*;

#[test]
fn aeron_counts_every_message_over_ipc_and_udp() {
    exact_counts("aeron", &[]);
    exact_counts("aeron", &["--opt", "channel=udp"]);
}

#[test]
fn aeron_fans_a_topic_out_without_loss() {
    pubsub_loses_nothing("aeron", &[]);
    pubsub_loses_nothing("aeron", &["--opt", "channel=udp"]);
}

#[test]
fn aeron_a_killed_peer_or_media_driver_ends_the_case_within_the_timeout() {
    killed_peer_ends_the_case("aeron", &[], FAULT_TIMEOUT);
    service_fault_ends_the_case(
        "aeron",
        "service",
        "media driver",
        libc::SIGKILL,
        FAULT_TIMEOUT,
    );
    service_fault_ends_the_case(
        "aeron",
        "service",
        "media driver",
        libc::SIGSTOP,
        FAULT_TIMEOUT,
    );
}

#[test]
fn aeron_maps_best_effort_to_unreliable_udp_and_refuses_it_over_ipc() {
    let c = &case_of("run stream -t aeron --opt channel=udp --delivery best-effort --rate 2khz --count 500 --no-floor");
    assert_eq!(mapped(c, "reliability"), Some("reliable=false"));
    let k = &c.roles[1].counters;
    assert_eq!(k.messages_received + k.lost, 500, "{k:?}");
    refused(
        &["run", "stream", "-t", "aeron", "--opt", "reliable=false"],
        "channel=udp",
    );
}
