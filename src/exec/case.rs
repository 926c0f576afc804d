//! One way to run a case: its transport set up once, every role of the workload's topology
//! started where the case says (threads, role processes, or a `msgperf serve` for the roles that
//! do not drive), driven through the control protocol together, every result collected in the
//! topology's order.

use super::control::{ControlAddr, Order, Report};
use super::drive::{drive, Bounds, Outcome, Started};
use super::far_service;
use super::hosts::{self, Hosts};
use super::role::{self, RoleEnv};
use super::runner::{Event, LaunchedRole, ProcessRole, RemoteRole, RoleHandle, ThreadRole};
use super::services;
use super::watchdog::{Seen, Watchdog};
use super::ExecError;
use crate::result::{CaseConfig, FanOut, RoleResult};
use crate::transport::{self, HostAddresses, Place, Side};
use crate::workload::{self, RoleSpec};
use std::time::Duration;

/// What running a case's roles gave.
pub struct CaseRun {
    pub roles: Vec<RoleResult>,
    pub error: Option<String>,
    pub interrupted: bool,
    pub fan_out: Option<FanOut>,
    /// Its roles stamped messages with the TSC they share (`measure::clock`).
    pub tsc_stamps: bool,
}

impl CaseRun {
    fn failed(error: ExecError) -> Self {
        CaseRun {
            roles: vec![],
            error: Some(error.to_string()),
            interrupted: false,
            fan_out: None,
            tsc_stamps: false,
        }
    }
}

/// Runs `case`'s roles; with `connect`, the roles that do not drive are at that `msgperf serve`;
/// roles placed on other hosts (`--place`) start through `hosts`' launchers.
pub fn run(case: &CaseConfig, connect: Option<&ControlAddr>, hosts: &Hosts) -> CaseRun {
    let t = transport::find(&case.transport).expect("cases are validated");
    let w = workload::find(&case.workload).expect("cases are validated");
    let caps = t.capabilities(&case.effective_options);
    let mut topology = w.topology(case, &caps);
    let placed: Vec<Option<&hosts::Host>> = topology
        .roles
        .iter_mut()
        .map(|r| {
            let (host, cpu) = placed_on(case, r)?;
            r.cpu = cpu.or(r.cpu);
            hosts.get(host)
        })
        .collect();
    let far = placed.iter().any(Option::is_some);
    // One host's roles, every one started here, stamp with the TSC they share.
    let stamps = (!far && connect.is_none())
        .then(crate::measure::clock::host_shared_tsc)
        .flatten();
    crate::measure::clock::use_shared_tsc(stamps);
    // The runner's descriptors and its role processes' (which inherit its limit), up to the
    // hard limit the plan checked; the limit before is restored when the case ends.
    let (runner, role) = topology.descriptors(&caps);
    let _descriptors = crate::sys::FdLimit::raise_to(runner.max(role));
    let threads = case.threads || !caps.cross_process;
    let watchable = Watchdog::can_watch();
    // Every role's peers are watched by this runner, so blocking waits need no timer.
    let watched = connect.is_none() && (threads || watchable) && !far;
    let spec = workload::channel_spec(w, case, watched);
    let mut plan = topology.setup.clone();
    plan.host = connect.map(ControlAddr::host);
    plan.cpu = case.cpus.1;
    // A broker placed on a namespace host starts there, listening on its address.
    let broker_host = case.place.get("broker").and_then(|list| {
        let at = list.first()?;
        let (name, cpu) = at.split_once(':').unwrap_or((at, ""));
        plan.cpu = cpu.parse().ok().or(plan.cpu);
        hosts.get(name)
    });
    // One on a host reached through a launcher starts there, under a msgperf of its own.
    let far_broker_host = broker_host.filter(|h| !h.in_bed);
    if let Some(h) = broker_host.filter(|h| h.in_bed) {
        plan.service_at = Some(transport::ServiceHost {
            prefix: h.prefix.clone(),
            address: h.address.clone().unwrap_or_else(|| "127.0.0.1".into()),
        });
    }
    // A broker here that roles on namespace hosts reach listens on this host's end of their
    // links, not on loopback.
    if plan.service_at.is_none() {
        if let Some(address) = placed
            .iter()
            .flatten()
            .find_map(|h| h.local_address.clone())
        {
            plan.service_at = Some(transport::ServiceHost {
                prefix: Vec::new(),
                address,
            });
        }
    }
    let (tx, events) = crossbeam_channel::unbounded::<Event>();
    let mut far_broker = None;
    let set_up = match far_broker_host {
        Some(h) => far_service::FarService::start(
            h,
            &case.transport,
            plan,
            &spec,
            case.timeout,
            tx.clone(),
        )
        .map(|(far, rendezvous)| {
            far_broker = Some(far);
            transport::Setup::new(rendezvous, ())
        }),
        None => t
            .setup(&plan, &spec)
            .map_err(|e| ExecError::transport(format!("could not set up `{}`", case.transport), e)),
    };
    let setup = match set_up {
        Ok(s) => s,
        Err(e) => return CaseRun::failed(e),
    };
    // Through a broker the roles' peer is a process msgperf does not drive: their waits keep
    // timers of their own.
    let watched = watched && setup.services.is_empty();
    let services = setup.services.clone();

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
                    Event::ServiceDown(s.pid, format!("{} {why}", services::name(s)))
                }
                (Some(s), Seen::Killed(signal)) if i >= n => Event::ServiceDown(
                    s.pid,
                    format!("{} was killed by signal {signal}", services::name(s)),
                ),
                (_, seen) => Event::of(i, seen),
            });
        })
    };
    for (k, s) in services.iter().enumerate() {
        watchdog.watch(n + k, s.pid);
    }
    let monitor = services::Monitor::start(&services, tx.clone());
    let mut started = Vec::new();
    // Per role on another host: where its ends bind, and its clock's offset from ours.
    let mut far_ends: Vec<Option<(String, i64)>> = vec![None; topology.roles.len()];
    for (i, r) in topology.roles.iter().enumerate() {
        let handle: Result<Box<dyn RoleHandle>, ExecError> = match (connect, placed[i]) {
            (_, Some(host)) => {
                LaunchedRole::start(i, host, &role_args(case, r), case.timeout, tx.clone()).map(
                    |h| {
                        far_ends[i] = Some((h.address.clone(), h.offset_ns));
                        Box::new(h) as _
                    },
                )
            }
            (Some(at), _) if !r.drives => {
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
                label: match placed[i] {
                    Some(h) => format!("{} on host {}", r.id, h.name),
                    None => r.id.to_string(),
                },
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
    // Across hosts every role's ends bind on its own host's address (ours: the one that
    // reaches the first far host), and a receiver puts its senders' times on its own clock.
    let local_address = far_ends.iter().zip(&placed).find_map(|(e, h)| {
        let (address, _) = e.as_ref()?;
        h.as_ref()?.local_end(address)
    });
    let mut every_address: Vec<String> = local_address.iter().cloned().collect();
    for (a, _) in far_ends.iter().flatten() {
        if !every_address.contains(a) {
            every_address.push(a.clone());
        }
    }
    let offsets: Vec<i64> = far_ends
        .iter()
        .map(|e| e.as_ref().map_or(0, |(_, o)| *o))
        .collect();
    let orders = topology
        .roles
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut rendezvous = setup.rendezvous.clone();
            let own = far_ends[i]
                .as_ref()
                .map(|(a, _)| a.clone())
                .or_else(|| local_address.clone());
            if let (true, Some(own)) = (far, own) {
                if let Place::Host(_) = &rendezvous.place {
                    rendezvous.place = Place::Host(own.clone());
                }
                rendezvous.hosts = Some(HostAddresses {
                    own,
                    all: every_address.clone(),
                });
            }
            Order::Case {
                case: case.clone(),
                role: r.clone(),
                rendezvous,
                watched,
                clock_shifts_ns: if far {
                    clock_shifts(&topology.roles, i, &offsets)
                } else {
                    vec![]
                },
                stamps,
            }
        })
        .collect();
    let bounds = Bounds {
        // Starting a process and opening its ends takes milliseconds; the timeout is the bound.
        phase: case.timeout,
        run: case.duration.map(|d| case.warmup + d + case.timeout * 3),
    };
    let (mut at_go, mut went) = (Vec::new(), false);
    let driven = drive(
        &mut started,
        orders,
        &events,
        Some(setup.rendezvous.clone()),
        bounds,
        &mut || {
            at_go = services::sample(&services);
            went = true;
            if let Some(far) = far_broker.as_mut() {
                far.go();
            }
        },
    );
    let at_end = services::sample(&services);
    let faults = services::faults(&services, &events);
    let pids: Vec<u32> = started.iter().map(|s| s.handle.pid()).collect();
    let mut far_hosts: Vec<_> = started.iter().map(|s| s.handle.host()).collect();
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
        .enumerate()
        .filter_map(|(i, ((spec, outcome), pid))| {
            let mut r = match outcome {
                Some(Outcome::Reported(report)) => match *report {
                    Report::Case(r) => r,
                    Report::Floor(_) | Report::Services(_) => return None,
                },
                Some(Outcome::Failed(why)) => RoleResult::missing(spec.id, pid, why),
                None => RoleResult::missing(
                    spec.id,
                    pid,
                    "it reported nothing: the case ended before it could".into(),
                ),
            };
            r.host = far_hosts.get_mut(i).and_then(Option::take);
            Some(r)
        })
        .collect();
    if went && (!services.is_empty() || far_broker.is_some()) {
        // Warm-up included, as the window is; a role that failed counted what it measured.
        let relayed = roles
            .iter()
            .map(|r| r.sent_total.max(r.counters.messages_sent))
            .sum();
        let mut brokers = services::results(&services, &at_go, &at_end, relayed, &faults);
        if let Some(h) = broker_host.filter(|h| h.in_bed) {
            for b in &mut brokers {
                b.host = Some(services::on_host(h));
            }
        }
        if let Some(far) = far_broker.as_mut() {
            brokers.extend(far.finish(relayed, case.timeout + Duration::from_secs(1)));
        }
        roles.extend(brokers);
    }
    let far_fault = far_broker.as_ref().and_then(|f| f.fault());
    drop(far_broker);
    // A dead broker is the cause of what the roles saw (they may notice before the runner).
    // The first fault, and the words that show the roles' error already names it.
    let first = faults
        .first()
        .map(|(s, f)| (services::name(s), f.clone()))
        .or_else(|| far_fault.map(|f| (f.clone(), f)));
    let error = match (first, driven.error) {
        (Some((name, f)), Some(e)) if !e.contains(&name) => Some(format!("{f} (the {e})")),
        (Some((_, f)), None) => Some(f),
        (_, e) => e,
    };
    CaseRun {
        roles,
        error,
        interrupted: driven.interrupted,
        fan_out: topology.fan_out,
        tsc_stamps: stamps.is_some(),
    }
}

/// Where `--place` puts role `r`: a host (`local`: the runner's), and a CPU there.
pub(super) fn placed_on<'a>(
    case: &'a CaseConfig,
    r: &RoleSpec,
) -> Option<(&'a str, Option<usize>)> {
    let list = case.place.get(r.id.kind.label())?;
    let at = match list.as_slice() {
        [one] => one,
        many => many.get(r.id.number.unwrap_or(1).checked_sub(1)? as usize)?,
    };
    let (host, cpu) = at.split_once(':').unwrap_or((at, ""));
    Some((host, cpu.parse().ok()))
}

/// Per end of role `i`: its clock's offset less that of the role sending to it there (a
/// channel's other end, a topic's writer), so that `send time + shift` is on its own clock.
fn clock_shifts(roles: &[RoleSpec], i: usize, offsets: &[i64]) -> Vec<i64> {
    roles[i]
        .ends
        .iter()
        .map(|end| {
            let sender = roles.iter().enumerate().find(|(j, r)| {
                *j != i
                    && r.ends.iter().any(|s| {
                        s.meeting() == end.meeting() && !matches!(s, Side::Subscribe { .. })
                    })
            });
            sender.map_or(0, |(j, _)| offsets[i] - offsets[j])
        })
        .collect()
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
