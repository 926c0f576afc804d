//! `connect`: connections set up and torn down (the Tcl report's connection rate): connect,
//! accept, one small exchange, close, each step timed, over tcp or uds. With `--hold`,
//! connections are opened and kept until the first failure (or `--n`, or `--duration`): how
//! many one process held, and what stopped it; with `--no-accept` the listener never accepts,
//! so connections queue in its backlog (`--backlog`) until one times out. The accepting side is
//! a thread of the role, on the other CPU of the placement.

use super::runtime::check_fixed;
use super::{
    param, Param, ParamKind, RoleControl, RoleError, RoleSpec, Sent, StopRule, Topology,
    Workload, N,
};
use crate::measure::{clock, Metric, Recorder};
use crate::result::{CaseConfig, FloorKind, LatencyKind, RoleId, RoleKind};
use crate::sys;
use crate::transport::{Capabilities, Endpoint, SetupPlan, TransportError};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
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
    kind: ParamKind::Count { min: 1 },
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
        "connections set up and torn down over tcp or uds (connect, accept, one exchange, close); --hold: how many one process holds"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&UP_TO_N, &HOLD, &BACKLOG, &NO_ACCEPT]
    }
    fn metrics(&self) -> &'static [Metric] {
        &[Metric::RTT, CONNECT_CALL, ACCEPT_CALL, CLOSE_CALL, CONNECTION]
    }
    fn latency(&self, case: &CaseConfig) -> (LatencyKind, Metric) {
        if param::flag(case, HOLD.key) {
            (CONNECT_CALL_KIND, CONNECT_CALL)
        } else {
            (CONNECT_TO_CLOSE, CONNECTION)
        }
    }
    fn floor_kind(&self, _: &CaseConfig) -> Option<FloorKind> {
        None
    }
    fn check(&self, case: &CaseConfig, _: &Capabilities) -> Result<(), String> {
        check_fixed(case, "opens connections")?;
        if !matches!(case.transport.as_str(), "tcp" | "uds") {
            return Err(format!(
                "connect measures the kernel's connection set-up over tcp or uds, not `{}`: use -t tcp,uds",
                case.transport
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
    fn run(
        &self,
        _: &RoleSpec,
        _: &mut [Box<dyn Endpoint>],
        case: &CaseConfig,
        rec: &mut Recorder,
        ctl: &RoleControl,
    ) -> Result<Option<Sent>, RoleError> {
        let backlog = match param::count(case, BACKLOG.key) {
            Some(b) => b.min(u32::MAX as u64) as u32,
            None => sys::somaxconn().unwrap_or(4096),
        };
        let listener = Listener::bind(&case.transport, backlog).map_err(fail)?;
        rec.figure("listen backlog", "", backlog as f64);
        let r = if param::flag(case, HOLD.key) {
            hold(&listener, case, rec, ctl.stop)
        } else {
            rate(&listener, case, rec, ctl.stop)
        };
        r.map_err(fail)?;
        Ok(Some(Sent {
            first_measured: 0,
            next: rec.counters.messages_sent,
        }))
    }
}

fn fail(e: String) -> RoleError {
    RoleError::Transport(TransportError::Unsupported(e))
}

/// A listener on loopback or in a private directory (removed when dropped).
enum Listener {
    Tcp(TcpListener),
    Uds(UnixListener, PathBuf),
}

enum Conn {
    Tcp(TcpStream),
    Uds(UnixStream),
}

impl Listener {
    /// Listens with `backlog` (std picks its own; listen again sets ours).
    fn bind(transport: &str, backlog: u32) -> Result<Self, String> {
        let made = if transport == "tcp" {
            TcpListener::bind("127.0.0.1:0").map(Listener::Tcp)
        } else {
            crate::transport::private_dir()
                .and_then(|dir| UnixListener::bind(dir.join("s")).map(|l| Listener::Uds(l, dir)))
        };
        let l = made.map_err(|e| format!("could not listen for connections: {e}"))?;
        sys::listen(l.fd(), backlog)
            .map_err(|e| format!("could not set the listen backlog to {backlog}: {e}"))?;
        Ok(l)
    }

    fn fd(&self) -> i32 {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Uds(l, _) => l.as_raw_fd(),
        }
    }

    /// Accepts one connection if one comes within 100 ms.
    fn accept(&self) -> io::Result<Option<Conn>> {
        if !sys::wait_readable(self.fd(), 100)? {
            return Ok(None);
        }
        Ok(Some(match self {
            Listener::Tcp(l) => Conn::Tcp(l.accept()?.0),
            Listener::Uds(l, _) => Conn::Uds(l.accept()?.0),
        }))
    }

    fn connect(&self, timeout: Duration) -> io::Result<Conn> {
        match self {
            Listener::Tcp(l) => {
                let s = TcpStream::connect_timeout(&l.local_addr()?, timeout)?;
                s.set_nodelay(true)?;
                Ok(Conn::Tcp(s))
            }
            Listener::Uds(_, dir) => {
                sys::unix_connect_timeout(&dir.join("s"), timeout).map(Conn::Uds)
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Uds(_, dir) = self {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Conn {
    fn stream(&mut self) -> &mut dyn ReadWrite {
        match self {
            Conn::Tcp(s) => s,
            Conn::Uds(s) => s,
        }
    }
    fn set_timeout(&self, t: Duration) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s
                .set_read_timeout(Some(t))
                .and(s.set_write_timeout(Some(t))),
            Conn::Uds(s) => s
                .set_read_timeout(Some(t))
                .and(s.set_write_timeout(Some(t))),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Connections per second: each one connected, one exchange, closed, every step timed; the
/// acceptor echoes the exchange and closes after its peer.
fn rate(
    listener: &Listener,
    case: &CaseConfig,
    rec: &mut Recorder,
    stop: &AtomicBool,
) -> Result<(), String> {
    let done = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let cap = param::count(case, N.key).unwrap_or(u64::MAX);
    std::thread::scope(|s| {
        let acceptor = s.spawn(|| accept_loop(listener, case, &done, Some(&measuring)));
        let r = connect_loop(listener, case, rec, stop, cap, &measuring);
        done.store(true, Ordering::SeqCst);
        let accepted = acceptor.join().unwrap_or_else(|_| Accepted {
            error: Some(io::Error::other("the acceptor panicked")),
            ..Accepted::default()
        });
        for &t in &accepted.times {
            rec.record(ACCEPT_CALL, t);
        }
        if let Some(e) = accepted.error {
            return Err(format!("the accepting side: {e}"));
        }
        r
    })
}

fn connect_loop(
    listener: &Listener,
    case: &CaseConfig,
    rec: &mut Recorder,
    stop: &AtomicBool,
    cap: u64,
    measuring: &AtomicBool,
) -> Result<(), String> {
    // The exchange: one message of --size bytes, echoed.
    let msg = vec![7u8; case.size_bytes];
    let mut back = vec![0u8; case.size_bytes];
    let mut one = |rec: &mut Recorder, measured: bool| -> Result<(), String> {
        let t0 = clock::now();
        let mut c = listener
            .connect(case.timeout)
            .map_err(|e| format!("connect: {e}"))?;
        let t1 = clock::now();
        c.set_timeout(case.timeout).map_err(|e| e.to_string())?;
        c.stream()
            .write_all(&msg)
            .and_then(|_| c.stream().read_exact(&mut back))
            .map_err(|e| format!("the exchange on a new connection: {e}"))?;
        let t2 = clock::now();
        drop(c);
        let t3 = clock::now();
        if measured {
            rec.record_primary(CONNECTION, t3 - t0, t3);
            rec.record(CONNECT_CALL, t1 - t0);
            rec.record(Metric::RTT, t2 - t1);
            rec.record(CLOSE_CALL, t3 - t2);
            let c = &mut rec.counters;
            c.messages_sent += 1;
            c.messages_received += 1;
            c.bytes_sent += msg.len() as u64;
            c.bytes_received += msg.len() as u64;
            rec.mark_end(t3);
        }
        Ok(())
    };
    let warm = StopRule::warmup(case);
    let mut n = 0;
    while !warm.done(n, clock::now(), stop) {
        one(rec, false)?;
        n += 1;
    }
    rec.reset();
    // Each warm-up connection was accepted before its exchange ended: the acceptor's timings
    // from here on are the measured connections'.
    measuring.store(true, Ordering::SeqCst);
    let rule = StopRule::measured(case);
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
fn accept_loop(
    listener: &Listener,
    case: &CaseConfig,
    done: &AtomicBool,
    echo: Option<&AtomicBool>,
) -> Accepted {
    let mut a = Accepted::default();
    if let Err(e) = accept_into(&mut a, listener, case, done, echo) {
        a.error = Some(e);
    }
    a
}

#[derive(Default)]
struct Accepted {
    times: Vec<u64>,
    kept: Vec<Conn>,
    error: Option<io::Error>,
}

fn accept_into(
    a: &mut Accepted,
    listener: &Listener,
    case: &CaseConfig,
    done: &AtomicBool,
    echo: Option<&AtomicBool>,
) -> io::Result<()> {
    if let Some(cpu) = case.cpus.1 {
        let _ = sys::pin_current_thread(cpu);
    }
    let mut buf = vec![0u8; case.size_bytes];
    while !done.load(Ordering::SeqCst) {
        let t0 = clock::now();
        let Some(mut c) = listener.accept()? else {
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
        c.set_timeout(case.timeout)?;
        let s = c.stream();
        s.read_exact(&mut buf).and_then(|_| s.write_all(&buf))?;
        // The connector closes first; its close ends this read.
        let _ = s.read(&mut buf);
    }
    Ok(())
}

/// Opens connections and keeps them until one fails (or --n, or --duration), with the
/// descriptor limit raised to its hard limit meanwhile; says what stopped it.
fn hold(
    listener: &Listener,
    case: &CaseConfig,
    rec: &mut Recorder,
    stop: &AtomicBool,
) -> Result<(), String> {
    let limit = sys::FdLimit::raise_to(u64::MAX);
    rec.figure("descriptor limit while holding", "fds", limit.now as f64);
    let done = AtomicBool::new(false);
    let cap = param::count(case, N.key).unwrap_or(u64::MAX);
    let timeout = case.timeout.min(Duration::from_secs(2));
    let why = std::thread::scope(|s| {
        // A stalled server's listener: nothing accepts, the backlog fills.
        let acceptor =
            (!param::flag(case, NO_ACCEPT.key))
                .then(|| s.spawn(|| accept_loop(listener, case, &done, None)));
        let mut held: Vec<Conn> = Vec::new();
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
            match listener.connect(timeout) {
                Ok(c) => {
                    let t1 = clock::now();
                    rec.record_primary(CONNECT_CALL, t1 - t0, t1);
                    rec.mark_end(t1);
                    held.push(c);
                }
                Err(e) => break why_stopped(&e, &limit, timeout, case, rec),
            }
        };
        done.store(true, Ordering::SeqCst);
        let accepted = match acceptor {
            Some(a) => a.join().unwrap_or_else(|_| Accepted {
                error: Some(io::Error::other("the acceptor panicked")),
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
            Some(e) => format!(
                "{}, met by accept",
                why_stopped(e, &limit, timeout, case, rec)
            ),
            None => why,
        }
    });
    rec.stopped_by(why);
    Ok(())
}

fn why_stopped(
    e: &io::Error,
    limit: &sys::FdLimit,
    timeout: Duration,
    case: &CaseConfig,
    rec: &mut Recorder,
) -> String {
    match e.raw_os_error() {
        Some(libc::EMFILE) => format!(
            "the descriptor limit (RLIMIT_NOFILE {}, raised from {}; both ends are in this process)",
            limit.now, limit.before
        ),
        Some(libc::ENFILE) => "the system's descriptor limit (fs.file-max)".into(),
        Some(libc::EADDRNOTAVAIL) => format!(
            "no ephemeral port left (net.ipv4.ip_local_port_range {})",
            sys::ephemeral_ports().unwrap_or_default()
        ),
        Some(libc::ENOMEM) | Some(libc::ENOBUFS) => format!("memory: {e}"),
        _ if e.kind() == io::ErrorKind::TimedOut => {
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
