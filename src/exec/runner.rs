//! Where a role runs: a thread of this process, a role process (`msgperf role ...`), or a
//! `msgperf serve` started by hand (and, next, an agent on another host), behind one interface.
//! Each started role speaks the control protocol on its own connection; a reader thread turns
//! what it says into [`Event`]s on one channel, so the case's driver waits on one thing with
//! one deadline. Liveness is the runner's: a case's role processes are watched from outside
//! (`watchdog.rs`), a thread ends when its role does, and a `msgperf serve` sends heartbeats.

use super::control::{read_frame, Conn, ControlAddr, ControlError, FromRole, ToRole};
use super::ExecError;
use crate::sys;
use crate::transport::FloorEnds;
use crossbeam_channel::{bounded, Receiver, Sender};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
    /// A process the case's set-up started (a broker) died, or was stopped and killed: why.
    ServiceDown(String),
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
}

/// Reads frames from `conn` into `events` until it ends. `silence`: a role that sends nothing
/// (not even a heartbeat) for this long is hung.
fn pump(
    index: usize,
    mut conn: Conn,
    events: Sender<Event>,
    silence: Option<Duration>,
) -> Result<(), ExecError> {
    spawn("msgperf control", move || {
        let _ = conn.set_read_timeout(silence);
        loop {
            match read_frame::<FromRole>(&mut conn) {
                Ok(msg) => {
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
        .map_err(|e| ExecError::os("could not start a thread of the runner", e))
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
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| ExecError::os("could not make a control socket", e))?;
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
            .map_err(|e| ExecError::os("could not start a role process", e))?;
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
        let conn = Conn::Unix(ours);
        pump(
            index,
            conn.try_clone()
                .map_err(|e| ExecError::os("could not share a control socket", e))?,
            events,
            None,
        )?;
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
        self.conn
            .send(msg)
            .map_err(|e| ExecError::control("its control channel", e))
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
        let status = match sys::reap(self.pid, grace) {
            Some(0) => None,
            Some(code) if code < 0 => Some(format!("killed by signal {}", -code)),
            Some(code) => Some(format!("exit status {code}")),
            None => Some("killed after it did not exit".into()),
        };
        let err = self
            .stderr
            .recv_timeout(grace.min(Duration::from_secs(1)))
            .unwrap_or_default();
        let why = match (status, last_words(&err)) {
            (None, _) => None,
            (Some(s), Some(l)) => Some(format!("{s}: {l}")),
            (Some(s), None) => Some(s),
        };
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
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| ExecError::os("could not make a control socket", e))?;
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
            .map_err(|e| ExecError::os("could not start a role thread", e))?;
        let conn = Conn::Unix(ours);
        pump(
            index,
            conn.try_clone()
                .map_err(|e| ExecError::os("could not share a control socket", e))?,
            events,
            None,
        )?;
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
        self.conn
            .send(msg)
            .map_err(|e| ExecError::control("its control channel", e))
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
        pump(
            index,
            conn.try_clone()
                .map_err(|e| ExecError::os("could not share a control socket", e))?,
            events,
            Some(silence),
        )?;
        Ok(RemoteRole {
            conn,
            at: at.clone(),
        })
    }
}

impl RoleHandle for RemoteRole {
    fn send(&mut self, msg: &ToRole) -> Result<(), ExecError> {
        self.conn
            .send(msg)
            .map_err(|e| ExecError::control(format!("`msgperf serve` at {}", self.at), e))
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
