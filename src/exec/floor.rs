//! A transport's plain loop, run as two roles as the case's own roles run: two threads, or two
//! role processes that inherit what the loop shares (a descriptor pair, a memory file) at their
//! start. No process forks a copy of this multi-threaded one.

use super::control::{Order, Report};
use super::drive::{drive, Bounds, Outcome, Started};
use super::role::{self, RoleEnv};
use super::runner::{Event, ProcessRole, RoleHandle, ThreadRole};
use super::watchdog::Watchdog;
use super::ExecError;
use crate::result::FloorKind;
use crate::transport::{FloorFigure, FloorLoop, FloorRoles, Transport};
use std::time::Duration;

/// How long a floor's loop may run past its own length before it counts as hung.
const SLACK: Duration = Duration::from_secs(10);

/// Measures `t`'s plain loop of `kind` at `size`, its sides in threads or processes.
pub fn measure(
    t: &dyn Transport,
    kind: FloorKind,
    size: usize,
    roles: &FloorRoles,
    threads: bool,
) -> Result<FloorFigure, ExecError> {
    let f = t
        .floor()
        .ok_or_else(|| ExecError::Refused(format!("transport `{}` has no floor", t.name())))?;
    let l = match kind {
        FloorKind::RoundTrip => FloorLoop::PingPong,
        FloorKind::Stream => FloorLoop::Stream,
    };
    let sides = f
        .make(l, size, roles)
        .map_err(|e| ExecError::os(format!("could not make the floor of `{}`", t.name()), e))?;
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
    // Each side on the CPU of the case's role that does its work: a ping-pong's measuring side
    // is the initiator (the driving role's CPU), a stream's is the reader (the other's).
    let (measuring, other) = match kind {
        FloorKind::RoundTrip => (roles.cpus.0, roles.cpus.1),
        FloorKind::Stream => (roles.cpus.1, roles.cpus.0),
    };
    for (side, ends) in sides.into_iter().enumerate() {
        let cpu = if side == 0 { measuring } else { other };
        let handle: Box<dyn RoleHandle> = if threads {
            Box::new(ThreadRole::start(
                side,
                format!("msgperf floor {side}"),
                tx.clone(),
                move |mut conn, stop| {
                    let env = RoleEnv {
                        stop: &stop,
                        floor_ends: Some(ends),
                        pin: None,
                        admit: None,
                    };
                    role::serve(&mut conn, env).map(|_| ())
                },
            )?)
        } else {
            let args = [
                "floor".to_string(),
                side.to_string(),
                "--transport".into(),
                t.name().into(),
            ];
            let h = ProcessRole::start(side, &args, Some(ends), tx.clone())?;
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
        orders.push(Order::Floor {
            transport: t.name().into(),
            kind: l,
            side,
            size,
            roles: roles.clone(),
            cpu,
        });
    }
    // A side that starts a broker may wait for it to boot, beyond --timeout.
    let startup = t.capabilities(&roles.options).startup;
    let bounds = Bounds {
        phase: SLACK,
        run: Some(roles.warmup + roles.duration + roles.timeout * 3 + startup),
    };
    let mut driven = drive(&mut started, orders, &events, None, bounds, &mut || {});
    let measured = match driven.outcomes.swap_remove(0) {
        Some(Outcome::Reported(report)) => match *report {
            Report::Floor(fig) => fig,
            Report::Case(_) => None,
        },
        _ => None,
    };
    match (measured, driven.error) {
        (Some(fig), None) => Ok(fig),
        (_, e) => Err(ExecError::Reported(format!(
            "the floor of `{}` could not be measured: {}",
            t.name(),
            e.as_deref()
                .unwrap_or("its measuring side reported nothing")
        ))),
    }
}
