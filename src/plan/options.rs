//! The options of a run, defined once: the same struct is the command line's flags (clap), a
//! scenario file's keys (serde, TOML) and the plan's input. Every field is optional: what is
//! not given takes its default in one place, [`RunOptions`]'s accessors, so a scenario and a
//! command line can be laid over each other and a template prints only what was given.

use super::PlanError;
use crate::result::Placement;
use crate::units::{parse_duration, parse_rate_list, parse_size_list};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// What `msgperf run` (or a scenario file) asks for.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOptions {
    /// The workload: pingpong, stream or pubsub (or give a --scenario).
    #[arg(value_name = "WORKLOAD")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Transports, comma-separated (see `msgperf transports`).
    #[arg(long = "transport", short = 't', value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transports: Vec<String>,
    /// Message sizes: a list or a range, e.g. 64,1k,64k or 64..1M*4 (k = 1024) [default: 64].
    #[arg(long, short)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Stop after this many measured messages (round trips for pingpong).
    #[arg(long, short = 'n')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Stop after this long [default: 3s unless --count is given].
    #[arg(long, short)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Unmeasured time before each case (and its floor) [default: 200ms, or what a transport needs for its figures to settle: kafka 5s].
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<String>,
    /// Busy-poll reads instead of blocking (reports reads/s and new messages/s).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<bool>,
    /// Every message carries a CRC32 of its payload, checked by the receiver.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<bool>,
    /// stream and pubsub (per publisher): send on an open-loop schedule at these rates (e.g.
    /// 1khz or 10hz,1khz,max), one case each, or `sweep` (100 Hz up to saturation, then max).
    /// Latency is then also measured from each message's intended send time [default: max].
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// pubsub: publishers, each a process (a thread with --threads) sending at --rate [default: 1].
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pubs: Option<usize>,
    /// pubsub: subscribers, each a process (a thread with --threads) taking every publisher
    /// [default: 1].
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subs: Option<usize>,
    /// reliable: nothing may be lost, a slow reader pushes back and any loss fails the case;
    /// best-effort: where the transport can drop (udp, shm), a slow reader loses messages,
    /// counted per reader [default: as the transport is].
    #[arg(long, value_enum)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryArg>,
    /// fifo: every message in order; latest: only the newest, older unread ones overwritten
    /// and counted (shm) [default: fifo].
    #[arg(long, value_enum)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryArg>,
    /// Run the roles as threads of one process instead of processes.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<bool>,
    /// Where the roles run [default: cross-cpu on a machine with 2 CPUs or more].
    #[arg(long, value_enum, conflicts_with = "pin")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementArg>,
    /// Pin the driving roles and the others to these CPUs, e.g. 0,1.
    #[arg(long, value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Vec<usize>>,
    /// A transport option, key=value (repeatable; a comma list sweeps it; see `msgperf
    /// transports`). It goes to every transport of the run that has the key; NAME.key=value
    /// to one transport only (e.g. shm.wait=block).
    #[arg(long = "opt", value_name = "KEY=VALUE", value_parser = parse_opt)]
    #[serde(
        rename = "options",
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "option_table"
    )]
    pub opts: Vec<(String, String)>,
    /// Bound on every wait: connect, accept, send, receive; 10ms at least [default: 10s].
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Length of the intervals over which each role keeps a histogram of its latency (latency
    /// over time in reports, HdrHistogram logs) [default: 1s].
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Run each case this many times, each time in fresh processes, interleaved across the
    /// cases (ABAB, not AABB); every repetition is recorded (`compare` needs several).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// Do not measure the floor (no `vs floor` ratio).
    #[arg(long = "no-floor", num_args = 0, default_missing_value = "false")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<bool>,
    /// A host to place roles on: NAME=LAUNCHER, a command that runs a program there with
    /// stdin and stdout piped back (e.g. b='ssh -T user@10.0.0.2', c='kubectl exec -i pod
    /// --', d='ip netns exec d'), or NAME=netns: a network namespace msgperf makes for the run
    /// (repeatable; the far side runs msgperf at this binary's path).
    #[arg(long = "host", value_name = "NAME=LAUNCHER", value_parser = parse_opt)]
    #[serde(
        rename = "hosts",
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "option_table"
    )]
    pub hosts: Vec<(String, String)>,
    /// Where roles run: `ROLE=HOST[:CPU],...`, one per role of that kind, or one for all (e.g.
    /// subscriber=b,c,c or responder=b:1); `local` is this host (repeatable; unplaced roles
    /// stay local).
    #[arg(long = "place", value_name = "ROLE=HOSTS", value_parser = parse_opt)]
    #[serde(
        rename = "place",
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "option_table"
    )]
    pub place: Vec<(String, String)>,
    /// The roles that do not drive are at a `msgperf serve` already running at this address
    /// (host:port, or a path).
    #[arg(long, conflicts_with = "name")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<String>,
    /// Like --connect, for a server started with `serve --name NAME`.
    #[arg(long)]
    #[serde(skip)]
    pub name: Option<String>,
    /// The workloads' own parameters (`--n`, `--hold`, ...), made from their declarations.
    #[command(flatten)]
    #[serde(skip)]
    pub params: ParamArgs,
    #[command(flatten)]
    #[serde(default, skip_serializing_if = "OutputOptions::is_empty")]
    pub output: OutputOptions,
    /// Run the test a TOML template describes (see --print-scenario); options given here are
    /// laid over the template's.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub scenario: Option<PathBuf>,
    /// Print this command line as a scenario template, and exit.
    #[arg(long)]
    #[serde(skip)]
    pub print_scenario: bool,
}

/// The workloads' own parameters as given (`--n 100`, or `hold = true` in a scenario), by key.
/// Their flags and scenario keys are made from the workloads' declarations
/// ([`crate::workload::Param`]), so a workload adds one without touching this room.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamArgs(pub BTreeMap<String, String>);

impl clap::FromArgMatches for ParamArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut out = ParamArgs::default();
        out.update_from_arg_matches(m)?;
        Ok(out)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        for p in crate::workload::all_params() {
            if let Some(v) = m.get_one::<String>(p.key) {
                self.0.insert(p.key.to_string(), v.clone());
            }
        }
        Ok(())
    }
}

impl clap::Args for ParamArgs {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        use crate::workload::ParamKind;
        for p in crate::workload::all_params() {
            let for_whom = crate::workload::declaring(p.key).join(", ");
            let default = match p.default {
                Some(d) if !matches!(p.kind, ParamKind::Flag) => format!(" [default: {d}]"),
                _ => String::new(),
            };
            let mut arg = clap::Arg::new(p.key)
                .long(p.key)
                .help(format!("{for_whom}: {}{default}", p.about));
            arg = match p.kind {
                ParamKind::Flag => arg
                    .num_args(0..=1)
                    .default_missing_value("true")
                    .require_equals(true)
                    .value_parser(["true", "false"]),
                _ => arg.value_name(p.value_name),
            };
            cmd = cmd.arg(arg);
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// Where results go.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputOptions {
    /// Write every figure, the configuration and the environment as JSON (rewritten after
    /// each case; `-` for standard output).
    #[arg(long, value_name = "FILE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<PathBuf>,
    /// Write one row per case as CSV, and one per role beside it (FILE with `.roles` before
    /// its extension); rewritten after each case.
    #[arg(long, value_name = "FILE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csv: Option<PathBuf>,
    /// Write the results in these formats, FORMAT=PATH, comma-separated: json, csv, md (the
    /// table as Markdown), hlog (HdrHistogram interval logs), hgrm (percentile files, PATH a
    /// directory), html (a report with plots, readable offline).
    #[arg(long, value_name = "FORMAT=PATH", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub export: Vec<String>,
    /// Also print the per-role table (call times, CPU, memory), the floors and each case's
    /// delivery settings [default: on for 8 cases or fewer].
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<bool>,
    /// Show every column, however wide (a terminal otherwise gets the columns that fit it;
    /// piped output always gets them all).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wide: Option<bool>,
}

impl OutputOptions {
    fn is_empty(&self) -> bool {
        *self == OutputOptions::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementArg {
    SameCpu,
    CrossCpu,
    Any,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryArg {
    Reliable,
    BestEffort,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HistoryArg {
    Fifo,
    Latest,
}

fn parse_opt(o: &str) -> Result<(String, String), String> {
    o.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| format!("`{o}` is not key=value: write e.g. --opt nodelay=false"))
}

/// `--opt k=v` pairs, as a scenario's `[options]` table.
mod option_table {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(v: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        v.iter()
            .cloned()
            .collect::<BTreeMap<String, String>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        Ok(BTreeMap::<String, String>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

/// The defaults, in one place.
impl RunOptions {
    pub fn size_text(&self) -> &str {
        self.size.as_deref().unwrap_or("64")
    }
    pub fn sizes(&self) -> Result<Vec<usize>, PlanError> {
        parse_size_list(self.size_text()).map_err(|e| PlanError::BadValue(format!("--size: {e}")))
    }
    pub fn rates(&self) -> Result<Vec<Option<f64>>, PlanError> {
        parse_rate_list(self.rate.as_deref().unwrap_or("max"))
            .map_err(|e| PlanError::BadValue(format!("--rate: {e}")))
    }
    pub fn duration(&self) -> Result<Option<Duration>, PlanError> {
        self.duration
            .as_deref()
            .map(|d| parse_duration(d).map_err(|e| PlanError::BadValue(format!("--duration: {e}"))))
            .transpose()
    }
    /// `--warmup`, if given (each transport then says what it needs: see
    /// [`crate::plan::warmup_of`]).
    pub fn warmup(&self) -> Result<Option<Duration>, PlanError> {
        self.warmup
            .as_deref()
            .map(|w| parse_duration(w).map_err(|e| PlanError::BadValue(format!("--warmup: {e}"))))
            .transpose()
    }
    pub fn timeout(&self) -> Result<Duration, PlanError> {
        Ok(match self.timeout.as_deref() {
            Some(t) => {
                parse_duration(t).map_err(|e| PlanError::BadValue(format!("--timeout: {e}")))?
            }
            None => crate::plan::DEFAULT_TIMEOUT,
        })
    }
    pub fn interval(&self) -> Result<Duration, PlanError> {
        let d = match self.interval.as_deref() {
            Some(t) => {
                parse_duration(t).map_err(|e| PlanError::BadValue(format!("--interval: {e}")))?
            }
            None => crate::plan::DEFAULT_INTERVAL,
        };
        if d < Duration::from_millis(1) {
            return Err(PlanError::BadValue(format!(
                "--interval {}: intervals shorter than 1ms cost more than they show; give 1ms or more",
                crate::units::format_duration(d)
            )));
        }
        Ok(d)
    }
    /// How many times each case runs: 1 to 1000.
    pub fn repeat(&self) -> Result<u32, PlanError> {
        match self.repeat {
            None => Ok(1),
            Some(n @ 1..=1000) => Ok(n),
            Some(n) => Err(PlanError::BadValue(format!(
                "--repeat {n}: give 1 to 1000 repetitions"
            ))),
        }
    }
    pub fn pubs(&self) -> usize {
        self.pubs.unwrap_or(1)
    }
    pub fn subs(&self) -> usize {
        self.subs.unwrap_or(1)
    }
    pub fn placement(&self) -> Option<Placement> {
        self.placement.map(|p| match p {
            PlacementArg::SameCpu => Placement::SameCpu,
            PlacementArg::CrossCpu => Placement::CrossCpu,
            PlacementArg::Any => Placement::Any,
        })
    }
    pub fn floor(&self) -> bool {
        self.floor.unwrap_or(true)
    }
    /// `--opt` values by key (a later one wins).
    pub fn options(&self) -> BTreeMap<String, String> {
        self.opts.iter().cloned().collect()
    }
    /// `--host` as given: name → launcher.
    pub fn hosts(&self) -> BTreeMap<String, String> {
        self.hosts.iter().cloned().collect()
    }
    /// `--place`: role kind → its hosts (with CPUs), as given.
    pub fn place(&self) -> BTreeMap<String, Vec<String>> {
        self.place
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.split(',').map(|h| h.trim().to_string()).collect(),
                )
            })
            .collect()
    }
    /// Where the roles that do not drive are (`--name` is a named `--connect`).
    pub fn connect(&self) -> Option<super::ControlTarget> {
        match (&self.connect, &self.name) {
            (Some(c), _) => Some(super::ControlTarget::Address(c.clone())),
            (None, Some(n)) => Some(super::ControlTarget::Name(n.clone())),
            (None, None) => None,
        }
    }

    /// These options laid over `base` (a scenario file's): what is given here wins; outputs
    /// and transport options are merged key by key.
    pub fn over(&self, base: &RunOptions) -> Result<RunOptions, PlanError> {
        fn table(o: &RunOptions) -> Result<toml::Table, PlanError> {
            toml::Table::try_from(o).map_err(|e| PlanError::BadValue(e.to_string()))
        }
        let mut merged = table(base)?;
        for (k, v) in table(self)? {
            match (merged.get_mut(&k), v) {
                (Some(toml::Value::Table(mine)), toml::Value::Table(theirs)) => mine.extend(theirs),
                (_, v) => {
                    merged.insert(k, v);
                }
            }
        }
        let mut out: RunOptions = merged
            .try_into()
            .map_err(|e: toml::de::Error| PlanError::BadValue(e.to_string()))?;
        out.params = base.params.clone();
        out.params.0.extend(self.params.0.clone());
        out.name = self.name.clone().or(base.name.clone());
        out.scenario = self.scenario.clone();
        out.print_scenario = self.print_scenario;
        Ok(out)
    }

    /// A scenario file's options; errors carry the line, the column and what was expected.
    /// The workloads' parameters are top-level keys too: they are taken out first, and the
    /// rest is read as [`RunOptions`].
    pub fn parse_scenario(text: &str, origin: &str) -> Result<RunOptions, PlanError> {
        let located = |mut e: toml::de::Error| {
            e.set_input(Some(text));
            PlanError::Scenario {
                origin: origin.to_string(),
                why: e.to_string().trim_end().to_string(),
            }
        };
        let mut root = toml::de::DeTable::parse(text).map_err(located)?;
        let mut params = ParamArgs::default();
        for p in crate::workload::all_params() {
            let Some(v) = root.get_mut().remove(p.scenario_key().as_str()) else {
                continue;
            };
            let v = v.into_inner();
            let text = match (v.as_str(), v.as_integer(), v.as_bool()) {
                (Some(s), _, _) => s.to_string(),
                (_, Some(i), _) => i.as_str().to_string(),
                (_, _, Some(b)) => b.to_string(),
                _ => {
                    return Err(PlanError::Scenario {
                        origin: origin.to_string(),
                        why: format!(
                            "`{}` takes a string, a number or true/false, e.g. {} = \"{}\"",
                            p.scenario_key(),
                            p.scenario_key(),
                            p.default.unwrap_or("...")
                        ),
                    })
                }
            };
            params.0.insert(p.key.to_string(), text);
        }
        let mut o = RunOptions::deserialize(toml::de::Deserializer::from(root)).map_err(located)?;
        o.params = params;
        Ok(o)
    }

    /// These options as a scenario file.
    pub fn to_scenario(&self) -> String {
        let mut table = toml::Table::try_from(self).expect("options serialize");
        for (k, v) in &self.params.0 {
            table.insert(k.replace('-', "_"), toml::Value::String(v.clone()));
        }
        format!(
            "# msgperf scenario: run it with `msgperf run --scenario FILE`\n{}",
            toml::to_string(&table).expect("options serialize")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cases;

    #[test]
    fn a_template_round_trips_to_the_same_cases() {
        let text = r#"
            workload = "stream"
            transports = ["uds", "tcp"]
            size = "64..4k*4"
            rate = "1khz,max"
            count = 1000
            placement = "any"
            [options]
            nodelay = "maybe"
        "#;
        let o = RunOptions::parse_scenario(text, "t.toml").unwrap();
        // The template is checked exactly like a command line.
        assert!(
            matches!(cases(&o), Err(PlanError::BadValue(e)) if e.contains("use one of true, false"))
        );
        let text = text.replace("[options]\n            nodelay = \"maybe\"", "");
        let o = RunOptions::parse_scenario(&text, "t.toml").unwrap();
        let c = cases(&o).unwrap();
        assert_eq!(c.len(), 2 * 4 * 2, "2 transports x 4 sizes x 2 rates");
        let again = RunOptions::parse_scenario(&o.to_scenario(), "printed").unwrap();
        assert_eq!(again, o);
        assert_eq!(cases(&again).unwrap(), c);
    }

    #[test]
    fn a_pubsub_template_keeps_its_roles_and_delivery() {
        let text = r#"
            workload = "pubsub"
            transports = ["shm"]
            size = "200"
            rate = "1khz"
            duration = "2s"
            pubs = 5
            subs = 1
            delivery = "best-effort"
            slow_subscriber = "1ms"
        "#;
        let o = RunOptions::parse_scenario(text, "p.toml").unwrap();
        let c = &cases(&o).unwrap()[0];
        assert_eq!((c.pubs, c.subs), (5, 1));
        assert!(!c.strict, "best-effort");
        assert_eq!(c.options.get("full").map(String::as_str), Some("fail"));
        assert_eq!(c.param("slow-subscriber"), Some("1ms"));
        let again = RunOptions::parse_scenario(&o.to_scenario(), "printed").unwrap();
        assert_eq!(again, o);
        let e = RunOptions::parse_scenario(&text.replace("best-effort", "sometimes"), "p.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 9") && e.contains("reliable"), "{e}");
    }

    #[test]
    fn bad_templates_name_the_line_column_and_what_was_expected() {
        let e = RunOptions::parse_scenario(
            "workload = \"stream\"\ntransports = [\"uds\"]\ndurration = \"5s\"\n",
            "bad.toml",
        )
        .unwrap_err();
        assert!(matches!(&e, PlanError::Scenario { origin, .. } if origin == "bad.toml"));
        let e = e.to_string();
        assert!(
            e.contains("bad.toml") && e.contains("line 3") && e.contains("column 1"),
            "{e}"
        );
        assert!(
            e.contains("durration") && e.contains("duration"),
            "names the key and the expected ones: {e}"
        );
        let e =
            RunOptions::parse_scenario("workload = \"stream\"\ntransports = \"uds\"\n", "bad.toml")
                .unwrap_err()
                .to_string();
        assert!(e.contains("line 2") && e.contains("sequence"), "{e}");
        let e = RunOptions::parse_scenario(
            "workload = \"stream\"\ntransports = [\"uds\"]\nplacement = \"everywhere\"\n",
            "bad.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 3") && e.contains("same-cpu"), "{e}");
        let o = RunOptions::parse_scenario(
            "workload = \"stream\"\ntransports = [\"uds\"]\nduration = \"soon\"\n",
            "ok.toml",
        )
        .unwrap();
        assert!(
            cases(&o).unwrap_err().to_string().contains("duration"),
            "values are checked too"
        );
    }
}
