//! Room `suite`: the source reports as suites. A suite is a file of data (`src/suite/NAME.toml`,
//! one line in [`SUITES`]): the report's experiments as msgperf scenarios, the columns of its
//! table, its published figures, and its conclusions with the claims each is checked by. This
//! room plans a suite's runs and renders their results in the report's layout; `cli` runs them.

use crate::plan::{PlanError, RunOptions};
use crate::report::summary::{merged, summarize, CaseSummary};
use crate::result::suite::{ClaimOutcome, Compared, ConclusionOutcome, SuiteOutcome, Verdict};
use crate::result::{CaseConfig, CaseResult, Metric, RoleResult, RunResult};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Why a suite cannot run: each names the suite (its file or name) and keeps the parser's or
/// the plan's own error.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("no suite `{name}`: use one of {known} (msgperf suite --list)")]
    Unknown { name: String, known: String },
    #[error("{origin}: {cause}")]
    Toml {
        origin: String,
        #[source]
        cause: toml::de::Error,
    },
    /// The file parses but says something a suite cannot mean (a claim without its other
    /// side, a host defined twice).
    #[error("{origin}: {why}")]
    Invalid { origin: String, why: String },
    /// An experiment's scenario that the plan refuses.
    #[error("{origin}: {cause}")]
    Plan {
        origin: String,
        #[source]
        cause: PlanError,
    },
}

/// The suites msgperf ships: a name and its file. Adding one is its file and a line here.
pub static SUITES: &[(&str, &str)] = &[
    ("nml", include_str!("nml.toml")),
    ("cml", include_str!("cml.toml")),
    ("tcl", include_str!("tcl.toml")),
    ("vamnet", include_str!("vamnet.toml")),
    ("mett", include_str!("mett.toml")),
];

/// A source report as data.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub name: String,
    pub title: String,
    pub about: String,
    /// The table's columns, in the report's order (see [`Column`]).
    pub columns: Vec<Column>,
    /// What the table's figures are, printed under it.
    #[serde(default)]
    pub note: Option<String>,
    pub experiment: Vec<Experiment>,
    #[serde(default)]
    pub conclusion: Vec<Conclusion>,
}

/// One of the report's experiments: a msgperf scenario and how the report named it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub id: String,
    /// The report's name for the experiment, or for what its role did (NML: Both, Write,
    /// Read), shown in the `read_write` or `label` column.
    #[serde(alias = "label")]
    pub read_write: String,
    /// The role whose calls the row reports (`initiator`, `writer`, `reader`, ...).
    pub role: String,
    /// The report's name for the settings.
    pub options: String,
    /// The keys of a `msgperf run --scenario` file.
    pub scenario: toml::Table,
    /// Transports added to the scenario's where this msgperf was built with them (the
    /// middlewares: Cargo features).
    #[serde(default)]
    pub where_built: Vec<String>,
    #[serde(default)]
    pub published: Vec<Published>,
}

/// The report's own figures for one of an experiment's cases.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    #[serde(default)]
    pub transport: Option<String>,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// The report's test number.
    pub test: u32,
    pub max_time_s: Option<f64>,
    pub avg_time_s: Option<f64>,
    pub cpu_time_s: Option<f64>,
    pub throughput: Option<f64>,
    /// Transfer rate; the reports' "MBytes/s" were 2^20 B/s.
    pub mib_per_s: Option<f64>,
    pub latency_s: Option<f64>,
}

/// A conclusion of the report, and the claims it is checked by today.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conclusion {
    pub text: String,
    #[serde(default)]
    pub note: Option<String>,
    pub claims: Vec<Claim>,
}

/// One checkable part of a conclusion: figure of the cases `a` against those of `b`, paired
/// by everything neither names (transport, message size, payload), or against a value.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub says: String,
    pub figure: Figure,
    /// The figure taken of `b`, where it is another (two metrics of one case).
    #[serde(default)]
    pub figure_b: Option<Figure>,
    pub a: Select,
    #[serde(default)]
    pub b: Option<Select>,
    /// A value `a` is held against instead of `b`'s cases (a link's physical rate).
    #[serde(default)]
    pub against: Option<Against>,
    /// a / b lies in this range...
    #[serde(default)]
    pub ratio: Option<[f64; 2]>,
    /// ...or a is lower (true) or higher (false) than b.
    #[serde(default)]
    pub lower: Option<bool>,
}

/// A value in the figure's unit, and what it is.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Against {
    pub value: f64,
    pub is: String,
}

/// Which cases: of an experiment, with a transport, transport options, workload parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Select {
    pub experiment: String,
    #[serde(default)]
    pub transport: Option<String>,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// A figure a claim compares (or a column shows), each from one row's case and role:
/// `latency_p50`, `throughput`, `mib_per_s`, `avg_time`, `max_time`, `cpu_time`, `read_call_avg`, or a
/// percentile of any metric over the case's roles, `p50:METRIC` (`p99:`, `max:`, `mean:`; the
/// metric's key, e.g. `p50:spawn_call_ns`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(try_from = "String")]
pub enum Figure {
    /// The case's latency p50 (its kind: round trip, one-way), s.
    LatencyP50,
    /// New messages received per second.
    Throughput,
    /// Their bytes, MiB/s.
    MibPerS,
    /// The role's time in its calls over its calls, s.
    AvgTime,
    /// The role's longest call, s.
    MaxTime,
    /// The role's CPU over its calls, s.
    CpuTime,
    /// The role's time in read calls over its read calls (each non-blocking read of a poll
    /// counted), s.
    ReadCallAvg,
    /// A statistic of a metric over every role of the case, s.
    Metric { stat: Stat, key: String },
    /// The CPU per message of the roles of a kind (`cpu:publisher`), their mean, s.
    Cpu(String),
    /// The share of a CPU the roles of a kind used (`cpu_pct:subscriber`), their mean, %.
    CpuPct(String),
    /// Bytes on the wire per message beyond its payload (headers, acknowledgements).
    OverheadBytes,
}

/// What a [`Figure::Metric`] takes of its histogram.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stat {
    P50,
    P99,
    Max,
    Mean,
}

impl TryFrom<String> for Figure {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Ok(match s.as_str() {
            "latency_p50" => Figure::LatencyP50,
            "throughput" => Figure::Throughput,
            "mib_per_s" => Figure::MibPerS,
            "avg_time" => Figure::AvgTime,
            "max_time" => Figure::MaxTime,
            "cpu_time" => Figure::CpuTime,
            "read_call_avg" => Figure::ReadCallAvg,
            "overhead_bytes" => Figure::OverheadBytes,
            _ if s.starts_with("cpu:") => Figure::Cpu(s["cpu:".len()..].to_string()),
            _ if s.starts_with("cpu_pct:") => Figure::CpuPct(s["cpu_pct:".len()..].to_string()),
            _ => {
                let (stat, key) = s.split_once(':').ok_or_else(|| bad_figure(&s))?;
                let stat = match stat {
                    "p50" => Stat::P50,
                    "p99" => Stat::P99,
                    "max" => Stat::Max,
                    "mean" => Stat::Mean,
                    _ => return Err(bad_figure(&s)),
                };
                Figure::Metric {
                    stat,
                    key: key.to_string(),
                }
            }
        })
    }
}

fn bad_figure(s: &str) -> String {
    format!("`{s}` is not a figure: use latency_p50, throughput, mib_per_s, avg_time, max_time, cpu_time, read_call_avg, overhead_bytes, cpu:ROLE, cpu_pct:ROLE, or p50:METRIC (p99:, max:, mean:)")
}

/// A column of a suite's table: `test`, `label`, `platform`, `read_write`, `protocol`,
/// `options`, `size`, `hosts`, `param:KEY` (a workload parameter, `pubs`, `subs` or `rate`),
/// `published`, or a figure ([`Figure`]: times in seconds where the report gave seconds, as
/// `max_time_s`; microseconds for a metric's, as `p50:METRIC`, `avg_latency_us`,
/// `max_latency_us`; `cpu:ROLE` in us a message, `cpu_pct:ROLE`, `overhead_bytes`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(try_from = "String")]
pub enum Column {
    Test,
    /// The experiment's label.
    Label,
    Platform,
    ReadWrite,
    Protocol,
    Options,
    Size,
    /// Where the roles ran: `responder on b`, or `one host`.
    Hosts,
    Param(String),
    Published,
    /// A figure, and its header.
    Figure(Figure, String),
}

impl TryFrom<String> for Column {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Ok(match s.as_str() {
            "test" => Column::Test,
            "label" => Column::Label,
            "platform" => Column::Platform,
            "read_write" => Column::ReadWrite,
            "protocol" => Column::Protocol,
            "options" => Column::Options,
            "size" => Column::Size,
            "hosts" => Column::Hosts,
            "published" => Column::Published,
            "max_time_s" => Column::Figure(Figure::MaxTime, "Max. Time".into()),
            "avg_time_s" => Column::Figure(Figure::AvgTime, "Avg. Time".into()),
            "cpu_time_s" => Column::Figure(Figure::CpuTime, "CPU Time".into()),
            "throughput" => Column::Figure(Figure::Throughput, "Throughput".into()),
            "mib_per_s" => Column::Figure(Figure::MibPerS, "MiB/s".into()),
            "latency_s" => Column::Figure(Figure::LatencyP50, "Latency".into()),
            "avg_latency_us" => Column::Figure(
                Figure::Metric {
                    stat: Stat::Mean,
                    key: Metric::ONE_WAY.key().into(),
                },
                "Avg. latency [us]".into(),
            ),
            "max_latency_us" => Column::Figure(
                Figure::Metric {
                    stat: Stat::Max,
                    key: Metric::ONE_WAY.key().into(),
                },
                "Max. latency [us]".into(),
            ),
            "overhead_bytes" => Column::Figure(Figure::OverheadBytes, "Overhead [B/msg]".into()),
            _ => match s.strip_prefix("param:") {
                Some(k) => Column::Param(k.to_string()),
                None if s.starts_with("cpu:") => {
                    let header = format!("{} CPU [us/msg]", &s["cpu:".len()..]);
                    Column::Figure(Figure::try_from(s)?, header)
                }
                None if s.starts_with("cpu_pct:") => {
                    let header = format!("{} CPU [%]", &s["cpu_pct:".len()..]);
                    Column::Figure(Figure::try_from(s)?, header)
                }
                None => {
                    let header = format!("{} [us]", s.replace(':', " "));
                    Column::Figure(Figure::try_from(s)?, header)
                }
            },
        })
    }
}

impl Column {
    fn header(&self) -> String {
        match self {
            Column::Test => "Test #".into(),
            Column::Label => "Experiment".into(),
            Column::Platform => "Platform".into(),
            Column::ReadWrite => "Read/Write".into(),
            Column::Protocol => "Protocol".into(),
            Column::Options => "Options".into(),
            Column::Size => "Size".into(),
            Column::Hosts => "Hosts".into(),
            Column::Param(k) => k.clone(),
            Column::Published => "Published".into(),
            Column::Figure(_, h) => h.clone(),
        }
    }
}

/// The names of the suites, with what each covers.
pub fn list() -> Vec<(String, String)> {
    SUITES
        .iter()
        .map(|(name, text)| match parse(text, name) {
            Ok(s) => (s.name, format!("{}: {}", s.title, s.about)),
            Err(e) => (name.to_string(), e.to_string()),
        })
        .collect()
}

/// A shipped suite's file.
pub fn text_of(name: &str) -> Result<&'static str, SuiteError> {
    SUITES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| SuiteError::Unknown {
            name: name.to_string(),
            known: SUITES
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// A suite from its file's text; `origin` names the file in errors.
pub fn parse(text: &str, origin: &str) -> Result<Suite, SuiteError> {
    let suite: Suite = toml::from_str(text).map_err(|cause| SuiteError::Toml {
        origin: origin.to_string(),
        cause,
    })?;
    let invalid = |why: String| SuiteError::Invalid {
        origin: origin.to_string(),
        why,
    };
    for c in suite.conclusion.iter().flat_map(|c| &c.claims) {
        if c.b.is_some() == c.against.is_some() {
            return Err(invalid(format!(
                "the claim `{}` needs either `b = {{ experiment = ... }}` or `against = {{ value = ..., is = \"...\" }}`",
                c.says
            )));
        }
        for s in std::iter::once(&c.a).chain(&c.b) {
            if !suite.experiment.iter().any(|e| e.id == s.experiment) {
                return Err(invalid(format!(
                    "the claim `{}` names experiment `{}`, which the suite does not have",
                    c.says, s.experiment
                )));
            }
        }
        if c.ratio.is_some() == c.lower.is_some() {
            return Err(invalid(format!(
                "the claim `{}` needs either `ratio = [low, high]` or `lower = true|false`",
                c.says
            )));
        }
    }
    Ok(suite)
}

/// Each experiment's run options, with `over` (what the command line gave) laid over them.
pub fn runs(suite: &Suite, over: &RunOptions) -> Result<Vec<RunOptions>, SuiteError> {
    suite
        .experiment
        .iter()
        .map(|e| {
            let mut scenario = e.scenario.clone();
            let built: Vec<toml::Value> = e
                .where_built
                .iter()
                .filter(|t| crate::transport::find(t).is_ok())
                .map(|t| toml::Value::String(t.clone()))
                .collect();
            if let Some(toml::Value::Array(list)) = scenario.get_mut("transports") {
                list.extend(built);
            }
            let origin = format!("suite {}, experiment {}", suite.name, e.id);
            let text = toml::to_string(&scenario).map_err(|e| SuiteError::Invalid {
                origin: origin.clone(),
                why: format!("its scenario does not write back as TOML: {e}"),
            })?;
            let file =
                RunOptions::parse_scenario(&text, &origin).map_err(|cause| SuiteError::Plan {
                    origin: origin.clone(),
                    cause,
                })?;
            let mut o = over
                .over(&file)
                .map_err(|cause| SuiteError::Plan { origin, cause })?;
            // A workload of a fixed amount of work (--n) takes no duration.
            let fixed = o
                .workload
                .as_deref()
                .and_then(|w| crate::workload::find(w).ok())
                .is_some_and(|w| w.fixed_work());
            if fixed {
                o.duration = None;
            }
            Ok(o)
        })
        .collect()
}

/// The hosts every experiment's scenario defines, made once for the run: a name defined
/// twice must be defined alike.
pub fn hosts(suite: &Suite, runs: &[RunOptions]) -> Result<BTreeMap<String, String>, SuiteError> {
    let mut all: BTreeMap<String, String> = BTreeMap::new();
    for (r, e) in runs.iter().zip(&suite.experiment) {
        for (name, launcher) in r.hosts() {
            match all.get(&name) {
                Some(l) if *l != launcher => {
                    return Err(SuiteError::Invalid {
                        origin: format!("suite {}, experiment {}", suite.name, e.id),
                        why: format!("host `{name}` is `{launcher}` here and `{l}` in an earlier experiment: a suite's hosts are made once for its run, so give one definition"),
                    })
                }
                _ => {
                    all.insert(name, launcher);
                }
            }
        }
    }
    Ok(all)
}

/// A case of the run as one of the suite's rows: its experiment, result and summary.
struct Row<'a> {
    experiment: &'a Experiment,
    case: &'a CaseResult,
    summary: CaseSummary,
    /// The experiment's role's calls, read from its histograms once.
    calls: Option<Calls>,
}

/// What a suite's run found: the report's table with today's figures (and the published
/// ones beside), then each conclusion checked. `experiment_of` gives each case's experiment
/// (the same case may serve several).
pub fn outcome(
    suite: &Suite,
    run: &RunResult,
    experiment_of: &dyn Fn(&CaseConfig) -> Vec<usize>,
) -> SuiteOutcome {
    let rows: Vec<Row> = run
        .cases
        .iter()
        .flat_map(|c| {
            experiment_of(&c.config).into_iter().map(move |i| {
                let experiment = &suite.experiment[i];
                Row {
                    experiment,
                    case: c,
                    summary: summarize(c),
                    calls: c
                        .roles
                        .iter()
                        .find(|x| x.role.to_string().starts_with(&experiment.role))
                        .map(calls),
                }
            })
        })
        .collect();
    let mut not_built: Vec<String> = suite
        .experiment
        .iter()
        .flat_map(|e| &e.where_built)
        .filter(|t| crate::transport::find(t).is_err())
        .cloned()
        .collect();
    not_built.sort_unstable();
    not_built.dedup();
    SuiteOutcome {
        name: suite.name.clone(),
        title: suite.title.clone(),
        headers: suite.columns.iter().map(Column::header).collect(),
        rows: table(suite, &rows, run),
        note: suite.note.clone(),
        not_built,
        conclusions: suite
            .conclusion
            .iter()
            .map(|c| ConclusionOutcome {
                text: c.text.clone(),
                note: c.note.clone(),
                claims: c.claims.iter().map(|claim| verdict(claim, &rows)).collect(),
            })
            .collect(),
    }
}

/// The table's cells, a row per case of an experiment.
fn table(suite: &Suite, rows: &[Row], run: &RunResult) -> Vec<Vec<String>> {
    let mut cells_of = Vec::new();
    let or_none = |v: Option<f64>| v.map_or("--".to_string(), seconds);
    for (i, r) in rows.iter().enumerate() {
        let cells = suite
            .columns
            .iter()
            .map(|c| match c {
                Column::Test => (i + 1).to_string(),
                Column::Platform => format!(
                    "{} ({} CPUs, Linux {})",
                    run.environment.hostname, run.environment.cores, run.environment.kernel
                ),
                Column::ReadWrite | Column::Label => r.experiment.read_write.clone(),
                Column::Protocol => r.case.config.transport.to_uppercase(),
                Column::Options => options_cell(r),
                Column::Size => crate::units::format_size(r.case.config.size_bytes),
                Column::Hosts => hosts_cell(&r.case.config),
                Column::Param(k) => settings(&r.case.config)
                    .remove(k)
                    .unwrap_or_else(|| "-".into()),
                Column::Figure(f, _) => {
                    let v = figure(f, r);
                    match f {
                        Figure::Throughput => v.map_or("--".into(), |v| format!("{v:.0}")),
                        Figure::MibPerS => v.map_or("--".into(), |v| format!("{v:.1}")),
                        Figure::LatencyP50 if r.summary.latency_kind == "round trip" => {
                            v.map_or("--".into(), |v| format!("{} rt", seconds(v)))
                        }
                        Figure::Metric { .. } | Figure::Cpu(_) => {
                            v.map_or("--".into(), |v| format!("{:.2}", v * 1e6))
                        }
                        Figure::OverheadBytes => v.map_or("--".into(), |v| format!("{v:.0}")),
                        Figure::CpuPct(_) => v.map_or("--".into(), |v| format!("{v:.1}")),
                        _ => or_none(v),
                    }
                }
                Column::Published => published(r).map_or("-".into(), published_cell),
            })
            .collect();
        cells_of.push(cells);
    }
    cells_of
}

/// Seconds as the reports wrote them (decimals, no exponent) with three significant digits
/// at least (a round trip of 0.3 us is 0.000000300, not 0.000000).
fn seconds(v: f64) -> String {
    let digits = if v > 0.0 {
        (2 - v.log10().floor() as i32).clamp(6, 10) as usize
    } else {
        6
    };
    format!("{v:.digits$}")
}

/// The report's figures for a row, each named: `#1: avg 0.000113 s, 4438/s`.
fn published_cell(p: &Published) -> String {
    let figures: Vec<String> = [
        p.avg_time_s.map(|v| format!("avg {} s", seconds(v))),
        p.throughput.map(|v| format!("{v:.0}/s")),
        p.mib_per_s.map(|v| format!("{v} MiB/s")),
        p.latency_s.map(|v| format!("latency {} s", seconds(v))),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!("#{}: {}", p.test, figures.join(", "))
}

/// Where a case's roles ran, as placed: `reader on b`, or `one host`.
fn hosts_cell(c: &CaseConfig) -> String {
    let placed: Vec<String> = c
        .place
        .iter()
        .map(|(role, at)| format!("{role} on {}", at.join(",")))
        .collect();
    if placed.is_empty() {
        "one host".into()
    } else {
        placed.join("; ")
    }
}

/// The experiment's name for its settings, and what this case adds to them (an option or a
/// payload that the experiment sweeps).
fn options_cell(r: &Row) -> String {
    let cfg = &r.case.config;
    let mut parts = vec![r.experiment.options.clone()];
    let swept = r
        .experiment
        .scenario
        .get("options")
        .and_then(|o| o.as_table())
        .map(|t| t.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    for k in swept {
        if let Some(v) = cfg.effective_options.get(&k) {
            parts.push(format!("{k}={v}"));
        }
    }
    if let Some(p) = cfg.param("payload").filter(|p| *p != "bytes") {
        parts.push(p.to_string());
    }
    parts.join(", ")
}

/// The report's figures for this row's case, if it gave any.
fn published<'a>(r: &Row<'a>) -> Option<&'a Published> {
    r.experiment.published.iter().find(|p| {
        p.transport
            .as_ref()
            .is_none_or(|t| *t == r.case.config.transport)
            && p.options
                .iter()
                .all(|(k, v)| r.case.config.effective_options.get(k) == Some(v))
    })
}

/// The row's role's calls: time in send and read calls, how many of each, the longest, CPU.
struct Calls {
    send_ns: f64,
    sends: u64,
    read_ns: f64,
    reads: u64,
    max_ns: u64,
    cpu_ns: u64,
}

fn calls(r: &RoleResult) -> Calls {
    let total = |m: Metric| {
        r.histogram(m).map_or((0.0, 0, 0), |h| {
            (h.mean() * h.len() as f64, h.len(), h.max())
        })
    };
    let (send_ns, sends, send_max) = total(Metric::SEND_CALL);
    let (read_ns, read_samples, read_max) = total(Metric::RECV_CALL);
    Calls {
        send_ns,
        sends,
        read_ns,
        reads: r.counters.read_calls.max(read_samples),
        max_ns: send_max.max(read_max),
        cpu_ns: r.cpu.user_ns + r.cpu.sys_ns,
    }
}

/// A figure of a row, from its case and its experiment's role.
fn figure(f: &Figure, r: &Row) -> Option<f64> {
    let s = &r.summary;
    let c = r.calls.as_ref();
    // The calls a role's time divides by: a writer's acknowledgement wait is part of its
    // write (NML's confirm_write), a reader's are its reads, the others' both.
    let per_call = |ns: f64| -> Option<f64> {
        let c = c?;
        let n = match r.experiment.role.as_str() {
            "writer" => c.sends,
            "reader" => c.reads,
            _ => c.sends + c.reads,
        };
        (n > 0).then(|| ns / n as f64 / 1e9)
    };
    match f {
        Figure::LatencyP50 => s.latency.as_ref()?.p50_ns.map(|v| v as f64 / 1e9),
        Figure::Throughput => (s.msgs_per_s > 0.0).then_some(s.msgs_per_s),
        Figure::MibPerS => (s.mib_per_s > 0.0).then_some(s.mib_per_s),
        Figure::AvgTime => {
            let c = c?;
            let ns = match r.experiment.role.as_str() {
                "reader" => c.read_ns,
                _ => c.send_ns + c.read_ns,
            };
            per_call(ns)
        }
        Figure::MaxTime => c.map(|c| c.max_ns as f64 / 1e9),
        Figure::CpuTime => per_call(c?.cpu_ns as f64),
        Figure::ReadCallAvg => {
            let c = c?;
            (c.reads > 0).then(|| c.read_ns / c.reads as f64 / 1e9)
        }
        Figure::Cpu(kind) => mean_of_roles(s, kind, |x| {
            (x.cpu_user_ns_per_msg + x.cpu_sys_ns_per_msg) / 1e9
        }),
        Figure::CpuPct(kind) => mean_of_roles(s, kind, |x| x.cpu_utilization_pct),
        Figure::OverheadBytes => s.wire_overhead_bytes_per_msg,
        Figure::Metric { stat, key } => {
            let metric = *r
                .case
                .roles
                .iter()
                .flat_map(|x| x.histograms.keys())
                .find(|m| m.key() == key)?;
            let h = merged(r.case, metric)?;
            let ns = match stat {
                Stat::P50 => h.value_at_quantile(0.5) as f64,
                Stat::P99 => h.value_at_quantile(0.99) as f64,
                Stat::Max => h.max() as f64,
                Stat::Mean => h.mean(),
            };
            Some(ns / 1e9)
        }
    }
}

/// A case's settings that claims select and pair by, and `param:` columns show: the
/// workload's parameters, publishers, subscribers and the rate (Hz, per publisher).
fn settings(c: &CaseConfig) -> BTreeMap<String, String> {
    let mut all = c.effective_params.clone();
    all.insert("pubs".into(), c.pubs.to_string());
    all.insert("subs".into(), c.subs.to_string());
    if let Some(hz) = c.rate_hz {
        all.insert("rate".into(), hz.to_string());
    }
    all
}

/// The mean of a figure over a case's roles of one kind (`publisher`: publisher 1, 2, ...).
fn mean_of_roles(
    s: &CaseSummary,
    kind: &str,
    of: impl Fn(&crate::report::summary::RoleSummary) -> f64,
) -> Option<f64> {
    let values: Vec<f64> = s
        .roles
        .iter()
        .filter(|x| x.role.starts_with(kind) && x.messages > 0)
        .map(of)
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn selects(s: &Select, r: &Row) -> bool {
    r.experiment.id == s.experiment
        && s.transport
            .as_ref()
            .is_none_or(|t| *t == r.case.config.transport)
        && s.options
            .iter()
            .all(|(k, v)| r.case.config.effective_options.get(k) == Some(v))
        && {
            let settings = settings(&r.case.config);
            s.params.iter().all(|(k, v)| settings.get(k) == Some(v))
        }
}

/// What pairs a case of `a` with one of `b`: what neither selector names (the transport, the
/// message size, the workload's parameters).
fn pairing(claim: &Claim, r: &Row) -> (Option<String>, usize, Vec<(String, String)>) {
    let b = claim.b.as_ref();
    let named = claim.a.transport.is_some() || b.is_some_and(|b| b.transport.is_some());
    let params = settings(&r.case.config)
        .into_iter()
        .filter(|(k, _)| {
            !claim.a.params.contains_key(k) && !b.is_some_and(|b| b.params.contains_key(k))
        })
        .collect();
    (
        (!named).then(|| r.case.config.transport.clone()),
        r.case.config.size_bytes,
        params,
    )
}

/// A claim checked against the rows: holds, no longer holds, or not measured, with the
/// figures.
fn verdict(claim: &Claim, rows: &[Row]) -> ClaimOutcome {
    // Each case of `a` with its figure, and what it is held against: a case of `b` paired
    // with it, or the claim's value.
    let mut found: Vec<(&Row, Option<&Row>, f64, f64)> = Vec::new();
    for a in rows.iter().filter(|r| selects(&claim.a, r)) {
        let Some(x) = figure(&claim.figure, a) else {
            continue;
        };
        match (&claim.b, &claim.against) {
            (Some(select), _) => {
                for b in rows
                    .iter()
                    .filter(|r| selects(select, r) && pairing(claim, r) == pairing(claim, a))
                {
                    if let Some(y) = figure(claim.figure_b.as_ref().unwrap_or(&claim.figure), b) {
                        if y > 0.0 {
                            found.push((a, Some(b), x, y));
                        }
                    }
                }
            }
            (None, Some(against)) if against.value > 0.0 => found.push((a, None, x, against.value)),
            _ => {}
        }
    }
    if found.is_empty() {
        return ClaimOutcome {
            says: claim.says.clone(),
            verdict: Verdict::NotMeasured,
            compared: Vec::new(),
        };
    }
    let holds = found
        .iter()
        .all(|(_, _, x, y)| match (claim.ratio, claim.lower) {
            (Some([lo, hi]), _) => (lo..=hi).contains(&(x / y)),
            (None, Some(true)) => x < y,
            _ => x > y,
        });
    let name = |r: &Row| {
        let c = &r.case.config;
        let mut parts: Vec<String> = Vec::new();
        if claim
            .b
            .as_ref()
            .is_some_and(|b| b.experiment != claim.a.experiment)
        {
            parts.push(r.experiment.read_write.clone());
        }
        // A case without a transport is named by its parameters; one with, by transport, size
        // and a typed payload.
        if c.transport == crate::result::NO_TRANSPORT {
            parts.extend(c.effective_params.iter().map(|(k, v)| format!("{k}={v}")));
        } else {
            parts.push(c.transport.clone());
            parts.push(crate::units::format_size(c.size_bytes));
            if let Some(n) = c.params.get("n") {
                parts.push(format!("n={n}"));
            }
        }
        parts.join(" ")
    };
    let compared = found
        .iter()
        .map(|(a, b, x, y)| Compared {
            a: name(a),
            a_value: *x,
            b: match (b, &claim.against) {
                (Some(b), _) => name(b),
                (None, Some(against)) => against.is.clone(),
                (None, None) => unreachable!("a claim has b or against"),
            },
            b_value: *y,
            unit: claim.figure.unit().into(),
            ratio: x / y,
        })
        .collect();
    ClaimOutcome {
        says: claim.says.clone(),
        verdict: if holds {
            Verdict::Holds
        } else {
            Verdict::NoLongerHolds
        },
        compared,
    }
}

impl Figure {
    /// The unit of this figure's values (see [`crate::result::suite::show`]).
    fn unit(&self) -> &'static str {
        match self {
            Figure::Throughput => "/s",
            Figure::MibPerS => "MiB/s",
            Figure::OverheadBytes => "B",
            Figure::CpuPct(_) => "%",
            _ => "s",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_suite_parses_and_plans() {
        for (name, text) in SUITES {
            let s = parse(text, name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&s.name, name);
            let runs = runs(&s, &RunOptions::default()).unwrap_or_else(|e| panic!("{e}"));
            for (r, e) in runs.iter().zip(&s.experiment) {
                let cases = crate::plan::cases(r).unwrap_or_else(|x| panic!("{}: {x}", e.id));
                assert!(!cases.is_empty(), "{}", e.id);
            }
        }
    }

    #[test]
    fn a_claim_needs_one_of_b_and_against_and_hosts_are_defined_once() {
        let text = SUITES
            .iter()
            .find(|(n, _)| *n == "vamnet")
            .expect("vamnet ships")
            .1;
        let both = text.replacen(
            "against = {",
            "b = { experiment = \"rpc-local\" }, against = {",
            1,
        );
        let e = parse(&both, "x.toml").unwrap_err().to_string();
        assert!(e.contains("either `b = "), "{e}");
        let suite = parse(
            &text.replacen("netns:rate=100mbit", "netns:rate=10mbit", 1),
            "x.toml",
        )
        .unwrap();
        let planned = runs(&suite, &RunOptions::default()).unwrap();
        let e = hosts(&suite, &planned).unwrap_err().to_string();
        assert!(e.contains("host `b`") && e.contains("rpc-2to1"), "{e}");
        let suite = parse(text, "vamnet").unwrap();
        let planned = runs(&suite, &RunOptions::default()).unwrap();
        assert_eq!(
            hosts(&suite, &planned)
                .unwrap()
                .get("b")
                .map(String::as_str),
            Some("netns:rate=100mbit")
        );
    }

    #[test]
    fn figures_and_columns_parse_from_their_names() {
        assert_eq!(
            Figure::try_from("cpu_pct:subscriber".to_string()).unwrap(),
            Figure::CpuPct("subscriber".into())
        );
        assert_eq!(
            Column::try_from("max_latency_us".to_string()).unwrap(),
            Column::Figure(
                Figure::Metric {
                    stat: Stat::Max,
                    key: "one_way_ns".into()
                },
                "Max. latency [us]".into()
            )
        );
        assert_eq!(
            Column::try_from("hosts".to_string()).unwrap(),
            Column::Hosts
        );
        let e = Figure::try_from("median:x".to_string()).unwrap_err();
        assert!(e.contains("cpu_pct:ROLE"), "{e}");
    }

    #[test]
    fn a_claim_on_an_unknown_experiment_is_refused() {
        let text = SUITES[0].1.replace(
            "a = { experiment = \"same-host\", transport = \"tcp\" }",
            "a = { experiment = \"nowhere\", transport = \"tcp\" }",
        );
        let e = parse(&text, "x.toml").unwrap_err().to_string();
        assert!(e.contains("`nowhere`"), "{e}");
    }

    #[test]
    fn an_experiment_the_plan_refuses_names_it_and_keeps_the_plans_error() {
        let text = SUITES
            .iter()
            .find(|(n, _)| *n == "cml")
            .unwrap()
            .1
            .replacen("n = \"1000\"", "n = \"1000\", colour = \"blue\"", 1);
        let suite = parse(&text, "x.toml").unwrap();
        let e = runs(&suite, &RunOptions::default()).unwrap_err();
        let SuiteError::Plan { origin, cause } = &e else {
            panic!("not the plan's refusal: {e:?}");
        };
        assert!(origin.contains("experiment"), "{origin}");
        assert!(matches!(cause, PlanError::Scenario { .. }), "{cause:?}");
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().contains("colour"), "{e}");
    }
}
