//! `spawn`: the cost of starting N OS threads or N tokio tasks (CML's thread-scaling test):
//! each spawn call, the delay from the call to the new thread's or task's first instruction,
//! the resident memory each one costs while all N live, and joining them.

use super::runtime::{
    check_fixed, check_no_transport, one_role, tokio_runtime, Gate, Runtime, RUNTIME, STACK,
};
use super::{param, Param, Params, RoleError, RoleRun, Sent, Topology, Workload, N};
use crate::measure::{clock, Metric, Recorder};
use crate::result::{CaseConfig, LatencyKind, RoleKind};
use crate::sys;
use crate::transport::Capabilities;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

pub struct Spawn;

const SPAWNER: RoleKind = RoleKind::new("spawner");

/// Time inside one call that starts a thread or task.
const SPAWN_CALL: Metric = Metric::new("spawn_call_ns", 0);
/// From a spawn call to the new thread's or task's first instruction.
const START_DELAY: Metric = Metric::new("start_delay_ns", 1);

const SPAWN_TO_RUN: LatencyKind = LatencyKind::new(
    "spawn to run",
    "a spawn call to the first instruction of what it started",
    false,
);

impl Workload for Spawn {
    fn name(&self) -> &'static str {
        "spawn"
    }
    fn about(&self) -> &'static str {
        "start N threads or tokio tasks (--n, --runtime): each spawn call, spawn to first run, memory per thread or task"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&N, &RUNTIME]
    }
    fn metrics(&self) -> &'static [Metric] {
        &[SPAWN_CALL, START_DELAY]
    }
    fn latency(&self, _: &CaseConfig) -> (LatencyKind, Metric) {
        (SPAWN_TO_RUN, START_DELAY)
    }
    fn default_transport(&self, _: &Params) -> Option<&'static str> {
        Some(crate::transport::NO_CHANNEL.name())
    }
    fn fixed_work(&self) -> bool {
        true
    }
    fn check(&self, case: &CaseConfig, _: &Capabilities) -> Result<(), String> {
        check_no_transport(case)?;
        check_fixed(case, "starts threads or tasks")
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        one_role(case, SPAWNER)
    }
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (case, rec) = (r.case, r.rec);
        let n = param::count(case, N.key).unwrap_or(1) as usize;
        let before = sys::resident_bytes().unwrap_or(0);
        rec.reset();
        let r = match Runtime::of(case) {
            Runtime::Threads => threads(n, case, rec, before),
            rt => tasks(rt, n, case, rec, before),
        };
        r?;
        Ok(Some(Sent {
            first_measured: 0,
            next: rec.counters.messages_sent,
        }))
    }
}

/// What every spawned unit shares: when each first ran, and how many have.
struct Starts {
    at: Vec<AtomicU64>,
    count: AtomicUsize,
}

impl Starts {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Starts {
            at: (0..n).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
        })
    }
    fn mark(&self, i: usize) {
        self.at[i].store(clock::now(), Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::SeqCst);
    }
}

/// Records what a spawning pass gave: spawn calls, start delays, memory per unit.
#[allow(clippy::too_many_arguments)]
fn record(
    rec: &mut Recorder,
    called: &[u64],
    calls: &[u64],
    starts: &Starts,
    loop_ns: u64,
    before: u64,
    live: u64,
    unit: &str,
) {
    for &c in calls {
        rec.record(SPAWN_CALL, c);
    }
    let delays = super::runtime::spans(called, &starts.at);
    for &d in &delays {
        rec.record(START_DELAY, d);
    }
    let c = &mut rec.counters;
    c.messages_sent = calls.len() as u64;
    c.messages_received = delays.len() as u64;
    let n = calls.len().max(1) as f64;
    rec.figure(
        &format!("spawns per second ({unit}s)"),
        "/s",
        n / (loop_ns.max(1) as f64 / 1e9),
    );
    rec.figure(
        &format!("resident memory per {unit}"),
        "B",
        live.saturating_sub(before) as f64 / n,
    );
}

fn threads(n: usize, case: &CaseConfig, rec: &mut Recorder, before: u64) -> Result<(), RoleError> {
    let gate = Arc::new(Gate::default());
    let starts = Starts::new(n);
    let mut handles = Vec::with_capacity(n);
    let (mut called, mut calls) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let first = clock::now();
    for i in 0..n {
        let (g, s) = (gate.clone(), starts.clone());
        let bound = case.timeout;
        let t0 = clock::now();
        let h = std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || {
                s.mark(i);
                g.pass(bound)
            });
        let t1 = clock::now();
        match h {
            Ok(h) => {
                handles.push(h);
                called.push(t0);
                calls.push(t1 - t0);
            }
            Err(e) => {
                rec.stopped_by(format!(
                    "thread {} of {n} could not start: {e} (threads-max or the process's task limit, ulimit -u)",
                    i + 1
                ));
                break;
            }
        }
    }
    let loop_ns = clock::now() - first;
    let all = gate.all_waiting(handles.len(), case.timeout);
    let live = sys::resident_bytes().unwrap_or(0);
    gate.open();
    let t0 = clock::now();
    let joined = handles.into_iter().filter_map(|h| h.join().ok()).count();
    let join_ns = clock::now() - t0;
    rec.mark_end(clock::now());
    record(
        rec, &called, &calls, &starts, loop_ns, before, live, "thread",
    );
    rec.figure(
        "join per thread",
        "ns",
        join_ns as f64 / joined.max(1) as f64,
    );
    if !all {
        return Err(RoleError::Work(format!(
            "only {} of {} threads ran within {:?}",
            starts.count.load(Ordering::SeqCst),
            calls.len(),
            case.timeout
        )));
    }
    Ok(())
}

fn tasks(
    rt: Runtime,
    n: usize,
    case: &CaseConfig,
    rec: &mut Recorder,
    before: u64,
) -> Result<(), RoleError> {
    let runtime = tokio_runtime(rt)?;
    let starts = Starts::new(n);
    let (tx, rx) = tokio::sync::watch::channel(false);
    let timeout = case.timeout;
    let (called, calls, loop_ns, handles) = runtime.block_on(async {
        let (mut called, mut calls) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut handles = Vec::with_capacity(n);
        let first = clock::now();
        for i in 0..n {
            let (s, mut rx) = (starts.clone(), rx.clone());
            let t0 = clock::now();
            let h = tokio::spawn(async move {
                s.mark(i);
                let _ = tokio::time::timeout(timeout, rx.wait_for(|open| *open)).await;
            });
            let t1 = clock::now();
            handles.push(h);
            called.push(t0);
            calls.push(t1 - t0);
        }
        (called, calls, clock::now() - first, handles)
    });
    let (all, live, join_ns) = runtime.block_on(async {
        // Every task has run once (a current-thread runtime runs them only now).
        let all = tokio::time::timeout(timeout, async {
            while starts.count.load(Ordering::SeqCst) < n {
                tokio::time::sleep(std::time::Duration::from_micros(200)).await;
            }
        })
        .await
        .is_ok();
        let live = sys::resident_bytes().unwrap_or(0);
        let _ = tx.send(true);
        let t0 = clock::now();
        for h in handles {
            let _ = h.await;
        }
        (all, live, clock::now() - t0)
    });
    rec.mark_end(clock::now());
    record(rec, &called, &calls, &starts, loop_ns, before, live, "task");
    rec.figure("join per task", "ns", join_ns as f64 / n.max(1) as f64);
    drop(runtime);
    if !all {
        return Err(RoleError::Work(format!(
            "only {} of {n} tasks ran within {timeout:?}",
            starts.count.load(Ordering::SeqCst)
        )));
    }
    Ok(())
}
