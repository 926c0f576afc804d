//! `pairs`: N sender/receiver pairs, each on a channel of its own, every sender released at
//! one instant (CML's channel test: the senders wait on one time-out event). Each sender then
//! sends `--count` messages (10 by default); each receiver records every message's delay. The
//! senders are one role and the receivers another, each pair's ends on a thread of its own.

use super::message::{self, Outgoing, END, MEASURED};
use super::runtime::{check_fixed, one_role, tokio_runtime, Gate, Runtime, RUNTIME, STACK};
use super::{
    check_common, check_exchange, param, receive, Param, Params, RoleError, RoleRun, Sent,
    Topology, Workload, N,
};
use crate::measure::integrity::{Arrival, SeqTracker};
use crate::measure::{clock, Metric, Recorder};
use crate::result::{CaseConfig, Counters, LatencyKind, RoleId, RoleKind};
use crate::transport::{Capabilities, Endpoint, Exchange, SetupPlan, Side, TransportError};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct Pairs;

/// The transport that pairs on tokio tasks run over: tokio's mpsc, between tasks of one
/// runtime.
const TOKIO_CHANNEL: &str = "tokio-mpsc";

/// The transport that pairs on threads run over by default: two processes over unix sockets
/// (one process could not map 20000 threads).
const THREADS_CHANNEL: &str = "uds";

/// The senders' threads, and the receivers'.
const SENDERS: RoleKind = RoleKind::new("senders");
const RECEIVERS: RoleKind = RoleKind::new("receivers");
/// On a tokio runtime: every sender's and receiver's task, in one role.
const TASKS: RoleKind = RoleKind::new("tasks");

/// Messages per pair when --count is not given.
const DEFAULT_COUNT: u64 = 10;

impl Workload for Pairs {
    fn name(&self) -> &'static str {
        "pairs"
    }
    fn about(&self) -> &'static str {
        "N sender/receiver pairs on threads or tokio tasks, released at one instant (--n): delay per message, spread of first deliveries"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&N, &RUNTIME]
    }
    fn metrics(&self) -> &'static [Metric] {
        &Metric::MESSAGES
    }
    fn latency(&self, _: &CaseConfig) -> (LatencyKind, Metric) {
        (LatencyKind::ONE_WAY, Metric::ONE_WAY)
    }
    fn default_transport(&self, params: &Params) -> Option<&'static str> {
        match params.get(RUNTIME.key).map(String::as_str) {
            Some("threads") | None => Some(THREADS_CHANNEL),
            Some(_) => Some(TOKIO_CHANNEL),
        }
    }
    fn fixed_work(&self) -> bool {
        true
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        check_fixed(case, "sends --count messages per pair")?;
        check_exchange(
            case,
            caps,
            &[Exchange::Both, Exchange::OneWay],
            "sends one way",
        )?;
        check_common(case, caps)?;
        if case.transport == crate::transport::NO_CHANNEL.name() {
            return Err(format!(
                "pairs sends messages: give it a channel, e.g. -t {THREADS_CHANNEL} (see `msgperf transports`)"
            ));
        }
        let runtime = Runtime::of(case);
        if runtime != Runtime::Threads && case.transport != TOKIO_CHANNEL {
            return Err(format!(
                "pairs on {} tasks sends over tokio's own channel, not {}: give -t {TOKIO_CHANNEL}, or --runtime threads",
                runtime.label(),
                case.transport
            ));
        }
        Ok(())
    }
    fn topology(&self, case: &CaseConfig, _: &Capabilities) -> Topology {
        if Runtime::of(case) != Runtime::Threads {
            // Every task of every pair on one runtime, as CML's threads shared one.
            return one_role(case, TASKS);
        }
        let n = param::count(case, N.key).unwrap_or(1) as u32;
        let role = |kind, drives, ends: Vec<Side>, cpu| super::RoleSpec {
            id: RoleId::one(kind),
            ends,
            cpu,
            drives,
        };
        Topology {
            roles: vec![
                role(
                    SENDERS,
                    true,
                    (0..n).map(Side::Connect).collect(),
                    case.cpus.0,
                ),
                role(
                    RECEIVERS,
                    false,
                    (0..n).map(Side::Accept).collect(),
                    case.cpus.1,
                ),
            ],
            setup: SetupPlan {
                channels: n,
                ..SetupPlan::default()
            },
            fan_out: None,
        }
    }
    fn exchange(&self, _: &CaseConfig) -> Exchange {
        Exchange::OneWay
    }
    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (role, ends, case, rec, ctl) = (r.role, r.ends, r.case, r.rec, r.ctl);
        if Runtime::of(case) != Runtime::Threads {
            rec.reset();
            return run_tasks(case, rec, ctl.stop).map(|_| None);
        }
        thread_budget(ends.len(), case)?;
        // A socket per pair: as many descriptors as pairs, and some to spare.
        let _limit = crate::sys::FdLimit::raise_to(ends.len() as u64 * 2 + 256);
        rec.reset();
        if role.drives {
            send_all(ends, case, rec, ctl.stop).map(Some)
        } else {
            receive_all(ends, case, rec).map(|_| None)
        }
    }
}

/// Memory maps one thread costs: its stack and guard page, and its signal stack and guard.
const MAPS_PER_THREAD: u64 = 4;

/// Refuses, naming the limit, a count of threads this process cannot map (a thread that fails
/// to map its signal stack aborts rather than failing its spawn).
fn thread_budget(n: usize, case: &CaseConfig) -> Result<(), RoleError> {
    let in_process = if case.threads { 2 * n as u64 } else { n as u64 };
    let (Some(max), Some(used)) = (crate::sys::max_map_count(), crate::sys::map_count()) else {
        return Ok(());
    };
    let need = in_process * MAPS_PER_THREAD;
    if used + need + 1000 > max {
        return Err(RoleError::Work(format!(
            "{n} pairs start {in_process} threads in this process, about {need} memory maps, over vm.max_map_count {max}: run the roles as processes (e.g. -t {THREADS_CHANNEL}) or raise it (sysctl -w vm.max_map_count={})",
            (used + need) * 2
        )));
    }
    Ok(())
}

/// What one sender did: its first send, each send call's time, how many it sent.
struct Sender {
    first_ns: u64,
    calls: Vec<u64>,
    sent: u64,
    error: Option<TransportError>,
}

fn send_all(
    ends: &mut [Box<dyn Endpoint>],
    case: &CaseConfig,
    rec: &mut Recorder,
    stop: &AtomicBool,
) -> Result<Sent, RoleError> {
    let count = case.count.unwrap_or(DEFAULT_COUNT);
    let gate = Gate::default();
    let n = ends.len();
    let (released, senders) = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        for ep in ends.iter_mut() {
            let gate = &gate;
            let h = std::thread::Builder::new()
                .stack_size(STACK)
                .spawn_scoped(s, move || {
                    let mut out = Outgoing::new(case.size_bytes, case.checksum);
                    let mut me = Sender {
                        first_ns: 0,
                        calls: Vec::with_capacity(count as usize),
                        sent: 0,
                        error: None,
                    };
                    if !gate.pass(case.timeout) {
                        return me;
                    }
                    for seq in 0..count {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let t0 = clock::now();
                        if let Err(e) = ep.send(out.stamp(seq, t0, MEASURED, 0)) {
                            me.error = Some(e);
                            break;
                        }
                        let t1 = clock::now();
                        if seq == 0 {
                            me.first_ns = t0;
                        }
                        me.calls.push(t1 - t0);
                        me.sent += 1;
                    }
                    me
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    gate.open();
                    return Err(format!(
                        "sender thread {} of {n} could not start: {e}",
                        handles.len() + 1
                    ));
                }
            }
        }
        let all = gate.all_waiting(n, case.timeout);
        let released = clock::now();
        gate.open();
        let senders: Vec<Sender> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
        if !all {
            return Err(format!(
                "the {n} sender threads did not all start within {:?}",
                case.timeout
            ));
        }
        Ok((released, senders))
    })
    .map_err(RoleError::Work)?;
    sum_senders(senders, released, case, rec)?;
    Ok(Sent {
        first_measured: 0,
        next: count,
    })
}

/// Records what the senders did, released at `released`; the first sender's error, if any.
fn sum_senders(
    senders: Vec<Sender>,
    released: u64,
    case: &CaseConfig,
    rec: &mut Recorder,
) -> Result<(), RoleError> {
    let mut last_first = released;
    for s in &senders {
        for &c in &s.calls {
            rec.record(Metric::SEND_CALL, c);
        }
        rec.counters.messages_sent += s.sent;
        rec.counters.bytes_sent += s.sent * case.size_bytes as u64;
        last_first = last_first.max(s.first_ns);
    }
    rec.mark_end(clock::now());
    rec.figure(
        "senders all sending within",
        "us",
        (last_first - released) as f64 / 1e3,
    );
    match senders.into_iter().find_map(|s| s.error) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// What one receiver saw: when its first message came, each message's delay, its counters.
struct Receiver {
    first_ns: u64,
    last_ns: u64,
    delays: Vec<u64>,
    counters: Counters,
    error: Option<RoleError>,
    seqs: SeqTracker,
}

fn receive_all(
    ends: &mut [Box<dyn Endpoint>],
    case: &CaseConfig,
    rec: &mut Recorder,
) -> Result<(), RoleError> {
    let count = case.count.unwrap_or(DEFAULT_COUNT) as usize;
    let n = ends.len();
    let receivers = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        for ep in ends.iter_mut() {
            let h = std::thread::Builder::new()
                .stack_size(STACK)
                .spawn_scoped(s, move || receive_one(&mut **ep, case, count));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    return Err(format!(
                        "receiver thread {} of {n} could not start: {e}",
                        handles.len() + 1
                    ))
                }
            }
        }
        Ok(handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect::<Vec<Receiver>>())
    })
    .map_err(RoleError::Work)?;
    sum_receivers(receivers, rec)
}

/// Records what the receivers saw; the first receiver's error, if any.
fn sum_receivers(receivers: Vec<Receiver>, rec: &mut Recorder) -> Result<(), RoleError> {
    let (mut first, mut last_first, mut end) = (u64::MAX, 0, 0);
    let mut error = None;
    for r in receivers {
        for &d in &r.delays {
            rec.record(Metric::ONE_WAY, d);
        }
        rec.counters.add(&r.counters);
        if r.first_ns > 0 {
            first = first.min(r.first_ns);
            last_first = last_first.max(r.first_ns);
        }
        end = end.max(r.last_ns);
        error = error.or(r.error);
    }
    if first != u64::MAX {
        rec.figure(
            "first deliveries spread over",
            "us",
            (last_first - first) as f64 / 1e3,
        );
    }
    rec.mark_end(end);
    match error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn receive_one(ep: &mut dyn Endpoint, case: &CaseConfig, count: usize) -> Receiver {
    let mut me = Receiver::new(count);
    let mut buf = super::receive_buffer(case);
    let mut calls = Counters::default();
    loop {
        let n = match receive(ep, &mut buf, case, &mut calls) {
            Ok(n) => n,
            Err(e) => {
                me.error = Some(e.into());
                break;
            }
        };
        if !me.take(&buf[..n], clock::now(), case) {
            break;
        }
    }
    me.counters.read_calls = calls.read_calls;
    me
}

impl Receiver {
    fn new(count: usize) -> Receiver {
        Receiver {
            first_ns: 0,
            last_ns: 0,
            delays: Vec::with_capacity(count),
            counters: Counters::default(),
            error: None,
            seqs: SeqTracker::new(),
        }
    }

    /// Takes message `m`, received at `now`; false when the pair is done (END, or an
    /// integrity error under --strict).
    fn take(&mut self, m: &[u8], now: u64, case: &CaseConfig) -> bool {
        if message::flags(m) & END != 0 {
            self.seqs.end(message::seq(m), 0);
            let c = &self.seqs.counts;
            self.counters.lost += c.lost;
            self.counters.duplicated += c.duplicated;
            self.counters.reordered += c.reordered;
            return false;
        }
        if let Err(e) = message::verify(m, case.size_bytes, case.checksum) {
            if case.strict {
                self.error = Some(RoleError::Integrity(e));
                return false;
            }
            self.counters.corrupted += 1;
            return true;
        }
        self.counters.messages_received += 1;
        self.counters.bytes_received += m.len() as u64;
        if self.seqs.observe(message::seq(m)) == Arrival::Duplicate {
            return true;
        }
        if self.first_ns == 0 {
            self.first_ns = now;
        }
        self.last_ns = now;
        self.delays.push(now.saturating_sub(message::send_ns(m)));
        true
    }
}

/// What every task of a pair needs, owned (a task outlives no borrow).
struct Job {
    case: CaseConfig,
    count: u64,
    /// Set when the runner asks to stop.
    halt: AtomicBool,
    /// Senders waiting for the release.
    waiting: AtomicUsize,
}

/// Buffers in flight per pair, as for the in-process transports.
const POOL: usize = 8;

/// A pooled buffer and the length of the message in it.
type Msg = (Box<[u8]>, usize);

/// The pairs as tasks of one tokio runtime, over tokio's bounded mpsc (CML's lightweight
/// threads today): each message is copied into one of the pair's pooled buffers and checked
/// where it lands, and each sender ends with END as a sender thread's role does.
fn run_tasks(case: &CaseConfig, rec: &mut Recorder, stop: &AtomicBool) -> Result<(), RoleError> {
    let n = param::count(case, N.key).unwrap_or(1) as usize;
    let runtime = tokio_runtime(Runtime::of(case))?;
    let job = Arc::new(Job {
        case: case.clone(),
        count: case.count.unwrap_or(DEFAULT_COUNT),
        halt: AtomicBool::new(false),
        waiting: AtomicUsize::new(0),
    });
    let (release, released_rx) = tokio::sync::watch::channel(false);
    let (released, senders, receivers) = runtime.block_on(async {
        let mut receivers = Vec::with_capacity(n);
        let mut senders = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = tokio::sync::mpsc::channel::<Msg>(POOL);
            let (free_tx, free_rx) = tokio::sync::mpsc::channel::<Box<[u8]>>(POOL);
            for _ in 0..POOL {
                let _ = free_tx.try_send(vec![0u8; case.size_bytes].into_boxed_slice());
            }
            receivers.push(tokio::spawn(receive_task(rx, free_tx, job.clone())));
            senders.push(tokio::spawn(send_task(
                tx,
                free_rx,
                released_rx.clone(),
                job.clone(),
            )));
        }
        // Relays the runner's stop to the tasks, whose shared state must be owned.
        let relay = async {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            job.halt.store(true, Ordering::Relaxed);
            std::future::pending::<()>().await;
        };
        let work = async {
            let deadline = tokio::time::Instant::now() + case.timeout;
            while job.waiting.load(Ordering::SeqCst) < n && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            let released = clock::now();
            let _ = release.send(true);
            let mut s = Vec::with_capacity(n);
            for h in senders {
                s.extend(h.await.ok());
            }
            let mut r = Vec::with_capacity(n);
            for h in receivers {
                r.extend(h.await.ok());
            }
            (released, s, r)
        };
        tokio::select! {
            out = work => out,
            _ = relay => unreachable!("the relay never ends"),
        }
    });
    if senders.len() < n || receivers.len() < n {
        return Err(RoleError::Work(format!(
            "{} of {n} sender tasks and {} of {n} receiver tasks finished: the others panicked",
            senders.len(),
            receivers.len()
        )));
    }
    let sent = sum_senders(senders, released, case, rec);
    sum_receivers(receivers, rec)?;
    sent
}

async fn send_task(
    tx: tokio::sync::mpsc::Sender<Msg>,
    mut free: tokio::sync::mpsc::Receiver<Box<[u8]>>,
    mut release: tokio::sync::watch::Receiver<bool>,
    job: Arc<Job>,
) -> Sender {
    let case = &job.case;
    let mut out = Outgoing::new(case.size_bytes, case.checksum);
    let mut me = Sender {
        first_ns: 0,
        calls: Vec::with_capacity(job.count as usize),
        sent: 0,
        error: None,
    };
    job.waiting.fetch_add(1, Ordering::SeqCst);
    let wait = case.timeout;
    if !matches!(
        tokio::time::timeout(wait, release.wait_for(|&open| open)).await,
        Ok(Ok(_))
    ) {
        return me;
    }
    for seq in 0..job.count {
        if job.halt.load(Ordering::Relaxed) {
            break;
        }
        let t0 = clock::now();
        let m = out.stamp(seq, t0, MEASURED, 0);
        if let Err(e) = send_copy(&tx, &mut free, m, wait).await {
            me.error = Some(e);
            break;
        }
        let t1 = clock::now();
        if seq == 0 {
            me.first_ns = t0;
        }
        me.calls.push(t1 - t0);
        me.sent += 1;
    }
    let mut end = [0u8; message::HEADER];
    let end = message::end(&mut end, me.sent, 0);
    if me.error.is_none() {
        me.error = send_copy(&tx, &mut free, end, wait).await.err();
    }
    me
}

/// Sends a copy of `m` in a free buffer of the pair's pool.
async fn send_copy(
    tx: &tokio::sync::mpsc::Sender<Msg>,
    free: &mut tokio::sync::mpsc::Receiver<Box<[u8]>>,
    m: &[u8],
    wait: Duration,
) -> Result<(), TransportError> {
    let mut b = match tokio::time::timeout(wait, free.recv()).await {
        Ok(Some(b)) => b,
        Ok(None) => return Err(TransportError::PeerClosed),
        Err(_) => return Err(TransportError::Timeout(wait)),
    };
    if b.len() < m.len() {
        return Err(TransportError::TooLarge {
            len: m.len(),
            max: b.len(),
        });
    }
    b[..m.len()].copy_from_slice(m);
    tx.send((b, m.len()))
        .await
        .map_err(|_| TransportError::PeerClosed)
}

async fn receive_task(
    mut rx: tokio::sync::mpsc::Receiver<Msg>,
    give_back: tokio::sync::mpsc::Sender<Box<[u8]>>,
    job: Arc<Job>,
) -> Receiver {
    let case = &job.case;
    let mut me = Receiver::new(job.count as usize);
    loop {
        me.counters.read_calls += 1;
        let (b, len) = match tokio::time::timeout(case.timeout, rx.recv()).await {
            Ok(Some(m)) => m,
            Ok(None) => {
                me.error = Some(TransportError::PeerClosed.into());
                break;
            }
            Err(_) => {
                me.error = Some(TransportError::Timeout(case.timeout).into());
                break;
            }
        };
        let more = me.take(&b[..len], clock::now(), case);
        let _ = give_back.try_send(b);
        if !more {
            break;
        }
    }
    me
}
