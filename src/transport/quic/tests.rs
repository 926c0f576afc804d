//! The `quic` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "quic")]

use super::*;

#[test]
fn quic_counts_every_message_on_its_streams_and_datagrams() {
    exact_counts("quic", &[]);
    // Datagrams at a pace a reader keeps up with, and ping-pong: nothing lost on loopback.
    let dir = temp_dir();
    for (workload, pace) in [("pingpong", None), ("stream", Some("2khz"))] {
        let mut args = vec![
            "run",
            workload,
            "-t",
            "quic",
            "--delivery",
            "best-effort",
            "--size",
            "64,1414",
            "--count",
            "1000",
            "--warmup",
            "20ms",
            "--checksum",
            "--no-floor",
        ];
        if let Some(rate) = pace {
            args.extend(["--rate", rate]);
        }
        let r = result_of(&args, &dir.path().join(format!("{workload}.json")));
        for c in &r.cases {
            let what = format!("quic datagrams {workload} {} B", c.config.size_bytes);
            assert_eq!(c.error, None, "{what}");
            assert_eq!(mapped(c, "carried in"), Some("datagrams"), "{what}");
            assert_eq!(c.roles[0].counters.messages_sent, 1000, "{what}");
            let k = &c.roles[1].counters;
            assert_eq!(k.corrupted, 0, "{what}");
            assert_eq!(k.messages_received + k.lost, 1000, "{what}: {k:?}");
        }
    }
}

#[test]
fn quic_pubsub_loses_nothing_and_a_slow_datagram_reader_counts_its_losses() {
    pubsub_loses_nothing("quic", &[]);
    slow_subscriber_counts_what_it_missed("quic", "1000", "500ms", &[]);
}

#[test]
fn quic_a_killed_peer_ends_the_case_within_the_timeout() {
    killed_peer_ends_the_case("quic", &[], FAULT_TIMEOUT);
    killed_peer_ends_the_case("quic", &["--opt", "datagrams=true"], FAULT_TIMEOUT);
}

#[test]
fn quic_refuses_what_its_datagrams_cannot_carry() {
    refused(
        &words("run stream -t quic --opt datagrams=true --delivery reliable"),
        "needs quic's stream",
    );
    refused(
        &words("run stream -t quic --delivery best-effort --size 4k"),
        "carries in one message",
    );
    refused(
        &["run", "stream", "-t", "quic", "--history", "latest"],
        "fifo only",
    );
}

#[test]
fn quic_sets_up_and_closes_every_connection_with_its_handshake() {
    let c = &case_of("run connect -t quic --n 100 --size 100 --warmup 0s");
    let k = &c.roles[0].counters;
    assert_eq!(k.messages_sent, 100, "--n connections");
    assert_eq!(k.bytes_received, 100 * 100, "every exchange echoed");
    // Each connection carried a TLS handshake with the certificate: kilobytes, not bytes.
    let wire = c.wire.as_ref().map(|w| w.bytes);
    assert!(wire.is_some_and(|b| b > 100 * 1000), "{wire:?}");
}
