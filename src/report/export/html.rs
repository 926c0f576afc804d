//! HTML: one self-contained report, readable offline (no script, no font, no request: the
//! plots are SVG drawn by plotters). The summary table in NML's layout with every column
//! defined, the percentile spectrum of every case, latency over time, latency and throughput
//! against size and offered rate where the run swept them, CPU per message per role, the
//! environment and the command line to run it again.

use super::ExportError;
use crate::report::summary::{merged, summarize, CaseSummary};
use crate::report::sweep;
use crate::report::table::{self, escape_html};
use crate::result::{CaseResult, Metric, RunResult};
use crate::units::format_size;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

pub const FORMAT: super::Format = super::Format {
    name: "html",
    about: "a report with plots in one file, readable offline",
    writes: super::Writes::File(|run| Ok(to_html(run)?.into_bytes())),
};

/// What each column of the tables means (shown under them, and as the headers' tooltips).
const DEFINITIONS: &[(&str, &str)] = &[
    ("transport", "what carried the messages, with the options given to it"),
    ("payload", "the typed body (--payload TYPE:FORMAT): a type and the format that encoded it"),
    ("encoded [B]", "the mean encoded body, over the values the case rotates through"),
    ("memcpy [ns]", "a copy of as many bytes on the same CPU, timed as an encode is (the median of 2001)"),
    ("encode p50 [ns]", "encoding one body, per message, on the sending role's clock (the clock's own cost included, as in the memcpy)"),
    ("encode x memcpy", "encode p50 divided by the memcpy"),
    ("encode p99 [ns]", "encoding one body: the 99th percentile"),
    ("decode x memcpy", "decode p50 divided by the memcpy"),
    ("decode p99 [ns]", "decoding one body: the 99th percentile"),
    ("decode p50 [ns]", "decoding one body in full into the owned type and reading each field once, on the receiving role's clock"),
    ("in place p50 [ns]", "zero-copy formats (codec): checking a body and reading its fields where they lie, without deserializing"),
    ("workload", "what the roles did (pingpong: a round trip at a time; stream: one way, as fast as allowed or at --rate; pubsub: P publishers to S subscribers)"),
    ("size", "payload bytes per message (B, KiB = 1024 B)"),
    ("cpus", "the CPUs the driving roles and the others were pinned to"),
    ("wait", "how a reader waited: block (in the transport's call), poll (spinning on non-blocking reads), or the transport's own strategy"),
    ("latency", "what the latency figures measure: round trip (send to reply, on the initiator), one-way (send timestamp to arrival, one host clock)"),
    ("samples", "latency samples in the measured window (warm-up excluded)"),
    ("min [us]", "the smallest latency sample"),
    ("p50 [us]", "median latency: half the samples took longer"),
    ("p90 [us]", "90th percentile latency"),
    ("p99 [us]", "99th percentile latency"),
    ("p99.9 [us]", "99.9th percentile latency (shown only with enough samples)"),
    ("p99.99 [us]", "99.99th percentile latency (shown only with enough samples)"),
    ("max [us]", "the largest latency sample"),
    ("mean [us]", "mean latency"),
    ("rate [/s]", "messages (round trips for pingpong) per second over the measured window"),
    ("MiB/s", "payload bytes per second, one direction, in MiB (2^20 B)"),
    ("lost/dup/reord", "messages lost, duplicated and out of order, as the receivers counted them by sequence number"),
    ("vs floor", "the ratio to this machine's plain loop of the same transport, same size and placement: p50 / floor p50 for round trips (above 1 is slower), MiB/s / floor MiB/s for streams (below 1 is slower); 1.00x is the floor"),
    ("role", "a role of the case, and its number where there are several"),
    ("ran on", "process or thread, and the CPUs it was seen on"),
    ("messages", "messages this role sent or received, whichever is more (the per-message divisor)"),
    ("write avg [us]", "average time inside one send call (NML's average write time)"),
    ("write max [us]", "longest send call (NML's maximum write time)"),
    ("read avg [us]", "average time inside one receive call, waiting included"),
    ("read max [us]", "longest receive call"),
    ("user [us/msg]", "user CPU time of the role's thread per message"),
    ("sys [us/msg]", "system CPU time of the role's thread per message"),
    ("other threads [us/msg]", "CPU of the role's process outside its thread per message (a middleware's own threads)"),
    ("cpu [%]", "share of the measured window the role's thread spent on a CPU"),
    ("ctx sw/msg", "context switches per message"),
    ("preempted/msg", "involuntary context switches per message: the thread lost its CPU while runnable"),
    ("reads/s", "read calls per second (above new messages/s when polling finds nothing)"),
    ("new msgs/s", "messages received per second"),
    ("peak RSS [MiB]", "peak resident memory of the role's process"),
    ("floor p50 [us]", "the plain loop's round-trip median, same size and placement"),
    ("floor [MiB/s]", "the plain loop's stream throughput, same size and placement"),
    ("msgperf", "msgperf's figure the ratio divides"),
    ("wire [B/msg]", "loopback bytes per message, both directions, headers and acknowledgements included"),
    ("not payload [B/msg]", "wire bytes per message that are not payload"),
];

fn define(column: &str) -> Option<&'static str> {
    DEFINITIONS
        .iter()
        .find(|(c, _)| *c == column)
        .map(|(_, d)| *d)
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3}td:nth-child(2){text-align:left}
pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}
dt{font-weight:bold;float:left;clear:left;width:13em}dd{margin-left:14em;margin-bottom:2px}
.plots svg{margin:0.5em 1em 0.5em 0}";

pub fn to_html(run: &RunResult) -> Result<String, ExportError> {
    let s: Vec<CaseSummary> = run.cases.iter().map(summarize).collect();
    let e = &run.environment;
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>msgperf report: {}</title><style>{STYLE}</style></head><body>\n\
         <h1>msgperf report</h1>\n<p>{}</p>\n<h2>Run it again</h2>\n<pre>{}</pre>\n",
        escape_html(&run.command_line.join(" ")),
        escape_html(crate::report::heading(run, None).trim_end()),
        escape_html(&run.command_line.join(" "))
    );
    out.push_str("<h2>Cases</h2>\n");
    out.push_str(&table::cases_grid(&s).html(&define));
    if s.iter().any(|c| c.marshalling.is_some()) {
        out.push_str("<h2>Marshalling: encode and decode beside a copy</h2>\n");
        out.push_str(&table::marshalling_grid(&s).html(&define));
    }
    out.push_str("<h2>Roles: call times and CPU per message</h2>\n");
    out.push_str(&table::roles_grid(&s).html(&define));
    if s.iter().any(|c| c.vs_floor.is_some()) {
        out.push_str("<h2>Floors</h2>\n");
        out.push_str(&table::floors_grid(&s).html(&define));
    }
    let words = table::summary_in_words(&s, None);
    if !words.trim().is_empty() {
        out.push_str(&format!("<p>{}</p>\n", escape_html(words.trim())));
    }
    if let Some(o) = &run.suite {
        out.push_str(&crate::report::suite::html(o));
    }

    out.push_str("<h2>Plots</h2>\n<div class=\"plots\">\n");
    for svg in spectra(run, &s)? {
        out.push_str(&svg);
    }
    for svg in sweeps(&s)? {
        out.push_str(&svg);
    }
    if let Some(svg) = cpu_per_message(&s)? {
        out.push_str(&svg);
    }
    out.push_str("</div>\n<h3>Latency over time</h3>\n<div class=\"plots\">\n");
    for (i, c) in run.cases.iter().enumerate().take(MAX_TIME_PLOTS) {
        if let Some(svg) = over_time(i, c, &s[i])? {
            out.push_str(&svg);
        }
    }
    out.push_str("</div>\n");
    if run.cases.len() > MAX_TIME_PLOTS {
        out.push_str(&format!(
            "<p>(latency over time is drawn for the first {MAX_TIME_PLOTS} cases; the HdrHistogram log, \
             <code>--export hlog=FILE</code>, holds every one)</p>\n"
        ));
    }

    out.push_str("<h2>What the columns mean</h2>\n<dl>\n");
    for (c, d) in DEFINITIONS {
        out.push_str(&format!(
            "<dt>{}</dt><dd>{}</dd>\n",
            escape_html(c),
            escape_html(d)
        ));
    }
    out.push_str("</dl>\n<h2>Environment</h2>\n<table>\n");
    for (k, v) in [
        ("host", e.hostname.clone()),
        ("kernel", e.kernel.clone()),
        ("CPU", e.cpu_model.clone()),
        ("CPUs", e.cores.to_string()),
        ("allowed CPUs", format!("{:?}", e.allowed_cpus)),
        ("started (UTC)", e.started_utc.clone()),
        ("clock", e.clock.source.clone()),
        ("clock read [ns]", format!("{:.1}", e.clock.read_cost_ns)),
        (
            "histogram record [ns]",
            format!("{:.1}", e.clock.record_cost_ns),
        ),
        ("msgperf", run.msgperf_version.clone()),
    ] {
        out.push_str(&format!(
            "<tr><th>{k}</th><td style=\"text-align:left\">{}</td></tr>\n",
            escape_html(&v)
        ));
    }
    out.push_str("</table>\n</body></html>\n");
    Ok(out)
}

const MAX_TIME_PLOTS: usize = 24;
const WIDE: (u32, u32) = (900, 460);
const SMALL: (u32, u32) = (440, 260);

/// A case's name in a legend.
fn case_label(i: usize, c: &CaseResult, repeated: bool) -> String {
    let run = if repeated {
        format!(" run {}", c.repetition)
    } else {
        String::new()
    };
    format!(
        "#{} {} {} {} {}{run}",
        i + 1,
        c.config.workload,
        c.config.transport,
        format_size(c.config.size_bytes),
        c.config.placement.label()
    )
}

fn failed(e: impl std::error::Error + Send + Sync + 'static) -> ExportError {
    ExportError::new("a plot of the HTML report", e)
}

/// One line of a plot: its label (none: no legend entry, as for a repetition of a line
/// already named), its colour's index and its points.
struct Line {
    label: String,
    color: usize,
    points: Vec<(f64, f64)>,
}

/// Draws `lines` on axes `x` and `y` into an SVG, with a title, axis names and a legend.
#[allow(clippy::too_many_arguments)]
fn plot<X, Y>(
    size: (u32, u32),
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x: X,
    y: Y,
    x_format: &dyn Fn(&f64) -> String,
    lines: &[Line],
    marks: &[(f64, f64, String)],
) -> Result<String, ExportError>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x, y)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(x_format)
            .draw()
            .map_err(failed)?;
        for l in lines {
            let color = Palette99::pick(l.color).to_rgba();
            let series = chart
                .draw_series(LineSeries::new(
                    l.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(failed)?;
            if !l.label.is_empty() {
                series.label(l.label.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            }
            if l.points.len() <= 40 {
                chart
                    .draw_series(
                        l.points
                            .iter()
                            .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
                    )
                    .map_err(failed)?;
            }
        }
        for (x, y, text) in marks {
            chart
                .draw_series(std::iter::once(Cross::new(
                    (*x, *y),
                    7,
                    RED.stroke_width(2),
                )))
                .map_err(failed)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    text.clone(),
                    (*x, *y),
                    ("sans-serif", 13).into_font().color(&RED),
                )))
                .map_err(failed)?;
        }
        if lines.iter().any(|l| !l.label.is_empty()) {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(failed)?;
        }
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// The bounds of `values`, widened a little, positive (for log axes).
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if lo > hi {
        return (1.0, 10.0);
    }
    let lo = (lo * 0.8).max(1e-3);
    (lo, (hi * 1.25).max(lo * 2.0))
}

/// `1/(1-p)` on the spectrum's axis as the percentile it stands for (10 → 90%).
fn percentile_label(v: &f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / v);
    if p <= 0.0 {
        "0%".into()
    } else {
        let s = format!("{p:.4}");
        format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// A histogram's percentile spectrum: (1/(1-p), microseconds), its maximum at the axis' end.
fn spectrum(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    h.iter_quantiles(5)
        .map(|v| (v.quantile_iterated_to(), v.value_iterated_to()))
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, v)| (1.0 / (1.0 - q), v as f64 / 1e3))
        .chain(std::iter::once((1e6, h.max() as f64 / 1e3)))
        .collect()
}

/// The percentile spectrum of every case on a 1/(1-p) axis, a plot per kind of latency, cases
/// and repetitions overlaid.
fn spectra(run: &RunResult, s: &[CaseSummary]) -> Result<Vec<String>, ExportError> {
    let repeated = run.repeat > 1;
    let mut kinds: Vec<&str> = Vec::new();
    for c in s {
        if c.latency.is_some() && !kinds.contains(&c.latency_kind.as_str()) {
            kinds.push(&c.latency_kind);
        }
    }
    let mut out = Vec::new();
    for kind in kinds {
        // A colour per case; its repetitions share it, and its legend entry.
        let mut keys: Vec<&str> = Vec::new();
        let mut lines = Vec::new();
        for (i, c) in run.cases.iter().enumerate() {
            if s[i].latency_kind != kind {
                continue;
            }
            let Some(h) = merged(c, c.latency_metric) else {
                continue;
            };
            let (color, label) = match keys.iter().position(|k| *k == c.key) {
                Some(k) => (k, String::new()),
                None => {
                    keys.push(&c.key);
                    let runs = if repeated {
                        format!(
                            " ({} runs)",
                            run.cases.iter().filter(|o| o.key == c.key).count()
                        )
                    } else {
                        String::new()
                    };
                    (keys.len() - 1, format!("{}{runs}", case_label(i, c, false)))
                }
            };
            lines.push(Line {
                label,
                color,
                points: spectrum(&h),
            });
        }
        if lines.is_empty() {
            continue;
        }
        // The plain loops the round trips divide by, once each.
        for (i, c) in run.cases.iter().enumerate() {
            if c.latency_metric != Metric::RTT || s[i].latency_kind != kind {
                continue;
            }
            let Some(h) = c.floor.as_ref().and_then(|f| f.rtt_histogram.as_ref()) else {
                continue;
            };
            let label = format!(
                "floor: {} {} {}",
                c.config.transport,
                format_size(c.config.size_bytes),
                c.config.placement.label()
            );
            if lines.iter().any(|l| l.label == label) {
                continue;
            }
            if let Ok(h) = h.decode() {
                keys.push(&c.key);
                lines.push(Line {
                    label,
                    color: keys.len() - 1,
                    points: spectrum(&h),
                });
            }
        }
        let (lo, hi) = bounds(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
        // Room for the legend: a line per case.
        let entries = lines.iter().filter(|l| !l.label.is_empty()).count() as u32;
        out.push(plot(
            (WIDE.0, WIDE.1 + 18 * entries.saturating_sub(12)),
            &format!("{kind} latency by percentile"),
            "percentile",
            "latency [us]",
            (1f64..1e6).log_scale(),
            (lo..hi).log_scale(),
            &percentile_label,
            &lines,
            &[],
        )?);
    }
    Ok(out)
}

/// A case's latency per interval (p50, p99, max) over its measured window, as the first role
/// that records the case's latency saw it.
fn over_time(i: usize, c: &CaseResult, s: &CaseSummary) -> Result<Option<String>, ExportError> {
    let Some(r) = c.roles.iter().find(|r| {
        r.interval_histograms
            .first()
            .is_some_and(|iv| iv.metric == c.latency_metric)
    }) else {
        return Ok(None);
    };
    let mut lines: Vec<Line> = ["p50", "p99", "max"]
        .iter()
        .enumerate()
        .map(|(color, l)| Line {
            label: l.to_string(),
            color,
            points: Vec::new(),
        })
        .collect();
    for iv in &r.interval_histograms {
        let Ok(h) = iv.histogram.decode() else {
            continue;
        };
        if h.is_empty() {
            continue;
        }
        let t = iv.end_ns as f64 / 1e9;
        lines[0]
            .points
            .push((t, h.value_at_quantile(0.5) as f64 / 1e3));
        lines[1]
            .points
            .push((t, h.value_at_quantile(0.99) as f64 / 1e3));
        lines[2].points.push((t, h.max() as f64 / 1e3));
    }
    if lines[0].points.is_empty() {
        return Ok(None);
    }
    let end = lines[0].points.iter().map(|p| p.0).fold(0.0, f64::max) * 1.05;
    let (lo, hi) = bounds(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    plot(
        SMALL,
        &format!(
            "#{} {} {} {}",
            i + 1,
            s.transport,
            s.workload,
            format_size(s.size_bytes)
        ),
        &format!("seconds ({} of the {})", s.latency_kind, r.role),
        "latency [us]",
        0f64..end.max(1e-3),
        (lo..hi).log_scale(),
        &|v| format!("{v:.1}"),
        &lines,
        &[],
    )
    .map(Some)
}

/// Cases grouped by `key` (what they share), failed ones left out: each group a line.
fn groups(
    s: &[CaseSummary],
    key: impl Fn(&CaseSummary) -> String,
) -> Vec<(String, Vec<&CaseSummary>)> {
    let mut out: Vec<(String, Vec<&CaseSummary>)> = Vec::new();
    for c in s.iter().filter(|c| c.error.is_none()) {
        let k = key(c);
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(c),
            None => out.push((k, vec![c])),
        }
    }
    out
}

/// Points by x, in order, a point's repetitions reduced to their median.
fn medians(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut by_x: Vec<(f64, Vec<f64>)> = Vec::new();
    for (x, y) in points {
        match by_x.iter_mut().find(|(v, _)| *v == x) {
            Some((_, ys)) => ys.push(y),
            None => by_x.push((x, vec![y])),
        }
    }
    by_x.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_x.into_iter()
        .map(|(x, ys)| (x, crate::report::compare::median(&ys)))
        .collect()
}

/// Latency and throughput against size, and latency against offered rate (knee marked), for
/// the groups of cases the run swept.
fn sweeps(s: &[CaseSummary]) -> Result<Vec<String>, ExportError> {
    let mut out = Vec::new();
    // Against size: the same case but for its size, at two sizes or more.
    let by_size: Vec<_> = groups(s, |c| {
        format!(
            "{} {} {} {} {}",
            c.workload,
            c.transport,
            c.options,
            c.placement,
            c.rate_hz.map_or("max".into(), |r| format!("{r} Hz"))
        )
    })
    .into_iter()
    .filter(|(_, g)| {
        let mut sizes: Vec<usize> = g.iter().map(|c| c.size_bytes).collect();
        sizes.sort();
        sizes.dedup();
        sizes.len() >= 2
    })
    .collect();
    if !by_size.is_empty() {
        let line = |f: &dyn Fn(&CaseSummary) -> Option<f64>| -> Vec<Line> {
            by_size
                .iter()
                .enumerate()
                .map(|(color, (label, g))| {
                    let points = medians(
                        g.iter()
                            .filter_map(|c| Some((c.size_bytes.max(1) as f64, f(c)?))),
                    );
                    Line {
                        label: label.clone(),
                        color,
                        points,
                    }
                })
                .filter(|l| !l.points.is_empty())
                .collect()
        };
        let (xlo, xhi) = bounds(s.iter().map(|c| c.size_bytes.max(1) as f64));
        let size_label = |v: &f64| format_size(*v as usize);
        let p50 = |c: &CaseSummary| Some(c.latency.as_ref()?.p50_ns? as f64 / 1e3);
        let mib = |c: &CaseSummary| (c.mib_per_s > 0.0).then_some(c.mib_per_s);
        type Figure<'a> = &'a dyn Fn(&CaseSummary) -> Option<f64>;
        let figures: [(&str, &str, Figure); 2] = [
            ("p50 latency against message size", "p50 [us]", &p50),
            ("throughput against message size", "MiB/s", &mib),
        ];
        for (title, unit, figure) in figures {
            let lines = line(figure);
            if lines.is_empty() {
                continue;
            }
            let (lo, hi) = bounds(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
            out.push(plot(
                WIDE,
                title,
                "message size",
                unit,
                (xlo..xhi).log_scale(),
                (lo..hi).log_scale(),
                &size_label,
                &lines,
                &[],
            )?);
        }
    }
    // Against offered rate: paced points of one case, knee marked.
    let knees = sweep::sweeps(s);
    let by_rate: Vec<_> = groups(s, |c| {
        format!(
            "{} {} {} {}",
            c.transport, c.options, c.workload, c.size_bytes
        )
    })
    .into_iter()
    .filter(|(_, g)| g.iter().filter(|c| c.rate_hz.is_some()).count() >= 2)
    .collect();
    if !by_rate.is_empty() {
        let mut lines = Vec::new();
        let mut marks = Vec::new();
        for (color, (label, g)) in by_rate.iter().enumerate() {
            let points = medians(g.iter().filter_map(|c| {
                let d = c.latency_from_intended.as_ref().or(c.latency.as_ref())?;
                Some((c.rate_hz?, d.p99_ns? as f64 / 1e3))
            }));
            if let Some(k) = knees.iter().find(|k| k.label == label.trim()) {
                if let Some(p) = k.knee_hz.and_then(|hz| points.iter().find(|p| p.0 == hz)) {
                    marks.push((p.0, p.1, format!(" knee {:.0} Hz", p.0)));
                }
            }
            lines.push(Line {
                label: label.clone(),
                color,
                points,
            });
        }
        lines.retain(|l| !l.points.is_empty());
        if !lines.is_empty() {
            let (xlo, xhi) = bounds(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
            let (lo, hi) = bounds(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
            out.push(plot(
                WIDE,
                "p99 latency (from the intended send time) against offered rate",
                "offered rate [msgs/s]",
                "p99 [us]",
                (xlo..xhi).log_scale(),
                (lo..hi).log_scale(),
                &|v| format!("{v:.0}"),
                &lines,
                &marks,
            )?);
        }
    }
    Ok(out)
}

/// CPU per message of every role (user and system, its thread), a bar each.
fn cpu_per_message(s: &[CaseSummary]) -> Result<Option<String>, ExportError> {
    let bars: Vec<(String, f64)> = s
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            c.roles.iter().filter(|r| r.messages > 0).map(move |r| {
                (
                    format!("#{} {}", i + 1, r.role),
                    (r.cpu_user_ns_per_msg + r.cpu_sys_ns_per_msg) / 1e3,
                )
            })
        })
        .take(60)
        .collect();
    if bars.is_empty() {
        return Ok(None);
    }
    let top = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1e-3) * 1.15;
    let height = 80 + 22 * bars.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDE.0, height)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let n = bars.len();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "CPU per message, per role (user + system)",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(170)
            .build_cartesian_2d(0f64..top, 0f64..n as f64)
            .map_err(failed)?;
        let label_of = |v: &f64| {
            let i = (n as f64 - *v - 0.5).round();
            if (i - (n as f64 - v - 0.5)).abs() < 0.01 && i >= 0.0 {
                bars.get(i as usize).map_or(String::new(), |b| b.0.clone())
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n * 2 + 1)
            .y_label_formatter(&label_of)
            .x_desc("us per message")
            .draw()
            .map_err(failed)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                let y = (n - 1 - i) as f64;
                Rectangle::new(
                    [(0.0, y + 0.15), (*v, y + 0.85)],
                    Palette99::pick(0).filled(),
                )
            }))
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(Some(svg))
}
