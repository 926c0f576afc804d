//! A role's side of the control protocol (see `control.rs`): the same code in a role process,
//! a role thread and a `msgperf serve`. It opens the role's ends by side, says where its
//! accepting ends are, starts on Go, runs the workload's role, sends END on a driving role's
//! ends and its result on the control channel, and lingers until the runner says Finish (a
//! driving role on a transport that may drop repeats END meanwhile).

use super::control::{Conn, ControlError, FromRole, Order, Report, ToRole};
use super::ExecError;
use crate::measure::Recorder;
use crate::result::{CaseConfig, RoleResult};
use crate::sys;
use crate::transport::{
    self, Endpoint, FloorEnds, FloorRun, Opening, Rendezvous, Side, TransportError,
};
use crate::workload::{self, message, RoleControl, RoleError, RoleRun, RoleSpec, Sent};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How a role talks to its runner.
pub trait Link {
    fn send(&mut self, msg: &FromRole) -> Result<(), ControlError>;
    /// The next message within `within`.
    fn recv(&mut self, within: Duration) -> Result<ToRole, ControlError>;
}

impl Link for Conn {
    fn send(&mut self, msg: &FromRole) -> Result<(), ControlError> {
        Conn::send(self, msg)
    }
    fn recv(&mut self, within: Duration) -> Result<ToRole, ControlError> {
        Conn::recv(self, Some(within))
    }
}

/// Says why an order is refused, if it is.
pub type Admit<'a> = &'a dyn Fn(&Order) -> Result<(), ExecError>;

/// What a role's runner gives it besides its link.
pub struct RoleEnv<'a> {
    /// Raised to end the case early.
    pub stop: &'a AtomicBool,
    /// A floor side's ends (a process's descriptors from fd 4, a thread's local ones).
    pub floor_ends: Option<FloorEnds>,
    /// The CPU to run on, over the order's (`msgperf serve --pin`).
    pub pin: Option<usize>,
    /// Refuses an order this side was not started for (`msgperf serve -t uds` and a tcp case).
    pub admit: Option<Admit<'a>>,
}

/// The longest a role waits for its runner's next step: the runner itself waits at most the
/// case's timeout for each step of every role.
fn phase_bound(timeout: Duration) -> Duration {
    timeout * 3 + Duration::from_secs(10)
}

/// Serves one order; returns the case and what this role measured (None for a floor side or
/// a case the runner called off), or why it failed.
pub fn serve(
    link: &mut dyn Link,
    env: RoleEnv,
) -> Result<Option<(CaseConfig, RoleResult)>, ExecError> {
    let order = match link.recv(Duration::from_secs(30)) {
        Ok(ToRole::Hello(o)) => *o,
        Ok(other) => {
            return Err(ExecError::Protocol(format!(
                "the first control message was {other:?}, not a hello"
            )))
        }
        Err(e) => return Err(ExecError::control("no order from the runner", e)),
    };
    if let Some(Err(why)) = env.admit.map(|admit| admit(&order)) {
        return refuse(link, why);
    }
    match order {
        Order::Case {
            case,
            role,
            rendezvous,
            watched,
            clock_shifts_ns,
            stamps,
        } => {
            // Before anything is timed: the role's stamps and its peers' subtract.
            crate::measure::clock::use_shared_tsc(stamps);
            serve_case(link, env, case, role, rendezvous, watched, &clock_shifts_ns)
        }
        Order::Service {
            transport,
            plan,
            spec,
        } => serve_service(link, &transport, &plan, &spec).map(|_| None),
        Order::Floor {
            transport,
            kind,
            side,
            size,
            roles,
            cpu,
        } => {
            let prepared = transport::find(&transport)
                .ok()
                .and_then(|t| t.floor())
                .ok_or_else(|| ExecError::Refused(format!("transport `{transport}` has no floor")))
                .and_then(|f| {
                    pin(env.pin.or(cpu))?;
                    Ok(f)
                });
            let f = match prepared {
                Ok(f) => f,
                Err(e) => return refuse(link, e),
            };
            let run = FloorRun {
                kind,
                side,
                size,
                roles: &roles,
                stop: env.stop,
            };
            let ends = match env.floor_ends {
                Some(ends) => ends,
                // Across hosts nothing could be handed over: this side makes its own end.
                None if roles.between.is_some() => match meet_across(link, f, run)? {
                    Some(ends) => ends,
                    None => return Ok(None),
                },
                None => {
                    return refuse(
                        link,
                        ExecError::Refused("this floor side was given no ends".into()),
                    )
                }
            };
            let bound = phase_bound(roles.duration);
            send(link, &FromRole::Ready)?;
            if !wait_go(link, bound)? {
                return Ok(None);
            }
            let report = match f.run(run, ends) {
                Ok(fig) => FromRole::Result(Box::new(Report::Floor(fig))),
                Err(e) => FromRole::Error(format!("the floor's side {side}: {e}")),
            };
            send(link, &report)?;
            linger(link, bound, &mut || {});
            Ok(None)
        }
    }
}

/// A case's set-up on this host, for a runner elsewhere (a broker placed here): says where
/// the case meets, watches what it started (a death or a stop is told at once, as an Error),
/// measures it from Go to Stop as a runner measures its own services, and removes it all when
/// the runner says Finish or goes.
fn serve_service(
    link: &mut dyn Link,
    transport: &str,
    plan: &transport::SetupPlan,
    spec: &transport::ChannelSpec,
) -> Result<(), ExecError> {
    use super::services;
    let setup = match transport::find(transport)
        .map_err(|e| ExecError::Refused(e.to_string()))
        .and_then(|t| {
            t.setup(plan, spec).map_err(|e| {
                ExecError::transport(format!("could not set up `{transport}` here"), e)
            })
        }) {
        Ok(s) => s,
        Err(e) => return refuse(link, e),
    };
    let running = setup.services.clone();
    send(
        link,
        &FromRole::SetUp {
            rendezvous: setup.rendezvous.clone(),
            services: running.clone(),
        },
    )?;
    let said = crossbeam_channel::never();
    let (mut at_go, mut told) = (None, false);
    loop {
        if !told {
            if let Some((_, why)) = services::faults(&running, &said).into_iter().next() {
                told = true;
                send(link, &FromRole::Error(why))?;
            }
        }
        match link.recv(Duration::from_millis(100)) {
            Ok(ToRole::Go) => at_go = Some(services::sample(&running)),
            Ok(ToRole::Stop) => {
                let at_end = services::sample(&running);
                let faults = services::faults(&running, &said);
                let from = at_go.take().unwrap_or_else(|| at_end.clone());
                let measured = services::results(&running, &from, &at_end, 0, &faults);
                send(
                    link,
                    &FromRole::Result(Box::new(Report::Services(measured))),
                )?;
            }
            Ok(ToRole::Finish) | Err(ControlError::Closed) => break,
            Ok(_) | Err(ControlError::Timeout(_)) => {}
            Err(e) => return Err(ExecError::control("the runner of this set-up", e)),
        }
    }
    drop(setup);
    Ok(())
}

/// A floor's side on a host of its own binds its end there and says where (Bound), is told
/// where the other side's is (Open), and meets it; None if the runner called the loop off.
fn meet_across(
    link: &mut dyn Link,
    f: &dyn transport::Floor,
    run: FloorRun,
) -> Result<Option<FloorEnds>, ExecError> {
    let point = |side: usize| format!("floor side {side}");
    let failed = |e| ExecError::os(format!("the floor's side {}", run.side), e);
    let (bound, told) = match f.bind(run) {
        Ok(b) => b,
        Err(e) => return refuse(link, failed(e)),
    };
    let at = told.map(|a| (point(run.side), a));
    send(link, &FromRole::Bound(at.into_iter().collect()))?;
    let rendezvous = match link.recv(phase_bound(run.roles.timeout)) {
        Ok(ToRole::Open(r)) => r,
        Ok(ToRole::Finish | ToRole::Stop) | Err(ControlError::Closed) => return Ok(None),
        Ok(other) => {
            return Err(ExecError::Protocol(format!(
                "the floor's side {}: expected Open, got {other:?}",
                run.side
            )))
        }
        Err(e) => return Err(ExecError::control("no rendezvous from the runner", e)),
    };
    let peer = rendezvous.bound.get(&point(1 - run.side.min(1)));
    match f.meet(run, bound, peer.map(String::as_str)) {
        Ok(ends) => Ok(Some(ends)),
        Err(e) => refuse(link, failed(e)),
    }
}

fn send(link: &mut dyn Link, msg: &FromRole) -> Result<(), ExecError> {
    link.send(msg)
        .map_err(|e| ExecError::control("could not answer the runner", e))
}

/// Tells the runner why this role cannot take part, and returns it.
fn refuse<T>(link: &mut dyn Link, why: ExecError) -> Result<T, ExecError> {
    let _ = link.send(&FromRole::Error(why.to_string()));
    Err(why)
}

fn pin(cpu: Option<usize>) -> Result<(), ExecError> {
    match cpu {
        Some(c) => sys::pin_current_thread(c).map_err(|e| {
            ExecError::Refused(format!(
                "cannot pin to CPU {c}: {e}; pick one of {:?}",
                sys::allowed_cpus()
            ))
        }),
        None => Ok(()),
    }
}

/// Waits for Go; false if the runner called the case off (Finish, or it went away).
fn wait_go(link: &mut dyn Link, bound: Duration) -> Result<bool, ExecError> {
    loop {
        match link.recv(bound) {
            Ok(ToRole::Go) => return Ok(true),
            // A stop before the start: the runner follows it with Finish.
            Ok(ToRole::Stop) => {}
            Ok(ToRole::Finish) | Err(ControlError::Closed) => return Ok(false),
            Ok(other) => return Err(ExecError::Protocol(format!("expected Go, got {other:?}"))),
            Err(e) => return Err(ExecError::control("no start from the runner", e)),
        }
    }
}

/// Waits for Finish (or the runner's end), calling `meanwhile` every 200 ms.
fn linger(link: &mut dyn Link, bound: Duration, meanwhile: &mut dyn FnMut()) {
    let deadline = crate::deadline::Deadline::after(bound);
    while !deadline.expired() {
        match link.recv(Duration::from_millis(200)) {
            Ok(ToRole::Finish) | Err(ControlError::Closed) => return,
            Ok(_) => {}
            Err(ControlError::Timeout(_)) => meanwhile(),
            Err(_) => return,
        }
    }
}

fn serve_case(
    link: &mut dyn Link,
    env: RoleEnv,
    case: CaseConfig,
    role: RoleSpec,
    rendezvous: Rendezvous,
    watched: bool,
    clock_shifts_ns: &[i64],
) -> Result<Option<(CaseConfig, RoleResult)>, ExecError> {
    let label = role.id.to_string();
    let found = transport::find(&case.transport)
        .and_then(|t| Ok((t, workload::find(&case.workload)?)))
        .map_err(|e| ExecError::Refused(e.to_string()));
    let (t, w) = match found.and_then(|tw| pin(env.pin.or(role.cpu)).map(|_| tw)) {
        Ok(tw) => tw,
        Err(e) => return refuse(link, ExecError::Refused(format!("{label}: {e}"))),
    };
    let spec = workload::channel_spec(w, &case, watched);
    let bound = phase_bound(case.timeout);

    // Bind every end; none waits for a peer yet.
    let mut openings: Vec<Option<Box<dyn Opening>>> = Vec::new();
    let mut bound_at = BTreeMap::new();
    for side in &role.ends {
        match t.open(&rendezvous, *side, &spec) {
            Ok(o) => {
                if let Some(a) = o.address() {
                    bound_at.insert(side.meeting(), a);
                }
                openings.push(Some(o));
            }
            Err(e) => {
                return refuse(
                    link,
                    ExecError::transport(
                        format!("{label} could not open {}", side_label(*side)),
                        e,
                    ),
                )
            }
        }
    }
    send(link, &FromRole::Bound(bound_at))?;
    let rendezvous = match link.recv(bound) {
        Ok(ToRole::Open(r)) => r,
        Ok(ToRole::Finish | ToRole::Stop) | Err(ControlError::Closed) => return Ok(None),
        Ok(other) => {
            return Err(ExecError::Protocol(format!(
                "{label}: expected Open, got {other:?}"
            )))
        }
        Err(e) => {
            return Err(ExecError::control(
                format!("{label}: no rendezvous from the runner"),
                e,
            ))
        }
    };

    // Meet the peers, channel by channel in the same order in every role.
    let mut order: Vec<usize> = (0..role.ends.len()).collect();
    order.sort_by_key(|&i| role.ends[i].order());
    let mut ends: Vec<Option<Box<dyn Endpoint>>> = (0..role.ends.len()).map(|_| None).collect();
    for i in order {
        let opening = openings[i].take().expect("each end opens once");
        match opening.finish(&rendezvous, &spec) {
            Ok(ep) => ends[i] = Some(ep),
            Err(e) => {
                return refuse(
                    link,
                    ExecError::transport(
                        format!("{label} could not open {}", side_label(role.ends[i])),
                        e,
                    ),
                )
            }
        }
    }
    let mut ends: Vec<Box<dyn Endpoint>> = ends.into_iter().flatten().collect();
    let mut rec = Recorder::new(w.metrics(), case.interval);
    send(link, &FromRole::Ready)?;
    if !wait_go(link, bound)? {
        return Ok(None);
    }

    let ctl = RoleControl {
        stop: env.stop,
        clock_shifts_ns,
    };
    let run = w.run(RoleRun {
        role: &role,
        ends: &mut ends,
        case: &case,
        rec: &mut rec,
        ctl: &ctl,
    });
    let (sent, error) = match run {
        Ok(sent) => (sent, None),
        Err(RoleError::Ended { sent, cause }) => (Some(sent), Some(cause.to_string())),
        Err(e) => (None, Some(e.to_string())),
    };
    let mut result = rec.finish(role.id, error);
    result.sent_total = sent.map_or(0, |s: Sent| s.next);
    result.pinned_cpu = role.cpu;
    // Reported before END goes out: an END that waits out its timeout on a peer out of reach
    // (a link down) would otherwise hold the counts until the runner gave up on this role.
    send(
        link,
        &FromRole::Result(Box::new(Report::Case(result.clone()))),
    )?;
    let mut end = [0u8; message::HEADER];
    let end = sent.map(|s| message::end(&mut end, s.next, s.first_measured).to_vec());
    if let Some(end) = &end {
        send_end(&mut ends, end, case.timeout);
    }
    // END may be lost where the transport drops: repeat it until every result is in.
    let reliable = t.capabilities(&case.effective_options).reliable;
    linger(link, bound, &mut || {
        if let (Some(end), false) = (&end, reliable) {
            send_end(&mut ends, end, Duration::from_millis(100));
        }
    });
    Ok(Some((case, result)))
}

/// END on every end: a driving role is done. A full queue that refuses data (`full=fail`) is
/// waited on, within `timeout`; an end whose peer is gone is passed over.
fn send_end(ends: &mut [Box<dyn Endpoint>], end: &[u8], timeout: Duration) {
    for ep in ends {
        let deadline = crate::deadline::Deadline::after(timeout);
        loop {
            match ep.send(end) {
                Err(TransportError::Full) if !deadline.expired() => {
                    std::thread::sleep(Duration::from_micros(50))
                }
                _ => break,
            }
        }
        // A buffered writer's last messages, END among them, go out now.
        let _ = ep.flush();
    }
}

fn side_label(side: Side) -> String {
    match side {
        Side::Accept(n) => format!("its end of channel {n} (accepting)"),
        Side::Connect(n) => format!("its end of channel {n} (connecting)"),
        Side::Publish { topic, .. } => format!("topic {topic} as its writer"),
        Side::Subscribe { topic, reader } => format!("topic {topic} as reader {reader}"),
    }
}

/// `msgperf role ...`: a role process. Its control socket is fd 3 and a floor side's ends
/// follow it; SIGUSR1 raises its stop flag. It stays single-threaded: the kernel then skips the
/// reference counting of a shared descriptor table on each read and write, as for a plain C
/// loop, and glibc its cancellation-point bookkeeping.
pub fn process_main() -> Result<(), ExecError> {
    let mut fds = sys::inherited_fds(3);
    if fds.is_empty() {
        return Err(ExecError::Refused(
            "no control socket at fd 3: `msgperf role` is started by msgperf itself, not by hand"
                .into(),
        ));
    }
    let control = fds.remove(0);
    let mut conn = Conn::Unix(std::os::unix::net::UnixStream::from(control));
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, stop.clone())
        .map_err(|e| ExecError::os("could not take SIGUSR1", e))?;
    let _ = crate::deadline::ROLE_STOP.set(stop.clone());
    let env = RoleEnv {
        stop: &stop,
        floor_ends: (!fds.is_empty()).then_some(FloorEnds::Fds(fds)),
        pin: None,
        admit: None,
    };
    serve(&mut conn, env).map(|_| ())
}

/// `msgperf role --stdio ...`: a role on another host, started through a launcher, its control
/// channel on stdin and stdout. It says who it is first, answers clock probes at any time,
/// sends heartbeats, ends with Done (a digest of its result), and then answers probes until
/// the runner hangs up (at most 10 s): the runner measures the clock after the run too.
/// `what` is its command line after `role`: its role for `ps`, and the runner's longest
/// silence it waits out (`--silence-ms`).
pub fn stdio_main(what: &[String]) -> Result<(), ExecError> {
    use super::control::{build_id, write_frame, FarHello};
    let mut out = std::io::stdout();
    let mut addresses: Vec<String> = Vec::new();
    // Where an ssh came in: the address the runner's host reaches.
    if let Some(server) = std::env::var("SSH_CONNECTION")
        .ok()
        .and_then(|c| c.split_whitespace().nth(2).map(String::from))
    {
        addresses.push(server);
    }
    for a in sys::ipv4_addresses() {
        let a = a.to_string();
        if !addresses.contains(&a) {
            addresses.push(a);
        }
    }
    let hello = FarHello {
        msgperf_version: env!("CARGO_PKG_VERSION").into(),
        build: build_id(),
        addresses,
        environment: super::environment::probe(),
    };
    write_frame(&mut out, &FromRole::Hello(Box::new(hello)))
        .map_err(|e| ExecError::control("could not greet the runner", e))?;
    let mut link =
        super::serve::StreamLink::start(Box::new(std::io::stdin()), Box::new(std::io::stdout()))?;
    let stop = link.stop.clone();
    stop_on_silence(link.heard.clone(), stop.clone(), silence(what)?)?;
    let served = serve(
        &mut link,
        RoleEnv {
            stop: &stop,
            floor_ends: None,
            pin: None,
            admit: None,
        },
    );
    link.quiet();
    if served.is_ok() {
        let _ = link.send_done();
    }
    let _ = link.reader_ended.recv_timeout(Duration::from_secs(10));
    served.map(|_| ())
}

/// The runner's longest silence a far side waits out: `--silence-ms N` in its command line,
/// else 30 s (a hello asked by `msgperf deploy`).
fn silence(what: &[String]) -> Result<Duration, ExecError> {
    let Some(at) = what.iter().position(|w| w == super::runner::SILENCE_FLAG) else {
        return Ok(Duration::from_secs(30));
    };
    what.get(at + 1)
        .and_then(|n| n.parse().ok())
        .map(Duration::from_millis)
        .ok_or_else(|| {
            ExecError::Refused(format!(
                "{} wants a whole number of milliseconds",
                super::runner::SILENCE_FLAG
            ))
        })
}

/// Ends this far side when its runner has sent nothing for `silence`: its probes come four
/// times a second, so a runner that quiet is frozen or cut off behind a link that does not
/// close (a partition, a hung launcher), and nobody else would ever stop this role. The
/// role's stop flag is raised first and its result given two seconds to go out (a runner
/// that was only paused reads it), then the process exits.
fn stop_on_silence(
    heard: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: std::sync::Arc<AtomicBool>,
    silence: Duration,
) -> Result<(), ExecError> {
    use crate::measure::clock;
    use std::sync::atomic::Ordering;
    let watch = move || loop {
        std::thread::sleep(Duration::from_millis(100));
        let quiet = clock::now().saturating_sub(heard.load(Ordering::SeqCst));
        if quiet > silence.as_nanos() as u64 {
            stop.store(true, Ordering::SeqCst);
            eprintln!(
                "msgperf: the runner sent nothing for {:.1} s (over the {:.1} s allowed): this far role stops",
                quiet as f64 / 1e9,
                silence.as_secs_f64()
            );
            std::thread::sleep(Duration::from_secs(2));
            std::process::exit(3);
        }
    };
    std::thread::Builder::new()
        .name("msgperf silence".into())
        .spawn(watch)
        .map(|_| ())
        .map_err(|e| ExecError::start("could not start a watch on the runner", e))
}
