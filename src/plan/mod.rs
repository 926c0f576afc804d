//! Room `plan`: from what the user asked ([`RunOptions`], from the command line or a scenario
//! file) to a validated list of cases. Every refusal happens here, before anything starts, in one
//! line that names the fix: option values, delivery the transport cannot give, what a workload
//! cannot run.

pub mod options;

mod error;

pub use error::PlanError;
pub use options::{DeliveryArg, HistoryArg, OutputOptions, PlacementArg, RunOptions};

use crate::delivery::{Delivery, History, Reliability};
use crate::result::{CaseConfig, Placement, Wait};
use crate::sys;
use crate::transport;
use crate::workload;
use std::collections::BTreeMap;
use std::time::Duration;

/// The default measured window when neither `--count` nor `--duration` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(3);

/// Where a run's roles that do not drive are: a server's address, or its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlTarget {
    Address(String),
    Name(String),
}

/// A server name: what `serve --name` and `run --name` accept.
pub fn check_name(name: &str) -> Result<(), PlanError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(PlanError::BadValue(format!(
            "--name `{name}` is not a server name: use 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.` (e.g. --name demo)"
        )))
    }
}

/// CPUs of the driving roles and of the others (None: not pinned).
pub type RoleCpus = (Option<usize>, Option<usize>);

/// Resolves where the roles run.
pub fn resolve_placement(
    placement: Option<Placement>,
    pin: Option<&[usize]>,
    remote_peer: bool,
) -> Result<(Placement, RoleCpus), PlanError> {
    let allowed = sys::allowed_cpus();
    if let Some(p) = pin {
        for c in p {
            if !allowed.contains(c) {
                return Err(PlanError::Machine(format!(
                    "--pin {c}: this process may only use CPUs {allowed:?}; pick from those"
                )));
            }
        }
        return match (p, remote_peer) {
            ([a], true) => Ok((Placement::Pinned, (Some(*a), None))),
            ([a, b], false) => Ok((Placement::Pinned, (Some(*a), Some(*b)))),
            (_, true) => Err(PlanError::BadValue(
                "--pin with --connect takes one CPU (the local roles'): e.g. --pin 0".into(),
            )),
            _ => Err(PlanError::BadValue(
                "--pin takes two CPUs, the driving roles' and the others': e.g. --pin 0,1".into(),
            )),
        };
    }
    let placement = placement.unwrap_or(if allowed.len() >= 2 && !remote_peer {
        Placement::CrossCpu
    } else {
        Placement::SameCpu
    });
    let first = allowed.first().copied();
    let cpus = match placement {
        Placement::Any => (None, None),
        Placement::SameCpu => (first, if remote_peer { None } else { first }),
        Placement::CrossCpu if remote_peer => (first, None),
        Placement::CrossCpu => match allowed.get(1) {
            Some(&second) => (first, Some(second)),
            None => {
                return Err(PlanError::Machine(format!(
                    "--placement cross-cpu needs two CPUs but this process may only use {allowed:?}: use --placement same-cpu"
                )))
            }
        },
        Placement::Pinned => {
            return Err(PlanError::BadValue(
                "--placement pinned is set by --pin a,b".into(),
            ))
        }
    };
    Ok((placement, cpus))
}

/// The delivery a run asks for.
fn delivery_of(o: &RunOptions) -> Delivery {
    Delivery {
        reliability: o.delivery.map(|d| match d {
            DeliveryArg::Reliable => Reliability::Reliable,
            DeliveryArg::BestEffort => Reliability::BestEffort,
        }),
        history: match o.history {
            Some(HistoryArg::Latest) => History::KeepLast(1),
            _ => History::KeepAll,
        },
        durability: Default::default(),
    }
}

/// Validates a run into cases: one per transport, option set, size, rate and swept parameter,
/// in that order.
pub fn cases(o: &RunOptions) -> Result<Vec<CaseConfig>, PlanError> {
    let name = o.workload.as_deref().ok_or(PlanError::Missing(
        "no workload given: write `msgperf run WORKLOAD -t TRANSPORT` (see `msgperf transports` for both), or give --scenario FILE",
    ))?;
    let w = workload::find(name)?;
    let param_sets = param_sets(w, &o.params.0)?;
    // Without -t, each set of parameters runs over the workload's default transport for it.
    let defaulted = o.transports.is_empty();
    let mut transports = o.transports.clone();
    if defaulted {
        for t in param_sets.iter().filter_map(|p| w.default_transport(p)) {
            if !transports.iter().any(|x| x == t) {
                transports.push(t.to_string());
            }
        }
    }
    if transports.is_empty() {
        return Err(PlanError::Missing(
            "no transport given: add --transport NAME (see `msgperf transports`)",
        ));
    }
    if o.count == Some(0) {
        return Err(PlanError::BadValue(
            "--count 0 measures nothing: give at least 1".into(),
        ));
    }
    let duration = o.duration()?;
    if duration.is_some_and(|d| d.is_zero()) {
        return Err(PlanError::BadValue(
            "--duration 0 measures nothing: give e.g. --duration 5s".into(),
        ));
    }
    let interval = o.interval()?;
    o.repeat()?;
    let timeout = o.timeout()?;
    if timeout.is_zero() {
        return Err(PlanError::BadValue(
            "--timeout 0 would give up at once: give e.g. --timeout 10s".into(),
        ));
    }
    if timeout < MIN_TIMEOUT {
        return Err(PlanError::BadValue(format!(
            "--timeout {timeout:?} is shorter than a busy machine may keep a role off its CPU, \
             so it would end healthy cases: give {MIN_TIMEOUT:?} or more (e.g. --timeout 10s)"
        )));
    }
    if let Some(crate::plan::ControlTarget::Name(n)) = o.connect() {
        check_name(&n)?;
    }
    let (sizes, rates, warmup) = (o.sizes()?, o.rates()?, o.warmup()?);
    let remote = o.connect().is_some();
    let (placement, cpus) = resolve_placement(o.placement(), o.pin.as_deref(), remote)?;
    let delivery = delivery_of(o);
    let (hosts, place) = (o.hosts(), o.place());
    if remote && !place.is_empty() {
        return Err(PlanError::Conflict(
            "--place puts roles on hosts through launchers, --connect at a `msgperf serve`: use one of them".into(),
        ));
    }
    for (name, value) in &hosts {
        crate::result::place::Launcher::parse(name, value).map_err(PlanError::BadValue)?;
    }
    let fixed = w.fixed_work();
    if fixed && duration.is_some() {
        return Err(PlanError::Conflict(format!(
            "{} does a fixed amount of work (--n, and --count per pair for pairs): drop --duration",
            w.name()
        )));
    }
    let wait = if o.poll == Some(true) {
        Wait::Poll
    } else {
        Wait::Block
    };
    let run: Vec<&'static dyn transport::Transport> = transports
        .iter()
        .map(|name| transport::find(name))
        .collect::<Result<_, _>>()?;
    // Read once: every case is checked against the same machine.
    let machine = machine();
    let mut out = Vec::new();
    for (t, options) in run
        .iter()
        .copied()
        .zip(transport::options_for_each(&run, &o.options()).map_err(PlanError::BadValue)?)
    {
        for given in option_sets(&options) {
            transport::validate_options(t, &given).map_err(PlanError::BadValue)?;
            let mapping = t
                .map_delivery(&delivery, &given)
                .map_err(PlanError::Unsupported)?;
            let mut options = given.clone();
            for (k, v) in &mapping.options {
                match given.get(k) {
                    Some(g) if g != v => return Err(PlanError::Conflict(format!(
                        "--delivery/--history ask `{}` for --opt {k}={v}, but --opt {k}={g} was given: drop one of them",
                        t.name()
                    ))),
                    _ => {
                        options.insert(k.clone(), v.clone());
                    }
                }
            }
            let effective = transport::effective_options(t, &options);
            check_needs(t, &effective)?;
            let caps = t.capabilities(&effective);
            if remote && !caps.cross_process {
                return Err(PlanError::Unsupported(format!(
                    "transport `{}` joins threads of one process: it cannot --connect to a server",
                    t.name()
                )));
            }
            for &size in &sizes {
                for &rate_hz in &rates {
                    for params in param_sets
                        .iter()
                        .filter(|p| !defaulted || w.default_transport(p) == Some(t.name()))
                    {
                        let size = match w.message_size(params) {
                            None => size,
                            Some(_) if o.size.is_some() => {
                                return Err(PlanError::Conflict(
                                    "--payload TYPE:FORMAT sets the message size (its encoding's): drop --size, or sweep the type's count (array:100,array:1000)".into(),
                                ))
                            }
                            Some(sized) => sized.map_err(PlanError::BadValue)?,
                        };
                        let case = CaseConfig {
                            workload: w.name().to_string(),
                            transport: t.name().to_string(),
                            options: options.clone(),
                            effective_options: effective.clone(),
                            transport_note: t.note().map(str::to_string),
                            delivery,
                            delivery_mapping: mapping.settings.clone(),
                            size_bytes: size,
                            count: o.count,
                            duration: if o.count.is_some() || fixed {
                                duration
                            } else {
                                Some(duration.unwrap_or(DEFAULT_DURATION))
                            },
                            warmup: if fixed {
                                Duration::ZERO
                            } else {
                                warmup_of(warmup, &caps)
                            },
                            wait,
                            checksum: o.checksum == Some(true),
                            timeout,
                            interval,
                            placement,
                            place: place.clone(),
                            cpus,
                            threads: o.threads == Some(true) || !caps.cross_process,
                            strict: mapping.strict,
                            zero_copy: caps.zero_copy,
                            // A zero-copy transport's in-place read waits as `--opt wait` says; a
                            // library's waits only blocking.
                            read_in_place: caps.zero_copy
                                || (caps.reads_in_place && wait == Wait::Block),
                            latest: mapping.latest,
                            rate_hz,
                            pubs: o.pubs(),
                            subs: o.subs(),
                            params: shown_params(w, &o.params.0, params),
                            effective_params: params.clone(),
                        };
                        w.check(&case, &caps).map_err(PlanError::Unsupported)?;
                        check_rate(&case)?;
                        check_machine(&case, &w.topology(&case, &caps), &caps, &machine)?;
                        if remote {
                            check_remote(w, &case, &caps)?;
                        }
                        check_place(&case, &w.topology(&case, &caps), &caps, &hosts)?;
                        out.push(case);
                    }
                }
            }
        }
    }
    let starts_broker = |c: &CaseConfig| {
        c.effective_options
            .get("broker")
            .is_some_and(|b| b == "start")
    };
    if place.contains_key(BROKER) && !out.iter().any(starts_broker) {
        return Err(PlanError::BadValue(
            "--place broker=...: no transport of the run starts a broker for its cases (a brokered one does, unless --opt broker=URL names one)".into(),
        ));
    }
    Ok(out)
}

/// Refuses a `--place` that names a role the case does not have, a host no `--host` defines,
/// a list whose length is neither one nor the number of such roles, or a transport whose ends
/// cannot meet across hosts.
fn check_place(
    case: &CaseConfig,
    topology: &workload::Topology,
    caps: &transport::Capabilities,
    hosts: &BTreeMap<String, String>,
) -> Result<(), PlanError> {
    for (kind, list) in &case.place {
        if kind == BROKER {
            check_broker_place(case, list, hosts)?;
            continue;
        }
        let n = topology
            .roles
            .iter()
            .filter(|r| r.id.kind.label() == kind)
            .count();
        if n == 0 {
            let mut kinds: Vec<&str> = topology.roles.iter().map(|r| r.id.kind.label()).collect();
            kinds.dedup();
            return Err(PlanError::BadValue(format!(
                "--place {kind}=...: {} has no {kind}; its roles are {}",
                case.workload,
                kinds.join(", ")
            )));
        }
        if list.len() != 1 && list.len() != n {
            return Err(PlanError::BadValue(format!(
                "--place {kind}={}: {} hosts for {n} {kind} role(s): give one host for all, or one per role",
                list.join(","),
                list.len()
            )));
        }
        for at in list {
            let (host, cpu) = at.split_once(':').unwrap_or((at, ""));
            if host != crate::result::place::LOCAL && !hosts.contains_key(host) {
                return Err(PlanError::BadValue(format!(
                    "--place {kind}={at}: no host `{host}`: define it with --host {host}=LAUNCHER (or {host}=netns)"
                )));
            }
            if !cpu.is_empty() && cpu.parse::<usize>().is_err() {
                return Err(PlanError::BadValue(format!(
                    "--place {kind}={at}: `{cpu}` is not a CPU number: write e.g. {host}:1"
                )));
            }
        }
    }
    let far = case
        .place
        .iter()
        .filter(|(kind, _)| *kind != BROKER)
        .flat_map(|(_, list)| list)
        .any(|at| at.split(':').next() != Some(crate::result::place::LOCAL));
    if far && (!caps.cross_host || case.threads) {
        let can: Vec<&str> = transport::REGISTRY
            .iter()
            .filter(|t| {
                t.capabilities(&transport::effective_options(**t, &BTreeMap::new()))
                    .cross_host
            })
            .map(|t| t.name())
            .collect();
        return Err(PlanError::Unsupported(format!(
            "transport `{}` cannot join roles on different hosts: use one that can ({})",
            case.transport,
            can.join(", ")
        )));
    }
    Ok(())
}

/// The placeable name of the broker a brokered transport starts for a case.
const BROKER: &str = "broker";

/// A broker msgperf starts runs here, on a `netns` host, or on a host reached through a
/// launcher (a msgperf there starts and measures it); one the user runs is given with `--opt
/// broker=URL`.
fn check_broker_place(
    case: &CaseConfig,
    list: &[String],
    hosts: &BTreeMap<String, String>,
) -> Result<(), PlanError> {
    // It places the brokers of the run's transports that start one; the others have none.
    if case.effective_options.get("broker").map(String::as_str) != Some("start") {
        return Ok(());
    }
    let [at] = list else {
        return Err(PlanError::BadValue(format!(
            "--place broker={}: a case has one broker: give one host",
            list.join(",")
        )));
    };
    let host = at.split_once(':').map_or(at.as_str(), |(h, _)| h);
    match hosts.get(host) {
        Some(_) => Ok(()),
        None if host == crate::result::place::LOCAL => Ok(()),
        None => Err(PlanError::BadValue(format!(
            "--place broker={at}: no host `{host}`: define it with --host {host}=LAUNCHER or --host {host}=netns"
        ))),
    }
}

/// The workload's parameters for each of its cases: the values given (a swept one's, one per
/// case, in order) over the declared defaults. A parameter the workload does not take, or a
/// value its declaration refuses, is refused here.
fn param_sets(
    w: &dyn workload::Workload,
    given: &workload::Params,
) -> Result<Vec<workload::Params>, PlanError> {
    for key in given.keys() {
        if !w.params().iter().any(|p| p.key == key) {
            let takes = workload::declaring(key);
            return Err(PlanError::Unsupported(format!(
                "--{key} is for {}, not {}: drop it",
                takes.join(", "),
                w.name()
            )));
        }
    }
    let mut sets = vec![workload::Params::new()];
    for p in w.params() {
        let values: Vec<String> = match given.get(p.key) {
            Some(v) => p.values(v),
            None => p.default.map(str::to_string).into_iter().collect(),
        };
        for v in &values {
            p.check(v).map_err(PlanError::BadValue)?;
        }
        if values.is_empty() {
            continue;
        }
        sets = sets
            .into_iter()
            .flat_map(|set| {
                values.iter().map(move |v| {
                    let mut s = set.clone();
                    s.insert(p.key.to_string(), v.clone());
                    s
                })
            })
            .collect();
    }
    Ok(sets)
}

/// The parameters a case's tables name: those given, and those its workload always names.
fn shown_params(
    w: &dyn workload::Workload,
    given: &workload::Params,
    params: &workload::Params,
) -> workload::Params {
    params
        .iter()
        .filter(|(k, _)| {
            given.contains_key(*k)
                || w.params()
                    .iter()
                    .any(|p| p.key == k.as_str() && p.always_shown)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The shortest `--timeout`: a few of the scheduler's time slices, for which a loaded machine
/// may keep a ready role waiting.
const MIN_TIMEOUT: Duration = Duration::from_millis(10);

/// The bound on every wait when `--timeout` is not given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The length of the intervals roles keep histograms for when `--interval` is not given.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// msgperf's warm-up when `--warmup` is not given.
pub const DEFAULT_WARMUP: Duration = Duration::from_millis(200);

/// A case's warm-up: the one given, else msgperf's default or the longer one the transport
/// needs for its figures to settle.
pub fn warmup_of(given: Option<Duration>, caps: &transport::Capabilities) -> Duration {
    given.unwrap_or(DEFAULT_WARMUP.max(caps.warmup))
}

/// A `msgperf serve` plays one role: the case may have one that does not drive.
fn check_remote(
    w: &dyn workload::Workload,
    case: &CaseConfig,
    caps: &transport::Capabilities,
) -> Result<(), PlanError> {
    let roles = w.topology(case, caps).roles;
    let (drivers, others): (Vec<_>, Vec<_>) = roles.iter().partition(|r| r.drives);
    if drivers.len() == 1 && others.len() == 1 {
        return Ok(());
    }
    let kind = |v: &[&workload::RoleSpec], fallback: &str| {
        v.first()
            .map_or(fallback.to_string(), |r| r.id.kind.label().to_string())
    };
    Err(PlanError::Unsupported(format!(
        "--connect serves one {} and one {}: this case has {} and {} roles; drop --pubs/--subs, or let msgperf start the roles",
        kind(&drivers, "driving role"),
        kind(&others, "other role"),
        drivers.len(),
        others.len()
    )))
}

/// Refuses a transport whose broker msgperf would start but this machine lacks, at once and
/// once (not after the broker's start times out, in every case).
fn check_needs(
    t: &dyn transport::Transport,
    effective: &transport::Options,
) -> Result<(), PlanError> {
    // A broker given by URL runs elsewhere: nothing of it is needed here.
    if effective.get("broker").is_some_and(|b| b != "start") {
        return Ok(());
    }
    let missing: Vec<transport::Need> = t
        .needs()
        .into_iter()
        .filter(|n| !n.present && n.to_run)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let what: Vec<&str> = missing.iter().map(|n| n.what.as_str()).collect();
    let get: Vec<String> = missing.iter().map(|n| n.get.command()).collect();
    let elsewhere = if t.options().iter().any(|o| o.key == "broker") {
        " (or use a broker that runs elsewhere: --opt broker=URL)"
    } else {
        ""
    };
    Err(PlanError::Machine(format!(
        "`{}` needs {}, which this machine does not have: {}{elsewhere}",
        t.name(),
        what.join(" and "),
        get.join(", then ")
    )))
}

/// A paced case whose schedule sends nothing within its measured window.
fn check_rate(case: &CaseConfig) -> Result<(), PlanError> {
    match (case.rate_hz, case.duration) {
        (Some(hz), Some(d)) if case.count.is_none() && hz * d.as_secs_f64() < 1.0 => {
            Err(PlanError::BadValue(format!(
                "--rate {hz} Hz sends one message every {:.3} s, none within --duration {}: raise --rate to at least {:.3} Hz or lengthen --duration",
                1.0 / hz,
                crate::units::format_duration(d),
                1.0 / d.as_secs_f64()
            )))
        }
        _ => Ok(()),
    }
}

/// What this machine allows a case's roles, read once per check.
#[derive(Clone, Copy, Debug)]
pub struct Machine {
    /// The hard descriptor limit (the runner raises its soft limit up to it).
    pub descriptors: u64,
    /// Tasks it can still start.
    pub tasks: Option<u64>,
    /// MemAvailable, in bytes.
    pub memory: Option<u64>,
    /// This process's resident memory: what each role process, a copy of msgperf, starts at.
    pub role_memory: Option<u64>,
}

pub fn machine() -> Machine {
    Machine {
        descriptors: sys::fd_limit().map_or(u64::MAX, |(_, hard)| hard),
        tasks: sys::tasks_free(),
        memory: sys::memory_available(),
        role_memory: sys::resident_bytes(),
    }
}

/// Refuses a case whose roles this machine cannot start (descriptors, tasks, memory), before
/// anything starts, naming the limit and the fix.
fn check_machine(
    case: &CaseConfig,
    topology: &workload::Topology,
    caps: &transport::Capabilities,
    m: &Machine,
) -> Result<(), PlanError> {
    let n = topology.roles.len();
    let (runner, role) = topology.descriptors(caps);
    let descriptors = runner.max(role);
    if descriptors > m.descriptors {
        return Err(PlanError::Machine(format!(
            "{n} roles need about {descriptors} descriptors, over this process's limit of {} (ulimit -Hn): raise it, or run fewer roles",
            m.descriptors
        )));
    }
    // A role process, and a thread of the runner for its control channel and one for its
    // stderr; a role thread is one task.
    let tasks = if case.threads { n } else { 3 * n } as u64;
    if let Some(free) = m.tasks.filter(|&free| tasks > free) {
        return Err(PlanError::Machine(format!(
            "{n} roles need about {tasks} tasks, over the {free} this machine can still start ({}): raise the limit, or run fewer roles",
            sys::task_limits()
        )));
    }
    if let (false, Some(avail), Some(each)) = (case.threads, m.memory, m.role_memory) {
        let need = n as u64 * each;
        if need > avail {
            return Err(PlanError::Machine(format!(
                "{n} role processes of about {} MiB each need {} MiB, over the {} MiB this machine has available (MemAvailable): run fewer roles, or --threads",
                each >> 20,
                need >> 20,
                avail >> 20
            )));
        }
    }
    Ok(())
}

/// `--opt wait=spin,block --opt buffer=queue,latest`: every combination, in order.
pub fn option_sets(options: &BTreeMap<String, String>) -> Vec<BTreeMap<String, String>> {
    let mut sets = vec![BTreeMap::new()];
    for (k, v) in options {
        let values: Vec<&str> = v
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .collect();
        sets = sets
            .into_iter()
            .flat_map(|set| {
                values.iter().map(move |x| {
                    let mut s = set.clone();
                    s.insert(k.clone(), x.to_string());
                    s
                })
            })
            .collect();
    }
    sets
}

/// The survey: each workload's survey sizes (ping-pong at 64 B and 4 KiB, a 64 KiB stream) on
/// each of `transports` (every one built in if none is named), at every placement this machine
/// allows.
pub fn survey(
    transports: &[String],
    duration: Duration,
    warmup: Duration,
) -> Result<Vec<CaseConfig>, PlanError> {
    for name in transports {
        transport::find(name)?;
    }
    let allowed = sys::allowed_cpus();
    let placements: &[PlacementArg] = if allowed.len() >= 2 {
        &[PlacementArg::SameCpu, PlacementArg::CrossCpu]
    } else {
        &[PlacementArg::SameCpu]
    };
    let mut out = Vec::new();
    for &placement in placements {
        for t in transport::REGISTRY
            .iter()
            .filter(|t| transports.is_empty() || transports.iter().any(|n| n == t.name()))
        {
            let max = t.capabilities(&BTreeMap::new()).max_message_bytes;
            let points = workload::REGISTRY
                .iter()
                .flat_map(|w| w.survey_sizes().iter().map(move |&s| (w.name(), s)));
            for (workload, size) in points {
                let o = RunOptions {
                    workload: Some(workload.into()),
                    transports: vec![t.name().into()],
                    size: Some(size.min(max).to_string()),
                    duration: Some(format!("{}ns", duration.as_nanos())),
                    warmup: Some(format!("{}ns", warmup.as_nanos())),
                    placement: Some(placement),
                    ..RunOptions::default()
                };
                out.extend(cases(&o)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> RunOptions {
        RunOptions {
            workload: Some("pingpong".into()),
            transports: vec!["uds".into(), "tcp".into()],
            size: Some("64,4k".into()),
            count: Some(100),
            warmup: Some("0s".into()),
            timeout: Some("1s".into()),
            placement: Some(PlacementArg::Any),
            ..RunOptions::default()
        }
    }

    #[test]
    fn cases_cross_transports_and_sizes_in_order() {
        let c = cases(&opts()).unwrap();
        let got: Vec<_> = c
            .iter()
            .map(|c| (c.transport.as_str(), c.size_bytes))
            .collect();
        assert_eq!(
            got,
            [("uds", 64), ("uds", 4096), ("tcp", 64), ("tcp", 4096)]
        );
        assert!(c.iter().all(|c| c.strict && c.cpus == (None, None)));
        // Every option is recorded, defaults included.
        assert_eq!(
            c[2].effective_options.get("nodelay").map(String::as_str),
            Some("true")
        );
        assert!(!c[2].delivery_mapping.is_empty());
    }

    #[test]
    fn readers_read_in_place_where_the_transport_hands_over_its_buffer() {
        let read_in_place = |transport: &str, zero_copy: bool, poll: bool| {
            let mut o = opts();
            o.workload = Some("stream".into());
            o.transports = vec![transport.into()];
            o.poll = Some(poll);
            if zero_copy {
                o.opts = vec![("zero-copy".into(), "true".into())];
            }
            cases(&o).unwrap()[0].read_in_place
        };
        assert!(
            !read_in_place("uds", false, false),
            "a socket's reader copies"
        );
        assert!(!read_in_place("shm", false, false));
        // A zero-copy reader waits its own way (--opt wait), polling or not.
        assert!(read_in_place("shm", true, false) && read_in_place("shm", true, true));
    }

    #[test]
    fn a_case_this_machine_cannot_start_is_refused_naming_the_limit() {
        let mut o = opts();
        o.workload = Some("pubsub".into());
        o.transports = vec!["uds".into()];
        o.size = Some("64".into());
        o.count = None;
        o.subs = Some(20);
        // Planned on this machine (20 role processes fit it, even at a test binary's size),
        // then checked against made-up ones.
        let case = &cases(&o).unwrap()[0];
        let w = workload::find("pubsub").unwrap();
        let t = transport::find("uds").unwrap();
        let caps = t.capabilities(&case.effective_options);
        let topology = w.topology(case, &caps);
        // A set-up that holds a descriptor for each of the 20 channels (shm's segments) needs
        // them in the runner too.
        let holding = transport::Capabilities {
            set_up_holds_descriptors: true,
            ..caps
        };
        assert_eq!(
            topology.descriptors(&holding).0,
            topology.descriptors(&caps).0 + 20
        );
        let plenty = Machine {
            descriptors: 1 << 20,
            tasks: Some(1 << 20),
            memory: Some(1 << 40),
            role_memory: Some(10 << 20),
        };
        check_machine(case, &topology, &caps, &plenty).unwrap();
        let refused = |m: Machine| {
            check_machine(case, &topology, &caps, &m)
                .unwrap_err()
                .to_string()
        };
        let e = refused(Machine {
            descriptors: 100,
            ..plenty
        });
        assert!(
            e.contains("21 roles need about 127 descriptors") && e.contains("ulimit -Hn"),
            "{e}"
        );
        let e = refused(Machine {
            tasks: Some(50),
            ..plenty
        });
        assert!(e.contains("63 tasks, over the 50"), "{e}");
        let e = refused(Machine {
            memory: Some(100 << 20),
            ..plenty
        });
        assert!(
            e.contains("need 210 MiB, over the 100 MiB") && e.contains("--threads"),
            "{e}"
        );
        // As threads, a role costs a task and no process.
        let mut threads = case.clone();
        threads.threads = true;
        check_machine(
            &threads,
            &topology,
            &caps,
            &Machine {
                memory: Some(1 << 20),
                tasks: Some(30),
                ..plenty
            },
        )
        .unwrap();
    }

    #[test]
    fn a_rate_that_sends_nothing_within_the_duration_is_refused() {
        let mut o = opts();
        o.workload = Some("stream".into());
        o.count = None;
        o.rate = Some("0.001hz".into());
        o.duration = Some("1s".into());
        let e = cases(&o).unwrap_err();
        assert!(matches!(e, PlanError::BadValue(_)), "{e}");
        assert!(
            e.to_string()
                .contains("none within --duration 1s: raise --rate to at least 1.000 Hz"),
            "{e}"
        );
        o.rate = Some("2hz".into());
        cases(&o).unwrap();
    }

    #[test]
    fn bad_requests_are_refused_with_the_fix() {
        let with = |f: &dyn Fn(&mut RunOptions)| {
            let mut o = opts();
            f(&mut o);
            cases(&o).unwrap_err().to_string()
        };
        assert!(with(&|o| o.size = Some("8".into())).contains("--size 32 or more"));
        assert!(with(&|o| {
            o.transports = vec!["udp".into()];
            o.size = Some("100000".into());
        })
        .contains("smaller --size"));
        assert!(with(&|o| {
            o.transports = vec!["uds".into()];
            o.opts = vec![("nodelay".into(), "maybe".into())];
        })
        .contains("has no option `nodelay`"));
        assert!(with(&|o| o.opts = vec![("capacity".into(), "1M".into())])
            .contains("no transport of this run (uds, tcp) has an option `capacity`"));
        assert!(with(&|o| o.opts = vec![("shm.wait".into(), "spin".into())])
            .contains("transport `shm` is not in this run (uds, tcp)"));
        assert!(with(&|o| o.opts = vec![("tcp.wait".into(), "spin".into())])
            .contains("transport `tcp` has no option `wait`"));
        assert!(with(&|o| {
            o.transports = vec!["tcp".into()];
            o.opts = vec![("nodelay".into(), "maybe".into())];
        })
        .contains("use one of true, false"));
        assert!(
            with(&|o| {
                o.params.0.insert("confirm".into(), "true".into());
            })
            .contains("--confirm is for stream, not pingpong: drop it"),
            "a parameter of another workload"
        );
        assert!(with(&|o| {
            o.workload = Some("spawn".into());
            o.transports = vec![];
            o.params.0.insert("n".into(), "10,x".into());
        })
        .contains("--n `x` is not a count"));
        for bad in ["0", "100001"] {
            assert!(
                with(&|o| {
                    o.workload = Some("stream".into());
                    o.params.0.insert("stamp-every".into(), bad.into());
                })
                .contains(&format!(
                    "--stamp-every `{bad}` is not a count: give whole numbers from 1 to 100000"
                )),
                "{bad}"
            );
        }
        assert!(
            with(&|o| o.transports = vec!["carrier-pigeon".into()]).contains("unknown transport")
        );
        // The kind of each refusal is typed, for callers that act on it.
        let kind = |f: &dyn Fn(&mut RunOptions)| {
            let mut o = opts();
            f(&mut o);
            cases(&o).unwrap_err()
        };
        assert!(matches!(
            kind(&|o| o.transports = vec!["carrier-pigeon".into()]),
            PlanError::Unknown(u) if u.name == "carrier-pigeon" && u.known.contains(&"tcp")
        ));
        assert!(matches!(
            kind(&|o| o.workload = None),
            PlanError::Missing(_)
        ));
        assert!(matches!(
            kind(&|o| o.count = Some(0)),
            PlanError::BadValue(_)
        ));
        assert!(matches!(
            kind(&|o| {
                o.params.0.insert("confirm".into(), "true".into());
            }),
            PlanError::Unsupported(_)
        ));
        for bad in ["1", "abc", "9T"] {
            let e = with(&|o| {
                o.transports = vec!["shm".into()];
                o.opts = vec![("capacity".into(), bad.into())];
            });
            assert!(
                e.contains("--opt capacity") && e.contains("e.g. 1M"),
                "{bad}: {e}"
            );
        }
        for bad in ["", "../../etc/passwd", &"x".repeat(300), ".hidden"] {
            let e = with(&|o| o.name = Some(bad.to_string()));
            assert!(e.contains("not a server name"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_option_goes_to_the_transports_that_have_it_or_to_the_one_it_names() {
        let mut o = opts();
        o.transports = vec!["uds".into(), "tcp".into(), "shm".into()];
        o.size = Some("64".into());
        o.opts = vec![
            ("nodelay".into(), "false".into()),
            ("wait".into(), "spin,block".into()),
            ("shm.wait".into(), "spin-yield".into()),
        ];
        let c = cases(&o).unwrap();
        let got: Vec<_> = c
            .iter()
            .map(|c| (c.transport.as_str(), c.options.clone()))
            .collect();
        let opt = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            got,
            [
                ("uds", opt(&[])),
                ("tcp", opt(&[("nodelay", "false")])),
                // The qualified key wins, so shm runs one case, not a sweep.
                ("shm", opt(&[("wait", "spin-yield")])),
            ]
        );
    }

    #[test]
    fn inproc_always_runs_in_threads_and_udp_is_not_strict() {
        let mut o = opts();
        o.transports = vec!["inproc".into(), "udp".into()];
        o.size = Some("64".into());
        let c = cases(&o).unwrap();
        assert!(c[0].threads && c[0].strict);
        assert!(!c[1].threads && !c[1].strict);
    }

    #[test]
    fn a_scenario_and_a_command_line_lay_over_each_other() {
        let file = RunOptions::parse_scenario(
            "workload = \"stream\"\ntransports = [\"uds\"]\nsize = \"1k\"\n[options]\nwait = \"spin\"\n[output]\ndetails = false\n",
            "t.toml",
        )
        .unwrap();
        let cli = RunOptions {
            size: Some("4k".into()),
            opts: vec![("capacity".into(), "1M".into())],
            ..RunOptions::default()
        };
        let m = cli.over(&file).unwrap();
        assert_eq!(m.workload.as_deref(), Some("stream"));
        assert_eq!(m.size.as_deref(), Some("4k"), "the command line wins");
        assert_eq!(m.options().len(), 2, "options merge key by key");
        assert_eq!(m.output.details, Some(false), "an explicit false is kept");
        let again = RunOptions::parse_scenario(&m.to_scenario(), "printed").unwrap();
        assert_eq!(again, m);
    }
}
