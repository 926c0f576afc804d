//! `burst`: the sender writes `--burst N` messages back to back, then waits for the receiver's
//! acknowledgement of the burst's last one, and starts the next. What a request that fans into
//! several messages costs: the burst's round trip (its first send to the acknowledgement), and
//! how fast a burst drains, where a stream's steady state and a ping-pong's one message say
//! neither.

use super::message::{self, Outgoing, ACK, END, HEADER, MEASURED};
use super::{
    check_common, check_exchange, check_two_roles, only_end, param, phases, receive,
    receive_buffer, two_roles, Param, ParamKind, RoleError, RoleRun, Sent, StopRule, Topology,
    Workload,
};
use crate::measure::integrity::{Arrival, SeqTracker};
use crate::measure::{clock, Metric, Recorder};
use crate::result::{CaseConfig, LatencyKind, RoleKind};
use crate::transport::{Capabilities, Endpoint, Exchange};
use std::sync::atomic::AtomicBool;

pub struct Burst;

const SENDER: RoleKind = RoleKind::new("sender");
const RECEIVER: RoleKind = RoleKind::new("receiver");

/// A burst's first send to the acknowledgement of its last message, on the sender.
const BURST_RTT: Metric = Metric::new("burst_rtt_ns", 0);
/// Time inside one send call.
const SEND_CALL: Metric = Metric::new("send_call_ns", 1);

const BURST_ROUND_TRIP: LatencyKind = LatencyKind::new(
    "burst round trip",
    "a burst's first send to the acknowledgement of its last message, on the sender",
    true,
);

/// `--burst`: messages per burst.
const BURST: Param = Param {
    key: "burst",
    value_name: "N[,N...]",
    default: Some("16"),
    about: "messages a burst sends back to back before it waits for the acknowledgement of its last; a list runs a case for each",
    kind: ParamKind::Count {
        min: 1,
        max: u64::MAX,
    },
    sweeps: true,
    always_shown: true,
};

impl Workload for Burst {
    fn name(&self) -> &'static str {
        "burst"
    }
    fn about(&self) -> &'static str {
        "bursts of --burst N messages, each acknowledged at its last: the burst's round trip, how fast it drains"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&BURST]
    }
    fn metrics(&self) -> &'static [Metric] {
        &[BURST_RTT, SEND_CALL]
    }
    fn latency(&self, _: &CaseConfig) -> (LatencyKind, Metric) {
        (BURST_ROUND_TRIP, BURST_RTT)
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        check_two_roles(case)?;
        check_exchange(
            case,
            caps,
            &[Exchange::Both],
            "sends messages one way while acknowledgements come back",
        )?;
        check_common(case, caps)?;
        if !caps.reliable {
            return Err(format!(
                "burst waits for each burst's last message, which `{}` may lose: use a reliable transport (see `msgperf transports`)",
                case.transport
            ));
        }
        if case.rate_hz.is_some() {
            return Err(
                "burst sends the next burst when the last is acknowledged: --rate does not apply; drop it"
                    .into(),
            );
        }
        Ok(())
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        two_roles(case, SENDER, RECEIVER)
    }
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (role, ends, case, rec, ctl) = (r.role, r.ends, r.case, r.rec, r.ctl);
        let ep = only_end(ends)?;
        let burst = param::count(case, BURST.key).unwrap_or(1).max(1);
        if role.drives {
            let mut out = Outgoing::new(case.size_bytes, case.checksum);
            let mut buf = receive_buffer(case);
            let sent = phases(case, rec, |rec, seq, rule, record| {
                bursts(
                    ep, case, burst, rec, &mut out, &mut buf, seq, rule, record, ctl.stop,
                )
            })?;
            let window = rec.window_ns();
            if window > 0 {
                let msgs = rec.counters.messages_sent as f64;
                rec.figure(
                    "messages per second in bursts",
                    "/s",
                    msgs * 1e9 / window as f64,
                );
            }
            Ok(Some(sent))
        } else {
            receive_bursts(ep, case, burst, rec).map(|_| None)
        }
    }
}

/// Bursts until `rule` says stop; advances `seq` past every message sent.
#[allow(clippy::too_many_arguments)]
fn bursts(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    burst: u64,
    rec: &mut Recorder,
    out: &mut Outgoing,
    buf: &mut [u8],
    seq: &mut u64,
    rule: StopRule,
    record: bool,
    stop: &AtomicBool,
) -> Result<(), RoleError> {
    let flags = if record { MEASURED } else { 0 };
    let mut done = 0u64;
    loop {
        let t0 = clock::now();
        for _ in 0..burst {
            let s0 = clock::now();
            ep.send(out.stamp(*seq, s0, flags, 0))?;
            *seq += 1;
            if record {
                rec.record(SEND_CALL, clock::now() - s0);
            }
        }
        let last = *seq - 1;
        let n = receive(ep, buf, case, &mut rec.counters)?;
        let t1 = clock::now();
        let m = &buf[..n];
        if message::flags(m) & ACK == 0 || message::seq(m) != last {
            return Err(RoleError::Integrity(format!(
                "the burst ending at message {last} was acknowledged as {}",
                message::seq(m)
            )));
        }
        if record {
            rec.record_primary(BURST_RTT, t1 - t0, t1);
            let c = &mut rec.counters;
            c.messages_sent += burst;
            c.bytes_sent += burst * case.size_bytes as u64;
            rec.mark_end(t1);
        }
        done += burst;
        if rule.done(done, t1, stop) {
            return Ok(());
        }
    }
}

/// Checks every message in order until END, acknowledging each burst's last.
fn receive_bursts(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    burst: u64,
    rec: &mut Recorder,
) -> Result<(), RoleError> {
    let mut buf = receive_buffer(case);
    let mut ack = [0u8; HEADER];
    let mut tracker = SeqTracker::new();
    let mut measuring = false;
    loop {
        let n = receive(ep, &mut buf, case, &mut rec.counters)?;
        let now = clock::now();
        let m = &buf[..n];
        let (flags, seq) = (message::flags(m), message::seq(m));
        if flags & END != 0 {
            tracker.end(seq, message::send_ns(m));
            break;
        }
        if flags & MEASURED != 0 && !measuring {
            measuring = true;
            rec.reset();
            tracker.reset();
        }
        message::verify(m, case.size_bytes, case.checksum).map_err(RoleError::Integrity)?;
        if measuring && tracker.observe(seq) != Arrival::InOrder {
            return Err(RoleError::Integrity(format!(
                "message {seq} arrived out of order on a reliable transport"
            )));
        }
        if (seq + 1) % burst == 0 {
            ep.send(message::signal(&mut ack, ACK, seq))?;
        }
        if measuring {
            rec.counters.messages_received += 1;
            rec.counters.bytes_received += n as u64;
            rec.mark_end(now);
        }
    }
    rec.counters.lost = tracker.counts.lost;
    if tracker.counts.lost > 0 {
        return Err(RoleError::Integrity(format!(
            "{} messages never arrived on a reliable transport",
            tracker.counts.lost
        )));
    }
    Ok(())
}
