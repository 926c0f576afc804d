//! `connect`: connections set up and torn down (the Tcl report's connection rate): connect,
//! accept, one small exchange, close, each step timed, over every transport that has
//! connections ([`Transport::listen`](crate::transport::Transport::listen)). With `--hold`,
//! connections are opened and kept until the first failure (or `--n`, or `--duration`): how
//! many one process held, and what stopped it; with `--no-accept` the listener never accepts,
//! so connections queue in its backlog (`--backlog`) until one times out. The accepting side is
//! a thread of the role, on the other CPU of the placement.

use super::runtime::check_fixed;
use super::{
    check_common, message, param, Param, ParamKind, RoleError, RoleRun, RoleSpec, Sent, StopRule,
    Topology, Workload, N,
};
use crate::measure::{clock, Metric, Recorder};
use crate::result::{CaseConfig, LatencyKind, RoleId, RoleKind};
use crate::sys;
use crate::transport::{
    self, Capabilities, ChannelSpec, Endpoint, Exchange, Listener, SetupPlan, TransportError,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub struct Connect;

/// Opens and closes connections (and accepts them, on a thread of its own).
const CONNECTOR: RoleKind = RoleKind::new("connector");

/// One connection's life, connect to close.
const CONNECTION: Metric = Metric::new("connection_ns", 4);
/// Time inside one connect call, to an established connection.
const CONNECT_CALL: Metric = Metric::new("connect_call_ns", 1);
/// Time inside one accept call, its wait included.
const ACCEPT_CALL: Metric = Metric::new("accept_call_ns", 2);
/// Time inside one close (shutdown and drop) of a connection.
const CLOSE_CALL: Metric = Metric::new("close_call_ns", 3);
// The one small exchange on each connection is timed as a round trip (Metric::RTT, slot 0).

const CONNECT_TO_CLOSE: LatencyKind = LatencyKind::new(
    "connect to close",
    "one connection's connect, exchange and close",
    true,
);
const CONNECT_CALL_KIND: LatencyKind = LatencyKind::new(
    "connect call",
    "one connect call, the connection kept",
    false,
);

/// `--n`: at most this many connections (no default: until --duration).
const UP_TO_N: Param = Param {
    default: None,
    always_shown: false,
    ..N
};

/// `--hold`: connections held open until the first failure.
const HOLD: Param = Param {
    key: "hold",
    value_name: "",
    default: Some("false"),
    about: "open connections and hold them until the first failure (or --n, or --duration), then report how many were held and what stopped it",
    kind: ParamKind::Flag,
    sweeps: false,
    always_shown: false,
};

/// `--backlog`: the listener's backlog.
const BACKLOG: Param = Param {
    key: "backlog",
    value_name: "N",
    default: None,
    about: "the listener's backlog, the connections the kernel queues for it [default: net.core.somaxconn, the most it allows]",
    kind: ParamKind::Count {
        min: 1,
        max: u64::MAX,
    },
    sweeps: false,
    always_shown: false,
};

/// `--no-accept`: a stalled server.
const NO_ACCEPT: Param = Param {
    key: "no-accept",
    value_name: "",
    default: Some("false"),
    about: "with --hold, the listener never accepts, as a stalled server: connections queue in its backlog until one times out, which is counted",
    kind: ParamKind::Flag,
    sweeps: false,
    always_shown: false,
};

impl Workload for Connect {
    fn name(&self) -> &'static str {
        "connect"
    }
    fn about(&self) -> &'static str {
        "connections set up and torn down (connect, accept, one exchange, close) on every transport that has connections; --hold: how many one process holds"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&UP_TO_N, &HOLD, &BACKLOG, &NO_ACCEPT]
    }
    fn metrics(&self) -> &'static [Metric] {
        &[
            Metric::RTT,
            CONNECT_CALL,
            ACCEPT_CALL,
            CLOSE_CALL,
            CONNECTION,
        ]
    }
    fn latency(&self, case: &CaseConfig) -> (LatencyKind, Metric) {
        if param::flag(case, HOLD.key) {
            (CONNECT_CALL_KIND, CONNECT_CALL)
        } else {
            (CONNECT_TO_CLOSE, CONNECTION)
        }
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        check_fixed(case, "opens connections")?;
        check_common(case, caps)?;
        if !caps.connections {
            let connecting: Vec<&str> = transport::REGISTRY
                .iter()
                .filter(|t| t.capabilities(&Default::default()).connections)
                .map(|t| t.name())
                .collect();
            return Err(format!(
                "connect measures connection set-up, which `{}` does not have: use -t {}",
                case.transport,
                connecting.join(",")
            ));
        }
        if case.count.is_some() {
            return Err("connect stops after --duration, or --n connections: drop --count".into());
        }
        if param::flag(case, NO_ACCEPT.key) && !param::flag(case, HOLD.key) {
            return Err(
                "--no-accept stalls the listener, which only --hold measures: add --hold".into(),
            );
        }
        Ok(())
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        Topology {
            roles: vec![RoleSpec {
                id: RoleId::one(CONNECTOR),
                ends: vec![],
                cpu: case.cpus.0,
                drives: true,
            }],
            setup: SetupPlan::default(),
            fan_out: None,
        }
    }
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (case, rec, ctl) = (r.case, r.rec, r.ctl);
        let backlog = match param::count(case, BACKLOG.key) {
            Some(b) => b.min(u32::MAX as u64) as u32,
            None => sys::somaxconn().unwrap_or(4096),
        };
        let t = transport::find(&case.transport).map_err(|e| RoleError::Work(e.to_string()))?;
        // The connector's and the acceptor's waits are their own: nothing else watches them.
        let spec = ChannelSpec {
            options: case.effective_options.clone(),
            timeout: case.timeout,
            poll: false,
            max_message: case.size_bytes,
            watched: false,
            exchange: Exchange::Both,
        };
        let listener = t.listen(backlog, &spec)?;
        rec.figure("listen backlog", "", backlog as f64);
        let at = Connections {
            listener: &*listener,
            spec: &spec,
            case,
        };
        if param::flag(case, HOLD.key) {
            hold(&at, rec, ctl.stop);
        } else {
            rate(&at, rec, ctl.stop)?;
        }
        Ok(Some(Sent {
            first_measured: 0,
            next: rec.counters.messages_sent,
        }))
    }
}

/// Where a case's connections are made: the listener, their ends' settings, the case.
struct Connections<'a> {
    listener: &'a dyn Listener,
    spec: &'a ChannelSpec,
    case: &'a CaseConfig,
}

/// Connections per second: each one connected, one exchange, closed, every step timed; the
/// acceptor echoes the exchange and closes after its peer.
fn rate(at: &Connections, rec: &mut Recorder, stop: &AtomicBool) -> Result<(), RoleError> {
    let done = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let cap = param::count(at.case, N.key).unwrap_or(u64::MAX);
    std::thread::scope(|s| {
        let acceptor = s.spawn(|| accept_loop(at, &done, Some(&measuring)));
        let r = connect_loop(at, rec, stop, cap, &measuring);
        done.store(true, Ordering::SeqCst);
        let accepted = acceptor.join().unwrap_or_else(|_| Accepted {
            error: Some(RoleError::Work("the acceptor panicked".into())),
            ..Accepted::default()
        });
        for &t in &accepted.times {
            rec.record(ACCEPT_CALL, t);
        }
        match accepted.error {
            Some(e) => Err(RoleError::Work(format!("the accepting side: {e}"))),
            None => r,
        }
    })
}

fn connect_loop(
    at: &Connections,
    rec: &mut Recorder,
    stop: &AtomicBool,
    cap: u64,
    measuring: &AtomicBool,
) -> Result<(), RoleError> {
    // The exchange: one message of --size bytes, echoed and checked.
    let size = at.case.size_bytes;
    let mut out = message::Outgoing::new(size, at.case.checksum);
    let mut back = vec![0u8; size];
    let mut seq = 0;
    let mut one = |rec: &mut Recorder, measured: bool| -> Result<(), RoleError> {
        let t0 = clock::now();
        let mut c = at.listener.connect(at.spec)?;
        let t1 = clock::now();
        c.send(out.stamp(seq, t1, message::MEASURED, 0))?;
        let n = c.recv(&mut back)?;
        message::verify(&back[..n], size, at.case.checksum).map_err(RoleError::Integrity)?;
        let t2 = clock::now();
        drop(c);
        let t3 = clock::now();
        seq += 1;
        if measured {
            rec.record_primary(CONNECTION, t3 - t0, t3);
            rec.record(CONNECT_CALL, t1 - t0);
            rec.record(Metric::RTT, t2 - t1);
            rec.record(CLOSE_CALL, t3 - t2);
            let c = &mut rec.counters;
            c.messages_sent += 1;
            c.messages_received += 1;
            c.bytes_sent += size as u64;
            c.bytes_received += n as u64;
            rec.mark_end(t3);
        }
        Ok(())
    };
    let warm = StopRule::warmup(at.case);
    let mut n = 0;
    while !warm.done(n, clock::now(), stop) {
        one(rec, false)?;
        n += 1;
    }
    rec.reset();
    // Each warm-up connection was accepted before its exchange ended: the acceptor's timings
    // from here on are the measured connections'.
    measuring.store(true, Ordering::SeqCst);
    let rule = StopRule::measured(at.case);
    let mut n = 0;
    while n < cap && !rule.done(n, clock::now(), stop) {
        one(rec, true)?;
        n += 1;
    }
    Ok(())
}

/// Accepts until `done`: with `echo` (the rate), echoes each connection's exchange and waits for
/// its close, timing accepts once `echo` is raised (the warm-up is over); without, keeps every
/// connection open (`--hold`). Returns the accepts' times, the connections kept, and the error
/// that ended it early.
fn accept_loop(at: &Connections, done: &AtomicBool, echo: Option<&AtomicBool>) -> Accepted {
    let mut a = Accepted::default();
    if let Err(e) = accept_into(&mut a, at, done, echo) {
        a.error = Some(e);
    }
    a
}

#[derive(Default)]
struct Accepted {
    times: Vec<u64>,
    kept: Vec<Box<dyn Endpoint>>,
    error: Option<RoleError>,
}

fn accept_into(
    a: &mut Accepted,
    at: &Connections,
    done: &AtomicBool,
    echo: Option<&AtomicBool>,
) -> Result<(), RoleError> {
    if let Some(cpu) = at.case.cpus.1 {
        let _ = sys::pin_current_thread(cpu);
    }
    let mut buf = vec![0u8; at.case.size_bytes];
    while !done.load(Ordering::SeqCst) {
        let t0 = clock::now();
        let Some(mut c) = at.listener.accept(Duration::from_millis(100), at.spec)? else {
            continue;
        };
        let took = clock::now() - t0;
        let Some(measuring) = echo else {
            a.times.push(took);
            a.kept.push(c);
            continue;
        };
        if measuring.load(Ordering::SeqCst) {
            a.times.push(took);
        }
        let n = c.recv(&mut buf)?;
        c.send(&buf[..n])?;
        // The connector closes first; its close ends this read.
        let _ = c.recv(&mut buf);
    }
    Ok(())
}

/// Opens connections and keeps them until one fails (or --n, or --duration), with the
/// descriptor limit raised to its hard limit meanwhile; says what stopped it.
fn hold(at: &Connections, rec: &mut Recorder, stop: &AtomicBool) {
    let case = at.case;
    let limit = sys::FdLimit::raise_to(u64::MAX);
    rec.figure("descriptor limit while holding", "fds", limit.now as f64);
    let done = AtomicBool::new(false);
    let cap = param::count(case, N.key).unwrap_or(u64::MAX);
    let timeout = case.timeout.min(Duration::from_secs(2));
    let spec = ChannelSpec {
        timeout,
        ..at.spec.clone()
    };
    let why = std::thread::scope(|s| {
        // A stalled server's listener: nothing accepts, the backlog fills.
        let acceptor =
            (!param::flag(case, NO_ACCEPT.key)).then(|| s.spawn(|| accept_loop(at, &done, None)));
        let mut held: Vec<Box<dyn Endpoint>> = Vec::new();
        let rule = StopRule::measured(case);
        let why = loop {
            let n = held.len() as u64;
            if n >= cap {
                break format!("--n {cap} reached");
            }
            if rule.done(n, clock::now(), stop) {
                break "--duration ended".into();
            }
            let t0 = clock::now();
            match at.listener.connect(&spec) {
                Ok(c) => {
                    let t1 = clock::now();
                    rec.record_primary(CONNECT_CALL, t1 - t0, t1);
                    rec.mark_end(t1);
                    held.push(c);
                }
                Err(e) => break why_stopped(&e, &limit, case, rec),
            }
        };
        done.store(true, Ordering::SeqCst);
        let accepted = match acceptor {
            Some(a) => a.join().unwrap_or_else(|_| Accepted {
                error: Some(RoleError::Work("the acceptor panicked".into())),
                ..Accepted::default()
            }),
            None => Accepted::default(),
        };
        rec.counters.messages_sent = held.len() as u64;
        rec.counters.messages_received = accepted.kept.len() as u64;
        rec.figure("connections made", "", held.len() as f64);
        rec.figure("connections accepted", "", accepted.kept.len() as f64);
        for &t in &accepted.times {
            rec.record(ACCEPT_CALL, t);
        }
        match &accepted.error {
            // The accepting side met a limit first: that is what stopped it.
            Some(RoleError::Transport(e)) => {
                format!("{}, met by accept", why_stopped(e, &limit, case, rec))
            }
            Some(e) => format!("the accepting side: {e}"),
            None => why,
        }
    });
    rec.stopped_by(why);
}

fn why_stopped(
    e: &TransportError,
    limit: &sys::FdLimit,
    case: &CaseConfig,
    rec: &mut Recorder,
) -> String {
    let os = match e {
        TransportError::Io(io) => io.raw_os_error(),
        _ => None,
    };
    match (os, e) {
        (Some(libc::EMFILE), _) => format!(
            "the descriptor limit (RLIMIT_NOFILE {}, raised from {}; both ends are in this process)",
            limit.now, limit.before
        ),
        (Some(libc::ENFILE), _) => "the system's descriptor limit (fs.file-max)".into(),
        (Some(libc::EADDRNOTAVAIL), _) => format!(
            "no ephemeral port left (net.ipv4.ip_local_port_range {})",
            sys::ephemeral_ports().unwrap_or_default()
        ),
        (Some(libc::ENOMEM) | Some(libc::ENOBUFS), _) => format!("memory: {e}"),
        (_, TransportError::Timeout(timeout)) => {
            rec.figure("connects timed out", "", 1.0);
            format!(
                "a connect timed out after {timeout:?}: the listener's backlog was full{}",
                if param::flag(case, NO_ACCEPT.key) {
                    " (--no-accept: nothing accepted)"
                } else {
                    ""
                }
            )
        }
        _ => format!("connect: {e}"),
    }
}
