//! `pingpong`: the initiator sends a message, the responder sends it back; the initiator times
//! the round trip (a null RPC when the message is the bare header).

use super::message::{self, Outgoing, END, MEASURED};
use super::oneway::{one_way, EveryNth};
use super::payload::{self, Typed, PAYLOAD};
use super::{
    check_common, check_exchange, check_two_roles, only_end, param, phases, receive,
    receive_buffer, receive_in_place, two_roles, Param, ParamKind, Params, RoleControl, RoleError,
    RoleRun, Sent, StopRule, Topology, Workload,
};
use crate::measure::{clock as mono, clock::IntervalClock, Metric, Recorder};
use crate::result::{CaseConfig, FloorKind, LatencyKind, RoleKind};
use crate::transport::{Capabilities, Endpoint, Exchange, TransportError};
use std::sync::atomic::AtomicBool;

pub struct PingPong;

const INITIATOR: RoleKind = RoleKind::new("initiator");
const RESPONDER: RoleKind = RoleKind::new("responder");

/// `--time-calls-every`: the round trips whose send and read calls are timed.
const TIME_CALLS_EVERY: Param = Param {
    key: "time-calls-every",
    value_name: "N",
    default: Some("1"),
    about: "time the send and read calls of every Nth round trip only (every round trip's latency is still measured): a fast transport's round trip without a clock read a call on its path",
    kind: ParamKind::Count {
        min: 1,
        max: u64::MAX,
    },
    sweeps: false,
    always_shown: false,
};

/// `--time-calls-every` of `case` (1 where not given; the plan refuses 0).
fn time_calls_every(case: &CaseConfig) -> u64 {
    param::count(case, TIME_CALLS_EVERY.key).unwrap_or(1)
}

impl Workload for PingPong {
    fn name(&self) -> &'static str {
        "pingpong"
    }
    fn about(&self) -> &'static str {
        "round trips: send, wait for the echo, repeat (latency distribution, CPU per round trip)"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&PAYLOAD, &TIME_CALLS_EVERY]
    }
    fn message_size(&self, params: &Params) -> Option<Result<usize, String>> {
        payload::message_size(params)
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
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (role, ends, case, rec, ctl) = (r.role, r.ends, r.case, r.rec, r.ctl);
        let ep = only_end(ends)?;
        if role.drives {
            initiate(ep, case, rec, ctl).map(Some)
        } else {
            respond(ep, case, rec, ctl).map(|_| None)
        }
    }
}

/// The initiator: a warm-up, then the measured round trips.
fn initiate(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    rec: &mut Recorder,
    ctl: &RoleControl,
) -> Result<Sent, RoleError> {
    let mut out = Outgoing::new(case.size_bytes, case.checksum);
    let mut buf = receive_buffer(case);
    let clock = IntervalClock::new();
    let mut typed = Typed::of(case)?;
    let sent = phases(case, rec, |rec, seq, rule, record| {
        let mut loop_ = Loop {
            ep: &mut *ep,
            case,
            out: &mut out,
            buf: &mut buf,
            stop: ctl.stop,
            across_hosts: ctl.across_hosts(),
            clock: &clock,
            typed: typed.as_mut(),
        };
        loop_.exchange(rec, seq, rule, record)
    })?;
    if let Some(t) = &typed {
        t.record_figures(rec, || clock.now());
    }
    Ok(sent)
}

/// The responder: echoes every message until END. Across hosts it also times each request's
/// way there, on CLOCK_MONOTONIC with the initiator's clock put on its own, beside which the
/// initiator's half round trip stands.
fn respond(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    rec: &mut Recorder,
    ctl: &RoleControl,
) -> Result<(), RoleError> {
    let across_hosts = ctl.across_hosts();
    let mut buf = receive_buffer(case);
    let clock = IntervalClock::new();
    let mut typed = Typed::of(case)?;
    let mut measuring = false;
    // The calls of every Nth request are timed, by the responder's own count (it cannot know
    // beforehand which request comes next), and only those read the clock on the echo's way.
    let mut timed_calls = EveryNth::new(time_calls_every(case), 0);
    let mut timed = timed_calls.next();
    // A read is timed from the return of the call before it: only a few ns of this loop's
    // bookkeeping lie between, and one timestamp fewer per round trip matters when both
    // roles share a CPU. Every time here is subtracted from another of this process: the
    // interval clock's, whose reading does not stall the echo.
    let mut last = clock.now();
    loop {
        let n = receive(ep, &mut buf, case, &mut rec.counters)?;
        // Read where the call is timed, or a typed request's decoding is.
        let t1 = if timed || typed.is_some() {
            clock.now()
        } else {
            0
        };
        let arrival = if across_hosts { mono::now() } else { 0 };
        let t0 = last;
        let m = &mut buf[..n];
        let flags = message::flags(m);
        if flags & END != 0 {
            if let Some(t) = &typed {
                t.record_figures(rec, || clock.now());
            }
            return Ok(());
        }
        if flags & MEASURED != 0 && !measuring {
            measuring = true;
            rec.reset();
        }
        let mut check = message::verify(m, case.size_bytes, case.checksum);
        // A typed request is decoded, and the reply encoded afresh (the same value, so the
        // initiator checks it as its own): a remote call's marshalling at both ends.
        let mut send_from = t1;
        if let (Some(t), Ok(())) = (typed.as_mut(), &check) {
            check = t.decode(m);
            let t_decoded = clock.now();
            let seq = message::seq(m);
            t.encode(seq, m)?;
            let t_encoded = clock.now();
            if case.checksum {
                message::reseal(m);
            }
            if measuring {
                rec.record(Metric::DECODE, t_decoded - t1);
                rec.record(Metric::ENCODE, t_encoded - t_decoded);
            }
            send_from = t_encoded;
        }
        if let Err(e) = check {
            if case.strict {
                return Err(RoleError::Integrity(e));
            }
            rec.counters.corrupted += 1;
            timed = timed_calls.next();
            if timed {
                last = clock.now();
            }
            continue;
        }
        ep.send(m)?;
        let timed_next = timed_calls.next();
        let t2 = if timed || timed_next { clock.now() } else { 0 };
        if timed_next {
            last = t2;
        }
        if measuring {
            if across_hosts {
                let sent = message::send_ns(m).wrapping_add_signed(ctl.clock_shift(0));
                let there = one_way(rec, arrival, sent);
                rec.record(Metric::ONE_WAY, there);
            }
            let c = &mut rec.counters;
            c.messages_received += 1;
            c.bytes_received += n as u64;
            c.messages_sent += 1;
            c.bytes_sent += n as u64;
            if timed {
                rec.record_primary(Metric::RECV_CALL, t1 - t0, t1);
                rec.record(Metric::SEND_CALL, t2 - send_from);
                // The window ends at the last request timed: its rate counts the requests
                // up to it.
                rec.mark_end_received(t2);
            }
        }
        timed = timed_next;
    }
}

/// A reply: its length, its check where it was made in place, and the ns decoding it took
/// there.
type Reply = (usize, Option<Result<(), String>>, u64);

/// What one initiator's phases of round trips share.
struct Loop<'a> {
    ep: &'a mut dyn Endpoint,
    case: &'a CaseConfig,
    out: &'a mut Outgoing,
    buf: &'a mut [u8],
    stop: &'a AtomicBool,
    /// The responder is on another host: requests carry CLOCK_MONOTONIC, which it can put
    /// on its own clock, rather than this process's interval clock.
    across_hosts: bool,
    clock: &'a IntervalClock,
    typed: Option<&'a mut Typed>,
}

/// A round trip whose reply came (or was lost): its times, booked by [`Loop::book`].
struct Answered {
    /// Before the request was built, after it was encoded (typed), after the send call
    /// (where the calls are timed) and after the reply was read.
    t0: u64,
    t_send: u64,
    t1: u64,
    t2: u64,
    timed: bool,
    reply: Option<Reply>,
}

impl Loop<'_> {
    /// One phase of round trips, advancing `seq` past each message sent. A round trip is
    /// booked (its reply checked, its times recorded) once the next request is out, while
    /// that one is on its way: the booking is not on the next round trip's path. A typed
    /// reply is decoded, and booked, before the next request, since its round trip ends with
    /// its decoding.
    #[inline(always)]
    fn exchange(
        &mut self,
        rec: &mut Recorder,
        seq: &mut u64,
        rule: StopRule,
        record: bool,
    ) -> Result<(), RoleError> {
        let clock = self.clock;
        let flags = if record { MEASURED } else { 0 };
        // The round trips whose calls are timed: multiples of N by sequence number.
        let mut timed_calls = EveryNth::new(time_calls_every(self.case), *seq);
        let mut done = 0u64;
        let mut unbooked: Option<Answered> = None;
        loop {
            let timed = timed_calls.next();
            let t0 = clock.now();
            let this = *seq;
            let t_send = match self.request(this, t0, flags) {
                Ok(t) => t,
                Err(e) => {
                    if let Some(a) = unbooked.take() {
                        self.book(rec, a, record)?;
                    }
                    return Err(e);
                }
            };
            // It went out: END counts it, whatever its reply does.
            *seq += 1;
            let t1 = if timed { clock.now() } else { 0 };
            if let Some(a) = unbooked.take() {
                self.book(rec, a, record)?;
            }
            let reply = self.reply(rec, this, self.pattern())?;
            let t2 = clock.now();
            let answered = Answered {
                t0,
                t_send,
                t1,
                t2,
                timed,
                reply,
            };
            done += 1;
            let finished = rule.done(done, t2, self.stop);
            if finished || self.typed.is_some() {
                self.book(rec, answered, record)?;
            } else {
                unbooked = Some(answered);
            }
            if finished {
                return Ok(());
            }
        }
    }

    /// Whether replies carry the byte pattern that a message built in place has (a typed body
    /// is built, and checked, by its codec).
    fn pattern(&self) -> bool {
        self.case.zero_copy && self.typed.is_none()
    }

    /// Sends round trip `this`'s request, begun at `t0`; returns when its encoding ended
    /// (`t0` where nothing is encoded), which the send call is timed from.
    #[inline(always)]
    fn request(&mut self, this: u64, t0: u64, flags: u32) -> Result<u64, RoleError> {
        let (case, clock) = (self.case, self.clock);
        let stamp = if self.across_hosts { mono::now() } else { t0 };
        // Encoded before the send call is timed; the round trip includes it.
        let mut t_send = t0;
        if case.zero_copy {
            let (mut encoded, mut t_encoded) = (Ok(()), t0);
            let typed = &mut self.typed;
            self.ep
                .send_with(case.size_bytes, &mut |slot| match typed {
                    Some(t) => {
                        message::build_header(slot, this, stamp, flags, 0);
                        encoded = t.encode(this, slot);
                        t_encoded = clock.now();
                        if case.checksum {
                            message::reseal(slot);
                        }
                    }
                    None => message::build_in_place(slot, this, stamp, flags, 0, case.checksum),
                })?;
            encoded?;
            if self.typed.is_some() {
                t_send = t_encoded;
            }
        } else {
            if let Some(t) = self.typed.as_mut() {
                t.encode(this, self.out.buf_mut())?;
                t_send = clock.now();
            }
            self.ep.send(self.out.stamp(this, stamp, flags, 0))?;
        }
        Ok(t_send)
    }

    /// Books a round trip: checks its reply (decoding a typed one that was copied), then
    /// records its latency, its calls' times and its counts where the phase is measured.
    #[inline(always)]
    fn book(&mut self, rec: &mut Recorder, a: Answered, record: bool) -> Result<(), RoleError> {
        let case = self.case;
        let Some((n, check, mut decode_ns)) = a.reply else {
            rec.counters.lost += 1;
            return Ok(());
        };
        let mut check = check
            .unwrap_or_else(|| message::verify(&self.buf[..n], case.size_bytes, case.checksum));
        // A reply read in place was decoded there; a copied one is decoded here.
        let mut t_done = a.t2;
        if let (Some(t), Ok(()), false) = (self.typed.as_mut(), &check, case.read_in_place) {
            check = t.decode(&self.buf[..n]);
            t_done = self.clock.now();
            decode_ns = t_done - a.t2;
        }
        if let Err(e) = check {
            if case.strict {
                return Err(RoleError::Integrity(e));
            }
            rec.counters.corrupted += 1;
        } else if record {
            rec.record_primary(Metric::RTT, t_done - a.t0, t_done);
            if a.timed {
                rec.record(Metric::SEND_CALL, a.t1 - a.t_send);
                rec.record(Metric::RECV_CALL, a.t2 - a.t1);
            }
            if self.typed.is_some() {
                rec.record(Metric::ENCODE, a.t_send - a.t0);
                rec.record(Metric::DECODE, decode_ns);
            }
            let c = &mut rec.counters;
            c.messages_sent += 1;
            c.bytes_sent += case.size_bytes as u64;
            c.messages_received += 1;
            c.bytes_received += n as u64;
            rec.mark_end(t_done);
        }
        Ok(())
    }

    /// Waits for round trip `this`'s reply (its length, its check if made in place, and how
    /// long decoding it there took); on an unreliable transport a lost one is None
    /// (counted by the caller) and a late one (of a round trip already counted lost) is
    /// skipped. A reply read in place is checked (and a typed one decoded) where it lies.
    #[inline(always)]
    fn reply(
        &mut self,
        rec: &mut Recorder,
        this: u64,
        pattern: bool,
    ) -> Result<Option<Reply>, RoleError> {
        let (case, clock) = (self.case, self.clock);
        let mut decode_ns = 0;
        loop {
            let got = if case.read_in_place {
                let (mut check, mut got_seq) = (Ok(()), 0);
                let typed = &mut self.typed;
                receive_in_place(self.ep, rec, &mut |m| {
                    if m.len() < message::HEADER {
                        // No header to read: the length check names it.
                        (got_seq, check) = (this, message::verify(m, case.size_bytes, false));
                        return;
                    }
                    got_seq = message::seq(m);
                    check = if pattern {
                        message::verify_in_place(m, case.size_bytes, case.checksum)
                    } else {
                        message::verify(m, case.size_bytes, case.checksum)
                    };
                    if let (Some(t), Ok(()), true) = (typed.as_mut(), &check, got_seq == this) {
                        let d0 = clock.now();
                        check = t.decode(m);
                        decode_ns = clock.now() - d0;
                    }
                })
                .map(|n| (n, got_seq, Some(check)))
            } else {
                receive(self.ep, self.buf, case, &mut rec.counters)
                    .map(|n| (n, message::seq(&self.buf[..n]), None))
            };
            match got {
                Ok((n, s, check)) if s == this => return Ok(Some((n, check, decode_ns))),
                Ok((_, s, _)) if !case.strict && s < this => rec.counters.reordered += 1,
                Ok((_, s, _)) => {
                    return Err(RoleError::Integrity(format!(
                        "round trip {this} got the reply of message {s}"
                    )))
                }
                Err(TransportError::Timeout(_)) if !case.strict => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }
}
