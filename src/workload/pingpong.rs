//! `pingpong`: the initiator sends a message, the responder sends it back; the initiator times
//! the round trip (a null RPC when the message is the bare header).

use super::message::{self, Outgoing, END, MEASURED};
use super::{
    check_common, check_exchange, check_two_roles, only_end, phases, receive, receive_buffer,
    receive_in_place, two_roles, RoleControl, RoleError, RoleSpec, Sent, StopRule, Topology,
    Workload,
};
use crate::measure::{clock::IntervalClock, Metric, Recorder};
use crate::result::{CaseConfig, FloorKind, LatencyKind, RoleKind};
use crate::transport::{Capabilities, Endpoint, Exchange, TransportError};
use std::sync::atomic::AtomicBool;

pub struct PingPong;

const INITIATOR: RoleKind = RoleKind::new("initiator");
const RESPONDER: RoleKind = RoleKind::new("responder");

impl Workload for PingPong {
    fn name(&self) -> &'static str {
        "pingpong"
    }
    fn about(&self) -> &'static str {
        "round trips: send, wait for the echo, repeat (latency distribution, CPU per round trip)"
    }
    fn metrics(&self) -> &'static [Metric] {
        &Metric::MESSAGES
    }
    fn latency(&self, _: &CaseConfig) -> (LatencyKind, Metric) {
        (LatencyKind::ROUND_TRIP, Metric::RTT)
    }
    fn survey_sizes(&self) -> &'static [usize] {
        &[64, 4096]
    }
    fn floor_kind(&self, _: &CaseConfig) -> Option<FloorKind> {
        Some(FloorKind::RoundTrip)
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        check_two_roles(case)?;
        check_exchange(
            case,
            caps,
            &[Exchange::Both, Exchange::Alternate],
            "needs a reply to every message",
        )?;
        check_common(case, caps)?;
        if case.rate_hz.is_some() {
            return Err(
                "pingpong sends the next message when the reply comes: --rate does not apply; drop it"
                    .into(),
            );
        }
        Ok(())
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        two_roles(case, INITIATOR, RESPONDER)
    }
    fn exchange(&self, _: &CaseConfig) -> Exchange {
        Exchange::Alternate
    }
    fn run(
        &self,
        role: &RoleSpec,
        ends: &mut [Box<dyn Endpoint>],
        case: &CaseConfig,
        rec: &mut Recorder,
        ctl: &RoleControl,
    ) -> Result<Option<Sent>, RoleError> {
        let ep = only_end(ends)?;
        if role.drives {
            initiate(ep, case, rec, ctl.stop).map(Some)
        } else {
            respond(ep, case, rec).map(|_| None)
        }
    }
}

/// The initiator: a warm-up, then the measured round trips.
fn initiate(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    rec: &mut Recorder,
    stop: &AtomicBool,
) -> Result<Sent, RoleError> {
    let mut out = Outgoing::new(case.size_bytes, case.checksum);
    let mut buf = receive_buffer(case);
    let clock = IntervalClock::new();
    phases(case, rec, |rec, seq, rule, record| {
        exchange(
            ep, case, rec, &mut out, &mut buf, seq, rule, record, stop, &clock,
        )
    })
}

/// The responder: echoes every message until END.
fn respond(ep: &mut dyn Endpoint, case: &CaseConfig, rec: &mut Recorder) -> Result<(), RoleError> {
    let mut buf = receive_buffer(case);
    let clock = IntervalClock::new();
    let mut measuring = false;
    // A read is timed from the return of the call before it: only a few ns of this loop's
    // bookkeeping lie between, and one timestamp fewer per round trip matters when both
    // roles share a CPU. Every time here is subtracted from another of this process: the
    // interval clock's, whose reading does not stall the echo.
    let mut last = clock.now();
    loop {
        let n = receive(ep, &mut buf, case, &mut rec.counters)?;
        let t1 = clock.now();
        let t0 = std::mem::replace(&mut last, t1);
        let m = &buf[..n];
        let flags = message::flags(m);
        if flags & END != 0 {
            return Ok(());
        }
        if flags & MEASURED != 0 && !measuring {
            measuring = true;
            rec.reset();
        }
        if let Err(e) = message::verify(m, case.size_bytes, case.checksum) {
            if case.strict {
                return Err(RoleError::Integrity(e));
            }
            rec.counters.corrupted += 1;
            continue;
        }
        ep.send(m)?;
        let t2 = clock.now();
        last = t2;
        if measuring {
            rec.record_primary(Metric::RECV_CALL, t1 - t0, t1);
            rec.record(Metric::SEND_CALL, t2 - t1);
            let c = &mut rec.counters;
            c.messages_received += 1;
            c.bytes_received += n as u64;
            c.messages_sent += 1;
            c.bytes_sent += n as u64;
            rec.mark_end(t2);
        }
    }
}

/// One phase of round trips; returns the next sequence number.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn exchange(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    rec: &mut Recorder,
    out: &mut Outgoing,
    buf: &mut [u8],
    seq: &mut u64,
    rule: StopRule,
    record: bool,
    stop: &AtomicBool,
    clock: &IntervalClock,
) -> Result<(), RoleError> {
    let flags = if record { MEASURED } else { 0 };
    let mut done = 0u64;
    loop {
        let t0 = clock.now();
        let this = *seq;
        if case.zero_copy {
            ep.send_with(case.size_bytes, &mut |slot| {
                message::build_in_place(slot, this, t0, flags, 0, case.checksum)
            })?;
        } else {
            ep.send(out.stamp(this, t0, flags, 0))?;
        }
        // It went out: END counts it, whatever its reply does.
        *seq += 1;
        let t1 = clock.now();
        // Wait for this round trip's reply; on an unreliable transport a lost one is counted
        // and a late one (of a round trip already counted lost) is skipped.
        let n = loop {
            let got = if case.read_in_place {
                // The reply is checked where it lies (built in place: reading every byte).
                let (mut check, mut got_seq) = (Ok(()), 0);
                receive_in_place(ep, rec, &mut |m| {
                    if m.len() < message::HEADER {
                        // No header to read: the length check names it.
                        (got_seq, check) = (this, message::verify(m, case.size_bytes, false));
                        return;
                    }
                    got_seq = message::seq(m);
                    check = if case.zero_copy {
                        message::verify_in_place(m, case.size_bytes, case.checksum)
                    } else {
                        message::verify(m, case.size_bytes, case.checksum)
                    };
                })
                .map(|n| (n, got_seq, Some(check)))
            } else {
                receive(ep, buf, case, &mut rec.counters)
                    .map(|n| (n, message::seq(&buf[..n]), None))
            };
            match got {
                Ok((n, s, check)) if s == this => break Some((n, check)),
                Ok((_, s, _)) if !case.strict && s < this => rec.counters.reordered += 1,
                Ok((_, s, _)) => {
                    return Err(RoleError::Integrity(format!(
                        "round trip {this} got the reply of message {s}"
                    )))
                }
                Err(TransportError::Timeout(_)) if !case.strict => break None,
                Err(e) => return Err(e.into()),
            }
        };
        let t2 = clock.now();
        match n {
            None => rec.counters.lost += 1,
            Some((n, check)) => {
                let check = check
                    .unwrap_or_else(|| message::verify(&buf[..n], case.size_bytes, case.checksum));
                if let Err(e) = check {
                    if case.strict {
                        return Err(RoleError::Integrity(e));
                    }
                    rec.counters.corrupted += 1;
                } else if record {
                    rec.record_primary(Metric::RTT, t2 - t0, t2);
                    rec.record(Metric::SEND_CALL, t1 - t0);
                    rec.record(Metric::RECV_CALL, t2 - t1);
                    let c = &mut rec.counters;
                    c.messages_sent += 1;
                    c.bytes_sent += case.size_bytes as u64;
                    c.messages_received += 1;
                    c.bytes_received += n as u64;
                    rec.mark_end(t2);
                }
            }
        }
        done += 1;
        if rule.done(done, t2, stop) {
            return Ok(());
        }
    }
}
