//! `shm`: msgperf's own shared-memory transport. A case's set-up makes one segment file in
//! /dev/shm per channel (two rings, one per direction, see `ring.rs`) and one per topic (native
//! fan-out, `topic.rs`: one ring that every reader reads). Each role maps its segment and claims
//! its side (or its reader place) with its process id; the file is removed as soon as every side
//! has mapped it, and by the set-up's guard at the latest, so nothing is left behind even if
//! every side is killed.
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
    check_flag, Capabilities, ChannelSpec, DeliveryMap, Floor, Opening, OptionSpec, Options, Place,
    Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::deadline::Deadline;
use crate::delivery::{Delivery, History, Reliability, Setting};
use crate::transport::{EndpointResult, OpenResult};
use endpoint::{Peer, RingReader, RingWriter, ShmEndpoint};
use memmap2::MmapRaw;
use ring::{side_closed, Header, Ring, MAGIC, MAX_READERS, MODE_LATEST, MODE_QUEUE, VERSION};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub struct Shm;

/// Where segments live.
const SHM_DIR: &str = "/dev/shm";

/// The smallest and largest `--opt capacity`.
const MIN_CAPACITY: usize = 4096;
const MAX_CAPACITY: usize = 1 << 32;

impl Transport for Shm {
    fn name(&self) -> &'static str {
        "shm"
    }
    fn about(&self) -> &'static str {
        "msgperf's shared-memory rings: queue or latest-value, spin/spin-yield/block waits, zero-copy"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec { key: "buffer", default: "queue", about: "queue: FIFO ring, never overwrites; latest: one slot, readers get the newest", values: &["queue", "latest"], check: None },
            OptionSpec { key: "wait", default: "spin-yield", about: "how a side waits: spin (busy), spin-yield (spin 2 us, then yield), block (futex sleep)", values: &["spin", "spin-yield", "block"], check: None },
            OptionSpec { key: "zero-copy", default: "false", about: "build and read messages in place in the segment (queue only)", values: &[], check: Some(check_flag) },
            OptionSpec { key: "capacity", default: "256k", about: "bytes of each ring (grown to twice the largest message); a message may take up to half of it", values: &[], check: Some(|v| super::check_size(v, MIN_CAPACITY, MAX_CAPACITY)) },
            OptionSpec { key: "full", default: "wait", about: "a full queue makes the writer wait, or fail (counted as send_full)", values: &["wait", "fail"], check: None },
            OptionSpec { key: "fan-out", default: "shared", about: "pubsub: one ring that every subscriber reads (queue only), or a channel and a copy per subscriber", values: &["shared", "copy"], check: None },
        ]
    }
    fn capabilities(&self, o: &Options) -> Capabilities {
        let latest = o.get("buffer").is_some_and(|b| b == "latest");
        let fail = o.get("full").is_some_and(|f| f == "fail");
        Capabilities {
            reliable: !latest && !fail,
            // The ring grows to hold twice the largest message the channel carries.
            max_message_bytes: 1 << 30,
            cross_process: true,
            latest_value: latest,
            zero_copy: !latest && o.get("zero-copy").is_some_and(|z| z == "true"),
            native_fan_out: if !latest && o.get("fan-out").is_none_or(|f| f == "shared") {
                MAX_READERS
            } else {
                0
            },
            notices_closed_peer: true,
            set_up_holds_descriptors: true,
            ..Capabilities::default()
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let mut m = DeliveryMap::default();
        let latest = match d.history {
            History::KeepAll => false,
            History::KeepLast(1) => true,
            History::KeepLast(n) => return Err(format!("shm's latest-value buffer keeps the newest message only, not the last {n}: use --history latest (the newest) or fifo")),
        };
        if latest && d.reliability == Some(Reliability::Reliable) {
            return Err("--history latest overwrites unread messages, so it cannot be --delivery reliable: use --delivery best-effort".into());
        }
        if latest {
            m.options.insert("buffer".into(), "latest".into());
            m.settings.push(Setting::new(
                "--opt buffer",
                "latest",
                "--history latest: one slot under a seqlock; readers get the newest message, overwritten ones are counted",
            ));
        } else if d.reliability == Some(Reliability::BestEffort) {
            m.options.insert("full".into(), "fail".into());
            m.settings.push(Setting::new(
                "--opt full",
                "fail",
                "--delivery best-effort: a full queue refuses the message (counted as send_full) instead of waiting for the slowest reader",
            ));
        }
        let mut effective = options.clone();
        effective.extend(m.options.clone());
        let caps = self.capabilities(&effective);
        m.strict = match d.reliability {
            Some(r) => r == Reliability::Reliable,
            None => caps.reliable,
        };
        m.latest = caps.latest_value;
        if !latest && d.reliability != Some(Reliability::BestEffort) {
            let full = effective.get("full").map_or("wait", String::as_str);
            m.settings.push(Setting::new(
                "--opt full",
                full,
                if full == "wait" {
                    "reliable: a full queue makes the writer wait for the slowest reader"
                } else {
                    "--opt full=fail: a full queue refuses the message; losses are counted"
                },
            ));
        }
        m.settings.push(Setting::new(
            "durability",
            "volatile",
            "a reader reads what is written after it joined",
        ));
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        let cfg = Config::from(spec)?;
        if cfg.mode == MODE_LATEST && !plan.topics.is_empty() {
            return Err(TransportError::Unsupported(
                "shm's shared fan-out is a queue: use --opt buffer=queue, or --opt fan-out=copy"
                    .into(),
            ));
        }
        for &readers in &plan.topics {
            if !(1..=MAX_READERS as u32).contains(&readers) {
                return Err(TransportError::Unsupported(format!(
                    "shm's shared ring takes 1 to {MAX_READERS} readers, not {readers}: use --opt fan-out=copy"
                )));
            }
        }
        // Each segment's name is removed as soon as it is made: the roles open it through this
        // process's descriptor, which goes with the process however it ends, so a killed run
        // leaves nothing in /dev/shm.
        let name = PathBuf::from(SHM_DIR).join(super::fresh_name());
        let me = std::process::id();
        let mut files = Vec::new();
        let mut made = |path: PathBuf, readers: u32| -> Result<String, TransportError> {
            let file = create_segment(&path, &cfg, readers as usize)?;
            let at = format!("/proc/{me}/fd/{}", file.as_raw_fd());
            files.push(file);
            Ok(at)
        };
        let channels = (0..plan.channels)
            .map(|c| made(channel_path(&name, c), 0))
            .collect::<Result<Vec<_>, _>>()?;
        let topics = (0..)
            .zip(&plan.topics)
            .map(|(t, &readers)| made(topic_path(&name, t), readers))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Setup::new(
            Rendezvous::new(self.name(), Place::Segments { channels, topics }),
            files,
        ))
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let cfg = Config::from(spec)?;
        let Place::Segments { channels, topics } = &at.place else {
            return Err(TransportError::Unsupported(
                "shm meets in segments its set-up made".into(),
            ));
        };
        let (path, topic) = match side {
            Side::Accept(c) | Side::Connect(c) => (channels.get(c as usize), false),
            Side::Publish { topic: t, .. } | Side::Subscribe { topic: t, .. } => {
                (topics.get(t as usize), true)
            }
        };
        let path = PathBuf::from(path.ok_or_else(|| {
            TransportError::Unsupported(format!(
                "the set-up made no segment for {}",
                side.meeting()
            ))
        })?);
        let map = map_segment(&path, &cfg, topic)?;
        let h = header(&map);
        let me = std::process::id();
        let claim = |pid: &AtomicU32, what: &str| {
            pid.compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst)
                .map(|_| ())
                .map_err(|_| {
                    TransportError::AddressInUse(format!("{} ({what} is taken)", path.display()))
                })
        };
        let opening = match side {
            Side::Accept(_) => {
                claim(&h.side_pids[0], "side 0")?;
                ShmOpening::Pair { side: 0 }
            }
            Side::Connect(_) => {
                claim(&h.side_pids[1], "side 1")?;
                ShmOpening::Pair { side: 1 }
            }
            Side::Publish { .. } => {
                claim(&h.side_pids[0], "the writer's place")?;
                ShmOpening::Writer
            }
            Side::Subscribe { reader, .. } => {
                let k = reader as usize;
                let readers = h.readers.load(Ordering::Acquire) as usize;
                if k >= readers {
                    return Err(TransportError::Unsupported(format!(
                        "topic {} has no reader place {k} (it takes {readers})",
                        path.display()
                    )));
                }
                claim(&h.reader_pids[k], &format!("reader place {k}"))?;
                // Active before it counts as joined: the writer waits for it from its first
                // message on.
                let ring_bytes = h.ring_bytes.load(Ordering::Acquire) as usize;
                // SAFETY: the segment was checked to hold its ring; the mapping lives in the
                // endpoint as long as the reader.
                let rx = RingReader::join(unsafe { Ring::new(map.as_mut_ptr(), 0, ring_bytes) }, k);
                h.joined.fetch_add(1, Ordering::SeqCst);
                ShmOpening::Reader { k, rx }
            }
        };
        Ok(Box::new(Opened { map, cfg, opening }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::ShmFloor)
    }
    fn remove_if_stale(&self, path: &Path) {
        remove_stale_segment(path)
    }
}

fn channel_path(prefix: &Path, c: u32) -> PathBuf {
    PathBuf::from(format!("{}-c{c}", prefix.display()))
}

fn topic_path(prefix: &Path, t: u32) -> PathBuf {
    PathBuf::from(format!("{}-t{t}", prefix.display()))
}

/// What a side claimed when it opened.
enum ShmOpening {
    Pair { side: usize },
    Writer,
    Reader { k: usize, rx: RingReader },
}

struct Opened {
    map: MmapRaw,
    cfg: Config,
    opening: ShmOpening,
}

impl Opening for Opened {
    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let Opened { map, cfg, opening } = *self;
        let h = header(&map);
        let deadline = Deadline::after(spec.timeout);
        // Everyone else must have mapped the segment before the case starts.
        let arrived = |others: &mut dyn FnMut() -> bool| -> Result<(), TransportError> {
            let mut pause = Duration::from_micros(50);
            while !others() {
                if deadline.expired() {
                    return Err(TransportError::Timeout(spec.timeout));
                }
                std::thread::sleep(pause.min(deadline.remaining_nonzero()));
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            Ok(())
        };
        let ring_bytes = h.ring_bytes.load(Ordering::Acquire) as usize;
        match opening {
            ShmOpening::Pair { side } => {
                let other = &h.side_pids[1 - side];
                arrived(&mut || other.load(Ordering::Acquire) != 0)?;
                let peer = Peer {
                    closed: side_closed(1 - side),
                    pid: other.load(Ordering::Acquire),
                };
                // SAFETY: the mapping was checked to hold both rings and lives in the endpoint
                // as long as they do.
                let (tx, rx) = unsafe {
                    (
                        Ring::new(map.as_mut_ptr(), side, ring_bytes),
                        Ring::new(map.as_mut_ptr(), 1 - side, ring_bytes),
                    )
                };
                Ok(Box::new(ShmEndpoint {
                    tx: Some(RingWriter::new(tx)),
                    rx: RingReader::join(rx, 0),
                    cfg,
                    timeout: spec.timeout,
                    peer,
                    my_closed: side_closed(side),
                    map,
                }))
            }
            ShmOpening::Writer => {
                let readers = h.readers.load(Ordering::Acquire);
                arrived(&mut || h.joined.load(Ordering::Acquire) >= readers)?;
                Ok(Box::new(topic::Topic::new(
                    map,
                    ring_bytes,
                    readers as usize,
                    cfg,
                    spec.timeout,
                )))
            }
            ShmOpening::Reader { k, rx } => {
                let writer = &h.side_pids[0];
                arrived(&mut || writer.load(Ordering::Acquire) != 0)?;
                let peer = Peer {
                    closed: side_closed(0),
                    pid: writer.load(Ordering::Acquire),
                };
                Ok(Box::new(ShmEndpoint {
                    tx: None,
                    rx,
                    cfg,
                    timeout: spec.timeout,
                    peer,
                    my_closed: ring::reader_closed(k),
                    map,
                }))
            }
        }
    }
}

/// Opens, checks and maps the segment at `path` (a topic if `topic`).
fn map_segment(path: &Path, cfg: &Config, topic: bool) -> Result<MmapRaw, TransportError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => TransportError::Refused(path.display().to_string()),
            _ => e.into(),
        })?;
    let len = file.metadata()?.len() as usize;
    if len < ring::HEADER_BYTES {
        return Err(TransportError::Foreign(format!(
            "{} is not a msgperf segment (only {len} B): remove it",
            path.display()
        )));
    }
    let map = MmapRaw::map_raw(&file)?;
    let h = header(&map);
    let magic = h.magic.load(Ordering::Acquire);
    if magic != MAGIC {
        return Err(TransportError::Foreign(format!(
            "{} is not a msgperf segment (foreign magic {magic:#x}): remove it",
            path.display()
        )));
    }
    let version = h.version.load(Ordering::Acquire);
    if version != VERSION {
        return Err(TransportError::Foreign(format!(
            "segment {} has layout version {version}, this msgperf speaks {VERSION}: run the same msgperf on every side",
            path.display()
        )));
    }
    if h.mode.load(Ordering::Acquire) != cfg.mode {
        return Err(TransportError::Foreign(format!(
            "segment {} was made with another --opt buffer: use the same options on every side",
            path.display()
        )));
    }
    let ring_bytes = h.ring_bytes.load(Ordering::Acquire) as usize;
    let readers = h.readers.load(Ordering::Acquire) as usize;
    let rings = if readers > 0 { 1 } else { 2 };
    if readers > MAX_READERS || map.len() < ring::segment_bytes(ring_bytes, rings) {
        return Err(TransportError::Corrupt(format!(
            "segment {} is shorter than its header says",
            path.display()
        )));
    }
    if topic != (readers > 0) {
        return Err(TransportError::Foreign(format!(
            "segment {} is a {}, not a {}",
            path.display(),
            if readers > 0 { "topic" } else { "pair" },
            if topic { "topic" } else { "pair" }
        )));
    }
    Ok(map)
}

/// Creates a segment at `path`, a pair (`readers == 0`) or a topic for `readers` readers, and
/// removes its name: the file returned keeps it.
fn create_segment(path: &Path, cfg: &Config, readers: usize) -> Result<File, TransportError> {
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
    let rings = if readers > 0 { 1 } else { 2 };
    file.set_len(ring::segment_bytes(cfg.ring_bytes, rings) as u64)?;
    let map = MmapRaw::map_raw(&file)?;
    let h = header(&map);
    h.version.store(VERSION, Ordering::Relaxed);
    h.mode.store(cfg.mode, Ordering::Relaxed);
    h.ring_bytes.store(cfg.ring_bytes as u64, Ordering::Relaxed);
    h.readers.store(readers as u32, Ordering::Relaxed);
    h.creator_pid.store(std::process::id(), Ordering::Relaxed);
    h.magic.store(MAGIC, Ordering::Release);
    // Killed before this, the name is swept by the next run (its creator is dead).
    std::fs::remove_file(path)?;
    Ok(file)
}

/// A segment whose creator died is removed; a live one is left alone. The file is mapped
/// read-only: a segment made by another user can be read but not written, and is still judged.
pub(crate) fn remove_stale_segment(path: &Path) {
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let Ok(map) = memmap2::MmapOptions::new().map_raw_read_only(&file) else {
        return;
    };
    if map.len() < ring::HEADER_BYTES {
        return;
    }
    // SAFETY: the mapping holds the header page; only loads are made through it.
    let h = unsafe { &*(map.as_ptr() as *const Header) };
    if h.magic.load(Ordering::Acquire) != MAGIC {
        return; // not ours: never remove what msgperf did not make
    }
    let pid = h.creator_pid.load(Ordering::Acquire);
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
                .filter(|&n| (MIN_CAPACITY..=MAX_CAPACITY).contains(&n))
                .ok_or_else(|| TransportError::BadOption {
                    key: "capacity".into(),
                    value: c.into(),
                    why: "give bytes from 4k to 4G, e.g. 1M".into(),
                })?,
        };
        // Room for the largest message the channel will carry, twice (a queue message may
        // take at most half the ring).
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
