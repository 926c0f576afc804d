//! `timers`: N waiters until one shared deadline, then N waiters each until a deadline of its
//! own (CML's atTimeEvt against timeOutEvt): how late each wakes after its deadline, the cost
//! of registering a wait with the runtime's timer, and the spread of the wake-ups.

use super::runtime::{
    check_fixed, check_no_transport, one_role, tokio_runtime, Gate, Runtime, RUNTIME, STACK,
};
use super::{param, Param, Params, RoleError, RoleRun, Sent, Topology, Workload, N};
use crate::measure::{clock, Metric, Recorder};
use crate::result::{CaseConfig, LatencyKind, RoleKind};
use crate::transport::Capabilities;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct Timers;

const TIMEKEEPER: RoleKind = RoleKind::new("timekeeper");

/// How late a waiter woke after the deadline all share.
const TIMER_LATE: Metric = Metric::new("timer_late_ns", 0);
/// How late a waiter woke after a deadline of its own.
const TIMER_LATE_DISTINCT: Metric = Metric::new("timer_late_distinct_ns", 1);
/// The cost of registering one wait with the runtime's timer.
const TIMER_REGISTER: Metric = Metric::new("timer_register_ns", 2);

const AFTER_DEADLINE: LatencyKind =
    LatencyKind::new("after deadline", "how late a waiter woke", false);

impl Workload for Timers {
    fn name(&self) -> &'static str {
        "timers"
    }
    fn about(&self) -> &'static str {
        "N waiters until one shared deadline, then until N distinct ones (--n, --runtime): lateness, registration cost"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&N, &RUNTIME]
    }
    fn metrics(&self) -> &'static [Metric] {
        &[TIMER_LATE, TIMER_LATE_DISTINCT, TIMER_REGISTER]
    }
    fn latency(&self, _: &CaseConfig) -> (LatencyKind, Metric) {
        (AFTER_DEADLINE, TIMER_LATE)
    }
    fn default_transport(&self, _: &Params) -> Option<&'static str> {
        Some(crate::transport::NO_CHANNEL.name())
    }
    fn fixed_work(&self) -> bool {
        true
    }
    fn check(&self, case: &CaseConfig, _: &Capabilities) -> Result<(), String> {
        check_no_transport(case)?;
        check_fixed(case, "starts waiters")
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        one_role(case, TIMEKEEPER)
    }
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (case, rec) = (r.case, r.rec);
        let n = param::count(case, N.key).unwrap_or(1) as usize;
        rec.reset();
        let mut woke = 0;
        for shared in [true, false] {
            let pass = match Runtime::of(case) {
                Runtime::Threads => threads(n, shared, case.timeout),
                rt => tasks(rt, n, shared, case.timeout),
            }?;
            woke += pass.record(rec, shared);
        }
        rec.counters.messages_sent = 2 * n as u64;
        rec.counters.messages_received = woke;
        rec.mark_end(clock::now());
        Ok(Some(Sent {
            first_measured: 0,
            next: 2 * n as u64,
        }))
    }
}

/// How long after the release the deadlines lie: long enough for every waiter to register
/// first, on two CPUs, even for ten thousand of them.
fn lead(n: usize) -> u64 {
    50_000_000 + n as u64 * 20_000
}

/// One pass: each waiter's deadline, when it registered and woke, and what registering cost.
struct Pass {
    deadline: Vec<AtomicU64>,
    registered: Vec<AtomicU64>,
    woke: Vec<AtomicU64>,
    register_ns: Vec<AtomicU64>,
}

impl Pass {
    fn new(n: usize) -> Arc<Self> {
        let v = || (0..n).map(|_| AtomicU64::new(0)).collect();
        Arc::new(Pass {
            deadline: v(),
            registered: v(),
            woke: v(),
            register_ns: v(),
        })
    }

    /// Records lateness, registration and the spread; returns how many woke.
    fn record(&self, rec: &mut Recorder, shared: bool) -> u64 {
        let get =
            |v: &[AtomicU64]| -> Vec<u64> { v.iter().map(|a| a.load(Ordering::Relaxed)).collect() };
        let (deadline, registered, woke) =
            (get(&self.deadline), get(&self.registered), get(&self.woke));
        let m = if shared {
            TIMER_LATE
        } else {
            TIMER_LATE_DISTINCT
        };
        let mut order = Vec::new();
        let mut after = 0;
        for i in 0..woke.len() {
            if woke[i] == 0 {
                continue;
            }
            rec.record(m, woke[i].saturating_sub(deadline[i]));
            if registered[i] > deadline[i] {
                after += 1;
            }
            order.push(i);
        }
        for r in get(&self.register_ns).into_iter().filter(|&r| r > 0) {
            rec.record(TIMER_REGISTER, r);
        }
        let which = if shared {
            "shared deadline"
        } else {
            "distinct deadlines"
        };
        let spread = match (
            order.iter().map(|&i| woke[i]).min(),
            order.iter().map(|&i| woke[i]).max(),
        ) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        };
        rec.figure(
            &format!("{which}: wake-ups spread over"),
            "us",
            spread as f64 / 1e3,
        );
        order.sort_by_key(|&i| woke[i]);
        let out_of_order = order
            .windows(2)
            .filter(|w| deadline[w[1]] < deadline[w[0]])
            .count();
        if !shared {
            rec.figure(
                &format!("{which}: woke before an earlier deadline"),
                "waiters",
                out_of_order as f64,
            );
        }
        rec.figure(
            &format!("{which}: registered after the deadline"),
            "waiters",
            after as f64,
        );
        order.len() as u64
    }
}

fn threads(n: usize, shared: bool, timeout: Duration) -> Result<Arc<Pass>, RoleError> {
    let pass = Pass::new(n);
    let gate = Arc::new(Gate::default());
    let base = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let (p, g, b) = (pass.clone(), gate.clone(), base.clone());
        let h = std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || {
                if !g.pass(timeout) {
                    return;
                }
                let now = clock::now();
                let d = if shared {
                    b.load(Ordering::SeqCst)
                } else {
                    now + lead(n)
                };
                p.registered[i].store(now, Ordering::Relaxed);
                p.deadline[i].store(d, Ordering::Relaxed);
                crate::sys::sleep_until_ns(d);
                p.woke[i].store(clock::now(), Ordering::Relaxed);
            })
            .map_err(|e| {
                // The ones started go at once, not at their bound.
                gate.open();
                RoleError::Work(format!(
                    "waiter thread {} of {n} could not start: {e}",
                    i + 1
                ))
            })?;
        handles.push(h);
    }
    if !gate.all_waiting(n, timeout) {
        gate.open();
        return Err(RoleError::Work(format!(
            "the {n} waiter threads did not all start within {timeout:?}"
        )));
    }
    base.store(clock::now() + lead(n), Ordering::SeqCst);
    gate.open();
    for h in handles {
        let _ = h.join();
    }
    Ok(pass)
}

fn tasks(rt: Runtime, n: usize, shared: bool, timeout: Duration) -> Result<Arc<Pass>, RoleError> {
    let runtime = tokio_runtime(rt)?;
    let pass = Pass::new(n);
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    runtime.block_on(async {
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            let (p, mut rx) = (pass.clone(), rx.clone());
            handles.push(tokio::spawn(async move {
                let base = match tokio::time::timeout(timeout, rx.wait_for(|b| *b > 0)).await {
                    Ok(Ok(base)) => *base,
                    _ => return,
                };
                let t0 = clock::now();
                let d = if shared { base } else { t0 + lead(n) };
                let at = tokio::time::Instant::now() + Duration::from_nanos(d.saturating_sub(t0));
                let mut sleep = std::pin::pin!(tokio::time::sleep_until(at));
                // The first poll registers the wait with the runtime's timer.
                let _ = std::future::poll_fn(|cx| {
                    std::task::Poll::Ready(std::future::Future::poll(sleep.as_mut(), cx))
                })
                .await;
                p.register_ns[i].store((clock::now() - t0).max(1), Ordering::Relaxed);
                p.registered[i].store(t0, Ordering::Relaxed);
                p.deadline[i].store(d, Ordering::Relaxed);
                sleep.await;
                p.woke[i].store(clock::now(), Ordering::Relaxed);
            }));
        }
        // Every task waits on the release before the deadlines are set.
        tokio::task::yield_now().await;
        let _ = tx.send(clock::now() + lead(n));
        for h in handles {
            let _ = h.await;
        }
    });
    Ok(pass)
}
