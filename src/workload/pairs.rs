//! `pairs`: N sender/receiver pairs, each on a channel of its own, every sender released at
//! one instant (CML's channel test: the senders wait on one time-out event). Each sender then
//! sends `--count` messages (10 by default); each receiver records every message's delay. The
//! senders are one role and the receivers another, each pair's ends on a thread of its own.

use super::message::{self, Outgoing, END, MEASURED};
use super::runtime::{check_fixed, Gate, STACK};
use super::{
    check_common, check_exchange, receive, RoleControl, RoleError, RoleSpec, Sent, Subject,
    Topology, Workload,
};
use crate::measure::{clock, Metric, Recorder};
use crate::result::{CaseConfig, Counters, FloorKind, LatencyKind, RoleId, RoleKind};
use crate::transport::{Capabilities, Endpoint, Exchange, SetupPlan, Side, TransportError};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Pairs;

/// Messages per pair when --count is not given.
const DEFAULT_COUNT: u64 = 10;

impl Workload for Pairs {
    fn name(&self) -> &'static str {
        "pairs"
    }
    fn about(&self) -> &'static str {
        "N sender/receiver pairs on threads, released at one instant (--n): delay per message, spread of first deliveries"
    }
    fn latency(&self, _: &CaseConfig) -> (LatencyKind, Metric) {
        (LatencyKind::OneWay, Metric::OneWay)
    }
    fn floor_kind(&self, _: &CaseConfig) -> Option<FloorKind> {
        None
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        check_fixed(case, "sends --count messages per pair")?;
        check_exchange(
            case,
            caps,
            &[Exchange::Both, Exchange::OneWay],
            "sends one way",
        )?;
        check_common(case, caps)?;
        if case.transport == crate::transport::NO_CHANNEL.name() {
            return Err(
                "pairs sends messages: give it a channel, e.g. -t inproc,mpsc,flume".into(),
            );
        }
        Ok(())
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        let n = case.n.unwrap_or(1) as u32;
        let role = |kind, drives, ends: Vec<Side>, cpu| super::RoleSpec {
            id: RoleId::one(kind),
            ends,
            cpu,
            drives,
        };
        Topology {
            roles: vec![
                role(
                    RoleKind::Senders,
                    true,
                    (0..n).map(Side::Connect).collect(),
                    case.cpus.0,
                ),
                role(
                    RoleKind::Receivers,
                    false,
                    (0..n).map(Side::Accept).collect(),
                    case.cpus.1,
                ),
            ],
            setup: SetupPlan {
                channels: n,
                ..SetupPlan::default()
            },
            fan_out: None,
        }
    }
    fn exchange(&self, _: &CaseConfig) -> Exchange {
        Exchange::OneWay
    }
    fn subject(&self) -> Subject {
        Subject::Channels
    }
    fn run(
        &self,
        role: &RoleSpec,
        ends: &mut [Box<dyn Endpoint>],
        case: &CaseConfig,
        rec: &mut Recorder,
        ctl: &RoleControl,
    ) -> Result<Option<Sent>, RoleError> {
        thread_budget(ends.len(), case)?;
        // A socket per pair: as many descriptors as pairs, and some to spare.
        let _limit = crate::sys::FdLimit::raise_to(ends.len() as u64 * 2 + 256);
        rec.reset();
        if role.drives {
            send_all(ends, case, rec, ctl.stop).map(Some)
        } else {
            receive_all(ends, case, rec).map(|_| None)
        }
    }
}

/// Memory maps one thread costs: its stack and guard page, and its signal stack and guard.
const MAPS_PER_THREAD: u64 = 4;

/// Refuses, naming the limit, a count of threads this process cannot map (a thread that fails
/// to map its signal stack aborts rather than failing its spawn).
fn thread_budget(n: usize, case: &CaseConfig) -> Result<(), RoleError> {
    let in_process = if case.threads { 2 * n as u64 } else { n as u64 };
    let (Some(max), Some(used)) = (crate::sys::max_map_count(), crate::sys::map_count()) else {
        return Ok(());
    };
    let need = in_process * MAPS_PER_THREAD;
    if used + need + 1000 > max {
        return Err(RoleError::Transport(TransportError::Unsupported(format!(
            "{n} pairs start {in_process} threads in this process, about {need} memory maps, over vm.max_map_count {max}: run the roles as processes (e.g. -t uds) or raise it (sysctl -w vm.max_map_count={})",
            (used + need) * 2
        ))));
    }
    Ok(())
}

/// What one sender did: its first send, each send call's time, how many it sent.
struct Sender {
    first_ns: u64,
    calls: Vec<u64>,
    sent: u64,
    error: Option<TransportError>,
}

fn send_all(
    ends: &mut [Box<dyn Endpoint>],
    case: &CaseConfig,
    rec: &mut Recorder,
    stop: &AtomicBool,
) -> Result<Sent, RoleError> {
    let count = case.count.unwrap_or(DEFAULT_COUNT);
    let gate = Gate::default();
    let n = ends.len();
    let (released, senders) = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        for ep in ends.iter_mut() {
            let gate = &gate;
            let h = std::thread::Builder::new()
                .stack_size(STACK)
                .spawn_scoped(s, move || {
                    let mut out = Outgoing::new(case.size_bytes, case.checksum);
                    let mut me = Sender {
                        first_ns: 0,
                        calls: Vec::with_capacity(count as usize),
                        sent: 0,
                        error: None,
                    };
                    if !gate.pass(case.timeout) {
                        return me;
                    }
                    for seq in 0..count {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let t0 = clock::now();
                        if let Err(e) = ep.send(out.stamp(seq, t0, MEASURED, 0)) {
                            me.error = Some(e);
                            break;
                        }
                        let t1 = clock::now();
                        if seq == 0 {
                            me.first_ns = t0;
                        }
                        me.calls.push(t1 - t0);
                        me.sent += 1;
                    }
                    me
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    gate.open();
                    return Err(format!(
                        "sender thread {} of {n} could not start: {e}",
                        handles.len() + 1
                    ));
                }
            }
        }
        let all = gate.all_waiting(n, case.timeout);
        let released = clock::now();
        gate.open();
        let senders: Vec<Sender> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
        if !all {
            return Err(format!(
                "the {n} sender threads did not all start within {:?}",
                case.timeout
            ));
        }
        Ok((released, senders))
    })
    .map_err(|e| RoleError::Transport(TransportError::Unsupported(e)))?;
    let mut last_first = released;
    for s in &senders {
        for &c in &s.calls {
            rec.record(Metric::SendCall, c);
        }
        rec.counters.messages_sent += s.sent;
        rec.counters.bytes_sent += s.sent * case.size_bytes as u64;
        last_first = last_first.max(s.first_ns);
    }
    rec.mark_end(clock::now());
    rec.figure(
        "senders all sending within",
        "us",
        (last_first - released) as f64 / 1e3,
    );
    if let Some(e) = senders.into_iter().find_map(|s| s.error) {
        return Err(e.into());
    }
    Ok(Sent {
        first_measured: 0,
        next: count,
    })
}

/// What one receiver saw: when its first message came, each message's delay, its counters.
struct Receiver {
    first_ns: u64,
    last_ns: u64,
    delays: Vec<u64>,
    counters: Counters,
    error: Option<RoleError>,
}

fn receive_all(
    ends: &mut [Box<dyn Endpoint>],
    case: &CaseConfig,
    rec: &mut Recorder,
) -> Result<(), RoleError> {
    let count = case.count.unwrap_or(DEFAULT_COUNT) as usize;
    let n = ends.len();
    let receivers = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        for ep in ends.iter_mut() {
            let h = std::thread::Builder::new()
                .stack_size(STACK)
                .spawn_scoped(s, move || receive_one(&mut **ep, case, count));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    return Err(format!(
                        "receiver thread {} of {n} could not start: {e}",
                        handles.len() + 1
                    ))
                }
            }
        }
        Ok(handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect::<Vec<Receiver>>())
    })
    .map_err(|e| RoleError::Transport(TransportError::Unsupported(e)))?;
    let (mut first, mut last_first, mut end) = (u64::MAX, 0, 0);
    let mut error = None;
    for r in receivers {
        for &d in &r.delays {
            rec.record(Metric::OneWay, d);
        }
        rec.counters.add(&r.counters);
        if r.first_ns > 0 {
            first = first.min(r.first_ns);
            last_first = last_first.max(r.first_ns);
        }
        end = end.max(r.last_ns);
        error = error.or(r.error);
    }
    if first != u64::MAX {
        rec.figure(
            "first deliveries spread over",
            "us",
            (last_first - first) as f64 / 1e3,
        );
    }
    rec.mark_end(end);
    match error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn receive_one(ep: &mut dyn Endpoint, case: &CaseConfig, count: usize) -> Receiver {
    let mut me = Receiver {
        first_ns: 0,
        last_ns: 0,
        delays: Vec::with_capacity(count),
        counters: Counters::default(),
        error: None,
    };
    let mut buf = super::receive_buffer(case);
    let mut expected = 0u64;
    let mut calls = Counters::default();
    loop {
        let n = match receive(ep, &mut buf, case, &mut calls) {
            Ok(n) => n,
            Err(e) => {
                me.error = Some(e.into());
                break;
            }
        };
        let now = clock::now();
        let m = &buf[..n];
        if message::flags(m) & END != 0 {
            me.counters.lost += message::seq(m).saturating_sub(expected);
            break;
        }
        if let Err(e) = message::verify(m, case.size_bytes, case.checksum) {
            if case.strict {
                me.error = Some(RoleError::Integrity(e));
                break;
            }
            me.counters.corrupted += 1;
            continue;
        }
        let seq = message::seq(m);
        if seq < expected {
            me.counters.reordered += 1;
        } else {
            expected = seq + 1;
        }
        if me.first_ns == 0 {
            me.first_ns = now;
        }
        me.last_ns = now;
        me.delays.push(now.saturating_sub(message::send_ns(m)));
        me.counters.messages_received += 1;
        me.counters.bytes_received += n as u64;
    }
    me.counters.read_calls = calls.read_calls;
    me
}
