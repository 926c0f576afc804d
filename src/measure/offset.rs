//! Another host's clock against the runner's, from four-timestamp probes on the control
//! channel (NTP's on-wire method): the runner sends at t1, the far side receives at t2 and
//! answers at t3 on its clock, the runner receives at t4. Offset (far minus runner) is
//! ((t2-t1)+(t3-t4))/2, exact to within half the probe's round trip (t4-t1)-(t3-t2) when the
//! two directions take equally long; the lowest-delay probes are the ones to trust (NTP's
//! minimum-delay filter). Path asymmetry no probe can see.

use crate::result::ClockFit;

/// One probe's four timestamps, ns: t1 and t4 on the runner's clock, t2 and t3 on the far one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    pub t4: u64,
}

impl Probe {
    /// Far minus runner.
    pub fn offset_ns(&self) -> i64 {
        let (t1, t2, t3, t4) = (
            self.t1 as i128,
            self.t2 as i128,
            self.t3 as i128,
            self.t4 as i128,
        );
        (((t2 - t1) + (t3 - t4)) / 2) as i64
    }

    /// The round trip less the far side's time in hand.
    pub fn delay_ns(&self) -> u64 {
        let total = self.t4.saturating_sub(self.t1);
        total.saturating_sub(self.t3.saturating_sub(self.t2))
    }
}

/// The offset to apply: the lowest-delay probe's (None without probes).
pub fn estimate(probes: &[Probe]) -> Option<Probe> {
    probes.iter().copied().min_by_key(Probe::delay_ns)
}

/// Windows of this length each give their lowest-delay probe to the fit.
const WINDOW_NS: u64 = 1_000_000_000;

/// Fits `probes` (taken before, during and after the run) against the offset `used`: the
/// drift the windows show, and a bound on how far the true offset strayed from `used` over
/// the run. Windows whose best probe waited much longer than the best of all (a busy CPU
/// between send and answer) say little and are left out, so long as some remain; with the
/// offset moving linearly (a drift), the windows kept before and after the run bound it
/// inside.
pub fn fit(probes: &[Probe], used: i64) -> Option<ClockFit> {
    let best = estimate(probes)?;
    let min_delay = best.delay_ns();
    let mut windows: Vec<Probe> = Vec::new();
    let start = probes.iter().map(|p| p.t1).min()?;
    for p in probes {
        let w = (p.t1 - start) / WINDOW_NS;
        match windows.iter_mut().find(|q| (q.t1 - start) / WINDOW_NS == w) {
            Some(q) if p.delay_ns() < q.delay_ns() => *q = *p,
            Some(_) => {}
            None => windows.push(*p),
        }
    }
    let trusted = min_delay.saturating_mul(4).max(min_delay + 50_000);
    let kept: Vec<Probe> = windows
        .iter()
        .copied()
        .filter(|p| p.delay_ns() <= trusted)
        .collect();
    let drift_ppm = drift_ppm(&kept);
    // A window's probe may come early in it: the drift moves the offset on until its end.
    let within_window = (drift_ppm.abs() * WINDOW_NS as f64 / 1e6).ceil() as u64;
    let bound = kept
        .iter()
        .map(|p| p.offset_ns().abs_diff(used) + p.delay_ns().div_ceil(2))
        .max()
        .unwrap_or(min_delay.div_ceil(2))
        + within_window;
    Some(ClockFit {
        offset_ns: used,
        bound_ns: bound,
        drift_ppm,
        probes: probes.len() as u32,
        min_delay_ns: min_delay,
    })
}

/// The least-squares slope of offset against time, in parts per million: 0 with fewer than
/// two points, under half a second between them, or a change over the span smaller than the
/// points' own half delays (noise, not a drift).
fn drift_ppm(points: &[Probe]) -> f64 {
    let xs: Vec<f64> = points
        .iter()
        .map(|p| (p.t1 / 2 + p.t4 / 2) as f64)
        .collect();
    let ys: Vec<f64> = points.iter().map(|p| p.offset_ns() as f64).collect();
    let span =
        xs.iter().cloned().fold(f64::MIN, f64::max) - xs.iter().cloned().fold(f64::MAX, f64::min);
    if points.len() < 2 || span < 5e8 {
        return 0.0;
    }
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let slope = sxy / sxx;
    let noise = points
        .iter()
        .map(|p| p.delay_ns() as f64 / 2.0)
        .sum::<f64>()
        / n;
    if (slope * span).abs() <= noise {
        return 0.0;
    }
    slope * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe at runner time `t` to a clock `offset` ahead, `up` and `down` ns each way.
    fn probe(t: u64, offset: i64, up: u64, down: u64) -> Probe {
        let t2 = (t + up) as i64 + offset;
        Probe {
            t1: t,
            t2: t2 as u64,
            t3: t2 as u64 + 1_000,
            t4: t + up + 1_000 + down,
        }
    }

    #[test]
    fn a_symmetric_probe_gives_the_offset_exactly_and_its_delay() {
        let p = probe(5_000_000_000, 7_000_000_000, 20_000, 20_000);
        assert_eq!(p.offset_ns(), 7_000_000_000);
        assert_eq!(p.delay_ns(), 40_000);
        // Behind, as a time namespace set back would be.
        assert_eq!(
            probe(9_000_000_000, -3_000_000_000, 10, 10).offset_ns(),
            -3_000_000_000
        );
    }

    #[test]
    fn asymmetry_errs_by_half_of_it_within_the_bound() {
        let p = probe(5_000_000_000, 1_000, 90_000, 10_000);
        let err = p.offset_ns().abs_diff(1_000);
        assert_eq!(err, 40_000);
        let f = fit(&[p], p.offset_ns()).unwrap();
        assert!(err <= f.bound_ns, "{f:?}");
    }

    #[test]
    fn the_lowest_delay_probe_is_used_and_a_drift_is_seen_and_bounded() {
        // 20 ppm: the far clock gains 20 us per second, over 5 s; delays vary.
        let mut probes = Vec::new();
        for i in 0..50u64 {
            let t = 1_000_000_000 + i * 100_000_000;
            let offset = 500_000 + (t - 1_000_000_000) as i64 / 50_000;
            let up = 15_000 + (i * 7_919 % 40) * 1_000;
            probes.push(probe(t, offset, up, up));
        }
        let first = estimate(&probes[..10]).unwrap();
        let f = fit(&probes, first.offset_ns()).unwrap();
        assert!((f.drift_ppm - 20.0).abs() < 2.0, "{f:?}");
        // The offset moved by 100 us over the run: the bound covers it.
        let last_true = 500_000 + 4_900_000_000i64 / 50_000;
        assert!(last_true.abs_diff(f.offset_ns) <= f.bound_ns, "{f:?}");
        assert!(f.bound_ns < 200_000, "{f:?}");
        assert_eq!(f.probes, 50);
    }

    #[test]
    fn no_probes_no_fit() {
        assert!(fit(&[], 0).is_none());
    }
}
