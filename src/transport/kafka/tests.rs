//! The `kafka` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "kafka")]

use super::*;

#[test]
fn kafka_counts_every_message_async_and_acknowledged_one_by_one() {
    exact_counts("kafka", &[]);
    exact_counts(
        "kafka",
        &words("--opt sync=true --opt idempotence=false --opt linger=1"),
    );
}

#[test]
fn kafka_a_writer_ahead_of_the_broker_waits_for_room_and_loses_nothing() {
    // librdkafka queues 100,000 messages at most: a writer of 300,000 finds its queue full
    // and waits for delivery reports to make room.
    let c =
        &case_of("run stream -t kafka --size 64 --count 300000 --warmup 0s --checksum --no-floor");
    assert_eq!(c.roles[0].counters.messages_sent, 300_000);
    let k = &c.roles[1].counters;
    assert_eq!(
        (
            k.messages_received,
            k.lost,
            k.duplicated,
            k.reordered,
            k.corrupted
        ),
        (300_000, 0, 0, 0, 0)
    );
    // A message larger than the whole queue is named at once, not waited on; the writer
    // still ends its stream, so its reader ends on that, not on its own timeout.
    let dir = temp_dir();
    let json = dir.path().join("too-large.json");
    let (out, r) = output_and_result(
        &words("run stream -t kafka --size 2m --opt queue=1 --count 3 --no-floor --timeout 60s"),
        &json,
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("give --opt queue=MiB above it"), "{all}");
    let (writer, reader) = (&r.cases[0].roles[0], &r.cases[0].roles[1]);
    assert!(
        writer
            .error
            .as_deref()
            .is_some_and(|e| e.contains("--opt queue")),
        "{:?}",
        writer.error
    );
    assert_eq!(
        reader.error, None,
        "the reader should end on the writer's END"
    );
    assert_eq!(reader.counters.messages_received, 0);
}

#[test]
fn kafka_a_reader_behind_its_topic_s_retention_fails_naming_it_with_results_kept() {
    // A 4 MiB log in 1 MiB segments, checked every second; a reader that takes 20 ms a
    // message (its client fetches some 64 MiB ahead of it) falls hundreds of MiB behind
    // 6,000 messages of 64 KiB (375 MiB), however fast the writer goes. Its next message
    // is deleted: it fails, naming the option, instead of jumping ahead. (4 s of writing
    // was too little with one CPU kept busy: the writer wrote 123 MiB.)
    let dir = temp_dir();
    let json = dir.path().join("behind.json");
    let (out, r) = output_and_result(
        &words("run stream -t kafka --size 64k --count 6000 --warmup 0s --slow-subscriber 20ms --opt retention=4 --no-floor"),
        &json,
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("the broker deleted messages this reader had not read")
            && all.contains("--opt retention=MiB"),
        "{all}"
    );
    let c = &r.cases[0];
    assert!(
        c.error.as_deref().is_some_and(|e| e.contains("retention")),
        "{:?}",
        c.error
    );
    // What was measured before is kept: the writer's messages, the reader's first ones.
    assert!(c.roles[0].counters.messages_sent > 0, "{:?}", c.roles[0]);
    assert!(
        c.roles[1].counters.messages_received > 0,
        "{:?}",
        c.roles[1]
    );
    assert_eq!(
        c.config.options.get("retention").map(String::as_str),
        Some("4")
    );
}

#[test]
fn kafka_pubsub_fans_out_without_loss_measures_the_broker_and_counts_best_effort() {
    pubsub_loses_nothing("kafka", &[]);
    // acks=0: the producer does not wait for the broker; the readers count what it did
    // not take (nothing, on a healthy broker) instead of failing the case.
    let r = broker_measured_at_1khz("kafka", &["--delivery", "best-effort"]);
    let c = &r.cases[0];
    assert_eq!(c.error, None);
    assert!(!c.config.strict);
    assert!(
        c.config.delivery_mapping.iter().any(|s| s.value == "0"),
        "{:?}",
        c.config.delivery_mapping
    );
    let sent = c.roles[0].counters.messages_sent;
    for r in &c.roles[1..3] {
        let k = &r.counters;
        assert_eq!(k.messages_received + k.lost, sent, "{k:?}");
    }
}

/// A Kafka role gets ready when its consumer has joined its group: beside the other Kafka
/// tests' brokers and two busy loops that took over 3 s (the initiator "did not get ready
/// within 3s"), so faults here are noticed within a longer timeout.
const KAFKA_FAULT_TIMEOUT: u64 = 10;

#[test]
fn kafka_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
    peer_and_broker_faults_end_the_case("kafka", "kafka.Kafka", KAFKA_FAULT_TIMEOUT);
    stopped_while_the_broker_starts("kafka", "kafka.Kafka");
}

#[test]
fn kafka_names_what_is_missing_and_refuses_what_its_log_cannot_do() {
    names_an_absent_broker(
        "kafka",
        "kafka://127.0.0.1:1",
        "is a Kafka broker running there?",
    );
    // Without its jars, the broker is not started, and the error says how to get them.
    let out = msgperf(&["run", "pingpong", "-t", "kafka", "--no-floor"])
        .env("MSGPERF_KAFKA", "/nonexistent/kafka")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("/nonexistent/kafka/libs") && err.contains("src/transport/kafka/fetch-broker"),
        "{err}"
    );
    refused(
        &["run", "stream", "-t", "kafka", "--history", "latest"],
        "it has no keep-last",
    );
    refused(
        &words("run stream -t kafka --delivery best-effort --opt acks=1"),
        "drop one of them",
    );
    refused(
        &words("run stream -t kafka --opt idempotence=true --opt acks=1"),
        "needs acks=all",
    );
    refused(
        &["run", "stream", "-t", "kafka", "--opt", "linger=soon"],
        "--opt linger=soon",
    );
    refused(
        &["run", "stream", "-t", "kafka", "--opt", "retention=2"],
        "give whole MiB from 4",
    );
}

/// Kafka's jars are a need of their own, fetched by the script in its folder.
#[test]
fn kafka_s_missing_jars_are_a_need_fetched_by_its_script() {
    let dir = temp_dir();
    let mut cmd = msgperf(&["transports", "--needs"]);
    cmd.env("MSGPERF_KAFKA", dir.path());
    let out = run_command(cmd, Duration::from_secs(20));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout)
            .lines()
            .any(|l| l == "script src/transport/kafka/fetch-broker"),
        "{}",
        text(&out.stdout)
    );
}
