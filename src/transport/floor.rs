//! The floor: the plainest loop each transport allows, with no harness: raw `read`/`write` on
//! descriptors made by the standard library, samples kept in a preallocated vector. Every ratio
//! msgperf prints divides by a figure measured here, in the same placement as the run.
//!
//! The peer runs in a forked child (when roles are processes) or a thread (`--threads`).

#![allow(unsafe_code)]

use crate::sys;
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Where and how long the floor loop runs: the same placement as the run it divides.
#[derive(Clone, Debug)]
pub struct FloorRoles {
    /// CPUs of the measuring side and of its peer.
    pub cpus: (Option<usize>, Option<usize>),
    /// Peer in a forked process (true) or a thread.
    pub processes: bool,
    pub warmup: Duration,
    pub duration: Duration,
    /// The transport's `--opt` values (the shm floor follows its wait strategy).
    pub options: std::collections::BTreeMap<String, String>,
}

/// What a floor loop measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FloorFigure {
    /// Round trips (pingpong) or messages (stream) measured.
    pub samples: u64,
    pub rtt_min_ns: u64,
    pub rtt_p50_ns: u64,
    pub rtt_mean_ns: u64,
    pub msgs_per_s: f64,
    pub bytes_per_s: f64,
}

/// Which plain loop a figure divides by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloorKind {
    RoundTrip,
    Stream,
}

/// A transport's plain loops.
pub trait Floor: Sync {
    /// Ping-pong of `size`-byte messages: round-trip figures.
    fn pingpong(&self, size: usize, roles: &FloorRoles) -> std::io::Result<FloorFigure>;
    /// One-way stream of `size`-byte writes: bytes/s at the reader.
    fn stream(&self, size: usize, roles: &FloorRoles) -> std::io::Result<FloorFigure>;
    fn measure(
        &self,
        kind: FloorKind,
        size: usize,
        roles: &FloorRoles,
    ) -> std::io::Result<FloorFigure> {
        match kind {
            FloorKind::RoundTrip => self.pingpong(size, roles),
            FloorKind::Stream => self.stream(size, roles),
        }
    }
}

/// One side of a descriptor channel: one socket, or a pipe's read end and the other pipe's
/// write end.
pub struct FdSide {
    pub read: OwnedFd,
    pub write: Option<OwnedFd>,
}

impl FdSide {
    fn fds(&self) -> (RawFd, RawFd) {
        let r = self.read.as_raw_fd();
        (r, self.write.as_ref().map_or(r, |w| w.as_raw_fd()))
    }
}

/// The floor of every descriptor transport: only how the pair is made differs.
pub struct FdFloor {
    pub make_pair: fn() -> std::io::Result<(FdSide, FdSide)>,
    /// Datagrams: one read is one message; zero-length datagram means end.
    pub datagram: bool,
}

/// Runs `body` as the peer: in a forked child or a pinned thread.
pub(crate) enum Peer {
    Process(u32),
    Thread(std::thread::JoinHandle<i32>),
}

pub(crate) fn start_peer(
    roles: &FloorRoles,
    body: impl FnOnce() -> i32 + Send + 'static,
) -> std::io::Result<Peer> {
    let cpu = roles.cpus.1;
    let body = move || {
        if let Some(c) = cpu {
            let _ = sys::pin_current_thread(c);
        }
        body()
    };
    if roles.processes {
        Ok(Peer::Process(sys::fork_child(body)?))
    } else {
        Ok(Peer::Thread(std::thread::spawn(body)))
    }
}

impl Peer {
    pub(crate) fn finish(self, timeout: Duration) {
        match self {
            Peer::Process(pid) => {
                sys::reap(pid, timeout);
            }
            Peer::Thread(h) => {
                // The peer ends when its descriptors report end of stream, which our side's
                // drop caused; a thread cannot be killed, so this join is bounded by that.
                let _ = h.join();
            }
        }
    }
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
    FloorFigure {
        samples: n,
        rtt_min_ns: samples[0] as u64,
        rtt_p50_ns: samples[samples.len() / 2] as u64,
        rtt_mean_ns: sum / n,
        msgs_per_s: n as f64 * 1e9 / sum.max(1) as f64,
        bytes_per_s: 0.0,
    }
}

/// The most samples a floor keeps (4 MB): enough for seconds of the fastest transport.
pub(crate) const MAX_SAMPLES: usize = 1 << 20;

/// Runs `f` pinned as `roles` says, then restores this thread's mask.
pub(crate) fn pinned<T>(roles: &FloorRoles, f: impl FnOnce() -> T) -> T {
    sys::with_cpu(roles.cpus.0, f)
}

impl Floor for FdFloor {
    fn pingpong(&self, size: usize, roles: &FloorRoles) -> std::io::Result<FloorFigure> {
        let (a, b) = (self.make_pair)()?;
        let datagram = self.datagram;
        let mut peer_buf = vec![0u8; size];
        let ours = a.fds();
        let forked = roles.processes;
        let peer = start_peer(roles, move || {
            if forked {
                // The fork copied our side's descriptors: close them, or the peer would never
                // see the end of the channel.
                sys::close(ours.0);
                sys::close(ours.1);
            }
            let (r, w) = b.fds();
            while read_msg(r, &mut peer_buf, datagram) {
                if !write_msg(w, &peer_buf) {
                    break;
                }
            }
            drop(b);
            0
        })?;
        let (r, w) = a.fds();
        let mut buf = vec![0u8; size];
        let mut samples: Vec<u32> = Vec::with_capacity(MAX_SAMPLES);
        let ok = pinned(roles, || {
            let warm_end = sys::monotonic_ns() + roles.warmup.as_nanos() as u64;
            let end = warm_end + roles.duration.as_nanos() as u64;
            loop {
                let t0 = sys::monotonic_ns();
                if !write_msg(w, &buf) || !read_msg(r, &mut buf, datagram) {
                    return false;
                }
                let t1 = sys::monotonic_ns();
                if t0 >= warm_end {
                    samples.push((t1 - t0).min(u32::MAX as u64) as u32);
                }
                if t1 >= end || samples.len() == MAX_SAMPLES {
                    return true;
                }
            }
        });
        if datagram {
            sys::write(w, &[]);
        }
        drop(a);
        peer.finish(Duration::from_secs(5));
        if !ok {
            return Err(std::io::Error::other("the floor's peer stopped answering"));
        }
        Ok(rtt_figure(&mut samples))
    }

    fn stream(&self, size: usize, roles: &FloorRoles) -> std::io::Result<FloorFigure> {
        let (a, b) = (self.make_pair)()?;
        let datagram = self.datagram;
        let total = (roles.warmup + roles.duration).as_nanos() as u64;
        let peer_buf = vec![7u8; size];
        let peer = start_peer(roles, move || {
            let (_, w) = b.fds();
            let end = sys::monotonic_ns() + total;
            while sys::monotonic_ns() < end {
                if !write_msg(w, &peer_buf) {
                    break;
                }
            }
            if datagram {
                // The end mark may be dropped like any datagram: send a few.
                for _ in 0..20 {
                    sys::write(w, &[]);
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            drop(b);
            0
        })?;
        let (r, _) = a.fds();
        if datagram {
            set_read_timeout(r, Duration::from_secs(1));
        }
        let mut buf = vec![0u8; size];
        let (bytes, msgs, ns) = pinned(roles, || {
            let warm = roles.warmup.as_nanos() as u64;
            let (mut first, mut start, mut last, mut bytes, mut msgs) =
                (0u64, 0u64, 0u64, 0u64, 0u64);
            loop {
                let n = sys::read(r, &mut buf);
                if n <= 0 {
                    break;
                }
                let now = sys::monotonic_ns();
                if first == 0 {
                    first = now;
                }
                if now >= first + warm {
                    if msgs == 0 {
                        start = now;
                    } else {
                        bytes += n as u64;
                    }
                    last = now;
                    msgs += 1;
                }
            }
            // The first measured read opens the window; the bytes after it are inside it.
            (bytes, msgs.saturating_sub(1), last.saturating_sub(start))
        });
        drop(a);
        peer.finish(Duration::from_secs(5));
        let secs = ns.max(1) as f64 / 1e9;
        Ok(FloorFigure {
            samples: msgs,
            bytes_per_s: bytes as f64 / secs,
            msgs_per_s: if datagram {
                msgs as f64 / secs
            } else {
                bytes as f64 / size as f64 / secs
            },
            ..Default::default()
        })
    }
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

/// The hardware's floor for a round trip: two threads bouncing one cache line each way.
/// Threads sharing one CPU must yield to each other (spin-yield), else they would spin out
/// their whole time slice.
pub fn spin_pingpong(roles: &FloorRoles) -> FloorFigure {
    use std::sync::atomic::{AtomicU64, Ordering};
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
    let mut samples: Vec<u32> = Vec::with_capacity(MAX_SAMPLES);
    pinned(roles, || {
        let warm_end = sys::monotonic_ns() + roles.warmup.as_nanos() as u64;
        let end = warm_end + roles.duration.as_nanos() as u64;
        let mut i = 0u64;
        loop {
            i += 1;
            let t0 = sys::monotonic_ns();
            ping.0.store(i, Ordering::Release);
            while pong.0.load(Ordering::Acquire) != i {
                if yield_ {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            let t1 = sys::monotonic_ns();
            if t0 >= warm_end {
                samples.push((t1 - t0).min(u32::MAX as u64) as u32);
            }
            if t1 >= end || samples.len() == MAX_SAMPLES {
                break;
            }
        }
    });
    ping.0.store(DONE, Ordering::Release);
    let _ = peer.join();
    rtt_figure(&mut samples)
}

/// The hardware's floor for moving bytes: memcpy of `size`-byte blocks on one CPU, reading
/// its way through a 16 MiB region (as a reader walks a ring) rather than one block that
/// stays in the first-level cache.
pub fn memcpy_bandwidth(size: usize, roles: &FloorRoles) -> FloorFigure {
    let region = (16usize << 20).max(size);
    let src = vec![7u8; region];
    let mut dst = vec![0u8; size];
    let blocks = region / size;
    let (copies, ns) = pinned(roles, || {
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
    let secs = ns.max(1) as f64 / 1e9;
    FloorFigure {
        samples: copies,
        msgs_per_s: copies as f64 / secs,
        bytes_per_s: copies as f64 * size as f64 / secs,
        ..Default::default()
    }
}
