//! The transport contract (see `src/transport/mod.rs`), checked against every registry entry:
//! one named test per transport and check (`uds::times_out_instead_of_waiting_forever`),
//! generated, with no per-transport code. A check a transport's capabilities rule out is
//! ignored, and why is printed; none is skipped by name.

use libtest_mimic::{Arguments, Failed, Trial};
use msgperf::transport::{
    Capabilities, ChannelSpec, Endpoint, Place, Rendezvous, Setup, SetupPlan, Side, Transport,
    TransportError, REGISTRY,
};
use std::time::{Duration, Instant};

type Check = fn(&'static dyn Transport) -> Result<(), Failed>;
/// Why a transport's capabilities rule a check out, if they do.
type RuledOut = fn(&Capabilities) -> Option<&'static str>;
/// A case's set-up, its opened ends, and where they met.
type Opened = (Setup, Vec<Box<dyn Endpoint>>, Rendezvous);
/// A channel's set-up and its connecting and accepting ends.
type Pair = (Setup, Box<dyn Endpoint>, Box<dyn Endpoint>);

/// Every check, and when a transport's capabilities rule it out.
const CHECKS: &[(&str, Check, RuledOut)] = &[
    (
        "delivers_whole_messages_both_ways_in_order",
        delivers_in_order,
        always,
    ),
    ("reads_in_place_what_recv_would_copy", reads_in_place, |c| {
        (!c.reads_in_place && !c.zero_copy).then_some(
            "it hands a reader no buffer of its own (capability reads_in_place): each message is copied out",
        )
    }),
    ("times_out_instead_of_waiting_forever", times_out, always),
    (
        "try_recv_returns_at_once_when_polling",
        try_recv_returns,
        always,
    ),
    ("reports_a_closed_peer", reports_closed_peer, |c| {
        (!c.notices_closed_peer).then_some(
            "its readers are not told that the peer closed (capability notices_closed_peer)",
        )
    }),
    (
        "refuses_a_message_larger_than_the_buffer",
        refuses_too_large,
        always,
    ),
    ("leaves_nothing_it_met_on_behind", leaves_nothing, always),
    (
        "fails_within_the_timeout_when_no_peer_comes",
        nobody_there,
        always,
    ),
    (
        "keeps_several_channels_of_a_case_apart",
        channels_apart,
        always,
    ),
    (
        "a_topic_reaches_every_reader_once",
        topic_reaches_all,
        |c| {
            (c.native_fan_out == 0).then_some(
            "it has no native fan-out (capability native_fan_out): a publisher writes a copy per subscriber",
        )
        },
    ),
];

fn always(_: &Capabilities) -> Option<&'static str> {
    None
}

fn main() {
    // A transport whose set-up starts a process of msgperf's own (a media driver) starts this
    // binary's msgperf, not the test.
    std::env::set_var("MSGPERF_EXE", env!("CARGO_BIN_EXE_msgperf"));
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for t in REGISTRY.iter().copied() {
        let caps = t.capabilities(&effective(t));
        for (name, check, ruled_out) in CHECKS {
            let trial_name = format!("{}::{name}", t.name());
            let why = ruled_out(&caps);
            if let Some(why) = why {
                eprintln!("ignored {trial_name}: {why}");
            }
            let check = *check;
            trials.push(Trial::test(trial_name, move || check(t)).with_ignored_flag(why.is_some()));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

fn effective(t: &dyn Transport) -> msgperf::transport::Options {
    msgperf::transport::effective_options(t, &Default::default())
}

fn spec(t: &dyn Transport, timeout_ms: u64) -> ChannelSpec {
    ChannelSpec {
        options: effective(t),
        timeout: Duration::from_millis(timeout_ms),
        poll: false,
        max_message: 70_000,
        // Unwatched: every wait must be bounded by the transport itself.
        watched: false,
        exchange: msgperf::transport::Exchange::Both,
    }
}

fn fail(what: impl std::fmt::Display) -> Failed {
    Failed::from(what.to_string())
}

/// A message as the contract wants it: length in the first four bytes, then a pattern.
fn message(len: usize, tag: u8) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(tag))
        .collect();
    m[..4].copy_from_slice(&(len as u32).to_le_bytes());
    m
}

/// A case with `channels` channels set up, and its ends `sides` opened as two steps: all bound,
/// then all finished at once (each on a thread, as roles would).
fn open(
    t: &'static dyn Transport,
    s: &ChannelSpec,
    plan: SetupPlan,
    sides: &[Side],
) -> Result<(Setup, Vec<Box<dyn Endpoint>>), Failed> {
    open_at(t, s, plan, sides).map(|(setup, eps, _)| (setup, eps))
}

/// As [`open`], with the rendezvous the ends met at (bound addresses included).
fn open_at(
    t: &'static dyn Transport,
    s: &ChannelSpec,
    plan: SetupPlan,
    sides: &[Side],
) -> Result<Opened, Failed> {
    let setup = t.setup(&plan, s).map_err(|e| fail(format!("setup: {e}")))?;
    let mut rdv: Rendezvous = setup.rendezvous.clone();
    let mut openings = Vec::new();
    for side in sides {
        let o = t
            .open(&rdv, *side, s)
            .map_err(|e| fail(format!("open {side:?}: {e}")))?;
        if let Some(a) = o.address() {
            rdv.bound.insert(side.meeting(), a);
        }
        openings.push(o);
    }
    let finished: Vec<_> = openings
        .into_iter()
        .map(|o| {
            let (rdv, s) = (rdv.clone(), s.clone());
            std::thread::spawn(move || o.finish(&rdv, &s).map_err(|e| e.to_string()))
        })
        .collect();
    let mut eps = Vec::new();
    for (f, side) in finished.into_iter().zip(sides) {
        eps.push(
            f.join()
                .map_err(|_| fail("a finishing thread panicked"))?
                .map_err(|e| fail(format!("finish {side:?}: {e}")))?,
        );
    }
    Ok((setup, eps, rdv))
}

/// One channel's two ends: (connecting, accepting).
fn pair(t: &'static dyn Transport, s: &ChannelSpec) -> Result<Pair, Failed> {
    let plan = SetupPlan {
        channels: 1,
        ..SetupPlan::default()
    };
    let (setup, mut eps) = open(t, s, plan, &[Side::Connect(0), Side::Accept(0)])?;
    let a = eps.pop().expect("two ends");
    let c = eps.pop().expect("two ends");
    Ok((setup, c, a))
}

fn delivers_in_order(t: &'static dyn Transport) -> Result<(), Failed> {
    let s = spec(t, 5_000);
    let (_setup, mut c, mut a) = pair(t, &s)?;
    let max = t.capabilities(&s.options).max_message_bytes.min(65_536);
    let sizes = [4usize, 32, 1000, 4096, max];
    let mut buf = vec![0u8; 70_000];
    // Back to back, so that byte streams must split them correctly.
    let sender = std::thread::spawn(move || {
        for (i, &n) in sizes.iter().enumerate() {
            c.send(&message(n, i as u8)).map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(c)
    });
    for (i, &n) in sizes.iter().enumerate() {
        let got = a
            .recv(&mut buf)
            .map_err(|e| fail(format!("recv {n}: {e}")))?;
        if got != n || buf[..n] != message(n, i as u8)[..] {
            return Err(fail(format!("message {i}: {got} B, not the {n} B sent")));
        }
    }
    let mut c = sender
        .join()
        .map_err(|_| fail("sender panicked"))?
        .map_err(fail)?;
    a.send(&message(100, 9)).map_err(fail)?;
    match c.recv(&mut buf) {
        Ok(100) => Ok(()),
        other => Err(fail(format!("the reply: {other:?}"))),
    }
}

fn reads_in_place(t: &'static dyn Transport) -> Result<(), Failed> {
    let s = spec(t, 5_000);
    let (_setup, mut c, mut a) = pair(t, &s)?;
    let max = t.capabilities(&s.options).max_message_bytes.min(65_536);
    // Each size twice: read in place, then copied out, from the same queue.
    let sizes = [32usize, 32, 1000, 1000, max, max];
    let sender = std::thread::spawn(move || {
        for (i, &n) in sizes.iter().enumerate() {
            c.send(&message(n, i as u8)).map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(c)
    });
    let mut buf = vec![0u8; 70_000];
    for (i, &n) in sizes.iter().enumerate() {
        let want = message(n, i as u8);
        if i % 2 == 0 {
            let mut seen = Vec::new();
            let got = a
                .recv_with(&mut |m| seen = m.to_vec())
                .map_err(|e| fail(format!("recv_with {n}: {e}")))?;
            if got != n || seen != want {
                return Err(fail(format!(
                    "message {i} in place: {got} B ({} handed over), not the {n} B sent",
                    seen.len()
                )));
            }
        } else {
            let got = a
                .recv(&mut buf)
                .map_err(|e| fail(format!("recv {n}: {e}")))?;
            if got != n || buf[..n] != want[..] {
                return Err(fail(format!(
                    "message {i} copied: {got} B, not the {n} B sent"
                )));
            }
        }
    }
    sender
        .join()
        .map_err(|_| fail("sender panicked"))?
        .map(drop)
        .map_err(fail)
}

fn times_out(t: &'static dyn Transport) -> Result<(), Failed> {
    // Opening is bounded by the same timeout but is not what this checks: on a loaded machine a
    // middleware may need longer than 200 ms to meet (a fresh Kafka consumer's first fetch), so
    // it tries again with twice the timeout, up to 3.2 s.
    let mut timeout_ms = 200;
    let (_setup, _c, mut a) = loop {
        match pair(t, &spec(t, timeout_ms)) {
            Err(e)
                if timeout_ms < 3_200
                    && e.message().is_some_and(|m| m.contains("no answer within")) =>
            {
                timeout_ms *= 2
            }
            opened => break opened?,
        }
    };
    let start = Instant::now();
    let r = a.recv(&mut [0u8; 100]);
    if !matches!(r, Err(TransportError::Timeout(_))) {
        return Err(fail(format!("a silent peer gave {r:?}, not a timeout")));
    }
    // A bound only a hang reaches.
    if start.elapsed() > Duration::from_millis(timeout_ms) + Duration::from_secs(5) {
        return Err(fail(format!("took {:?}", start.elapsed())));
    }
    Ok(())
}

fn try_recv_returns(t: &'static dyn Transport) -> Result<(), Failed> {
    let mut s = spec(t, 5_000);
    s.poll = true;
    let (_setup, mut c, mut a) = pair(t, &s)?;
    let mut buf = vec![0u8; 1000];
    if !matches!(a.try_recv(&mut buf), Ok(None)) {
        return Err(fail("an empty channel did not say so at once"));
    }
    c.send(&message(64, 1)).map_err(fail)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match a.try_recv(&mut buf).map_err(fail)? {
            Some(64) => return Ok(()),
            Some(n) => return Err(fail(format!("got {n} B, not 64"))),
            None if Instant::now() > deadline => return Err(fail("the message never came")),
            None => std::hint::spin_loop(),
        }
    }
}

fn reports_closed_peer(t: &'static dyn Transport) -> Result<(), Failed> {
    let s = spec(t, 5_000);
    let (_setup, c, mut a) = pair(t, &s)?;
    drop(c);
    match a.recv(&mut [0u8; 100]) {
        Err(TransportError::PeerClosed) => Ok(()),
        other => Err(fail(format!("a closed peer gave {other:?}"))),
    }
}

fn refuses_too_large(t: &'static dyn Transport) -> Result<(), Failed> {
    let s = spec(t, 5_000);
    let (_setup, mut c, mut a) = pair(t, &s)?;
    c.send(&message(2000, 3)).map_err(fail)?;
    match a.recv(&mut [0u8; 1000]) {
        Err(TransportError::TooLarge { .. }) => Ok(()),
        other => Err(fail(format!("a 2000 B message into 1000 B gave {other:?}"))),
    }
}

/// Whatever a case's ends met on is gone once its set-up and ends are dropped: its place on
/// the file system, the addresses its ends bound, and any way to open it again.
fn leaves_nothing(t: &'static dyn Transport) -> Result<(), Failed> {
    let s = spec(t, 5_000);
    let plan = SetupPlan {
        channels: 2,
        ..SetupPlan::default()
    };
    let sides = [
        Side::Connect(0),
        Side::Accept(0),
        Side::Connect(1),
        Side::Accept(1),
    ];
    let (setup, mut eps, rdv) = open_at(t, &s, plan, &sides)?;
    eps[0].send(&message(64, 1)).map_err(fail)?;
    eps[1].recv(&mut [0u8; 100]).map_err(fail)?;
    // What each segment path opens while the case holds it.
    let segments: Vec<std::path::PathBuf> = match &rdv.place {
        Place::Segments { channels, topics } => channels
            .iter()
            .chain(topics)
            .map(|at| std::fs::read_link(at).map_err(fail))
            .collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };
    drop(eps);
    drop(setup);
    match &rdv.place {
        Place::Dir(d) => {
            if std::path::Path::new(d).exists() {
                return Err(fail(format!("its directory {d} is still there")));
            }
            // What a library makes in /dev/shm for the case is named after its directory.
            let name = d.rsplit_once('/').map_or(d.as_str(), |(_, n)| n);
            let left: Vec<String> = std::fs::read_dir("/dev/shm")
                .map_err(fail)?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(&format!("{name}-")))
                .collect();
            if !left.is_empty() {
                return Err(fail(format!("files left in /dev/shm: {left:?}")));
            }
        }
        Place::Segments { channels, topics } => {
            // Each is opened through the descriptor of the process that made it, whose name
            // is gone: once set-up is dropped no path opens the segment again.
            for (at, was) in channels.iter().chain(topics).zip(&segments) {
                let now = std::fs::read_link(at).ok();
                if now.as_ref() == Some(was) {
                    return Err(fail(format!("{at} still opens {}", was.display())));
                }
                let name = was.to_string_lossy().replace(" (deleted)", "");
                if std::path::Path::new(&name).exists() {
                    return Err(fail(format!("{name} is still there")));
                }
            }
        }
        Place::Broker { url, .. } => {
            // The broker that set-up started is gone: nothing answers at its port.
            let addr = url.split_once("://").map_or(url.as_str(), |(_, a)| a);
            if std::net::TcpStream::connect(addr).is_ok() {
                return Err(fail(format!("the broker at {url} still answers")));
            }
        }
        _ => {}
    }
    for bound in rdv.bound.values() {
        // A bare address, an endpoint URL (`tcp://host:port`, `ipc:///path`) or a Zenoh
        // locator (`tcp/host:port`, `unixsock-stream//path`).
        let addr = bound
            .split_once("://")
            .map(|(_, a)| a)
            .or_else(|| {
                bound
                    .split_once('/')
                    .filter(|(scheme, _)| !scheme.is_empty() && !scheme.contains(':'))
                    .map(|(_, a)| a)
            })
            .unwrap_or(bound.as_str());
        if addr.starts_with('/') {
            if std::path::Path::new(addr).exists() {
                return Err(fail(format!("{addr} is still there")));
            }
            continue;
        }
        // No socket of this process holds the port any more, at once or after a library's own
        // thread closed it (ZeroMQ closes sockets in the background). Another process may take
        // the same number meanwhile (an ephemeral port of a loaded machine): that is no leak.
        let port = addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .ok_or_else(|| fail(format!("{bound}: no port")))?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while held_here(port) {
            if Instant::now() > deadline {
                return Err(fail(format!("{bound} is still held by this process")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let again = t
        .open(&rdv, Side::Connect(0), &s)
        .and_then(|o| o.finish(&rdv, &s));
    if again.is_ok() {
        return Err(fail("a dropped case's channel opened again"));
    }
    Ok(())
}

/// Whether a socket of this process is bound to `port` (TCP or UDP, IPv4 or IPv6): its inode
/// in the kernel's socket tables is one of this process's descriptors.
fn held_here(port: u16) -> bool {
    let ours: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy();
            l.strip_prefix("socket:[")
                .map(|i| i.trim_end_matches(']').to_string())
        })
        .collect();
    ["tcp", "tcp6", "udp", "udp6"].iter().any(|table| {
        std::fs::read_to_string(format!("/proc/self/net/{table}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|line| {
                let c: Vec<&str> = line.split_whitespace().collect();
                let local = c.get(1).and_then(|a| a.rsplit_once(':'));
                local.and_then(|(_, p)| u16::from_str_radix(p, 16).ok()) == Some(port)
                    && c.get(9).is_some_and(|inode| ours.contains(*inode))
            })
    })
}

fn nobody_there(t: &'static dyn Transport) -> Result<(), Failed> {
    let s = spec(t, 500);
    let plan = SetupPlan {
        channels: 1,
        ..SetupPlan::default()
    };
    let setup = t.setup(&plan, &s).map_err(fail)?;
    let start = Instant::now();
    let r = t
        .open(&setup.rendezvous, Side::Connect(0), &s)
        .and_then(|o| o.finish(&setup.rendezvous, &s));
    if r.is_ok() {
        return Err(fail("connected with no accepting end there"));
    }
    if start.elapsed() > Duration::from_secs(5) {
        return Err(fail(format!("took {:?}", start.elapsed())));
    }
    Ok(())
}

fn channels_apart(t: &'static dyn Transport) -> Result<(), Failed> {
    const N: u32 = 3;
    let s = spec(t, 5_000);
    let plan = SetupPlan {
        channels: N,
        ..SetupPlan::default()
    };
    let sides: Vec<Side> = (0..N)
        .flat_map(|n| [Side::Connect(n), Side::Accept(n)])
        .collect();
    let (_setup, mut eps) = open(t, &s, plan, &sides)?;
    let mut buf = vec![0u8; 1000];
    // Each channel's message reaches its own accepting end, and the answer comes back on it.
    for n in 0..N as usize {
        eps[2 * n].send(&message(100 + n, n as u8)).map_err(fail)?;
    }
    for n in 0..N as usize {
        let got = eps[2 * n + 1].recv(&mut buf).map_err(fail)?;
        if buf[..got] != message(100 + n, n as u8)[..] {
            return Err(fail(format!("channel {n} got another channel's message")));
        }
        eps[2 * n + 1]
            .send(&message(200 + n, n as u8))
            .map_err(fail)?;
    }
    for n in 0..N as usize {
        let got = eps[2 * n].recv(&mut buf).map_err(fail)?;
        if got != 200 + n {
            return Err(fail(format!("channel {n}'s answer went astray ({got} B)")));
        }
    }
    Ok(())
}

fn topic_reaches_all(t: &'static dyn Transport) -> Result<(), Failed> {
    const READERS: u32 = 3;
    let s = spec(t, 5_000);
    let plan = SetupPlan {
        topics: vec![READERS],
        ..SetupPlan::default()
    };
    let mut sides = vec![Side::Publish {
        topic: 0,
        readers: READERS,
    }];
    sides.extend((0..READERS).map(|reader| Side::Subscribe { topic: 0, reader }));
    let (_setup, mut eps) = open(t, &s, plan, &sides)?;
    for i in 0..10u8 {
        eps[0].send(&message(64 + i as usize, i)).map_err(fail)?;
    }
    let mut buf = vec![0u8; 1000];
    for (r, ep) in eps.iter_mut().enumerate().skip(1) {
        for i in 0..10u8 {
            let n = ep.recv(&mut buf).map_err(fail)?;
            if buf[..n] != message(64 + i as usize, i)[..] {
                return Err(fail(format!(
                    "reader {r}: message {i} is not the one written"
                )));
            }
        }
        if let Ok(Some(n)) = ep.try_recv(&mut buf) {
            return Err(fail(format!("reader {r} got a message twice ({n} B)")));
        }
    }
    Ok(())
}
