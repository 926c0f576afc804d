//! What else ran on the CPUs a case used: per-CPU busy time from /proc/stat before and after,
//! less the CPU time msgperf's own roles spent there.

use std::collections::{BTreeMap, BTreeSet};

/// Busy and total ticks of each CPU.
#[derive(Clone, Debug, Default)]
pub struct CpuTicks(BTreeMap<usize, (u64, u64)>);

pub fn sample() -> CpuTicks {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return CpuTicks::default();
    };
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
        // user nice system idle iowait irq softirq steal
        let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        let total = busy + v[3] + v[4];
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

/// Bytes and packets the loopback interface carried (each loopback packet is counted once as
/// sent): what network transports put on the "wire", headers and acknowledgements included.
pub fn loopback_tx() -> Option<(u64, u64)> {
    let dev = std::fs::read_to_string("/proc/net/dev").ok()?;
    let line = dev.lines().find(|l| l.trim_start().starts_with("lo:"))?;
    let f: Vec<u64> = line
        .split_once(':')?
        .1
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    Some((*f.get(8)?, *f.get(9)?))
}
