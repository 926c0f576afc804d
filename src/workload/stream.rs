//! `stream`: the writer sends as fast as the transport takes messages, the reader receives and
//! checks each one; throughput is measured at the reader. With `--confirm` the writer waits for
//! an acknowledgement of every message (NML's confirm_write).

use super::message::{self, Outgoing, ACK, END, HEADER, MEASURED};
use super::{
    check_common, check_exchange, check_two_roles, only_end, receive, receive_buffer,
    receive_in_place, two_roles, RoleControl, RoleError, RoleSpec, Sent, StopRule, Topology,
    Workload,
};
use crate::measure::integrity::{Arrival, SeqTracker};
use crate::measure::pacing::{RealClock, Schedule};
use crate::measure::{clock, Metric, Recorder};
use crate::result::{CaseConfig, FloorKind, LatencyKind, RoleKind};
use crate::transport::{Capabilities, Endpoint, Exchange, TransportError};
use std::sync::atomic::AtomicBool;

pub struct Stream;

impl Workload for Stream {
    fn name(&self) -> &'static str {
        "stream"
    }
    fn about(&self) -> &'static str {
        "one-way stream at full speed: messages/s and MB/s at the reader, loss, duplicates, reordering"
    }
    fn latency(&self, case: &CaseConfig) -> (LatencyKind, Metric) {
        if case.confirm {
            (LatencyKind::WriteToAck, Metric::Rtt)
        } else {
            (LatencyKind::OneWay, Metric::OneWay)
        }
    }
    fn floor_kind(&self, case: &CaseConfig) -> Option<FloorKind> {
        // A paced stream moves what its schedule says, and a confirmed one waits a round trip
        // per message: neither divides by the plain stream.
        (case.rate_hz.is_none() && !case.confirm).then_some(FloorKind::Stream)
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        check_two_roles(case)?;
        if case.confirm {
            check_exchange(
                case,
                caps,
                &[Exchange::Both, Exchange::Alternate],
                "--confirm needs an acknowledgement of every message",
            )?;
        } else {
            check_exchange(
                case,
                caps,
                &[Exchange::Both, Exchange::OneWay],
                "sends message after message with no reply",
            )?;
        }
        check_common(case, caps)
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        two_roles(case, RoleKind::Writer, RoleKind::Reader)
    }
    fn exchange(&self, case: &CaseConfig) -> Exchange {
        // An acknowledged stream's acks come back while messages still go out.
        if case.confirm {
            Exchange::Both
        } else {
            Exchange::OneWay
        }
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
            let sent = write_stream(ep, case, rec, ctl.stop)?;
            // Flow control as a number: the share of its window the writer spent in write
            // calls (copying, and waiting while a slow reader held it back).
            let window = rec.window_ns();
            if window > 0 {
                let in_writes = rec.total_ns(Metric::SendCall) as f64 / window as f64;
                rec.figure("writer's time in write calls", "%", in_writes * 100.0);
            }
            Ok(Some(sent))
        } else {
            read_stream(ep, case, rec, case.slow_subscriber).map(|_| None)
        }
    }
}

/// The writer: a warm-up, then the measured messages.
pub(crate) fn write_stream(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    rec: &mut Recorder,
    stop: &AtomicBool,
) -> Result<Sent, RoleError> {
    let mut out = Outgoing::new(case.size_bytes, case.checksum);
    let mut buf = receive_buffer(case);
    let mut seq = 0;
    // A writer that fails still says where its stream ended: its readers then end at once,
    // with every message counted, instead of waiting out --timeout on a broker.
    if !case.warmup.is_zero() {
        let warmup = StopRule::warmup(case);
        write(
            ep, case, rec, &mut out, &mut buf, &mut seq, warmup, false, stop,
        )
        .map_err(|e| e.ended(seq, seq))?;
    }
    rec.reset();
    let first_measured = seq;
    let measured = StopRule::measured(case);
    write(
        ep, case, rec, &mut out, &mut buf, &mut seq, measured, true, stop,
    )
    .map_err(|e| e.ended(first_measured, seq))?;
    Ok(Sent {
        first_measured,
        next: seq,
    })
}

/// The reader: checks and times every message until END; `slow` is spent on each message in
/// the measured window (a slow consumer).
pub(crate) fn read_stream(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    rec: &mut Recorder,
    slow: Option<std::time::Duration>,
) -> Result<(), RoleError> {
    let mut buf = receive_buffer(case);
    let mut ack = [0u8; HEADER];
    let mut tracker = SeqTracker::new();
    let mut measuring = false;
    let result = loop {
        let t0 = clock::now();
        let got = if case.read_in_place {
            let mut seen = Seen::default();
            receive_in_place(ep, rec, &mut |m| seen = Seen::of(m, case)).map(|n| (n, seen))
        } else {
            receive(ep, &mut buf, case, &mut rec.counters).map(|n| (n, Seen::of(&buf[..n], case)))
        };
        let (n, m) = match got {
            Ok(got) => got,
            Err(e) => break Err(e.into()),
        };
        let t1 = clock::now();
        if m.flags & END != 0 {
            if !measuring {
                // Not one measured message came: every one of them is lost.
                rec.reset();
                tracker.reset();
            }
            // END's send-time field holds the first measured sequence number.
            tracker.end(m.seq, m.send_ns);
            break Ok(());
        }
        if m.flags & MEASURED != 0 && !measuring {
            measuring = true;
            rec.reset();
            tracker.reset();
        }
        if let Err(e) = m.check {
            if case.strict {
                break Err(RoleError::Integrity(e));
            }
            rec.counters.corrupted += 1;
            continue;
        }
        if case.confirm {
            ep.send(message::signal(&mut ack, ACK, m.seq))?;
        }
        if measuring {
            let arrival = tracker.observe(m.seq);
            if case.strict && arrival != Arrival::InOrder {
                break Err(RoleError::Integrity(format!(
                    "message {} arrived {arrival:?} on a reliable transport",
                    m.seq
                )));
            }
            rec.record(Metric::RecvCall, t1 - t0);
            let one_way = t1.saturating_sub(m.send_ns);
            rec.record_primary(Metric::OneWay, one_way, t1);
            if case.rate_hz.is_some() {
                rec.record(Metric::OneWayIntended, one_way + m.lag_ns);
                // Sent while this reader already waited in its read: it had to be woken.
                let idle = t0 < m.send_ns;
                rec.record(
                    if idle {
                        Metric::OneWayReaderIdle
                    } else {
                        Metric::OneWayReaderBusy
                    },
                    one_way,
                );
            }
            rec.counters.messages_received += 1;
            rec.counters.bytes_received += n as u64;
            rec.mark_end(t1);
            // Slow only inside the measured window, so the backlog drains before END
            // rather than for minutes after it.
            if let Some(d) = slow {
                let window = case.duration.map_or(u64::MAX, |w| w.as_nanos() as u64);
                if t1.saturating_sub(rec.start_ns()) < window {
                    std::thread::sleep(d);
                }
            }
        }
    };
    let c = &tracker.counts;
    // On a latest-value transport a gap is a message overwritten before it was read.
    if case.latest {
        rec.counters.overwritten = c.lost;
    } else {
        rec.counters.lost = c.lost;
    }
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

/// What the reader needs of a message, taken while it is in hand (in place or copied).
struct Seen {
    flags: u32,
    seq: u64,
    send_ns: u64,
    lag_ns: u64,
    check: Result<(), String>,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            flags: 0,
            seq: 0,
            send_ns: 0,
            lag_ns: 0,
            check: Ok(()),
        }
    }
}

impl Seen {
    fn of(m: &[u8], case: &CaseConfig) -> Self {
        if m.len() < message::HEADER {
            // Read in place, it has no header to read (a copy would sit in a buffer that has).
            return Seen {
                check: message::verify(m, case.size_bytes, false),
                ..Seen::default()
            };
        }
        let flags = message::flags(m);
        let data = flags & END == 0;
        Seen {
            flags,
            seq: message::seq(m),
            send_ns: message::send_ns(m),
            lag_ns: message::lag_ns(m),
            check: match (data, case.zero_copy) {
                (false, _) => Ok(()),
                (true, true) => message::verify_in_place(m, case.size_bytes, case.checksum),
                (true, false) => message::verify(m, case.size_bytes, case.checksum),
            },
        }
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
    seq: &mut u64,
    rule: StopRule,
    record: bool,
    stop: &AtomicBool,
) -> Result<(), RoleError> {
    let flags = if record { MEASURED } else { 0 };
    let mut done = 0u64;
    // Each phase keeps its own open-loop schedule from its start (see measure::pacing).
    let schedule = Schedule::new(clock::now(), case.rate_hz);
    let mut pacer = RealClock { stop };
    loop {
        let intended = schedule.wait_for(done, &mut pacer);
        let t0 = clock::now();
        let lag = if schedule.paced() {
            t0.saturating_sub(intended)
        } else {
            0
        };
        let this = *seq;
        let sent = if case.zero_copy {
            ep.send_with(case.size_bytes, &mut |slot| {
                message::build_in_place(slot, this, t0, flags, lag, case.checksum)
            })
        } else {
            ep.send(out.stamp(this, t0, flags, lag))
        };
        let t1 = clock::now();
        if record && schedule.paced() {
            rec.record(Metric::SendLag, lag);
        }
        let mut now = t1;
        match sent {
            Ok(()) => {
                // It went out: END counts it, whatever its acknowledgement does.
                *seq += 1;
                if case.confirm {
                    let n = receive(ep, buf, case, &mut rec.counters)?;
                    now = clock::now();
                    let m = &buf[..n];
                    if message::flags(m) & ACK == 0 || message::seq(m) != this {
                        return Err(RoleError::Integrity(format!(
                            "message {this} was acknowledged as {}",
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
            }
            // A full queue told not to wait: the message is not sent, and counted.
            Err(TransportError::Full) => {
                *seq += 1;
                if record {
                    rec.counters.send_full += 1;
                }
            }
            Err(e) => return Err(e.into()),
        }
        done += 1;
        if rule.done(done, now, stop) {
            return Ok(());
        }
    }
}
