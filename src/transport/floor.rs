//! The floor: the plainest loop each transport allows, with no harness: raw `read`/`write` on
//! descriptors made by the standard library, samples kept in a preallocated vector. Every ratio
//! msgperf prints divides by a figure measured here, in the same placement as the run.
//!
//! A floor has two sides. [`Floor::make`] creates what they share (a descriptor pair, a
//! memory file); the runner gives each side its part and runs [`Floor::run`] in a thread or in a
//! role process of its own, as it runs the case's roles (a descriptor travels to a process at
//! its start). Side 0 measures; side 1 answers (ping-pong) or writes (stream). Across hosts
//! nothing can be handed over: each side makes its own end ([`Floor::bind`], [`Floor::meet`]).

#![allow(unsafe_code)]

use crate::sys;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where and how long a floor loop runs: the same placement as the run it divides.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FloorRoles {
    /// CPUs of the measuring side and of its peer (the hardware floors pin their own threads).
    pub cpus: (Option<usize>, Option<usize>),
    pub warmup: Duration,
    pub duration: Duration,
    /// The case's `--timeout`: a floor is bounded as its case is, by its length and three
    /// timeouts (a brokered floor starts its broker and drains its queues inside that).
    pub timeout: Duration,
    /// The transport's `--opt` values (the shm floor follows its wait strategy).
    pub options: std::collections::BTreeMap<String, String>,
    /// Across hosts, the addresses of side 0's host and side 1's, where each side makes its
    /// end, so that the loop takes the path the case's roles take (None: both on this host).
    #[serde(default)]
    pub between: Option<[String; 2]>,
}

/// What a floor loop measured. A figure the loop does not produce is None. The result room
/// keeps its own copy of these fields (`FloorResult`): transports import no other room.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FloorFigure {
    /// Round trips (ping-pong) or messages (stream) measured.
    pub samples: u64,
    pub rtt_min_ns: Option<u64>,
    pub rtt_p50_ns: Option<u64>,
    pub rtt_mean_ns: Option<u64>,
    pub msgs_per_s: Option<f64>,
    pub bytes_per_s: Option<f64>,
    /// Every round trip (ping-pong), for plots beside the cases'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_histogram: Option<crate::histogram::EncodedHistogram>,
}

/// Which plain loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FloorLoop {
    PingPong,
    Stream,
}

/// One side's run of a floor loop: which loop, which side (0 measures), the message size, where
/// and how long, and the flag that ends it early.
#[derive(Clone, Copy)]
pub struct FloorRun<'a> {
    pub kind: FloorLoop,
    pub side: usize,
    pub size: usize,
    pub roles: &'a FloorRoles,
    pub stop: &'a AtomicBool,
}

impl FloorRun<'_> {
    /// A stream's reading side: counts what `next` reads (false at the end mark or an error)
    /// until then or `stop`, and gives the figure of the measured window.
    pub fn read_stream(&self, mut next: impl FnMut() -> bool) -> FloorFigure {
        let mut window = ReadWindow::new(self.roles.warmup);
        while !self.stop.load(Ordering::Relaxed) && next() {
            window.read();
        }
        window.figure(self.size)
    }

    /// A stream's writing side: writes with `write` (false on an error) through the warm-up
    /// and the measured time, or until `stop`.
    pub fn write_stream(&self, mut write: impl FnMut() -> bool) {
        let time = self.roles.warmup + self.roles.duration;
        let end = sys::monotonic_ns() + time.as_nanos() as u64;
        let mut clock = SparseClock::new();
        while !self.stop.load(Ordering::Relaxed) && write() {
            if clock.step().is_some_and(|now| now >= end) {
                break;
            }
        }
    }
}

/// What one side of a floor holds.
pub enum FloorEnds {
    /// Descriptors: they travel to a side in another process.
    Fds(Vec<OwnedFd>),
    /// Anything else: only for sides that are threads of one process.
    Local(Box<dyn Any + Send>),
}

impl FloorEnds {
    fn fds(self) -> std::io::Result<Vec<OwnedFd>> {
        match self {
            FloorEnds::Fds(f) => Ok(f),
            FloorEnds::Local(_) => Err(std::io::Error::other("this floor side needs descriptors")),
        }
    }
}

/// A transport's plain loops.
pub trait Floor: Sync {
    /// Makes what the two sides of one loop share; element `i` is side `i`'s.
    fn make(
        &self,
        l: FloorLoop,
        size: usize,
        roles: &FloorRoles,
    ) -> std::io::Result<[FloorEnds; 2]>;
    /// Runs side `run.side` (0 measures and returns the figure; 1 answers or writes, and returns
    /// None) until the loop's time is up, the other side ends, or `run.stop` is raised.
    fn run(&self, run: FloorRun, ends: FloorEnds) -> std::io::Result<Option<FloorFigure>>;
    /// Whether its loop can run between two hosts (`FloorRoles::between`).
    fn crosses_hosts(&self) -> bool {
        false
    }
    /// Across hosts, side `run.side` makes its own end at its host's address: first what it
    /// binds, with the address the other side is to be told (if any)...
    fn bind(&self, _: FloorRun) -> std::io::Result<(FloorEnds, Option<String>)> {
        Err(io(NOT_ACROSS))
    }
    /// ...then, told the other side's address (if it bound one), the end it runs on, within
    /// the case's timeout.
    fn meet(&self, _: FloorRun, _: FloorEnds, _: Option<&str>) -> std::io::Result<FloorEnds> {
        Err(io(NOT_ACROSS))
    }
}

/// One side of a descriptor channel: one socket, or a pipe's read end and the other pipe's
/// write end.
pub struct FdSide {
    pub read: OwnedFd,
    pub write: Option<OwnedFd>,
}

impl FdSide {
    /// The two sides of a connected socket pair, each reading and writing one socket.
    pub fn sockets(a: impl Into<OwnedFd>, b: impl Into<OwnedFd>) -> (FdSide, FdSide) {
        let side = |s: OwnedFd| FdSide {
            read: s,
            write: None,
        };
        (side(a.into()), side(b.into()))
    }
}

/// A socket bound on its host, and where it is.
pub type Bound = (OwnedFd, SocketAddr);

/// How each side of a descriptor loop across hosts makes its own end (see [`Floor::bind`]).
pub struct Meet {
    /// Side `side`'s socket bound at `address` (None: this side binds nothing, it connects).
    pub bind: fn(side: usize, address: &str) -> std::io::Result<Option<Bound>>,
    /// Side `side`'s connected socket, from what it bound and where the other side's is,
    /// within `timeout`.
    pub open: fn(
        side: usize,
        bound: Option<OwnedFd>,
        peer: Option<SocketAddr>,
        timeout: Duration,
    ) -> std::io::Result<OwnedFd>,
}

/// The floor of every descriptor transport: only how the pair is made differs.
pub struct FdFloor {
    pub make_pair: fn() -> std::io::Result<(FdSide, FdSide)>,
    /// How its sides meet across hosts; None: the loop stays on one host.
    pub meet: Option<Meet>,
    /// Datagrams: one read is one message; zero-length datagram means end.
    pub datagram: bool,
}

/// Reads exactly `buf.len()` bytes (stream) or one datagram; false at end or error.
#[inline(always)]
fn read_msg(fd: RawFd, buf: &mut [u8], datagram: bool) -> bool {
    if datagram {
        return sys::read(fd, buf) > 0;
    }
    let mut got = 0;
    while got < buf.len() {
        let n = sys::read(fd, &mut buf[got..]);
        if n <= 0 {
            return false;
        }
        got += n as usize;
    }
    true
}

#[inline(always)]
fn write_msg(fd: RawFd, buf: &[u8]) -> bool {
    let mut put = 0;
    while put < buf.len() {
        let n = sys::write(fd, &buf[put..]);
        if n <= 0 {
            return false;
        }
        put += n as usize;
    }
    true
}

/// Median, minimum and mean of round-trip samples.
pub(crate) fn rtt_figure(samples: &mut [u32]) -> FloorFigure {
    if samples.is_empty() {
        return FloorFigure::default();
    }
    samples.sort_unstable();
    let sum: u64 = samples.iter().map(|&s| s as u64).sum();
    let n = samples.len() as u64;
    let mut h = crate::histogram::new(3);
    for &s in samples.iter() {
        h.saturating_record(s.max(1) as u64);
    }
    FloorFigure {
        rtt_histogram: Some(crate::histogram::EncodedHistogram::encode(&h)),
        samples: n,
        rtt_min_ns: Some(samples[0] as u64),
        rtt_p50_ns: Some(samples[samples.len() / 2] as u64),
        rtt_mean_ns: Some(sum / n),
        msgs_per_s: Some(n as f64 * 1e9 / sum.max(1) as f64),
        bytes_per_s: None,
    }
}

/// A stream's figure from what the reader measured.
pub(crate) fn stream_figure(msgs: u64, bytes: u64, ns: u64) -> FloorFigure {
    let secs = ns.max(1) as f64 / 1e9;
    FloorFigure {
        samples: msgs,
        msgs_per_s: Some(msgs as f64 / secs),
        bytes_per_s: Some(bytes as f64 / secs),
        ..Default::default()
    }
}

/// The most samples a floor keeps (4 MB): enough for seconds of the fastest transport.
pub(crate) const MAX_SAMPLES: usize = 1 << 20;

/// Runs a ping-pong's measuring loop: `exchange` does one round trip (false: the peer is gone).
#[inline(always)]
pub(crate) fn measure_round_trips(
    roles: &FloorRoles,
    stop: &AtomicBool,
    mut exchange: impl FnMut() -> bool,
) -> std::io::Result<FloorFigure> {
    let mut samples: Vec<u32> = Vec::with_capacity(MAX_SAMPLES);
    // Timed as the ping-pong workload times its round trips: on the interval clock.
    let clock = sys::IntervalClock::new();
    let warm_end = clock.now() + roles.warmup.as_nanos() as u64;
    let end = warm_end + roles.duration.as_nanos() as u64;
    loop {
        let t0 = clock.now();
        if !exchange() {
            return Err(std::io::Error::other("the floor's peer stopped answering"));
        }
        let t1 = clock.now();
        if t0 >= warm_end {
            samples.push((t1 - t0).min(u32::MAX as u64) as u32);
        }
        if t1 >= end || samples.len() == MAX_SAMPLES || stop.load(Ordering::Relaxed) {
            return Ok(rtt_figure(&mut samples));
        }
    }
}

impl Floor for FdFloor {
    fn make(&self, _: FloorLoop, _: usize, roles: &FloorRoles) -> std::io::Result<[FloorEnds; 2]> {
        compares_with(roles)?;
        let (a, b) = (self.make_pair)()?;
        let fds = |s: FdSide| FloorEnds::Fds(std::iter::once(s.read).chain(s.write).collect());
        Ok([fds(a), fds(b)])
    }

    fn crosses_hosts(&self) -> bool {
        self.meet.is_some()
    }

    fn bind(&self, run: FloorRun) -> std::io::Result<(FloorEnds, Option<String>)> {
        compares_with(run.roles)?;
        let (meet, at) = self.across(run)?;
        let bound = (meet.bind)(run.side, at)?;
        let told = bound.as_ref().map(|(_, a)| a.to_string());
        Ok((
            FloorEnds::Fds(bound.map(|(fd, _)| fd).into_iter().collect()),
            told,
        ))
    }

    fn meet(
        &self,
        run: FloorRun,
        bound: FloorEnds,
        peer: Option<&str>,
    ) -> std::io::Result<FloorEnds> {
        let (meet, _) = self.across(run)?;
        let peer = peer
            .map(|p| {
                p.parse::<SocketAddr>()
                    .map_err(|e| io(format!("the other side's address `{p}`: {e}")))
            })
            .transpose()?;
        let own = bound.fds()?.pop();
        let fd = (meet.open)(run.side, own, peer, run.roles.timeout)?;
        Ok(FloorEnds::Fds(vec![fd]))
    }

    fn run(&self, run: FloorRun, ends: FloorEnds) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let fds = ends.fds()?;
        let r = fds[0].as_raw_fd();
        let w = fds.get(1).map_or(r, |f| f.as_raw_fd());
        let datagram = self.datagram;
        let mut buf = vec![7u8; size];
        match (l, side) {
            (FloorLoop::PingPong, 0) => {
                let f = measure_round_trips(roles, stop, || {
                    write_msg(w, &buf) && read_msg(r, &mut buf, datagram)
                });
                if datagram {
                    // The end mark may be dropped like any datagram: send a few.
                    for _ in 0..5 {
                        sys::write(w, &[]);
                    }
                }
                f.map(Some)
            }
            (FloorLoop::PingPong, _) => {
                while read_msg(r, &mut buf, datagram) && write_msg(w, &buf) {}
                Ok(None)
            }
            (FloorLoop::Stream, 0) => {
                if datagram {
                    set_read_timeout(r, Duration::from_secs(1));
                    // Datagrams sent before this side reads are lost, and it may start late
                    // (a far host's start comes through its launcher): it says when. A few
                    // copies, since one may be dropped like any datagram.
                    for _ in 0..3 {
                        sys::write(w, &[1]);
                    }
                }
                let mut window = ReadWindow::new(roles.warmup);
                while !stop.load(Ordering::Relaxed) {
                    let n = sys::read(r, &mut buf);
                    if n <= 0 {
                        break;
                    }
                    window.read_bytes(n as u64);
                }
                if !window.measured() && !stop.load(Ordering::Relaxed) {
                    return Err(io(format!(
                        "its reader read nothing after its {} ms of warm-up: the writer was done before it began",
                        roles.warmup.as_millis()
                    )));
                }
                let mut f = window.figure_of_bytes();
                if !datagram {
                    // A byte stream's reads do not follow message boundaries.
                    f.msgs_per_s = f.bytes_per_s.map(|b| b / size as f64);
                }
                Ok(Some(f))
            }
            (FloorLoop::Stream, _) => {
                if datagram {
                    set_read_timeout(r, roles.timeout);
                    if sys::read(r, &mut [0u8; 1]) <= 0 {
                        return Err(io(format!(
                            "its reader did not say it was reading within {:?}",
                            roles.timeout
                        )));
                    }
                }
                run.write_stream(|| write_msg(w, &buf));
                if datagram {
                    // The end mark may be dropped like any datagram: send a few.
                    for _ in 0..20 {
                        sys::write(w, &[]);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                Ok(None)
            }
        }
    }
}

impl FdFloor {
    /// How its sides meet, and side `run.side`'s host address.
    fn across<'a>(&'a self, run: FloorRun<'a>) -> std::io::Result<(&'a Meet, &'a str)> {
        match (&self.meet, &run.roles.between) {
            (Some(meet), Some(at)) => Ok((meet, at[run.side.min(1)].as_str())),
            _ => Err(io(NOT_ACROSS)),
        }
    }
}

/// Why a plain loop is refused between hosts.
const NOT_ACROSS: &str = "this plain loop does not cross hosts";

/// Refuses options the plain descriptor loop does not follow (its ratio would compare unlike
/// work), on one host or across.
fn compares_with(roles: &FloorRoles) -> std::io::Result<()> {
    if super::writes_of(&roles.options) != (None, None) {
        return Err(io(
            "the plain loop writes each message whole, so nothing of it compares with --opt write-size or buffer (no ratio)",
        ));
    }
    if super::text_framing(&roles.options) {
        return Err(io(
            "the plain loop moves binary messages, so nothing of it compares with --opt framing=text (no ratio)",
        ));
    }
    Ok(())
}

fn set_read_timeout(fd: RawFd, d: Duration) {
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: a valid timeval for SO_RCVTIMEO on a socket the caller owns.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
}

/// Runs `f` pinned to `cpu` (if any), then restores this thread's mask.
pub(crate) fn pinned<T>(cpu: Option<usize>, f: impl FnOnce() -> T) -> T {
    sys::with_cpu(cpu, f)
}

/// The hardware's floor for a round trip: two threads bouncing one cache line each way.
/// Threads sharing one CPU must yield to each other (spin-yield), else they would spin out
/// their whole time slice.
pub fn spin_pingpong(roles: &FloorRoles) -> FloorFigure {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;
    #[repr(align(128))]
    struct Line(AtomicU64);
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let yield_ = roles.cpus.0.is_some() && roles.cpus.0 == roles.cpus.1;
    let (pi, po) = (ping.clone(), pong.clone());
    let cpu = roles.cpus.1;
    const DONE: u64 = u64::MAX;
    let peer = std::thread::spawn(move || {
        if let Some(c) = cpu {
            let _ = sys::pin_current_thread(c);
        }
        let mut seen = 0;
        loop {
            let v = pi.0.load(Ordering::Acquire);
            if v == DONE {
                break;
            }
            if v != seen {
                seen = v;
                po.0.store(v, Ordering::Release);
            } else if yield_ {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    });
    let never = AtomicBool::new(false);
    let mut i = 0u64;
    let f = pinned(roles.cpus.0, || {
        measure_round_trips(roles, &never, || {
            i += 1;
            ping.0.store(i, Ordering::Release);
            while pong.0.load(Ordering::Acquire) != i {
                if yield_ {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            true
        })
    });
    ping.0.store(DONE, Ordering::Release);
    let _ = peer.join();
    f.unwrap_or_default()
}

/// The hardware's floor for moving bytes: memcpy of `size`-byte blocks on one CPU, reading
/// its way through a 16 MiB region (as a reader walks a ring) rather than one block that
/// stays in the first-level cache.
pub fn memcpy_bandwidth(size: usize, roles: &FloorRoles) -> FloorFigure {
    let region = (16usize << 20).max(size);
    let src = vec![7u8; region];
    let mut dst = vec![0u8; size];
    let blocks = region / size;
    let (copies, ns) = pinned(roles.cpus.0, || {
        let start = sys::monotonic_ns();
        let end = start + roles.duration.as_nanos() as u64;
        let (mut copies, mut now, mut i) = (0u64, start, 0usize);
        while now < end {
            for _ in 0..16 {
                dst.copy_from_slice(&src[i * size..(i + 1) * size]);
                std::hint::black_box(&mut dst);
                i = (i + 1) % blocks;
            }
            copies += 16;
            now = sys::monotonic_ns();
        }
        (copies, now - start)
    });
    stream_figure(copies, copies * size as u64, ns)
}

/// The clock as a loop of many short steps reads it: at every step while a step takes a
/// microsecond or more, else at every 64th. A clock read costs 20-25 ns on this kind of VM,
/// most of a small message's time on the fastest transports, and a case that stamps one
/// message in 64 does not pay it: a floor that paid it would stand below the case.
pub(crate) struct SparseClock {
    now: fn() -> u64,
    steps: u64,
    every: u64,
    /// The last reading, and the step it was taken at.
    at: u64,
    at_step: u64,
}

/// Steps between two clock readings where steps are short.
const CLOCK_EVERY: u64 = 64;

impl SparseClock {
    pub fn new() -> SparseClock {
        SparseClock::on(sys::monotonic_ns)
    }

    /// On the clock `now` (a test's fake one).
    fn on(now: fn() -> u64) -> SparseClock {
        SparseClock {
            now,
            steps: 0,
            every: 1,
            at: now(),
            at_step: 0,
        }
    }

    /// Counts a step: the time now, if the clock was read at it.
    #[inline(always)]
    pub fn step(&mut self) -> Option<u64> {
        self.steps += 1;
        (self.steps - self.at_step >= self.every).then(|| self.read())
    }

    #[inline(never)]
    fn read(&mut self) -> u64 {
        let now = (self.now)();
        let per_step = now.saturating_sub(self.at) / (self.steps - self.at_step);
        self.every = if per_step < 1_000 { CLOCK_EVERY } else { 1 };
        self.at = now;
        self.at_step = self.steps;
        now
    }

    /// Steps counted so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }
}

/// A stream floor's reader's window: it opens `warmup` after the first message arrived, at
/// the first clock reading after that, and closes at the last one ([`SparseClock`]: the
/// reads after that one, 63 at most, are left out).
pub(crate) struct ReadWindow {
    warm: u64,
    clock: SparseClock,
    first: u64,
    bytes: u64,
    /// Where the window opened and its last reading: the time, and the reads and bytes
    /// counted by then.
    start: Mark,
    last: Mark,
}

#[derive(Clone, Copy, Default)]
struct Mark {
    ns: u64,
    reads: u64,
    bytes: u64,
}

impl ReadWindow {
    pub fn new(warmup: std::time::Duration) -> ReadWindow {
        ReadWindow::on(warmup, SparseClock::new())
    }

    fn on(warmup: std::time::Duration, clock: SparseClock) -> ReadWindow {
        ReadWindow {
            warm: warmup.as_nanos() as u64,
            clock,
            first: 0,
            bytes: 0,
            start: Mark::default(),
            last: Mark::default(),
        }
    }

    /// Counts a message read now.
    #[inline(always)]
    pub fn read(&mut self) {
        self.read_bytes(0);
    }

    /// Counts a read of `n` bytes now (of a byte stream, whose reads are not messages).
    #[inline(always)]
    pub fn read_bytes(&mut self, n: u64) {
        self.bytes += n;
        if let Some(ns) = self.clock.step() {
            self.mark(ns);
        }
    }

    fn mark(&mut self, ns: u64) {
        if self.first == 0 {
            self.first = ns;
        }
        if ns >= self.first + self.warm {
            let here = Mark {
                ns,
                reads: self.clock.steps(),
                bytes: self.bytes,
            };
            if self.start.ns == 0 {
                self.start = here;
            }
            self.last = here;
        }
    }

    /// The first message came more than `d` ago.
    #[allow(dead_code)] // Only some middlewares' floors ask.
    pub fn began_before(&self, d: std::time::Duration) -> bool {
        self.first > 0 && sys::monotonic_ns() > self.first + d.as_nanos() as u64
    }

    /// The window is open and has lasted `d`.
    pub fn lasted(&self, d: std::time::Duration) -> bool {
        self.start.ns > 0 && self.last.ns - self.start.ns >= d.as_nanos() as u64
    }

    /// Whether the window holds a read after the one that opened it.
    pub fn measured(&self) -> bool {
        self.last.reads > self.start.reads
    }

    /// The stream's figure for messages of `size`.
    pub fn figure(&self, size: usize) -> FloorFigure {
        // The read that opens the window is not in it; the ones after it are.
        let n = self.last.reads - self.start.reads;
        stream_figure(n, n * size as u64, self.last.ns - self.start.ns)
    }

    /// The figure of a stream of `read_bytes` calls: its reads and bytes.
    pub fn figure_of_bytes(&self) -> FloorFigure {
        stream_figure(
            self.last.reads - self.start.reads,
            self.last.bytes - self.start.bytes,
            self.last.ns - self.start.ns,
        )
    }
}

impl FloorRoles {
    /// Where a process the floor starts for its transport (a broker, a media driver) runs:
    /// where a case's runs, beside its non-driving roles, the ping-pong's answering side and
    /// the stream's reader. Not beside a stream's writer, where it would cost the writer what
    /// it costs the reader in the case.
    pub fn service_cpu(&self) -> Option<usize> {
        self.cpus.1
    }

    /// The CPU of `side` of loop `l`: that of the case's role doing its work. A ping-pong's
    /// measuring side is the initiator (the driving role's CPU), a stream's is the reader (the
    /// other's).
    pub fn side_cpu(&self, l: FloorLoop, side: usize) -> Option<usize> {
        let (measuring, other) = match l {
            FloorLoop::PingPong => (self.cpus.0, self.cpus.1),
            FloorLoop::Stream => (self.cpus.1, self.cpus.0),
        };
        if side == 0 {
            measuring
        } else {
            other
        }
    }

    /// How a floor's side opens a middleware's channel: as a case's end would, with the
    /// floor's own bound on its waits.
    #[allow(dead_code)] // Only the middlewares' floors open channels.
    pub(crate) fn spec(&self, size: usize, timeout: Duration) -> super::ChannelSpec {
        super::ChannelSpec {
            options: self.options.clone(),
            timeout,
            poll: false,
            max_message: size,
            watched: false,
            exchange: super::Exchange::Both,
        }
    }
}

/// A floor whose two sides share a memory file of notes (most middlewares'): it says how a
/// side runs, given the notes; making them and handing each side its own is common.
#[cfg(feature = "_floor_notes")]
pub(crate) trait NotesFloor: Sync {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>>;
}

#[cfg(feature = "_floor_notes")]
impl<T: NotesFloor> Floor for T {
    fn make(&self, _: FloorLoop, _: usize, _: &FloorRoles) -> std::io::Result<[FloorEnds; 2]> {
        Notes::make()
    }

    fn run(&self, run: FloorRun, ends: FloorEnds) -> std::io::Result<Option<FloorFigure>> {
        self.run_with(run, Notes::of(ends)?)
    }
}

/// An error of a middleware's client (or the floor's own), as the floor's I/O error.
pub(crate) fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

#[cfg(feature = "_floor_notes")]
/// A small memory file both sides of a floor share, for what a middleware's floor must tell
/// its other side before the loop (an address the kernel chose, that a subscription is in
/// place, that the loop is over): lines written at fixed offsets.
pub(crate) struct Notes(pub std::fs::File);

#[cfg(feature = "_floor_notes")]
impl Notes {
    /// How long a side waits for the other (to start, to match, to answer).
    pub const WAIT: Duration = Duration::from_secs(10);
    /// The lines a brokered floor writes: where the broker is, that the reader is in place,
    /// that the loop is over.
    #[allow(dead_code)] // Not every floor with notes has a broker.
    pub const URL: u64 = 0;
    #[allow(dead_code)]
    pub const READY: u64 = 1;
    #[allow(dead_code)]
    pub const DONE: u64 = 2;

    /// A fresh one, for the runner to write in before it hands out its ends.
    pub fn new() -> std::io::Result<Notes> {
        Ok(Notes(std::fs::File::from(sys::memfd(4096)?)))
    }

    /// Two ends of a fresh one.
    #[allow(dead_code)] // Not every floor with notes calls it.
    pub fn make() -> std::io::Result<[FloorEnds; 2]> {
        Notes::new()?.ends()
    }

    /// Its two ends, one for each side.
    pub fn ends(&self) -> std::io::Result<[FloorEnds; 2]> {
        let end = || -> std::io::Result<FloorEnds> {
            Ok(FloorEnds::Fds(vec![self.0.try_clone()?.into()]))
        };
        Ok([end()?, end()?])
    }

    /// The one a side was given.
    pub fn of(ends: FloorEnds) -> std::io::Result<Notes> {
        match ends {
            FloorEnds::Fds(mut fds) if !fds.is_empty() => {
                Ok(Notes(std::fs::File::from(fds.remove(0))))
            }
            _ => Err(std::io::Error::other(
                "this floor's sides share a memory file",
            )),
        }
    }

    /// Writes line `slot` (0..8).
    pub fn put(&self, slot: u64, text: &str) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.0
            .write_all_at(format!("{text}\n").as_bytes(), slot * 512)
    }

    /// Line `slot` if it was written.
    pub fn get(&self, slot: u64) -> std::io::Result<Option<String>> {
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 512];
        let n = self.0.read_at(&mut b, slot * 512)?;
        Ok(b[..n]
            .iter()
            .position(|&c| c == b'\n')
            .map(|end| String::from_utf8_lossy(&b[..end]).to_string()))
    }

    /// Line `slot`, waiting for it at most `bound`.
    #[allow(dead_code)] // Not every floor with notes calls it.
    pub fn wait(&self, slot: u64, bound: Duration) -> std::io::Result<String> {
        let deadline = crate::deadline::Deadline::after(bound);
        loop {
            if let Some(s) = self.get(slot)? {
                return Ok(s);
            }
            if deadline.expired() {
                return Err(std::io::Error::other(
                    "the floor's other side did not get ready",
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static NOW: Cell<u64> = const { Cell::new(1_000_000) };
    }

    fn fake() -> u64 {
        NOW.with(Cell::get)
    }

    fn pass(ns: u64) {
        NOW.with(|n| n.set(n.get() + ns));
    }

    /// Which of `steps` steps of `ns` each read the clock.
    fn readings(c: &mut SparseClock, steps: u64, ns: u64) -> Vec<u64> {
        (0..steps)
            .filter_map(|_| {
                pass(ns);
                c.step().map(|_| c.steps())
            })
            .collect()
    }

    #[test]
    fn a_floors_service_runs_beside_the_side_that_answers_or_reads() {
        let roles = FloorRoles {
            cpus: (Some(0), Some(1)),
            warmup: Duration::ZERO,
            duration: Duration::ZERO,
            timeout: Duration::ZERO,
            options: Default::default(),
            between: None,
        };
        // A stream's reader is side 0, on the non-driving roles' CPU; the writer is not there.
        assert_eq!(roles.side_cpu(FloorLoop::Stream, 0), Some(1));
        assert_eq!(roles.side_cpu(FloorLoop::Stream, 1), Some(0));
        assert_eq!(roles.service_cpu(), roles.side_cpu(FloorLoop::Stream, 0));
        // A ping-pong's answering side is side 1.
        assert_eq!(roles.side_cpu(FloorLoop::PingPong, 0), Some(0));
        assert_eq!(roles.service_cpu(), roles.side_cpu(FloorLoop::PingPong, 1));
    }

    #[test]
    fn a_sparse_clock_reads_at_every_slow_step_and_every_64th_fast_one() {
        let mut c = SparseClock::on(fake);
        assert_eq!(readings(&mut c, 100, 2_000), (1..=100).collect::<Vec<_>>());
        // The first fast step is read (the steps before it were slow), then every 64th.
        let fast = readings(&mut c, 640, 10);
        assert_eq!(fast, (101..=740).step_by(64).collect::<Vec<_>>());
        // Slow again: seen at the next reading, 64 steps on, and read at each step from then.
        let slow = readings(&mut c, 100, 100_000);
        assert_eq!(slow[0], 741);
        assert_eq!(slow[1..], (742..=840).collect::<Vec<_>>());
    }

    #[test]
    fn a_read_window_counts_exactly_the_reads_between_its_readings() {
        let mut w = ReadWindow::on(Duration::from_micros(100), SparseClock::on(fake));
        // 1000 fast reads (10 ns each) of 8 bytes: the warm-up (100 us) outlasts them.
        for _ in 0..1000 {
            pass(10);
            w.read_bytes(8);
        }
        assert!(!w.measured());
        // 100 us later, 10000 more: the window opens at the first reading and closes at the
        // last (every 64th read), and holds the reads and bytes between those two.
        pass(100_000);
        for _ in 0..10_000 {
            pass(10);
            w.read_bytes(8);
        }
        assert!(w.measured());
        let f = w.figure_of_bytes();
        let (reads, ns) = (w.last.reads - w.start.reads, w.last.ns - w.start.ns);
        assert!(reads > 9_900, "{reads}");
        assert_eq!(ns, reads * 10);
        let per_s = reads as f64 / (ns as f64 / 1e9);
        assert!((f.msgs_per_s.unwrap() - per_s).abs() < 1.0, "{f:?}");
        assert!((f.bytes_per_s.unwrap() - 8.0 * per_s).abs() < 8.0, "{f:?}");
        assert!(w.lasted(Duration::from_micros(99)));
        assert!(!w.lasted(Duration::from_micros(101)));
    }
}
