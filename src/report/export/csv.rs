//! CSV: one row per case (what ran, with every option, and what it measured; units in every
//! column name), and one per role in a second file beside it (`r.csv` → `r.roles.csv`).

use super::ExportError;
use crate::report::summary::summarize;
use crate::result::RunResult;
use serde::Serialize;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

pub const FORMAT: super::Format = super::Format {
    name: "csv",
    about: "a row per case, and a row per role in FILE.roles.csv beside it",
    writes: super::Writes::WithBeside(|p| roles_path(p).into_iter().collect(), render),
};

fn render(run: &RunResult, path: &Path) -> super::Files<PathBuf> {
    let mut out = vec![(path.to_path_buf(), to_csv(run)?)];
    if let Some(roles) = roles_path(path) {
        out.push((roles, roles_csv(run)?));
    }
    Ok(out)
}

/// The roles' CSV beside the cases' one, `r.csv` → `r.roles.csv`, where the cases' CSV is a
/// file (standard output, a FIFO or a device have no place beside them).
fn roles_path(path: &Path) -> Option<PathBuf> {
    if path.as_os_str() == "-" {
        return None;
    }
    if let Ok(m) = std::fs::metadata(path) {
        if m.file_type().is_fifo() || m.file_type().is_char_device() {
            return None;
        }
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let ext = path.extension().map(|e| e.to_string_lossy().to_string());
    Some(path.with_file_name(match ext {
        Some(e) => format!("{stem}.roles.{e}"),
        None => format!("{stem}.roles"),
    }))
}

/// One CSV row per case: what ran (every option, the rate, the length, the roles) and what it
/// measured; units in every column name.
#[derive(Serialize)]
struct CaseRow<'a> {
    case: usize,
    key: &'a str,
    transport: &'a str,
    workload: &'a str,
    options: String,
    effective_options: String,
    size_bytes: usize,
    count: Option<u64>,
    duration_ns: Option<u64>,
    warmup_ns: u64,
    rate_hz: Option<f64>,
    pubs: usize,
    subs: usize,
    placement: &'a str,
    cpus: &'a str,
    roles_as: &'a str,
    wait: &'a str,
    /// The workload's parameters as the case ran them, `key=value` separated by spaces.
    params: String,
    checksum: bool,
    strict: bool,
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
    mib_per_s: f64,
    floor_kind: Option<crate::result::FloorKind>,
    floor_p50_ns: Option<u64>,
    floor_mib_per_s: Option<f64>,
    vs_floor: Option<f64>,
    lost: u64,
    duplicated: u64,
    reordered: u64,
    corrupted: u64,
    overwritten: u64,
    rate_error_pct: Option<f64>,
    /// Typed payloads (`--payload`): the mean encoded body, a copy of as many bytes, and
    /// encode and decode p50 over every role.
    encoded_bytes: Option<f64>,
    memcpy_ns: Option<f64>,
    encode_p50_ns: Option<u64>,
    decode_p50_ns: Option<u64>,
    interrupted: bool,
    error: &'a str,
    hostname: &'a str,
    kernel: &'a str,
    cpu_model: &'a str,
    started_utc: &'a str,
}

fn pairs(o: &std::collections::BTreeMap<String, String>) -> String {
    o.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What each table is called in an error.
const CASES: &str = "the CSV table of cases";
const ROLES: &str = "the CSV table of roles";

fn to_csv(run: &RunResult) -> Result<Vec<u8>, ExportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for (i, c) in run.cases.iter().enumerate() {
        let s = summarize(c);
        let cfg = &c.config;
        let d = s.latency.as_ref();
        let m = s.marshalling.as_ref();
        let e = &run.environment;
        w.serialize(CaseRow {
            case: i + 1,
            key: &c.key,
            transport: &s.transport,
            workload: &s.workload,
            options: pairs(&cfg.options),
            effective_options: pairs(&cfg.effective_options),
            size_bytes: s.size_bytes,
            count: cfg.count,
            duration_ns: cfg.duration.map(|d| d.as_nanos() as u64),
            warmup_ns: cfg.warmup.as_nanos() as u64,
            rate_hz: cfg.rate_hz,
            pubs: cfg.pubs,
            subs: cfg.subs,
            placement: &s.placement,
            cpus: &s.cpus,
            roles_as: &s.roles_as,
            wait: &s.wait,
            params: pairs(&cfg.effective_params),
            checksum: cfg.checksum,
            strict: cfg.strict,
            latency_kind: &s.latency_kind,
            samples: d.map_or(0, |d| d.samples),
            min_ns: d.map(|d| d.min_ns),
            mean_ns: d.map(|d| d.mean_ns),
            p50_ns: d.and_then(|d| d.p50_ns),
            p90_ns: d.and_then(|d| d.p90_ns),
            p99_ns: d.and_then(|d| d.p99_ns),
            p99_9_ns: d.and_then(|d| d.p99_9_ns),
            p99_99_ns: d.and_then(|d| d.p99_99_ns),
            max_ns: d.map(|d| d.max_ns),
            msgs_per_s: s.msgs_per_s,
            mib_per_s: s.mib_per_s,
            floor_kind: s.floor_kind,
            floor_p50_ns: s.floor_p50_ns,
            floor_mib_per_s: s.floor_mib_per_s,
            vs_floor: s.vs_floor,
            lost: s.lost,
            duplicated: s.duplicated,
            reordered: s.reordered,
            corrupted: s.corrupted,
            overwritten: s.overwritten,
            rate_error_pct: s.rate_error_pct,
            encoded_bytes: m.map(|m| m.encoded_bytes),
            memcpy_ns: m.map(|m| m.memcpy_ns),
            encode_p50_ns: m.and_then(|m| m.encode.as_ref()?.p50_ns),
            decode_p50_ns: m.and_then(|m| m.decode.as_ref()?.p50_ns),
            interrupted: s.interrupted,
            error: s.error.as_deref().unwrap_or(""),
            hostname: &e.hostname,
            kernel: &e.kernel,
            cpu_model: &e.cpu_model,
            started_utc: &e.started_utc,
        })
        .map_err(|e| ExportError::new(CASES, e))?;
    }
    w.into_inner()
        .map_err(|e| ExportError::new(CASES, e.into_error()))
}

/// One CSV row per role of every case (the second file beside the cases' one).
#[derive(Serialize)]
struct RoleRow<'a> {
    case: usize,
    key: &'a str,
    role: &'a str,
    role_kind: &'a str,
    role_number: Option<u32>,
    pid: u32,
    cpus_seen: String,
    messages: u64,
    received: u64,
    lost: u64,
    duplicated: u64,
    reordered: u64,
    overwritten: u64,
    latency_samples: u64,
    latency_p50_ns: Option<u64>,
    latency_p99_ns: Option<u64>,
    latency_max_ns: Option<u64>,
    send_call_avg_ns: Option<f64>,
    send_call_max_ns: Option<u64>,
    recv_call_avg_ns: Option<f64>,
    recv_call_max_ns: Option<u64>,
    cpu_user_ns_per_msg: f64,
    cpu_sys_ns_per_msg: f64,
    other_threads_ns_per_msg: Option<f64>,
    cpu_utilization_pct: f64,
    context_switches_per_msg: f64,
    preempted_per_msg: f64,
    read_calls_per_s: f64,
    new_messages_per_s: f64,
    peak_rss_kib: u64,
    error: &'a str,
}

fn roles_csv(run: &RunResult) -> Result<Vec<u8>, ExportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for (i, c) in run.cases.iter().enumerate() {
        for r in summarize(c).roles {
            let d = r.latency.as_ref();
            w.serialize(RoleRow {
                case: i + 1,
                key: &c.key,
                role: &r.role,
                role_kind: r.role_id.kind.label(),
                role_number: r.role_id.number,
                pid: r.pid,
                cpus_seen: r
                    .cpus_seen
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
                messages: r.messages,
                received: r.received,
                lost: r.lost,
                duplicated: r.duplicated,
                reordered: r.reordered,
                overwritten: r.overwritten,
                latency_samples: d.map_or(0, |d| d.samples),
                latency_p50_ns: d.and_then(|d| d.p50_ns),
                latency_p99_ns: d.and_then(|d| d.p99_ns),
                latency_max_ns: d.map(|d| d.max_ns),
                send_call_avg_ns: r.send_call_avg_ns,
                send_call_max_ns: r.send_call_max_ns,
                recv_call_avg_ns: r.recv_call_avg_ns,
                recv_call_max_ns: r.recv_call_max_ns,
                cpu_user_ns_per_msg: r.cpu_user_ns_per_msg,
                cpu_sys_ns_per_msg: r.cpu_sys_ns_per_msg,
                other_threads_ns_per_msg: r.other_threads_ns_per_msg,
                cpu_utilization_pct: r.cpu_utilization_pct,
                context_switches_per_msg: r.context_switches_per_msg,
                preempted_per_msg: r.preempted_per_msg,
                read_calls_per_s: r.read_calls_per_s,
                new_messages_per_s: r.new_messages_per_s,
                peak_rss_kib: r.peak_rss_kib,
                error: r.error.as_deref().unwrap_or(""),
            })
            .map_err(|e| ExportError::new(ROLES, e))?;
        }
    }
    w.into_inner()
        .map_err(|e| ExportError::new(ROLES, e.into_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roles_file_is_beside_a_file_only() {
        assert_eq!(
            roles_path(Path::new("a/r.csv")).unwrap(),
            Path::new("a/r.roles.csv")
        );
        assert_eq!(roles_path(Path::new("-")), None);
        assert_eq!(roles_path(Path::new("/dev/null")), None);
    }
}
