//! What else ran on the CPUs a case used: per-CPU busy time from /proc/stat before and after,
//! less the CPU time msgperf's own processes spent there (its roles and its helper threads).
//! Busy means time in programs (user, nice, system): interrupt and softirq time is mostly the
//! case's own traffic (loopback packets are processed in softirq, charged to no process), and
//! steal is the hypervisor's, neither of which another program on the machine took.

use std::collections::{BTreeMap, BTreeSet};

/// Busy and total ticks of each CPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuTicks(BTreeMap<usize, (u64, u64)>);

pub fn sample() -> CpuTicks {
    parse(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

/// Reads /proc/stat's per-CPU lines: `cpuN user nice system idle iowait irq softirq steal ...`.
fn parse(stat: &str) -> CpuTicks {
    let mut m = BTreeMap::new();
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(cpu) = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        let busy = v[0] + v[1] + v[2];
        // Steal is time the CPU did not have: it is neither busy nor available.
        let total = v[..7].iter().sum();
        m.insert(cpu, (busy, total));
    }
    CpuTicks(m)
}

/// Percent of the time of `cpus` that other programs used between two samples, given the CPU
/// time msgperf's own processes spent in between (`ours_ns`).
pub fn other_load_pct(
    before: &CpuTicks,
    after: &CpuTicks,
    cpus: &BTreeSet<usize>,
    ours_ns: u64,
) -> Option<f64> {
    let tick_ns = 1e9 / crate::sys::clock_ticks_per_s() as f64;
    let (mut busy, mut total) = (0.0, 0.0);
    for cpu in cpus {
        let (b, a) = (before.0.get(cpu)?, after.0.get(cpu)?);
        busy += a.0.saturating_sub(b.0) as f64 * tick_ns;
        total += a.1.saturating_sub(b.1) as f64 * tick_ns;
    }
    if total <= 0.0 {
        return None;
    }
    Some(((busy - ours_ns as f64).max(0.0) / total * 100.0).min(100.0))
}

/// Bytes and packets over these devices, each counter as named (`/proc/net/dev`): what
/// network transports put on the "wire", headers and acknowledgements included. The sum counts
/// each packet once where the devices are chosen so: loopback's sent packets alone on one
/// host (each loopback packet is counted once as sent); see `Hosts::wire_devices` across a bed.
pub fn wire(devices: &[(String, Count)]) -> Option<(u64, u64)> {
    let dev = std::fs::read_to_string("/proc/net/dev").ok()?;
    devices
        .iter()
        .try_fold((0, 0), |(bytes, packets), (name, count)| {
            let line = dev.lines().find(|l| {
                l.trim_start()
                    .strip_prefix(name.as_str())
                    .is_some_and(|r| r.starts_with(':'))
            })?;
            let f: Vec<u64> = line
                .split_once(':')?
                .1
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            // Received bytes and packets are fields 0 and 1, sent ones 8 and 9.
            let at = match count {
                Count::Received => 0,
                Count::Sent => 8,
            };
            Some((bytes + f.get(at)?, packets + f.get(at + 1)?))
        })
}

use super::hosts::Count;

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/stat with CPU 0's and 1's counters.
    fn stat(cpu0: [u64; 8], cpu1: [u64; 8]) -> String {
        let line = |n: usize, v: [u64; 8]| {
            format!(
                "cpu{n} {}\n",
                v.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        };
        format!("cpu 0 0 0 0 0 0 0 0\n{}{}", line(0, cpu0), line(1, cpu1))
    }

    #[test]
    fn a_busy_program_counts_and_interrupts_steal_and_our_own_time_do_not() {
        let ticks = crate::sys::clock_ticks_per_s();
        let ns = |t: u64| t * 1_000_000_000 / ticks;
        let cpus: BTreeSet<usize> = [0].into();
        let before = parse(&stat([0; 8], [0; 8]));
        // 100 ticks on CPU 0: 60 user, 10 system, 20 softirq, 10 idle; 50 stolen.
        let after = parse(&stat(
            [60, 0, 10, 10, 0, 0, 20, 50],
            [0, 0, 0, 100, 0, 0, 0, 0],
        ));
        // An idle machine: all of the programs' time was msgperf's own.
        let idle = other_load_pct(&before, &after, &cpus, ns(70)).unwrap();
        assert!(idle < 0.01, "{idle}");
        // A known busy program: 50 of the 70 program ticks were not ours.
        let busy = other_load_pct(&before, &after, &cpus, ns(20)).unwrap();
        assert!((busy - 50.0).abs() < 0.01, "{busy}");
        // The other CPU, all idle, is not asked about.
        let both: BTreeSet<usize> = [0, 1].into();
        let spread = other_load_pct(&before, &after, &both, ns(20)).unwrap();
        assert!((spread - 25.0).abs() < 0.01, "{spread}");
    }
}
