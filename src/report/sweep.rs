//! Rate sweeps: cases that differ only in their offered rate, read as one latency-versus-load
//! curve. The knee is the first rate past the curve's best point where p99 (from the intended
//! send time) exceeds twice that best; saturation is the highest rate achieved.

use super::summary::CaseSummary;
use std::fmt::Write;

#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    pub label: String,
    /// Points measured (paced ones and `max`).
    pub points: usize,
    pub best_p99_ns: u64,
    pub best_at_hz: f64,
    pub knee_hz: Option<f64>,
    pub saturation_msgs_per_s: f64,
}

fn key(s: &CaseSummary) -> String {
    format!(
        "{} {} {} {}",
        s.transport, s.options, s.workload, s.size_bytes
    )
}

/// The sweeps among `summaries`: groups of three or more paced points.
pub fn sweeps(summaries: &[CaseSummary]) -> Vec<Sweep> {
    let mut keys: Vec<String> = Vec::new();
    for s in summaries.iter().filter(|s| s.rate_hz.is_some()) {
        if !keys.contains(&key(s)) {
            keys.push(key(s));
        }
    }
    let mut out = Vec::new();
    for k in keys {
        let group: Vec<&CaseSummary> = summaries
            .iter()
            .filter(|s| key(s) == k && s.error.is_none())
            .collect();
        let mut paced: Vec<(f64, u64)> = group
            .iter()
            .filter_map(|s| Some((s.rate_hz?, s.latency_from_intended.as_ref()?.p99_ns?)))
            .collect();
        if paced.len() < 3 {
            continue;
        }
        paced.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (best_i, &(best_at_hz, best_p99_ns)) = paced
            .iter()
            .enumerate()
            .min_by_key(|(_, p)| p.1)
            .expect("three points");
        let knee_hz = paced[best_i..]
            .iter()
            .find(|p| p.1 > 2 * best_p99_ns)
            .map(|p| p.0);
        out.push(Sweep {
            label: k.trim().to_string(),
            points: group.len(),
            best_p99_ns,
            best_at_hz,
            knee_hz,
            saturation_msgs_per_s: group.iter().map(|s| s.msgs_per_s).fold(0.0, f64::max),
        });
    }
    out
}

pub fn render(sweeps: &[Sweep]) -> String {
    let mut out = String::new();
    for s in sweeps {
        let knee = s
            .knee_hz
            .map_or("no knee below saturation".to_string(), |k| {
                format!("knee at {k:.0} Hz")
            });
        let _ = writeln!(
            out,
            "sweep {}: {} points; p99 from intended send time is lowest ({:.1} us) at {:.0} Hz; {knee}; saturation {:.0} msgs/s delivered (all readers).",
            s.label, s.points, s.best_p99_ns as f64 / 1e3, s.best_at_hz, s.saturation_msgs_per_s
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::Distribution;

    fn point(rate: Option<f64>, p99_us: u64, achieved: f64) -> CaseSummary {
        let d = Distribution {
            samples: 10_000,
            min_ns: 1,
            mean_ns: 1.0,
            stdev_ns: 0.0,
            p50_ns: Some(1),
            p90_ns: Some(1),
            p99_ns: Some(p99_us * 1000),
            p99_9_ns: None,
            p99_99_ns: None,
            max_ns: p99_us * 1000,
        };
        CaseSummary {
            transport: "uds".into(),
            options: String::new(),
            workload: "stream".into(),
            size_bytes: 200,
            placement: "cross-cpu".into(),
            cpus: "0/1".into(),
            roles_as: "processes".into(),
            wait: "block".into(),
            latency_kind: "one-way".into(),
            latency_meaning: String::new(),
            latency: Some(d.clone()),
            msgs_per_s: achieved,
            mib_per_s: 0.0,
            floor_kind: None,
            floor_p50_ns: None,
            floor_mib_per_s: None,
            vs_floor: None,
            floor_note: None,
            lost: 0,
            duplicated: 0,
            reordered: 0,
            corrupted: 0,
            overwritten: 0,
            rate_hz: rate,
            rate_error_pct: None,
            latency_from_intended: rate.map(|_| d),
            send_lag: None,
            latency_reader_idle: None,
            latency_reader_busy: None,
            fan_out: None,
            wire_bytes_per_msg: None,
            wire_overhead_bytes_per_msg: None,
            one_way_bound_ns: None,
            roles: vec![],
            error: None,
            interrupted: false,
            params: String::new(),
            figures: vec![],
            marshalling: None,
            stopped_by: None,
        }
    }

    #[test]
    fn the_knee_is_where_p99_leaves_the_flat_part() {
        // Low rates pay the reader's wake-up (high), the middle is flat, then it climbs.
        let s = vec![
            point(Some(100.0), 90, 100.0),
            point(Some(1e3), 60, 1e3),
            point(Some(1e4), 20, 1e4),
            point(Some(5e4), 25, 5e4),
            point(Some(1e5), 70, 1e5),
            point(Some(2e5), 900, 1.5e5),
            point(None, 5000, 1.6e5),
        ];
        let w = sweeps(&s);
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].best_at_hz, w[0].best_p99_ns, w[0].knee_hz),
            (1e4, 20_000, Some(1e5))
        );
        assert_eq!(w[0].saturation_msgs_per_s, 1.6e5);
        assert_eq!(w[0].points, 7);
        assert!(render(&w).contains("knee at 100000 Hz"));
        // Two paced points are no sweep.
        assert!(sweeps(&s[..2]).is_empty());
    }
}
