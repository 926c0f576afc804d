//! Where a role runs: a thread of this process, a role process (`msgperf role ...`), a
//! `msgperf serve` started by hand, or a role on another host started through a launcher
//! (`msgperf role --stdio`), behind one interface.
//! Each started role speaks the control protocol on its own connection; a reader thread turns
//! what it says into [`Event`]s on one channel, so the case's driver waits on one thing with
//! one deadline. Liveness is the runner's: a case's role processes are watched from outside
//! (`watchdog.rs`), a thread ends when its role does, and a `msgperf serve` sends heartbeats.

use super::control::{
    build_id, read_frame, write_frame, Conn, ControlAddr, ControlError, FarHello, FromRole, ToRole,
};
use super::hosts::Host;
use super::ExecError;
use crate::measure::{clock, offset};
use crate::result::RoleHost;
use crate::sys;
use crate::transport::FloorEnds;
use crossbeam_channel::{bounded, Receiver, Sender};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a started role said or did, tagged with its index in the case.
#[derive(Debug)]
pub enum Event {
    Frame(usize, FromRole),
    /// Its control connection ended (it exited, died or hung up), with a bad frame's
    /// description if that is what ended it.
    Ended(usize, Option<String>),
    /// The runner judged it hung (and, for a process, killed it): why.
    Hung(usize, String),
    /// Its process is dying from this signal: it is gone, though its connection may stay
    /// open for seconds while the kernel tears it down.
    Killed(usize, i32),
    /// A process the case's set-up started (a broker), by pid, died, or was stopped and
    /// killed: why, naming it.
    ServiceDown(u32, String),
}

impl Event {
    /// What the watchdog saw of role `i`.
    pub fn of(i: usize, seen: super::watchdog::Seen) -> Self {
        match seen {
            super::watchdog::Seen::Hung(why) => Event::Hung(i, why),
            super::watchdog::Seen::Killed(signal) => Event::Killed(i, signal),
        }
    }
}

/// A role that was started.
pub trait RoleHandle: Send {
    /// Sends it a control message.
    fn send(&mut self, msg: &ToRole) -> Result<(), ExecError>;
    /// Raises its stop flag out of band (a signal, a flag), for a role busy in its loop.
    fn stop(&mut self);
    /// Its process (this process for a thread; 0 where unknown).
    fn pid(&self) -> u32;
    /// Ends it now if it can be ended (a process).
    fn kill(&mut self);
    /// Waits, at most `grace`, for it to be gone; why it failed, if it did (an exit status and
    /// its last words on stderr).
    fn finish(&mut self, grace: Duration) -> Option<String>;
    /// Where it runs, if on another host: what the far side said, and its clock (after
    /// `finish`, fitted over the whole run).
    fn host(&self) -> Option<RoleHost> {
        None
    }
}

/// Reads frames from `conn` into `events` until it ends. `silence`: a role that sends nothing
/// (not even a heartbeat) for this long is hung.
fn pump(
    index: usize,
    conn: Conn,
    events: Sender<Event>,
    silence: Option<Duration>,
) -> Result<(), ExecError> {
    pump_with(index, conn, events, silence, |_| false)
}

/// `conn`, its frames pumped (by a copy) to `events` as [`pump`] does.
fn pumped(
    index: usize,
    conn: Conn,
    events: Sender<Event>,
    silence: Option<Duration>,
) -> Result<Conn, ExecError> {
    let copy = conn
        .try_clone()
        .map_err(|e| ExecError::os("could not share a control socket", e))?;
    pump(index, copy, events, silence)?;
    Ok(conn)
}

/// A control socket's two ends: ours and the role's.
fn control_pair() -> Result<(UnixStream, UnixStream), ExecError> {
    UnixStream::pair().map_err(|e| ExecError::os("could not make a control socket", e))
}

/// Sends `msg` on `conn`, a failure naming `whom`.
fn send_on(conn: &mut Conn, msg: &ToRole, whom: impl Into<String>) -> Result<(), ExecError> {
    conn.send(msg).map_err(|e| ExecError::control(whom, e))
}

/// As [`pump`]; `keep` takes the frames it returns true for (a far role's probes) instead of
/// passing them on.
fn pump_with(
    index: usize,
    mut conn: Conn,
    events: Sender<Event>,
    silence: Option<Duration>,
    mut keep: impl FnMut(&FromRole) -> bool + Send + 'static,
) -> Result<(), ExecError> {
    spawn("msgperf control", move || {
        let _ = conn.set_read_timeout(silence);
        loop {
            match read_frame::<FromRole>(&mut conn) {
                Ok(msg) => {
                    if keep(&msg) {
                        continue;
                    }
                    if events.send(Event::Frame(index, msg)).is_err() {
                        return;
                    }
                }
                Err(ControlError::Closed) => break,
                Err(ControlError::Timeout(_)) => {
                    let d = silence.unwrap_or_default();
                    let _ = events.send(Event::Hung(
                        index,
                        format!(
                            "sent nothing, not even a heartbeat, for {:.1} s: hung",
                            d.as_secs_f64()
                        ),
                    ));
                    conn.shutdown();
                    break;
                }
                Err(e) => {
                    let _ = events.send(Event::Ended(index, Some(e.to_string())));
                    return;
                }
            }
        }
        let _ = events.send(Event::Ended(index, None));
    })
}

/// Starts a thread of the runner's, or says why it could not (the machine's task limit).
fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<(), ExecError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map(drop)
        .map_err(|e| ExecError::start("could not start a thread of the runner", e))
}

/// A role in a process of its own: `msgperf role KIND ...`, its control socket at fd 3.
pub struct ProcessRole {
    pid: u32,
    conn: Conn,
    stderr: Receiver<String>,
    reaped: Option<Option<String>>,
}

impl ProcessRole {
    /// Starts `msgperf role ARGS`; `ends` are a floor side's descriptors (at fds 4..).
    pub fn start(
        index: usize,
        args: &[String],
        ends: Option<FloorEnds>,
        events: Sender<Event>,
    ) -> Result<Self, ExecError> {
        let (ours, theirs) = control_pair()?;
        let floor_fds = match ends {
            Some(FloorEnds::Fds(f)) => f,
            Some(FloorEnds::Local(_)) => {
                return Err(ExecError::Refused("this floor runs in threads only".into()));
            }
            None => vec![],
        };
        let mut fds = vec![theirs.as_raw_fd()];
        fds.extend(floor_fds.iter().map(|f| f.as_raw_fd()));
        let mut cmd = Command::new(super::own_executable()?);
        cmd.arg("role")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        sys::role_command(&mut cmd, &fds);
        let mut child = cmd
            .spawn()
            .map_err(|e| ExecError::start("could not start a role process", e))?;
        // The child holds its copies now.
        drop(theirs);
        drop(floor_fds);
        let pid = child.id();
        let mut stderr = child.stderr.take().expect("piped");
        let (err_tx, err_rx) = bounded(1);
        spawn("msgperf stderr", move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            let _ = err_tx.send(s);
        })?;
        let conn = pumped(index, Conn::Unix(ours), events, None)?;
        // Reaped with a bound (`finish`), not by std's unbounded wait.
        drop(child);
        Ok(ProcessRole {
            pid,
            conn,
            stderr: err_rx,
            reaped: None,
        })
    }
}

impl RoleHandle for ProcessRole {
    fn send(&mut self, msg: &ToRole) -> Result<(), ExecError> {
        send_on(&mut self.conn, msg, "its control channel")
    }
    fn stop(&mut self) {
        sys::kill(self.pid, libc::SIGUSR1);
    }
    fn pid(&self) -> u32 {
        self.pid
    }
    fn kill(&mut self) {
        if self.reaped.is_none() {
            sys::kill(self.pid, libc::SIGKILL);
        }
    }
    fn finish(&mut self, grace: Duration) -> Option<String> {
        if let Some(r) = &self.reaped {
            return r.clone();
        }
        let status = reaped(self.pid, grace);
        let err = self
            .stderr
            .recv_timeout(grace.min(Duration::from_secs(1)))
            .unwrap_or_default();
        let why = with_last_words(status, &err);
        self.reaped = Some(why.clone());
        why
    }
}

impl Drop for ProcessRole {
    fn drop(&mut self) {
        if self.reaped.is_none() {
            sys::kill(self.pid, libc::SIGKILL);
            sys::reap(self.pid, Duration::from_secs(1));
        }
    }
}

/// Reaps child `pid` within `grace`: how it ended, unless it exited 0.
fn reaped(pid: u32, grace: Duration) -> Option<String> {
    match sys::reap(pid, grace) {
        Some(0) => None,
        Some(code) if code < 0 => Some(format!("killed by signal {}", -code)),
        Some(code) => Some(format!("exit status {code}")),
        None => Some("killed after it did not exit".into()),
    }
}

/// Why a role ended, with its last words on stderr where it failed.
fn with_last_words(why: Option<String>, stderr: &str) -> Option<String> {
    match (why, last_words(stderr)) {
        (None, _) => None,
        (Some(s), Some(l)) => Some(format!("{s}: {l}")),
        (Some(s), None) => Some(s),
    }
}

/// What a role's stderr says about why it ended: a panic's place and message (a backtrace
/// after them ends in a useless note), else its last line.
fn last_words(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if let Some(at) = lines.iter().position(|l| l.contains(" panicked at ")) {
        let place = &lines[at][lines[at].find("panicked at ").unwrap_or(0)..];
        let message = lines.get(at + 1).map_or("", |m| m.trim());
        return Some(format!("{} {message}", place.trim()));
    }
    lines
        .last()
        .map(|l| l.trim_start_matches("msgperf: ").to_string())
}

/// A role in a thread of this process, speaking the protocol over a socket pair.
pub struct ThreadRole {
    conn: Conn,
    stop: Arc<AtomicBool>,
    done: Receiver<Result<(), ExecError>>,
    outcome: Option<Option<String>>,
}

impl ThreadRole {
    /// Starts `body` (the role's side of the protocol) on a thread.
    pub fn start(
        index: usize,
        name: String,
        events: Sender<Event>,
        body: impl FnOnce(Conn, Arc<AtomicBool>) -> Result<(), ExecError> + Send + 'static,
    ) -> Result<Self, ExecError> {
        let (ours, theirs) = control_pair()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = bounded(1);
        let flag = stop.clone();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    body(Conn::Unix(theirs), flag)
                }))
                .unwrap_or_else(|_| Err(ExecError::Reported("the role's thread panicked".into())));
                let _ = done_tx.send(r);
            })
            .map_err(|e| ExecError::start("could not start a role thread", e))?;
        let conn = pumped(index, Conn::Unix(ours), events, None)?;
        Ok(ThreadRole {
            conn,
            stop,
            done,
            outcome: None,
        })
    }
}

impl RoleHandle for ThreadRole {
    fn send(&mut self, msg: &ToRole) -> Result<(), ExecError> {
        send_on(&mut self.conn, msg, "its control channel")
    }
    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    fn pid(&self) -> u32 {
        std::process::id()
    }
    fn kill(&mut self) {
        // A thread cannot be killed: closing its control connection ends its waits, and its
        // channel ends' timeouts end the rest.
        self.stop();
        self.conn.shutdown();
    }
    fn finish(&mut self, grace: Duration) -> Option<String> {
        if let Some(o) = &self.outcome {
            return o.clone();
        }
        let why = match self.done.recv_timeout(grace) {
            Ok(r) => r.err().map(|e| e.to_string()),
            Err(_) => Some(format!("its thread did not end within {grace:?}")),
        };
        self.outcome = Some(why.clone());
        why
    }
}

/// A role at a `msgperf serve` started by hand: only its control connection and heartbeats
/// say whether it lives.
pub struct RemoteRole {
    conn: Conn,
    at: ControlAddr,
}

/// How often a `msgperf serve` says it lives while it serves a case.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

impl RemoteRole {
    pub fn start(
        index: usize,
        at: &ControlAddr,
        timeout: Duration,
        events: Sender<Event>,
    ) -> Result<Self, ExecError> {
        let conn = at.connect(timeout)?;
        // Silence longer than the timeout (and a few heartbeats) is a hung server.
        let silence = timeout.max(HEARTBEAT * 3);
        let conn = pumped(index, conn, events, Some(silence))?;
        Ok(RemoteRole {
            conn,
            at: at.clone(),
        })
    }
}

impl RoleHandle for RemoteRole {
    fn send(&mut self, msg: &ToRole) -> Result<(), ExecError> {
        send_on(
            &mut self.conn,
            msg,
            format!("`msgperf serve` at {}", self.at),
        )
    }
    fn stop(&mut self) {
        // The server raises its role's flag when the Stop frame comes.
    }
    fn pid(&self) -> u32 {
        0
    }
    fn kill(&mut self) {
        self.conn.shutdown();
    }
    fn finish(&mut self, _: Duration) -> Option<String> {
        self.conn.shutdown();
        None
    }
}

/// A role on another host: `LAUNCHER msgperf role --stdio ...`, its control channel the
/// launcher's stdin and stdout (one socket of ours). Its heartbeats say it lives, since the
/// runner cannot watch a far process; the clock is probed before, during and after the run.
pub struct LaunchedRole {
    /// The launcher's process (in a process group of its own).
    pid: u32,
    writer: Arc<Mutex<Conn>>,
    host: Host,
    far: FarHello,
    /// Where its ends bind.
    pub address: String,
    probes: Arc<Mutex<Vec<offset::Probe>>>,
    /// The offset applied to its messages (the best probe before the run).
    pub offset_ns: i64,
    /// The digest of the result it sent, and the one its Done frame carried.
    digests: Arc<Mutex<(Option<u32>, Option<u32>)>>,
    probing: Arc<AtomicBool>,
    stderr: Receiver<String>,
    reaped: Option<Option<String>>,
}

/// How a far side is told the longest silence of its runner it waits out.
pub const SILENCE_FLAG: &str = "--silence-ms";

/// The longest a launcher may take to log in and start msgperf there when `--timeout` is
/// shorter: sshd's key exchange beside two busy CPUs took over 5 s in a soak. A launcher that
/// cannot start msgperf at all ends at once (its channel closes), so only a hung one waits it.
const LOG_IN: Duration = Duration::from_secs(15);
/// Probes before the run, and after it.
const PROBES: usize = 16;
/// Probes during the run: a few a second, on the control channel.
const PROBE_EVERY: Duration = Duration::from_millis(250);

impl LaunchedRole {
    pub fn start(
        index: usize,
        host: &Host,
        args: &[String],
        timeout: Duration,
        events: Sender<Event>,
    ) -> Result<Self, ExecError> {
        let launcher = host.prefix.join(" ");
        let refused =
            |why: String| ExecError::Refused(format!("host {} (`{launcher}`): {why}", host.name));
        // This binary's path there (installed alike, or the same machine), else where
        // `msgperf deploy` put a copy.
        let own = super::own_executable()?;
        let deployed = std::path::PathBuf::from(super::hosts::deployed_path());
        let (mut role, mut conn) = match Self::launch(host, &own, args, timeout) {
            Ok(r) => r,
            Err(Launch::NoHello(first)) => match Self::launch(host, &deployed, args, timeout) {
                Ok(r) => r,
                Err(Launch::NoHello(_)) => {
                    return Err(refused(format!(
                        "no msgperf answered through the launcher at {} ({first}), nor at {}: install this msgperf at that path there, or run `msgperf deploy --host {}=...` with this launcher",
                        own.display(),
                        deployed.display(),
                        host.name
                    )))
                }
                Err(Launch::Failed(why)) => return Err(refused(why)),
            },
            Err(Launch::Failed(why)) => return Err(refused(why)),
        };
        let fail = |role: &mut LaunchedRole, why: String| {
            role.kill();
            role.finish(Duration::from_secs(1));
            refused(why)
        };
        let (ours_v, ours_b) = (env!("CARGO_PKG_VERSION"), build_id());
        if role.far.msgperf_version != ours_v || role.far.build != ours_b {
            let why = format!(
                "the far side is msgperf {} build {}, this one {ours_v} build {ours_b}: run the same msgperf on every host",
                role.far.msgperf_version, role.far.build
            );
            return Err(fail(&mut role, why));
        }
        role.address = match host
            .address
            .clone()
            .or_else(|| role.far.addresses.first().cloned())
        {
            Some(a) => a,
            None => {
                return Err(fail(
                    &mut role,
                    "the far side has no IPv4 address other than loopback".into(),
                ))
            }
        };
        for _ in 0..PROBES {
            let p = probe_now(&mut conn, timeout)
                .map_err(|e| ExecError::control(format!("host {}: a clock probe", host.name), e))?;
            role.probes.lock().expect("not poisoned").push(p);
        }
        role.offset_ns = offset::estimate(&role.probes.lock().expect("not poisoned"))
            .map_or(0, |p| p.offset_ns());
        // From here the reader takes its frames: probes and the digests it keeps.
        let (probes, digests) = (role.probes.clone(), role.digests.clone());
        pump_with(
            index,
            conn,
            events,
            Some(timeout.max(HEARTBEAT * 3)),
            move |msg| match msg {
                FromRole::Probe { t1, t2, t3 } => {
                    let t4 = clock::now();
                    let p = offset::Probe {
                        t1: *t1,
                        t2: *t2,
                        t3: *t3,
                        t4,
                    };
                    probes.lock().expect("not poisoned").push(p);
                    true
                }
                FromRole::Result(_) => {
                    digests.lock().expect("not poisoned").0 =
                        Some(super::serve::result_digest(msg));
                    false
                }
                FromRole::Done { digest } => {
                    digests.lock().expect("not poisoned").1 = Some(*digest);
                    true
                }
                _ => false,
            },
        )?;
        let (writer, probing) = (role.writer.clone(), role.probing.clone());
        spawn("msgperf probe", move || {
            while probing.load(Ordering::SeqCst) {
                std::thread::sleep(PROBE_EVERY);
                let Ok(mut w) = writer.lock() else { return };
                if write_frame(&mut *w, &ToRole::Probe(clock::now())).is_err() {
                    return;
                }
            }
        })?;
        Ok(role)
    }
    /// Starts `exe role --stdio ARGS` through `host`'s launcher and reads its hello.
    fn launch(
        host: &Host,
        exe: &std::path::Path,
        args: &[String],
        timeout: Duration,
    ) -> Result<(LaunchedRole, Conn), Launch> {
        let os = |what: &str, e: std::io::Error| Launch::Failed(format!("{what}: {e}"));
        let (ours, theirs) = UnixStream::pair().map_err(|e| os("a control socket", e))?;
        let mut cmd = Command::new(&host.prefix[0]);
        cmd.args(&host.prefix[1..])
            .arg(exe)
            .arg("role")
            .arg("--stdio")
            .args(args)
            // The far side stops itself when this runner goes as quiet as a lost host would.
            .arg(SILENCE_FLAG)
            .arg(timeout.max(HEARTBEAT * 3).as_millis().to_string());
        let theirs_out = theirs.try_clone().map_err(|e| os("a control socket", e))?;
        cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs_out)))
            .stderr(Stdio::piped());
        sys::role_command(&mut cmd, &[]);
        let mut child = cmd.spawn().map_err(|e| {
            Launch::Failed(format!(
                "its launcher could not start ({e}): is `{}` installed here?",
                host.prefix[0]
            ))
        })?;
        drop(cmd);
        let pid = child.id();
        let mut stderr = child.stderr.take().expect("piped");
        let (err_tx, err_rx) = bounded(1);
        spawn("msgperf stderr", move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            let _ = err_tx.send(s);
        })
        .map_err(|e| Launch::Failed(e.to_string()))?;
        drop(child);
        let mut conn = Conn::Unix(ours);
        let mut role = LaunchedRole {
            pid,
            writer: Arc::new(Mutex::new(
                conn.try_clone().map_err(|e| os("a control socket", e))?,
            )),
            host: host.clone(),
            far: FarHello {
                msgperf_version: String::new(),
                build: String::new(),
                addresses: vec![],
                environment: Default::default(),
            },
            address: String::new(),
            probes: Arc::new(Mutex::new(Vec::new())),
            offset_ns: 0,
            digests: Arc::new(Mutex::new((None, None))),
            probing: Arc::new(AtomicBool::new(true)),
            stderr: err_rx,
            reaped: None,
        };
        let ended = |role: &mut LaunchedRole, why: String| {
            role.kill();
            let end = role.finish(Duration::from_secs(1));
            format!(
                "{why}{}",
                end.map(|e| format!(" (the launcher: {e})"))
                    .unwrap_or_default()
            )
        };
        // The far side calibrates its clock before it answers (some ms), and a launcher may
        // log in first: the case's timeout bounds it, or a log-in's own bound if longer.
        match conn.recv::<FromRole>(Some(timeout.max(LOG_IN))) {
            Ok(FromRole::Hello(h)) => {
                role.far = *h;
                Ok((role, conn))
            }
            Ok(other) => Err(Launch::Failed(ended(
                &mut role,
                format!("the far side answered {other:?} before a hello"),
            ))),
            // Nothing came (no such program there, or it ended): another path may be tried.
            Err(e @ ControlError::Closed) => Err(Launch::NoHello(ended(&mut role, e.to_string()))),
            // A launcher that hangs would hang at any path: not tried again.
            Err(e @ ControlError::Timeout(_)) => Err(Launch::Failed(ended(
                &mut role,
                format!("no msgperf answered through the launcher ({e}): it hung logging in or starting msgperf there"),
            ))),
            Err(e) => Err(Launch::Failed(ended(
                &mut role,
                format!("no msgperf answered through the launcher: {e}"),
            ))),
        }
    }
}

/// What the msgperf at `exe` through `host`'s launcher says of itself (then it is ended).
pub fn far_hello(
    host: &Host,
    exe: &std::path::Path,
    timeout: Duration,
) -> Result<FarHello, ExecError> {
    match LaunchedRole::launch(host, exe, &[], timeout) {
        Ok((mut role, _)) => {
            role.kill();
            Ok(role.far.clone())
        }
        Err(Launch::NoHello(why) | Launch::Failed(why)) => Err(ExecError::Refused(format!(
            "host {}: no msgperf answered at {}: {why}",
            host.name,
            exe.display()
        ))),
    }
}

/// Why a far side could not be started.
enum Launch {
    /// It never said hello: nothing answered at that path.
    NoHello(String),
    /// Anything else, said in full.
    Failed(String),
}

/// One probe answered within `timeout`, read directly (before the reader thread starts).
fn probe_now(conn: &mut Conn, timeout: Duration) -> Result<offset::Probe, ControlError> {
    let t1 = clock::now();
    conn.send(&ToRole::Probe(t1))?;
    loop {
        match conn.recv::<FromRole>(Some(timeout))? {
            FromRole::Probe { t1: back, t2, t3 } if back == t1 => {
                return Ok(offset::Probe {
                    t1,
                    t2,
                    t3,
                    t4: clock::now(),
                })
            }
            _ => {}
        }
    }
}

impl RoleHandle for LaunchedRole {
    fn send(&mut self, msg: &ToRole) -> Result<(), ExecError> {
        let mut w = self.writer.lock().map_err(|_| {
            ExecError::Reported(format!(
                "host {}: its control channel is broken",
                self.host.name
            ))
        })?;
        write_frame(&mut *w, msg)
            .map_err(|e| ExecError::control(format!("host {}", self.host.name), e))
    }
    fn stop(&mut self) {
        // The far side raises its role's flag when the Stop frame comes.
    }
    fn pid(&self) -> u32 {
        self.pid
    }
    fn kill(&mut self) {
        if self.reaped.is_none() {
            // The launcher and what it started here (its process group): a far side sees its
            // stdin end and stops.
            sys::kill_group(self.pid, libc::SIGKILL);
        }
    }
    fn finish(&mut self, grace: Duration) -> Option<String> {
        if let Some(r) = &self.reaped {
            return r.clone();
        }
        // Done, then the clock after the run: the far side answers until it is hung up on.
        let deadline = crate::deadline::Deadline::after(grace);
        while self.digests.lock().expect("not poisoned").1.is_none() && !deadline.expired() {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.probing.store(false, Ordering::SeqCst);
        let (sent, done) = *self.digests.lock().expect("not poisoned");
        if done.is_some() {
            let before = self.probes.lock().expect("not poisoned").len();
            for _ in 0..PROBES {
                let _ = self.send(&ToRole::Probe(clock::now()));
                std::thread::sleep(Duration::from_millis(2));
            }
            let deadline = crate::deadline::Deadline::after(Duration::from_millis(500));
            while self.probes.lock().expect("not poisoned").len() < before + PROBES
                && !deadline.expired()
            {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        if let Ok(w) = self.writer.lock() {
            w.shutdown();
        }
        let status = reaped(self.pid, grace.max(Duration::from_millis(500)));
        sys::kill_group(self.pid, libc::SIGKILL);
        let err = self
            .stderr
            .recv_timeout(Duration::from_millis(500))
            .unwrap_or_default();
        // The exit status alone is never trusted (`kubectl exec` may exit 0 mid-run).
        let why = match (status, sent, done) {
            (None, Some(s), Some(d)) if s != d => Some(format!(
                "its result arrived with digest {s:08x}, its end frame says {d:08x}: damaged on the way"
            )),
            (None, Some(_), None) => Some("it sent no end frame after its result".into()),
            (s, ..) => s,
        };
        let why = with_last_words(why, &err);
        self.reaped = Some(why.clone());
        why
    }
    fn host(&self) -> Option<RoleHost> {
        let probes = self.probes.lock().expect("not poisoned");
        Some(RoleHost {
            name: self.host.name.clone(),
            launcher: self.host.launcher.clone(),
            address: self.address.clone(),
            msgperf_version: self.far.msgperf_version.clone(),
            build: self.far.build.clone(),
            environment: self.far.environment.clone(),
            clock: offset::fit(&probes, self.offset_ns),
        })
    }
}

impl Drop for LaunchedRole {
    fn drop(&mut self) {
        self.probing.store(false, Ordering::SeqCst);
        if self.reaped.is_none() {
            sys::kill_group(self.pid, libc::SIGKILL);
            sys::reap(self.pid, Duration::from_secs(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::last_words;

    #[test]
    fn a_panic_is_told_by_its_place_and_message_not_by_the_backtrace_note() {
        let err = "thread 'main' (7) panicked at src/x.rs:3:5:\nno ack\nstack backtrace:\n   0: f\nnote: Some details are omitted\n";
        assert_eq!(
            last_words(err).as_deref(),
            Some("panicked at src/x.rs:3:5: no ack")
        );
        assert_eq!(
            last_words("starting\nmsgperf: no broker at x\n\n").as_deref(),
            Some("no broker at x")
        );
        assert_eq!(last_words(""), None);
    }
}
