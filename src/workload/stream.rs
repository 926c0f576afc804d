//! `stream`: the writer sends as fast as the transport takes messages, the reader receives and
//! checks each one; throughput is measured at the reader. With `--confirm` the writer waits for
//! an acknowledgement of every message (NML's confirm_write).

use super::oneway::{read_stream, write_stream, Flow, SLOW_SUBSCRIBER, STAMP_EVERY};
use super::payload::PAYLOAD;
use super::{
    check_common, check_exchange, check_one_way, check_two_roles, only_end, param, two_roles,
    Param, ParamKind, RoleError, RoleRun, Sent, Topology, Workload,
};
use crate::measure::Metric;
use crate::result::{CaseConfig, FloorKind, LatencyKind, RoleKind};
use crate::transport::{Capabilities, Exchange};

pub struct Stream;

const WRITER: RoleKind = RoleKind::new("writer");
const READER: RoleKind = RoleKind::new("reader");

/// `--confirm`: an acknowledgement of every message.
const CONFIRM: Param = Param {
    key: "confirm",
    value_name: "",
    default: Some("false"),
    about: "the writer waits for an acknowledgement of every message (NML's confirm_write)",
    kind: ParamKind::Flag,
    sweeps: false,
    always_shown: false,
};

fn confirm(case: &CaseConfig) -> bool {
    param::flag(case, CONFIRM.key)
}

impl Workload for Stream {
    fn name(&self) -> &'static str {
        "stream"
    }
    fn about(&self) -> &'static str {
        "one-way stream at full speed: messages/s and MB/s at the reader, loss, duplicates, reordering"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&CONFIRM, &SLOW_SUBSCRIBER, &STAMP_EVERY, &PAYLOAD]
    }
    fn message_size(&self, params: &super::Params) -> Option<Result<usize, String>> {
        super::payload::message_size(params)
    }
    fn metrics(&self) -> &'static [Metric] {
        &Metric::MESSAGES
    }
    fn latency(&self, case: &CaseConfig) -> (LatencyKind, Metric) {
        if confirm(case) {
            (LatencyKind::WRITE_TO_ACK, Metric::RTT)
        } else {
            (LatencyKind::ONE_WAY, Metric::ONE_WAY)
        }
    }
    fn survey_sizes(&self) -> &'static [usize] {
        &[65536]
    }
    fn floor_kind(&self, case: &CaseConfig) -> Option<FloorKind> {
        // A paced stream moves what its schedule says, and a confirmed one waits a round trip
        // per message: neither divides by the plain stream.
        (case.rate_hz.is_none() && !confirm(case)).then_some(FloorKind::Stream)
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        check_two_roles(case)?;
        if confirm(case) {
            check_exchange(
                case,
                caps,
                &[Exchange::Both, Exchange::Alternate],
                "--confirm needs an acknowledgement of every message",
            )?;
        } else {
            check_one_way(case, caps)?;
        }
        check_common(case, caps)
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        two_roles(case, WRITER, READER)
    }
    fn exchange(&self, case: &CaseConfig) -> Exchange {
        // An acknowledged stream's acks come back while messages still go out.
        if confirm(case) {
            Exchange::Both
        } else {
            Exchange::OneWay
        }
    }
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (role, ends, case, rec, ctl) = (r.role, r.ends, r.case, r.rec, r.ctl);
        let ep = only_end(ends)?;
        let flow = Flow {
            confirm: confirm(case),
            slow: param::duration(case, SLOW_SUBSCRIBER.key),
            clock_shift_ns: ctl.clock_shift(0),
            stamp_every: Flow::stamp_every(case),
        };
        if role.drives {
            let sent = write_stream(ep, case, flow, rec, ctl.stop)?;
            // Flow control as a number: the share of its window the writer spent in write
            // calls (copying, and waiting while a slow reader held it back).
            let window = rec.window_ns();
            if window > 0 {
                let in_writes = rec.total_ns(Metric::SEND_CALL) as f64 / window as f64;
                rec.figure("writer's time in write calls", "%", in_writes * 100.0);
            }
            Ok(Some(sent))
        } else {
            read_stream(ep, case, flow, rec).map(|_| None)
        }
    }
}
