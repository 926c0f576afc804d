//! Room `plan`: from what the user asked (raw options) to a validated list of cases. Every
//! refusal happens here, before anything starts, in one line that names the fix.

pub mod scenario;

use crate::result::{CaseConfig, Placement, Wait};
use crate::sys;
use crate::transport;
use crate::workload;
use std::collections::BTreeMap;
use std::time::Duration;

/// What `msgperf run` was asked, before validation.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub workload: String,
    pub transports: Vec<String>,
    pub sizes: Vec<usize>,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub warmup: Duration,
    pub poll: bool,
    pub confirm: bool,
    pub checksum: bool,
    /// Open-loop send rates, one case each (None: as fast as possible).
    pub rates_hz: Vec<Option<f64>>,
    pub timeout: Duration,
    pub placement: Option<Placement>,
    pub pin: Option<Vec<usize>>,
    pub threads: bool,
    pub options: BTreeMap<String, String>,
    /// The passive role is a `msgperf serve` at this address.
    pub connect: Option<String>,
    /// Publishers and subscribers (pubsub).
    pub pubs: usize,
    pub subs: usize,
    /// None: as the transport is (a reliable one is checked strictly, others count losses).
    pub delivery: Option<Delivery>,
    pub history: History,
    /// The first subscriber spends this long on every message.
    pub slow_subscriber: Option<Duration>,
}

/// What a slow reader does to the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Delivery {
    /// Nothing may be lost: a slow reader pushes back, and any loss fails the case.
    Reliable,
    /// The writer never waits for a slow reader where the transport can drop; losses are
    /// counted per reader.
    BestEffort,
}

/// Which messages a reader gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum History {
    /// Every message, in order.
    #[default]
    Fifo,
    /// The newest message; older unread ones are overwritten (counted).
    Latest,
}

impl Default for RunRequest {
    fn default() -> Self {
        RunRequest {
            workload: String::new(),
            transports: Vec::new(),
            sizes: vec![64],
            count: None,
            duration: None,
            warmup: Duration::from_millis(200),
            poll: false,
            confirm: false,
            checksum: false,
            rates_hz: vec![None],
            timeout: Duration::from_secs(10),
            placement: None,
            pin: None,
            threads: false,
            options: BTreeMap::new(),
            connect: None,
            pubs: 1,
            subs: 1,
            delivery: None,
            history: History::Fifo,
            slow_subscriber: None,
        }
    }
}

/// The default measured window when neither `--count` nor `--duration` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(3);

/// CPUs of the active and the passive role (None: not pinned).
pub type RoleCpus = (Option<usize>, Option<usize>);

/// Resolves where the two roles run.
pub fn resolve_placement(
    placement: Option<Placement>,
    pin: Option<&[usize]>,
    remote_peer: bool,
) -> Result<(Placement, RoleCpus), String> {
    let allowed = sys::allowed_cpus();
    if let Some(p) = pin {
        for c in p {
            if !allowed.contains(c) {
                return Err(format!(
                    "--pin {c}: this process may only use CPUs {allowed:?}; pick from those"
                ));
            }
        }
        return match (p, remote_peer) {
            ([a], true) => Ok((Placement::Pinned, (Some(*a), None))),
            ([a, b], false) => Ok((Placement::Pinned, (Some(*a), Some(*b)))),
            (_, true) => {
                Err("--pin with --connect takes one CPU (the local role's): e.g. --pin 0".into())
            }
            _ => Err(
                "--pin takes two CPUs, the active role's and the passive role's: e.g. --pin 0,1"
                    .into(),
            ),
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
                return Err(format!(
                    "--placement cross-cpu needs two CPUs but this process may only use {allowed:?}: use --placement same-cpu"
                ))
            }
        },
        Placement::Pinned => return Err("--placement pinned is set by --pin a,b".into()),
    };
    Ok((placement, cpus))
}

/// Validates a run request into cases: one per transport and size, in that order.
pub fn cases(req: &RunRequest) -> Result<Vec<CaseConfig>, String> {
    let w = workload::find(&req.workload)?;
    if req.transports.is_empty() {
        return Err(
            "no transport given: add --transport, e.g. --transport uds (see `msgperf transports`)"
                .into(),
        );
    }
    if req.count == Some(0) {
        return Err("--count 0 measures nothing: give at least 1".into());
    }
    if req.duration.is_some_and(|d| d.is_zero()) {
        return Err("--duration 0 measures nothing: give e.g. --duration 5s".into());
    }
    if req.timeout.is_zero() {
        return Err("--timeout 0 would give up at once: give e.g. --timeout 10s".into());
    }
    let (placement, cpus) =
        resolve_placement(req.placement, req.pin.as_deref(), req.connect.is_some())?;
    let mut out = Vec::new();
    for name in &req.transports {
        let t = transport::find(name)?;
        for options in option_sets(&req.options) {
            transport::validate_options(t, &options)?;
            out.extend(cases_of(req, w, t, &options, placement, cpus)?);
        }
    }
    Ok(out)
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

fn cases_of(
    req: &RunRequest,
    w: &dyn workload::Workload,
    t: &dyn transport::Transport,
    options: &BTreeMap<String, String>,
    placement: Placement,
    cpus: RoleCpus,
) -> Result<Vec<CaseConfig>, String> {
    let name = t.name();
    let mut out = Vec::new();
    let latest = req.history == History::Latest;
    if latest && req.delivery == Some(Delivery::Reliable) {
        return Err("--history latest overwrites unread messages, so it cannot be --delivery reliable: use --delivery best-effort".into());
    }
    let best_effort = req.delivery == Some(Delivery::BestEffort) || latest;
    let mut options = options.clone();
    if req.delivery.is_some() || latest {
        for (k, v) in t.delivery_options(best_effort, latest)? {
            match options.get(&k) {
                Some(given) if *given != v => {
                    return Err(format!(
                        "--delivery/--history ask `{name}` for --opt {k}={v}, but --opt {k}={given} was given: drop one of them"
                    ))
                }
                _ => {
                    options.insert(k, v);
                }
            }
        }
    }
    let options = &options;
    if req.pubs == 0 || req.subs == 0 {
        return Err("--pubs and --subs take 1 or more".into());
    }
    let fans_out = req.pubs > 1 || req.subs > 1;
    if fans_out && w.name() != "pubsub" {
        return Err(format!(
            "--pubs and --subs are for the pubsub workload, not {}: write `msgperf run pubsub ...`",
            w.name()
        ));
    }
    if fans_out && req.connect.is_some() {
        return Err("--connect serves one publisher and one subscriber: drop --pubs/--subs, or let msgperf start the roles".into());
    }
    {
        let caps = t.capabilities_with(options);
        if req.pubs > 1 && !caps.many_peers {
            return Err(format!(
                "transport `{name}` connects one peer to a listener at a time, so a subscriber cannot take {} publishers: use --pubs 1, or uds, tcp, udp or shm",
                req.pubs
            ));
        }
        if fans_out && caps.native_fan_out > 0 && req.subs > caps.native_fan_out {
            return Err(format!(
                "transport `{name}`'s fan-out serves up to {} subscribers, not {}: use --opt fan-out=copy, or fewer --subs",
                caps.native_fan_out, req.subs
            ));
        }
        if req.connect.is_some() && !caps.cross_process {
            return Err(format!(
                "transport `{name}` joins threads of one process: it cannot --connect to a server"
            ));
        }
        for (&size, &rate_hz) in req
            .sizes
            .iter()
            .flat_map(|s| req.rates_hz.iter().map(move |r| (s, r)))
        {
            let case = CaseConfig {
                workload: w.name().to_string(),
                transport: t.name().to_string(),
                options: options.clone(),
                size_bytes: size,
                count: req.count,
                duration: if req.count.is_some() {
                    req.duration
                } else {
                    Some(req.duration.unwrap_or(DEFAULT_DURATION))
                },
                warmup: req.warmup,
                wait: if req.poll { Wait::Poll } else { Wait::Block },
                confirm: req.confirm,
                checksum: req.checksum,
                timeout: req.timeout,
                placement,
                cpus,
                threads: req.threads || !caps.cross_process,
                strict: match req.delivery {
                    Some(Delivery::Reliable) => true,
                    Some(Delivery::BestEffort) => false,
                    None => caps.reliable,
                },
                zero_copy: caps.zero_copy,
                latest: caps.latest_value,
                rate_hz,
                pubs: req.pubs,
                subs: req.subs,
                slow_subscriber: req.slow_subscriber,
            };
            w.check(&case, &caps)?;
            out.push(case);
        }
    }
    Ok(out)
}

/// The survey: every built-in transport, ping-pong at 64 B and 4 KiB and a 64 KiB stream, in
/// both pinned placements (one if the machine has one CPU).
pub fn survey(duration: Duration, warmup: Duration) -> Result<Vec<CaseConfig>, String> {
    let allowed = sys::allowed_cpus();
    let placements: &[Placement] = if allowed.len() >= 2 {
        &[Placement::SameCpu, Placement::CrossCpu]
    } else {
        &[Placement::SameCpu]
    };
    let mut out = Vec::new();
    for &placement in placements {
        for t in transport::REGISTRY {
            let caps = t.capabilities();
            for (workload, size) in [("pingpong", 64usize), ("pingpong", 4096), ("stream", 65536)] {
                let req = RunRequest {
                    workload: workload.into(),
                    transports: vec![t.name().into()],
                    sizes: vec![size.min(caps.max_message_bytes)],
                    count: None,
                    duration: Some(duration),
                    warmup,
                    poll: false,
                    confirm: false,
                    checksum: false,
                    rates_hz: vec![None],
                    timeout: Duration::from_secs(10),
                    placement: Some(placement),
                    pin: None,
                    threads: false,
                    options: BTreeMap::new(),
                    connect: None,
                    ..RunRequest::default()
                };
                out.extend(cases(&req)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> RunRequest {
        RunRequest {
            workload: "pingpong".into(),
            transports: vec!["uds".into(), "tcp".into()],
            sizes: vec![64, 4096],
            count: Some(100),
            duration: None,
            warmup: Duration::ZERO,
            poll: false,
            confirm: false,
            checksum: false,
            rates_hz: vec![None],
            timeout: Duration::from_secs(1),
            placement: Some(Placement::Any),
            pin: None,
            threads: false,
            options: BTreeMap::new(),
            connect: None,
            ..RunRequest::default()
        }
    }

    #[test]
    fn cases_cross_transports_and_sizes_in_order() {
        let c = cases(&req()).unwrap();
        let got: Vec<_> = c
            .iter()
            .map(|c| (c.transport.as_str(), c.size_bytes))
            .collect();
        assert_eq!(
            got,
            [("uds", 64), ("uds", 4096), ("tcp", 64), ("tcp", 4096)]
        );
        assert!(c.iter().all(|c| c.strict && c.cpus == (None, None)));
    }

    #[test]
    fn bad_requests_are_refused_with_the_fix() {
        let mut r = req();
        r.sizes = vec![8];
        assert!(cases(&r).unwrap_err().contains("--size 32 or more"));
        let mut r = req();
        r.transports = vec!["udp".into()];
        r.sizes = vec![100_000];
        assert!(cases(&r).unwrap_err().contains("smaller --size"));
        let mut r = req();
        r.options.insert("nodelay".into(), "maybe".into());
        assert!(cases(&r).unwrap_err().contains("takes no --opt"));
        let mut r = req();
        r.transports = vec!["tcp".into()];
        r.options.insert("nodelay".into(), "maybe".into());
        assert!(cases(&r).unwrap_err().contains("use one of true, false"));
        let mut r = req();
        r.confirm = true;
        assert!(cases(&r).unwrap_err().contains("--confirm"));
        let mut r = req();
        r.transports = vec!["carrier-pigeon".into()];
        assert!(cases(&r).unwrap_err().contains("unknown transport"));
    }

    #[test]
    fn inproc_always_runs_in_threads_and_udp_is_not_strict() {
        let mut r = req();
        r.transports = vec!["inproc".into(), "udp".into()];
        r.sizes = vec![64];
        let c = cases(&r).unwrap();
        assert!(c[0].threads && c[0].strict);
        assert!(!c[1].threads && !c[1].strict);
    }
}
