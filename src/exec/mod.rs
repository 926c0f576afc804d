//! Room `exec`: where roles run. The active role runs on the controller's own thread (pinned
//! for the case); the passive role runs in a child process (default) or a thread (`--threads`),
//! or in a `msgperf serve` started by hand (`--connect`). Every path goes through the same
//! in-band [`session`], and every wait is bounded.

pub mod environment;
mod load;
pub mod peer;
pub mod pubsub;
pub mod session;

use crate::result::{CaseConfig, CaseResult, FanOut, FloorResult, RoleResult, Wait, WireCount};
use crate::sys;
use crate::transport::{self, ChannelSpec, FloorRoles, Rendezvous};
use crate::workload::{self, message};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by Ctrl-C: the active role ends its case, and no further case starts.
pub static STOP: AtomicBool = AtomicBool::new(false);

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The channel both sides of a case open.
pub fn channel_spec(case: &CaseConfig) -> ChannelSpec {
    ChannelSpec {
        options: case.options.clone(),
        timeout: case.timeout,
        poll: case.wait == Wait::Poll,
        max_message: case.size_bytes.max(message::CONTROL_MAX),
        listen_at: None,
        watched: false,
    }
}

/// Runs cases, measuring each one's floor in the same placement (cached per placement).
pub struct Runner {
    /// Where the passive role is: started per case (None) or a `msgperf serve` at this address.
    pub connect: Option<String>,
    pub measure_floor: bool,
    floors: HashMap<String, Option<FloorResult>>,
}

impl Runner {
    pub fn new(connect: Option<String>, measure_floor: bool) -> Self {
        Runner {
            connect,
            measure_floor,
            floors: HashMap::new(),
        }
    }

    pub fn run_case(&mut self, case: &CaseConfig) -> CaseResult {
        // A paced case moves what its schedule says: no floor ratio applies to it.
        let floor = if self.measure_floor && case.rate_hz.is_none() {
            self.floor(case)
        } else {
            None
        };
        let network = transport::find(&case.transport).is_ok_and(|t| t.capabilities().cross_host);
        let wire_before = if network { load::loopback_tx() } else { None };
        let before = load::sample();
        let usage_before = sys::process_and_children_cpu_ns();
        let (roles, error) = match &self.connect {
            Some(addr) => run_connected(case, addr),
            None if case.fans_out() => pubsub::run(case),
            None if case.threads => run_in_threads(case),
            None => run_in_processes(case),
        };
        let ours = sys::process_and_children_cpu_ns().saturating_sub(usage_before);
        let after = load::sample();
        let wire = match (wire_before, load::loopback_tx()) {
            (Some(b), Some(a)) if self.connect.is_none() => Some(WireCount {
                bytes: a.0.saturating_sub(b.0),
                packets: a.1.saturating_sub(b.1),
            }),
            _ => None,
        };
        let cpus: BTreeSet<usize> = [case.cpus.0, case.cpus.1].into_iter().flatten().collect();
        CaseResult {
            config: case.clone(),
            roles,
            floor,
            error,
            interrupted: stop_requested(),
            wire,
            fan_out: case.fans_out().then(|| {
                if pubsub::native(case) {
                    FanOut::Shared
                } else {
                    FanOut::Copy
                }
            }),
            other_load_pct: if cpus.is_empty() {
                None
            } else {
                load::other_load_pct(&before, &after, &cpus, ours)
            },
        }
    }

    /// The transport's plain loop at this case's size and placement.
    pub fn floor(&mut self, case: &CaseConfig) -> Option<FloorResult> {
        let t = transport::find(&case.transport).ok()?;
        let w = workload::find(&case.workload).ok()?;
        let f = t.floor()?;
        let kind = w.floor_kind();
        let key = format!(
            "{}/{kind:?}/{}/{:?}/{}/{:?}",
            case.transport, case.size_bytes, case.cpus, case.threads, case.options
        );
        if let Some(v) = self.floors.get(&key) {
            return v.clone();
        }
        let roles = FloorRoles {
            cpus: case.cpus,
            processes: !case.threads && t.capabilities_with(&case.options).cross_process,
            warmup: case.warmup,
            duration: case
                .duration
                .unwrap_or(Duration::from_secs(1))
                .min(Duration::from_secs(3)),
            options: case.options.clone(),
        };
        let v = f
            .measure(kind, case.size_bytes, &roles)
            .ok()
            .map(|f| FloorResult {
                samples: f.samples,
                rtt_min_ns: f.rtt_min_ns,
                rtt_p50_ns: f.rtt_p50_ns,
                rtt_mean_ns: f.rtt_mean_ns,
                msgs_per_s: f.msgs_per_s,
                bytes_per_s: f.bytes_per_s,
            });
        self.floors.insert(key, v.clone());
        v
    }
}

fn outcome_roles(o: session::ActiveOutcome) -> (Vec<RoleResult>, Option<String>) {
    let roles = o
        .mine
        .into_iter()
        .chain(o.peers.into_iter().flatten())
        .collect();
    (roles, o.error)
}

fn active_side(case: &CaseConfig, at: &Rendezvous, watched: bool) -> session::ActiveOutcome {
    let t = transport::find(&case.transport).expect("cases are validated");
    let spec = ChannelSpec {
        watched,
        ..channel_spec(case)
    };
    sys::with_cpu(case.cpus.0, || match t.connect(at, &spec) {
        Ok(mut ep) => session::active(&mut *ep, case, &STOP),
        Err(e) => session::ActiveOutcome {
            mine: None,
            peers: vec![],
            error: Some(format!(
                "could not connect to the peer at {}: {e}",
                at.address
            )),
        },
    })
}

fn run_in_threads(case: &CaseConfig) -> (Vec<RoleResult>, Option<String>) {
    let t = transport::find(&case.transport).expect("cases are validated");
    // Each role's end closes when its thread returns, so neither waits on a peer that stopped.
    let spec = ChannelSpec {
        watched: true,
        ..channel_spec(case)
    };
    let mut listener = match t.listen(&spec) {
        Ok(l) => l,
        Err(e) => return (vec![], Some(format!("could not listen: {e}"))),
    };
    let at = listener.rendezvous();
    let cpu = case.cpus.1;
    let passive = std::thread::Builder::new()
        .name("msgperf-passive".into())
        .spawn(move || {
            if let Some(c) = cpu {
                let _ = sys::pin_current_thread(c);
            }
            let mut ep = listener
                .accept(&spec)
                .map_err(|e| format!("no peer connected: {e}"))?;
            drop(listener);
            session::passive(&mut *ep, spec.poll, spec.timeout)
        });
    let passive = match passive {
        Ok(p) => p,
        Err(e) => {
            return (
                vec![],
                Some(format!("could not start the passive thread: {e}")),
            )
        }
    };
    let outcome = active_side(case, &at, true);
    // The active side's endpoint is closed by now, so the passive thread ends within its timeout.
    let passive_error = match passive.join() {
        Ok(Err(e)) => Some(e),
        Err(_) => Some("the passive thread panicked".into()),
        Ok(Ok(_)) => None,
    };
    let (roles, error) = outcome_roles(outcome);
    (roles, error.or(passive_error))
}

fn run_in_processes(case: &CaseConfig) -> (Vec<RoleResult>, Option<String>) {
    // A peer that stops running for --timeout is killed, which ends every wait on it; both
    // sides' stream sockets then need no timer on each wait.
    let watched = peer::Watchdog::can_watch();
    let mut peer = match peer::PeerProcess::spawn(case, &[], watched) {
        Ok(p) => p,
        Err(e) => return (vec![], Some(e)),
    };
    let watchdog = peer::Watchdog::arm(
        peer.pid(),
        watched.then_some(case.timeout),
        case.duration.map(|d| case.warmup + d + case.timeout * 3),
    );
    let outcome = active_side(case, &peer.rendezvous.clone(), watched);
    let killed = watchdog.fired();
    // Cancelled before the peer is reaped, so that it never kills a reused pid.
    drop(watchdog);
    let peer_error = peer.finish(case.timeout.min(Duration::from_secs(5)));
    let peer_error = killed.or(peer_error);
    let (roles, error) = outcome_roles(outcome);
    let error = match (error, peer_error) {
        (Some(e), Some(p)) => Some(format!("{e} (peer process pid {}: {p})", peer.pid())),
        (e, _) => e,
    };
    (roles, error)
}

fn run_connected(case: &CaseConfig, addr: &str) -> (Vec<RoleResult>, Option<String>) {
    let at = Rendezvous {
        transport: case.transport.clone(),
        address: addr.to_string(),
    };
    outcome_roles(active_side(case, &at, false))
}

/// `msgperf serve`: listens, then serves one case per peer until Ctrl-C (or once).
pub struct ServeOptions {
    pub transport: String,
    pub spec: ChannelSpec,
    pub pin: Option<usize>,
    pub once: bool,
    /// Print the rendezvous as one machine-readable line (for a controller that started us).
    pub announce: bool,
    /// With `once`: serve this many peers at once (a subscriber of several publishers).
    pub peers: usize,
    /// With `once`: join these fan-outs (native fan-out) instead of listening.
    pub join: Vec<String>,
}

/// Accepts `peers` peers on one listener and serves each one's case on its own thread (a
/// subscriber of several publishers); returns each one's outcome.
pub fn serve_peers(
    mut listener: Box<dyn transport::Listener>,
    spec: &ChannelSpec,
    peers: usize,
) -> Vec<Result<(CaseConfig, RoleResult), String>> {
    let mut out = Vec::new();
    std::thread::scope(|scope| {
        let mut served = Vec::new();
        for _ in 0..peers {
            match listener.accept(spec) {
                Ok(mut ep) => served
                    .push(scope.spawn(move || session::passive(&mut *ep, spec.poll, spec.timeout))),
                Err(e) => {
                    out.push(Err(format!("no peer connected: {e}")));
                    break;
                }
            }
        }
        drop(listener);
        for h in served {
            out.push(
                h.join()
                    .unwrap_or_else(|_| Err("a serving thread panicked".into())),
            );
        }
    });
    out
}

/// Joins each publisher's fan-out at `at` and serves each one's case on its own thread (a
/// subscriber of publishers with a native fan-out); returns each one's outcome.
pub fn serve_joined(
    t: &dyn transport::Transport,
    at: &[Rendezvous],
    spec: &ChannelSpec,
) -> Vec<Result<(CaseConfig, RoleResult), String>> {
    let mut eps = Vec::new();
    for a in at {
        match t.connect(a, spec) {
            Ok(ep) => eps.push(ep),
            Err(e) => return vec![Err(format!("could not join {}: {e}", a.address))],
        }
    }
    std::thread::scope(|scope| {
        let served: Vec<_> = eps
            .into_iter()
            .map(|mut ep| scope.spawn(move || session::passive(&mut *ep, spec.poll, spec.timeout)))
            .collect();
        served
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a serving thread panicked".into()))
            })
            .collect()
    })
}

pub fn serve(
    o: &ServeOptions,
    mut report: impl FnMut(Result<(CaseConfig, RoleResult), String>),
) -> Result<(), String> {
    let t = transport::find(&o.transport)?;
    if let Some(c) = o.pin {
        sys::pin_current_thread(c).map_err(|e| {
            format!(
                "cannot pin to CPU {c}: {e}; pick one of {:?} with --pin",
                sys::allowed_cpus()
            )
        })?;
    }
    if !o.join.is_empty() {
        let at: Vec<Rendezvous> = o
            .join
            .iter()
            .map(|a| Rendezvous {
                transport: o.transport.clone(),
                address: a.clone(),
            })
            .collect();
        let results = serve_joined(t, &at, &o.spec);
        let failed = results.iter().find_map(|r| r.as_ref().err().cloned());
        results.into_iter().for_each(&mut report);
        return failed.map_or(Ok(()), Err);
    }
    let mut listener = t
        .listen(&o.spec)
        .map_err(|e| format!("cannot listen: {e}"))?;
    let at = listener.rendezvous();
    if o.announce {
        println!(
            "{} {}",
            peer::ANNOUNCE,
            serde_json::to_string(&at).expect("rendezvous serializes")
        );
    } else {
        println!(
            "msgperf serve: {} listening at {} (Ctrl-C to stop)",
            o.transport, at.address
        );
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    loop {
        // Wait in short slices so that Ctrl-C is noticed between peers.
        let mut slice = o.spec.clone();
        if !o.once {
            slice.timeout = Duration::from_millis(250);
        }
        let ep = match listener.accept(&slice) {
            Ok(ep) => ep,
            Err(transport::TransportError::Timeout(_)) if !o.once && !stop_requested() => continue,
            Err(e) => {
                return if stop_requested() {
                    Ok(())
                } else {
                    Err(format!("no peer connected: {e}"))
                }
            }
        };
        let mut ep = ep;
        if o.once && o.peers > 1 {
            // The first peer is in; the rest come on the same listener.
            let first = std::thread::spawn({
                let spec = o.spec.clone();
                move || session::passive(&mut *ep, spec.poll, spec.timeout)
            });
            let mut results = serve_peers(listener, &o.spec, o.peers - 1);
            results.insert(
                0,
                first
                    .join()
                    .unwrap_or_else(|_| Err("a serving thread panicked".into())),
            );
            let failed = results.iter().find_map(|r| r.as_ref().err().cloned());
            results.into_iter().for_each(&mut report);
            return failed.map_or(Ok(()), Err);
        }
        if o.once {
            drop(listener);
            let r = session::passive(&mut *ep, o.spec.poll, o.spec.timeout);
            let failed = r.as_ref().err().cloned();
            report(r);
            return failed.map_or(Ok(()), Err);
        }
        report(session::passive(&mut *ep, o.spec.poll, o.spec.timeout));
        if stop_requested() {
            return Ok(());
        }
    }
}
