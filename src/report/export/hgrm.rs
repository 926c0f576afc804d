//! `.hgrm`: the percentile distribution text that HdrHistogram's plotters read (the layout of
//! Java's `outputPercentileDistribution`), one file per case and role, values in microseconds.

use super::{case_slug, role_slug};
use crate::result::RunResult;
use hdrhistogram::Histogram;
use std::fmt::Write;

pub const FORMAT: super::Format = super::Format {
    name: "hgrm",
    about: "percentile files for HdrHistogram plotters, one per case and role (PATH: a directory)",
    writes: super::Writes::Directory(render),
};

fn render(run: &RunResult) -> super::Files<String> {
    let mut out = Vec::new();
    for (i, c) in run.cases.iter().enumerate() {
        for r in &c.roles {
            let Some(h) = r.histogram(c.latency_metric) else {
                continue;
            };
            let name = format!(
                "{:03}-{}-{}.hgrm",
                i + 1,
                case_slug(run, c).replace('/', "-"),
                role_slug(&r.role)
            );
            out.push((name, percentile_distribution(&h, 1e3).into_bytes()));
        }
    }
    Ok(out)
}

/// The distribution as Java's `outputPercentileDistribution(out, 5, scale)` prints it: five
/// steps per halving of the distance to 100%, values divided by `scale`.
pub fn percentile_distribution(h: &Histogram<u64>, scale: f64) -> String {
    let mut s = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value = v.value_iterated_to() as f64 / scale;
        if q < 1.0 {
            let _ = writeln!(
                s,
                "{value:12.3} {q:2.12} {total:10} {:14.2}",
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(s, "{value:12.3} {q:2.12} {total:10}");
        }
    }
    let _ = writeln!(
        s,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        h.mean() / scale,
        h.stdev() / scale
    );
    let _ = writeln!(
        s,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        h.max() as f64 / scale,
        h.len()
    );
    s
}
