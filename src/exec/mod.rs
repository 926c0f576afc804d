//! Room `exec`: where roles run. One way to run a case (`case.rs`): the workload's topology
//! says which roles exist and what each opens, the transport is set up once for the case, and
//! every role (a thread, a role process, a `msgperf serve` started by hand, or a role on another
//! host through a launcher, `hosts.rs`) is driven through one control protocol (`control.rs`,
//! `drive.rs`) on a channel of its own, never the one being measured. The floor runs the same way, as two roles. Every wait is bounded, and liveness is
//! the runner's (`runner.rs`).

mod case;
pub mod control;
mod drive;
pub mod environment;
mod error;
mod far_service;
mod floor;
pub mod hosts;
mod load;
pub mod role;
pub mod runner;
pub mod serve;
mod services;
mod watchdog;

use crate::result::{CaseConfig, CaseResult, FloorKind, FloorResult, WireCount};
use crate::sys;
use crate::transport::{self, FloorRoles};
use crate::workload;
use control::ControlAddr;
pub use error::ExecError;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

pub use crate::deadline::{stop_requested, STOP};

/// The msgperf binary, to start role processes with. MSGPERF_EXE names it when the caller is
/// not msgperf itself (the test suite).
pub fn own_executable() -> Result<std::path::PathBuf, ExecError> {
    crate::sys::own_executable()
        .map_err(|e| ExecError::os("cannot find msgperf's own executable to start a role", e))
}

pub use floor::measure as measure_floor;

/// A line to stdout at once; a closed stdout is not this room's concern.
fn say(s: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|_| o.flush());
}

/// Runs cases, measuring each one's floor in the same placement (cached per placement).
pub struct Runner {
    /// The roles that do not drive are at this `msgperf serve` (None: msgperf starts them).
    pub connect: Option<ControlAddr>,
    pub measure_floor: bool,
    /// Hosts roles may be placed on (`--host`); their namespaces live as long as the runner.
    pub hosts: hosts::Hosts,
    floors: HashMap<String, Option<FloorResult>>,
}

impl Runner {
    pub fn new(connect: Option<ControlAddr>, measure_floor: bool) -> Self {
        Runner {
            connect,
            measure_floor,
            hosts: hosts::Hosts::none(),
            floors: HashMap::new(),
        }
    }

    pub fn run_case(&mut self, case: &CaseConfig) -> CaseResult {
        let w = workload::find(&case.workload).expect("cases are validated");
        let (latency_kind, latency_metric) = w.latency(case);
        // A floor between hosts is a loop between them, where the transport's plain loop
        // crosses them.
        let at = self.measure_floor.then(|| self.floor_hosts(case)).flatten();
        let (floor, floor_error) = match at {
            Some(at) => match self.measure_floor_of(case, at) {
                Ok(f) => (f, None),
                Err(e) => (None, Some(e.to_string())),
            },
            _ => (None, None),
        };
        let mut result = CaseResult {
            key: case.key(),
            repetition: 1,
            config: case.clone(),
            latency_kind,
            latency_metric,
            roles: vec![],
            floor,
            floor_error,
            error: None,
            interrupted: false,
            other_load_pct: None,
            wire: None,
            fan_out: None,
            stamps: crate::result::STAMPS_MONOTONIC.into(),
        };
        // Interrupted during the floor: nothing is measured after the stop.
        if stop_requested() {
            result.interrupted = true;
            return result;
        }
        let t = transport::find(&case.transport).expect("cases are validated");
        let network = t.capabilities(&case.effective_options).cross_host;
        // Roles on this host count on loopback; on namespace hosts of this run, on the bed's
        // devices too; on hosts elsewhere, not at all (their links are not ours to read).
        let wire_devices = if !network || self.connect.is_some() {
            None
        } else if case.place.is_empty() {
            Some(vec![("lo".to_string(), hosts::Count::Sent)])
        } else {
            self.hosts.wire_devices(
                case.place
                    .values()
                    .flatten()
                    .map(|at| at.split(':').next().unwrap_or(at)),
            )
        };
        let wire_before = wire_devices.as_deref().and_then(load::wire);
        let before = load::sample();
        let usage_before = sys::process_and_children_cpu_ns();
        let run = case::run(case, self.connect.as_ref(), &self.hosts);
        let ours = sys::process_and_children_cpu_ns().saturating_sub(usage_before);
        let after = load::sample();
        result.wire = match (wire_before, wire_devices.as_deref().and_then(load::wire)) {
            (Some(b), Some(a)) => Some(WireCount {
                bytes: a.0.saturating_sub(b.0),
                packets: a.1.saturating_sub(b.1),
            }),
            _ => None,
        };
        let cpus: BTreeSet<usize> = [case.cpus.0, case.cpus.1].into_iter().flatten().collect();
        result.other_load_pct = if cpus.is_empty() {
            None
        } else {
            load::other_load_pct(&before, &after, &cpus, ours)
        };
        result.roles = run.roles;
        result.error = run.error;
        result.interrupted = run.interrupted || stop_requested();
        result.fan_out = run.fan_out;
        if run.tsc_stamps {
            result.stamps = crate::result::STAMPS_TSC.into();
        }
        result
    }

    /// The transport's plain loop at this case's size and placement, where one compares like
    /// with like (see `Workload::floor_kind`).
    pub fn floor(&mut self, case: &CaseConfig) -> Result<Option<FloorResult>, ExecError> {
        self.measure_floor_of(case, [None, None])
    }

    /// Where the case's floor runs: the driving role's host and the other's (None: here), the
    /// hosts its roles run on; None where it is not measured (a role elsewhere, and a plain
    /// loop that does not cross hosts).
    fn floor_hosts(&self, case: &CaseConfig) -> Option<[Option<hosts::Host>; 2]> {
        if case.place.is_empty() {
            return Some([None, None]);
        }
        let t = transport::find(&case.transport).expect("cases are validated");
        let w = workload::find(&case.workload).expect("cases are validated");
        let topology = w.topology(case, &t.capabilities(&case.effective_options));
        let host = |drives: bool| {
            topology
                .roles
                .iter()
                .find(|r| r.drives == drives)
                .and_then(|r| case::placed_on(case, r))
                .and_then(|(h, _)| self.hosts.get(h).cloned())
        };
        let at = [host(true), host(false)];
        let here = at.iter().all(Option::is_none);
        (here || t.floor().is_some_and(|f| f.crosses_hosts())).then_some(at)
    }

    /// As [`Runner::floor`], with its sides on `at` (the driving role's host, the other's;
    /// None: here).
    fn measure_floor_of(
        &mut self,
        case: &CaseConfig,
        at: [Option<hosts::Host>; 2],
    ) -> Result<Option<FloorResult>, ExecError> {
        let t = transport::find(&case.transport).expect("cases are validated");
        let w = workload::find(&case.workload).expect("cases are validated");
        let Some(kind) = w.floor_kind(case) else {
            return Ok(None);
        };
        if t.floor().is_none() {
            return Ok(None);
        }
        // Side 0 measures: a ping-pong's initiator (the driving role), a stream's reader.
        let [driver, other] = at;
        let sides = match kind {
            FloorKind::RoundTrip => [driver, other],
            FloorKind::Stream => [other, driver],
        };
        let names = sides.each_ref().map(|h| h.as_ref().map(|h| h.name.clone()));
        let key = format!(
            "{}/{kind:?}/{}/{:?}/{}/{:?}/{names:?}",
            case.transport, case.size_bytes, case.cpus, case.threads, case.effective_options
        );
        if let Some(v) = self.floors.get(&key) {
            return Ok(v.clone());
        }
        let roles = FloorRoles {
            cpus: case.cpus,
            warmup: case.warmup,
            duration: case
                .duration
                .unwrap_or(Duration::from_secs(1))
                .min(Duration::from_secs(3)),
            timeout: case.timeout,
            options: case.effective_options.clone(),
            between: None,
        };
        let threads = case.threads || !t.capabilities(&case.effective_options).cross_process;
        let hosts = sides.each_ref().map(Option::as_ref);
        let (v, between) = floor::measure(t, kind, case.size_bytes, &roles, threads, hosts)?;
        if stop_requested() {
            return Ok(None);
        }
        let v = Some(FloorResult {
            kind,
            samples: v.samples,
            rtt_min_ns: v.rtt_min_ns,
            rtt_p50_ns: v.rtt_p50_ns,
            rtt_mean_ns: v.rtt_mean_ns,
            msgs_per_s: v.msgs_per_s,
            bytes_per_s: v.bytes_per_s,
            rtt_histogram: v.rtt_histogram,
            between,
        });
        self.floors.insert(key, v.clone());
        Ok(v)
    }
}
