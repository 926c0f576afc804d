//! `stream`: the writer sends as fast as the transport takes messages, the reader receives and
//! checks each one; throughput is measured at the reader. With `--confirm` the writer waits for
//! an acknowledgement of every message (NML's confirm_write).

use super::message::{self, Outgoing, ACK, CONTROL, END, HEADER, MEASURED};
use super::{check_common, receive, receive_buffer, RoleError, StopRule, Workload};
use crate::measure::integrity::{Arrival, SeqTracker};
use crate::measure::{clock, Metric, Recorder};
use crate::result::CaseConfig;
use crate::transport::{Capabilities, Endpoint, FloorKind};
use std::sync::atomic::AtomicBool;

pub struct Stream;

impl Workload for Stream {
    fn name(&self) -> &'static str {
        "stream"
    }
    fn about(&self) -> &'static str {
        "one-way stream at full speed: messages/s and MB/s at the reader, loss, duplicates, reordering"
    }
    fn roles(&self) -> [&'static str; 2] {
        ["writer", "reader"]
    }
    fn latency_kind(&self, case: &CaseConfig) -> &'static str {
        if case.confirm {
            "round trip (write to ack)"
        } else {
            "one-way (incl. queueing)"
        }
    }
    fn floor_kind(&self) -> FloorKind {
        FloorKind::Stream
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        check_common(case, caps)
    }

    fn active(
        &self,
        ep: &mut dyn Endpoint,
        case: &CaseConfig,
        rec: &mut Recorder,
        stop: &AtomicBool,
    ) -> Result<u64, RoleError> {
        let mut out = Outgoing::new(case.size_bytes, case.checksum);
        let mut buf = receive_buffer(case);
        let mut seq = 0;
        if !case.warmup.is_zero() {
            seq = write(
                ep,
                case,
                rec,
                &mut out,
                &mut buf,
                seq,
                StopRule::warmup(case),
                false,
                stop,
            )?;
        }
        rec.reset();
        write(
            ep,
            case,
            rec,
            &mut out,
            &mut buf,
            seq,
            StopRule::measured(case),
            true,
            stop,
        )
    }

    fn passive(
        &self,
        ep: &mut dyn Endpoint,
        case: &CaseConfig,
        rec: &mut Recorder,
    ) -> Result<(), RoleError> {
        let mut buf = receive_buffer(case);
        let mut ack = [0u8; HEADER];
        let mut tracker = SeqTracker::new();
        let mut measuring = false;
        let result = loop {
            let t0 = clock::now();
            let n = match receive(ep, &mut buf, case, rec) {
                Ok(n) => n,
                Err(e) => break Err(e.into()),
            };
            let t1 = clock::now();
            let m = &buf[..n];
            let flags = message::flags(m);
            if flags & END != 0 {
                if measuring {
                    tracker.end(message::seq(m));
                }
                break Ok(());
            }
            if flags & CONTROL != 0 {
                continue;
            }
            if flags & MEASURED != 0 && !measuring {
                measuring = true;
                rec.reset();
                tracker.reset();
            }
            if let Err(e) = message::verify(m, case.size_bytes, case.checksum) {
                if case.strict {
                    break Err(RoleError::Integrity(e));
                }
                rec.counters.corrupted += 1;
                continue;
            }
            let seq = message::seq(m);
            let sent_at = message::send_ns(m);
            if case.confirm {
                ep.send(message::signal(&mut ack, ACK, seq))?;
            }
            if measuring {
                let arrival = tracker.observe(seq);
                if case.strict && arrival != Arrival::InOrder {
                    break Err(RoleError::Integrity(format!(
                        "message {seq} arrived {arrival:?} on a reliable transport"
                    )));
                }
                rec.record(Metric::RecvCall, t1 - t0);
                rec.record_primary(Metric::OneWay, t1.saturating_sub(sent_at), t1);
                rec.counters.messages_received += 1;
                rec.counters.bytes_received += n as u64;
                rec.mark_end(t1);
            }
        };
        let c = &tracker.counts;
        rec.counters.lost = c.lost;
        rec.counters.duplicated = c.duplicated;
        rec.counters.reordered = c.reordered;
        if result.is_ok() && case.strict && c.lost > 0 {
            return Err(RoleError::Integrity(format!(
                "{} messages never arrived on a reliable transport",
                c.lost
            )));
        }
        result
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn write(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    rec: &mut Recorder,
    out: &mut Outgoing,
    buf: &mut [u8],
    mut seq: u64,
    rule: StopRule,
    record: bool,
    stop: &AtomicBool,
) -> Result<u64, RoleError> {
    let flags = if record { MEASURED } else { 0 };
    let mut done = 0u64;
    loop {
        let t0 = clock::now();
        ep.send(out.stamp(seq, t0, flags))?;
        let t1 = clock::now();
        let mut now = t1;
        if case.confirm {
            let n = receive(ep, buf, case, rec)?;
            now = clock::now();
            let m = &buf[..n];
            if message::flags(m) & ACK == 0 || message::seq(m) != seq {
                return Err(RoleError::Integrity(format!(
                    "message {seq} was acknowledged as {}",
                    message::seq(m)
                )));
            }
            if record {
                rec.record(Metric::Rtt, now - t0);
                rec.record(Metric::RecvCall, now - t1);
                rec.counters.messages_received += 1;
                rec.counters.bytes_received += n as u64;
            }
        }
        if record {
            rec.record_primary(Metric::SendCall, t1 - t0, t1);
            rec.counters.messages_sent += 1;
            rec.counters.bytes_sent += case.size_bytes as u64;
            rec.mark_end(now);
        }
        seq += 1;
        done += 1;
        if rule.done(done, now, stop) {
            return Ok(seq);
        }
    }
}
