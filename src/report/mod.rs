//! Room `report`: reads results only (live or saved) and renders them: the terminal table,
//! JSON and CSV. Percentiles are computed here, from the histograms.

pub mod progress;
pub mod summary;
pub mod sweep;
pub mod table;
pub mod warnings;

use crate::result::RunResult;
use serde::Serialize;
use summary::{summarize, CaseSummary};

/// The terminal output: cases, floors, roles (with `details`), notes.
pub fn render_terminal(run: &RunResult, details: bool) -> String {
    let s: Vec<CaseSummary> = run.cases.iter().map(summarize).collect();
    let mut out = table::cases_table(&s);
    out.push('\n');
    if s.iter().any(|c| c.rate_hz.is_some()) {
        out.push_str(&table::paced_table(&s));
        out.push('\n');
    }
    if s.iter().any(|c| c.fan_out.is_some()) {
        out.push_str(&table::subscribers_table(&s));
        out.push('\n');
    }
    if details {
        out.push_str(&table::roles_table(&s));
        out.push('\n');
        if s.iter()
            .any(|c| c.vs_floor.is_some() || c.wire_bytes_per_msg.is_some())
        {
            out.push_str(&table::floors_table(&s));
            out.push('\n');
        }
    }
    out.push_str(&sweep::render(&sweep::sweeps(&s)));
    out.push_str(&table::notes(run, &s));
    out
}

/// The JSON document: the run as recorded (histograms included) with each case's computed
/// summary beside it. `msgperf report` reads it back.
pub fn to_json(run: &RunResult) -> Result<Vec<u8>, String> {
    let mut v = serde_json::to_value(run).map_err(|e| e.to_string())?;
    if let Some(cases) = v.get_mut("cases").and_then(|c| c.as_array_mut()) {
        for (c, r) in cases.iter_mut().zip(&run.cases) {
            let s = serde_json::to_value(summarize(r)).map_err(|e| e.to_string())?;
            c.as_object_mut().map(|o| o.insert("summary".into(), s));
        }
    }
    serde_json::to_vec_pretty(&v).map_err(|e| e.to_string())
}

/// One CSV row per case; units in every column name.
#[derive(Serialize)]
struct CsvRow<'a> {
    transport: &'a str,
    options: &'a str,
    workload: &'a str,
    size_bytes: usize,
    placement: &'a str,
    cpus: &'a str,
    roles_as: &'a str,
    wait: &'a str,
    latency_kind: &'a str,
    samples: u64,
    min_ns: Option<u64>,
    mean_ns: Option<f64>,
    p50_ns: Option<u64>,
    p90_ns: Option<u64>,
    p99_ns: Option<u64>,
    p99_9_ns: Option<u64>,
    p99_99_ns: Option<u64>,
    max_ns: Option<u64>,
    msgs_per_s: f64,
    mb_per_s: f64,
    floor_p50_ns: Option<u64>,
    floor_mb_per_s: Option<f64>,
    vs_floor: Option<f64>,
    lost: u64,
    duplicated: u64,
    reordered: u64,
    corrupted: u64,
    active_role: &'a str,
    active_send_call_avg_ns: Option<f64>,
    active_send_call_max_ns: Option<u64>,
    active_recv_call_avg_ns: Option<f64>,
    active_recv_call_max_ns: Option<u64>,
    active_cpu_user_ns_per_msg: Option<f64>,
    active_cpu_sys_ns_per_msg: Option<f64>,
    active_context_switches_per_msg: Option<f64>,
    active_peak_rss_kib: Option<u64>,
    passive_role: &'a str,
    passive_send_call_avg_ns: Option<f64>,
    passive_send_call_max_ns: Option<u64>,
    passive_recv_call_avg_ns: Option<f64>,
    passive_recv_call_max_ns: Option<u64>,
    passive_cpu_user_ns_per_msg: Option<f64>,
    passive_cpu_sys_ns_per_msg: Option<f64>,
    passive_context_switches_per_msg: Option<f64>,
    passive_peak_rss_kib: Option<u64>,
    interrupted: bool,
    error: &'a str,
    hostname: &'a str,
    kernel: &'a str,
    cpu_model: &'a str,
    started_utc: &'a str,
}

pub fn to_csv(run: &RunResult) -> Result<Vec<u8>, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let summaries: Vec<CaseSummary> = run.cases.iter().map(summarize).collect();
    for s in &summaries {
        let d = s.latency.as_ref();
        let p = |i: usize| d.and_then(|d| d.percentiles_ns[i]);
        let a = s.roles.first();
        let b = s.roles.get(1);
        let e = &run.environment;
        w.serialize(CsvRow {
            transport: &s.transport,
            options: &s.options,
            workload: &s.workload,
            size_bytes: s.size_bytes,
            placement: &s.placement,
            cpus: &s.cpus,
            roles_as: &s.roles_as,
            wait: &s.wait,
            latency_kind: &s.latency_kind,
            samples: d.map_or(0, |d| d.samples),
            min_ns: d.map(|d| d.min_ns),
            mean_ns: d.map(|d| d.mean_ns),
            p50_ns: p(0),
            p90_ns: p(1),
            p99_ns: p(2),
            p99_9_ns: p(3),
            p99_99_ns: p(4),
            max_ns: d.map(|d| d.max_ns),
            msgs_per_s: s.msgs_per_s,
            mb_per_s: s.mb_per_s,
            floor_p50_ns: s.floor_p50_ns,
            floor_mb_per_s: s.floor_mb_per_s,
            vs_floor: s.vs_floor,
            lost: s.lost,
            duplicated: s.duplicated,
            reordered: s.reordered,
            corrupted: s.corrupted,
            active_role: a.map_or("", |r| r.role.as_str()),
            active_send_call_avg_ns: a.and_then(|r| r.send_call_avg_ns),
            active_send_call_max_ns: a.and_then(|r| r.send_call_max_ns),
            active_recv_call_avg_ns: a.and_then(|r| r.recv_call_avg_ns),
            active_recv_call_max_ns: a.and_then(|r| r.recv_call_max_ns),
            active_cpu_user_ns_per_msg: a.map(|r| r.cpu_user_ns_per_msg),
            active_cpu_sys_ns_per_msg: a.map(|r| r.cpu_sys_ns_per_msg),
            active_context_switches_per_msg: a.map(|r| r.context_switches_per_msg),
            active_peak_rss_kib: a.map(|r| r.peak_rss_kib),
            passive_role: b.map_or("", |r| r.role.as_str()),
            passive_send_call_avg_ns: b.and_then(|r| r.send_call_avg_ns),
            passive_send_call_max_ns: b.and_then(|r| r.send_call_max_ns),
            passive_recv_call_avg_ns: b.and_then(|r| r.recv_call_avg_ns),
            passive_recv_call_max_ns: b.and_then(|r| r.recv_call_max_ns),
            passive_cpu_user_ns_per_msg: b.map(|r| r.cpu_user_ns_per_msg),
            passive_cpu_sys_ns_per_msg: b.map(|r| r.cpu_sys_ns_per_msg),
            passive_context_switches_per_msg: b.map(|r| r.context_switches_per_msg),
            passive_peak_rss_kib: b.map(|r| r.peak_rss_kib),
            interrupted: s.interrupted,
            error: s.error.as_deref().unwrap_or(""),
            hostname: &e.hostname,
            kernel: &e.kernel,
            cpu_model: &e.cpu_model,
            started_utc: &e.started_utc,
        })
        .map_err(|e| e.to_string())?;
    }
    w.into_inner().map_err(|e| e.to_string())
}
