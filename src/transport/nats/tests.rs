//! The `nats` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "nats")]

use super::*;

#[test]
fn nats_readers_read_in_place_unless_they_poll() {
    let read_in_place = |poll: bool| {
        let o = msgperf::plan::RunOptions {
            workload: Some("stream".into()),
            transports: vec!["nats".into()],
            poll: Some(poll),
            ..Default::default()
        };
        msgperf::plan::cases(&o).unwrap()[0].read_in_place
    };
    assert!(read_in_place(false), "its library hands over its buffer");
    assert!(!read_in_place(true), "a polling reader copies");
}

#[test]
fn nats_counts_every_message_through_its_own_server() {
    exact_counts("nats", &[]);
}

#[test]
fn nats_server_placed_on_a_namespace_host_relays_every_message() {
    placed_broker_counts_every_message("nats");
}

#[test]
fn a_broker_is_placed_on_any_defined_host_and_refused_on_an_undefined_one() {
    let plan = |at: &str| {
        msgperf::plan::cases(&msgperf::plan::RunOptions {
            workload: Some("pubsub".into()),
            transports: vec!["nats".into()],
            hosts: vec![
                ("b".into(), "ssh -T user@10.0.0.2".into()),
                ("c".into(), "netns".into()),
            ],
            place: vec![("broker".into(), at.into())],
            ..Default::default()
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    assert_eq!(plan("b:1"), Ok(()));
    assert_eq!(plan("c"), Ok(()));
    assert_eq!(plan("local"), Ok(()));
    let e = plan("z").unwrap_err();
    assert!(e.contains("no host `z`") && e.contains("--host z="), "{e}");
    let e = plan("b,c").unwrap_err();
    assert!(e.contains("one broker"), "{e}");
}

#[test]
fn nats_server_placed_on_an_ssh_host_relays_every_message_and_its_death_is_named() {
    broker_on_an_ssh_host_counts_every_message("nats", "nats-server");
}

#[test]
fn nats_jetstream_counts_every_message_acknowledged_and_fans_out_to_every_consumer() {
    exact_counts("nats", &["--opt", "jetstream=memory"]);
    pubsub_loses_nothing("nats", &["--opt", "jetstream=file"]);
    // Reliable: a loss would fail the case, and the stream is gone with the case.
    let c = &case_of(
        "run pingpong -t nats --opt jetstream=file --delivery reliable --count 200 --warmup 0s",
    );
    assert!(c
        .config
        .delivery_mapping
        .iter()
        .any(|s| s.value == "at least once"));
    assert!(
        c.floor.is_some(),
        "the JetStream floor: {:?}",
        c.floor_error
    );
}

/// Asynchronous JetStream publish: up to 64 acknowledgements outstanding, every message
/// still delivered once, and the floor (written the same way) settles its publishes.
#[test]
fn nats_jetstream_async_publish_counts_every_message_and_measures_its_floor() {
    let async_publish = ["--opt", "jetstream=memory", "--opt", "acks-in-flight=64"];
    exact_counts("nats", &async_publish);
    let dir = temp_dir();
    let mut args = vec![
        "run",
        "stream",
        "-t",
        "nats",
        "--duration",
        "300ms",
        "--warmup",
        "0s",
    ];
    args.extend_from_slice(&async_publish);
    let r = result_of(&args, &dir.path().join("async.json"));
    let c = &r.cases[0];
    assert_eq!(c.error, None);
    assert_eq!(c.roles[1].counters.lost, 0);
    assert!(c
        .config
        .delivery_mapping
        .iter()
        .any(|s| s.setting == "publish" && s.value == "async, 64 in flight"));
    assert!(
        c.floor.is_some(),
        "the async-publish floor: {:?}",
        c.floor_error
    );
    // A window of none is refused before anything starts, naming the option; core NATS
    // has no acknowledgements to keep in flight, and the refusal names the fix.
    let nats = ["run", "stream", "-t", "nats", "--opt"];
    refused(
        &[&nats[..], &["acks-in-flight=0"]].concat(),
        "acks-in-flight",
    );
    refused(
        &[&nats[..], &["acks-in-flight=8"]].concat(),
        "jetstream=memory",
    );
}

#[test]
fn nats_pubsub_fans_out_without_loss_measures_the_broker_and_counts_slow_consumer_drops() {
    pubsub_loses_nothing("nats", &[]);
    broker_measured_at_1khz("nats", &[]);
    // A slow subscriber behind a small client queue: the client drops (a slow consumer),
    // and the subscriber counts every message it missed.
    slow_subscriber_counts_what_it_missed("nats", "1000", "500ms", &["--opt", "capacity=10"]);
}

#[test]
fn nats_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
    peer_and_broker_faults_end_the_case("nats", "nats-server", FAULT_TIMEOUT);
}

#[test]
fn nats_names_a_server_that_is_not_there() {
    names_an_absent_broker(
        "nats",
        "nats://127.0.0.1:1",
        "is nats-server running there?",
    );
    refused(
        &["run", "pingpong", "-t", "nats", "--opt", "broker=localhost"],
        "nats://",
    );
    refused(
        &["run", "stream", "-t", "nats", "--history", "latest"],
        "fifo only",
    );
}
