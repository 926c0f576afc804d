//! Room `report`: reads results only (live or saved) and renders them: the terminal table and
//! the exported files (`export`). Percentiles are computed here, from the histograms.

pub mod compare;
pub mod export;
pub mod progress;
pub mod suite;
pub mod summary;
pub mod sweep;
pub mod table;
pub mod warnings;

use crate::result::RunResult;
use summary::{summarize, CaseSummary};
pub use table::Layout;

/// The terminal output: the run's heading, cases, paced and subscriber tables, roles, floors
/// and settings (with `details`), sweeps, notes and a summary in words.
pub fn render_terminal(run: &RunResult, layout: &Layout) -> String {
    let w = layout.width;
    let s: Vec<CaseSummary> = run.cases.iter().map(summarize).collect();
    let mut out = table::cases_table(&s, w);
    if s.iter()
        .any(|c| !c.figures.is_empty() || c.stopped_by.is_some())
    {
        out.push_str(&table::figures_table(&s, w));
    }
    if s.iter().any(|c| c.marshalling.is_some()) {
        out.push_str(&table::marshalling_table(&s, w));
    }
    if s.iter().any(|c| c.rate_hz.is_some()) {
        out.push_str(&table::paced_table(&s, w));
    }
    if s.iter().any(|c| c.fan_out.is_some()) {
        out.push_str(&table::subscribers_table(&s, w));
    }
    if layout.details {
        out.push_str(&table::roles_table(&s, w));
        if s.iter()
            .any(|c| c.vs_floor.is_some() || c.wire_bytes_per_msg.is_some())
        {
            out.push_str(&table::floors_table(&s, w));
        }
        out.push_str(&table::settings(run, w));
    }
    out.push_str(&sweep::render(&sweep::sweeps(&s)));
    out.push_str(&table::notes(run, &s, w, layout.details));
    out.push_str(&table::summary_in_words(&s, w));
    if let Some(o) = &run.suite {
        out.push_str(&suite::text(o, w));
    }
    out
}

/// Where and when a saved run was taken, and by which command.
pub fn heading(run: &RunResult, width: Option<usize>) -> String {
    let e = &run.environment;
    table::wrap(
        &format!(
            "run of {} on {} ({}, {} CPUs, kernel {}), msgperf {}: {}",
            e.started_utc,
            e.hostname,
            e.cpu_model,
            e.cores,
            e.kernel,
            run.msgperf_version,
            run.command_line.join(" ")
        ),
        width,
    )
}
