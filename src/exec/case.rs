//! One way to run a case: its transport set up once, every role of the workload's topology
//! started where the case says (threads, role processes, or a `msgperf serve` for the roles that
//! do not drive), driven through the control protocol together, every result collected in the
//! topology's order.

use super::control::{ControlAddr, Order, Report};
use super::drive::{drive, Bounds, Outcome, Started};
use super::role::{self, RoleEnv};
use super::runner::{Event, ProcessRole, RemoteRole, RoleHandle, ThreadRole};
use super::services;
use super::watchdog::{Seen, Watchdog};
use super::ExecError;
use crate::result::{CaseConfig, FanOut, RoleResult, Wait};
use crate::transport::{self, ChannelSpec};
use crate::workload::{self, message, RoleSpec};
use std::time::Duration;

/// What running a case's roles gave.
pub struct CaseRun {
    pub roles: Vec<RoleResult>,
    pub error: Option<String>,
    pub interrupted: bool,
    pub fan_out: Option<FanOut>,
}

impl CaseRun {
    fn failed(error: ExecError) -> Self {
        CaseRun {
            roles: vec![],
            error: Some(error.to_string()),
            interrupted: false,
            fan_out: None,
        }
    }
}

/// Runs `case`'s roles; with `connect`, the roles that do not drive are at that `msgperf serve`.
pub fn run(case: &CaseConfig, connect: Option<&ControlAddr>) -> CaseRun {
    let t = transport::find(&case.transport).expect("cases are validated");
    let w = workload::find(&case.workload).expect("cases are validated");
    let caps = t.capabilities(&case.effective_options);
    let topology = w.topology(case, &caps);
    // The runner's descriptors and its role processes' (which inherit its limit), up to the
    // hard limit the plan checked; the limit before is restored when the case ends.
    let (runner, role) = topology.descriptors();
    let _descriptors = crate::sys::FdLimit::raise_to(runner.max(role));
    let threads = case.threads || !caps.cross_process;
    let watchable = Watchdog::can_watch();
    // Every role's peers are watched by this runner, so blocking waits need no timer.
    let watched = connect.is_none() && (threads || watchable);
    let spec = ChannelSpec {
        options: case.effective_options.clone(),
        timeout: case.timeout,
        poll: case.wait == Wait::Poll,
        max_message: case.size_bytes.max(message::HEADER),
        watched,
        exchange: w.exchange(case),
    };
    let mut plan = topology.setup.clone();
    plan.host = connect.map(ControlAddr::host);
    plan.cpu = case.cpus.1;
    let setup = match t.setup(&plan, &spec) {
        Ok(s) => s,
        Err(e) => {
            return CaseRun::failed(ExecError::transport(
                format!("could not set up `{}`", case.transport),
                e,
            ))
        }
    };
    // Through a broker the roles' peer is a process msgperf does not drive: their waits keep
    // timers of their own.
    let watched = watched && setup.services.is_empty();
    let services = setup.services.clone();

    let (tx, events) = crossbeam_channel::unbounded::<Event>();
    // Where waits have timers of their own (a peer at a `msgperf serve`), the watchdog is only
    // the backstop and must not race them; but a stopped broker is named as soon as the roles'
    // waits on it could time out.
    let stall = if watched || !services.is_empty() {
        case.timeout
    } else {
        case.timeout * 2 + Duration::from_secs(1)
    };
    let n = topology.roles.len();
    let watchdog = {
        let tx = tx.clone();
        let services = services.clone();
        Watchdog::arm(watchable.then_some(stall), move |i, seen| {
            let _ = tx.send(match (services.get(i.wrapping_sub(n)), seen) {
                (Some(s), Seen::Hung(why)) if i >= n => {
                    Event::ServiceDown(format!("{} {why}", services::name(s)))
                }
                (Some(s), Seen::Killed(signal)) if i >= n => Event::ServiceDown(format!(
                    "{} was killed by signal {signal}",
                    services::name(s)
                )),
                (_, seen) => Event::of(i, seen),
            });
        })
    };
    for (k, s) in services.iter().enumerate() {
        watchdog.watch(n + k, s.pid);
    }
    let monitor = services::Monitor::start(&services, tx.clone());
    let mut started = Vec::new();
    for (i, r) in topology.roles.iter().enumerate() {
        let handle: Result<Box<dyn RoleHandle>, ExecError> = match connect {
            Some(at) if !r.drives => {
                RemoteRole::start(i, at, case.timeout, tx.clone()).map(|h| Box::new(h) as _)
            }
            _ if threads => ThreadRole::start(
                i,
                format!("msgperf {}", r.id),
                tx.clone(),
                |mut conn, stop| {
                    let env = RoleEnv {
                        stop: &stop,
                        floor_ends: None,
                        pin: None,
                        admit: None,
                    };
                    role::serve(&mut conn, env).map(|_| ())
                },
            )
            .map(|h| Box::new(h) as _),
            _ => ProcessRole::start(i, &role_args(case, r), None, tx.clone()).map(|h| {
                watchdog.watch(i, h.pid());
                Box::new(h) as _
            }),
        };
        match handle {
            Ok(handle) => started.push(Started {
                label: r.id.to_string(),
                drives: r.drives,
                handle,
            }),
            Err(e) => {
                return CaseRun::failed(ExecError::Reported(format!(
                    "could not start the {}: {e}",
                    r.id
                )))
            }
        }
    }
    let orders = topology
        .roles
        .iter()
        .map(|r| Order::Case {
            case: case.clone(),
            role: r.clone(),
            rendezvous: setup.rendezvous.clone(),
            watched,
        })
        .collect();
    let bounds = Bounds {
        // Starting a process and opening its ends takes milliseconds; the timeout is the bound.
        phase: case.timeout,
        run: case.duration.map(|d| case.warmup + d + case.timeout * 3),
    };
    let mut at_go = Vec::new();
    let driven = drive(
        &mut started,
        orders,
        &events,
        Some(setup.rendezvous.clone()),
        bounds,
        &mut || at_go = services::sample(&services),
    );
    let at_end = services::sample(&services);
    let faults = services::faults(&services);
    let pids: Vec<u32> = started.iter().map(|s| s.handle.pid()).collect();
    drop(monitor);
    drop(watchdog);
    drop(started);
    drop(setup);
    // A role that never reported appears with what is known of it, so every role is listed.
    let mut roles: Vec<RoleResult> = topology
        .roles
        .iter()
        .zip(driven.outcomes)
        .zip(pids)
        .filter_map(|((spec, outcome), pid)| match outcome {
            Some(Outcome::Reported(report)) => match *report {
                Report::Case(r) => Some(r),
                Report::Floor(_) => None,
            },
            Some(Outcome::Failed(why)) => Some(RoleResult::missing(spec.id, pid, why)),
            None => Some(RoleResult::missing(
                spec.id,
                pid,
                "it reported nothing: the case ended before it could".into(),
            )),
        })
        .collect();
    if !at_go.is_empty() {
        // Warm-up included, as the window is; a role that failed counted what it measured.
        let relayed = roles
            .iter()
            .map(|r| r.sent_total.max(r.counters.messages_sent))
            .sum();
        roles.extend(services::results(
            &services, &at_go, &at_end, relayed, &faults,
        ));
    }
    // A dead broker is the cause of what the roles saw (they may notice before the runner).
    let error = match (faults.first(), driven.error) {
        (Some((s, f)), Some(e)) if !e.contains(&services::name(s)) => {
            Some(format!("{} {f} (the {e})", services::name(s)))
        }
        (Some((s, f)), None) => Some(format!("{} {f}", services::name(s))),
        (_, e) => e,
    };
    CaseRun {
        roles,
        error,
        interrupted: driven.interrupted,
        fan_out: topology.fan_out,
    }
}

/// A role process's command line: what `ps` shows (`msgperf role subscriber 2 ...`). The
/// process learns its order over its control socket.
fn role_args(case: &CaseConfig, r: &RoleSpec) -> Vec<String> {
    let mut args = vec![r.id.kind.label().to_string()];
    args.extend(r.id.number.map(|n| n.to_string()));
    args.extend([
        "--workload".into(),
        case.workload.clone(),
        "--transport".into(),
        case.transport.clone(),
    ]);
    args
}
