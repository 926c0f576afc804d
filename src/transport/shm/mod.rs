//! `shm`: msgperf's own shared-memory transport. A segment in /dev/shm holds two rings, one per
//! direction (see `ring.rs`), or for a topic (native fan-out, `topic.rs`) one ring that every
//! reader reads and one per reader for its answers. The file is removed as soon as every peer
//! has mapped it, so nothing is left behind even if all sides are killed afterwards.
//!
//! Options: `buffer=queue|latest` (FIFO ring, or a newest-value slot that writes overwrite),
//! `wait=spin|spin-yield|block` (busy poll, poll then yield the CPU, or sleep on a futex until
//! woken), `zero-copy=true` (messages built and read in place), `capacity=256k` (bytes of each
//! ring), `full=wait|fail` (a full queue makes the writer wait, or fail and count it),
//! `fan-out=shared|copy` (pubsub: one shared ring, or a channel per subscriber).

#![allow(unsafe_code)]

mod endpoint;
mod floor;
pub mod ring;
mod topic;

use super::{
    Capabilities, ChannelSpec, Endpoint, Floor, Listener, MulticastListener, OptionSpec,
    Rendezvous, Transport, TransportError,
};
use crate::deadline::Deadline;
use endpoint::{Peer, RingReader, RingWriter, ShmEndpoint};
use memmap2::MmapRaw;
use ring::{
    Header, Ring, ATTACHED, ATTACHER_CLOSED, CREATOR_CLOSED, MAGIC, MAX_READERS, MODE_LATEST,
    MODE_QUEUE, VERSION,
};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

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
            OptionSpec { key: "fan-out", default: "shared", about: "pubsub: one ring that every subscriber reads (queue only), or a channel and a copy per subscriber", values: &["shared", "copy"] },
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
            native_fan_out: if !latest && o.get("fan-out").is_none_or(|f| f == "shared") {
                MAX_READERS
            } else {
                0
            },
        }
    }

    fn listen(&self, spec: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        let cfg = Config::from(spec)?;
        let path = match &spec.listen_at {
            Some(n) => segment_path(n),
            None => fresh_path(),
        };
        remove_if_stale(&path);
        // Made now, so that a peer may attach as soon as the rendezvous is known.
        let created = Some(create_segment(&path, &cfg, 0)?);
        Ok(Box::new(ShmListener { path, cfg, created }))
    }

    fn multicast(
        &self,
        spec: &ChannelSpec,
        readers: usize,
    ) -> Result<Box<dyn MulticastListener>, TransportError> {
        let cfg = Config::from(spec)?;
        if cfg.mode == MODE_LATEST {
            return Err(TransportError::Unsupported(
                "shm's shared fan-out is a queue: use --opt buffer=queue, or --opt fan-out=copy"
                    .into(),
            ));
        }
        if !(1..=MAX_READERS).contains(&readers) {
            return Err(TransportError::Unsupported(format!(
                "shm's shared ring takes 1 to {MAX_READERS} readers, not {readers}: use --opt fan-out=copy"
            )));
        }
        let path = fresh_path();
        let map = Some(create_segment(&path, &cfg, readers)?);
        Ok(Box::new(topic::TopicListener {
            path,
            cfg,
            readers,
            map,
        }))
    }

    fn connect(
        &self,
        at: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let cfg = Config::from(spec)?;
        // A topic's reader k joins at `PATH#k`.
        let (name, slot) = match at.address.rsplit_once('#') {
            Some((n, k)) if k.parse::<usize>().is_ok() => (n, k.parse().ok()),
            _ => (at.address.as_str(), None),
        };
        let path = segment_path(name);
        let deadline = Deadline::after(spec.timeout);
        // A server offers one segment at a time and a fresh one as soon as a peer took it:
        // a connector that lost the race for it, or came while it was being replaced, retries.
        let mut replacing = Deadline::after(Duration::from_millis(200));
        loop {
            match attach(&path, slot, &cfg, spec, &deadline) {
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
    slot: Option<usize>,
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
    let readers = h.readers.load(Ordering::Acquire) as usize;
    if readers > MAX_READERS || map.len() < ring::segment_bytes(ring_bytes, 1 + readers.max(1)) {
        return Err(TransportError::Corrupt(format!(
            "segment {} is shorter than its header says",
            path.display()
        )));
    }
    if readers > 0 {
        return join_topic(map, path, slot, *cfg, spec, readers);
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
    let peer = Peer {
        closed: CREATOR_CLOSED,
        pid: h.creator_pid.load(Ordering::SeqCst),
    };
    Ok(Box::new(pair_side(map, 1, *cfg, spec.timeout, peer)))
}

/// Joins a topic as reader `slot` (or the first free one): reads ring 0 as its reader `k`,
/// answers on ring `1 + k`.
fn join_topic(
    map: MmapRaw,
    path: &Path,
    slot: Option<usize>,
    cfg: Config,
    spec: &ChannelSpec,
    readers: usize,
) -> Result<Box<dyn Endpoint>, TransportError> {
    let h = header(&map);
    let me = std::process::id();
    let claim = |k: usize| {
        h.reader_pids[k]
            .compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    };
    let k = match slot {
        Some(k) if k < readers && claim(k) => Some(k),
        Some(_) => None,
        None => (0..readers).find(|&k| claim(k)),
    }
    .ok_or_else(|| {
        TransportError::Unsupported(format!(
            "topic {} has no free reader place {}(it takes {readers})",
            path.display(),
            slot.map(|k| format!("#{k} ")).unwrap_or_default()
        ))
    })?;
    let ring_bytes = h.ring_bytes.load(Ordering::Acquire) as usize;
    // SAFETY: the segment was checked to hold 1 + readers rings; `map` outlives them (both
    // live in the endpoint).
    let (shared, answers) = unsafe {
        (
            Ring::new(map.as_mut_ptr(), 0, ring_bytes),
            Ring::new(map.as_mut_ptr(), 1 + k, ring_bytes),
        )
    };
    // Active before it counts as joined: the writer waits for it from its first message.
    let rx = RingReader::join(shared, k);
    h.joined.fetch_add(1, Ordering::SeqCst);
    let peer = Peer {
        closed: CREATOR_CLOSED,
        pid: h.creator_pid.load(Ordering::SeqCst),
    };
    Ok(Box::new(ShmEndpoint {
        tx: RingWriter::new(answers),
        rx,
        cfg,
        timeout: spec.timeout,
        peer,
        my_closed: ring::reader_closed(k),
        map,
    }))
}

/// A pair's side 0 (creator) or 1 (attacher): writes ring `side`, reads the other.
fn pair_side(map: MmapRaw, side: usize, cfg: Config, timeout: Duration, peer: Peer) -> ShmEndpoint {
    let ring_bytes = header(&map).ring_bytes.load(Ordering::Acquire) as usize;
    // SAFETY: the mapping was checked to hold both rings and lives in the endpoint as long as
    // they do.
    let (tx, rx) = unsafe {
        (
            Ring::new(map.as_mut_ptr(), side, ring_bytes),
            Ring::new(map.as_mut_ptr(), 1 - side, ring_bytes),
        )
    };
    ShmEndpoint {
        tx: RingWriter::new(tx),
        rx: RingReader::join(rx, 0),
        cfg,
        timeout,
        peer,
        my_closed: if side == 0 {
            CREATOR_CLOSED
        } else {
            ATTACHER_CLOSED
        },
        map,
    }
}

/// A fresh segment path of this process.
fn fresh_path() -> PathBuf {
    use std::sync::atomic::AtomicU32;
    static N: AtomicU32 = AtomicU32::new(0);
    PathBuf::from(SHM_DIR).join(format!(
        "msgperf-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Creates a segment at `path`: a pair (`readers == 0`) or a topic for `readers` readers.
fn create_segment(path: &Path, cfg: &Config, readers: usize) -> Result<MmapRaw, TransportError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                TransportError::AddressInUse(path.display().to_string())
            }
            _ => e.into(),
        })?;
    file.set_len(ring::segment_bytes(cfg.ring_bytes, 1 + readers.max(1)) as u64)?;
    let map = MmapRaw::map_raw(&file)?;
    let h = header(&map);
    h.version.store(VERSION, Ordering::Relaxed);
    h.mode.store(cfg.mode, Ordering::Relaxed);
    h.ring_bytes.store(cfg.ring_bytes as u64, Ordering::Relaxed);
    h.readers.store(readers as u32, Ordering::Relaxed);
    h.creator_pid.store(std::process::id(), Ordering::Relaxed);
    h.magic.store(MAGIC, Ordering::Release);
    Ok(map)
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
pub(super) enum WaitKind {
    Spin,
    SpinYield,
    Block,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Config {
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
        // take at most half the ring), with its cell of address in a topic.
        let ring_bytes = ring_bytes
            .max(2 * (spec.max_message + 8 + ring::CELL).next_multiple_of(ring::CELL))
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

impl Listener for ShmListener {
    fn rendezvous(&self) -> Rendezvous {
        Rendezvous {
            transport: "shm".into(),
            address: self.path.display().to_string(),
        }
    }

    fn accept(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
        if self.created.is_none() {
            self.created = Some(create_segment(&self.path, &self.cfg, 0)?);
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
        self.created = create_segment(&self.path, &self.cfg, 0).ok();
        let peer = Peer {
            closed: ATTACHER_CLOSED,
            pid: header(&map).attacher_pid.load(Ordering::SeqCst),
        };
        Ok(Box::new(pair_side(map, 0, self.cfg, spec.timeout, peer)))
    }
}

impl Drop for ShmListener {
    fn drop(&mut self) {
        if self.created.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
