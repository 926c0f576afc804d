//! `shm`: msgperf's own shared-memory transport. A segment in /dev/shm holds two rings, one per
//! direction (see `ring.rs`); the file is removed as soon as the peer has mapped it, so nothing
//! is left behind even if both sides are killed afterwards.
//!
//! Options: `buffer=queue|latest` (FIFO ring, or a newest-value slot that writes overwrite),
//! `wait=spin|spin-yield|block` (busy poll, poll then yield the CPU, or sleep on a futex until
//! woken), `zero-copy=true` (messages built and read in place), `capacity=256k` (bytes of each
//! ring), `full=wait|fail` (a full queue makes the writer wait, or fail and count it).

#![allow(unsafe_code)]

mod floor;
pub mod ring;

use super::{
    Capabilities, ChannelSpec, Endpoint, Floor, Listener, OptionSpec, Rendezvous, Transport,
    TransportError,
};
use crate::deadline::Deadline;
use memmap2::MmapRaw;
use ring::{
    Header, Ring, ATTACHED, ATTACHER_CLOSED, CREATOR_CLOSED, MAGIC, MODE_LATEST, MODE_QUEUE,
    VERSION,
};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub struct Shm;

/// Where segments live.
const SHM_DIR: &str = "/dev/shm";

impl Transport for Shm {
    fn name(&self) -> &'static str {
        "shm"
    }
    fn about(&self) -> &'static str {
        "msgperf's shared-memory rings: queue or latest-value, spin/spin-yield/block waits, zero-copy"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec { key: "buffer", default: "queue", about: "queue: FIFO ring, never overwrites; latest: one slot, readers get the newest", values: &["queue", "latest"] },
            OptionSpec { key: "wait", default: "spin-yield", about: "how a side waits: spin (busy), spin-yield (spin 2 us, then yield), block (futex sleep)", values: &["spin", "spin-yield", "block"] },
            OptionSpec { key: "zero-copy", default: "false", about: "build and read messages in place in the segment (queue only)", values: &["true", "false"] },
            OptionSpec { key: "capacity", default: "256k", about: "bytes of each ring (grown to twice the largest message); a message may take up to half of it", values: &[] },
            OptionSpec { key: "full", default: "wait", about: "a full queue makes the writer wait, or fail (counted as send_full)", values: &["wait", "fail"] },
        ]
    }
    fn capabilities(&self) -> Capabilities {
        self.capabilities_with(&BTreeMap::new())
    }
    fn capabilities_with(&self, o: &BTreeMap<String, String>) -> Capabilities {
        let latest = o.get("buffer").is_some_and(|b| b == "latest");
        let fail = o.get("full").is_some_and(|f| f == "fail");
        Capabilities {
            reliable: !latest && !fail,
            ordered: true,
            // The ring grows to hold twice the largest message the channel carries.
            max_message_bytes: 1 << 30,
            cross_process: true,
            cross_host: false,
            latest_value: latest,
            zero_copy: !latest && o.get("zero-copy").is_some_and(|z| z == "true"),
            many_peers: true,
        }
    }

    fn listen(&self, spec: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        let cfg = Config::from(spec)?;
        let path = match &spec.listen_at {
            Some(n) => segment_path(n),
            None => {
                use std::sync::atomic::AtomicU32;
                static N: AtomicU32 = AtomicU32::new(0);
                PathBuf::from(SHM_DIR).join(format!(
                    "msgperf-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ))
            }
        };
        remove_if_stale(&path);
        let mut l = ShmListener {
            path,
            cfg,
            created: None,
        };
        // Made now, so that a peer may attach as soon as the rendezvous is known.
        l.created = Some(l.create()?);
        Ok(Box::new(l))
    }

    fn connect(
        &self,
        at: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let cfg = Config::from(spec)?;
        let path = segment_path(&at.address);
        let deadline = Deadline::after(spec.timeout);
        // A server offers one segment at a time and a fresh one as soon as a peer took it:
        // a connector that lost the race for it, or came while it was being replaced, retries.
        let mut replacing = Deadline::after(Duration::from_millis(200));
        loop {
            match attach(&path, &cfg, spec, &deadline) {
                Err(TransportError::AddressInUse(_)) if !deadline.expired() => {
                    replacing = Deadline::after(Duration::from_millis(200));
                }
                Err(TransportError::Refused(_)) if !replacing.expired() && !deadline.expired() => {}
                r => return r,
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn delivery_options(
        &self,
        best_effort: bool,
        latest: bool,
    ) -> Result<BTreeMap<String, String>, String> {
        let mut o = BTreeMap::new();
        if latest {
            o.insert("buffer".into(), "latest".into());
        } else if best_effort {
            o.insert("full".into(), "fail".into());
        }
        Ok(o)
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::ShmFloor)
    }
}

/// Opens, checks and attaches to the segment at `path`, once.
fn attach(
    path: &Path,
    cfg: &Config,
    spec: &ChannelSpec,
    deadline: &Deadline,
) -> Result<Box<dyn Endpoint>, TransportError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => TransportError::Refused(path.display().to_string()),
            _ => e.into(),
        })?;
    // The creator may still be sizing and initializing the segment: wait for its magic.
    let map = loop {
        let len = file.metadata()?.len() as usize;
        if len >= ring::HEADER_BYTES {
            let map = MmapRaw::map_raw(&file)?;
            let magic = header(&map).magic.load(Ordering::Acquire);
            if magic == MAGIC {
                break map;
            }
            if magic != 0 {
                return Err(TransportError::Unsupported(format!(
                        "{} is not a msgperf segment (foreign magic {magic:#x}): remove it or pick another --name",
                        path.display()
                    )));
            }
        }
        if deadline.expired() {
            return Err(TransportError::Timeout(spec.timeout));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let h = header(&map);
    let version = h.version.load(Ordering::Acquire);
    if version != VERSION {
        return Err(TransportError::Unsupported(format!(
                "segment {} has layout version {version}, this msgperf speaks {VERSION}: run the same msgperf on both sides",
                path.display()
            )));
    }
    if h.mode.load(Ordering::Acquire) != cfg.mode {
        return Err(TransportError::Unsupported(format!(
            "segment {} was made with another --opt buffer: use the same options on both sides",
            path.display()
        )));
    }
    let ring_bytes = h.ring_bytes.load(Ordering::Acquire) as usize;
    if map.len() < ring::segment_bytes(ring_bytes) {
        return Err(TransportError::Corrupt(format!(
            "segment {} is shorter than its header says",
            path.display()
        )));
    }
    if h.state
        .compare_exchange(0, ATTACHED, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return Err(TransportError::AddressInUse(format!(
            "{} (another peer is attached)",
            path.display()
        )));
    }
    h.attacher_pid.store(std::process::id(), Ordering::SeqCst);
    let peer = h.creator_pid.load(Ordering::SeqCst);
    ShmEndpoint::new(
        map,
        1,
        *cfg,
        spec.timeout,
        peer,
        ATTACHER_CLOSED,
        CREATOR_CLOSED,
    )
    .map(|e| Box::new(e) as Box<dyn Endpoint>)
}

/// A name (`demo`) or a path: names live in /dev/shm as `msgperf-NAME`.
fn segment_path(name: &str) -> PathBuf {
    if name.starts_with('/') {
        PathBuf::from(name)
    } else {
        PathBuf::from(SHM_DIR).join(format!("msgperf-{name}"))
    }
}

/// A segment whose creator died before a peer attached is removed; a live one is left alone.
pub(crate) fn remove_if_stale(path: &Path) {
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let Ok(map) = MmapRaw::map_raw(&file) else {
        return;
    };
    if map.len() < ring::HEADER_BYTES {
        return;
    }
    let pid = header(&map).creator_pid.load(Ordering::Acquire);
    if pid == 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        let _ = std::fs::remove_file(path);
    }
}

fn header(map: &MmapRaw) -> &Header {
    // SAFETY: callers checked the mapping holds at least the header page; Header is all atomics.
    unsafe { &*(map.as_mut_ptr() as *const Header) }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitKind {
    Spin,
    SpinYield,
    Block,
}

#[derive(Clone, Copy, Debug)]
struct Config {
    mode: u32,
    wait: WaitKind,
    ring_bytes: usize,
    full_fail: bool,
}

/// Bytes of each ring unless `--opt capacity` says otherwise.
pub(crate) const DEFAULT_CAPACITY: usize = 256 << 10;

impl Config {
    fn from(spec: &ChannelSpec) -> Result<Self, TransportError> {
        let ring_bytes = match spec.option("capacity") {
            // Measured: a ring that stays in the second-level cache moves 64 KiB messages 1.5x
            // faster than a 16 MiB one, and queues far less (see the README).
            None => DEFAULT_CAPACITY,
            Some(c) => crate::units::parse_size(c)
                .ok()
                .filter(|&n| (4096..=1 << 32).contains(&n))
                .ok_or_else(|| {
                    TransportError::Unsupported(format!(
                        "--opt capacity={c}: give bytes from 4k to 4G, e.g. 1M"
                    ))
                })?,
        };
        // Room for the largest message the channel will carry, twice (a queue message may
        // take at most half the ring).
        let ring_bytes = ring_bytes
            .max(2 * (spec.max_message + 8).next_multiple_of(ring::CELL))
            .next_multiple_of(ring::CELL);
        Ok(Config {
            mode: if spec.option("buffer") == Some("latest") {
                MODE_LATEST
            } else {
                MODE_QUEUE
            },
            wait: match spec.option("wait") {
                Some("spin") => WaitKind::Spin,
                Some("block") => WaitKind::Block,
                _ => WaitKind::SpinYield,
            },
            ring_bytes,
            full_fail: spec.option("full") == Some("fail"),
        })
    }
}

struct ShmListener {
    path: PathBuf,
    cfg: Config,
    /// The segment made for the next peer, until one attaches.
    created: Option<MmapRaw>,
}

impl ShmListener {
    fn create(&self) -> Result<MmapRaw, TransportError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => {
                    TransportError::AddressInUse(self.path.display().to_string())
                }
                _ => e.into(),
            })?;
        file.set_len(ring::segment_bytes(self.cfg.ring_bytes) as u64)?;
        let map = MmapRaw::map_raw(&file)?;
        let h = header(&map);
        h.version.store(VERSION, Ordering::Relaxed);
        h.mode.store(self.cfg.mode, Ordering::Relaxed);
        h.ring_bytes
            .store(self.cfg.ring_bytes as u64, Ordering::Relaxed);
        h.creator_pid.store(std::process::id(), Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
        Ok(map)
    }
}

impl Listener for ShmListener {
    fn rendezvous(&self) -> Rendezvous {
        Rendezvous {
            transport: "shm".into(),
            address: self.path.display().to_string(),
        }
    }

    fn accept(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
        if self.created.is_none() {
            self.created = Some(self.create()?);
        }
        let deadline = Deadline::after(spec.timeout);
        let map = self.created.as_ref().expect("created above");
        // Poll for the peer's attach, backing off to 5 ms so an idle server costs nothing.
        let mut pause = Duration::from_micros(100);
        while header(map).state.load(Ordering::Acquire) & ATTACHED == 0 {
            if deadline.expired() {
                return Err(TransportError::Timeout(spec.timeout));
            }
            std::thread::sleep(pause.min(deadline.remaining_nonzero()));
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        // Both sides have it mapped: the name is no longer needed, and goes to a fresh
        // segment at once, ready for the next peer of a server.
        let _ = std::fs::remove_file(&self.path);
        let map = self.created.take().expect("created above");
        self.created = self.create().ok();
        let peer = header(&map).attacher_pid.load(Ordering::SeqCst);
        Ok(Box::new(ShmEndpoint::new(
            map,
            0,
            self.cfg,
            spec.timeout,
            peer,
            CREATOR_CLOSED,
            ATTACHER_CLOSED,
        )?))
    }
}

impl Drop for ShmListener {
    fn drop(&mut self) {
        if self.created.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// One side of a shm channel: writes ring `side`, reads ring `1 - side` as reader 0.
struct ShmEndpoint {
    /// Keeps the segment mapped while the rings point into it.
    map: MmapRaw,
    tx: Ring,
    rx: Ring,
    cfg: Config,
    timeout: Duration,
    /// Where the next message is written, and the slowest reader's position as last seen.
    w: u64,
    min_reader: u64,
    /// Where the next message is read, and the writer's position as last seen.
    r: u64,
    written: u64,
    /// Latest mode: the version of the last message read.
    seen: u64,
    peer_pid: u32,
    my_closed: u32,
    peer_closed: u32,
}

/// How long spin-yield spins before it starts yielding.
const SPIN_BUDGET: Duration = Duration::from_micros(2);

impl ShmEndpoint {
    fn new(
        map: MmapRaw,
        side: usize,
        cfg: Config,
        timeout: Duration,
        peer_pid: u32,
        my_closed: u32,
        peer_closed: u32,
    ) -> Result<Self, TransportError> {
        let ring_bytes = header(&map).ring_bytes.load(Ordering::Acquire) as usize;
        // SAFETY: the mapping was checked to hold both rings and lives in `map` as long as they.
        let (tx, rx) = unsafe {
            (
                Ring::new(map.as_mut_ptr(), side, ring_bytes),
                Ring::new(map.as_mut_ptr(), 1 - side, ring_bytes),
            )
        };
        rx.ctl().readers[0].0.active.store(1, Ordering::SeqCst);
        let r = rx.ctl().readers[0].0.seq.load(Ordering::SeqCst);
        Ok(ShmEndpoint {
            map,
            tx,
            rx,
            cfg,
            timeout,
            w: 0,
            min_reader: 0,
            r,
            written: 0,
            seen: 0,
            peer_pid,
            my_closed,
            peer_closed,
        })
    }

    fn peer_gone(&self) -> bool {
        if header(&self.map).state.load(Ordering::Acquire) & self.peer_closed != 0 {
            return true;
        }
        self.peer_pid != 0 && !crate::sys::process_alive(self.peer_pid)
    }

    /// Waits until `ready()` with the configured strategy, within the timeout, noticing a dead
    /// peer. `futex` is what the other side wakes (block mode).
    fn wait(
        &self,
        futex: &ring::Futex,
        ready: &mut dyn FnMut() -> bool,
    ) -> Result<(), TransportError> {
        // The common case (the message is already there) pays no clock read.
        if ready() {
            return Ok(());
        }
        let start = Instant::now();
        let mut next_check = Duration::from_millis(5);
        let mut spins: u32 = 0;
        loop {
            if ready() {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            match self.cfg.wait {
                WaitKind::Spin => std::hint::spin_loop(),
                WaitKind::SpinYield if spins < 64 || start.elapsed() < SPIN_BUDGET => {
                    std::hint::spin_loop()
                }
                WaitKind::SpinYield => std::thread::yield_now(),
                WaitKind::Block => ring::sleep_until(futex, Duration::from_millis(20), ready),
            }
            // Time and the peer's life are checked every few milliseconds, not every spin.
            if self.cfg.wait == WaitKind::Block || spins.is_multiple_of(1024) {
                let waited = start.elapsed();
                if waited >= next_check {
                    next_check = waited + Duration::from_millis(5);
                    if ready() {
                        return Ok(());
                    }
                    if self.peer_gone() {
                        return Err(TransportError::PeerClosed);
                    }
                    if waited >= self.timeout {
                        return Err(TransportError::Timeout(self.timeout));
                    }
                }
            }
        }
    }

    fn block(&self) -> bool {
        self.cfg.wait == WaitKind::Block
    }

    fn queue_has_data(rx: &Ring, r: u64) -> bool {
        rx.write_pos() > r
    }

    fn latest_is_new(rx: &Ring, seen: u64) -> bool {
        let v = rx.latest_version();
        v.is_multiple_of(2) && v != seen && v != 0
    }
}

impl Endpoint for ShmEndpoint {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        self.send_with(msg.len(), &mut |slot| slot.copy_from_slice(msg))
    }

    fn send_with(
        &mut self,
        len: usize,
        build: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        let latest = self.cfg.mode == MODE_LATEST;
        let max = self.tx.max_message(latest);
        if len > max {
            return Err(TransportError::TooLarge { len, max });
        }
        if len < 4 {
            return Err(TransportError::Corrupt(format!(
                "a {len} B message cannot hold its 4-byte length"
            )));
        }
        if latest {
            self.tx.write_latest(build, len, self.block());
            return Ok(());
        }
        let w = self.w;
        let (start, end) = self.tx.place(w, len);
        if !self.tx.has_space(end, self.min_reader) {
            self.min_reader = self.tx.min_reader(w);
            if !self.tx.has_space(end, self.min_reader) {
                if self.cfg.full_fail {
                    return Err(TransportError::Full);
                }
                let tx = &self.tx;
                self.wait(&tx.ctl().space.0, &mut || {
                    tx.has_space(end, tx.min_reader(w))
                })?;
                self.min_reader = self.tx.min_reader(w);
            }
        }
        build(self.tx.record_for_write(w, start, len));
        self.tx.seal(start, len);
        self.tx.publish(end, self.block());
        self.w = end;
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        if self.cfg.mode == MODE_LATEST {
            loop {
                let (rx, seen) = (&self.rx, self.seen);
                self.wait(&rx.ctl().data.0, &mut || Self::latest_is_new(rx, seen))?;
                match self.rx.read_latest(buf) {
                    Ok(Some((n, v))) => {
                        self.seen = v;
                        return Ok(n);
                    }
                    Ok(None) => continue,
                    Err(len) => {
                        return Err(TransportError::TooLarge {
                            len,
                            max: buf.len(),
                        })
                    }
                }
            }
        }
        let mut out = Ok(0);
        self.recv_with(&mut |m| {
            out = if m.len() > buf.len() {
                Err(TransportError::TooLarge {
                    len: m.len(),
                    max: buf.len(),
                })
            } else {
                buf[..m.len()].copy_from_slice(m);
                Ok(m.len())
            }
        })?;
        out
    }

    fn recv_with(&mut self, read: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        if self.cfg.mode == MODE_LATEST {
            return Err(TransportError::Unsupported(
                "latest-value reads copy out under a seqlock; zero-copy needs --opt buffer=queue"
                    .into(),
            ));
        }
        let r = self.r;
        if self.written <= r {
            self.written = self.rx.write_pos();
            if self.written <= r {
                let rx = &self.rx;
                self.wait(&rx.ctl().data.0, &mut || Self::queue_has_data(rx, r))?;
                self.written = self.rx.write_pos();
            }
        }
        let (msg, next) = self.rx.record_for_read(r);
        let n = msg.len();
        read(msg);
        self.rx.release(0, next, self.block());
        self.r = next;
        Ok(n)
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let ready = if self.cfg.mode == MODE_LATEST {
            Self::latest_is_new(&self.rx, self.seen)
        } else {
            Self::queue_has_data(&self.rx, self.r)
        };
        if ready {
            return self.recv(buf).map(Some);
        }
        // Only the flag here (polling loops call this millions of times); a peer that died
        // without setting it is noticed by the caller's timeout.
        if header(&self.map).state.load(Ordering::Acquire) & self.peer_closed != 0 {
            return Err(TransportError::PeerClosed);
        }
        Ok(None)
    }
}

impl Drop for ShmEndpoint {
    fn drop(&mut self) {
        header(&self.map)
            .state
            .fetch_or(self.my_closed, Ordering::SeqCst);
        self.rx.ctl().readers[0].0.active.store(0, Ordering::SeqCst);
        // A peer asleep on either ring must notice that we left.
        for r in [&self.tx, &self.rx] {
            for f in [&r.ctl().data.0, &r.ctl().space.0] {
                f.word.fetch_add(1, Ordering::SeqCst);
                ring::futex_wake(&f.word);
            }
        }
    }
}
