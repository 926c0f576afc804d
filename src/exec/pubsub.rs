//! Publish/subscribe: P publishers and S subscribers, each a process (or a thread with
//! `--threads`). Where the transport has a native fan-out (shm), each publisher makes one and
//! writes each message once; every subscriber joins every publisher's. Elsewhere every
//! subscriber listens and takes a channel from every publisher, and a publisher writes each
//! message to each channel in turn ([`CopyFanOut`]). The results say which. Each
//! publisher-subscriber pair runs the usual session, so a subscriber's result per publisher
//! comes back in-band to that publisher; the controller merges them per subscriber
//! (histograms added, not percentiles averaged).
//!
//! ```text
//! copy:   controller ── spawns ──► S subscribers (`serve --once --peers P`), their addresses
//!                    ── spawns ──► P publishers (`publish`): order on stdin
//! native: controller ── spawns ──► P publishers (`publish`): order on stdin, their topics
//!                    ── spawns ──► S subscribers (`serve --once --join TOPIC...`)
//! both:   controller ◄── ready ×P, then `go` to all: they start together (bounded by --timeout)
//!                    ◄── each publisher's outcome (its own result and one per subscriber)
//! ```

use super::peer::{PeerProcess, RoleProcess, Watchdog, ANNOUNCE};
use super::session::{self, ActiveOutcome};
use super::{channel_spec, STOP};
use crate::result::{CaseConfig, RoleResult};
use crate::sys;
use crate::transport::{self, CopyFanOut, Endpoint, MulticastListener, Rendezvous};
use crossbeam_channel::{bounded, Receiver, Sender};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Whether the case's transport has a native fan-out: then each publisher makes one, and the
/// subscribers join it.
pub fn native(case: &CaseConfig) -> bool {
    transport::find(&case.transport)
        .is_ok_and(|t| t.capabilities_with(&case.options).native_fan_out > 0)
}

/// What a publisher is told: the case, where the subscribers are (none with a native
/// fan-out: they join the publisher's), and which one it is.
#[derive(Serialize, Deserialize)]
pub struct PublishOrder {
    pub case: CaseConfig,
    pub subscribers: Vec<Rendezvous>,
    pub index: usize,
}

/// A publisher's native fan-out, made before the subscribers start.
fn make_topic(case: &CaseConfig, index: usize) -> Result<Box<dyn MulticastListener>, String> {
    let t = transport::find(&case.transport)?;
    t.multicast(&channel_spec(case), case.subs)
        .map_err(|e| format!("publisher {}: could not make its fan-out: {e}", index + 1))
}

/// One publisher: waits for every subscriber to join its `topic` (native fan-out) or connects
/// to every subscriber, waits at `start`, publishes, ends each subscriber's session.
pub fn publish(
    order: &PublishOrder,
    topic: Option<Box<dyn MulticastListener>>,
    start: &mut dyn FnMut() -> Result<(), String>,
) -> ActiveOutcome {
    let case = &order.case;
    let t = transport::find(&case.transport).expect("cases are validated");
    let spec = channel_spec(case);
    sys::with_cpu(case.cpus.0, || {
        if let Some(mut topic) = topic {
            return match topic.accept_all(&spec) {
                Ok(mut fan) => session::active_to_many(&mut *fan, case, &STOP, start),
                Err(e) => ActiveOutcome {
                    error: Some(format!(
                        "publisher {}: not every subscriber joined its fan-out: {e}",
                        order.index + 1
                    )),
                    ..ActiveOutcome::default()
                },
            };
        }
        let mut eps = Vec::with_capacity(order.subscribers.len());
        for (i, at) in order.subscribers.iter().enumerate() {
            match t.connect(at, &spec) {
                Ok(ep) => eps.push(ep),
                Err(e) => {
                    return ActiveOutcome {
                        error: Some(format!(
                            "publisher {} could not connect to subscriber {} at {}: {e}",
                            order.index + 1,
                            i + 1,
                            at.address
                        )),
                        ..ActiveOutcome::default()
                    }
                }
            }
        }
        let refs: Vec<&mut dyn Endpoint> = eps
            .iter_mut()
            .map(|e| e.as_mut() as &mut dyn Endpoint)
            .collect();
        session::active_to_many(&mut CopyFanOut::new(refs), case, &STOP, start)
    })
}

/// Runs a pubsub case; returns every role's result (publishers, then subscribers) and the
/// first error.
pub fn run(case: &CaseConfig) -> (Vec<RoleResult>, Option<String>) {
    let (outcomes, error) = if case.threads {
        run_in_threads(case)
    } else {
        run_in_processes(case)
    };
    // The publishers saw what went wrong first-hand; a role process's exit comes after.
    let (roles, publisher_error) = merge(case, outcomes);
    (roles, publisher_error.or(error))
}

/// Publisher results as they are; each subscriber's channels merged into one result.
fn merge(case: &CaseConfig, outcomes: Vec<ActiveOutcome>) -> (Vec<RoleResult>, Option<String>) {
    let mut error = None;
    let mut roles = Vec::new();
    let mut per_sub: Vec<Vec<RoleResult>> = vec![Vec::new(); case.subs];
    for (p, o) in outcomes.into_iter().enumerate() {
        if let Some(mut mine) = o.mine {
            mine.role = format!("publisher {}", p + 1);
            roles.push(mine);
        }
        for (s, r) in o.peers.into_iter().enumerate() {
            if let (Some(r), Some(v)) = (r, per_sub.get_mut(s)) {
                v.push(r);
            }
        }
        if error.is_none() {
            error = o.error.map(|e| {
                let e = e.strip_prefix("publisher: ").unwrap_or(&e);
                format!("publisher {}: {e}", p + 1)
            });
        }
    }
    for (s, parts) in per_sub.into_iter().enumerate() {
        if !parts.is_empty() {
            roles.push(RoleResult::merge(&format!("subscriber {}", s + 1), parts));
        }
    }
    (roles, error)
}

/// Waits for every publisher's ready signal within the timeout, then releases them all.
fn start_together(
    ready: &Receiver<usize>,
    pubs: usize,
    timeout: Duration,
    mut release: impl FnMut(bool),
) -> Result<(), String> {
    let deadline = crate::deadline::Deadline::after(timeout);
    for _ in 0..pubs {
        if ready.recv_timeout(deadline.remaining_nonzero()).is_err() {
            release(false);
            return Err(format!(
                "not every publisher was ready within {timeout:?}: raise --timeout, or see why below"
            ));
        }
    }
    release(true);
    Ok(())
}

/// Where each subscriber meets its publishers: its own listener (copy), or its place in every
/// publisher's fan-out (native).
enum Meeting {
    Listen(Box<dyn transport::Listener>),
    Join(Vec<Rendezvous>),
}

fn run_in_threads(case: &CaseConfig) -> (Vec<ActiveOutcome>, Option<String>) {
    let t = transport::find(&case.transport).expect("cases are validated");
    let spec = channel_spec(case);
    let mut meetings = Vec::new();
    let mut topics = Vec::new();
    let mut subscribers = Vec::new();
    if native(case) {
        for p in 0..case.pubs {
            match make_topic(case, p) {
                Ok(l) => topics.push(Some(l)),
                Err(e) => return (vec![], Some(e)),
            }
        }
        for s in 0..case.subs {
            let at = topics.iter().flatten().map(|l| l.rendezvous_for(s));
            meetings.push(Meeting::Join(at.collect()));
        }
    } else {
        for _ in 0..case.subs {
            match t.listen(&spec) {
                Ok(l) => {
                    subscribers.push(l.rendezvous());
                    meetings.push(Meeting::Listen(l));
                }
                Err(e) => return (vec![], Some(format!("a subscriber could not listen: {e}"))),
            }
        }
        topics.resize_with(case.pubs, || None);
    }
    let (ready_tx, ready_rx) = bounded::<usize>(case.pubs);
    let mut go = Vec::new();
    std::thread::scope(|scope| {
        let mut subs = Vec::new();
        for (s, meeting) in meetings.into_iter().enumerate() {
            let spec = spec.clone();
            let (cpu, pubs) = (case.cpus.1, case.pubs);
            subs.push(scope.spawn(move || {
                if let Some(c) = cpu {
                    let _ = sys::pin_current_thread(c);
                }
                let served = match meeting {
                    Meeting::Listen(l) => super::serve_peers(l, &spec, pubs),
                    Meeting::Join(at) => super::serve_joined(t, &at, &spec),
                };
                served
                    .into_iter()
                    .find_map(Result::err)
                    .map(|e| format!("subscriber {}: {e}", s + 1))
            }));
        }
        let mut pubs = Vec::new();
        for (index, topic) in topics.into_iter().enumerate() {
            let (go_tx, go_rx) = bounded::<bool>(1);
            go.push(go_tx);
            let ready_tx = ready_tx.clone();
            let order = PublishOrder {
                case: case.clone(),
                subscribers: subscribers.clone(),
                index,
            };
            pubs.push(scope.spawn(move || {
                publish(&order, topic, &mut || {
                    let _ = ready_tx.send(index);
                    match go_rx.recv_timeout(order.case.timeout * 2) {
                        Ok(true) => Ok(()),
                        _ => Err("the publishers did not start together".into()),
                    }
                })
            }));
        }
        let started = start_together(&ready_rx, case.pubs, case.timeout, |ok| {
            for g in &go {
                let _ = g.send(ok);
            }
        });
        let outcomes: Vec<ActiveOutcome> = pubs
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| ActiveOutcome {
                    error: Some("a publisher thread panicked".into()),
                    ..ActiveOutcome::default()
                })
            })
            .collect();
        let sub_error = subs.into_iter().find_map(|h| {
            h.join()
                .unwrap_or(Some("a subscriber thread panicked".into()))
        });
        (outcomes, started.err().or(sub_error))
    })
}

/// A publisher process: `msgperf publish`, ordered and released over its stdin.
struct PublisherProcess {
    process: RoleProcess,
    stdin: Option<ChildStdin>,
    /// Where each subscriber joins its fan-out (native fan-out only).
    topic: Receiver<Vec<Rendezvous>>,
    outcome: Receiver<Option<ActiveOutcome>>,
}

/// The line a publisher prints when it is connected and waits for `go`.
pub const READY: &str = "msgperf-publisher-ready";

impl PublisherProcess {
    fn spawn(order: &PublishOrder, ready: Sender<usize>) -> Result<Self, String> {
        let (mut process, stdout) = RoleProcess::spawn(&["publish".into()], Stdio::piped())?;
        let mut stdin = process.stdin().expect("piped");
        let line = serde_json::to_string(order).expect("orders serialize");
        writeln!(stdin, "{line}").map_err(|e| format!("could not brief a publisher: {e}"))?;
        let (out_tx, out_rx) = bounded(1);
        let (topic_tx, topic_rx) = bounded(1);
        let index = order.index;
        std::thread::spawn(move || {
            let mut outcome = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.trim() == READY {
                    let _ = ready.send(index);
                } else if let Some(at) = line.trim().strip_prefix(ANNOUNCE) {
                    if let Ok(at) = serde_json::from_str(at.trim()) {
                        let _ = topic_tx.send(at);
                    }
                } else if let Ok(o) = serde_json::from_str::<ActiveOutcome>(&line) {
                    outcome = Some(o);
                }
            }
            let _ = out_tx.send(outcome);
        });
        Ok(PublisherProcess {
            process,
            stdin: Some(stdin),
            topic: topic_rx,
            outcome: out_rx,
        })
    }

    fn tell(&mut self, what: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{what}").and_then(|_| s.flush());
        }
    }

    /// Waits for the outcome; Ctrl-C meanwhile is passed on as `stop`.
    fn outcome(&mut self, bound: Duration) -> ActiveOutcome {
        let deadline = crate::deadline::Deadline::after(bound);
        let mut stopped = false;
        let got = loop {
            match self.outcome.recv_timeout(Duration::from_millis(50)) {
                Ok(o) => break o,
                Err(_) if deadline.expired() => break None,
                Err(_) => {}
            }
            if !stopped && STOP.load(Ordering::Relaxed) {
                stopped = true;
                self.tell("stop");
            }
        };
        self.stdin = None;
        let failed = self.process.finish(Duration::from_secs(2));
        got.unwrap_or_else(|| ActiveOutcome {
            error: Some(format!(
                "publisher process pid {} gave no result: {}",
                self.process.pid(),
                failed.unwrap_or_else(|| "it exited without one".into())
            )),
            ..ActiveOutcome::default()
        })
    }
}

fn run_in_processes(case: &CaseConfig) -> (Vec<ActiveOutcome>, Option<String>) {
    let native = native(case);
    let mut subs = Vec::new();
    let mut subscribers = Vec::new();
    if !native {
        for s in 0..case.subs {
            match PeerProcess::spawn(case, &[], false) {
                Ok(p) => subs.push(p),
                Err(e) => return (vec![], Some(format!("subscriber {}: {e}", s + 1))),
            }
        }
        subscribers = subs.iter().map(|p| p.rendezvous.clone()).collect();
    }
    let (ready_tx, ready_rx) = bounded::<usize>(case.pubs);
    let mut pubs = Vec::new();
    for index in 0..case.pubs {
        let order = PublishOrder {
            case: case.clone(),
            subscribers: subscribers.clone(),
            index,
        };
        match PublisherProcess::spawn(&order, ready_tx.clone()) {
            Ok(p) => pubs.push(p),
            Err(e) => return (vec![], Some(format!("publisher {}: {e}", index + 1))),
        }
    }
    if native {
        // Each publisher's fan-out, as each subscriber joins it.
        let deadline = crate::deadline::Deadline::after(case.timeout);
        let mut places: Vec<Vec<Rendezvous>> = vec![Vec::new(); case.subs];
        for (p, publisher) in pubs.iter_mut().enumerate() {
            match publisher.topic.recv_timeout(deadline.remaining_nonzero()) {
                Ok(at) if at.len() == case.subs => {
                    places.iter_mut().zip(at).for_each(|(v, a)| v.push(a))
                }
                _ => {
                    let why = publisher.outcome(Duration::from_secs(1)).error;
                    return (
                        vec![],
                        why.or(Some(format!("publisher {} made no fan-out", p + 1))),
                    );
                }
            }
        }
        for (s, at) in places.iter().enumerate() {
            match PeerProcess::spawn(case, at, false) {
                Ok(p) => subs.push(p),
                Err(e) => return (vec![], Some(format!("subscriber {}: {e}", s + 1))),
            }
        }
    }
    // A hung role is killed: the case's length plus room for set-up and the end exchange.
    let bound = case.warmup + case.duration.unwrap_or(Duration::ZERO) + case.timeout * 3;
    let _watchdogs: Vec<Watchdog> = pubs
        .iter()
        .map(|p| p.process.pid())
        .chain(subs.iter().map(|s| s.pid()))
        .filter(|_| case.duration.is_some())
        .map(|pid| Watchdog::arm(pid, None, Some(bound)))
        .collect();
    let started = start_together(&ready_rx, case.pubs, case.timeout, |ok| {
        for p in pubs.iter_mut() {
            p.tell(if ok { "go" } else { "abort" });
        }
    });
    let outcomes: Vec<ActiveOutcome> = pubs.iter_mut().map(|p| p.outcome(bound)).collect();
    let grace = case.timeout.min(Duration::from_secs(5));
    let sub_error = subs.iter_mut().enumerate().find_map(|(s, p)| {
        p.finish(grace)
            .map(|e| format!("subscriber {}: {e}", s + 1))
    });
    (outcomes, started.err().or(sub_error))
}

/// `msgperf publish`: the publisher process's side. Reads its order, connects, says ready,
/// waits for `go`, publishes (a `stop` line or a closed stdin is Ctrl-C), prints its outcome.
pub fn publisher_main() -> Result<(), String> {
    let (lines_tx, lines) = bounded::<String>(4);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if line.trim() == "stop" {
                STOP.store(true, Ordering::SeqCst);
            }
            if lines_tx.send(line).is_err() {
                return;
            }
        }
        // The controller is gone: stop publishing.
        STOP.store(true, Ordering::SeqCst);
    });
    let first = lines
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| "no order on stdin: `msgperf publish` is started by `msgperf run pubsub`")?;
    let order: PublishOrder =
        serde_json::from_str(&first).map_err(|e| format!("the order does not parse: {e}"))?;
    let timeout = order.case.timeout;
    let topic = if native(&order.case) {
        let topic = make_topic(&order.case, order.index)?;
        let places: Vec<Rendezvous> = (0..order.case.subs)
            .map(|s| topic.rendezvous_for(s))
            .collect();
        say(&format!(
            "{ANNOUNCE} {}",
            serde_json::to_string(&places).expect("rendezvous serialize")
        ));
        Some(topic)
    } else {
        None
    };
    let outcome = publish(&order, topic, &mut || {
        say(READY);
        match lines.recv_timeout(timeout * 2).as_deref().map(str::trim) {
            Ok("go") => Ok(()),
            _ => Err("released without `go`: another publisher failed to start".into()),
        }
    });
    say(&serde_json::to_string(&outcome).expect("outcomes serialize"));
    Ok(())
}

/// One line to the controller, at once.
fn say(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}").and_then(|_| o.flush());
}
