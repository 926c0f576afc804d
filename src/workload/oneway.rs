//! The one-way loops that `stream` and `pubsub` share: a writer that sends message after
//! message (open loop at `--rate`, or as fast as the transport takes them), and a reader that
//! checks every one, with loss, duplicates and reordering counted, and times every one (or
//! every Nth, `--stamp-every`).

use super::message::{self, Fault, Outgoing, ACK, END, HEADER, MEASURED, UNSTAMPED};
use super::payload::Typed;
use super::{phases, receive, receive_buffer, Param, ParamKind, RoleError, Sent, StopRule};
use crate::measure::integrity::{Arrival, SeqTracker};
use crate::measure::pacing::{RealClock, Schedule};
use crate::measure::{clock, Metric, Recorder};
use crate::result::CaseConfig;
use crate::transport::{Endpoint, TransportError};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// `--slow-subscriber`: the first reader spends this long on every message.
pub(crate) const SLOW_SUBSCRIBER: Param = Param {
    key: "slow-subscriber",
    value_name: "DURATION",
    default: None,
    about: "the first subscriber (reader) spends this long on every message: a slow consumer",
    kind: ParamKind::Duration,
    sweeps: false,
    always_shown: false,
};

/// `--stamp-every`: the writer stamps and times every Nth message only, the reader times the
/// arrival of those and every Nth read call; every message is still counted and checked.
pub(crate) const STAMP_EVERY: Param = Param {
    key: "stamp-every",
    value_name: "N",
    default: Some("1"),
    about: "stamp and time every Nth message only (latency from 1 in N; rate, loss and checks from all): a small-message stream's rate without a clock read per message",
    kind: ParamKind::Count {
        min: 1,
        // A writer checks its --duration at stamped messages: at most this many apart.
        max: 100_000,
    },
    sweeps: false,
    always_shown: false,
};

/// How a one-way stream runs, read from the case's parameters once, before its loop.
#[derive(Clone, Copy, Default)]
pub(crate) struct Flow {
    /// The writer waits for an acknowledgement of every message (`stream --confirm`).
    pub confirm: bool,
    /// A reader spends this long on every message of the measured window.
    pub slow: Option<Duration>,
    /// A reader: added to each message's send time to put it on the reader's clock (a sender
    /// on another host; see `RoleControl::clock_shifts_ns`).
    pub clock_shift_ns: i64,
    /// Every how many messages one is stamped and timed (`--stamp-every`; 1: each).
    pub stamp_every: u64,
}

impl Flow {
    /// `--stamp-every` of `case` (1 where not given; the plan refuses 0).
    pub fn stamp_every(case: &CaseConfig) -> u64 {
        super::param::count(case, STAMP_EVERY.key).unwrap_or(1)
    }
}

/// Picks every Nth of a count (those that are multiples of N) by counting down, so the loops
/// pay no division a message.
pub(crate) struct EveryNth {
    every: u64,
    /// How many more calls until the next one picked (0: this one).
    left: u64,
}

impl EveryNth {
    /// Counting on from `from` (the first call asks about `from`); `every` 0 is taken as 1.
    pub(crate) fn new(every: u64, from: u64) -> Self {
        let every = every.max(1);
        EveryNth {
            every,
            left: (every - from % every) % every,
        }
    }

    /// Whether the next of the count is picked.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> bool {
        if self.left == 0 {
            self.left = self.every - 1;
            true
        } else {
            self.left -= 1;
            false
        }
    }
}

/// The writer: a warm-up, then the measured messages.
pub(crate) fn write_stream(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    flow: Flow,
    rec: &mut Recorder,
    stop: &AtomicBool,
) -> Result<Sent, RoleError> {
    let mut out = Outgoing::new(case.size_bytes, case.checksum);
    let mut buf = receive_buffer(case);
    let mut typed = Typed::of(case)?;
    // The plain stream (unpaced, bytes, copied, unconfirmed) runs a loop compiled without the
    // other cases' branches: a 64 B message lasts a few tens of nanoseconds.
    let plain = case.rate_hz.is_none() && typed.is_none() && !case.zero_copy && !flow.confirm;
    let write_phase = if plain { write::<true> } else { write::<false> };
    let sent = phases(case, rec, |rec, seq, rule, record| {
        write_phase(
            ep,
            case,
            flow,
            rec,
            &mut out,
            &mut buf,
            typed.as_mut(),
            seq,
            rule,
            record,
            stop,
        )
    })?;
    if let Some(t) = &typed {
        t.record_figures(rec, clock::now);
    }
    Ok(sent)
}

/// The reader: checks and times every message until END; `flow.slow` is spent on each message
/// in the measured window (a slow consumer).
pub(crate) fn read_stream(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    flow: Flow,
    rec: &mut Recorder,
) -> Result<(), RoleError> {
    let mut buf = receive_buffer(case);
    let mut ack = [0u8; HEADER];
    let mut reader = StreamReader::new(case, flow)?;
    let result = loop {
        reader.call();
        // In place, every message is taken inside the transport's own read, as many as it
        // has at once: the reader pays no call a message for the transport's loop.
        let got = if case.read_in_place {
            rec.counters.read_calls += 1;
            ep.recv_each(&mut |msg| reader.take(msg, rec))
        } else {
            receive(ep, &mut buf, case, &mut rec.counters).map(|n| {
                reader.take(&buf[..n], rec);
                1
            })
        };
        if let Err(e) = got {
            break Err(e.into());
        }
        if let Some(done) = reader.done.take() {
            break done;
        }
        if let Some(seq) = reader.ack_due.take() {
            ep.send(message::signal(&mut ack, ACK, seq))?;
        }
    };
    let StreamReader { typed, tracker, .. } = reader;
    if let Some(t) = &typed {
        t.record_figures(rec, clock::now);
    }
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

/// A stream reader's state across messages and read calls: [`StreamReader::take`] does all
/// the work a message needs, wherever the transport hands it over.
struct StreamReader<'c> {
    case: &'c CaseConfig,
    flow: Flow,
    tracker: SeqTracker,
    measuring: bool,
    typed: Option<Typed>,
    timed_reads: EveryNth,
    /// The read call under way is timed, from `t0`; `first` until its first message is in.
    timed_call: bool,
    first: bool,
    t0: u64,
    /// The clock as last read (a slow reader's window check where a message carried no stamp).
    last: u64,
    /// How the stream ended (END, or an error), once it has.
    done: Option<Result<(), RoleError>>,
    /// A message to acknowledge (`--confirm`) before the next read.
    ack_due: Option<u64>,
    /// A message's payload is checked byte by byte (built in place, untyped).
    in_place: bool,
    /// Unchecksummed, untyped, copied, unconfirmed and not slow: a message needs only its
    /// frame checked, its number followed and its count.
    plain: bool,
    /// Every measured message has times to record (typed: its decoding; slow: its pause).
    times_each: bool,
    /// The decoder's words for the last body that failed ([`Bad::Body`]).
    body_error: String,
}

/// What is wrong with a message the reader took: its frame, or its typed body (whose words
/// wait in [`StreamReader::body_error`]). Small, so the path a message takes carries no text.
#[derive(Clone, Copy)]
enum Bad {
    Frame(Fault),
    Body,
}

impl<'c> StreamReader<'c> {
    fn new(case: &'c CaseConfig, flow: Flow) -> Result<Self, RoleError> {
        let typed = Typed::of(case)?;
        let times_each = typed.is_some() || flow.slow.is_some();
        Ok(StreamReader {
            case,
            flow,
            tracker: SeqTracker::new(),
            measuring: false,
            in_place: case.zero_copy && typed.is_none(),
            plain: !times_each && !case.zero_copy && !case.checksum && !flow.confirm,
            times_each,
            typed,
            timed_reads: EveryNth::new(flow.stamp_every, 0),
            timed_call: false,
            first: false,
            t0: 0,
            last: clock::now(),
            done: None,
            ack_due: None,
            body_error: String::new(),
        })
    }

    /// A read call begins. Every Nth is timed, by the reader's own count: it cannot know
    /// beforehand whether the message it waits for is stamped.
    #[inline(always)]
    fn call(&mut self) {
        self.timed_call = self.timed_reads.next();
        self.first = true;
        self.t0 = if self.timed_call { clock::now() } else { 0 };
    }

    /// Checks, counts and times message `msg`; false where the read must stop taking more
    /// (the stream ended, or the message is to be acknowledged first). What few messages
    /// need (END, the first measured, a bad one, a stamped or timed one) is done out of line,
    /// so that the common message runs a short path.
    #[inline(always)]
    fn take(&mut self, msg: &[u8], rec: &mut Recorder) -> bool {
        let (case, flow) = (self.case, self.flow);
        // The common message (measured, whole, next in order, unstamped, in an untimed read
        // of a plain stream) in a few tests: a 64 B message lasts 30 ns.
        if self.plain && self.measuring && !(self.first && self.timed_call) {
            let n = msg.len();
            if n >= message::HEADER
                && message::flags(msg) == MEASURED | UNSTAMPED
                && message::fault(msg, case.size_bytes, false).is_none()
                && self.tracker.next_in_order(message::seq(msg))
            {
                self.first = false;
                rec.counters.messages_received += 1;
                rec.counters.bytes_received += n as u64;
                return true;
            }
        }
        let mut m = Seen::of(msg, case, self.in_place);
        if self.typed.is_some() && m.flags & END == 0 && m.bad.is_none() {
            self.decode(msg, &mut m);
        }
        // A call's time is until its first message is in hand.
        let timed_read = std::mem::take(&mut self.first) && self.timed_call;
        let stamped = m.flags & UNSTAMPED == 0;
        if timed_read || stamped {
            self.last = clock::now();
        }
        if m.flags & END != 0 {
            return self.end(&m, rec);
        }
        if m.flags & MEASURED != 0 && !self.measuring {
            self.start_measuring(rec);
        }
        if let Some(bad) = m.bad {
            return self.corrupted(bad, msg, rec);
        }
        if flow.confirm {
            self.ack_due = Some(m.seq);
        }
        if self.measuring {
            let arrival = self.tracker.observe(m.seq);
            if case.strict && arrival != Arrival::InOrder {
                return self.out_of_order(m.seq, arrival);
            }
            rec.counters.messages_received += 1;
            rec.counters.bytes_received += msg.len() as u64;
            if timed_read || stamped || self.times_each {
                self.record_times(&m, timed_read, stamped, rec);
            }
        }
        self.ack_due.is_none()
    }

    #[inline(never)]
    fn end(&mut self, m: &Seen, rec: &mut Recorder) -> bool {
        if !self.measuring {
            // Not one measured message came: every one of them is lost.
            rec.reset();
            self.tracker.reset();
        }
        // END's send-time field holds the first measured sequence number.
        self.tracker.end(m.seq, m.send_ns);
        self.done = Some(Ok(()));
        false
    }

    #[inline(never)]
    fn start_measuring(&mut self, rec: &mut Recorder) {
        self.measuring = true;
        rec.reset();
        self.tracker.reset();
    }

    /// A typed body decoded (timed): a failure's words kept for [`Self::corrupted`].
    #[inline(never)]
    fn decode(&mut self, msg: &[u8], m: &mut Seen) {
        let Some(t) = self.typed.as_mut() else {
            return;
        };
        let t0 = clock::now();
        let decoded = t.decode(msg);
        m.decode_ns = clock::now() - t0;
        if let Err(e) = decoded {
            self.body_error = e;
            m.bad = Some(Bad::Body);
        }
    }

    #[inline(never)]
    fn corrupted(&mut self, bad: Bad, msg: &[u8], rec: &mut Recorder) -> bool {
        let e = match bad {
            Bad::Frame(f) => f.describe(msg, self.case.size_bytes),
            Bad::Body => std::mem::take(&mut self.body_error),
        };
        if self.case.strict {
            self.done = Some(Err(RoleError::Integrity(e)));
            return false;
        }
        rec.counters.corrupted += 1;
        true
    }

    #[cold]
    fn out_of_order(&mut self, seq: u64, arrival: Arrival) -> bool {
        self.done = Some(Err(RoleError::Integrity(format!(
            "message {seq} arrived {arrival:?} on a reliable transport"
        ))));
        false
    }

    /// The times a measured message gives: its read call's, its decoding's, its one-way
    /// latency (stamped); and a slow reader's pause.
    #[inline(never)]
    fn record_times(&mut self, m: &Seen, timed_read: bool, stamped: bool, rec: &mut Recorder) {
        let (case, flow) = (self.case, self.flow);
        let (t0, t1) = (self.t0, self.last);
        // A typed body was decoded before t1: one-way latency includes it, the read call
        // does not.
        if timed_read {
            rec.record(Metric::RECV_CALL, t1 - t0 - m.decode_ns);
        }
        if self.typed.is_some() {
            rec.record(Metric::DECODE, m.decode_ns);
        }
        if stamped {
            let one_way = one_way(rec, t1, m.send_ns.wrapping_add_signed(flow.clock_shift_ns));
            rec.record_primary(Metric::ONE_WAY, one_way, t1);
            if case.rate_hz.is_some() {
                rec.record(Metric::ONE_WAY_INTENDED, one_way + m.lag_ns);
                // Sent while this reader already was in its read (waiting, or taking the
                // messages before it): known where the read was timed.
                if self.timed_call {
                    rec.record(
                        if t0 < m.send_ns {
                            Metric::ONE_WAY_READER_IDLE
                        } else {
                            Metric::ONE_WAY_READER_BUSY
                        },
                        one_way,
                    );
                }
            }
            // The window ends at the last message timed: the rate counts the messages
            // received up to it.
            rec.mark_end_received(t1);
        }
        // Slow only inside the measured window, so the backlog drains before END rather
        // than for minutes after it.
        if let Some(d) = flow.slow {
            let window = case.duration.map_or(u64::MAX, |w| w.as_nanos() as u64);
            if t1.saturating_sub(rec.start_ns()) < window {
                std::thread::sleep(d);
            }
        }
    }
}

/// A one-way sample: `arrival` less `sent`, both on the reader's clock. Across hosts one may
/// come out below zero (a skew symptom): it is counted, kept by how far below, and ranks at 0
/// in the one-way histogram, so that every sample keeps its rank.
pub(crate) fn one_way(rec: &mut Recorder, arrival: u64, sent: u64) -> u64 {
    if arrival < sent {
        rec.counters.negative += 1;
        rec.counters.most_negative_ns = rec.counters.most_negative_ns.max(sent - arrival);
        rec.record(Metric::ONE_WAY_BELOW_ZERO, sent - arrival);
    }
    arrival.saturating_sub(sent)
}

/// What the reader needs of a message, taken while it is in hand (in place or copied).
#[derive(Default)]
struct Seen {
    flags: u32,
    seq: u64,
    send_ns: u64,
    lag_ns: u64,
    bad: Option<Bad>,
    /// How long decoding its typed body took.
    decode_ns: u64,
}

impl Seen {
    /// Takes what the reader needs and checks the message's frame (and every payload byte of
    /// one built `in_place`); a typed body is checked by decoding it, apart.
    #[inline(always)]
    fn of(m: &[u8], case: &CaseConfig, in_place: bool) -> Self {
        if m.len() < message::HEADER {
            // Read in place, it has no header to read (a copy would sit in a buffer that has).
            return Seen {
                bad: message::fault(m, case.size_bytes, false).map(Bad::Frame),
                ..Seen::default()
            };
        }
        let flags = message::flags(m);
        let fault = match (flags & END == 0, in_place) {
            (false, _) => None,
            (true, true) => message::fault_in_place(m, case.size_bytes, case.checksum),
            (true, false) => message::fault(m, case.size_bytes, case.checksum),
        };
        Seen {
            flags,
            seq: message::seq(m),
            send_ns: message::send_ns(m),
            lag_ns: message::lag_ns(m),
            bad: fault.map(Bad::Frame),
            decode_ns: 0,
        }
    }
}

/// Writes until `rule` says done. `PLAIN`: the case is unpaced, untyped, copied and
/// unconfirmed, and its loop has no branch for the others.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn write<const PLAIN: bool>(
    ep: &mut dyn Endpoint,
    case: &CaseConfig,
    flow: Flow,
    rec: &mut Recorder,
    out: &mut Outgoing,
    buf: &mut [u8],
    mut typed: Option<&mut Typed>,
    seq: &mut u64,
    rule: StopRule,
    record: bool,
    stop: &AtomicBool,
) -> Result<(), RoleError> {
    let flags = if record { MEASURED } else { 0 };
    // Each pass of the loop below sends (or drops as full) message `seq`, then counts it.
    let mut stamps = EveryNth::new(flow.stamp_every, *seq);
    let mut done = 0u64;
    // Each phase keeps its own open-loop schedule from its start (see measure::pacing).
    let schedule = Schedule::new(clock::now(), case.rate_hz);
    let mut pacer = RealClock { stop };
    // The clock as last read: an unstamped message reads none, and the stop rule's --duration
    // is checked against the last stamped one.
    let mut now = clock::now();
    let paced = !PLAIN && schedule.paced();
    let (zero_copy, confirm) = (!PLAIN && case.zero_copy, !PLAIN && flow.confirm);
    if PLAIN {
        // It is None already: said so, the compiler drops the typed branches.
        typed = None;
    }
    loop {
        let intended = if paced {
            schedule.wait_for(done, &mut pacer)
        } else {
            0
        };
        let this = *seq;
        let stamped = stamps.next();
        let (t0, flags) = if stamped {
            (clock::now(), flags)
        } else {
            (0, flags | UNSTAMPED)
        };
        let lag = if paced && stamped {
            t0.saturating_sub(intended)
        } else {
            0
        };
        // A typed body is encoded before the send call is timed; one-way latency includes it.
        let mut t_send = t0;
        let sent = if zero_copy {
            let mut encoded = Ok(());
            let sent = ep.send_with(case.size_bytes, &mut |slot| match typed.as_mut() {
                Some(t) => {
                    message::build_header(slot, this, t0, flags, lag);
                    encoded = t.encode(this, slot);
                    if stamped {
                        t_send = clock::now();
                    }
                    if case.checksum {
                        message::reseal(slot);
                    }
                }
                None => message::build_in_place(slot, this, t0, flags, lag, case.checksum),
            });
            encoded?;
            sent
        } else {
            if let Some(t) = typed.as_mut() {
                t.encode(this, out.buf_mut())?;
                if stamped {
                    t_send = clock::now();
                }
            }
            ep.send(out.stamp(this, t0, flags, lag))
        };
        let t1 = if stamped { clock::now() } else { 0 };
        if record && stamped && typed.is_some() {
            rec.record(Metric::ENCODE, t_send - t0);
        }
        if record && stamped && paced {
            rec.record(Metric::SEND_LAG, lag);
        }
        if stamped {
            now = t1;
        }
        match sent {
            Ok(()) => {
                // It went out: END counts it, whatever its acknowledgement does.
                *seq += 1;
                if confirm {
                    let n = receive(ep, buf, case, &mut rec.counters)?;
                    let m = &buf[..n];
                    if message::flags(m) & ACK == 0 || message::seq(m) != this {
                        return Err(RoleError::Integrity(format!(
                            "message {this} was acknowledged as {}",
                            message::seq(m)
                        )));
                    }
                    if record {
                        rec.counters.messages_received += 1;
                        rec.counters.bytes_received += n as u64;
                    }
                    if stamped {
                        now = clock::now();
                        if record {
                            rec.record(Metric::RTT, now - t0);
                            rec.record(Metric::RECV_CALL, now - t1);
                        }
                    }
                }
                if record {
                    rec.counters.messages_sent += 1;
                    rec.counters.bytes_sent += case.size_bytes as u64;
                    if stamped {
                        rec.record_primary(Metric::SEND_CALL, t1 - t_send, t1);
                        rec.mark_end(now);
                    }
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

#[cfg(test)]
mod tests {
    use super::{EveryNth, Flow, StreamReader};
    use crate::measure::{Metric, Recorder};
    use crate::result::CaseConfig;
    use crate::workload::message::{Outgoing, END, MEASURED, UNSTAMPED};

    /// A reliable 64 B stream's case, as a run's JSON gives it.
    fn stream_case(strict: bool) -> CaseConfig {
        let mut case: CaseConfig = serde_json::from_value(serde_json::json!({
            "workload": "stream", "transport": "inproc", "options": {}, "effective_options": {},
            "delivery": {"durability": "volatile", "history": "keep-all", "reliability": null},
            "delivery_mapping": [], "size_bytes": 64, "count": 100, "duration_ns": null,
            "warmup_ns": 0, "wait": "block", "checksum": false, "timeout_ns": 10_000_000_000u64,
            "placement": "cross-cpu", "cpus": [0, 1], "threads": true, "strict": true,
            "zero_copy": false, "latest": false, "rate_hz": null, "pubs": 1, "subs": 1
        }))
        .expect("a stream case");
        case.strict = strict;
        case
    }

    /// What a reader made of `messages`: its counts, and how it ended (if it did).
    fn read_all(
        case: &CaseConfig,
        plain: bool,
        messages: &[Vec<u8>],
    ) -> ((u64, u64, u64, u64, u64), Option<bool>) {
        let flow = Flow {
            stamp_every: 4,
            ..Flow::default()
        };
        let mut rec = Recorder::new(&Metric::MESSAGES, case.interval);
        let mut reader = StreamReader::new(case, flow).expect("a reader");
        reader.plain = plain;
        for (i, m) in messages.iter().enumerate() {
            // Two messages a read call, as a transport that has several at once hands them.
            if i % 2 == 0 {
                reader.call();
            }
            if !reader.take(m, &mut rec) {
                break;
            }
        }
        let c = &rec.counters;
        let t = &reader.tracker.counts;
        (
            (
                c.messages_received,
                c.bytes_received,
                c.corrupted,
                t.duplicated,
                t.lost,
            ),
            reader.done.map(|d| d.is_ok()),
        )
    }

    /// Messages 0..40 of a stream, every 4th stamped, all measured.
    fn messages() -> Vec<Vec<u8>> {
        let mut out = Outgoing::new(64, false);
        (0..40)
            .map(|seq| {
                let flags = MEASURED | if seq % 4 == 0 { 0 } else { UNSTAMPED };
                out.stamp(seq, 1000 + seq, flags, 0).to_vec()
            })
            .collect()
    }

    #[test]
    fn the_common_messages_short_path_finds_what_the_full_one_finds() {
        let mut bad_tail = messages();
        bad_tail[10][63] ^= 1;
        let mut bad_length = messages();
        bad_length[13].pop();
        let mut bad_declared = messages();
        bad_declared[14][0] = 65;
        let mut gap = messages();
        gap.remove(17);
        let mut twice = messages();
        twice.insert(21, twice[20].clone());
        let mut ended = messages();
        ended[30] = Outgoing::new(64, false).stamp(30, 0, END, 0).to_vec();
        let inputs = [
            ("whole", messages()),
            ("a mixed tail", bad_tail),
            ("a short message", bad_length),
            ("a wrong declared length", bad_declared),
            ("a gap", gap),
            ("a duplicate", twice),
            ("an END", ended),
        ];
        for strict in [true, false] {
            let case = stream_case(strict);
            for (what, input) in &inputs {
                let short = read_all(&case, true, input);
                assert_eq!(
                    short,
                    read_all(&case, false, input),
                    "{what}, strict {strict}"
                );
                let ((received, bytes, corrupted, duplicated, lost), done) = short;
                match *what {
                    "whole" => assert_eq!((received, bytes, done), (40, 40 * 64, None)),
                    "an END" => assert_eq!((received, done), (30, Some(true))),
                    _ if strict => assert_eq!(done, Some(false), "{what}"),
                    "a gap" => assert_eq!((received, lost), (39, 1)),
                    "a duplicate" => assert_eq!((received, duplicated), (41, 1)),
                    _ => assert_eq!((received, corrupted), (39, 1), "{what}"),
                }
            }
        }
    }

    #[test]
    fn every_nth_picks_the_multiples_of_n_from_any_start() {
        for every in [0, 1, 2, 3, 7, 64] {
            for from in [0, 1, 5, 63, 64, 1000] {
                let mut nth = EveryNth::new(every, from);
                for i in from..from + 300 {
                    assert_eq!(
                        nth.next(),
                        i % every.max(1) == 0,
                        "every {every} from {from} at {i}"
                    );
                }
            }
        }
    }
}
