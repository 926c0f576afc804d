//! A transport's plain loop, run as two roles as the case's own roles run: two threads, or two
//! role processes that inherit what the loop shares (a descriptor pair, a memory file) at their
//! start. No process forks a copy of this multi-threaded one. Across hosts a side runs where
//! the case's role does, through its host's launcher, and each side makes its own end at its
//! host's address, told the other's through the runner as a case's roles are.

use super::control::{Order, Report};
use super::drive::{drive, Bounds, Outcome, Started};
use super::hosts::Host;
use super::role::{self, RoleEnv};
use super::runner::{Event, LaunchedRole, ProcessRole, RoleHandle, ThreadRole};
use super::watchdog::Watchdog;
use super::ExecError;
use crate::result::FloorKind;
use crate::transport::{
    FloorEnds, FloorFigure, FloorLoop, FloorRoles, Place, Rendezvous, Transport,
};
use std::time::Duration;

/// How long a floor's loop may run past its own length before it counts as hung.
const SLACK: Duration = Duration::from_secs(10);

/// Measures `t`'s plain loop of `kind` at `size`, its sides in threads or processes here, or
/// on `hosts` (side 0's, side 1's; None: here). Returns the figure, and across hosts the
/// addresses the sides' ends were at.
pub fn measure(
    t: &dyn Transport,
    kind: FloorKind,
    size: usize,
    roles: &FloorRoles,
    threads: bool,
    hosts: [Option<&Host>; 2],
) -> Result<(FloorFigure, Option<[String; 2]>), ExecError> {
    let f = t
        .floor()
        .ok_or_else(|| ExecError::Refused(format!("transport `{}` has no floor", t.name())))?;
    let l = match kind {
        FloorKind::RoundTrip => FloorLoop::PingPong,
        FloorKind::Stream => FloorLoop::Stream,
    };
    let across = hosts.iter().any(Option::is_some);
    let sides: Vec<Option<FloorEnds>> = if across {
        vec![None, None]
    } else {
        let made = f
            .make(l, size, roles)
            .map_err(|e| ExecError::os(format!("could not make the floor of `{}`", t.name()), e))?;
        made.into_iter().map(Some).collect()
    };
    let mut roles = roles.clone();
    let mut addresses: [Option<String>; 2] = [None, None];
    let (tx, events) = crossbeam_channel::unbounded::<Event>();
    let mut started = Vec::new();
    let mut orders = Vec::new();
    let watchdog = {
        let tx = tx.clone();
        Watchdog::arm(
            Watchdog::can_watch().then_some(roles.duration + SLACK),
            move |i, seen| {
                let _ = tx.send(Event::of(i, seen));
            },
        )
    };
    for (side, ends) in sides.into_iter().enumerate() {
        let cpu = roles.side_cpu(l, side);
        let args = [
            "floor".to_string(),
            side.to_string(),
            "--transport".into(),
            t.name().into(),
        ];
        let handle: Box<dyn RoleHandle> = if let Some(host) = hosts[side] {
            let h = LaunchedRole::start(side, host, &args, roles.timeout, tx.clone())?;
            addresses[side] = Some(h.address.clone());
            Box::new(h)
        } else if threads {
            Box::new(ThreadRole::start(
                side,
                format!("msgperf floor {side}"),
                tx.clone(),
                move |mut conn, stop| {
                    let env = RoleEnv {
                        stop: &stop,
                        floor_ends: ends,
                        pin: None,
                        admit: None,
                    };
                    role::serve(&mut conn, env).map(|_| ())
                },
            )?)
        } else {
            let h = ProcessRole::start(side, &args, ends, tx.clone())?;
            watchdog.watch(side, h.pid());
            Box::new(h)
        };
        // Both sides stop early at Ctrl-C: the measuring one ends its loop, the writing one
        // stops writing.
        started.push(Started {
            label: format!("floor's side {side}"),
            drives: true,
            handle,
        });
        orders.push((side, cpu));
    }
    // A side here makes its end at this host's end of the link to the first far side.
    let between = if across {
        let far = addresses
            .iter()
            .zip(hosts)
            .find_map(|(a, h)| Some((a.clone()?, h?)));
        let here = far.as_ref().and_then(|(a, h)| h.local_end(a));
        let at = |a: &Option<String>| a.clone().or_else(|| here.clone());
        match (at(&addresses[0]), at(&addresses[1])) {
            (Some(a), Some(b)) => Some([a, b]),
            _ => {
                return Err(ExecError::Refused(format!(
                    "the floor of `{}`: this host has no address towards the far one",
                    t.name()
                )))
            }
        }
    } else {
        None
    };
    roles.between = between.clone();
    let orders = orders
        .into_iter()
        .map(|(side, cpu)| Order::Floor {
            transport: t.name().into(),
            kind: l,
            side,
            size,
            roles: roles.clone(),
            cpu,
        })
        .collect();
    // Across hosts each side says where its end is bound, and is told the other's.
    let rendezvous = across.then(|| Rendezvous::new(t.name(), Place::Host(String::new())));
    // A side that starts a broker may wait for it to boot, beyond --timeout.
    let startup = t.capabilities(&roles.options).startup;
    let bounds = Bounds {
        phase: SLACK,
        run: Some(roles.warmup + roles.duration + roles.timeout * 3 + startup),
    };
    let mut driven = drive(
        &mut started,
        orders,
        &events,
        rendezvous,
        bounds,
        &mut || {},
    );
    let measured = match driven.outcomes.swap_remove(0) {
        Some(Outcome::Reported(report)) => match *report {
            Report::Floor(fig) => fig,
            Report::Case(_) | Report::Services(_) => None,
        },
        _ => None,
    };
    match (measured, driven.error) {
        (Some(fig), None) => Ok((fig, between)),
        (_, e) => Err(ExecError::Reported(format!(
            "the floor of `{}` could not be measured: {}",
            t.name(),
            e.as_deref()
                .unwrap_or("its measuring side reported nothing")
        ))),
    }
}
