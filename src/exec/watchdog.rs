//! Liveness of a case's role processes, judged together from outside. A blocking read with no
//! timer of its own would never notice a peer that hangs while alive; a timer on every wait
//! costs each wait a kernel timer. So the runner watches the processes instead, from their
//! scheduling counts (/proc/PID/task/*/schedstat) and state, which costs them nothing:
//! - a role stopped (`kill -STOP`, a debugger) for `stall` is hung, and is killed;
//! - a role that only waits is not hung: a subscriber whose publisher is blocked on another,
//!   stopped subscriber waits too, and must not be killed for it. Only when no role of the case
//!   has run at all for `stall` (they all wait: a deadlock, or a wait that will not end) is the
//!   one that stopped running first killed; its peers then see it gone.
//!
//! Killing a role ends every wait on it: its peers see end of file or its process gone.
//!
//! A role killed by a signal (by the watchdog or by anyone) is reported as soon as its process
//! starts dying: it closes its connection only once the kernel has torn down its memory, which
//! can take seconds.

use crate::sys;
use crossbeam_channel::{bounded, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// What the watchdog saw of a role.
pub enum Seen {
    /// Stopped or still for the stall bound: it is killed right after this is said.
    Hung(String),
    /// Its process is dying from this signal.
    Killed(i32),
}

/// Watches role processes until dropped.
pub struct Watchdog {
    cancel: Option<Sender<()>>,
    add: Option<Sender<(usize, u32)>>,
}

/// A watched role: its index, process, run count when it last changed, and when that was.
struct Watched {
    index: usize,
    pid: u32,
    count: Option<(u64, u64)>,
    since: Instant,
}

impl Watchdog {
    /// Starts watching nothing yet; `fired` hears which role was killed and why, before the
    /// kill. None: never judge a role hung.
    pub fn arm(stall: Option<Duration>, fired: impl Fn(usize, Seen) + Send + 'static) -> Self {
        let Some(stall) = stall else {
            return Watchdog {
                cancel: None,
                add: None,
            };
        };
        let (cancel, cancelled) = bounded::<()>(1);
        let (add, added) = crossbeam_channel::unbounded::<(usize, u32)>();
        // A stall is noticed within a thirtieth of its bound: reading a few /proc files ten
        // times a second costs nothing that shows.
        let period = (stall / 30).clamp(Duration::from_millis(10), Duration::from_millis(100));
        std::thread::spawn(move || {
            let mut roles: Vec<Watched> = Vec::new();
            loop {
                if cancelled.recv_timeout(period) != Err(RecvTimeoutError::Timeout) {
                    return;
                }
                let now = Instant::now();
                roles.extend(added.try_iter().map(|(index, pid)| Watched {
                    index,
                    pid,
                    count: sys::run_count(pid),
                    since: now,
                }));
                // Killed: said now. Ended on its own: its connection says so, with its last words.
                roles.retain(|r| match sys::ending(r.pid) {
                    Some(Some(signal)) => {
                        fired(r.index, Seen::Killed(signal));
                        false
                    }
                    Some(None) => false,
                    None => sys::process_alive(r.pid),
                });
                for r in roles.iter_mut() {
                    let count = sys::run_count(r.pid);
                    if count != r.count {
                        r.count = count;
                        r.since = now;
                    }
                }
                let hung = roles
                    .iter()
                    .position(|r| {
                        matches!(sys::process_state(r.pid), Some('T' | 't')) && now - r.since >= stall
                    })
                    .map(|i| {
                        (i, format!(
                            "was stopped for {:.1} s (SIGSTOP or a debugger): hung, so msgperf killed it",
                            (now - roles[i].since).as_secs_f64()
                        ))
                    })
                    .or_else(|| {
                        let all_still = !roles.is_empty() && roles.iter().all(|r| now - r.since >= stall);
                        let first = roles.iter().enumerate().min_by_key(|(_, r)| r.since)?;
                        all_still.then(|| {
                            (first.0, format!(
                                "did not run for {:.1} s, and no other role ran either: hung, so msgperf killed it (raise --timeout if it is only slow)",
                                (now - first.1.since).as_secs_f64()
                            ))
                        })
                    });
                if let Some((i, why)) = hung {
                    let r = roles.remove(i);
                    // Said before the kill, so that whoever sees the connection close knows why.
                    fired(r.index, Seen::Hung(why));
                    sys::kill(r.pid, libc::SIGKILL);
                    // The others get a fresh chance: the kill should set them going.
                    for o in roles.iter_mut() {
                        o.since = now;
                    }
                }
            }
        });
        Watchdog {
            cancel: Some(cancel),
            add: Some(add),
        }
    }

    /// Watches role `index`'s process from now on.
    pub fn watch(&self, index: usize, pid: u32) {
        if let Some(add) = &self.add {
            let _ = add.send((index, pid));
        }
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
