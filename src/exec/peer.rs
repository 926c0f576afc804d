//! The passive role as a child process: msgperf re-executes itself as
//! `msgperf serve --once --announce ...`, reads the rendezvous it prints, and reaps it with a
//! bounded wait. The child dies with its parent (PR_SET_PDEATHSIG) and sits in its own process
//! group, so the terminal's Ctrl-C reaches only the controller, which ends the case cleanly.

use crate::result::{CaseConfig, Wait};
use crate::sys;
use crate::transport::Rendezvous;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The line a peer prints first, followed by its rendezvous as JSON.
pub const ANNOUNCE: &str = "msgperf-rendezvous";

/// The msgperf binary, to start roles with. MSGPERF_EXE names it when the caller is not
/// msgperf itself (the test suite).
pub fn own_executable() -> Result<std::path::PathBuf, String> {
    match std::env::var_os("MSGPERF_EXE") {
        Some(p) => Ok(std::path::PathBuf::from(p)),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find msgperf's own executable to start a role: {e}")),
    }
}

/// A msgperf process playing a role: dies with its parent, its stderr kept for the error
/// message, killed if still running when dropped.
pub struct RoleProcess {
    child: Child,
    stderr: Receiver<String>,
}

impl RoleProcess {
    /// Starts `msgperf ARGS` with stdout piped (returned) and stdin as given.
    pub fn spawn(
        args: &[String],
        stdin: Stdio,
    ) -> Result<(Self, std::process::ChildStdout), String> {
        let mut cmd = Command::new(own_executable()?);
        cmd.args(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        sys::child_dies_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("could not start a {} process: {e}", args[0]))?;
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let (err_tx, err_rx) = bounded(1);
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            let _ = err_tx.send(s);
        });
        Ok((
            RoleProcess {
                child,
                stderr: err_rx,
            },
            stdout,
        ))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }

    /// Waits for the process to exit (killing it after `grace`); returns why it failed, if it
    /// did, with the last line it wrote to stderr.
    pub fn finish(&mut self, grace: Duration) -> Option<String> {
        let status = match sys::reap(self.child.id(), grace) {
            Some(0) => None,
            Some(-1) => Some("killed by a signal".to_string()),
            Some(code) => Some(format!("exit status {code}")),
            None => Some("killed after it did not exit".into()),
        };
        // Reaped above; std must not wait on it again.
        let _ = self.child.try_wait();
        let err = self
            .stderr
            .recv_timeout(Duration::from_secs(1))
            .unwrap_or_default();
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::to_string);
        match (status, last) {
            (None, _) => None,
            (Some(s), Some(l)) => Some(format!("{s}: {l}")),
            (Some(s), None) => Some(s),
        }
    }
}

impl Drop for RoleProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.try_wait();
        }
    }
}

/// The passive role (a subscriber, with `--peers`) in a `serve --once` process: it listens,
/// or joins the fan-outs at `join` (a subscriber of publishers with a native fan-out).
pub struct PeerProcess {
    process: RoleProcess,
    /// Where it listens; when it joined fan-outs, the first one it joined.
    pub rendezvous: Rendezvous,
}

impl PeerProcess {
    /// `watched`: the caller arms a stalled-peer [`Watchdog`] on it (see `ChannelSpec::watched`).
    pub fn spawn(case: &CaseConfig, join: &[Rendezvous], watched: bool) -> Result<Self, String> {
        let mut args: Vec<String> = ["serve", "--once", "--announce", "--transport"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push(case.transport.clone());
        if watched {
            args.push("--watched".into());
        }
        args.extend([
            "--timeout".into(),
            format!("{}ms", case.timeout.as_millis()),
        ]);
        args.extend(["--max-message".into(), case.size_bytes.to_string()]);
        if case.pubs > 1 {
            args.extend(["--peers".into(), case.pubs.to_string()]);
        }
        if case.wait == Wait::Poll {
            args.push("--poll".into());
        }
        if let Some(c) = case.cpus.1 {
            args.extend(["--pin".into(), c.to_string()]);
        }
        for (k, v) in &case.options {
            args.extend(["--opt".into(), format!("{k}={v}")]);
        }
        for at in join {
            args.extend(["--join".into(), at.address.clone()]);
        }
        let (mut process, stdout) = RoleProcess::spawn(&args, Stdio::null())?;
        if !join.is_empty() {
            return Ok(PeerProcess {
                process,
                rendezvous: join[0].clone(),
            });
        }
        let (line_tx, line_rx) = bounded(1);
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = line_tx.send(line);
        });
        let line = line_rx.recv_timeout(case.timeout).unwrap_or_default();
        match line
            .trim()
            .strip_prefix(ANNOUNCE)
            .map(|j| serde_json::from_str::<Rendezvous>(j.trim()))
        {
            Some(Ok(rendezvous)) => Ok(PeerProcess {
                process,
                rendezvous,
            }),
            _ => {
                let why = process.finish(Duration::from_secs(1));
                Err(format!(
                    "the peer process did not start: {}",
                    why.unwrap_or_else(|| "it printed no rendezvous".into())
                ))
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Waits for the peer to exit (killing it after `grace`); returns why it failed, if it did.
    pub fn finish(&mut self, grace: Duration) -> Option<String> {
        self.process.finish(grace)
    }
}

/// Ends a peer process that hangs while alive, which a blocking read with no timer of its own
/// would never notice: kills it when it has not run at all (no time on a CPU, not once
/// scheduled in) for `stall`, or when `deadline` has passed, whichever is given and comes first.
/// Watching from outside costs the peer nothing, where a timer on every blocking wait costs
/// each wait a kernel timer. Cancelled when dropped.
pub struct Watchdog {
    cancel: Option<Sender<()>>,
    fired: Receiver<String>,
}

impl Watchdog {
    pub fn arm(pid: u32, stall: Option<Duration>, deadline: Option<Duration>) -> Self {
        let (cancel, cancelled) = bounded::<()>(1);
        let (fired_tx, fired) = bounded(1);
        if stall.is_none() && deadline.is_none() {
            return Watchdog {
                cancel: None,
                fired,
            };
        }
        // A stall is noticed within a tenth of its bound.
        let period = stall.map_or(Duration::from_millis(100), |s| {
            (s / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
        });
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut last = (sys::run_count(pid), start);
            let why = loop {
                if cancelled.recv_timeout(period) != Err(RecvTimeoutError::Timeout) {
                    return;
                }
                let now = Instant::now();
                if deadline.is_some_and(|d| now - start >= d) {
                    break format!(
                        "still running {:.1} s after it started, past the case's length and 3x --timeout; msgperf killed it",
                        (now - start).as_secs_f64()
                    );
                }
                if let Some(stall) = stall {
                    let count = sys::run_count(pid);
                    if count.is_none() || !sys::process_alive(pid) {
                        return; // ended (a zombie runs no more either): its channel says so
                    }
                    if count != last.0 {
                        last = (count, now);
                    } else if now - last.1 >= stall {
                        break format!(
                            "it did not run for {:.1} s: hung, so msgperf killed it (raise --timeout if it is only slow)",
                            (now - last.1).as_secs_f64()
                        );
                    }
                }
            };
            // Said before the kill, so that whoever sees the channel close can say why.
            let _ = fired_tx.send(why);
            sys::kill(pid, libc::SIGKILL);
        });
        Watchdog {
            cancel: Some(cancel),
            fired,
        }
    }

    /// Whether the watchdog killed its process, and why.
    pub fn fired(&self) -> Option<String> {
        self.fired.try_recv().ok()
    }

    /// Whether this kernel lets a watchdog see that a process stopped running.
    pub fn can_watch() -> bool {
        sys::run_count(std::process::id()).is_some()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.cancel.take() {
            let _ = tx.send(());
        }
    }
}
