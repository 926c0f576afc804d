//! `msgperf compare`: two runs' cases matched by key, each figure's change with a confidence
//! interval computed over repetitions (a bootstrap of the ratio of medians: each repetition
//! is a fresh set of processes, so repetitions, not one process's samples, are what vary
//! independently), and a verdict: faster or slower when the change is beyond the noise band
//! and a Mann-Whitney U test over the repetitions finds it (p < 0.01), same when the interval
//! is inside the band, inconclusive otherwise.

use super::summary::{summarize, CaseSummary};
use super::table::Grid;
use crate::result::{CaseResult, RunResult};
use crate::units::format_size;
use std::collections::BTreeMap;

/// Fewer repetitions than this on either side give no verdict (with 5 against 5, the
/// Mann-Whitney test can reach p < 0.01, and only if every run of one side is beyond every run
/// of the other).
pub const MIN_REPETITIONS: usize = 5;
/// The Mann-Whitney test's threshold (two-sided) for faster or slower.
const ALPHA: f64 = 0.01;
/// Bootstrap resamples, and the interval's coverage.
const RESAMPLES: usize = 2_000;
const CONFIDENCE: f64 = 0.95;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Faster,
    Slower,
    Same,
    Inconclusive,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// A figure compared: lower is better for times and CPU, higher for throughput.
#[derive(Clone, Copy, Debug)]
pub struct Figure {
    pub name: &'static str,
    pub unit: &'static str,
    higher_is_better: bool,
    of: fn(&CaseSummary) -> Option<f64>,
}

pub const FIGURES: &[Figure] = &[
    Figure {
        name: "p50",
        unit: "us",
        higher_is_better: false,
        of: |s| Some(s.latency.as_ref()?.p50_ns? as f64 / 1e3),
    },
    Figure {
        name: "p99",
        unit: "us",
        higher_is_better: false,
        of: |s| Some(s.latency.as_ref()?.p99_ns? as f64 / 1e3),
    },
    Figure {
        name: "p99.9",
        unit: "us",
        higher_is_better: false,
        of: |s| Some(s.latency.as_ref()?.p99_9_ns? as f64 / 1e3),
    },
    Figure {
        name: "max",
        unit: "us",
        higher_is_better: false,
        of: |s| Some(s.latency.as_ref()?.max_ns as f64 / 1e3),
    },
    Figure {
        name: "throughput",
        unit: "msgs/s",
        higher_is_better: true,
        of: |s| (s.msgs_per_s > 0.0).then_some(s.msgs_per_s),
    },
    Figure {
        name: "CPU per message",
        unit: "us",
        higher_is_better: false,
        of: |s| {
            let ns: f64 = s
                .roles
                .iter()
                .filter(|r| r.messages > 0)
                .map(|r| r.cpu_user_ns_per_msg + r.cpu_sys_ns_per_msg)
                .sum();
            (ns > 0.0).then_some(ns / 1e3)
        },
    },
];

/// One figure of one case, compared.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub case: String,
    pub figure: &'static str,
    pub unit: &'static str,
    /// Medians over repetitions.
    pub base: f64,
    pub new: f64,
    pub base_runs: usize,
    pub new_runs: usize,
    /// new / base of the medians, and its confidence interval (None with too few runs).
    pub ratio: f64,
    pub interval: Option<(f64, f64)>,
    /// The Mann-Whitney U test's two-sided p-value (None with too few runs).
    pub p_value: Option<f64>,
    pub verdict: Verdict,
}

/// What `compare` found.
#[derive(Debug, Default, serde::Serialize)]
pub struct Comparison {
    pub rows: Vec<Row>,
    /// Per figure: the geometric mean of its ratios over the cases, and how many.
    pub geometric_means: Vec<(&'static str, f64, usize)>,
    pub only_in_base: Vec<String>,
    pub only_in_new: Vec<String>,
    /// Settings or environment that differ between the runs, a sentence each.
    pub differences: Vec<String>,
}

impl Comparison {
    pub fn any(&self, v: Verdict) -> bool {
        self.rows.iter().any(|r| r.verdict == v)
    }
}

/// A case's readable name: its key's head, without the digest.
fn case_name(c: &CaseResult) -> String {
    let s = &c.config;
    let mut name = format!(
        "{} {} {} {}",
        s.workload,
        s.transport,
        format_size(s.size_bytes),
        s.placement.label()
    );
    if let Some(r) = s.rate_hz {
        name.push_str(&format!(" {r} Hz"));
    }
    for (k, v) in &s.options {
        name.push_str(&format!(" {k}={v}"));
    }
    name
}

/// The key's head (workload/transport/size/placement): what `--allow-different` matches by.
fn key_head(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(head, _)| head)
}

/// What differs between the runs' environments, a sentence each.
fn environment_differences(
    (base, base_name): (&RunResult, &str),
    (new, new_name): (&RunResult, &str),
) -> Vec<String> {
    let (a, b) = (&base.environment, &new.environment);
    let mut out = Vec::new();
    let mut differ = |what: &str, x: &str, y: &str| {
        if x != y {
            out.push(format!("{what}: `{x}` in {base_name}, `{y}` in {new_name}"));
        }
    };
    differ(
        "msgperf version",
        &base.msgperf_version,
        &new.msgperf_version,
    );
    differ("CPU model", &a.cpu_model, &b.cpu_model);
    differ("CPUs", &a.cores.to_string(), &b.cores.to_string());
    differ("kernel", &a.kernel, &b.kernel);
    differ("clock source", &a.clock.source, &b.clock.source);
    out
}

/// Several runs of one side as one run: runs taken in turns with the other side's (one build
/// against another, alternated so that the machine's drift falls on both sides alike). Each
/// case's repetitions are numbered on across the runs; how a run's machine differs from the
/// first's is named (`side` says which side, for the message).
pub fn pooled(side: &str, named: Vec<(String, RunResult)>) -> (RunResult, Vec<String>) {
    let mut named = named.into_iter();
    let (first_name, mut all) = named.next().expect("a side has a run");
    let mut differences = Vec::new();
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut number = |cases: &mut Vec<CaseResult>| {
        for c in cases {
            let n = seen.entry(c.key.clone()).or_default();
            *n += 1;
            c.repetition = *n;
        }
    };
    number(&mut all.cases);
    for (name, mut run) in named {
        differences.extend(environment_differences(
            (&all, &format!("{side}'s {first_name}")),
            (&run, &format!("{side}'s {name}")),
        ));
        number(&mut run.cases);
        all.cases.append(&mut run.cases);
    }
    (all, differences)
}

/// The settings in which two cases of the same name differ.
fn setting_differences(a: &CaseResult, b: &CaseResult) -> Vec<String> {
    let (x, y) = (a.config.measured(), b.config.measured());
    x.iter()
        .filter(|(k, v)| y.get(*k) != Some(*v))
        .map(|(k, v)| {
            let w = y.get(k).cloned().unwrap_or(serde_json::Value::Null);
            format!("{}: {k} is {v} in BASE, {w} in NEW", case_name(a))
        })
        .collect()
}

/// Compares `new` against `base`, case by case. With `allow_different`, cases are matched by
/// name where their settings differ, and different environments are compared all the same.
pub fn compare(base: &RunResult, new: &RunResult, noise: f64, allow_different: bool) -> Comparison {
    let mut out = Comparison {
        differences: environment_differences((base, "BASE"), (new, "NEW")),
        ..Default::default()
    };
    fn group(run: &RunResult) -> (BTreeMap<String, Vec<&CaseResult>>, Vec<String>) {
        let mut m: BTreeMap<String, Vec<&CaseResult>> = BTreeMap::new();
        let mut order = Vec::new();
        for c in run
            .cases
            .iter()
            .filter(|c| c.error.is_none() && !c.interrupted)
        {
            if !m.contains_key(&c.key) {
                order.push(c.key.clone());
            }
            m.entry(c.key.clone()).or_default().push(c);
        }
        (m, order)
    }
    let (base_cases, order) = group(base);
    let (mut new_cases, new_order) = group(new);
    for key in &order {
        let a = &base_cases[key];
        let b = match new_cases.remove(key) {
            Some(b) => b,
            None => {
                // Same name, other settings: say how they differ; compare only if allowed.
                let other = new_cases
                    .keys()
                    .find(|k| key_head(k) == key_head(key))
                    .cloned();
                match other {
                    Some(k) => {
                        out.differences
                            .extend(setting_differences(a[0], new_cases[&k][0]));
                        if !allow_different {
                            out.only_in_base.push(case_name(a[0]));
                            continue;
                        }
                        new_cases.remove(&k).expect("found above")
                    }
                    None => {
                        out.only_in_base.push(case_name(a[0]));
                        continue;
                    }
                }
            }
        };
        let sa: Vec<CaseSummary> = a.iter().map(|c| summarize(c)).collect();
        let sb: Vec<CaseSummary> = b.iter().map(|c| summarize(c)).collect();
        for f in FIGURES {
            let xa: Vec<f64> = sa.iter().filter_map(f.of).collect();
            let xb: Vec<f64> = sb.iter().filter_map(f.of).collect();
            if xa.is_empty() || xb.is_empty() {
                continue;
            }
            out.rows
                .push(compare_figure(case_name(a[0]), f, &xa, &xb, noise));
        }
    }
    for key in new_order {
        if let Some(b) = new_cases.get(&key) {
            out.only_in_new.push(case_name(b[0]));
        }
    }
    for f in FIGURES {
        let ratios: Vec<f64> = out
            .rows
            .iter()
            .filter(|r| r.figure == f.name && r.ratio > 0.0)
            .map(|r| r.ratio)
            .collect();
        if !ratios.is_empty() {
            let g = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
            out.geometric_means.push((f.name, g, ratios.len()));
        }
    }
    out
}

/// One figure's repetitions on each side, compared.
pub fn compare_figure(case: String, f: &Figure, base: &[f64], new: &[f64], noise: f64) -> Row {
    let (mb, mn) = (median(base), median(new));
    let ratio = if mb > 0.0 { mn / mb } else { f64::NAN };
    let enough = base.len() >= MIN_REPETITIONS && new.len() >= MIN_REPETITIONS;
    let interval = enough.then(|| bootstrap_ratio(base, new));
    let p_value = enough.then(|| mann_whitney_p(base, new));
    Row {
        case,
        figure: f.name,
        unit: f.unit,
        base: mb,
        new: mn,
        base_runs: base.len(),
        new_runs: new.len(),
        ratio,
        interval,
        p_value,
        verdict: verdict(interval, p_value, f.higher_is_better, noise),
    }
}

/// The verdict on a ratio's interval: outside the noise band on the worse side, with the
/// rank test agreeing, is slower, on the better side faster; inside the band, same; else
/// inconclusive.
pub fn verdict(
    interval: Option<(f64, f64)>,
    p_value: Option<f64>,
    higher_is_better: bool,
    noise: f64,
) -> Verdict {
    let (Some((lo, hi)), Some(p)) = (interval, p_value) else {
        return Verdict::Inconclusive;
    };
    let significant = p < ALPHA;
    // As a cost: above 1 is worse whatever the figure.
    let (lo, hi) = if higher_is_better {
        (1.0 / hi, 1.0 / lo)
    } else {
        (lo, hi)
    };
    if lo > 1.0 + noise && significant {
        Verdict::Slower
    } else if hi < 1.0 - noise && significant {
        Verdict::Faster
    } else if lo >= 1.0 - noise && hi <= 1.0 + noise {
        Verdict::Same
    } else {
        Verdict::Inconclusive
    }
}

/// The two-sided p-value of the Mann-Whitney U test of `a` against `b`: exact (every split of
/// the ranks counted) for up to 20 values in all, else the normal approximation. Ties count
/// half.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return 1.0;
    }
    // U: pairs where a's value is below b's, ties counting half (doubled to stay whole).
    let u2: usize = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| (x, y)))
        .map(|(x, y)| match x.total_cmp(y) {
            std::cmp::Ordering::Less => 2,
            std::cmp::Ordering::Equal => 1,
            std::cmp::Ordering::Greater => 0,
        })
        .sum();
    let u = u2 as f64 / 2.0;
    if m + n <= 20 {
        exact_p(m, n, u)
    } else {
        approximate_p(m, n, u)
    }
}

/// The exact two-sided p-value of U for samples of `m` and `n`.
fn exact_p(m: usize, n: usize, u: f64) -> f64 {
    let mean = (m * n) as f64 / 2.0;
    let extreme = (u - mean).abs();
    {
        // ways[k][u]: subsets of k of the first i ranks whose U is u (rank-sum DP).
        let max_u = m * n;
        let mut ways = vec![vec![0f64; max_u + 1]; m + 1];
        ways[0][0] = 1.0;
        for i in 0..(m + n) {
            for k in (0..m.min(i + 1)).rev() {
                // Picking rank i for `a` as its (k+1)th value puts i - k of `b` below it.
                let below = i - k;
                if below > n {
                    continue;
                }
                for v in (0..=max_u - n.min(below)).rev() {
                    let w = ways[k][v];
                    if w > 0.0 && v + (n - below) <= max_u {
                        ways[k + 1][v + (n - below)] += w;
                    }
                }
            }
        }
        let total: f64 = ways[m].iter().sum();
        let tail: f64 = ways[m]
            .iter()
            .enumerate()
            .filter(|(v, _)| (*v as f64 - mean).abs() >= extreme - 1e-9)
            .map(|(_, w)| w)
            .sum();
        (tail / total).min(1.0)
    }
}

/// The two-sided p-value of U by the normal approximation, with continuity correction.
fn approximate_p(m: usize, n: usize, u: f64) -> f64 {
    let extreme = (u - (m * n) as f64 / 2.0).abs();
    let sd = ((m * n * (m + n + 1)) as f64 / 12.0).sqrt();
    let z = (extreme - 0.5).max(0.0) / sd;
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// P(Z > z) for a standard normal Z (Abramowitz and Stegun 7.1.26, error below 1.5e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    0.5 * poly * (-x * x).exp()
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// A percentile bootstrap interval of median(new) / median(base), resampling each side's
/// repetitions; seeded, so the same inputs give the same interval.
pub fn bootstrap_ratio(base: &[f64], new: &[f64]) -> (f64, f64) {
    // splitmix64: enough to draw indices, and reproducible.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: usize| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    let mut ratios = Vec::with_capacity(RESAMPLES);
    let (mut a, mut b) = (vec![0.0; base.len()], vec![0.0; new.len()]);
    for _ in 0..RESAMPLES {
        for x in a.iter_mut() {
            *x = base[next(base.len())];
        }
        for x in b.iter_mut() {
            *x = new[next(new.len())];
        }
        let ma = median(&a);
        if ma > 0.0 {
            ratios.push(median(&b) / ma);
        }
    }
    ratios.sort_by(|x, y| x.total_cmp(y));
    if ratios.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let tail = (1.0 - CONFIDENCE) / 2.0;
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    (at(tail), at(1.0 - tail))
}

fn figure_value(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn change(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

/// The comparison as a table (the terminal's, or Markdown), then the geometric means.
pub fn grid(c: &Comparison) -> Grid {
    let mut g = Grid::new(&[
        ("case", u8::MAX),
        ("figure", u8::MAX),
        ("base", 200),
        ("new", 200),
        ("change", u8::MAX),
        ("95% interval", 150),
        ("runs", 100),
        ("verdict", u8::MAX),
    ]);
    let mut last = String::new();
    for r in &c.rows {
        g.row(vec![
            if r.case == last {
                String::new()
            } else {
                r.case.clone()
            },
            format!("{} [{}]", r.figure, r.unit),
            figure_value(r.base),
            figure_value(r.new),
            change(r.ratio),
            r.interval.map_or("-".into(), |(lo, hi)| {
                format!("{} .. {}", change(lo), change(hi))
            }),
            format!("{}/{}", r.base_runs, r.new_runs),
            r.verdict.label().into(),
        ]);
        last = r.case.clone();
    }
    for (f, gm, n) in &c.geometric_means {
        g.row(vec![
            if last == "geometric mean" {
                String::new()
            } else {
                "geometric mean".into()
            },
            f.to_string(),
            String::new(),
            String::new(),
            change(*gm),
            String::new(),
            format!("{n} cases"),
            String::new(),
        ]);
        last = "geometric mean".into();
    }
    g
}

/// What a reader needs beside the table: unmatched cases, differences, and what to do where
/// the runs were too few.
pub fn notes(c: &Comparison, noise: f64) -> Vec<String> {
    let mut out = Vec::new();
    if !c.only_in_base.is_empty() {
        out.push(format!("only in BASE: {}", c.only_in_base.join("; ")));
    }
    if !c.only_in_new.is_empty() {
        out.push(format!("only in NEW: {}", c.only_in_new.join("; ")));
    }
    if c.rows
        .iter()
        .any(|r| r.base_runs < MIN_REPETITIONS || r.new_runs < MIN_REPETITIONS)
    {
        out.push(format!(
            "a verdict needs {MIN_REPETITIONS} or more repetitions of a figure on each side: run both with --repeat {MIN_REPETITIONS}"
        ));
    }
    out.push(format!(
        "verdicts: the 95% interval of the ratio of medians over repetitions (bootstrap) against a noise band of ±{:.1}% (--noise); same: inside it, slower/faster: outside it, inconclusive: across its edge",
        noise * 100.0
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p50() -> &'static Figure {
        &FIGURES[0]
    }

    /// Repetitions around `centre` with a spread of ±`spread` (deterministic).
    fn runs(centre: f64, spread: f64, n: usize, phase: usize) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let k = ((i * 7 + phase * 3) % n) as f64 / (n.max(2) - 1) as f64;
                centre * (1.0 + spread * (2.0 * k - 1.0))
            })
            .collect()
    }

    #[test]
    fn the_same_distribution_is_never_slower_and_a_shift_is() {
        for phase in 0..5 {
            let a = runs(100.0, 0.02, 5, phase);
            let b = runs(100.0, 0.02, 5, phase + 1);
            let r = compare_figure("c".into(), p50(), &a, &b, 0.03);
            assert!(
                matches!(r.verdict, Verdict::Same | Verdict::Inconclusive),
                "{r:?}"
            );
            let worse = runs(130.0, 0.02, 5, phase);
            let r = compare_figure("c".into(), p50(), &a, &worse, 0.03);
            assert_eq!(r.verdict, Verdict::Slower, "{r:?}");
            let better = runs(70.0, 0.02, 5, phase);
            let r = compare_figure("c".into(), p50(), &a, &better, 0.03);
            assert_eq!(r.verdict, Verdict::Faster, "{r:?}");
        }
    }

    #[test]
    fn a_noisy_or_thin_comparison_is_inconclusive() {
        let a = runs(100.0, 0.3, 5, 0);
        let b = runs(105.0, 0.3, 5, 2);
        let r = compare_figure("c".into(), p50(), &a, &b, 0.03);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
        let r = compare_figure("c".into(), p50(), &[100.0, 101.0], &[300.0, 310.0], 0.03);
        assert_eq!(r.verdict, Verdict::Inconclusive, "two runs give no verdict");
        assert!(r.interval.is_none());
    }

    #[test]
    fn the_rank_test_counts_exactly() {
        // 5 against 5, fully separated: 2 of the 252 splits are as extreme.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!((mann_whitney_p(&a, &b) - 2.0 / 252.0).abs() < 1e-12);
        assert!((mann_whitney_p(&b, &a) - 2.0 / 252.0).abs() < 1e-12);
        // Interleaved: nothing to find.
        assert!(mann_whitney_p(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]) > 0.5);
        // 3 against 3 can never reach p < 0.01.
        assert!(mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]) >= 0.1 - 1e-12);
        // The normal approximation (used past 20 values) agrees with the exact count.
        for u in [10.0, 20.0, 30.0, 40.0] {
            let (e, a) = (exact_p(10, 10, u), approximate_p(10, 10, u));
            assert!((e - a).abs() < 0.01, "U {u}: exact {e}, approximate {a}");
        }
    }

    #[test]
    fn throughput_is_better_higher() {
        let tput = FIGURES.iter().find(|f| f.higher_is_better).unwrap();
        let a = runs(1000.0, 0.01, 5, 0);
        let r = compare_figure("c".into(), tput, &a, &runs(600.0, 0.01, 5, 1), 0.03);
        assert_eq!(r.verdict, Verdict::Slower);
        let r = compare_figure("c".into(), tput, &a, &runs(1500.0, 0.01, 5, 1), 0.03);
        assert_eq!(r.verdict, Verdict::Faster);
    }

    #[test]
    fn the_interval_holds_the_ratio_of_medians() {
        let a = [10.0, 11.0, 9.0, 10.5, 9.5];
        let b = [20.0, 22.0, 18.0, 21.0, 19.0];
        let (lo, hi) = bootstrap_ratio(&a, &b);
        assert!(lo <= 2.0 && 2.0 <= hi && lo > 1.5 && hi < 2.6, "{lo} {hi}");
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
