//! The terminal table: one row per case (latency distribution, rates, ratio to the floor), a
//! second table per role (call times, CPU, memory), then notes, warnings and errors.

use super::summary::{CaseSummary, PERCENTILES};
use super::warnings;
use crate::result::RunResult;
use crate::units::format_size;
use comfy_table::{CellAlignment, Table};
use std::fmt::Write;

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

/// The headers of [`distribution_cells`].
fn distribution_header() -> Vec<String> {
    let mut h = vec!["min [us]".to_string()];
    h.extend(PERCENTILES.iter().map(|(_, name)| format!("{name} [us]")));
    h.extend(["max [us]".into(), "mean [us]".into()]);
    h
}

/// min, the percentiles (`—` where unsupported), max and mean, in microseconds.
fn distribution_cells(d: Option<&super::summary::Distribution>) -> Vec<String> {
    let Some(d) = d else {
        return vec!["-".into(); 3 + PERCENTILES.len()];
    };
    let mut cells = vec![us(d.min_ns as f64)];
    cells.extend(
        d.percentiles()
            .iter()
            .map(|p| p.map_or("—".into(), |v| us(v as f64))),
    );
    cells.push(us(d.max_ns as f64));
    cells.push(us(d.mean_ns));
    cells
}

/// Lines above, below and under the header only: dense rows, easy to scan.
pub const STYLE: &str = "  ── ══      ──    ";

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(STYLE);
    t.set_header(header.iter().copied());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// The main table: one row per case.
pub fn cases_table(summaries: &[CaseSummary]) -> String {
    let mut header = vec![
        "#",
        "transport",
        "workload",
        "size [B]",
        "cpus",
        "wait",
        "latency",
        "samples",
    ];
    let dist = distribution_header();
    header.extend(dist.iter().map(String::as_str));
    header.extend(["msgs/s", "MB/s", "lost/dup/reord", "vs floor"]);
    let mut t = table(&header);
    for (i, s) in summaries.iter().enumerate() {
        let mut row = vec![
            (i + 1).to_string(),
            if s.options.is_empty() {
                s.transport.clone()
            } else {
                format!("{} {}", s.transport, s.options)
            },
            s.workload.clone(),
            format_size(s.size_bytes),
            s.cpus.clone(),
            s.wait.clone(),
            s.latency_kind.label().to_string(),
        ];
        row.push(
            s.latency
                .as_ref()
                .map_or("-".into(), |d| d.samples.to_string()),
        );
        row.extend(distribution_cells(s.latency.as_ref()));
        row.push(format!("{:.0}", s.msgs_per_s));
        row.push(format!("{:.1}", s.mb_per_s));
        row.push(format!("{}/{}/{}", s.lost, s.duplicated, s.reordered));
        row.push(s.vs_floor.map_or("-".into(), |r| format!("{r:.2}x")));
        if s.error.is_some() {
            row[1] = format!("{} (failed)", row[1]);
        }
        t.add_row(row);
    }
    t.to_string()
}

/// The per-role table: call times, CPU per message, context switches, memory.
pub fn roles_table(summaries: &[CaseSummary]) -> String {
    let mut t = table(&[
        "#",
        "role",
        "ran on",
        "messages",
        "write avg [us]",
        "write max [us]",
        "read avg [us]",
        "read max [us]",
        "user [us/msg]",
        "sys [us/msg]",
        "cpu [%]",
        "ctx sw/msg",
        "reads/s",
        "new msgs/s",
        "peak RSS [MiB]",
    ]);
    for (i, s) in summaries.iter().enumerate() {
        for r in &s.roles {
            let cpus: Vec<String> = r.cpus_seen.iter().map(|c| format!("cpu{c}")).collect();
            t.add_row(vec![
                (i + 1).to_string(),
                r.role.clone(),
                format!(
                    "{} {}",
                    if s.roles_as == "threads" {
                        "thread"
                    } else {
                        "process"
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
                format!("{:.0}", r.cpu_utilization_pct),
                format!("{:.2}", r.context_switches_per_msg),
                format!("{:.0}", r.read_calls_per_s),
                format!("{:.0}", r.new_messages_per_s),
                format!("{:.1}", r.peak_rss_kib as f64 / 1024.0),
            ]);
        }
    }
    t.to_string()
}

/// Paced cases: the rate held, latency from the intended send time, the sender's lag.
pub fn paced_table(summaries: &[CaseSummary]) -> String {
    let mut t = table(&[
        "#",
        "transport",
        "size [B]",
        "rate [Hz]",
        "achieved [msgs/s]",
        "error [%]",
        "from intended p50 [us]",
        "p99 [us]",
        "max [us]",
        "from send p50 [us]",
        "sender lag p99 [us]",
        "lag max [us]",
        "reader idle: msgs",
        "p50 [us]",
        "reader busy: msgs",
        "p50 [us]",
    ]);
    for (i, s) in summaries.iter().enumerate() {
        let Some(rate) = s.rate_hz else { continue };
        let p = |d: &Option<super::summary::Distribution>, k: usize| {
            d.as_ref()
                .and_then(|d| d.percentiles()[k])
                .map_or("—".into(), |v| us(v as f64))
        };
        let max = |d: &Option<super::summary::Distribution>| {
            d.as_ref().map_or("-".into(), |d| us(d.max_ns as f64))
        };
        let count = |d: &Option<super::summary::Distribution>| {
            d.as_ref().map_or("0".into(), |d| d.samples.to_string())
        };
        t.add_row(vec![
            (i + 1).to_string(),
            s.transport.clone(),
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
    t.to_string()
}

/// Fan-out cases: each subscriber's deliveries and latency distribution.
pub fn subscribers_table(summaries: &[CaseSummary]) -> String {
    let mut header = vec![
        "#",
        "subscriber",
        "received",
        "lost/dup/reord",
        "overwritten",
    ];
    let dist = distribution_header();
    header.extend(dist.iter().map(String::as_str));
    let mut t = table(&header);
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
            row.extend(distribution_cells(r.latency.as_ref()));
            t.add_row(row);
        }
    }
    t.to_string()
}

/// The floors each case divides by.
pub fn floors_table(summaries: &[CaseSummary]) -> String {
    let mut t = table(&[
        "#",
        "transport",
        "size [B]",
        "cpus",
        "floor p50 [us]",
        "floor [MB/s]",
        "msgperf",
        "vs floor",
        "wire [B/msg]",
        "not payload [B/msg]",
    ]);
    for (i, s) in summaries.iter().enumerate() {
        let ours = match (s.floor_kind, &s.latency) {
            (Some(crate::result::FloorKind::RoundTrip), Some(d)) => d
                .p50_ns
                .map_or("-".into(), |v| format!("{} us p50", us(v as f64))),
            _ => format!("{:.1} MB/s", s.mb_per_s),
        };
        t.add_row(vec![
            (i + 1).to_string(),
            s.transport.clone(),
            format_size(s.size_bytes),
            s.cpus.clone(),
            opt_us(s.floor_p50_ns.map(|v| v as f64)),
            s.floor_mb_per_s.map_or("-".into(), |v| format!("{v:.1}")),
            ours,
            s.vs_floor.map_or("-".into(), |r| format!("{r:.2}x")),
            s.wire_bytes_per_msg
                .map_or("-".into(), |v| format!("{v:.0}")),
            s.wire_overhead_bytes_per_msg
                .map_or("-".into(), |v| format!("{v:.0}")),
        ]);
    }
    t.to_string()
}

/// Notes, warnings and errors under the tables.
pub fn notes(run: &RunResult, summaries: &[CaseSummary]) -> String {
    let mut out = String::new();
    let roles_as: Vec<&str> = summaries.iter().map(|s| s.roles_as.as_str()).collect();
    let processes = roles_as.contains(&"processes");
    let _ = writeln!(out, "latency: `round trip` is send to reply on the initiator (a whole round trip, not half); `one-way` is the send timestamp to arrival at the reader, including queueing (one host clock).");
    let _ = writeln!(
        out,
        "cpus: the active/passive role's CPU; roles ran as {}.",
        if processes {
            "two processes (threads where marked)"
        } else {
            "threads of one process"
        }
    );
    let _ = writeln!(out, "percentiles: `—` where the samples cannot support one (pN needs 10 samples beyond it: p99.99 needs 100000).");
    let _ = writeln!(out, "vs floor: round trips p50 / floor p50 (1.00x = the plain loop; lower is better); streams MB/s / floor MB/s (higher is better).");
    let fan_outs: Vec<&String> = summaries
        .iter()
        .filter_map(|s| s.fan_out.as_ref())
        .collect();
    if !fan_outs.is_empty() {
        let mut how = Vec::new();
        if fan_outs.iter().any(|f| f.contains("native")) {
            how.push("a native fan-out writes every message once, into one ring that every subscriber reads");
        }
        if fan_outs.iter().any(|f| f.contains("copy")) {
            how.push("a copy per subscriber: each publisher writes every message to each subscriber's channel, in turn");
        }
        let _ = writeln!(out, "pubsub: {}; latency merges every subscriber's histogram, msgs/s counts deliveries, a rate is per publisher, cpus are the publishers'/subscribers' CPU.", how.join("; "));
    }
    if summaries.iter().any(|s| s.latency_reader_idle.is_some()) {
        let _ = writeln!(out, "reader idle/busy: paced messages sent while the reader was already waiting (a blocking reader had to be woken) or before it asked (busy: the steady-state figure).");
    }
    if run.cases.iter().any(|c| c.config.transport == "iceoryx2") {
        let _ = writeln!(out, "iceoryx2 vs shm: same workload, wait strategy, placement and processes; both build every message in place and check every payload byte (iceoryx2's own benchmark touches no payload).");
    }
    let c = &run.environment.clock;
    let _ = writeln!(
        out,
        "clock: {} ({} ns resolution, {:.1} ns a timestamp, {:.1} ns a recorded sample).",
        c.source, c.resolution_ns, c.read_cost_ns, c.record_cost_ns
    );
    for (i, (case, s)) in run.cases.iter().zip(summaries).enumerate() {
        for w in warnings::for_case(case, s, &run.environment) {
            let _ = writeln!(out, "warning #{}: {w}", i + 1);
        }
        if let Some(e) = &s.error {
            let _ = writeln!(out, "error #{}: {e}", i + 1);
        }
    }
    if run.interrupted {
        let _ = writeln!(
            out,
            "interrupted: the run stopped at Ctrl-C; the cases above hold what was measured."
        );
    }
    out
}
