//! Room `cli`: parses the command line (clap), turns it into a plan, runs it, and maps errors to
//! exit codes: 0 success, 1 a case failed (what was measured is still shown and written), 2 bad
//! usage, 130 interrupted.

mod floor_cmd;

use crate::exec::{self, environment, Runner, ServeOptions};
use crate::plan::scenario::{Output, Scenario};
use crate::plan::{self, RunRequest};
use crate::report::{self, progress::Progress};
use crate::result::{CaseConfig, Placement, RunResult, Wait, SCHEMA_VERSION};
use crate::transport;
use crate::units::{format_duration, format_size, parse_duration, parse_size_list};
use crate::workload;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong, and so which exit code.
#[derive(Debug)]
pub enum CliError {
    /// Bad options or input: exit 2.
    Usage(String),
    /// The run itself failed: exit 1.
    Run(String),
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
    /// Every built-in transport, ping-pong 64 B and 4 KiB and a 64 KiB stream, in both pinned placements.
    Survey(SurveyArgs),
    /// Run one workload on one or more transports and sizes.
    Run(Box<RunArgs>),
    /// Measure each transport's plain loop (and the hardware's), with no harness.
    Floor(floor_cmd::FloorArgs),
    /// Wait for peers and serve the passive role of their cases (NML's perfsvr).
    Serve(ServeArgs),
    /// List the transports, their options and capabilities.
    Transports(TransportsArgs),
    /// Render a saved JSON result again.
    Report(ReportArgs),
    /// A publisher role started by `run pubsub` (ordered over stdin).
    #[command(hide = true)]
    Publish,
}

#[derive(Args, Debug, Default)]
struct OutputArgs {
    /// Write every figure, the configuration and the environment as JSON (rewritten after each case).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one row per case as CSV (rewritten after each case).
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also print the per-role table (call times, CPU, memory) and the floors.
    #[arg(long)]
    details: bool,
}

#[derive(Args, Debug)]
struct SurveyArgs {
    /// Measured time of each case.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    duration: Duration,
    /// Unmeasured time before each case.
    #[arg(long, default_value = "50ms", value_parser = parse_duration)]
    warmup: Duration,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PlacementArg {
    SameCpu,
    CrossCpu,
    Any,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum DeliveryArg {
    Reliable,
    BestEffort,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum HistoryArg {
    Fifo,
    Latest,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The workload: pingpong, stream or pubsub (or give a --scenario).
    workload: Option<String>,
    /// Transports, comma-separated (see `msgperf transports`).
    #[arg(long, short, value_delimiter = ',')]
    transport: Vec<String>,
    /// Message sizes: a list or a range, e.g. 64,1k,64k or 64..1M*4.
    #[arg(long, short, default_value = "64")]
    size: String,
    /// Stop after this many measured messages (round trips for pingpong).
    #[arg(long, short = 'n')]
    count: Option<u64>,
    /// Stop after this long (default 3s unless --count is given).
    #[arg(long, short, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Unmeasured time before each case.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    warmup: Duration,
    /// Busy-poll reads instead of blocking (reports reads/s and new messages/s).
    #[arg(long)]
    poll: bool,
    /// The writer waits for an acknowledgement of every message (stream).
    #[arg(long)]
    confirm: bool,
    /// Every message carries a CRC32 of its payload, checked by the receiver.
    #[arg(long)]
    checksum: bool,
    /// Stream: send on an open-loop schedule at these rates (e.g. 1khz or 10hz,1khz,max), one
    /// case each, or `sweep` (100 Hz up to saturation, then max). Latency is then also
    /// measured from each message's intended send time.
    #[arg(long, default_value = "max")]
    rate: String,
    /// pubsub: publishers, each a process (a thread with --threads) sending at --rate.
    #[arg(long, default_value_t = 1)]
    pubs: usize,
    /// pubsub: subscribers, each a process (a thread with --threads) taking every publisher.
    #[arg(long, default_value_t = 1)]
    subs: usize,
    /// reliable: nothing may be lost, a slow reader pushes back and any loss fails the case;
    /// best-effort: where the transport can drop (udp, shm), a slow reader loses messages,
    /// counted per reader. Default: as the transport is.
    #[arg(long, value_enum)]
    delivery: Option<DeliveryArg>,
    /// fifo: every message in order; latest: only the newest, older unread ones overwritten
    /// and counted (shm).
    #[arg(long, value_enum, default_value = "fifo")]
    history: HistoryArg,
    /// The first subscriber (reader) spends this long on every message: a slow consumer.
    #[arg(long, value_parser = parse_duration)]
    slow_subscriber: Option<Duration>,
    /// Run the roles as threads of one process instead of processes.
    #[arg(long)]
    threads: bool,
    /// Where the roles run (default cross-cpu on a machine with 2 CPUs or more).
    #[arg(long, value_enum, conflicts_with = "pin")]
    placement: Option<PlacementArg>,
    /// Pin the active and passive roles to these CPUs, e.g. 0,1.
    #[arg(long, value_delimiter = ',')]
    pin: Option<Vec<usize>>,
    /// A transport option, key=value (repeatable; see `msgperf transports`).
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    opts: Vec<String>,
    /// Bound on every wait: connect, accept, send, receive.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    timeout: Duration,
    /// Do not measure the floor (no `vs floor` ratio).
    #[arg(long)]
    no_floor: bool,
    /// The passive role is a `msgperf serve` already running at this address.
    #[arg(long, conflicts_with = "name")]
    connect: Option<String>,
    /// Like --connect, for a server started with `serve --name` (a shm segment's name).
    #[arg(long)]
    name: Option<String>,
    /// Run the test a TOML template describes (see `--print-scenario`); outputs given here
    /// are added to the template's.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Print this command line as a scenario template, and exit.
    #[arg(long)]
    print_scenario: bool,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[arg(long, short)]
    transport: String,
    /// Where to listen: host:port, or a path for uds, uds-dgram and pipe (default: a fresh one, printed).
    #[arg(long, conflicts_with = "name")]
    listen: Option<String>,
    /// A name peers find this server by (shm: the segment /dev/shm/msgperf-NAME).
    #[arg(long)]
    name: Option<String>,
    /// The largest message a peer may send, for transports that size buffers up front.
    #[arg(long, default_value = "1M", value_parser = crate::units::parse_size)]
    max_message: usize,
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    opts: Vec<String>,
    /// Serve cases that busy-poll (`run --poll`).
    #[arg(long)]
    poll: bool,
    /// Pin the serving role to this CPU.
    #[arg(long)]
    pin: Option<usize>,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    timeout: Duration,
    /// Serve one peer, then exit.
    #[arg(long)]
    once: bool,
    /// Print the rendezvous as one machine-readable line (used when msgperf starts its own peer).
    #[arg(long, hide = true)]
    announce: bool,
    /// The msgperf that started this peer kills it if it stops running for --timeout, so
    /// blocking waits need no timer of their own (see `ChannelSpec::watched`).
    #[arg(long, hide = true, requires = "announce")]
    watched: bool,
    /// With --once: serve this many peers at once (a subscriber of several publishers).
    #[arg(long, default_value_t = 1)]
    peers: usize,
    /// Join these fan-outs instead of listening (a subscriber of publishers with a native
    /// fan-out; used when msgperf starts its own subscribers).
    #[arg(long, hide = true, requires = "once")]
    join: Vec<String>,
}

#[derive(Args, Debug)]
struct TransportsArgs {
    /// Print the table as Markdown (the README's table is this output).
    #[arg(long)]
    markdown: bool,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// A JSON file written by `--json`.
    file: PathBuf,
    #[command(flatten)]
    out: OutputArgs,
}

fn parse_opts(opts: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    opts.iter()
        .map(|o| {
            o.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "--opt `{o}` is not key=value: write e.g. --opt nodelay=false"
                    ))
                })
        })
        .collect()
}

/// Parses and runs; returns the exit code.
pub fn main_with_args(args: Vec<String>) -> i32 {
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
        Err(CliError::Usage(m)) => {
            eprintln!("msgperf: {m}");
            2
        }
        Err(CliError::Run(m)) => {
            eprintln!("msgperf: {m}");
            1
        }
    }
}

fn dispatch(cli: Cli, args: &[String]) -> Exit {
    transport::remove_stale_dirs();
    match cli.command {
        None => survey(
            SurveyArgs {
                duration: Duration::from_millis(200),
                warmup: Duration::from_millis(50),
                out: OutputArgs::default(),
            },
            args,
        ),
        Some(Command::Survey(a)) => survey(a, args),
        Some(Command::Run(a)) => run(*a, args),
        Some(Command::Floor(a)) => floor_cmd::floor(a),
        Some(Command::Serve(a)) => serve(a),
        Some(Command::Transports(a)) => {
            print_out(&transports_table(a.markdown));
            Ok(0)
        }
        Some(Command::Report(a)) => report_file(a),
        Some(Command::Publish) => {
            exec::pubsub::publisher_main().map_err(CliError::Run)?;
            Ok(0)
        }
    }
}

/// Prints to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn print_out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|_| o.flush());
}

fn install_ctrlc() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            // A second Ctrl-C leaves at once; child processes die with us.
            if exec::STOP.swap(true, std::sync::atomic::Ordering::SeqCst) {
                std::process::exit(130);
            }
        });
    });
}

fn survey(a: SurveyArgs, args: &[String]) -> Exit {
    let cases = plan::survey(a.duration, a.warmup).map_err(CliError::Usage)?;
    execute(cases, &a.out, None, true, args)
}

fn run(mut a: RunArgs, args: &[String]) -> Exit {
    if a.name.is_some() {
        a.connect = a.name.take();
    }
    let (req, floor) = match &a.scenario {
        Some(path) => {
            if a.workload.is_some() || !a.transport.is_empty() {
                return Err(CliError::Usage("give the workload and transports in the scenario file or on the command line, not both".into()));
            }
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::Usage(format!("cannot read scenario {}: {e}", path.display()))
            })?;
            let s = Scenario::parse(&text, &path.display().to_string()).map_err(CliError::Usage)?;
            let req = s
                .request()
                .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
            a.out.json = a.out.json.take().or(s.output.json.map(PathBuf::from));
            a.out.csv = a.out.csv.take().or(s.output.csv.map(PathBuf::from));
            a.out.details |= s.output.details;
            (req, s.floor)
        }
        None => (request_of(&a)?, !a.no_floor),
    };
    let floor = floor && req.connect.is_none();
    let cases = plan::cases(&req).map_err(CliError::Usage)?;
    if a.print_scenario {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let out = Output {
            json: path(&a.out.json),
            csv: path(&a.out.csv),
            details: a.out.details,
        };
        print_out(&Scenario::from_request(&req, &a.size, &a.rate, floor, out).to_toml());
        return Ok(0);
    }
    execute(cases, &a.out, req.connect.clone(), floor, args)
}

fn request_of(a: &RunArgs) -> Result<RunRequest, CliError> {
    Ok(RunRequest {
        workload: a.workload.clone().ok_or_else(|| CliError::Usage("no workload given: write e.g. `msgperf run pingpong -t uds`, or give --scenario FILE".into()))?,
        transports: a.transport.clone(),
        sizes: parse_size_list(&a.size).map_err(|e| CliError::Usage(format!("--size: {e}")))?,
        count: a.count,
        duration: a.duration,
        warmup: a.warmup,
        poll: a.poll,
        confirm: a.confirm,
        checksum: a.checksum,
        rates_hz: crate::units::parse_rate_list(&a.rate).map_err(|e| CliError::Usage(format!("--rate: {e}")))?,
        timeout: a.timeout,
        placement: a.placement.map(|p| match p {
            PlacementArg::SameCpu => Placement::SameCpu,
            PlacementArg::CrossCpu => Placement::CrossCpu,
            PlacementArg::Any => Placement::Any,
        }),
        pin: a.pin.clone(),
        threads: a.threads,
        options: parse_opts(&a.opts)?,
        connect: a.connect.clone(),
        pubs: a.pubs,
        subs: a.subs,
        delivery: a.delivery.map(|d| match d {
            DeliveryArg::Reliable => plan::Delivery::Reliable,
            DeliveryArg::BestEffort => plan::Delivery::BestEffort,
        }),
        history: match a.history {
            HistoryArg::Fifo => plan::History::Fifo,
            HistoryArg::Latest => plan::History::Latest,
        },
        slow_subscriber: a.slow_subscriber,
    })
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

fn label(c: &CaseConfig) -> String {
    let cpu = |c: Option<usize>| c.map_or("-".to_string(), |c| c.to_string());
    format!(
        "{} {} {} B, cpus {}/{}",
        c.transport,
        c.workload,
        format_size(c.size_bytes),
        cpu(c.cpus.0),
        cpu(c.cpus.1)
    )
}

/// Writes a file whole or not at all (write beside, then rename).
fn write_atomically(path: &PathBuf, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn write_outputs(run: &RunResult, out: &OutputArgs) -> Result<(), String> {
    if let Some(p) = &out.json {
        write_atomically(p, &report::to_json(run)?)?;
    }
    if let Some(p) = &out.csv {
        write_atomically(p, &report::to_csv(run)?)?;
    }
    Ok(())
}

/// Runs cases one after another, writing results after each, and prints the table.
fn execute(
    cases: Vec<CaseConfig>,
    out: &OutputArgs,
    connect: Option<String>,
    floor: bool,
    args: &[String],
) -> Exit {
    install_ctrlc();
    let expected: Duration = cases
        .iter()
        .map(|c| {
            let floored = floor && c.rate_hz.is_none();
            (c.warmup + c.duration.unwrap_or(Duration::from_secs(1))) * if floored { 2 } else { 1 }
        })
        .sum();
    let mut run = RunResult {
        schema_version: SCHEMA_VERSION,
        msgperf_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: args.to_vec(),
        environment: environment::probe(),
        cases: Vec::new(),
        interrupted: false,
    };
    let progress = Progress::new(cases.len(), expected);
    let mut runner = Runner::new(connect, floor);
    // A rate sweep stops offering more load to a case that could not hold a lower one.
    let mut saturated: Vec<(CaseConfig, f64)> = Vec::new();
    for case in &cases {
        if exec::stop_requested() {
            break;
        }
        if saturated
            .iter()
            .any(|(c, hz)| same_but_rate(c, case) && case.rate_hz.is_some_and(|r| r > *hz))
        {
            progress.done_one();
            continue;
        }
        progress.case(&label(case));
        let result = runner.run_case(case);
        if let (Some(hz), Some(err)) = (
            case.rate_hz,
            report::summary::summarize(&result).rate_error_pct,
        ) {
            if err < -5.0 {
                saturated.push((case.clone(), hz));
            }
        }
        run.cases.push(result);
        write_outputs(&run, out).map_err(CliError::Run)?;
        progress.done_one();
    }
    run.interrupted = exec::stop_requested();
    write_outputs(&run, out).map_err(CliError::Run)?;
    progress.finish();
    print_out(&report::render_terminal(
        &run,
        out.details || cases.len() <= 8,
    ));
    if run.interrupted {
        return Ok(130);
    }
    let failed = run.cases.iter().filter(|c| c.error.is_some()).count();
    if failed > 0 {
        return Err(CliError::Run(format!("{failed} of {} cases failed (see the errors above); the rest were measured and written", run.cases.len())));
    }
    Ok(0)
}

fn serve(a: ServeArgs) -> Exit {
    // A peer that msgperf started sits in its own process group, out of the terminal's Ctrl-C;
    // without the handler's thread it stays single-threaded, and the kernel then skips the
    // shared-descriptor-table reference counting on each of its reads and writes (as for the
    // floor's forked peer).
    if !a.announce {
        install_ctrlc();
    }
    let t = transport::find(&a.transport).map_err(CliError::Usage)?;
    let options = parse_opts(&a.opts)?;
    transport::validate_options(t, &options).map_err(CliError::Usage)?;
    let o = ServeOptions {
        transport: a.transport.clone(),
        spec: transport::ChannelSpec {
            options,
            timeout: a.timeout,
            poll: a.poll,
            max_message: a.max_message.max(workload::message::CONTROL_MAX),
            listen_at: a.listen.clone().or(a.name.clone()),
            watched: a.watched,
        },
        pin: a.pin,
        once: a.once,
        announce: a.announce,
        peers: a.peers.max(1),
        join: a.join.clone(),
    };
    let announce = a.announce;
    exec::serve(&o, |r| {
        if announce {
            return;
        }
        match r {
            Ok((case, role)) => print_out(&format!(
                "served {} {} B {}: {} messages, {}\n",
                case.workload,
                format_size(case.size_bytes),
                if case.wait == Wait::Poll {
                    "(poll)"
                } else {
                    ""
                },
                role.counters.messages_received,
                format_duration(Duration::from_nanos(
                    role.measured_ns / 1_000_000 * 1_000_000
                )),
            )),
            Err(e) => eprintln!("msgperf serve: {e}"),
        }
    })
    .map_err(CliError::Run)?;
    Ok(0)
}

fn transports_table(markdown: bool) -> String {
    let mut rows = vec![vec![
        "transport".to_string(),
        "what it is".into(),
        "reliable".into(),
        "max message [B]".into(),
        "processes".into(),
        "fan-out".into(),
        "options".into(),
    ]];
    for t in transport::REGISTRY {
        let c = t.capabilities();
        let opts: Vec<String> = t
            .options()
            .iter()
            .map(|o| format!("{}={} ({})", o.key, o.default, o.about))
            .collect();
        rows.push(vec![
            t.name().into(),
            t.about().into(),
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
            if opts.is_empty() {
                "-".into()
            } else {
                opts.join("; ")
            },
        ]);
    }
    if markdown {
        let mut s = String::new();
        for (i, r) in rows.iter().enumerate() {
            s.push_str(&format!("| {} |\n", r.join(" | ")));
            if i == 0 {
                s.push_str(&format!("|{}\n", " --- |".repeat(r.len())));
            }
        }
        s
    } else {
        let mut t = comfy_table::Table::new();
        t.load_preset(crate::report::table::STYLE);
        t.set_header(rows[0].clone());
        for r in &rows[1..] {
            t.add_row(r.clone());
        }
        let w: Vec<String> = workload::REGISTRY
            .iter()
            .map(|w| format!("  {:<10} {}", w.name(), w.about()))
            .collect();
        format!("{t}\n\nworkloads:\n{}\n", w.join("\n"))
    }
}

fn report_file(a: ReportArgs) -> Exit {
    let bytes = std::fs::read(&a.file)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", a.file.display())))?;
    let run: RunResult = serde_json::from_slice(&bytes).map_err(|e| {
        CliError::Usage(format!(
            "{} is not a msgperf JSON result ({e}): write one with `msgperf run ... --json FILE`",
            a.file.display()
        ))
    })?;
    write_outputs(&run, &a.out).map_err(CliError::Run)?;
    print_out(&report::render_terminal(&run, a.out.details));
    Ok(0)
}
