//! `msgperf floor`: each transport's plain loop, and the hardware's, with no harness.

use super::{print_out, CliError, Exit};
use crate::exec;
use crate::plan;
use crate::report::progress::Progress;
use crate::result::{FloorKind, Placement};
use crate::transport::{self, FloorFigure, FloorRoles};
use crate::units::{format_size, parse_duration, parse_size_list};
use clap::Args;
use comfy_table::Table;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct FloorArgs {
    /// Transports, comma-separated (default: all that have a floor).
    #[arg(long, short, value_delimiter = ',')]
    transport: Vec<String>,
    /// Round-trip message sizes.
    #[arg(long, default_value = "64")]
    size: String,
    /// Stream write sizes.
    #[arg(long, default_value = "64k")]
    stream_size: String,
    /// Measured time of each loop.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    duration: Duration,
    /// Peers as threads instead of forked processes.
    #[arg(long)]
    threads: bool,
    /// Placements to measure in (default: same-cpu and cross-cpu).
    #[arg(long, value_delimiter = ',')]
    placement: Vec<String>,
}

pub fn floor(a: FloorArgs) -> Exit {
    let sizes = parse_size_list(&a.size).map_err(|e| CliError::Usage(format!("--size: {e}")))?;
    let stream_sizes = parse_size_list(&a.stream_size)
        .map_err(|e| CliError::Usage(format!("--stream-size: {e}")))?;
    let transports: Vec<&dyn transport::Transport> = if a.transport.is_empty() {
        transport::REGISTRY.to_vec()
    } else {
        a.transport
            .iter()
            .map(|t| transport::find(t))
            .collect::<Result<_, _>>()?
    };
    let placements: Vec<Placement> = if a.placement.is_empty() {
        vec![Placement::SameCpu, Placement::CrossCpu]
    } else {
        a.placement
            .iter()
            .map(|p| match p.as_str() {
                "same-cpu" => Ok(Placement::SameCpu),
                "cross-cpu" => Ok(Placement::CrossCpu),
                "any" => Ok(Placement::Any),
                _ => Err(CliError::Usage(format!(
                    "--placement {p}: use same-cpu, cross-cpu or any"
                ))),
            })
            .collect::<Result<_, _>>()?
    };
    let mut t = Table::new();
    t.load_preset(crate::report::table::STYLE);
    t.set_header(vec![
        "floor",
        "loop",
        "size",
        "cpus",
        "peer",
        "samples",
        "min [us]",
        "p50 [us]",
        "mean [us]",
        "msgs/s",
        "MiB/s",
    ]);
    let mut row = |name: &str,
                   kind: &str,
                   size: usize,
                   cpus: (Option<usize>, Option<usize>),
                   peer: &str,
                   f: &FloorFigure| {
        let us =
            |ns: Option<u64>| ns.map_or("-".to_string(), |ns| format!("{:.2}", ns as f64 / 1e3));
        let cpus = match cpus {
            (Some(a), Some(b)) => format!("{a}/{b}"),
            _ => "-".into(),
        };
        t.add_row(vec![
            name.to_string(),
            kind.to_string(),
            format_size(size),
            cpus,
            peer.to_string(),
            f.samples.to_string(),
            us(f.rtt_min_ns),
            us(f.rtt_p50_ns),
            us(f.rtt_mean_ns),
            f.msgs_per_s.map_or("-".into(), |m| format!("{m:.0}")),
            f.bytes_per_s
                .map_or("-".into(), |b| format!("{:.1}", b / (1024.0 * 1024.0))),
        ]);
    };
    // Every loop to measure, first, so that progress can show the whole plan.
    enum Loop<'a> {
        Spin,
        Memcpy(usize),
        Plain(&'a dyn transport::Transport, FloorKind, usize, bool),
    }
    let mut plan = Vec::new();
    for &p in &placements {
        let Ok((_, cpus)) = plan::resolve_placement(Some(p), None, false) else {
            continue;
        };
        plan.push((cpus, Loop::Spin));
        plan.extend(stream_sizes.iter().map(|&s| (cpus, Loop::Memcpy(s))));
        for tr in &transports {
            if tr.floor().is_none() {
                continue;
            }
            let caps = tr.capabilities(&Default::default());
            let threads = a.threads || !caps.cross_process;
            for (kind, list) in [
                (FloorKind::RoundTrip, &sizes),
                (FloorKind::Stream, &stream_sizes),
            ] {
                // A size the transport cannot carry is measured at its largest (udp: 65507 B).
                for s in list.iter().map(|&s| s.min(caps.max_message_bytes)) {
                    plan.push((cpus, Loop::Plain(*tr, kind, s, threads)));
                }
            }
        }
    }
    // A transport whose figures take longer to settle (a JVM broker) says how long.
    let warmup = |l: &Loop| {
        let w = Duration::from_millis(100);
        match l {
            Loop::Plain(tr, ..) => w.max(tr.capabilities(&Default::default()).warmup),
            _ => w,
        }
    };
    let progress = Progress::new(
        "floors",
        plan.iter().map(|(_, l)| warmup(l) + a.duration).collect(),
    );
    for (i, (cpus, l)) in plan.iter().enumerate() {
        if exec::stop_requested() {
            break;
        }
        let cpus = *cpus;
        let roles = FloorRoles {
            cpus,
            warmup: warmup(l),
            duration: a.duration,
            timeout: crate::plan::DEFAULT_TIMEOUT,
            options: Default::default(),
            between: None,
        };
        match l {
            Loop::Spin => {
                progress.step(i, "the hardware: a cache line between two threads");
                let how = if cpus.0.is_some() && cpus.0 == cpus.1 {
                    "spin-yield ping-pong"
                } else {
                    "cache-line ping-pong"
                };
                row(
                    "hardware",
                    how,
                    8,
                    cpus,
                    "thread",
                    &transport::spin_pingpong(&roles),
                );
            }
            Loop::Memcpy(s) => {
                progress.step(i, &format!("the hardware: memcpy of {}", format_size(*s)));
                row(
                    "hardware",
                    "memcpy",
                    *s,
                    (cpus.0, cpus.0),
                    "-",
                    &transport::memcpy_bandwidth(*s, &roles),
                );
            }
            Loop::Plain(tr, kind, s, threads) => {
                let name = match kind {
                    FloorKind::RoundTrip => "ping-pong",
                    FloorKind::Stream => "stream",
                };
                progress.step(i, &format!("{} {name} {}", tr.name(), format_size(*s)));
                let peer = if *threads { "thread" } else { "process" };
                match exec::measure_floor(*tr, *kind, *s, &roles, *threads, [None, None]) {
                    Ok((fig, _)) => row(tr.name(), name, *s, cpus, peer, &fig),
                    Err(_) if exec::stop_requested() => break,
                    Err(e) => {
                        progress.finish();
                        return Err(CliError::Run(format!("floor of {} failed: {e}", tr.name())));
                    }
                }
            }
        }
    }
    progress.finish();
    print_out(&format!("{t}\nThe plainest loop each transport allows, with no framing and no histogram: raw read/write on the descriptors; for shm its own rings with the wait strategy of --opt wait, a copy in and out and no header, timestamp or check; memcpy is one CPU copying, which a stream between two CPUs cannot reach; for inproc a pool of buffers, a copy in and out. `run` divides by the same loop at the same size and placement.\n"))?;
    Ok(if exec::stop_requested() { 130 } else { 0 })
}
