//! The processes a case's set-up started (a broker), as roles of the case: watched while it
//! runs (one that dies ends the case, as a role's death does), and measured from outside, from
//! Go to the last result, so that their CPU per message stands beside the roles'.

use super::runner::Event;
use crate::result::{Counters, CpuUsage, RoleId, RoleKind, RoleResult};
use crate::sys;
use crate::transport::Service;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How a service's death is noticed: its state, read ten times a second (a dead child stays a
/// zombie until its set-up reaps it).
const PERIOD: Duration = Duration::from_millis(100);

/// Watches services until dropped.
pub struct Monitor {
    cancel: Option<Sender<()>>,
}

impl Monitor {
    pub fn start(services: &[Service], events: Sender<Event>) -> Monitor {
        if services.is_empty() {
            return Monitor { cancel: None };
        }
        let services = services.to_vec();
        let (cancel, cancelled) = bounded::<()>(1);
        std::thread::spawn(move || {
            let mut alive = services.clone();
            while cancelled.recv_timeout(PERIOD) == Err(RecvTimeoutError::Timeout) {
                alive.retain(|s| {
                    if sys::process_alive(s.pid) {
                        return true;
                    }
                    let _ = events.send(Event::ServiceDown(s.pid, died(s)));
                    false
                });
            }
        });
        Monitor {
            cancel: Some(cancel),
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if let Some(c) = self.cancel.take() {
            let _ = c.send(());
        }
    }
}

/// How errors name a service: `the broker (nats-server, pid 123)`.
pub fn name(s: &Service) -> String {
    format!("the {} ({}, pid {})", s.label, s.program, s.pid)
}

/// A dead service, named with the last words of its log: why it died, where it said so.
fn died(s: &Service) -> String {
    match s.last_words() {
        Some(words) => format!("{} died (its log says: {words})", name(s)),
        None => format!("{} died", name(s)),
    }
}

/// A service's usage at one instant.
#[derive(Clone, Copy)]
pub struct Sample {
    at: Instant,
    usage: Option<(sys::Usage, Option<usize>)>,
}

pub fn sample(services: &[Service]) -> Vec<Sample> {
    services
        .iter()
        .map(|s| Sample {
            at: Instant::now(),
            usage: sys::process_usage(s.pid),
        })
        .collect()
}

/// What went wrong with each service, in a sentence naming it: what the watchdog or the
/// monitor said of it in `events` not yet read, else whether it is dead or stopped now. Read
/// after its state: one that the watchdog kills for being stopped is for a moment neither dead
/// nor stopped (woken, not yet exiting), but its word is sent before the kill.
pub fn faults(services: &[Service], events: &Receiver<Event>) -> Vec<(Service, String)> {
    let now: Vec<Option<String>> = services
        .iter()
        .map(|s| {
            if !sys::process_alive(s.pid) {
                Some(died(s))
            } else if matches!(sys::process_state(s.pid), Some('T' | 't')) {
                Some(format!("{} was stopped (SIGSTOP or a debugger)", name(s)))
            } else {
                None
            }
        })
        .collect();
    let said: Vec<(u32, String)> = events
        .try_iter()
        .filter_map(|e| match e {
            Event::ServiceDown(pid, why) => Some((pid, why)),
            _ => None,
        })
        .collect();
    services
        .iter()
        .zip(now)
        .filter_map(|(s, now)| {
            let said = said.iter().find(|(pid, _)| *pid == s.pid);
            let why = said.map(|(_, why)| why.clone()).or(now)?;
            Some((s.clone(), why))
        })
        .collect()
}

/// Each service's result between two samples; `relayed`: the messages the driving roles sent
/// from Go on; `faults`: what went wrong with services before the end.
pub fn results(
    services: &[Service],
    from: &[Sample],
    to: &[Sample],
    relayed: u64,
    faults: &[(Service, String)],
) -> Vec<RoleResult> {
    services
        .iter()
        .zip(from.iter().zip(to))
        .map(|(s, (a, b))| {
            let mut r = RoleResult::missing(RoleId::one(RoleKind::BROKER), s.pid, String::new());
            r.error = None;
            match (a.usage, b.usage) {
                (Some((u0, c0)), Some((u1, c1))) => {
                    r.measured_ns = (b.at - a.at).as_nanos() as u64;
                    r.cpus_seen = c0.into_iter().chain(c1).collect();
                    r.cpus_seen.dedup();
                    r.cpu = CpuUsage {
                        user_ns: u1.user_ns.saturating_sub(u0.user_ns),
                        sys_ns: u1.sys_ns.saturating_sub(u0.sys_ns),
                        voluntary_switches: u1
                            .voluntary_switches
                            .saturating_sub(u0.voluntary_switches),
                        involuntary_switches: u1
                            .involuntary_switches
                            .saturating_sub(u0.involuntary_switches),
                        peak_rss_kib: u1.max_rss_kib,
                        // A broker's threads are all its own: in user and sys above.
                        other_threads_ns: 0,
                    };
                    r.counters = Counters {
                        relayed,
                        ..Counters::default()
                    };
                }
                (None, _) => r.error = Some(format!("{} was gone before the start", name(s))),
                (_, None) => r.error = Some(format!("{} was gone before the end", name(s))),
            }
            if let Some((_, f)) = faults.iter().find(|(f, _)| f.pid == s.pid) {
                r.error.get_or_insert(format!("{f} during the case"));
            }
            r
        })
        .collect()
}

/// What a run records of a namespace host a broker ran on: this machine, entered by a prefix.
pub fn on_host(h: &super::hosts::Host) -> crate::result::RoleHost {
    crate::result::RoleHost {
        name: h.name.clone(),
        launcher: h.launcher.clone(),
        address: h.address.clone().unwrap_or_default(),
        msgperf_version: env!("CARGO_PKG_VERSION").into(),
        build: super::control::build_id(),
        environment: super::environment::probe(),
        // This machine's own clock.
        clock: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(pid: u32) -> Service {
        Service {
            label: "broker".into(),
            program: "sleep".into(),
            pid,
            log: None,
        }
    }

    /// The watchdog's word on a service counts though the process looks well (as one it has
    /// just killed does for a moment); a running one it said nothing of has no fault; a stopped
    /// one is named as stopped, and one that is gone as dead.
    #[test]
    fn a_service_is_named_by_what_was_said_or_what_it_is() {
        let mut running = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut stopped = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        sys::kill(stopped.id(), libc::SIGSTOP);
        let end = Instant::now() + Duration::from_secs(10);
        while sys::process_state(stopped.id()) != Some('T') && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        // A dead one's log gives the cause.
        let log = std::env::temp_dir().join(format!("msgperf-test-{}.log", std::process::id()));
        std::fs::write(&log, "INFO started\nERROR Exiting: the disk is full\n").unwrap();
        let all = [
            service(running.id()),
            service(stopped.id()),
            Service {
                log: Some(log.clone()),
                ..service(u32::MAX)
            },
        ];
        let (tx, rx) = crossbeam_channel::unbounded();
        assert!(
            faults(&all[..1], &rx).is_empty(),
            "a running service it said nothing of"
        );
        let said = format!("{} was stopped for 3.0 s: hung", name(&all[0]));
        tx.send(Event::ServiceDown(all[0].pid, said.clone()))
            .unwrap();
        let found = faults(&all, &rx);
        let _ = (
            running.kill(),
            stopped.kill(),
            running.wait(),
            stopped.wait(),
        );
        let whys: Vec<&str> = found.iter().map(|(_, w)| w.as_str()).collect();
        assert_eq!(whys.len(), 3, "{whys:?}");
        assert_eq!(whys[0], said);
        assert!(
            whys[1].ends_with("was stopped (SIGSTOP or a debugger)"),
            "{whys:?}"
        );
        let _ = std::fs::remove_file(&log);
        assert!(
            whys[2].ends_with("died (its log says: ERROR Exiting: the disk is full)"),
            "{whys:?}"
        );
    }
}
