//! The `mqtt` adapter against its real library: tests of its own, included by
//! `tests/adapters.rs` beside the helpers they use.

#![cfg(feature = "mqtt")]

use super::*;

#[test]
fn mqtt_counts_every_message_at_qos_1() {
    exact_counts("mqtt", &[]);
}

#[test]
fn mqtt_counts_every_message_at_qos_2_and_measures_its_floor() {
    exact_counts("mqtt", &["--opt", "qos=2"]);
    pubsub_loses_nothing("mqtt", &["--opt", "qos=2"]);
    // The floor's last ping (its end) is released before its client disconnects: it
    // stalled until its side timed out when the disconnect went first.
    let c = &case_of("run pingpong -t mqtt --opt qos=2 --duration 300ms --warmup 0s");
    assert_eq!(c.floor_error, None);
    let f = c.floor.as_ref().expect("the QoS 2 ping-pong's floor");
    assert!(f.samples > 0 && f.rtt_p50_ns.unwrap_or(0) > 0, "{f:?}");
}

#[test]
fn mqtt_pubsub_fans_out_without_loss_and_measures_the_broker() {
    pubsub_loses_nothing("mqtt", &[]);
    broker_measured_at_1khz("mqtt", &[]);
}

#[test]
fn mqtt_a_killed_peer_or_broker_ends_the_case_within_the_timeout() {
    peer_and_broker_faults_end_the_case("mqtt", "mosquitto", FAULT_TIMEOUT);
}

#[test]
fn mqtt_names_a_broker_that_is_not_there_and_refuses_conflicting_qos() {
    names_an_absent_broker("mqtt", "mqtt://127.0.0.1:1", "is mosquitto running there?");
    refused(
        &words("run pingpong -t mqtt --delivery reliable --opt qos=0"),
        "needs QoS 1 or 2",
    );
    refused(
        &["run", "stream", "-t", "mqtt", "--history", "latest"],
        "fifo only",
    );
}
