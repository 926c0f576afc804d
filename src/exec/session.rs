//! The session: what the two roles say to each other around a case, in-band on the channel
//! itself, so that a peer started by msgperf, by hand (`msgperf serve`) or on another host all
//! work the same way.
//!
//! ```text
//! active                           passive
//!   Hello {version, case}   ──►
//!                           ◄──    Ready (or Refused: why)
//!   ...the workload's messages...
//!   END {messages sent}     ──►
//!                           ◄──    Result {the passive role's RoleResult}
//! ```
//! The Ready answer is the start barrier: the passive role has allocated and pinned everything
//! before it answers.

use crate::deadline::Deadline;
use crate::measure::Recorder;
use crate::result::{CaseConfig, RoleResult, SCHEMA_VERSION};
use crate::transport::{CopyFanOut, Endpoint, Multicast, OneReader, TransportError};
use crate::workload::message::{self, CONTROL, HEADER};
use crate::workload::{self, RoleError};
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Serialize, Deserialize)]
enum Control {
    Hello { version: u32, case: Box<CaseConfig> },
    Ready,
    Refused(String),
    Result(Box<RoleResult>),
}

fn send_control(ep: &mut dyn Endpoint, c: &Control) -> Result<(), TransportError> {
    let json = serde_json::to_vec(c).expect("control messages serialize");
    send_surely(ep, &message::control(&json), Duration::from_secs(10))
}

/// Sends a session message even where data may be refused when the queue is full
/// (`--opt full=fail`): it waits for room, within `timeout`.
fn send_surely(ep: &mut dyn Endpoint, msg: &[u8], timeout: Duration) -> Result<(), TransportError> {
    let deadline = Deadline::after(timeout);
    loop {
        match ep.send(msg) {
            Err(TransportError::Full) if !deadline.expired() => {
                std::thread::sleep(Duration::from_micros(50))
            }
            Err(TransportError::Full) => return Err(TransportError::Timeout(timeout)),
            r => return r,
        }
    }
}

/// Waits for a control message, skipping late data, within `timeout`.
fn recv_control(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    timeout: Duration,
) -> Result<Control, TransportError> {
    let deadline = Deadline::after(timeout);
    loop {
        let n = ep.recv(buf)?;
        if n >= HEADER && message::flags(&buf[..n]) & CONTROL != 0 {
            return serde_json::from_slice(&buf[HEADER..n]).map_err(|e| {
                TransportError::Corrupt(format!(
                    "a control message does not parse ({e}): is the peer the same msgperf version?"
                ))
            });
        }
        if deadline.expired() {
            return Err(TransportError::Timeout(timeout));
        }
    }
}

/// What the active side of a case ends with.
#[derive(Default, Serialize, Deserialize)]
pub struct ActiveOutcome {
    pub mine: Option<RoleResult>,
    /// Each peer's result, in the order of the endpoints (None: it never came).
    pub peers: Vec<Option<RoleResult>>,
    pub error: Option<String>,
}

/// Runs the active role of `case` over `ep`: hello, the workload, END, the peer's result.
pub fn active(ep: &mut dyn Endpoint, case: &CaseConfig, stop: &AtomicBool) -> ActiveOutcome {
    active_to_many(&mut CopyFanOut::new(vec![ep]), case, stop, &mut || Ok(()))
}

/// Runs the active role to several peers at once (a publisher and its subscribers): hello
/// to each, then `start` (the barrier of all publishers), the workload writing every message
/// to all of them, then END to each and each peer's result.
pub fn active_to_many(
    fan: &mut dyn Multicast,
    case: &CaseConfig,
    stop: &AtomicBool,
    start: &mut dyn FnMut() -> Result<(), String>,
) -> ActiveOutcome {
    let w = workload::find(&case.workload).expect("cases are validated");
    let mut buf = vec![0u8; message::CONTROL_MAX];
    let readers = fan.readers();
    let many = readers > 1;
    let name = |i: usize| name_of(w, many, i);
    for i in 0..readers {
        // Only the first reader is the slow one.
        let mut hello_case = case.clone();
        if i > 0 {
            hello_case.slow_subscriber = None;
        }
        let hello = Control::Hello {
            version: SCHEMA_VERSION,
            case: Box::new(hello_case),
        };
        let ep = &mut OneReader {
            fan: &mut *fan,
            reader: i,
        };
        let ready = send_control(ep, &hello).and_then(|_| recv_control(ep, &mut buf, case.timeout));
        match ready {
            Ok(Control::Ready) => {}
            Ok(Control::Refused(why)) => {
                return failed(format!("the {} refused the case: {why}", name(i)))
            }
            Ok(_) => return failed(format!("the {} answered the hello out of turn", name(i))),
            Err(e) => return failed(format!("the {} did not answer the hello: {e}", name(i))),
        }
    }
    if let Err(e) = start() {
        return failed(e);
    }
    let mut rec = Recorder::new();
    let run = w.active(fan.to_all(), case, &mut rec, stop);
    let failed_at = fan.failed_reader().filter(|_| many);
    rec.counters.send_full += fan.refused();
    let peer_gone = matches!(run, Err(RoleError::Transport(TransportError::PeerClosed)));
    let (sent, mut error) = match run {
        Ok(sent) => (sent, None),
        Err(e) => (
            workload::Sent::default(),
            Some(match failed_at {
                Some(i) => format!("{}: sending to {}: {e}", w.roles()[0], name(i)),
                None => format!("{}: {e}", w.roles()[0]),
            }),
        ),
    };
    let mut mine = rec.finish(w.roles()[0], error.clone());
    mine.sent_total = sent.next;
    let mut peers = Vec::with_capacity(readers);
    for i in 0..readers {
        // After a dead peer the others still get END, so they end within their timeout.
        let ep = &mut OneReader {
            fan: &mut *fan,
            reader: i,
        };
        let peer = end(ep, sent, case, &mut buf);
        match &peer {
            Some(p) if error.is_none() => {
                error = p.error.as_ref().map(|e| format!("{}: {e}", name(i)))
            }
            None if error.is_none() && !peer_gone => {
                error = Some(format!(
                    "the {} never sent its result (it died or the END message was lost)",
                    name(i)
                ))
            }
            _ => {}
        }
        peers.push(peer);
    }
    ActiveOutcome {
        mine: Some(mine),
        peers,
        error,
    }
}

fn name_of(w: &dyn workload::Workload, many: bool, i: usize) -> String {
    if many {
        format!("{} {}", w.roles()[1], i + 1)
    } else {
        w.roles()[1].to_string()
    }
}

fn failed(why: String) -> ActiveOutcome {
    ActiveOutcome {
        error: Some(why),
        ..ActiveOutcome::default()
    }
}

/// Sends END and collects the peer's result. END may be lost on an unreliable transport, so it
/// is sent again every 200 ms until the result comes or the timeout passes.
fn end(
    ep: &mut dyn Endpoint,
    sent: workload::Sent,
    case: &CaseConfig,
    buf: &mut [u8],
) -> Option<RoleResult> {
    let mut signal = [0u8; HEADER];
    let deadline = Deadline::after(case.timeout);
    let retry = Duration::from_millis(200);
    if !case.strict {
        ep.set_recv_timeout(retry).ok()?;
    }
    let result = loop {
        if send_surely(
            ep,
            message::end(&mut signal, sent.next, sent.first_measured),
            case.timeout,
        )
        .is_err()
        {
            break None;
        }
        match recv_control(ep, buf, if case.strict { case.timeout } else { retry }) {
            Ok(Control::Result(r)) => break Some(*r),
            Ok(_) => break None,
            Err(TransportError::Timeout(_)) if !case.strict && !deadline.expired() => continue,
            Err(_) => break None,
        }
    };
    let _ = ep.set_recv_timeout(case.timeout);
    result
}

/// Serves one case on an accepted endpoint: reads the hello, runs the passive role, returns its
/// result to the peer. `poll` says how the endpoint was opened.
pub fn passive(
    ep: &mut dyn Endpoint,
    poll: bool,
    timeout: Duration,
) -> Result<(CaseConfig, RoleResult), String> {
    let mut buf = vec![0u8; message::CONTROL_MAX];
    let case = match recv_control(ep, &mut buf, timeout) {
        Ok(Control::Hello { version, case }) if version == SCHEMA_VERSION => *case,
        Ok(Control::Hello { version, .. }) => {
            let why = format!("the peer speaks schema {version}, this msgperf {SCHEMA_VERSION}: run the same msgperf version on both sides");
            let _ = send_control(ep, &Control::Refused(why.clone()));
            return Err(why);
        }
        Ok(_) => return Err("the first message was not a hello".into()),
        Err(e) => return Err(format!("no hello from the peer: {e}")),
    };
    let refuse = |ep: &mut dyn Endpoint, why: String| {
        let _ = send_control(ep, &Control::Refused(why.clone()));
        Err(why)
    };
    let w = match workload::find(&case.workload) {
        Ok(w) => w,
        Err(e) => return refuse(ep, e),
    };
    if poll != (case.wait == crate::result::Wait::Poll) {
        return refuse(ep, format!(
            "the case {} --poll but this server was started {} it: restart `msgperf serve` {} --poll",
            if poll { "lacks" } else { "asks for" },
            if poll { "with" } else { "without" },
            if poll { "without" } else { "with" }
        ));
    }
    let mut rec = Recorder::new();
    send_control(ep, &Control::Ready).map_err(|e| format!("could not answer the hello: {e}"))?;
    let run = w.passive(ep, &case, &mut rec);
    let error = run.as_ref().err().map(RoleError::to_string);
    let result = rec.finish(w.roles()[1], error.clone());
    if !matches!(run, Err(RoleError::Transport(TransportError::PeerClosed))) {
        let _ = send_control(ep, &Control::Result(Box::new(result.clone())));
    }
    match error {
        Some(e) => Err(format!("{}: {e}", w.roles()[1])),
        None => Ok((case, result)),
    }
}
