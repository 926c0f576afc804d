//! The `dds` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "dds")]

use super::*;

#[test]
fn dds_counts_every_message_with_a_waitset_and_with_a_listener() {
    exact_counts("dds", &[]);
    exact_counts("dds", &["--opt", "read=listener"]);
}

#[test]
fn dds_batching_writers_lose_nothing_and_say_so() {
    // Ping-pong flushes each write (else it would wait out the timeout); a stream's last
    // batch goes out with the flush after END.
    exact_counts("dds", &["--opt", "batching=true"]);
    pubsub_loses_nothing("dds", &["--opt", "batching=true"]);
    let c = &case_of("run stream -t dds --count 100 --no-floor --opt batching=true");
    assert_eq!(c.roles[1].counters.messages_received, 100);
    assert_eq!(
        mapped(c, "writer batching"),
        Some("on"),
        "{:?}",
        c.config.delivery_mapping
    );
}

#[test]
fn dds_pubsub_fans_out_without_loss_and_counts_what_best_effort_overwrites() {
    pubsub_loses_nothing("dds", &[]);
    // A slow subscriber whose reader keeps the last 4 samples: the older unread ones are
    // overwritten, and each is counted.
    slow_subscriber_counts_what_it_missed(
        "dds",
        "1000",
        "500ms",
        &["--opt", "history=keep-last-4"],
    );
}

#[test]
fn dds_a_killed_peer_ends_the_case_within_the_timeout() {
    killed_peer_ends_the_case("dds", &[], FAULT_TIMEOUT);
}

#[test]
fn dds_refuses_what_its_qos_cannot_promise() {
    refused(
        &words("run stream -t dds --delivery reliable --history latest"),
        "overwrites unread samples",
    );
    refused(
        &words("run stream -t dds --delivery reliable --opt reliability=best-effort"),
        "drop one of them",
    );
    refused(
        &["run", "stream", "-t", "dds", "--opt", "history=keep-last-0"],
        "keep-last-N",
    );
}

#[test]
fn dds_finds_its_peers_across_namespace_hosts() {
    subscribers_on_namespace_hosts_count_every_message("dds");
}
