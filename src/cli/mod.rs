//! Room `cli`: parses the command line (clap), turns it into a plan, runs it, and maps errors to
//! exit codes: 0 success, 1 a case failed (what was measured is still shown and written), 2 bad
//! usage, 130 interrupted (Ctrl-C, SIGTERM or SIGHUP).

mod floor_cmd;
mod output;

use crate::exec::control::ControlAddr;
use crate::exec::serve::ServeOptions;
use crate::exec::{self, environment, Runner};
use crate::plan::{self, ControlTarget, OutputOptions, RunOptions};
use crate::report::{self, export, progress::Progress};
use crate::result::{CaseConfig, RunResult, Wait, SCHEMA_VERSION};
use crate::transport;
use crate::units::{format_duration, format_size, parse_duration};
use crate::workload;
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong, and so which exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad options or input: exit 2.
    #[error("{0}")]
    Usage(String),
    /// A run refused before it starts: exit 2.
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    /// A transport or workload this build does not know: exit 2.
    #[error(transparent)]
    Unknown(#[from] transport::UnknownName),
    /// Roles that could not run: exit 1.
    #[error(transparent)]
    Exec(#[from] exec::ExecError),
    /// An output refused before a run (exit 2) or that failed while results were written
    /// (exit 1).
    #[error(transparent)]
    Output(#[from] output::OutputError),
    /// A suite that cannot run as written: exit 2.
    #[error(transparent)]
    Suite(#[from] crate::suite::SuiteError),
    /// Results that could not be rendered in a format: exit 1.
    #[error(transparent)]
    Export(#[from] export::ExportError),
    /// The run itself failed: exit 1.
    #[error("{0}")]
    Run(String),
}

impl CliError {
    fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) | CliError::Plan(_) | CliError::Unknown(_) | CliError::Suite(_) => 2,
            CliError::Output(e) if e.before_run() => 2,
            CliError::Exec(_) | CliError::Run(_) | CliError::Output(_) | CliError::Export(_) => 1,
        }
    }
}

pub type Exit = Result<i32, CliError>;

#[derive(Parser, Debug)]
#[command(
    name = "msgperf",
    version,
    about = "Message-passing performance: latency distributions, throughput, CPU cost and the ratio to this machine's floor, for every transport in one table.",
    after_help = "Without a command, msgperf runs `survey`: every built-in transport, ping-pong at 64 B and 4 KiB and a 64 KiB stream, same-CPU and cross-CPU, with ratios to the floor."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Every built-in transport (or those given), ping-pong 64 B and 4 KiB and a 64 KiB stream, in both pinned placements.
    Survey(SurveyArgs),
    /// Run one workload on one or more transports and sizes.
    #[command(after_help = RUN_EXAMPLES)]
    Run(Box<RunOptions>),
    /// Measure each transport's plain loop (and the hardware's), with no harness.
    Floor(floor_cmd::FloorArgs),
    /// Wait for runs elsewhere and play their roles that do not drive (NML's perfsvr).
    Serve(ServeArgs),
    /// Copy this msgperf to other hosts through their launchers (where `run --host` looks for
    /// it when the far side has none at this binary's path).
    Deploy(DeployArgs),
    /// List the transports, their options and capabilities.
    Transports(TransportsArgs),
    /// Render a saved JSON result again (the table, or any export: `-o report.html`).
    Report(ReportArgs),
    /// Compare two saved runs case by case, with a verdict per figure over repetitions.
    Compare(CompareArgs),
    /// Rerun a source report's experiments (`--list` names them): its table with today's
    /// figures and its published ones, and each of its conclusions checked.
    Suite(SuiteArgs),
    /// Print shell completions, made from the same definition as the parser (e.g. `msgperf
    /// completions bash > /etc/bash_completion.d/msgperf`).
    Completions(CompletionsArgs),
    /// Print msgperf's manual page in roff (`msgperf man > msgperf.1; man ./msgperf.1`).
    Man,
    /// A role process, started by msgperf itself (`msgperf role subscriber 2 ...`).
    #[command(hide = true)]
    Role(RoleArgs),
    /// A transport's own process that a case's set-up starts (a media driver), started by
    /// msgperf itself (`msgperf service TRANSPORT ...`).
    #[command(hide = true)]
    Service(ServiceArgs),
}

/// Examples of `msgperf run`: documentation, kept as text.
const RUN_EXAMPLES: &str = include_str!("examples.txt");

#[derive(Args, Debug)]
struct SurveyArgs {
    /// Transports to survey, comma-separated (default: every one built in; see `msgperf
    /// transports`).
    #[arg(long = "transport", short = 't', value_delimiter = ',')]
    transports: Vec<String>,
    /// Measured time of each case.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    duration: Duration,
    /// Unmeasured time before each case.
    #[arg(long, default_value = "50ms", value_parser = parse_duration)]
    warmup: Duration,
    #[command(flatten)]
    out: OutputOptions,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[arg(long, short)]
    transport: String,
    /// Where to take runs' control connections: host:port, or a unix socket's path (default:
    /// 127.0.0.1 on a free port, printed).
    #[arg(long, conflicts_with = "name")]
    listen: Option<String>,
    /// A name runs find this server by (`run --name NAME`): its socket is /dev/shm/msgperf-NAME.
    #[arg(long)]
    name: Option<String>,
    /// Serve only cases with these transport options (key=value, repeatable).
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    opts: Vec<String>,
    /// Pin the serving role to this CPU.
    #[arg(long)]
    pin: Option<usize>,
    /// Serve one case, then exit.
    #[arg(long)]
    once: bool,
    // Every setting below comes from the case now; accepted so that old command lines run.
    #[arg(long, hide = true, value_parser = crate::units::parse_size)]
    max_message: Option<usize>,
    #[arg(long, hide = true)]
    poll: bool,
    #[arg(long, hide = true, value_parser = parse_duration)]
    timeout: Option<Duration>,
}

#[derive(Args, Debug)]
struct TransportsArgs {
    /// One transport, with all it says of itself.
    name: Option<String>,
    /// Print the table as Markdown (the README's table is this output).
    #[arg(long)]
    markdown: bool,
    /// Print what the transports built in need and this machine lacks, a line each:
    /// `debian PACKAGE` (for apt-get), then `script PATH` (run from the repository's top).
    #[arg(long, conflicts_with = "markdown")]
    needs: bool,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// A JSON file written by `--json`.
    file: PathBuf,
    /// Write the run to this file, in the format its extension names (report.html, r.md,
    /// r.hlog, r.csv, r.json), instead of printing the table.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    out: OutputOptions,
}

#[derive(Args, Debug)]
struct CompareArgs {
    /// The run to compare against (JSON written by `--json`), or a directory of such runs
    /// taken in turns with NEW's (their repetitions pooled).
    base: PathBuf,
    /// The run compared, or a directory of runs.
    new: PathBuf,
    /// Changes smaller than this are `same` (a percentage).
    #[arg(long, default_value = "3%", value_parser = parse_percent)]
    noise: f64,
    /// Exit 1 when any figure of any case is slower (for CI).
    #[arg(long, value_enum)]
    fail_on: Option<FailOn>,
    /// Compare cases whose settings or environment differ (the differences are printed).
    #[arg(long)]
    allow_different: bool,
    /// Write the comparison in these formats too, FORMAT=PATH: md (for a pull request) or
    /// json.
    #[arg(long, value_name = "FORMAT=PATH", value_delimiter = ',')]
    export: Vec<String>,
}

#[derive(Args, Debug)]
struct SuiteArgs {
    /// The suite to run (see --list).
    #[arg(required_unless_present_any = ["list", "file"])]
    name: Option<String>,
    /// Name the suites and what each reruns.
    #[arg(long, conflicts_with_all = ["name", "file", "print"])]
    list: bool,
    /// Print the suite's file instead of running it: its experiments are scenarios, its
    /// conclusions data; a copy can be edited and run with --file.
    #[arg(long)]
    print: bool,
    /// Run the suite in this file instead of a shipped one.
    #[arg(long, conflicts_with = "name")]
    file: Option<PathBuf>,
    /// Measured time of each case.
    #[arg(long, default_value = "1s")]
    duration: String,
    /// Measure no floors (the plain loops the ratios divide by).
    #[arg(long = "no-floor")]
    no_floor: bool,
    #[command(flatten)]
    out: OutputOptions,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum FailOn {
    Slower,
}

/// `3%` or `0.03` as a fraction.
fn parse_percent(s: &str) -> Result<f64, String> {
    let v = match s.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => s.trim().parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not a percentage: write e.g. 3%"))?;
    if !(0.0..1.0).contains(&v) {
        return Err(format!("`{s}`: give a noise band from 0% to 99%"));
    }
    Ok(v)
}

#[derive(Args, Debug)]
struct DeployArgs {
    /// NAME=LAUNCHER, as for `run --host` (repeatable).
    #[arg(long = "host", value_name = "NAME=LAUNCHER", required = true)]
    hosts: Vec<String>,
    /// Bound on each step (the copy gets at least 2 minutes).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    timeout: Duration,
}

#[derive(Args, Debug)]
struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
struct RoleArgs {
    /// What the role is, for `ps`; it learns its order on its control socket.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    what: Vec<String>,
}

#[derive(Args, Debug)]
struct ServiceArgs {
    transport: String,
    /// What the transport's set-up passed it.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

/// Parses and runs; returns the exit code.
pub fn main_with_args(args: Vec<String>) -> i32 {
    crate::sys::keep_freed_memory();
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match dispatch(cli, &args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("msgperf: {e}");
            e.exit_code()
        }
    }
}

fn dispatch(cli: Cli, args: &[String]) -> Exit {
    if let Some(Command::Role(r)) = &cli.command {
        // A role process: single-threaded, no Ctrl-C handler (it sits in its own process
        // group), nothing swept (its runner did that). With --stdio, a role on another host.
        if r.what.first().is_some_and(|w| w == "--stdio") {
            exec::role::stdio_main(&r.what)?;
        } else {
            exec::role::process_main()?;
        }
        return Ok(0);
    }
    if let Some(Command::Service(a)) = &cli.command {
        transport::find(&a.transport)?
            .service_main(&a.args)
            .map_err(|cause| exec::ExecError::Transport {
                what: format!("msgperf service {}", a.transport),
                cause,
            })?;
        return Ok(0);
    }
    transport::remove_stale_dirs();
    if matches!(
        cli.command,
        None | Some(
            Command::Survey(_)
                | Command::Run(_)
                | Command::Floor(_)
                | Command::Serve(_)
                | Command::Suite(_)
        )
    ) {
        transport::check_temp_dir().map_err(CliError::Usage)?;
    }
    match cli.command {
        None => survey(
            SurveyArgs {
                transports: Vec::new(),
                duration: Duration::from_millis(200),
                warmup: Duration::from_millis(50),
                out: OutputOptions::default(),
            },
            args,
        ),
        Some(Command::Survey(a)) => survey(a, args),
        Some(Command::Run(a)) => run(*a, args),
        Some(Command::Floor(a)) => {
            install_stop_handler();
            floor_cmd::floor(a)
        }
        Some(Command::Serve(a)) => serve(a),
        Some(Command::Deploy(a)) => deploy(a),
        Some(Command::Transports(a)) => {
            let only = match &a.name {
                Some(n) => Some(transport::find(n)?),
                None => None,
            };
            let text = if a.needs {
                missing_needs(only)
            } else {
                transports_table(a.markdown, only)
            };
            print_out(&text)?;
            Ok(0)
        }
        Some(Command::Report(a)) => report_file(a),
        Some(Command::Compare(a)) => compare(a),
        Some(Command::Suite(a)) => suite(a, args),
        Some(Command::Completions(a)) => {
            let mut out = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "msgperf", &mut out);
            print_out(&String::from_utf8_lossy(&out))?;
            Ok(0)
        }
        Some(Command::Man) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .map_err(|e| CliError::Run(format!("cannot render the manual page: {e}")))?;
            print_out(&String::from_utf8_lossy(&out))?;
            Ok(0)
        }
        Some(Command::Role(_) | Command::Service(_)) => unreachable!("handled above"),
    }
}

/// Prints to stdout. A closed pipe (`| head`) is not an error; any other failure (a full
/// disk) is.
pub(crate) fn print_out(s: &str) -> Result<(), CliError> {
    let mut o = std::io::stdout().lock();
    match o.write_all(s.as_bytes()).and_then(|_| o.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::Run(format!(
            "cannot write to standard output: {e}"
        ))),
        _ => Ok(()),
    }
}

/// Ctrl-C, SIGTERM and SIGHUP end the run cleanly: the case in progress stops, what was
/// measured is printed and written, marked interrupted (exit 130). A second one leaves at once.
fn install_stop_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            if exec::STOP.swap(true, std::sync::atomic::Ordering::SeqCst) {
                std::process::exit(130);
            }
        });
    });
}

fn survey(a: SurveyArgs, args: &[String]) -> Exit {
    let cases = plan::survey(&a.transports, a.duration, a.warmup)?;
    execute(
        cases,
        1,
        &a.out,
        None,
        true,
        args,
        &BTreeMap::new(),
        &|_| {},
    )
}

fn suite(a: SuiteArgs, args: &[String]) -> Exit {
    if a.list {
        let mut text = String::new();
        for (name, about) in crate::suite::list() {
            text.push_str(&format!("{name:<8} {about}\n"));
        }
        print_out(&text)?;
        return Ok(0);
    }
    let (text, origin) = match (&a.file, &a.name) {
        (Some(path), _) => (
            std::fs::read_to_string(path).map_err(|e| {
                CliError::Usage(format!("cannot read suite {}: {e}", path.display()))
            })?,
            path.display().to_string(),
        ),
        (None, Some(name)) => (
            crate::suite::text_of(name)?.to_string(),
            format!("suite {name}"),
        ),
        (None, None) => unreachable!("clap requires a name or --file"),
    };
    let suite = crate::suite::parse(&text, &origin)?;
    if a.print {
        print_out(&text)?;
        return Ok(0);
    }
    let over = RunOptions {
        duration: Some(a.duration.clone()),
        ..RunOptions::default()
    };
    let runs = crate::suite::runs(&suite, &over)?;
    let hosts = crate::suite::hosts(&suite, &runs)?;
    // A case that several experiments share runs once and shows in each.
    let mut cases: Vec<CaseConfig> = Vec::new();
    let mut experiments: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        let planned = plan::cases(r).map_err(|e| {
            CliError::Usage(format!(
                "{origin}, experiment {}: {e}",
                suite.experiment[i].id
            ))
        })?;
        for c in planned {
            let of = experiments.entry(c.key()).or_default();
            if of.is_empty() {
                cases.push(c);
            }
            of.push(i);
        }
    }
    let experiment_of = |c: &CaseConfig| experiments.get(&c.key()).cloned().unwrap_or_default();
    execute(cases, 1, &a.out, None, !a.no_floor, args, &hosts, &|run| {
        run.suite = Some(crate::suite::outcome(&suite, run, &experiment_of))
    })
}

fn run(a: RunOptions, args: &[String]) -> Exit {
    let o = match &a.scenario {
        Some(path) => {
            if a.workload.is_some() || !a.transports.is_empty() {
                return Err(CliError::Usage("give the workload and transports in the scenario file or on the command line, not both".into()));
            }
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::Usage(format!("cannot read scenario {}: {e}", path.display()))
            })?;
            let file = RunOptions::parse_scenario(&text, &path.display().to_string())?;
            a.over(&file)
                .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?
        }
        None => a,
    };
    let cases = plan::cases(&o).map_err(|e| match &o.scenario {
        Some(p) => CliError::Usage(format!("{}: {e}", p.display())),
        None => e.into(),
    })?;
    if o.print_scenario {
        let mut printed = o.clone();
        printed.connect = printed.connect.or(printed.name.take());
        print_out(&printed.to_scenario())?;
        return Ok(0);
    }
    let connect = match o.connect() {
        Some(ControlTarget::Address(a)) => {
            Some(ControlAddr::parse(&a, "--connect").map_err(|e| CliError::Usage(e.to_string()))?)
        }
        Some(ControlTarget::Name(n)) => Some(ControlAddr::named(&n)),
        None => None,
    };
    let floor = o.floor() && connect.is_none();
    execute(
        cases,
        o.repeat()?,
        &o.output,
        connect,
        floor,
        args,
        &o.hosts(),
        &|_| {},
    )
}

fn label(c: &CaseConfig) -> String {
    let cpu = |c: Option<usize>| c.map_or("-".to_string(), |c| c.to_string());
    format!(
        "{} {} {}, cpus {}/{}",
        c.transport,
        c.workload,
        format_size(c.size_bytes),
        cpu(c.cpus.0),
        cpu(c.cpus.1)
    )
}

/// Every output a run writes: `--json`, `--csv` and each `--export FORMAT=PATH`.
type Outputs = Vec<(&'static export::Format, PathBuf)>;

fn outputs(out: &OutputOptions) -> Result<Outputs, CliError> {
    let mut list: Outputs = Vec::new();
    let find = |name: &str| export::find(name).map_err(CliError::Usage);
    if let Some(p) = &out.json {
        list.push((find("json")?, p.clone()));
    }
    if let Some(p) = &out.csv {
        list.push((find("csv")?, p.clone()));
    }
    for spec in &out.export {
        let (name, path) = spec
            .split_once('=')
            .filter(|(_, p)| !p.trim().is_empty())
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "--export `{spec}` is not FORMAT=PATH: write e.g. --export html=report.html"
                ))
            })?;
        let f = find(name.trim())?;
        if f.directory() && path == "-" {
            return Err(CliError::Usage(format!(
                "--export {name}=-: {name} writes a file per case and role, so it needs a directory: write e.g. --export {name}=results/"
            )));
        }
        list.push((f, PathBuf::from(path)));
    }
    if list.iter().filter(|(_, p)| p.as_os_str() == "-").count() > 1 {
        return Err(CliError::Usage(
            "only one output can go to standard output (`-`): name a file for the others".into(),
        ));
    }
    Ok(list)
}

/// Checks, before anything runs, that every output can be written.
fn check_outputs(list: &Outputs) -> Result<(), CliError> {
    for (f, p) in list {
        if f.directory() {
            std::fs::create_dir_all(p).map_err(|e| {
                CliError::Usage(format!(
                    "cannot make the directory {} for --export {}: {e}; name a directory you can write",
                    p.display(),
                    f.name
                ))
            })?;
            output::check(&p.join("msgperf-probe"))?;
            continue;
        }
        for path in std::iter::once(p.clone()).chain(f.beside(p)) {
            output::check(&path)?;
        }
    }
    Ok(())
}

/// Writes the outputs: regular files after every case (so that a crash keeps what was
/// measured), FIFOs and standard output once, when `last`.
fn write_outputs(run: &RunResult, list: &Outputs, last: bool) -> Result<(), CliError> {
    for (f, p) in list {
        if !(last || f.directory() || output::rewritable(p)) {
            continue;
        }
        for (path, bytes) in f.render(run, p)? {
            output::write(&path, &bytes)?;
        }
    }
    Ok(())
}

/// Runs cases one after another, `repeat` times over (ABAB: every case once, then again),
/// writing results after each, lets `finish` add to the run what it makes of it (a suite's
/// outcome) before the last write, and prints the table.
#[allow(clippy::too_many_arguments)]
fn execute(
    cases: Vec<CaseConfig>,
    repeat: u32,
    out: &OutputOptions,
    connect: Option<ControlAddr>,
    floor: bool,
    args: &[String],
    hosts: &BTreeMap<String, String>,
    finish: &dyn Fn(&mut RunResult),
) -> Exit {
    let outs = outputs(out)?;
    check_outputs(&outs)?;
    install_stop_handler();
    // Made once for the run (namespaces of `netns` hosts), removed when the runner goes.
    let hosts = exec::hosts::Hosts::set_up(hosts)?;
    // Each case's expected time: its warm-up and length, and its floor's (at most 3 s).
    let cases: Vec<(u32, CaseConfig)> = (1..=repeat)
        .flat_map(|r| cases.iter().map(move |c| (r, c.clone())))
        .collect();
    let steps: Vec<Duration> = cases
        .iter()
        .map(|(_, c)| c)
        .map(|c| {
            let length = c.warmup + c.duration.unwrap_or(Duration::from_secs(1));
            let floor_length = c.warmup
                + c.duration
                    .unwrap_or(Duration::from_secs(1))
                    .min(Duration::from_secs(3));
            length
                + if floor && c.rate_hz.is_none() {
                    floor_length
                } else {
                    Duration::ZERO
                }
        })
        .collect();
    let mut run = RunResult {
        schema_version: SCHEMA_VERSION,
        msgperf_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: args.to_vec(),
        repeat,
        environment: environment::probe(),
        cases: Vec::new(),
        interrupted: false,
        suite: None,
    };
    let progress = Progress::new("cases", steps);
    let mut runner = Runner::new(connect, floor);
    runner.hosts = hosts;
    let mut unwritten: Option<CliError> = None;
    // A rate sweep stops offering more load to a case that could not hold a lower one.
    let mut saturated: Vec<(CaseConfig, f64)> = Vec::new();
    for (i, (repetition, case)) in cases.iter().enumerate() {
        if exec::stop_requested() {
            break;
        }
        if saturated
            .iter()
            .any(|(c, hz)| same_but_rate(c, case) && case.rate_hz.is_some_and(|r| r > *hz))
        {
            continue;
        }
        let what = match repeat {
            1 => label(case),
            _ => format!("{} (run {repetition} of {repeat})", label(case)),
        };
        progress.step(i, &what);
        let mut result = runner.run_case(case);
        result.repetition = *repetition;
        if let (Some(hz), Some(err)) = (
            case.rate_hz,
            report::summary::summarize(&result).rate_error_pct,
        ) {
            if err < -5.0 {
                saturated.push((case.clone(), hz));
            }
        }
        run.cases.push(result);
        // An output that stops taking writes (its directory removed, a full disk) ends the run:
        // what was measured still reaches the terminal below.
        if let Err(e) = write_outputs(&run, &outs, false) {
            unwritten = Some(e);
            break;
        }
    }
    run.interrupted = exec::stop_requested();
    finish(&mut run);
    if unwritten.is_none() {
        unwritten = write_outputs(&run, &outs, true).err();
    }
    progress.finish();
    let layout = report::Layout {
        details: out.details.unwrap_or(cases.len() <= 8),
        width: width(out),
    };
    let mut text = report::render_terminal(&run, &layout);
    let written: Vec<String> = outs
        .iter()
        .flat_map(|(f, p)| std::iter::once(p.clone()).chain(f.beside(p)))
        .filter(|p| p.as_os_str() != "-")
        .map(|p| p.display().to_string())
        .collect();
    if !written.is_empty() && unwritten.is_none() {
        text.push_str(&report::table::wrap(
            &format!("summary: results written to {}.", written.join(", ")),
            layout.width,
        ));
    }
    // The JSON or CSV on standard output is what the caller reads: the table then goes to stderr.
    if outs.iter().any(|(_, p)| p.as_os_str() == "-") {
        eprint!("{text}");
    } else {
        print_out(&text)?;
    }
    if let Some(e) = unwritten {
        let left = cases.len() - run.cases.len();
        let rest = if left > 0 {
            format!("; {left} cases were not run")
        } else {
            String::new()
        };
        return Err(CliError::Run(format!(
            "{e}: the table above holds every case measured{rest}"
        )));
    }
    if run.interrupted {
        return Ok(130);
    }
    let failed: Vec<(usize, &String)> = run
        .cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.error.as_ref().map(|e| (i + 1, e)))
        .collect();
    if let Some((i, first)) = failed.first() {
        let rest = match (failed.len(), run.cases.len()) {
            (1, 1) => String::new(),
            (f, n) => format!(" ({f} of {n} cases failed; the others were measured and written)"),
        };
        return Err(CliError::Run(format!("case {i}: {first}{rest}")));
    }
    Ok(0)
}

/// Two cases that differ only in their rate (points of one sweep).
fn same_but_rate(a: &CaseConfig, b: &CaseConfig) -> bool {
    CaseConfig {
        rate_hz: None,
        ..a.clone()
    } == CaseConfig {
        rate_hz: None,
        ..b.clone()
    }
}

fn deploy(a: DeployArgs) -> Exit {
    let mut given = BTreeMap::new();
    for h in &a.hosts {
        let (name, launcher) = h.split_once('=').ok_or_else(|| {
            CliError::Usage(format!(
                "--host {h}: not NAME=LAUNCHER: write e.g. --host b='ssh -T user@10.0.0.2'"
            ))
        })?;
        if launcher.trim() == "netns" {
            return Err(CliError::Usage(format!(
                "--host {name}=netns is a namespace of this machine, made per run: it runs this binary as it is, nothing to deploy"
            )));
        }
        given.insert(name.to_string(), launcher.to_string());
    }
    let hosts = exec::hosts::Hosts::set_up(&given)?;
    for name in given.keys() {
        let host = hosts.get(name).expect("set up above");
        let path = exec::hosts::deploy(host, a.timeout)?;
        print_out(&format!(
            "host {name}: msgperf {} build {} at {path} (through `{}`)\n",
            env!("CARGO_PKG_VERSION"),
            exec::control::build_id(),
            host.launcher
        ))?;
    }
    Ok(0)
}

fn serve(a: ServeArgs) -> Exit {
    install_stop_handler();
    let t = transport::find(&a.transport)?;
    let options = a
        .opts
        .iter()
        .map(|o| {
            o.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "--opt `{o}` is not key=value: write e.g. --opt nodelay=false"
                    ))
                })
        })
        .collect::<Result<_, _>>()?;
    transport::validate_options(t, &options).map_err(CliError::Usage)?;
    let at = match (&a.name, &a.listen) {
        (Some(n), _) => {
            plan::check_name(n)?;
            ControlAddr::named(n)
        }
        (None, Some(l)) => {
            let at =
                ControlAddr::parse(l, "--listen").map_err(|e| CliError::Usage(e.to_string()))?;
            // It takes any connection and plays what it is asked: never where others reach it.
            if !at.is_private() {
                return Err(CliError::Usage(format!(
                    "--listen {l}: msgperf serve takes connections without authentication, so it listens only on loopback or a unix socket: reach it from another host through your ssh (ssh -L), or place the roles there with `run --host NAME='ssh -T user@host' --place ROLE=NAME`"
                )));
            }
            at
        }
        (None, None) => ControlAddr::Tcp("127.0.0.1:0".into()),
    };
    let o = ServeOptions {
        transport: a.transport.clone(),
        option: if a.name.is_some() {
            "--name"
        } else {
            "--listen"
        },
        at,
        pin: a.pin,
        once: a.once,
        options,
    };
    let mut failed_stdout = None;
    exec::serve::serve(&o, |r| match r {
        Ok((case, role)) => {
            if let Err(e) = print_out(&format!(
                "served {} {}{}: {} messages, {}\n",
                case.workload,
                format_size(case.size_bytes),
                if case.wait == Wait::Poll {
                    " (poll)"
                } else {
                    ""
                },
                role.counters.messages_received,
                format_duration(Duration::from_nanos(
                    role.measured_ns / 1_000_000 * 1_000_000
                )),
            )) {
                failed_stdout.get_or_insert(e);
            }
        }
        Err(e) => eprintln!("msgperf serve: {e}"),
    })?;
    match failed_stdout {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// What the transports need and this machine lacks: packages first, as the scripts use them.
fn missing_needs(only: Option<&'static dyn transport::Transport>) -> String {
    let list: Vec<&dyn transport::Transport> = match only {
        Some(t) => vec![t],
        None => transport::REGISTRY.to_vec(),
    };
    let mut lines: Vec<String> = Vec::new();
    for need in list.iter().flat_map(|t| t.needs()).filter(|n| !n.present) {
        let line = match need.get {
            transport::Get::Debian(p) => format!("debian {p}"),
            transport::Get::Script(s) => format!("script {s}"),
        };
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines.sort_by_key(|l| l.starts_with("script"));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn transports_table(markdown: bool, only: Option<&'static dyn transport::Transport>) -> String {
    let list: Vec<&dyn transport::Transport> = match only {
        Some(t) => vec![t],
        None => transport::REGISTRY.to_vec(),
    };
    let facts = |t: &dyn transport::Transport| {
        let c = t.capabilities(&Default::default());
        [
            t.name().to_string(),
            if c.reliable { "yes" } else { "no" }.into(),
            c.max_message_bytes.to_string(),
            if c.cross_process {
                "yes"
            } else {
                "threads only"
            }
            .into(),
            if c.native_fan_out > 0 {
                format!("one shared write, up to {} readers", c.native_fan_out)
            } else {
                "a copy per reader".into()
            },
        ]
    };
    let options = |t: &dyn transport::Transport| -> Vec<String> {
        t.options()
            .iter()
            .map(|o| format!("{}={} ({})", o.key, o.default, o.about))
            .collect()
    };
    if markdown {
        let mut s = String::from("| transport | what it is | reliable | max message [B] | processes | fan-out | options |\n|");
        s.push_str(&" --- |".repeat(7));
        s.push('\n');
        for t in &list {
            let f = facts(*t);
            // Keys and defaults: what each means is `msgperf transports NAME`.
            let o: Vec<String> = t
                .options()
                .iter()
                .map(|o| format!("`{}={}`", o.key, o.default))
                .collect();
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                f[0],
                t.about(),
                f[1],
                f[2],
                f[3],
                f[4],
                if o.is_empty() {
                    "-".into()
                } else {
                    o.join(", ")
                }
            ));
        }
        return s;
    }
    let width =
        crate::sys::terminal_width().or_else(|| std::env::var("COLUMNS").ok()?.parse().ok());
    let mut t = comfy_table::Table::new();
    t.load_preset(crate::report::table::STYLE);
    t.set_header(vec![
        "transport",
        "reliable",
        "max message",
        "processes",
        "fan-out",
    ]);
    for tr in &list {
        let c = tr.capabilities(&Default::default());
        let f = facts(*tr);
        t.add_row(vec![
            f[0].clone(),
            f[1].clone(),
            format_size(c.max_message_bytes),
            f[3].clone(),
            if c.native_fan_out > 0 {
                format!("shared, {} readers", c.native_fan_out)
            } else {
                "a copy each".into()
            },
        ]);
    }
    let mut out = format!("{t}\n");
    let wrap = |s: &str| crate::report::table::wrap(s, width);
    for tr in &list {
        out.push('\n');
        out.push_str(&wrap(&format!("{}: {}", tr.name(), tr.about())));
        for o in options(*tr) {
            out.push_str(&wrap(&format!("  --opt {o}")));
        }
        for n in tr.needs() {
            let state = if n.present { "here" } else { "missing" };
            out.push_str(&wrap(&format!(
                "  needs {} ({state}: {})",
                n.what,
                n.get.command()
            )));
        }
    }
    if only.is_none() {
        out.push_str("\nworkloads:\n");
        for w in workload::REGISTRY {
            out.push_str(&wrap(&format!("  {}: {}", w.name(), w.about())));
        }
    }
    out
}

/// The width tables fit: the terminal's, or `COLUMNS` when output is not a terminal but the
/// variable says how wide to be; None (every column) with `--wide` or plain piped output.
fn width(out: &OutputOptions) -> Option<usize> {
    if out.wide == Some(true) {
        return None;
    }
    crate::sys::terminal_width().or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
}

/// A run saved as JSON.
fn read_run(path: &std::path::Path) -> Result<RunResult, CliError> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        CliError::Usage(format!(
            "{} is not a msgperf JSON result of this version ({e}): write one with `msgperf run ... --json FILE`",
            path.display()
        ))
    })
}

/// One side of a comparison: a run, or every run (`*.json`) in a directory, pooled.
fn read_side(side: &str, path: &std::path::Path) -> Result<(RunResult, Vec<String>), CliError> {
    if !path.is_dir() {
        return Ok((read_run(path)?, Vec::new()));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(CliError::Usage(format!(
            "{side} {} holds no .json result: write runs there with `msgperf run ... --json {}/N.json`",
            path.display(),
            path.display()
        )));
    }
    let runs = files
        .iter()
        .map(|f| {
            let name = f
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into());
            read_run(f).map(|r| (name, r))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(report::compare::pooled(side, runs))
}

fn compare(a: CompareArgs) -> Exit {
    use report::compare;
    let (base, mut differences) = read_side("BASE", &a.base)?;
    let (new, new_differences) = read_side("NEW", &a.new)?;
    differences.extend(new_differences);
    let mut files = Vec::new();
    for spec in &a.export {
        let (name, path) = spec
            .split_once('=')
            .filter(|(n, p)| ["md", "json"].contains(n) && !p.is_empty())
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "--export `{spec}`: compare writes md=PATH or json=PATH"
                ))
            })?;
        let path = PathBuf::from(path);
        output::check(&path)?;
        files.push((name.to_string(), path));
    }
    let mut c = compare::compare(&base, &new, a.noise, a.allow_different);
    differences.append(&mut c.differences);
    c.differences = differences;
    let w = crate::sys::terminal_width().or_else(|| std::env::var("COLUMNS").ok()?.parse().ok());
    let mut text = String::new();
    for d in &c.differences {
        text.push_str(&report::table::wrap(&format!("differs: {d}"), w));
    }
    if !c.differences.is_empty() && !a.allow_different {
        print_out(&text)?;
        return Err(CliError::Usage(format!(
            "{} and {} were not taken alike ({} differences above): compare them anyway with --allow-different",
            a.base.display(),
            a.new.display(),
            c.differences.len()
        )));
    }
    if c.rows.is_empty() {
        print_out(&text)?;
        return Err(CliError::Usage(format!(
            "{} and {} have no case in common: compare runs of the same cases",
            a.base.display(),
            a.new.display()
        )));
    }
    let grid = compare::grid(&c);
    text.push_str(&grid.render(w));
    for n in compare::notes(&c, a.noise) {
        text.push_str(&report::table::wrap(&n, w));
    }
    print_out(&text)?;
    for (name, path) in files {
        let bytes = match name.as_str() {
            "md" => {
                let mut md = grid.markdown();
                for n in compare::notes(&c, a.noise) {
                    md.push_str(&format!("\n{n}\n"));
                }
                md.into_bytes()
            }
            _ => serde_json::to_vec_pretty(&c)
                .map_err(|e| export::ExportError::new("the comparison's JSON", e))?,
        };
        output::write(&path, &bytes)?;
    }
    match a.fail_on {
        Some(FailOn::Slower) if c.any(compare::Verdict::Slower) => Ok(1),
        _ => Ok(0),
    }
}

fn report_file(a: ReportArgs) -> Exit {
    let run = read_run(&a.file)?;
    let mut outs = outputs(&a.out)?;
    if let Some(o) = &a.output {
        let ext = o.extension().and_then(|e| e.to_str()).unwrap_or("");
        let f = export::find(ext).map_err(|_| {
            CliError::Usage(format!(
                "-o {}: name a file ending in the format's name ({}), or use --export FORMAT=PATH",
                o.display(),
                export::REGISTRY
                    .iter()
                    .filter(|f| !f.directory())
                    .map(|f| format!(".{}", f.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        outs.push((f, o.clone()));
        check_outputs(&outs)?;
        write_outputs(&run, &outs, true)?;
        print_out(&format!("wrote {}\n", o.display()))?;
        return Ok(0);
    }
    check_outputs(&outs)?;
    write_outputs(&run, &outs, true)?;
    let layout = report::Layout {
        details: a.out.details.unwrap_or(false),
        width: width(&a.out),
    };
    print_out(&format!(
        "{}{}",
        report::heading(&run, layout.width),
        report::render_terminal(&run, &layout)
    ))?;
    Ok(0)
}
