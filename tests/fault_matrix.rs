//! The fault matrix: for every transport whose roles run in processes, every workload that
//! moves messages between roles, and every fault (a peer killed or stopped; where a broker
//! runs, the broker killed or stopped; where the transport crosses hosts, the link to a peer on
//! a namespace host taken down), one named test (`tcp::pubsub::peer_stopped`),
//! generated from the registry as conformance is. A fault that a transport's capabilities
//! rule out is ignored, and why is printed. So is a known gap, listed where its transport
//! lives (`src/transport/NAME/known_faults.txt`: a test's name and what goes wrong), until it is
//! fixed; the list is printed with every run, and `--include-ignored` runs it.
//!
//! Each run has `--timeout 3s`, and each test asserts: exit 1 within the timeout and a margin
//! after the fault; one line on stderr naming the faulted role (or the broker); the case's
//! error in the JSON naming it too; the survivors' counts exact (every message a reliable
//! transport took reached the surviving subscriber; a round trip lost at most in flight); no
//! role or broker process outliving the run; no directory or shared-memory file left.

mod support;

use libtest_mimic::{Arguments, Failed, Trial};
use msgperf::result::{CaseResult, RoleResult, RunResult};
use msgperf::transport::{Capabilities, REGISTRY};
use std::time::{Duration, Instant};
use support::*;

/// The timeout every run of the matrix has.
const TIMEOUT: Duration = Duration::from_secs(3);

/// How far past the timeout a run may end after its fault: noticing a fault takes up to the
/// timeout (a hung peer is one that said nothing for that long); every other role then has the
/// timeout and a second to stop, past which the runner ends it (a write begun toward a peer
/// out of reach is finished within its timeout, as tcp's is when a link goes down: 7.4 s in
/// all on an idle machine); three seconds more for a machine whose CPUs are all busy (a soak
/// saw 8.2-9.0 s where an idle machine took 6.3-6.7). A third wait of the timeout, or a hang,
/// goes past it.
const MARGIN: Duration = Duration::from_secs(3 + 1 + 3);

/// A workload in the matrix: its command line beyond the transport, the role faulted, and the
/// checks on what the survivors measured.
struct Workload {
    name: &'static str,
    args: &'static [&'static str],
    /// The role that is killed or stopped (a peer that does not drive the case).
    peer: &'static str,
    /// Where the peer goes for a link fault: `--place` on namespace host `b`.
    far: &'static str,
    survivors: fn(&CaseResult, &Capabilities, Fault) -> Result<(), Failed>,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "pingpong",
        args: &[],
        peer: "responder",
        far: "responder=b",
        survivors: round_trips_kept,
    },
    Workload {
        name: "stream",
        args: &["--rate", "2khz"],
        peer: "reader",
        far: "reader=b",
        survivors: sends_kept,
    },
    Workload {
        name: "pubsub",
        args: &["--subs", "2", "--rate", "1khz"],
        peer: "subscriber 2",
        far: "subscriber=local,b",
        survivors: survivor_got_every_message,
    },
];

#[derive(Clone, Copy)]
enum Fault {
    PeerKilled,
    PeerStopped,
    BrokerKilled,
    BrokerStopped,
    LinkDown,
}

impl Fault {
    const ALL: [Fault; 5] = [
        Fault::PeerKilled,
        Fault::PeerStopped,
        Fault::BrokerKilled,
        Fault::BrokerStopped,
        Fault::LinkDown,
    ];

    fn name(self) -> &'static str {
        match self {
            Fault::PeerKilled => "peer_killed",
            Fault::PeerStopped => "peer_stopped",
            Fault::BrokerKilled => "broker_killed",
            Fault::BrokerStopped => "broker_stopped",
            Fault::LinkDown => "link_down",
        }
    }

    /// The signal a fault on a process sends it.
    fn signal(self) -> i32 {
        match self {
            Fault::PeerKilled | Fault::BrokerKilled => libc::SIGKILL,
            _ => libc::SIGSTOP,
        }
    }

    fn on_broker(self) -> bool {
        matches!(self, Fault::BrokerKilled | Fault::BrokerStopped)
    }

    /// Why a transport with these capabilities cannot have this fault, if it cannot.
    fn ruled_out(self, caps: &Capabilities, namespaces: bool) -> Option<&'static str> {
        if !caps.cross_process {
            return Some("its roles are threads of one process (capability cross_process)");
        }
        if self.on_broker() && !caps.needs_server {
            return Some("it runs no broker (capability needs_server)");
        }
        if matches!(self, Fault::LinkDown) {
            if !caps.cross_host {
                return Some("its ends cannot be on different hosts (capability cross_host)");
            }
            if !namespaces {
                return Some("this machine cannot make network namespaces (root and iproute2)");
            }
        }
        None
    }
}

fn main() {
    // A transport whose set-up starts a process of msgperf's own (a media driver) starts this
    // binary's msgperf, not the test.
    std::env::set_var("MSGPERF_EXE", env!("CARGO_BIN_EXE_msgperf"));
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let namespaces = namespaces_work();
    let known = known_gaps();
    for t in REGISTRY.iter().copied() {
        let caps = t.capabilities(&msgperf::transport::effective_options(
            t,
            &Default::default(),
        ));
        for w in WORKLOADS {
            for fault in Fault::ALL {
                let name = format!("{}::{}::{}", t.name(), w.name, fault.name());
                let why = fault
                    .ruled_out(&caps, namespaces)
                    .map(str::to_string)
                    .or_else(|| known.get(&name).map(|gap| format!("a known gap: {gap}")));
                if let Some(why) = &why {
                    eprintln!("ignored {name}: {why}");
                }
                let transport = t.name();
                let label = name.clone();
                trials.push(
                    Trial::test(name, move || {
                        // A trial that starts a broker (a JVM, an Erlang VM) loads both CPUs
                        // for seconds: it runs alone, so that no other trial's time bound is
                        // taken beside it. Trials without one share the machine.
                        let _alone = caps
                            .needs_server
                            .then(|| TRIALS.write().unwrap_or_else(|p| p.into_inner()));
                        let _shared = (!caps.needs_server)
                            .then(|| TRIALS.read().unwrap_or_else(|p| p.into_inner()));
                        // A peer that is woken while it still gets ready (an adapter that
                        // polls its connection with short sleeps, or any process a loaded
                        // machine preempts while it starts) can be faulted before the case
                        // measured anything: such a trial is tried again, twice at most,
                        // waiting longer before the fault each time.
                        let mut tries = 0;
                        loop {
                            let later = Duration::from_millis([0, 1000, 3000][tries]);
                            match try_fault(transport, w, fault, &caps, later) {
                                Err(e)
                                    if tries < 2
                                        && e.message().is_some_and(|m| m.contains(TOO_EARLY)) =>
                                {
                                    eprintln!("{label}: tried again, {}", e.message().unwrap());
                                    tries += 1;
                                }
                                r => break r,
                            }
                        }
                    })
                    .with_ignored_flag(why.is_some()),
                );
            }
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

/// What a check says when the fault came before the case measured anything.
const TOO_EARLY: &str = "faulted before the case measured anything";

/// The machine, as the trials take turns on it: one with a broker alone, the others together.
static TRIALS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The known gaps every transport's folder lists: test name -> what goes wrong.
fn known_gaps() -> std::collections::BTreeMap<String, String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/transport");
    let mut gaps = std::collections::BTreeMap::new();
    for dir in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(dir.path().join("known_faults.txt")).unwrap_or_default();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, why) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            gaps.insert(name.to_string(), why.trim().to_string());
        }
    }
    gaps
}

fn fail(what: impl std::fmt::Display) -> Failed {
    Failed::from(what.to_string())
}

/// Runs `w` on `transport` for a minute, faults it once it measures, and checks the end.
fn try_fault(
    transport: &str,
    w: &Workload,
    fault: Fault,
    caps: &Capabilities,
    later: Duration,
) -> Result<(), Failed> {
    let what = format!("{transport} {} {}", w.name, fault.name());
    let dir = temp_dir();
    let json = dir.path().join("r.json");
    let mut args = vec![
        "run",
        w.name,
        "-t",
        transport,
        "--duration",
        "60s",
        "--warmup",
        "0s",
        "--timeout",
        "3s",
        "--no-floor",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(w.args);
    if matches!(fault, Fault::LinkDown) {
        args.extend_from_slice(&["--host", "b=netns", "--place", w.far]);
    }
    let mut run = Server::start(&args);
    let pid = run.id();
    let (roles, start, named) = if matches!(fault, Fault::LinkDown) {
        // Down once messages cross it, not while the roles still get ready.
        let link = format!("mp{pid}h0");
        wait_until_crossed(run.process(), &link, 1000, &what)?;
        let roles = role_processes(pid);
        let start = Instant::now();
        let down = std::process::Command::new("ip")
            .args(["link", "set", &link, "down"])
            .status();
        if !down.is_ok_and(|s| s.success()) {
            return Err(fail(format!("{what}: could not take {link} down")));
        }
        (roles, start, None)
    } else {
        let peer = wait_for_role(run.process(), w.peer);
        // Faulted once the case runs, not while its roles still get ready: the peer reads (it
        // is woken, or spins).
        if let Err(why) = wait_until_busy(peer, 200, 50) {
            signal(pid, libc::SIGTERM);
            let out = wait_output(run.take(), Duration::from_secs(60));
            return Err(fail(format!(
                "{what}: {why}; the run said: {} {}",
                text(&out.stderr).trim(),
                text(&out.stdout).trim()
            )));
        }
        std::thread::sleep(later);
        let mut roles = role_processes(pid);
        let (target, named) = if fault.on_broker() {
            (broker_of(run.process(), &roles), "broker")
        } else {
            (peer, w.peer)
        };
        roles.push(target);
        let start = Instant::now();
        signal(target, fault.signal());
        (roles, start, Some(named))
    };
    let out = wait_output(run.take(), Duration::from_secs(60));
    let took = start.elapsed();
    let err = text(&out.stderr);
    if out.status.code() != Some(1) {
        return Err(fail(format!("{what}: exit {:?}: {err}", out.status.code())));
    }
    if took > TIMEOUT + MARGIN {
        return Err(fail(format!(
            "{what}: ended {took:?} after the fault, past --timeout 3s and {MARGIN:?}: {err}"
        )));
    }
    // A link that went down is noticed by a role that waits for the other side: it names
    // itself.
    let names = |text: &str| match named {
        Some(n) => text.contains(n),
        None => [
            w.peer,
            "initiator",
            "responder",
            "writer",
            "reader",
            "publisher",
            "subscriber",
        ]
        .iter()
        .any(|r| text.contains(r)),
    };
    if err.trim().lines().count() != 1 || !names(&err) {
        return Err(fail(format!("{what}: not one line naming the role: {err}")));
    }
    let result: RunResult = serde_json::from_slice(
        &std::fs::read(&json).map_err(|e| fail(format!("{what}: no JSON ({e}): {err}")))?,
    )
    .map_err(|e| fail(format!("{what}: {e}")))?;
    let case = result
        .cases
        .first()
        .ok_or_else(|| fail(format!("{what}: no case in the JSON")))?;
    if !case.error.as_deref().is_some_and(names) {
        return Err(fail(format!(
            "{what}: the case's error does not name the role: {:?}",
            case.error
        )));
    }
    (w.survivors)(case, caps, fault)
        .map_err(|e| fail(format!("{what}: {}", e.message().unwrap_or(""))))?;
    for p in &roles {
        if alive(*p) {
            return Err(fail(format!("{what}: process {p} outlived the run")));
        }
    }
    let left = leftovers_of(pid);
    if !left.is_empty() {
        return Err(fail(format!("{what}: left in the temp dir: {left:?}")));
    }
    let shm_left = shm_files_of(pid, &roles);
    if !shm_left.is_empty() {
        return Err(fail(format!("{what}: left in /dev/shm: {shm_left:?}")));
    }
    Ok(())
}

/// The processes msgperf `pid` (any of its threads) started.
fn started_by(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether process `pid` is one of msgperf's roles.
fn is_role(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split('\0')
        .any(|word| word == "role")
}

fn role_processes(pid: u32) -> Vec<u32> {
    started_by(pid)
        .into_iter()
        .filter(|p| is_role(*p))
        .collect()
}

/// The broker the run started: a process msgperf started that is none of its roles, the
/// newest if there are several (a helper daemon starts before its broker).
fn broker_of(run: &mut std::process::Child, roles: &[u32]) -> u32 {
    wait_for(run, "its broker", |pid| {
        let mut found: Vec<u32> = started_by(pid)
            .into_iter()
            .filter(|c| !roles.contains(c) && !is_role(*c))
            .collect();
        found.sort_by_key(|c| started_at(*c));
        found.last().copied()
    })
}

/// Waits until `packets` more have crossed network link `link` (made by `run`), either way,
/// than when it appeared: the case runs across it.
fn wait_until_crossed(
    run: &mut std::process::Child,
    link: &str,
    packets: u64,
    what: &str,
) -> Result<(), Failed> {
    // Either way: a one-way stream's packets only go out to the far host.
    let count = |way: &str| -> Option<u64> {
        let path = format!("/sys/class/net/{link}/statistics/{way}_packets");
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    };
    let read = || Some(count("rx")? + count("tx")?);
    wait_for(run, &format!("its link {link}"), |_| {
        read().map(|n| n as u32)
    });
    let first = read().unwrap_or(0);
    let end = Instant::now() + Duration::from_secs(60);
    while read().unwrap_or(0) < first + packets {
        if Instant::now() > end {
            return Err(fail(format!("{what}: nothing crossed {link} for 60 s")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// When process `pid` started, in clock ticks since boot.
fn started_at(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after
        .split_whitespace()
        .nth(19)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The files in /dev/shm named after msgperf `pid` or one of its roles (`msgperf-PID-...`):
/// the other trials that run beside this one have their own.
fn shm_files_of(pid: u32, roles: &[u32]) -> Vec<String> {
    let ours: Vec<String> = std::iter::once(pid)
        .chain(roles.iter().copied())
        .map(|p| format!("msgperf-{p}-"))
        .collect();
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| ours.iter().any(|o| n.starts_with(o)))
                .collect()
        })
        .unwrap_or_default()
}

fn role<'a>(c: &'a CaseResult, name: &str) -> Result<&'a RoleResult, Failed> {
    c.roles
        .iter()
        .find(|r| r.role.to_string() == name)
        .ok_or_else(|| {
            let have: Vec<String> = c.roles.iter().map(|r| r.role.to_string()).collect();
            fail(format!("no role `{name}` in {have:?}"))
        })
}

/// Ping-pong: the initiator's round trips until the fault are kept; a reliable transport lost
/// at most the one in flight.
fn round_trips_kept(c: &CaseResult, caps: &Capabilities, _: Fault) -> Result<(), Failed> {
    let k = &role(c, "initiator")?.counters;
    let (sent, received) = (k.messages_sent, k.messages_received);
    let in_flight = sent.saturating_sub(received);
    if received == 0 && sent <= 1 {
        return Err(fail(format!("{TOO_EARLY}: the initiator sent {sent}")));
    }
    if received == 0 || received > sent || (caps.reliable && in_flight > 1) {
        return Err(fail(format!(
            "the initiator sent {sent} and got {received} back"
        )));
    }
    Ok(())
}

/// A stream: the writer's count until the fault is kept.
fn sends_kept(c: &CaseResult, _: &Capabilities, _: Fault) -> Result<(), Failed> {
    let sent = role(c, "writer")?.counters.messages_sent;
    if sent == 0 {
        return Err(fail(format!("{TOO_EARLY}: the writer sent none")));
    }
    Ok(())
}

/// Pubsub: where a peer failed, the surviving subscriber got every message the publisher sent,
/// and at most the one it was sending (a best-effort transport counts the rest as lost), and
/// ended cleanly; where the broker or the link failed, what was in it is gone, and the survivor
/// got no more than was sent and that one.
fn survivor_got_every_message(c: &CaseResult, caps: &Capabilities, f: Fault) -> Result<(), Failed> {
    let sent = role(c, "publisher 1")?.counters.messages_sent;
    let survivor = role(c, "subscriber 1")?;
    let k = &survivor.counters;
    // A message the publisher was sending when the peer failed (or when it was told to stop,
    // its broker's answer not yet read) reached the survivor: its send failed, and it is not
    // counted as sent.
    let in_flight = k.messages_received.saturating_sub(sent);
    let accounted = match f {
        Fault::PeerKilled | Fault::PeerStopped if caps.reliable => {
            k.messages_received >= sent && in_flight <= 1 && k.lost == 0 && survivor.error.is_none()
        }
        Fault::PeerKilled | Fault::PeerStopped => {
            (sent..=sent + 1).contains(&(k.messages_received + k.lost))
                && in_flight <= 1
                && survivor.error.is_none()
        }
        _ => k.messages_received > 0 && k.messages_received + k.lost <= sent + 1 && in_flight <= 1,
    };
    if sent == 0 {
        return Err(fail(format!("{TOO_EARLY}: the publisher sent none")));
    }
    if !accounted {
        return Err(fail(format!(
            "the publisher sent {sent}; the survivor got {} and lost {} ({:?})",
            k.messages_received, k.lost, survivor.error
        )));
    }
    Ok(())
}
