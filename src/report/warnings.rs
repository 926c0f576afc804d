//! Warnings, hyperfine-style: each says what looks wrong and how to fix it.

use super::summary::{CaseSummary, Distribution};
use crate::result::{CaseResult, Environment, Metric, Placement};
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Warning {
    FewSamples {
        samples: u64,
    },
    SlowStart {
        ratio: f64,
    },
    Wide {
        p99_over_p50: f64,
        pinned: bool,
    },
    Bimodal {
        low_ns: u64,
        high_ns: u64,
        pinned: bool,
        polling: bool,
    },
    BusyCpu {
        cpus: String,
        pct: f64,
    },
    NearClock {
        figure_ns: u64,
        clock_ns: f64,
    },
    Losses {
        lost: u64,
        pct: f64,
    },
    CpuMoved {
        role: String,
        cpus: Vec<usize>,
    },
    Unpinned,
    Interrupted,
    RateNotHeld {
        target: f64,
        achieved: f64,
    },
    /// Several readers spin on one CPU: they take turns in scheduler time slices.
    SpinnersShareCpu {
        readers: usize,
    },
    NoFloor {
        why: String,
    },
    /// One-way samples that came out negative once clocks were corrected.
    Negative {
        count: u64,
        /// How far below zero the median of them and the lowest came.
        median_ns: u64,
        most_ns: u64,
        bound_ns: u64,
    },
    /// Percentiles smaller than the clock bound of a case across hosts.
    WithinClockBound {
        bound_ns: u64,
        p50_ns: u64,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::FewSamples { samples } => write!(f, "only {samples} samples: tail percentiles are not shown; measure longer with --duration or --count"),
            Warning::SlowStart { ratio } => write!(f, "the first 100 ms were {ratio:.1}x slower than the rest: discard them with --warmup 1s"),
            Warning::Wide { p99_over_p50, pinned: false } => write!(f, "p99 is {p99_over_p50:.0}x p50: a very wide distribution; pin the roles (--placement) and stop other programs"),
            Warning::Wide { p99_over_p50, pinned: true } => write!(f, "p99 is {p99_over_p50:.0}x p50: a very wide distribution although the roles were pinned; stop other programs, or measure longer to see whether it lasts"),
            Warning::Bimodal { low_ns, high_ns, pinned, polling } => {
                let (lo, hi) = (*low_ns as f64 / 1e3, *high_ns as f64 / 1e3);
                if *polling {
                    write!(f, "two modes, near {lo:.1} us and {hi:.1} us: some messages waited for a CPU that another role held")
                } else if *pinned {
                    write!(f, "two modes, near {lo:.1} us and {hi:.1} us: some messages found the reader awake, others had to wake it; compare with --poll")
                } else {
                    write!(f, "two modes, near {lo:.1} us and {hi:.1} us: the roles may have moved between CPUs; pin them with --placement")
                }
            }
            Warning::BusyCpu { cpus, pct } => write!(f, "other programs used {pct:.0}% of CPUs {cpus} during the case: stop them or pin elsewhere with --pin"),
            Warning::NearClock { figure_ns, clock_ns } => write!(f, "the figure ({figure_ns} ns) is within 10x of the clock's resolution or read cost ({clock_ns:.0} ns): treat it as approximate"),
            Warning::NoFloor { why } => write!(f, "{why}; no ratio to the floor is shown"),
            Warning::Negative { count, median_ns, most_ns, bound_ns } => write!(f, "{count} one-way samples came out negative (median -{:.1} us, down to -{:.1} us; the clock bound is {:.1} us): the hosts' clocks moved against each other more than measured, or the path is asymmetric; they rank at 0 in the one-way figures and are kept as they came in `one_way_below_zero_ns`", *median_ns as f64 / 1e3, *most_ns as f64 / 1e3, *bound_ns as f64 / 1e3),
            Warning::WithinClockBound { bound_ns, p50_ns } => write!(f, "p50 ({:.1} us) is within the clock bound (± {:.1} us) of roles on other hosts: the one-way figures say little; compare round trips (pingpong), or give the hosts a better path for the control channel", *p50_ns as f64 / 1e3, *bound_ns as f64 / 1e3),
            Warning::SpinnersShareCpu { readers } => write!(f, "{readers} reading threads busy-poll on one CPU, so they take turns in scheduler time slices (milliseconds): use blocking reads (drop --poll, or --opt wait=block or spin-yield)"),
            Warning::Losses { lost, pct } => write!(f, "{lost} messages lost ({pct:.2}% of those sent to the readers): the transport dropped them or a best-effort queue was full; lower the rate, or use --delivery reliable on a transport that pushes back"),
            Warning::CpuMoved { role, cpus } => write!(f, "the {role} ran on CPUs {cpus:?}: it migrated; pin it with --placement"),
            Warning::Unpinned => write!(f, "roles were not pinned (--placement any): results flip between same-CPU and cross-CPU figures from run to run"),
            Warning::Interrupted => write!(f, "interrupted by Ctrl-C: the figures cover only what was measured before"),
            Warning::RateNotHeld { target, achieved } => write!(f, "the sender could not hold {target:.0} Hz (achieved {achieved:.0} msgs/s): lower --rate, or see the latency from intended send time for what the stall cost"),
        }
    }
}

/// Finds two separated peaks in a histogram's log-scale buckets, each holding 10% or more.
pub fn bimodal(h: &hdrhistogram::Histogram<u64>) -> Option<(u64, u64)> {
    let total = h.len();
    if total < 1000 {
        return None;
    }
    let buckets: Vec<(u64, u64)> = h
        .iter_log(h.min().max(1), 1.25)
        .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
        .collect();
    let big = |c: u64| c * 10 >= total;
    let mut peaks = Vec::new();
    for i in 0..buckets.len() {
        let c = buckets[i].1;
        let left = if i > 0 { buckets[i - 1].1 } else { 0 };
        let right = buckets.get(i + 1).map_or(0, |b| b.1);
        if big(c) && c >= left && c >= right {
            peaks.push(i);
        }
    }
    for w in peaks.windows(2) {
        let (a, b) = (w[0], w[1]);
        let valley = buckets[a..=b].iter().map(|x| x.1).min().unwrap_or(0);
        let smaller = buckets[a].1.min(buckets[b].1);
        if b > a + 1 && valley * 4 < smaller {
            return Some((buckets[a].0, buckets[b].0));
        }
    }
    None
}

pub fn for_case(case: &CaseResult, s: &CaseSummary, env: &Environment) -> Vec<Warning> {
    let mut w = Vec::new();
    if let Some(d) = &s.latency {
        latency_warnings(case, d, env, &mut w);
    }
    if let Some(why) = &case.floor_error {
        w.push(Warning::NoFloor { why: why.clone() });
    }
    let bound_ns = case
        .roles
        .iter()
        .filter_map(|r| r.host.as_ref()?.clock.as_ref().map(|c| c.bound_ns))
        .max();
    let negative: u64 = case.roles.iter().map(|r| r.counters.negative).sum();
    if negative > 0 {
        w.push(Warning::Negative {
            count: negative,
            median_ns: super::summary::merged(case, Metric::ONE_WAY_BELOW_ZERO)
                .map_or(0, |h| h.value_at_quantile(0.5)),
            most_ns: case
                .roles
                .iter()
                .map(|r| r.counters.most_negative_ns)
                .max()
                .unwrap_or(0),
            bound_ns: bound_ns.unwrap_or(0),
        });
    }
    let one_way = case.latency_kind.label != "round trip";
    if let (Some(bound_ns), Some(p50_ns), true) =
        (bound_ns, s.latency.as_ref().and_then(|d| d.p50_ns), one_way)
    {
        if p50_ns <= bound_ns {
            w.push(Warning::WithinClockBound { bound_ns, p50_ns });
        }
    }
    if let Some(pct) = case.other_load_pct.filter(|&p| p >= 20.0) {
        w.push(Warning::BusyCpu {
            cpus: s.cpus.clone(),
            pct,
        });
    }
    if s.lost > 0 {
        let received: u64 = case
            .roles
            .iter()
            .map(|r| r.counters.messages_received)
            .sum();
        w.push(Warning::Losses {
            lost: s.lost,
            pct: s.lost as f64 * 100.0 / (s.lost + received).max(1) as f64,
        });
    }
    let cfg = &case.config;
    let spins = cfg.wait == crate::result::Wait::Poll
        || cfg.options.get("wait").is_some_and(|w| w == "spin");
    // Each subscriber reads each publisher's channel on a thread of its own.
    let readers = cfg.pubs * cfg.subs;
    if spins && (cfg.pubs > 1 || cfg.subs > 1) && readers > 1 && cfg.cpus.1.is_some() {
        w.push(Warning::SpinnersShareCpu { readers });
    }
    if case.config.placement != Placement::Any {
        for r in &case.roles {
            if r.cpus_seen.len() > 1 {
                w.push(Warning::CpuMoved {
                    role: r.role.to_string(),
                    cpus: r.cpus_seen.clone(),
                });
            }
        }
    } else {
        w.push(Warning::Unpinned);
    }
    if case.interrupted {
        w.push(Warning::Interrupted);
    }
    if let (Some(target), Some(err)) = (s.rate_hz, s.rate_error_pct) {
        if err < -5.0 {
            w.push(Warning::RateNotHeld {
                target,
                achieved: target * (1.0 + err / 100.0),
            });
        }
    }
    w
}

fn latency_warnings(case: &CaseResult, d: &Distribution, env: &Environment, w: &mut Vec<Warning>) {
    if d.samples < 1000 {
        w.push(Warning::FewSamples { samples: d.samples });
    }
    let read = match env.clock.shared_tsc_stamp_cost_ns {
        Some(ns) if case.stamps == crate::result::STAMPS_TSC => ns,
        _ => env.clock.read_cost_ns,
    };
    let clock = (env.clock.resolution_ns as f64).max(read);
    if (d.min_ns as f64) < clock * 10.0 {
        w.push(Warning::NearClock {
            figure_ns: d.min_ns,
            clock_ns: clock,
        });
    }
    if let (Some(p50), Some(p99)) = (d.p50_ns, d.p99_ns) {
        let r = p99 as f64 / p50.max(1) as f64;
        if r >= 10.0 {
            w.push(Warning::Wide {
                p99_over_p50: r,
                pinned: case.config.placement != Placement::Any,
            });
        }
    }
    for r in &case.roles {
        let iv = &r.interval_means_ns;
        if iv.len() >= 4 {
            let mut rest: Vec<u64> = iv[1..].to_vec();
            rest.sort_unstable();
            let median = rest[rest.len() / 2].max(1);
            let ratio = iv[0] as f64 / median as f64;
            if ratio >= 1.5 {
                w.push(Warning::SlowStart { ratio });
                break;
            }
        }
    }
    let h = case
        .roles
        .iter()
        .find_map(|r| r.histogram(case.latency_metric));
    if let Some((low_ns, high_ns)) = h.as_ref().and_then(bimodal) {
        w.push(Warning::Bimodal {
            low_ns,
            high_ns,
            pinned: case.config.placement != Placement::Any,
            polling: case.config.wait == crate::result::Wait::Poll,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_separate_modes_are_found_and_one_is_not() {
        let mut h =
            hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n(16_000, 5_000).unwrap();
        h.record_n(16_500, 1_000).unwrap();
        assert_eq!(bimodal(&h), None);
        h.record_n(90_000, 4_000).unwrap();
        let (lo, hi) = bimodal(&h).unwrap();
        assert!(lo < 20_000 && hi > 80_000, "{lo} {hi}");
    }
}
