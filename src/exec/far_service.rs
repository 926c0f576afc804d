//! A broker placed on a host reached through a launcher (`--place broker=b` with
//! `--host b='ssh -T ...'`): a far msgperf sets the case up there ([`Order::Service`]) and
//! measures the broker on its own host, the only place its CPU can be read. Here it stands in
//! for the set-up's services: its faults come as frames, and it is told Go and Stop.

use super::control::{FromRole, Order, Report, ToRole};
use super::hosts::Host;
use super::runner::{Event, LaunchedRole, RoleHandle};
use super::ExecError;
use crate::deadline::{stop_requested, Deadline};
use crate::result::{RoleId, RoleKind, RoleResult};
use crate::transport::{ChannelSpec, Rendezvous, ServiceHost, SetupPlan};
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest a broker takes to boot (an Erlang VM, a JVM), besides the case's timeout.
const BOOTS_WITHIN: Duration = Duration::from_secs(90);

pub struct FarService {
    role: LaunchedRole,
    /// How errors name it: `the broker on host c`.
    name: String,
    /// Its processes as measured there, once its Result comes.
    results: Receiver<Vec<RoleResult>>,
    /// Raised when the case is over: the far side's end is then no fault.
    ending: Arc<AtomicBool>,
    /// What went wrong with it during the case, naming it.
    fault: Arc<Mutex<Option<String>>>,
}

impl FarService {
    /// Sets the case up on `host` and returns where the case meets. A death or a stop of what
    /// it started, or the loss of its host, is sent to `events` as the death of a service here
    /// would be.
    pub fn start(
        host: &Host,
        transport: &str,
        mut plan: SetupPlan,
        spec: &ChannelSpec,
        timeout: Duration,
        events: Sender<Event>,
    ) -> Result<(FarService, Rendezvous), ExecError> {
        let name = format!("the broker on host {}", host.name);
        let (tx, rx) = unbounded();
        let what = ["broker", "--transport", transport].map(String::from);
        let mut role = LaunchedRole::start(usize::MAX, host, &what, timeout, tx)?;
        // It listens on the address the runner reaches that host at.
        plan.service_at = Some(ServiceHost {
            prefix: Vec::new(),
            address: role.address.clone(),
        });
        role.send(&ToRole::Hello(Box::new(Order::Service {
            transport: transport.into(),
            plan,
            spec: spec.clone(),
        })))?;
        let failed = |role: &mut LaunchedRole, why: String| {
            role.kill();
            let last = role.finish(Duration::from_secs(1));
            let last = last.map(|l| format!(" ({l})")).unwrap_or_default();
            ExecError::Reported(format!("{name}: {why}{last}"))
        };
        let deadline = Deadline::after(BOOTS_WITHIN + timeout);
        let rendezvous = loop {
            if stop_requested() {
                return Err(failed(&mut role, "interrupted while it started".into()));
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Event::Frame(_, FromRole::SetUp { rendezvous, .. })) => break rendezvous,
                Ok(Event::Frame(_, FromRole::Error(e))) => return Err(failed(&mut role, e)),
                Ok(Event::Ended(_, why)) => {
                    let why = why.unwrap_or_else(|| "its host hung up".into());
                    return Err(failed(
                        &mut role,
                        format!("ended before it was set up: {why}"),
                    ));
                }
                Ok(Event::Hung(_, why)) => return Err(failed(&mut role, why)),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) if !deadline.expired() => {}
                Err(_) => {
                    let within = (BOOTS_WITHIN + timeout).as_secs_f64();
                    return Err(failed(
                        &mut role,
                        format!("was not set up within {within:.0} s"),
                    ));
                }
            }
        };
        let (results_tx, results) = unbounded();
        let ending = Arc::new(AtomicBool::new(false));
        let fault = Arc::new(Mutex::new(None));
        let (e, f, n) = (ending.clone(), fault.clone(), name.clone());
        let down = move |why: String| {
            let why = format!("{n}: {why}");
            f.lock().expect("not poisoned").get_or_insert(why.clone());
            let _ = events.send(Event::ServiceDown(0, why));
        };
        std::thread::Builder::new()
            .name("msgperf far broker".into())
            .spawn(move || {
                for event in rx {
                    match event {
                        Event::Frame(_, FromRole::Result(report)) => {
                            if let Report::Services(measured) = *report {
                                let _ = results_tx.send(measured);
                            }
                        }
                        Event::Frame(_, FromRole::Error(why)) => down(why),
                        Event::Ended(_, why) if !e.load(Ordering::SeqCst) => down(format!(
                            "its host's control channel ended{}",
                            why.map(|w| format!(" ({w})")).unwrap_or_default()
                        )),
                        Event::Hung(_, why) if !e.load(Ordering::SeqCst) => {
                            down(format!("its host {why}"))
                        }
                        _ => {}
                    }
                }
            })
            .map_err(|e| ExecError::start("could not start a thread of the runner", e))?;
        let far = FarService {
            role,
            name,
            results,
            ending,
            fault,
        };
        Ok((far, rendezvous))
    }

    /// The case starts: it is measured from now.
    pub fn go(&mut self) {
        let _ = self.role.send(&ToRole::Go);
    }

    /// What went wrong with it during the case, naming it.
    pub fn fault(&self) -> Option<String> {
        self.fault.lock().expect("not poisoned").clone()
    }

    /// Ends its measurement and the set-up there: its processes' results (each with its host,
    /// `relayed` the messages the driving roles sent), within `bound`.
    pub fn finish(&mut self, relayed: u64, bound: Duration) -> Vec<RoleResult> {
        let _ = self.role.send(&ToRole::Stop);
        let got = self.results.recv_timeout(bound);
        self.ending.store(true, Ordering::SeqCst);
        let _ = self.role.send(&ToRole::Finish);
        let ended = self.role.finish(Duration::from_secs(3));
        let host = self.role.host();
        let mut measured = got.unwrap_or_else(|_| {
            let why = self.fault().or(ended).unwrap_or_else(|| {
                format!("it sent no result within {:.1} s", bound.as_secs_f64())
            });
            vec![RoleResult::missing(
                RoleId::one(RoleKind::BROKER),
                0,
                format!("{}: {why}", self.name),
            )]
        });
        for r in &mut measured {
            r.counters.relayed = relayed;
            r.host = host.clone();
            if let Some(f) = self.fault() {
                r.error.get_or_insert(f);
            }
        }
        measured
    }
}
