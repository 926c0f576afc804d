//! Takes a case's started roles through the control protocol's phases together (iperf3's
//! control state machine, for any number of roles): every role bound, then every role open and
//! ready, then Go for all at once (the start barrier), then every result. Every wait has a
//! bound. A role that dies or hangs is named, the driving roles are told to stop so that the
//! others end their streams with every message accounted for, and every result that comes is
//! kept. Ctrl-C stops the driving roles the same way.

use super::control::{FromRole, Order, Report, ToRole};
use super::runner::{Event, RoleHandle};
use crate::deadline::Deadline;
use crate::transport::Rendezvous;
use crossbeam_channel::Receiver;
use std::time::Duration;

/// A started role.
pub struct Started {
    /// How errors name it: `subscriber 2`.
    pub label: String,
    /// It decides when the case ends: a stop is sent to it.
    pub drives: bool,
    pub handle: Box<dyn RoleHandle>,
}

/// How a role's part ended.
pub enum Outcome {
    Reported(Box<Report>),
    /// It could not take part, died or hung: why.
    Failed(String),
}

pub struct Driven {
    /// Each role's outcome, in the order of the roles given.
    pub outcomes: Vec<Option<Outcome>>,
    /// Why the case failed: a role's death first, else the first role that reported an error.
    pub error: Option<String>,
    pub interrupted: bool,
}

/// The bounds of a case's phases.
pub struct Bounds {
    /// Each phase before the start, for every role.
    pub phase: Duration,
    /// From the start to the last result, if the case has a known length.
    pub run: Option<Duration>,
}

/// Drives `roles`, whose orders are `orders`. With a rendezvous, roles first bind and say where
/// (a case); without, they only get ready (a floor).
/// `at_go` runs as Go is sent (a case measures its services' CPU from there).
pub fn drive(
    roles: &mut [Started],
    orders: Vec<Order>,
    events: &Receiver<Event>,
    rendezvous: Option<Rendezvous>,
    bounds: Bounds,
    at_go: &mut dyn FnMut(),
) -> Driven {
    let broker = match rendezvous.as_ref().map(|r| &r.place) {
        Some(crate::transport::Place::Broker { url, .. }) => Some(url.clone()),
        _ => None,
    };
    let mut d = Driver {
        outcomes: roles.iter().map(|_| None).collect(),
        broker,
        died: None,
        failed: None,
        interrupted: false,
        stopped: false,
    };
    let started = d.before_go(roles, orders, events, rendezvous, &bounds, at_go);
    if started {
        d.run(roles, events, &bounds);
    }
    for r in roles.iter_mut() {
        let _ = r.handle.send(&ToRole::Finish);
    }
    if !started {
        // Called off before the start: nothing was measured, nothing to wait for.
        for r in roles.iter_mut() {
            r.handle.kill();
        }
    }
    for (r, outcome) in roles.iter_mut().zip(&d.outcomes) {
        // One that failed (died, hung, or said why) has nothing more to say: a killed process
        // is not waited for while the kernel tears it down.
        let grace = match outcome {
            Some(Outcome::Failed(_)) => Duration::from_millis(200),
            // Its result is in, but its END may wait out a timeout on a peer the failure put
            // out of reach: the case ends now, not then.
            Some(Outcome::Reported(_)) if d.failed.is_some() || d.died.is_some() => {
                Duration::from_secs(1)
            }
            _ => bounds.phase.min(Duration::from_secs(5)),
        };
        r.handle.finish(grace);
    }
    // A death is the cause; what another role saw of it follows.
    let error = match (d.died, d.failed) {
        (Some(died), Some(saw)) => Some(format!(
            "{died} (the {})",
            saw.strip_prefix("the ").unwrap_or(&saw)
        )),
        (died, saw) => died.or(saw),
    };
    Driven {
        outcomes: d.outcomes,
        error,
        interrupted: d.interrupted,
    }
}

struct Driver {
    outcomes: Vec<Option<Outcome>>,
    /// The broker the roles meet at, if they do: what to name when they do not get ready.
    broker: Option<String>,
    died: Option<String>,
    failed: Option<String>,
    interrupted: bool,
    stopped: bool,
}

/// What a phase waits for from each role.
enum Step {
    Bound,
    Ready,
}

impl Driver {
    /// Hello, Bound, Open, Ready, Go; false if the case was called off before Go.
    fn before_go(
        &mut self,
        roles: &mut [Started],
        orders: Vec<Order>,
        events: &Receiver<Event>,
        rendezvous: Option<Rendezvous>,
        bounds: &Bounds,
        at_go: &mut dyn FnMut(),
    ) -> bool {
        // Each role's own meeting place (across hosts: its host's address).
        let places: Vec<Option<crate::transport::Place>> = orders
            .iter()
            .map(|o| match o {
                Order::Case { rendezvous, .. } => Some(rendezvous.place.clone()),
                Order::Floor { .. } | Order::Service { .. } => None,
            })
            .collect();
        for (r, o) in roles.iter_mut().zip(orders) {
            if let Err(e) = r.handle.send(&ToRole::Hello(Box::new(o))) {
                self.failed = Some(format!("could not brief the {}: {e}", r.label));
                return false;
            }
        }
        if let Some(mut rdv) = rendezvous {
            let Some(addresses) = self.wait_all(roles, events, bounds.phase, Step::Bound) else {
                return false;
            };
            for a in addresses {
                rdv.bound.extend(a);
            }
            for (r, place) in roles.iter_mut().zip(&places) {
                let mut mine = rdv.clone();
                if let Some(p) = place {
                    mine.place = p.clone();
                }
                if let Err(e) = r.handle.send(&ToRole::Open(mine)) {
                    self.failed = Some(format!("{}: {e}", r.label));
                    return false;
                }
            }
        }
        if self
            .wait_all(roles, events, bounds.phase, Step::Ready)
            .is_none()
        {
            return false;
        }
        at_go();
        for r in roles.iter_mut() {
            if let Err(e) = r.handle.send(&ToRole::Go) {
                self.failed = Some(format!("{}: {e}", r.label));
                return false;
            }
        }
        true
    }

    /// One answer from every role; None (with the reason recorded) if one failed, the phase's
    /// bound passed or Ctrl-C came.
    fn wait_all(
        &mut self,
        roles: &mut [Started],
        events: &Receiver<Event>,
        bound: Duration,
        step: Step,
    ) -> Option<Vec<std::collections::BTreeMap<String, String>>> {
        let deadline = Deadline::after(bound);
        let mut got: Vec<Option<std::collections::BTreeMap<String, String>>> =
            roles.iter().map(|_| None).collect();
        while got.iter().any(Option::is_none) {
            if super::stop_requested() {
                self.interrupted = true;
                return None;
            }
            let Ok(ev) = events.recv_timeout(Duration::from_millis(50)) else {
                if deadline.expired() {
                    let late: Vec<&str> = roles
                        .iter()
                        .zip(&got)
                        .filter(|(_, g)| g.is_none())
                        .map(|(r, _)| r.label.as_str())
                        .collect();
                    self.failed = Some(match &self.broker {
                        Some(url) => format!(
                            "the {} did not get ready within {bound:?}, meeting at the broker at {url}: is it running and answering there? (raise --timeout if it is only slow)",
                            late.join(", the ")
                        ),
                        None => format!(
                            "the {} did not get ready within {bound:?}: raise --timeout, or see why in its error",
                            late.join(", the ")
                        ),
                    });
                    return None;
                }
                continue;
            };
            match ev {
                Event::Frame(i, FromRole::Bound(a)) if matches!(step, Step::Bound) => {
                    got[i] = Some(a)
                }
                Event::Frame(i, FromRole::Ready) if matches!(step, Step::Ready) => {
                    got[i] = Some(Default::default())
                }
                Event::Frame(_, FromRole::Heartbeat) => {}
                Event::Frame(i, FromRole::Error(e)) => {
                    self.blame_a_stopped_peer(roles, i);
                    self.outcomes[i] = Some(Outcome::Failed(e.clone()));
                    self.failed = Some(e);
                    return None;
                }
                Event::Frame(i, other) => {
                    self.failed = Some(format!(
                        "the {} answered out of turn: {other:?}",
                        roles[i].label
                    ));
                    return None;
                }
                Event::Hung(i, why) => {
                    self.failed = Some(format!("{} {why}", whose(roles, i)));
                    return None;
                }
                Event::Killed(i, signal) => {
                    self.failed = Some(killed(roles, i, signal));
                    return None;
                }
                Event::ServiceDown(_, why) => {
                    self.died = Some(why);
                    return None;
                }
                Event::Ended(i, bad) => {
                    let why = self.why_gone(roles, i, bad);
                    self.failed = Some(why);
                    return None;
                }
            }
        }
        Some(got.into_iter().flatten().collect())
    }

    /// From Go to the last result.
    fn run(&mut self, roles: &mut [Started], events: &Receiver<Event>, bounds: &Bounds) {
        let deadline = bounds.run.map(Deadline::after);
        // Once roles are told to stop, each has the timeout (a write in flight, its END) and a
        // second to report; one blocked in its library past that is ended.
        let mut stop_deadline: Option<Deadline> = None;
        while self.outcomes.iter().any(Option::is_none) {
            if super::stop_requested() && !self.stopped {
                self.interrupted = true;
                self.stop_drivers(roles);
            }
            if self.stopped && stop_deadline.is_none() {
                stop_deadline = Some(Deadline::after(bounds.phase + Duration::from_secs(1)));
            }
            if deadline.is_some_and(|d| d.expired()) {
                let bound = bounds.run.unwrap_or_default().as_secs_f64();
                self.end_the_rest(roles, |label| {
                    format!("{label} was still running {bound:.1} s after the start, past the case's length and 3x --timeout; msgperf ended it")
                });
            } else if stop_deadline.is_some_and(|d| d.expired()) {
                let bound = (bounds.phase + Duration::from_secs(1)).as_secs_f64();
                self.end_the_rest(roles, |label| {
                    format!("{label} did not stop within {bound:.1} s of being told to; msgperf ended it")
                });
            }
            let Ok(ev) = events.recv_timeout(Duration::from_millis(50)) else {
                continue;
            };
            match ev {
                Event::Frame(i, FromRole::Result(report)) => {
                    let failed = match report.as_ref() {
                        Report::Case(r) => r.error.clone(),
                        _ => None,
                    };
                    self.outcomes[i] = Some(Outcome::Reported(report));
                    if let Some(e) = failed {
                        self.blame_a_stopped_peer(roles, i);
                        self.failed
                            .get_or_insert_with(|| format!("{}: {e}", roles[i].label));
                        // The case has failed: the driving roles end it now rather than at
                        // its length, and every other role still reports what it measured.
                        self.stop_drivers(roles);
                    }
                }
                Event::Frame(i, FromRole::Error(e)) => {
                    self.blame_a_stopped_peer(roles, i);
                    self.failed.get_or_insert_with(|| e.clone());
                    self.outcomes[i] = Some(Outcome::Failed(e));
                    self.stop_drivers(roles);
                }
                Event::Frame(..) => {}
                // Gone now (the runner killed it, or its process is dying), though its
                // connection may stay open while the kernel tears it down.
                Event::Hung(i, why) => self.gone(roles, i, format!("{} {why}", whose(roles, i))),
                Event::Killed(i, signal) => self.gone(roles, i, killed(roles, i, signal)),
                Event::ServiceDown(_, why) => {
                    // No END can reach a reader through a broker that is gone: every role
                    // stops (a client that retries a dead broker in silence, as Kafka's
                    // does, would wait out its timeout) and reports what it measured.
                    self.died.get_or_insert(why);
                    self.stop_roles(roles, true);
                }
                Event::Ended(i, bad) => {
                    if self.outcomes[i].is_some() {
                        continue;
                    }
                    let why = self.why_gone(roles, i, bad);
                    self.gone(roles, i, why);
                }
            }
        }
    }

    /// Role `i` failed (a peer that did not answer, as a rule): where another role's process
    /// is stopped (SIGSTOP, a debugger) before the watchdog has judged it hung, that is the
    /// cause, and the error names it first.
    fn blame_a_stopped_peer(&mut self, roles: &[Started], i: usize) {
        if self.died.is_some() {
            return;
        }
        let own = std::process::id();
        let stopped = (0..roles.len()).find(|&j| {
            let pid = roles[j].handle.pid();
            j != i
                && self.outcomes[j].is_none()
                && pid != own
                && matches!(crate::sys::process_state(pid), Some('T' | 't'))
        });
        if let Some(j) = stopped {
            self.died = Some(format!(
                "{} was stopped (SIGSTOP or a debugger)",
                whose(roles, j)
            ));
        }
    }

    /// Ends every role that has not reported, saying why (`why` of its label).
    fn end_the_rest(&mut self, roles: &mut [Started], why: impl Fn(&str) -> String) {
        for (i, r) in roles.iter_mut().enumerate() {
            if self.outcomes[i].is_none() {
                r.handle.kill();
                let why = why(&r.label);
                self.died.get_or_insert(why.clone());
                self.outcomes[i] = Some(Outcome::Failed(why));
            }
        }
    }

    /// Role `i` is gone before its result: the case failed, and the driving roles stop so that
    /// every other role ends its streams and reports.
    fn gone(&mut self, roles: &mut [Started], i: usize, why: String) {
        if self.outcomes[i].is_some() {
            return;
        }
        self.died.get_or_insert(why.clone());
        self.outcomes[i] = Some(Outcome::Failed(why));
        self.stop_drivers(roles);
    }

    fn stop_drivers(&mut self, roles: &mut [Started]) {
        self.stop_roles(roles, false);
    }

    /// Stops the driving roles still running, and with `readers_too` the others as well.
    fn stop_roles(&mut self, roles: &mut [Started], readers_too: bool) {
        self.stopped = true;
        for (i, r) in roles.iter_mut().enumerate() {
            if (r.drives || readers_too) && self.outcomes[i].is_none() {
                let _ = r.handle.send(&ToRole::Stop);
                r.handle.stop();
            }
        }
    }

    /// Why role `i`'s connection ended before it reported.
    fn why_gone(&mut self, roles: &mut [Started], i: usize, bad: Option<String>) -> String {
        let whose = whose(roles, i);
        let r = &mut roles[i];
        if let Some(b) = bad {
            r.handle.kill();
            return format!("{whose} broke the control protocol: {b}");
        }
        match r.handle.finish(Duration::from_secs(2)) {
            Some(why) => format!("{whose} died: {why}"),
            None => format!("{whose} ended without a result"),
        }
    }
}

/// How errors name role `i`: `the subscriber 2 (pid 123)`.
fn whose(roles: &[Started], i: usize) -> String {
    let r = &roles[i];
    let pid = r.handle.pid();
    if pid == std::process::id() {
        format!("the {} (a thread)", r.label)
    } else if pid == 0 {
        format!("the {}", r.label)
    } else {
        format!("the {} (pid {pid})", r.label)
    }
}

/// Role `i`'s process is dying from `signal`.
fn killed(roles: &[Started], i: usize, signal: i32) -> String {
    format!("{} died: killed by signal {signal}", whose(roles, i))
}
