//! What the workloads that measure a runtime (`pairs`, `spawn`, `timers`) share: the runtime
//! that runs their concurrent parts, a gate that releases them at one instant, and their checks.

use super::{Param, ParamKind, RoleError, RoleSpec, Topology};
use crate::deadline::Deadline;
use crate::result::{CaseConfig, Placement, RoleId, RoleKind};
use crate::transport::SetupPlan;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// What runs a workload's concurrent parts (pairs, spawn, timers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// OS threads (std).
    #[default]
    Threads,
    /// Tasks on a tokio current-thread runtime: one thread runs them all.
    Tokio,
    /// Tasks on a tokio multi-thread runtime, one worker per allowed CPU.
    TokioMulti,
}

impl Runtime {
    const LABELS: [(&'static str, Runtime); 3] = [
        ("threads", Runtime::Threads),
        ("tokio", Runtime::Tokio),
        ("tokio-multi", Runtime::TokioMulti),
    ];

    pub fn label(self) -> &'static str {
        Self::LABELS
            .iter()
            .find(|(_, r)| *r == self)
            .map_or("threads", |(l, _)| l)
    }

    /// The case's `--runtime`.
    pub fn of(case: &CaseConfig) -> Runtime {
        let given = case.param(RUNTIME.key).unwrap_or("threads");
        Self::LABELS
            .iter()
            .find(|(l, _)| *l == given)
            .map_or(Runtime::Threads, |(_, r)| *r)
    }
}

/// `--runtime`: what runs the concurrent parts.
pub const RUNTIME: Param = Param {
    key: "runtime",
    value_name: "RUNTIME[,RUNTIME...]",
    default: Some("threads"),
    about: "what runs their concurrent parts: threads, tokio (a current-thread runtime) or tokio-multi; a list runs a case for each",
    kind: ParamKind::Choice(&["threads", "tokio", "tokio-multi"]),
    sweeps: true,
    always_shown: false,
};

/// Stack of a thread these workloads start: small, so that ten thousand fit; what it touches
/// is resident, the rest only reserved.
pub const STACK: usize = 64 << 10;

/// A tokio runtime of the case's kind: a current-thread one, or one worker per allowed CPU.
pub fn tokio_runtime(r: Runtime) -> Result<tokio::runtime::Runtime, RoleError> {
    let built = match r {
        Runtime::Tokio => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(crate::sys::allowed_cpus().len().max(1))
            .enable_all()
            .build(),
    };
    built.map_err(|cause| RoleError::Os {
        what: "could not start a tokio runtime",
        cause,
    })
}

/// Threads wait at the gate until it opens; all are released by one broadcast (CML's single
/// time-out event that enables every sender).
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    waiting: AtomicUsize,
}

impl Gate {
    /// Waits until the gate opens, at most `bound`; false if it did not.
    pub fn pass(&self, bound: Duration) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (open, _) = self
            .opened
            .wait_timeout_while(open, bound, |o| !*o)
            .unwrap_or_else(|e| e.into_inner());
        *open
    }

    /// Waits, at most `bound`, until `n` threads wait at the gate.
    pub fn all_waiting(&self, n: usize, bound: Duration) -> bool {
        let deadline = Deadline::after(bound);
        while self.waiting.load(Ordering::SeqCst) < n {
            if deadline.expired() {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        true
    }

    pub fn open(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.opened.notify_all();
    }
}

/// Refuses the message workloads' options that a runtime workload has no use for.
pub fn check_fixed(case: &CaseConfig, what: &str) -> Result<(), String> {
    super::check_two_roles(case)?;
    if case.rate_hz.is_some() {
        return Err(format!(
            "{} {what}: --rate does not apply; drop it",
            case.workload
        ));
    }
    Ok(())
}

/// Refuses a transport for a workload that measures a runtime and moves no message.
pub fn check_no_transport(case: &CaseConfig) -> Result<(), String> {
    if case.transport != crate::transport::NO_CHANNEL.name() {
        return Err(format!(
            "{} measures a runtime, not a transport: drop -t {} (pick threads or tasks with --runtime)",
            case.workload, case.transport
        ));
    }
    if case.count.is_some() {
        return Err(format!(
            "{} starts --n threads or tasks: drop --count",
            case.workload
        ));
    }
    Ok(())
}

/// The CPU a runtime workload's role is pinned to: one CPU for threads and a current-thread
/// runtime where the placement pins, none for a multi-thread runtime (its workers need CPUs).
pub fn role_cpu(case: &CaseConfig) -> Option<usize> {
    match (Runtime::of(case), case.placement) {
        (Runtime::TokioMulti, _) | (_, Placement::Any) => None,
        _ => case.cpus.0,
    }
}

/// One role, opening nothing.
pub fn one_role(case: &CaseConfig, kind: RoleKind) -> Topology {
    Topology {
        roles: vec![RoleSpec {
            id: RoleId::one(kind),
            ends: vec![],
            cpu: role_cpu(case),
            drives: true,
        }],
        setup: SetupPlan::default(),
        fan_out: None,
    }
}

/// Nanoseconds from a per-item table of start and end times, for the items that have both.
pub fn spans(from: &[u64], to: &[std::sync::atomic::AtomicU64]) -> Vec<u64> {
    from.iter()
        .zip(to)
        .filter_map(|(&a, b)| {
            let b = b.load(Ordering::Relaxed);
            (a > 0 && b > 0).then(|| b.saturating_sub(a))
        })
        .collect()
}
