//! A suite's outcome as the source report laid it out: its table with today's figures, then
//! each of its conclusions with its claims' verdicts (terminal and HTML).

use super::table::{escape_html, wrap, Grid};
use crate::result::suite::SuiteOutcome;

/// The report's table. Its platform and published columns give way first on a narrow
/// terminal.
fn grid(o: &SuiteOutcome) -> Grid {
    let cols: Vec<(&str, u8)> = o
        .headers
        .iter()
        .map(|h| {
            let priority = match h.as_str() {
                "Platform" => 100,
                "Published" => 200,
                _ => u8::MAX,
            };
            (h.as_str(), priority)
        })
        .collect();
    let mut g = Grid::new(&cols);
    for r in &o.rows {
        g.row(r.clone());
    }
    g
}

/// For the terminal, after the run's own tables.
pub fn text(o: &SuiteOutcome, width: Option<usize>) -> String {
    let mut out = format!("\n{}, rerun today:\n", o.title);
    out.push_str(&grid(o).render(width));
    if let Some(n) = &o.note {
        out.push_str(&wrap(n, width));
    }
    if !o.not_built.is_empty() {
        out.push_str(&wrap(
            &format!(
                "not in this build, so not measured: {} (cargo build --release --features all-middlewares adds them)",
                o.not_built.join(", ")
            ),
            width,
        ));
    }
    out.push_str("\nthe report's conclusions, checked:\n");
    for c in &o.conclusions {
        out.push_str(&wrap(&format!("- \"{}\"", c.text), width));
        for claim in &c.claims {
            out.push_str(&wrap(&format!("  {}", claim.line()), width));
        }
        if let Some(n) = &c.note {
            out.push_str(&wrap(&format!("  ({n})"), width));
        }
    }
    out
}

/// For the HTML report: the same, as a section.
pub fn html(o: &SuiteOutcome) -> String {
    let mut out = format!(
        "<h2>Suite {}: {}, rerun today</h2>\n",
        escape_html(&o.name),
        escape_html(&o.title)
    );
    out.push_str(&grid(o).html(&|_| None));
    if let Some(n) = &o.note {
        out.push_str(&format!("<p>{}</p>\n", escape_html(n)));
    }
    if !o.not_built.is_empty() {
        out.push_str(&format!(
            "<p>Not in this build, so not measured: {}.</p>\n",
            escape_html(&o.not_built.join(", "))
        ));
    }
    out.push_str("<h3>The report's conclusions, checked</h3>\n<ul>\n");
    for c in &o.conclusions {
        out.push_str(&format!("<li><q>{}</q>\n<ul>\n", escape_html(&c.text)));
        for claim in &c.claims {
            out.push_str(&format!(
                "<li class=\"{}\">{}</li>\n",
                match claim.verdict {
                    crate::result::suite::Verdict::Holds => "holds",
                    crate::result::suite::Verdict::NoLongerHolds => "fails",
                    crate::result::suite::Verdict::NotMeasured => "absent",
                },
                escape_html(&claim.line())
            ));
        }
        if let Some(n) = &c.note {
            out.push_str(&format!("<li>({})</li>\n", escape_html(n)));
        }
        out.push_str("</ul></li>\n");
    }
    out.push_str("</ul>\n");
    out
}
