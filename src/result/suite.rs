//! A suite's run (`msgperf suite`): the source report it reran, its table as the report laid
//! it out, and each of its claims' verdicts with the figures they were taken from.

use serde::{Deserialize, Serialize};

/// What `msgperf suite NAME` found, beside the cases it ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuiteOutcome {
    pub name: String,
    pub title: String,
    /// The report's table: its column headers and a row per case (an experiment's), each cell
    /// as the report wrote such figures (seconds, messages per second, ...).
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// What the table's figures are.
    pub note: Option<String>,
    /// Transports the suite adds where built, which this build lacks.
    pub not_built: Vec<String>,
    pub conclusions: Vec<ConclusionOutcome>,
}

/// One of the report's conclusions and its claims, checked.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConclusionOutcome {
    /// The report's words.
    pub text: String,
    pub note: Option<String>,
    pub claims: Vec<ClaimOutcome>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClaimOutcome {
    pub says: String,
    pub verdict: Verdict,
    /// Every pair of cases (or case and value) the verdict was taken from.
    pub compared: Vec<Compared>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Holds,
    NoLongerHolds,
    /// No case of one side ran (a transport not built, a case that failed).
    NotMeasured,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::NoLongerHolds => "no longer holds",
            Verdict::NotMeasured => "not measured",
        }
    }
}

/// A figure of `a` against one of `b`, in the figure's unit (`unit`: s, /s, MiB/s, B, %).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Compared {
    pub a: String,
    pub a_value: f64,
    pub b: String,
    pub b_value: f64,
    pub unit: String,
    pub ratio: f64,
}

/// A value of a unit as a verdict prints it: `2000/s`, `11.4 MiB/s`, `29 B`, `7.5%`, and
/// seconds as `12.3 us` or `1.50 ms`.
pub fn show(v: f64, unit: &str) -> String {
    match unit {
        "/s" => format!("{v:.0}/s"),
        "MiB/s" => format!("{v:.1} MiB/s"),
        "B" => format!("{v:.0} B"),
        "%" => format!("{v:.1}%"),
        _ if v < 1e-3 => format!("{:.1} us", v * 1e6),
        _ => format!("{:.2} ms", v * 1e3),
    }
}

impl ClaimOutcome {
    /// The verdict in a line: `holds: SAYS (A x / B y = 1.2x; ...)`.
    pub fn line(&self) -> String {
        if self.verdict == Verdict::NotMeasured {
            return format!("not measured: {} (no case of both sides ran)", self.says);
        }
        let figures: Vec<String> = self
            .compared
            .iter()
            .map(|c| {
                format!(
                    "{} {} / {} {} = {:.2}x",
                    c.a,
                    show(c.a_value, &c.unit),
                    c.b,
                    show(c.b_value, &c.unit),
                    c.ratio
                )
            })
            .collect();
        format!(
            "{}: {} ({})",
            self.verdict.label(),
            self.says,
            figures.join("; ")
        )
    }
}
