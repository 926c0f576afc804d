//! Markdown: the run's tables (cases, roles, floors) and its summary in words, fit for a pull
//! request or a wiki page.

use crate::report::summary::{summarize, CaseSummary};
use crate::report::table;
use crate::result::RunResult;

pub const FORMAT: super::Format = super::Format {
    name: "md",
    about: "the tables as Markdown, for a pull request",
    writes: super::Writes::File(|run| Ok(to_markdown(run).into_bytes())),
};

pub fn to_markdown(run: &RunResult) -> String {
    let s: Vec<CaseSummary> = run.cases.iter().map(summarize).collect();
    let mut out = format!(
        "## msgperf results\n\n{}\n",
        crate::report::heading(run, None).trim_end()
    );
    out.push_str("\n### Cases\n\n");
    out.push_str(&table::cases_grid(&s).markdown());
    if s.iter().any(|c| c.marshalling.is_some()) {
        out.push_str("\n### Marshalling\n\n");
        out.push_str(&table::marshalling_grid(&s).markdown());
    }
    out.push_str("\n### Roles\n\n");
    out.push_str(&table::roles_grid(&s).markdown());
    if s.iter()
        .any(|c| c.vs_floor.is_some() || c.wire_bytes_per_msg.is_some())
    {
        out.push_str("\n### Floors\n\n");
        out.push_str(&table::floors_grid(&s).markdown());
    }
    let words = table::summary_in_words(&s, None);
    if !words.trim().is_empty() {
        out.push('\n');
        out.push_str(&words);
    }
    out
}
