//! The terminal tables: one row per case (latency distribution, rates, ratio to the floor), a
//! table per role (call times, CPU, memory), paced and subscriber tables, then settings, notes,
//! warnings, errors and a summary in words. Each column has a priority: a table wider than the
//! terminal drops its least important columns first (and says so); `--wide` and piped output
//! keep every column.

use super::summary::{CaseSummary, Distribution, PERCENTILES};
use super::warnings;
use crate::result::{LatencyKind, RunResult};
use crate::units::format_size;
use comfy_table::{CellAlignment, Table};

/// How the terminal output is laid out.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layout {
    /// Also the per-role tables, the floors and each case's settings.
    pub details: bool,
    /// The terminal's width: tables and notes fit it. None: every column, unwrapped.
    pub width: Option<usize>,
}

fn us(ns: f64) -> String {
    let v = ns / 1e3;
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn opt_us(ns: Option<f64>) -> String {
    ns.map_or("-".into(), us)
}

/// Lines above, below and under the header only: dense rows, easy to scan.
pub const STYLE: &str = "  ── ══      ──    ";

/// A table being built: its columns (header, priority) and rows.
pub struct Grid {
    columns: Vec<(String, u8)>,
    rows: Vec<Vec<String>>,
    /// A column whose value groups the rows (the survey's CPUs): if it must be hidden, each
    /// group gets a heading line instead, so that the groups still show.
    group: Option<usize>,
    optional: Vec<String>,
}

/// A column that stays whatever the width.
const ALWAYS: u8 = u8::MAX;

impl Grid {
    pub(crate) fn new(columns: &[(&str, u8)]) -> Self {
        Grid {
            columns: columns.iter().map(|(h, p)| (h.to_string(), *p)).collect(),
            rows: Vec::new(),
            group: None,
            optional: Vec::new(),
        }
    }

    /// `columns` are left out of every rendering where no row has a value in them (`-`).
    pub(crate) fn optional(mut self, columns: &[&str]) -> Self {
        self.optional = columns.iter().map(|c| c.to_string()).collect();
        self
    }

    /// Whether column `i` shows: it is not optional, or some row has a value in it.
    fn shown(&self, i: usize) -> bool {
        !self.optional.contains(&self.columns[i].0) || self.rows.iter().any(|r| r[i] != "-")
    }

    /// Rows are grouped by `column`'s value (see [`Grid::group`]).
    pub(crate) fn group_by(mut self, column: &str) -> Self {
        self.group = self.columns.iter().position(|c| c.0 == column);
        self
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        self.rows.push(cells);
    }

    fn table(&self, keep: &[bool]) -> Table {
        let mut t = Table::new();
        t.load_preset(STYLE);
        let pick = |cells: &[String]| -> Vec<String> {
            cells
                .iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|(c, _)| c.clone())
                .collect()
        };
        let header: Vec<String> = self.columns.iter().map(|c| c.0.clone()).collect();
        t.set_header(pick(&header));
        for r in &self.rows {
            t.add_row(pick(r));
        }
        for i in 1..keep.iter().filter(|k| **k).count() {
            if let Some(c) = t.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        t
    }

    /// Every column as a Markdown table (for a pull request or a report).
    pub(crate) fn markdown(&self) -> String {
        let keep: Vec<bool> = (0..self.columns.len()).map(|i| self.shown(i)).collect();
        let mut t = self.table(&keep);
        t.load_preset(comfy_table::presets::ASCII_MARKDOWN);
        format!("{t}\n")
    }

    /// Every column as an HTML table; a header with a definition in `define` carries it as
    /// its tooltip.
    pub(crate) fn html(&self, define: &dyn Fn(&str) -> Option<&'static str>) -> String {
        let mut out = String::from("<table>\n<thead><tr>");
        let shown: Vec<usize> = (0..self.columns.len()).filter(|&i| self.shown(i)).collect();
        for (h, _) in shown.iter().map(|&i| &self.columns[i]) {
            match define(h) {
                Some(d) => out.push_str(&format!(
                    "<th title=\"{}\">{}</th>",
                    escape_html(d),
                    escape_html(h)
                )),
                None => out.push_str(&format!("<th>{}</th>", escape_html(h))),
            }
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for r in &self.rows {
            out.push_str("<tr>");
            for c in shown.iter().map(|&i| &r[i]) {
                out.push_str(&format!("<td>{}</td>", escape_html(c)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }

    /// The table, dropping its least important columns (the rightmost of equals first) until it
    /// fits `width`.
    pub(crate) fn render(&self, width: Option<usize>) -> String {
        let mut keep: Vec<bool> = (0..self.columns.len()).map(|i| self.shown(i)).collect();
        let widest = |t: &Table| {
            t.to_string()
                .lines()
                .map(|l| l.chars().count())
                .max()
                .unwrap_or(0)
        };
        let mut t = self.table(&keep);
        let mut dropped = Vec::new();
        if let Some(w) = width {
            while widest(&t) > w {
                let Some((i, _)) = self
                    .columns
                    .iter()
                    .enumerate()
                    .filter(|(i, c)| keep[*i] && c.1 != ALWAYS)
                    .min_by_key(|(i, c)| (c.1, usize::MAX - i))
                else {
                    break;
                };
                keep[i] = false;
                dropped.push(self.columns[i].0.clone());
                t = self.table(&keep);
            }
        }
        let mut out = match self.group {
            Some(g) if !keep[g] && self.rows.iter().any(|r| r[g] != self.rows[0][g]) => {
                // Each run of rows with one value of the hidden column under its own heading.
                let mut text = String::new();
                let mut start = 0;
                while start < self.rows.len() {
                    let value = &self.rows[start][g];
                    let end = self.rows[start..]
                        .iter()
                        .position(|r| r[g] != *value)
                        .map_or(self.rows.len(), |n| start + n);
                    let part = Grid {
                        columns: self.columns.clone(),
                        rows: self.rows[start..end].to_vec(),
                        group: None,
                        optional: Vec::new(),
                    };
                    text.push_str(&format!("{} {value}:\n", self.columns[g].0));
                    text.push_str(&part.table(&keep).to_string());
                    text.push('\n');
                    start = end;
                }
                text.pop();
                text
            }
            _ => t.to_string(),
        };
        out.push('\n');
        if !dropped.is_empty() {
            let line = format!(
                "({} more columns with --wide: {})",
                dropped.len(),
                dropped.join(", ")
            );
            out.push_str(&wrap(&line, width));
        }
        out
    }
}

/// `text` safe inside HTML.
pub fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `text` wrapped at `width` on spaces, its indentation kept and continuation lines indented by
/// two more.
pub fn wrap(text: &str, width: Option<usize>) -> String {
    let Some(w) = width.filter(|w| *w >= 20) else {
        return format!("{text}\n");
    };
    let indent = &text[..text.len() - text.trim_start().len()];
    let mut out = String::new();
    let mut line = indent.to_string();
    for word in text.trim_start().split(' ') {
        if line.len() > indent.len() && line.chars().count() + 1 + word.chars().count() > w {
            out.push_str(&line);
            out.push('\n');
            line = format!("{indent}  {word}");
        } else {
            if line.len() > indent.len() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The distribution's columns, with their priorities.
fn distribution_columns() -> Vec<(String, u8)> {
    let prio = [240u8, 140, 220, 150, 90];
    let mut c = vec![("min [us]".to_string(), 130u8)];
    c.extend(
        PERCENTILES
            .iter()
            .zip(prio)
            .map(|((_, name), p)| (format!("{name} [us]"), p)),
    );
    c.extend([("max [us]".into(), 180), ("mean [us]".into(), 95)]);
    c
}

/// min, the percentiles (`—` where unsupported), max and mean, in microseconds.
/// A distribution's cells; across hosts, each figure under its clock bound marked with
/// [`UNDER_BOUND`].
fn distribution_cells(d: Option<&Distribution>, bound_ns: Option<u64>) -> Vec<String> {
    let Some(d) = d else {
        return vec!["-".into(); 3 + PERCENTILES.len()];
    };
    let cell = |v: f64| match bound_ns {
        Some(b) if v < b as f64 => format!("{}{UNDER_BOUND}", us(v)),
        _ => us(v),
    };
    let mut cells = vec![cell(d.min_ns as f64)];
    cells.extend(
        d.percentiles()
            .iter()
            .map(|p| p.map_or("—".into(), |v| cell(v as f64))),
    );
    cells.push(cell(d.max_ns as f64));
    cells.push(cell(d.mean_ns));
    cells
}

/// Marks a one-way figure smaller than the bound of the clock offsets it was corrected by.
pub const UNDER_BOUND: &str = "*";

fn grid_with_distribution(before: &[(&str, u8)], after: &[(&str, u8)]) -> Grid {
    let dist = distribution_columns();
    let mut cols: Vec<(&str, u8)> = before.to_vec();
    cols.extend(dist.iter().map(|(h, p)| (h.as_str(), *p)));
    cols.extend_from_slice(after);
    Grid::new(&cols)
}

/// A case's name in a table: its transport and the options it was given.
fn transport_cell(s: &CaseSummary) -> String {
    let name = if s.transport == crate::result::NO_TRANSPORT {
        // A workload that measures a runtime: no transport carries it.
        "-".to_string()
    } else if s.options.is_empty() {
        s.transport.clone()
    } else {
        format!("{} {}", s.transport, s.options)
    };
    if s.error.is_some() {
        format!("{name} (failed)")
    } else {
        name
    }
}

/// A case's workload and the parameters tables name beside it (`pairs n=100`).
fn workload_cell(s: &CaseSummary) -> String {
    if s.params.is_empty() {
        s.workload.clone()
    } else {
        format!("{} {}", s.workload, s.params)
    }
}

/// The main table: one row per case.
pub fn cases_table(summaries: &[CaseSummary], width: Option<usize>) -> String {
    cases_grid(summaries).render(width)
}

pub(crate) fn cases_grid(summaries: &[CaseSummary]) -> Grid {
    let mut g = grid_with_distribution(
        &[
            ("#", ALWAYS),
            ("transport", ALWAYS),
            ("workload", 250),
            ("size", 250),
            ("cpus", 200),
            ("wait", 120),
            ("latency", 110),
            ("samples", 100),
        ],
        &[
            ("rate [/s]", 210),
            ("MiB/s", 200),
            ("lost/dup/reord", 170),
            ("vs floor", 230),
        ],
    )
    .group_by("cpus")
    .optional(&["MiB/s", "lost/dup/reord"]);
    for (i, s) in summaries.iter().enumerate() {
        let mut row = vec![
            (i + 1).to_string(),
            transport_cell(s),
            workload_cell(s),
            if s.transport == crate::result::NO_TRANSPORT {
                "-".into()
            } else {
                format_size(s.size_bytes)
            },
            s.cpus.clone(),
            s.wait.clone(),
            s.latency_kind.clone(),
            s.latency
                .as_ref()
                .map_or("-".into(), |d| d.samples.to_string()),
        ];
        row.extend(distribution_cells(s.latency.as_ref(), s.one_way_bound_ns));
        row.push(format!("{:.0}", s.msgs_per_s));
        // A workload that moves no message (spawn, timers) has no bytes nor deliveries.
        if s.transport == crate::result::NO_TRANSPORT {
            row.extend(["-".to_string(), "-".to_string()]);
        } else {
            row.push(format!("{:.1}", s.mib_per_s));
            row.push(format!("{}/{}/{}", s.lost, s.duplicated, s.reordered));
        }
        row.push(s.vs_floor.map_or("-".into(), |r| {
            format!("{r:.2}x{}", if s.floor_note.is_some() { " *" } else { "" })
        }));
        g.row(row);
    }
    g
}

/// The workloads' own figures, a row per case (a row per N of a curve) and a column per figure.
pub fn figures_table(summaries: &[CaseSummary], width: Option<usize>) -> String {
    let mut names: Vec<&str> = Vec::new();
    for s in summaries {
        for (name, _) in &s.figures {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let stops = summaries.iter().any(|s| s.stopped_by.is_some());
    let mut cols: Vec<(&str, u8)> = vec![("#", ALWAYS), ("workload", ALWAYS)];
    cols.extend(names.iter().map(|n| (*n, 150)));
    if stops {
        cols.push(("stopped by", 200));
    }
    let mut g = Grid::new(&cols);
    for (i, s) in summaries.iter().enumerate() {
        if s.figures.is_empty() && s.stopped_by.is_none() {
            continue;
        }
        let mut row = vec![
            (i + 1).to_string(),
            match transport_cell(s).as_str() {
                "-" => workload_cell(s),
                t => format!("{} on {t}", workload_cell(s)),
            },
        ];
        for name in &names {
            row.push(
                s.figures
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or("-".into(), |(_, v)| figure(*v)),
            );
        }
        if stops {
            row.push(s.stopped_by.clone().unwrap_or_else(|| "-".into()));
        }
        g.row(row);
    }
    g.render(width)
}

/// Typed payloads: encode and decode beside a copy of as many bytes, and the latency they
/// are part of.
pub fn marshalling_table(summaries: &[CaseSummary], width: Option<usize>) -> String {
    marshalling_grid(summaries).render(width)
}

pub(crate) fn marshalling_grid(summaries: &[CaseSummary]) -> Grid {
    let mut g = Grid::new(&[
        ("#", ALWAYS),
        ("case", ALWAYS),
        ("payload", ALWAYS),
        ("encoded [B]", 240),
        ("memcpy [ns]", 230),
        ("encode p50 [ns]", 250),
        ("encode x memcpy", 245),
        ("encode p99 [ns]", 150),
        ("decode p50 [ns]", 250),
        ("decode x memcpy", 245),
        ("decode p99 [ns]", 150),
        ("in place p50 [ns]", 140),
        ("latency p50 [us]", 220),
    ]);
    for (i, s) in summaries.iter().enumerate() {
        let Some(m) = &s.marshalling else { continue };
        let p = |d: &Option<Distribution>, k: usize| {
            d.as_ref()
                .and_then(|d| d.percentiles()[k])
                .map_or("—".into(), |v| v.to_string())
        };
        let x = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.2}x"));
        g.row(vec![
            (i + 1).to_string(),
            match transport_cell(s).as_str() {
                "-" => s.workload.clone(),
                t => format!("{} on {t}", s.workload),
            },
            m.payload.clone(),
            format!("{:.0}", m.encoded_bytes),
            format!("{:.0}", m.memcpy_ns),
            p(&m.encode, 0),
            x(m.encode_vs_memcpy),
            p(&m.encode, 2),
            p(&m.decode, 0),
            x(m.decode_vs_memcpy),
            p(&m.decode, 2),
            p(&m.access, 0),
            s.latency
                .as_ref()
                .and_then(|d| d.p50_ns)
                .map_or("—".into(), |v| us(v as f64)),
        ]);
    }
    g
}

/// A figure with the digits that matter.
fn figure(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The per-role table: call times, CPU per message, context switches, memory.
pub fn roles_table(summaries: &[CaseSummary], width: Option<usize>) -> String {
    roles_grid(summaries).render(width)
}

pub(crate) fn roles_grid(summaries: &[CaseSummary]) -> Grid {
    let mut g = Grid::new(&[
        ("#", ALWAYS),
        ("role", ALWAYS),
        ("ran on", 200),
        ("messages", 150),
        ("write avg [us]", 180),
        ("write max [us]", 170),
        ("read avg [us]", 180),
        ("read max [us]", 170),
        ("user [us/msg]", 190),
        ("sys [us/msg]", 190),
        ("other threads [us/msg]", 140),
        ("cpu [%]", 160),
        ("ctx sw/msg", 120),
        ("preempted/msg", 120),
        ("reads/s", 110),
        ("new msgs/s", 110),
        ("peak RSS [MiB]", 130),
    ]);
    for (i, s) in summaries.iter().enumerate() {
        for r in &s.roles {
            let cpus: Vec<String> = r.cpus_seen.iter().map(|c| format!("cpu{c}")).collect();
            g.row(vec![
                (i + 1).to_string(),
                r.role.clone(),
                format!(
                    "{} {}",
                    match (&r.host, s.roles_as == "threads") {
                        (Some(h), _) => format!("host {h}"),
                        (None, true) => "thread".into(),
                        (None, false) => "process".into(),
                    },
                    cpus.join(",")
                ),
                r.messages.to_string(),
                opt_us(r.send_call_avg_ns),
                opt_us(r.send_call_max_ns.map(|v| v as f64)),
                opt_us(r.recv_call_avg_ns),
                opt_us(r.recv_call_max_ns.map(|v| v as f64)),
                format!("{:.2}", r.cpu_user_ns_per_msg / 1e3),
                format!("{:.2}", r.cpu_sys_ns_per_msg / 1e3),
                r.other_threads_ns_per_msg
                    .map_or("-".into(), |v| format!("{:.2}", v / 1e3)),
                format!("{:.0}", r.cpu_utilization_pct),
                format!("{:.2}", r.context_switches_per_msg),
                format!("{:.2}", r.preempted_per_msg),
                format!("{:.0}", r.read_calls_per_s),
                format!("{:.0}", r.new_messages_per_s),
                format!("{:.1}", r.peak_rss_kib as f64 / 1024.0),
            ]);
        }
    }
    g
}

/// Paced cases: the rate held, latency from the intended send time, the sender's lag.
pub fn paced_table(summaries: &[CaseSummary], width: Option<usize>) -> String {
    let mut g = Grid::new(&[
        ("#", ALWAYS),
        ("transport", ALWAYS),
        ("size", 240),
        ("rate [Hz]", 250),
        ("achieved [/s]", 245),
        ("error [%]", 240),
        ("from intended p50 [us]", 230),
        ("p99 [us]", 225),
        ("max [us]", 200),
        ("from send p50 [us]", 180),
        ("sender lag p99 [us]", 170),
        ("lag max [us]", 150),
        ("reader idle: msgs", 120),
        ("p50 [us]", 130),
        ("reader busy: msgs", 110),
        ("p50 [us] ", 125),
    ]);
    for (i, s) in summaries.iter().enumerate() {
        let Some(rate) = s.rate_hz else { continue };
        let p = |d: &Option<Distribution>, k: usize| {
            d.as_ref()
                .and_then(|d| d.percentiles()[k])
                .map_or("—".into(), |v| us(v as f64))
        };
        let max = |d: &Option<Distribution>| d.as_ref().map_or("-".into(), |d| us(d.max_ns as f64));
        let count =
            |d: &Option<Distribution>| d.as_ref().map_or("0".into(), |d| d.samples.to_string());
        g.row(vec![
            (i + 1).to_string(),
            transport_cell(s),
            format_size(s.size_bytes),
            format!("{rate:.0}"),
            // Per publisher and subscriber, like the rate asked for.
            s.rate_error_pct
                .map_or("-".into(), |e| format!("{:.1}", rate * (1.0 + e / 100.0))),
            s.rate_error_pct.map_or("-".into(), |e| format!("{e:+.2}")),
            p(&s.latency_from_intended, 0),
            p(&s.latency_from_intended, 2),
            max(&s.latency_from_intended),
            p(&s.latency, 0),
            p(&s.send_lag, 2),
            max(&s.send_lag),
            count(&s.latency_reader_idle),
            p(&s.latency_reader_idle, 0),
            count(&s.latency_reader_busy),
            p(&s.latency_reader_busy, 0),
        ]);
    }
    g.render(width)
}

/// Fan-out cases: each subscriber's deliveries and latency distribution.
pub fn subscribers_table(summaries: &[CaseSummary], width: Option<usize>) -> String {
    let mut g = grid_with_distribution(
        &[
            ("#", ALWAYS),
            ("subscriber", ALWAYS),
            ("received", 240),
            ("lost/dup/reord", 230),
            ("overwritten", 150),
        ],
        &[("host", 245), ("bound ± [us]", 245)],
    )
    .optional(&["host", "bound ± [us]"]);
    for (i, s) in summaries.iter().enumerate() {
        if s.fan_out.is_none() {
            continue;
        }
        for r in s.roles.iter().filter(|r| r.role.starts_with("subscriber")) {
            let mut row = vec![
                (i + 1).to_string(),
                r.role.clone(),
                r.received.to_string(),
                format!("{}/{}/{}", r.lost, r.duplicated, r.reordered),
                r.overwritten.to_string(),
            ];
            row.extend(distribution_cells(r.latency.as_ref(), r.one_way_bound_ns));
            // Across hosts each figure is good to ± this reader's clock bound and its senders'.
            row.push(r.host.clone().unwrap_or_else(|| "-".into()));
            row.push(
                r.one_way_bound_ns
                    .map_or("-".into(), |b| format!("±{:.1}", b as f64 / 1e3)),
            );
            g.row(row);
        }
    }
    g.render(width)
}

/// The floors each case divides by.
pub fn floors_table(summaries: &[CaseSummary], width: Option<usize>) -> String {
    floors_grid(summaries).render(width)
}

pub(crate) fn floors_grid(summaries: &[CaseSummary]) -> Grid {
    let mut g = Grid::new(&[
        ("#", ALWAYS),
        ("transport", ALWAYS),
        ("size", 240),
        ("cpus", 200),
        ("floor p50 [us]", 220),
        ("floor [MiB/s]", 220),
        ("msgperf", 230),
        ("vs floor", 240),
        ("wire [B/msg]", 150),
        ("not payload [B/msg]", 140),
    ]);
    for (i, s) in summaries.iter().enumerate() {
        let ours = match (s.floor_kind, &s.latency) {
            (Some(crate::result::FloorKind::RoundTrip), Some(d)) => d
                .p50_ns
                .map_or("-".into(), |v| format!("{} us p50", us(v as f64))),
            _ => format!("{:.1} MiB/s", s.mib_per_s),
        };
        g.row(vec![
            (i + 1).to_string(),
            s.transport.clone(),
            format_size(s.size_bytes),
            s.cpus.clone(),
            opt_us(s.floor_p50_ns.map(|v| v as f64)),
            s.floor_mib_per_s.map_or("-".into(), |v| format!("{v:.1}")),
            ours,
            s.vs_floor.map_or("-".into(), |r| format!("{r:.2}x")),
            s.wire_bytes_per_msg
                .map_or("-".into(), |v| format!("{v:.0}")),
            s.wire_overhead_bytes_per_msg
                .map_or("-".into(), |v| format!("{v:.0}")),
        ]);
    }
    g
}

/// Each case's settings as it ran: every transport option (defaults included) and how the
/// transport carried out the delivery asked for. Cases with the same settings share a line.
pub fn settings(run: &RunResult, width: Option<usize>) -> String {
    let mut seen: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
    for (i, c) in run.cases.iter().enumerate() {
        let cfg = &c.config;
        let opts: Vec<String> = cfg
            .effective_options
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut lines = vec![format!(
            "{}: options {}",
            cfg.transport,
            if opts.is_empty() {
                "(none)".to_string()
            } else {
                opts.join(" ")
            }
        )];
        for s in &cfg.delivery_mapping {
            lines.push(format!("  {} = {}: {}", s.setting, s.value, s.because));
        }
        match seen.iter_mut().find(|(t, _)| *t == lines) {
            Some((_, cases)) => cases.push(i + 1),
            None => seen.push((lines, vec![i + 1])),
        }
    }
    let mut out = String::new();
    for (lines, cases) in seen {
        let which: Vec<String> = cases.iter().map(|c| format!("#{c}")).collect();
        out.push_str(&wrap(
            &format!("settings {}: {}", which.join(" "), lines[0]),
            width,
        ));
        for l in &lines[1..] {
            out.push_str(&wrap(l, width));
        }
    }
    out
}

/// A round trip across hosts: the way there as the far end timed it (± its bound), beside half
/// the round trip, which needs no clock offset but assumes both ways alike.
fn one_way_beside_half_round_trip(
    i: usize,
    case: &crate::result::CaseResult,
    s: &CaseSummary,
) -> Option<String> {
    let rtt = s.latency.as_ref().filter(|_| case.latency_kind.from_send)?;
    let (reader, there) = s
        .roles
        .iter()
        .find_map(|r| Some((r, r.latency.as_ref()?)))?;
    let half = |v: Option<u64>| v.map_or("—".into(), |v| us(v as f64 / 2.0));
    let cell = |v: Option<u64>| v.map_or("—".into(), |v| us(v as f64));
    Some(format!(
        "one way #{}: to the {} p50 {} us, p99 {} us (± {} us), beside half the round trip: p50 {} us, p99 {} us.",
        i + 1,
        reader.role,
        cell(there.p50_ns),
        cell(there.p99_ns),
        reader
            .one_way_bound_ns
            .map_or("?".into(), |b| us(b as f64)),
        half(rtt.p50_ns),
        half(rtt.p99_ns)
    ))
}

/// Where roles ran on other hosts: each one's host, address and clock against the runner's,
/// and what one-way figures across hosts mean.
fn hosts_notes(run: &RunResult, summaries: &[CaseSummary]) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, case) in run.cases.iter().enumerate() {
        let far: Vec<String> = case
            .roles
            .iter()
            .filter_map(|r| {
                let h = r.host.as_ref()?;
                let clock = h.clock.as_ref().map_or("clock not measured".into(), |c| {
                    format!(
                        "clock {:+.6} s ± {:.1} us ({} probes, lowest round trip {:.1} us, drift {:.1} ppm)",
                        c.offset_ns as f64 / 1e9,
                        c.bound_ns as f64 / 1e3,
                        c.probes,
                        c.min_delay_ns as f64 / 1e3,
                        c.drift_ppm
                    )
                });
                let daemon = h.environment.time_sync.as_ref().map_or(String::new(), |t| {
                    format!(
                        "; its time daemon says ± {:.1} us ({})",
                        t.bound_ns as f64 / 1e3,
                        t.source
                    )
                });
                Some(format!(
                    "{} on {} at {} ({}, {}): {clock}{daemon}",
                    r.role, h.name, h.address, h.environment.hostname, h.launcher
                ))
            })
            .collect();
        if !far.is_empty() {
            lines.push(format!("hosts #{}: {}.", i + 1, far.join("; ")));
            lines.extend(
                summaries
                    .get(i)
                    .and_then(|s| one_way_beside_half_round_trip(i, case, s)),
            );
        }
    }
    if let (false, Some(t)) = (lines.is_empty(), &run.environment.time_sync) {
        lines.push(format!(
            "the runner's time daemon says ± {:.1} us ({}).",
            t.bound_ns as f64 / 1e3,
            t.source
        ));
    }
    if !lines.is_empty() {
        lines.push(format!("across hosts: a one-way figure is arrival less send time, the sender's clock put on the receiver's by the offset the runner measured (four-timestamp probes on the control channel before, during and after the run); it is good to ± the bound shown beside each reader (its clock's bound plus its senders', where they are on other hosts too; a case's one-way figures take the largest), a figure smaller than its bound is marked `{UNDER_BOUND}` (it could be all error), and a path slower one way than the other, which no probe sees, is not in it."));
    }
    lines
}

/// The lines that explain the starred ratios to the floor, from each case's (note, ratio): one
/// a case with details; else one a note, naming every case it explains.
fn floor_notes(cases: &[(Option<&str>, Option<f64>)], details: bool) -> Vec<String> {
    let mut notes: Vec<(&str, Vec<String>)> = Vec::new();
    for (i, (note, ratio)) in cases.iter().enumerate() {
        let Some(note) = *note else { continue };
        let case = match ratio {
            Some(r) => format!("#{} {r:.2}x", i + 1),
            None => format!("#{}", i + 1),
        };
        match notes.iter_mut().find(|(n, _)| *n == note && !details) {
            Some((_, cases)) => cases.push(case),
            None => notes.push((note, vec![case])),
        }
    }
    notes
        .into_iter()
        .map(|(note, cases)| format!("* vs floor {}: {note}", cases.join(", ")))
        .collect()
}

/// Notes, warnings and errors under the tables.
pub fn notes(
    run: &RunResult,
    summaries: &[CaseSummary],
    width: Option<usize>,
    details: bool,
) -> String {
    let mut lines: Vec<String> = Vec::new();
    let processes = summaries.iter().any(|s| s.roles_as == "processes");
    let mut latency: Vec<String> = Vec::new();
    for s in summaries {
        let meaning = format!("`{}` is {}", s.latency_kind, s.latency_meaning);
        if !latency.contains(&meaning) {
            latency.push(meaning);
        }
    }
    lines.push(format!("latency: {}.", latency.join("; ")));
    lines.push(format!(
        "cpus: the driving roles' CPU / the others'; roles ran as {}. wait: how readers waited (poll, or the transport's own strategy in a blocking call).",
        if processes {
            "processes (threads where marked)"
        } else {
            "threads of one process"
        }
    ));
    lines.push("rate: round trips/s (pingpong), messages received/s (stream), deliveries/s over every subscriber (pubsub); MiB/s: those messages' bytes, one direction, 2^20 B/s; sizes: k = 1024 B.".into());
    lines.push("percentiles: `—` where the samples cannot support one (pN needs 10 samples beyond it: p99.99 needs 100000).".into());
    lines.push("vs floor: round trips p50 / floor p50 (1.00x = the plain loop; lower is better); streams MiB/s / floor MiB/s (higher is better); `-` where no floor compares like with like (paced, polling, latest-value, several publishers or subscribers).".into());
    // Floors that crossed hosts: which link they looped over.
    let mut between: Vec<(String, Vec<String>)> = Vec::new();
    for (i, c) in run.cases.iter().enumerate() {
        if let Some([a, b]) = c.floor.as_ref().and_then(|f| f.between.as_ref()) {
            let link = format!("{a} and {b}");
            match between.iter_mut().find(|(l, _)| *l == link) {
                Some((_, cases)) => cases.push(format!("#{}", i + 1)),
                None => between.push((link, vec![format!("#{}", i + 1)])),
            }
        }
    }
    for (link, cases) in &between {
        lines.push(format!(
            "floor {}: looped between the hosts, {link} (the measuring side first), over the link the roles used.",
            cases.join(" ")
        ));
    }
    let fan_outs: Vec<&String> = summaries
        .iter()
        .filter_map(|s| s.fan_out.as_ref())
        .collect();
    if !fan_outs.is_empty() {
        let mut how = Vec::new();
        if fan_outs.iter().any(|f| f.contains("native")) {
            how.push("a native fan-out hands each message to the transport once, which delivers it to every subscriber (shm: one ring they all read; a middleware: its own fan-out)");
        }
        if fan_outs.iter().any(|f| f.contains("copy")) {
            how.push("a copy per subscriber: each publisher writes every message to each subscriber's channel, in turn");
        }
        lines.push(format!("pubsub: {}; latency merges every subscriber's histogram, a rate is per publisher, cpus are the publishers'/subscribers' CPU.", how.join("; ")));
    }
    if summaries.iter().any(|s| s.latency_reader_idle.is_some()) {
        lines.push("reader idle/busy: paced messages sent while the reader was already waiting (a blocking reader had to be woken) or before it asked (busy: the steady-state figure).".into());
    }
    let mut notes: Vec<&str> = Vec::new();
    for n in run
        .cases
        .iter()
        .filter_map(|c| c.config.transport_note.as_deref())
    {
        if !notes.contains(&n) {
            notes.push(n);
            lines.push(n.to_string());
        }
    }
    let c = &run.environment.clock;
    let shared = match c.shared_tsc_stamp_cost_ns {
        Some(ns)
            if run
                .cases
                .iter()
                .any(|k| k.stamps == crate::result::STAMPS_TSC) =>
        {
            format!(
                "; messages stamped from the TSC that one host's roles share, {ns:.1} ns a stamp"
            )
        }
        _ => String::new(),
    };
    lines.push(format!(
        "clock: {} ({} ns resolution, {:.1} ns a timestamp, {:.1} ns a recorded sample{shared}).",
        c.source, c.resolution_ns, c.read_cost_ns, c.record_cost_ns
    ));
    if summaries.iter().any(|s| s.marshalling.is_some()) {
        lines.push(format!(
            "marshalling: encode, decode and the memcpy beside them are each timed around one call on the role's clock, so each includes a timestamp's cost ({:.1} ns here) and a small type's ratio leans toward 1x; the formats timed alone, in batches (docs/payloads.md), carry no such cost.",
            c.read_cost_ns
        ));
    }
    lines.extend(hosts_notes(run, summaries));
    let memory: Vec<&str> = [&run.environment.malloc, &run.environment.host_memory]
        .into_iter()
        .filter(|m| !m.is_empty())
        .map(String::as_str)
        .collect();
    if !memory.is_empty() {
        lines.push(format!("memory: {}.", memory.join("; ")));
    }
    let starred: Vec<_> = summaries
        .iter()
        .map(|s| (s.floor_note.as_deref(), s.vs_floor))
        .collect();
    lines.extend(floor_notes(&starred, details));
    // A warning per case with details; else one line per kind of warning, naming its cases.
    let mut kinds: Vec<(
        std::mem::Discriminant<warnings::Warning>,
        String,
        Vec<usize>,
    )> = Vec::new();
    for (i, (case, s)) in run.cases.iter().zip(summaries).enumerate() {
        for w in warnings::for_case(case, s, &run.environment) {
            if details {
                lines.push(format!("warning #{}: {w}", i + 1));
                continue;
            }
            let kind = std::mem::discriminant(&w);
            match kinds.iter_mut().find(|k| k.0 == kind) {
                Some(k) => k.2.push(i + 1),
                None => kinds.push((kind, w.to_string(), vec![i + 1])),
            }
        }
    }
    for (_, first, cases) in kinds {
        let also = match cases.len() {
            1 => String::new(),
            n => format!(
                " (so do {}: {n} cases; --details gives each one's figures)",
                cases[1..]
                    .iter()
                    .map(|c| format!("#{c}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        };
        lines.push(format!("warning #{}{also}: {first}", cases[0]));
    }
    for (i, s) in summaries.iter().enumerate() {
        if let Some(e) = &s.error {
            lines.push(format!("error #{}: {e}", i + 1));
        }
    }
    if run.interrupted {
        lines.push(
            "interrupted: the run stopped early (Ctrl-C, SIGTERM or SIGHUP); the cases above hold what was measured."
                .into(),
        );
    }
    lines.iter().map(|l| wrap(l, width)).collect()
}

/// The run in words, hyperfine-style: for each kind of figure, the best and worst case and how
/// far apart they are; what failed and why.
pub fn summary_in_words(summaries: &[CaseSummary], width: Option<usize>) -> String {
    let mut lines = Vec::new();
    let name = |i: usize, s: &CaseSummary| {
        format!(
            "#{} {} {} {} (cpus {})",
            i + 1,
            transport_cell(s),
            s.workload,
            format_size(s.size_bytes),
            s.cpus
        )
    };
    let mut kinds: Vec<&str> = Vec::new();
    for s in summaries {
        if !kinds.contains(&s.latency_kind.as_str()) {
            kinds.push(&s.latency_kind);
        }
    }
    for kind in kinds {
        let rows: Vec<(usize, &CaseSummary, u64)> = summaries
            .iter()
            .enumerate()
            .filter(|(_, s)| s.latency_kind == kind && s.error.is_none())
            .filter_map(|(i, s)| Some((i, s, s.latency.as_ref()?.p50_ns?)))
            .collect();
        if rows.len() < 2 {
            continue;
        }
        let best = rows.iter().min_by_key(|r| r.2).expect("two rows");
        let worst = rows.iter().max_by_key(|r| r.2).expect("two rows");
        lines.push(format!(
            "lowest {} p50: {} at {} us, {:.1}x lower than the highest, {} at {} us.",
            kind,
            name(best.0, best.1),
            us(best.2 as f64),
            worst.2 as f64 / best.2.max(1) as f64,
            name(worst.0, worst.1),
            us(worst.2 as f64)
        ));
    }
    let streams: Vec<(usize, &CaseSummary)> = summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.latency_kind == LatencyKind::ONE_WAY.label
                && s.rate_hz.is_none()
                && s.error.is_none()
                && s.mib_per_s > 0.0
        })
        .collect();
    if streams.len() >= 2 {
        let best = streams
            .iter()
            .max_by(|a, b| a.1.mib_per_s.total_cmp(&b.1.mib_per_s))
            .expect("two rows");
        let worst = streams
            .iter()
            .min_by(|a, b| a.1.mib_per_s.total_cmp(&b.1.mib_per_s))
            .expect("two rows");
        lines.push(format!(
            "highest throughput: {} at {:.1} MiB/s, {:.1}x the lowest, {} at {:.1} MiB/s.",
            name(best.0, best.1),
            best.1.mib_per_s,
            best.1.mib_per_s / worst.1.mib_per_s,
            name(worst.0, worst.1),
            worst.1.mib_per_s
        ));
    }
    // Furthest from its floor: the highest ratio of a round trip's p50 to its floor's, or the
    // lowest of a stream's throughput to its floor's.
    let gap = |s: &CaseSummary| match (s.floor_kind, s.vs_floor) {
        (Some(crate::result::FloorKind::RoundTrip), Some(r)) => Some(r),
        (Some(crate::result::FloorKind::Stream), Some(r)) if r > 0.0 => Some(1.0 / r),
        _ => None,
    };
    if let Some((i, s, g)) = summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| s.error.is_none())
        .filter_map(|(i, s)| Some((i, s, gap(s)?)))
        .max_by(|a, b| a.2.total_cmp(&b.2))
    {
        if g > 1.25 {
            lines.push(format!(
                "furthest from its floor: {} at {:.2}x{}.",
                name(i, s),
                s.vs_floor.unwrap_or(g),
                s.floor_note
                    .as_ref()
                    .map_or(String::new(), |n| format!(" ({n})"))
            ));
        } else {
            lines.push(
                "every case is within 1.25x of its floor (the transport's plain loop).".into(),
            );
        }
    }
    let failed: Vec<String> = summaries
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.error.as_ref().map(|e| format!("#{}: {e}", i + 1)))
        .collect();
    match failed.len() {
        0 => lines.push(format!(
            "all {} cases ran without an error.",
            summaries.len()
        )),
        n => lines.push(format!(
            "{n} of {} cases failed: {}.",
            summaries.len(),
            failed.join("; ")
        )),
    }
    let mut out = String::new();
    for l in lines {
        out.push_str(&wrap(&format!("summary: {l}"), width));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Grid {
        let mut g = Grid::new(&[
            ("#", ALWAYS),
            ("transport", ALWAYS),
            ("cpus", 10),
            ("p50 [us]", 200),
        ])
        .group_by("cpus")
        .optional(&["MiB/s"]);
        for (i, cpus) in ["0/0", "0/0", "0/1"].iter().enumerate() {
            g.row(vec![
                (i + 1).to_string(),
                "uds".into(),
                cpus.to_string(),
                "9.10".into(),
            ]);
        }
        g
    }

    #[test]
    fn a_hidden_grouping_column_becomes_heading_lines() {
        let wide = grid().render(None);
        assert!(
            wide.contains("cpus") && !wide.contains("cpus 0/0:"),
            "{wide}"
        );
        let narrow = grid().render(Some(32));
        assert!(
            narrow.contains("cpus 0/0:\n") && narrow.contains("cpus 0/1:\n"),
            "{narrow}"
        );
        let first = narrow.find("cpus 0/0:").unwrap();
        let second = narrow.find("cpus 0/1:").unwrap();
        assert!(
            narrow[first..second].contains(" 2 "),
            "rows 1-2 under 0/0: {narrow}"
        );
        assert!(
            narrow[second..].contains(" 3 "),
            "row 3 under 0/1: {narrow}"
        );
    }

    #[test]
    fn starred_ratios_share_a_line_per_note_unless_details_are_asked() {
        let cases = [
            (Some("short"), Some(1.5)),
            (None, Some(1.0)),
            (Some("noisy"), Some(0.5)),
            (Some("short"), Some(0.7)),
        ];
        assert_eq!(
            floor_notes(&cases, false),
            [
                "* vs floor #1 1.50x, #4 0.70x: short",
                "* vs floor #3 0.50x: noisy"
            ]
        );
        assert_eq!(floor_notes(&cases, true).len(), 3);
        assert!(floor_notes(&[(None, None)], false).is_empty());
    }

    #[test]
    fn an_optional_column_with_no_value_is_left_out() {
        let mut g = Grid::new(&[("#", ALWAYS), ("MiB/s", 200)]).optional(&["MiB/s"]);
        g.row(vec!["1".into(), "-".into()]);
        assert!(!g.render(None).contains("MiB/s"));
        assert!(!g.markdown().contains("MiB/s"));
        g.row(vec!["2".into(), "3.5".into()]);
        assert!(g.render(None).contains("MiB/s"));
    }
}
