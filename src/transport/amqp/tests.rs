//! The `amqp` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "amqp")]

use super::*;

#[test]
fn amqp_counts_every_message_plain_and_with_confirms_acks_and_quorum_queues() {
    exact_counts("amqp", &[]);
    exact_counts(
        "amqp",
        &words("--opt confirm=true --opt ack=manual --opt prefetch=50 --opt queue=quorum"),
    );
}

#[test]
fn amqp_persistent_messages_are_counted_and_their_mapping_printed() {
    let dir = temp_dir();
    let json = dir.path().join("persistent.json");
    let (out, r) = output_and_result(
        &words("run stream -t amqp --size 64k --count 1000 --warmup 20ms --checksum --no-floor --opt persistent=true --opt confirm=true"),
        &json,
    );
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert!(
        said.contains("persistence = on disk: durable queues, messages with delivery_mode 2"),
        "{said}"
    );
    assert!(
        said.contains("queue = classic: classic queues, durable"),
        "{said}"
    );
    let c = &r.cases[0];
    assert_eq!(c.roles[0].counters.messages_sent, 1000);
    let k = &c.roles[1].counters;
    assert_eq!(k.messages_received, 1000);
    assert_eq!(
        (k.lost, k.duplicated, k.reordered, k.corrupted),
        (0, 0, 0, 0)
    );
}

#[test]
fn amqp_streams_count_every_message_share_one_log_and_refuse_what_they_cannot_do() {
    exact_counts("amqp", &["--opt", "queue=stream", "--opt", "confirm=true"]);
    pubsub_loses_nothing("amqp", &["--opt", "queue=stream"]);
    let c = &case_of("run pubsub -t amqp --subs 2 --count 200 --rate 1khz --warmup 0s --no-floor --opt queue=stream");
    assert_eq!(mapped(c, "queue"), Some("stream"));
    assert_eq!(mapped(c, "acks"), Some("manual"));
    assert_eq!(mapped(c, "persistence"), Some("on disk"));
    // What the readers ran with is recorded, though not given.
    let opts = &c.config.effective_options;
    assert_eq!(opts.get("ack").map(String::as_str), Some("manual"));
    assert_eq!(opts.get("prefetch").map(String::as_str), Some("1000"));
    for (extra, says) in [
        (["--opt", "ack=auto"], "must acknowledge"),
        (["--opt", "prefetch=0"], "needs a prefetch"),
        (["--opt", "max-length=10"], "not a number of messages"),
        (["--history", "latest"], "by size or age"),
        (["--delivery", "best-effort"], "keeps every message"),
    ] {
        let mut args = vec!["run", "stream", "-t", "amqp", "--opt", "queue=stream"];
        args.extend_from_slice(&extra);
        refused(&args, says);
    }
}

#[test]
fn amqp_pubsub_fans_out_without_loss_measures_the_broker_and_counts_a_bounded_queues_drops() {
    pubsub_loses_nothing("amqp", &[]);
    broker_measured_at_1khz("amqp", &[]);
    // A slow reader that takes one message at a time (prefetch 1, acknowledged) from a
    // queue bounded at 10: the broker drops the oldest, and the reader counts each one.
    slow_subscriber_counts_what_it_missed(
        "amqp",
        "1000",
        "500ms",
        &words("--opt ack=manual --opt prefetch=1 --opt max-length=10"),
    );
}

#[test]
fn amqp_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
    peer_and_broker_faults_end_the_case("amqp", "beam.smp", FAULT_TIMEOUT);
}

#[test]
fn amqps_port_mapper_goes_with_its_broker() {
    let mut child = spawn(&words("run pingpong -t amqp --duration 60s --no-floor"));
    let pid = child.id();
    let epmd = broker_of(&mut child, "epmd");
    wait_for_role(&mut child, "responder");
    signal(pid, libc::SIGKILL);
    let _ = wait_output(child, Duration::from_secs(30));
    let end = Instant::now() + Duration::from_secs(10);
    while alive(epmd) {
        assert!(Instant::now() < end, "epmd {epmd} outlived msgperf");
        std::thread::sleep(Duration::from_millis(20));
    }
    for d in leftovers_of(pid) {
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(d));
    }
}

#[test]
fn amqp_names_a_broker_that_is_not_there_and_refuses_conflicting_delivery() {
    names_an_absent_broker(
        "amqp",
        "amqp://127.0.0.1:1",
        "is rabbitmq-server running there?",
    );
    refused(
        &["run", "stream", "-t", "amqp", "--delivery", "best-effort"],
        "bound it with --history latest",
    );
    refused(
        &words("run stream -t amqp --delivery reliable --history latest"),
        "drop one of them",
    );
    refused(
        &["run", "stream", "-t", "amqp", "--opt", "prefetch=70000"],
        "from 0 to 65535",
    );
}
