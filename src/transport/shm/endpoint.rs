//! Writing and reading one ring with a wait strategy, and the endpoint built of them: a pair's
//! two sides (two rings), or a topic's reader (which reads the shared ring).

use super::ring::{self, Body, Record, Ring, MODE_LATEST, MODE_QUEUE};
use super::{header, Config, WaitKind};
use crate::transport::{Endpoint, TransportError};
use memmap2::MmapRaw;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long spin-yield spins before it starts yielding.
const SPIN_BUDGET: Duration = Duration::from_micros(2);

/// Waits until `ready()` with the configured strategy, within `timeout`, checking every few
/// milliseconds whether the other side is `gone()`. `futex` is what the other side wakes.
pub(super) fn wait(
    cfg: &Config,
    timeout: Duration,
    futex: &ring::Futex,
    ready: &mut dyn FnMut() -> bool,
    gone: &mut dyn FnMut() -> bool,
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
        match cfg.wait {
            WaitKind::Spin => std::hint::spin_loop(),
            WaitKind::SpinYield if spins < 64 || start.elapsed() < SPIN_BUDGET => {
                std::hint::spin_loop()
            }
            WaitKind::SpinYield => std::thread::yield_now(),
            WaitKind::Block => ring::sleep_until(futex, Duration::from_millis(20), ready),
        }
        // Time and the peer's life are checked every few milliseconds, not every spin.
        if cfg.wait == WaitKind::Block || spins.is_multiple_of(1024) {
            let waited = start.elapsed();
            if waited >= next_check {
                next_check = waited + Duration::from_millis(5);
                if ready() {
                    return Ok(());
                }
                if gone() {
                    return Err(TransportError::PeerClosed);
                }
                if waited >= timeout {
                    return Err(TransportError::Timeout(timeout));
                }
            }
        }
    }
}

/// The writing side of one ring: where the next message goes, the slowest reader's
/// position as last seen, and the cells cleared ahead.
pub(super) struct RingWriter {
    pub ring: Ring,
    w: u64,
    min_reader: u64,
    clearance: ring::Clearance,
}

impl RingWriter {
    pub fn new(ring: Ring) -> Self {
        RingWriter {
            ring,
            w: 0,
            min_reader: 0,
            clearance: ring::Clearance::new(0),
        }
    }

    /// Writes a message of `len` bytes made of `body`, to every reader or `to` one.
    #[inline]
    pub fn write(
        &mut self,
        cfg: &Config,
        timeout: Duration,
        len: usize,
        to: Option<usize>,
        body: Body,
        gone: &mut dyn FnMut() -> bool,
    ) -> Result<(), TransportError> {
        // The common case here, in as few instructions as it takes (they lie on every
        // message's path), the rest in a function of its own: a copy for every reader, before
        // the ring's end, in the room the slowest reader left when last looked at, with the
        // cell after it cleared.
        if let (Body::Copy(m), None, MODE_QUEUE) = (&body, to, cfg.mode) {
            let end = self.w + ring::cells(len);
            if (4..=self.ring.max_message(false)).contains(&len)
                && self.ring.fits_unwrapped(self.w, end, self.min_reader)
                && self.clearance.covers(end)
            {
                self.ring.put_copy(self.w, &m[..len]);
                self.clearance
                    .ahead(&self.ring, self.w, end, self.min_reader);
                if cfg.wait == WaitKind::Block {
                    self.ring.wake_readers();
                }
                self.w = end;
                return Ok(());
            }
        }
        self.write_any(cfg, timeout, len, to, body, gone)
    }

    /// [`RingWriter::write`] in every case: latest-value, built in place, to one reader, with
    /// padding to the ring's end, or waiting for room.
    #[inline(never)]
    fn write_any(
        &mut self,
        cfg: &Config,
        timeout: Duration,
        len: usize,
        to: Option<usize>,
        body: Body,
        gone: &mut dyn FnMut() -> bool,
    ) -> Result<(), TransportError> {
        let latest = cfg.mode == MODE_LATEST;
        let built = matches!(body, Body::Build(_));
        let address = if to.is_some() || built { ring::CELL } else { 0 };
        let max = self.ring.max_message(latest) - address;
        if len > max {
            return Err(TransportError::TooLarge { len, max });
        }
        if len < 4 {
            return Err(TransportError::Corrupt(format!(
                "a {len} B message cannot hold its 4-byte length"
            )));
        }
        let block = cfg.wait == WaitKind::Block;
        if latest {
            match body {
                Body::Copy(m) => self
                    .ring
                    .write_latest(&mut |b| b.copy_from_slice(m), len, block),
                Body::Build(build) => self.ring.write_latest(build, len, block),
            }
            return Ok(());
        }
        let w = self.w;
        let (start, end) = self.ring.place(w, len, to, built);
        if !self.ring.has_space(end, self.min_reader) {
            self.min_reader = self.ring.min_reader(w);
            if !self.ring.has_space(end, self.min_reader) {
                if cfg.full_fail {
                    return Err(TransportError::Full);
                }
                let r = &self.ring;
                wait(
                    cfg,
                    timeout,
                    &r.ctl().space.0,
                    &mut || r.has_space(end, r.min_reader(w)),
                    gone,
                )?;
                self.min_reader = self.ring.min_reader(w);
            }
        }
        self.clearance
            .publish(&self.ring, (w, start, end), len, to, body, self.min_reader);
        if block {
            self.ring.wake_readers();
        }
        self.w = end;
        Ok(())
    }
}

/// The reading side of one ring, as its reader `cursor`.
pub(super) struct RingReader {
    pub ring: Ring,
    pub cursor: usize,
    /// Where the next record is.
    r: u64,
    /// Latest mode: the version of the last message read.
    seen: u64,
}

impl RingReader {
    /// Becomes an active reader of `ring`: from now on the writer waits for it.
    pub fn join(ring: Ring, cursor: usize) -> Self {
        let c = &ring.ctl().readers[cursor].0;
        c.active.store(1, Ordering::SeqCst);
        let r = c.seq.load(Ordering::SeqCst);
        RingReader {
            ring,
            cursor,
            r,
            seen: 0,
        }
    }

    /// Stops holding the writer back.
    pub fn leave(&self) {
        self.ring.ctl().readers[self.cursor]
            .0
            .active
            .store(0, Ordering::SeqCst);
    }

    /// Queue mode: hands the next message for this reader to `read`, in place; skips what was
    /// for other readers.
    #[inline]
    pub fn read(
        &mut self,
        cfg: &Config,
        timeout: Duration,
        read: &mut dyn FnMut(&[u8]),
        gone: &mut dyn FnMut() -> bool,
    ) -> Result<usize, TransportError> {
        // The common record here (a message for every reader, there already), the rest in a
        // function of its own.
        match self.read_plain(cfg, read) {
            Some(n) => Ok(n),
            None => self.read_any(cfg, timeout, read, gone),
        }
    }

    /// The message for every reader at this reader's position, if one is there.
    #[inline(always)]
    fn read_plain(&mut self, cfg: &Config, read: &mut dyn FnMut(&[u8])) -> Option<usize> {
        let r = self.r;
        let msg = self.ring.plain_record(r)?;
        let n = msg.len();
        let next = r + ring::cells(n);
        read(msg);
        self.ring
            .release(self.cursor, next, cfg.wait == WaitKind::Block);
        self.r = next;
        Some(n)
    }

    /// [`RingReader::read`] in every case: waiting, padding, records for one reader.
    #[inline(never)]
    fn read_any(
        &mut self,
        cfg: &Config,
        timeout: Duration,
        read: &mut dyn FnMut(&[u8]),
        gone: &mut dyn FnMut() -> bool,
    ) -> Result<usize, TransportError> {
        let block = cfg.wait == WaitKind::Block;
        loop {
            if let Some(n) = self.read_plain(cfg, read) {
                return Ok(n);
            }
            let r = self.r;
            let record = match self.ring.record_for_read(r, self.cursor) {
                Some(record) => record,
                None => {
                    let ring = &self.ring;
                    wait(
                        cfg,
                        timeout,
                        &ring.ctl().data.0,
                        &mut || ring.published(r),
                        gone,
                    )?;
                    continue;
                }
            };
            match record {
                Record::Mine(msg, next) => {
                    let n = msg.len();
                    read(msg);
                    self.ring.release(self.cursor, next, block);
                    self.r = next;
                    return Ok(n);
                }
                // Released at once: a writer may be waiting for exactly this room.
                Record::Other(next) => {
                    self.ring.release(self.cursor, next, block);
                    self.r = next;
                }
            }
        }
    }

    /// Whether a message for this reader is there now (skipping other readers' records).
    pub fn ready(&mut self, cfg: &Config) -> bool {
        if cfg.mode == MODE_LATEST {
            return latest_is_new(&self.ring, self.seen);
        }
        loop {
            match self.ring.record_for_read(self.r, self.cursor) {
                Some(Record::Mine(..)) => return true,
                Some(Record::Other(next)) => {
                    self.ring
                        .release(self.cursor, next, cfg.wait == WaitKind::Block);
                    self.r = next;
                }
                None => return false,
            }
        }
    }

    /// Latest mode: copies the newest message not yet read into `buf`.
    pub fn read_latest(
        &mut self,
        cfg: &Config,
        timeout: Duration,
        buf: &mut [u8],
        gone: &mut dyn FnMut() -> bool,
    ) -> Result<usize, TransportError> {
        loop {
            let (ring, seen) = (&self.ring, self.seen);
            wait(
                cfg,
                timeout,
                &ring.ctl().data.0,
                &mut || latest_is_new(ring, seen),
                gone,
            )?;
            match self.ring.read_latest(buf) {
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

    /// Copies the next message into `buf` (either mode).
    pub fn read_into(
        &mut self,
        cfg: &Config,
        timeout: Duration,
        buf: &mut [u8],
        gone: &mut dyn FnMut() -> bool,
    ) -> Result<usize, TransportError> {
        if cfg.mode == MODE_LATEST {
            return self.read_latest(cfg, timeout, buf, gone);
        }
        let mut out = Ok(0);
        self.read(
            cfg,
            timeout,
            &mut |m| {
                out = if m.len() > buf.len() {
                    Err(TransportError::TooLarge {
                        len: m.len(),
                        max: buf.len(),
                    })
                } else {
                    ring::copy_out(buf, m);
                    Ok(m.len())
                }
            },
            gone,
        )?;
        out
    }
}

/// Latest mode: a whole message other than the one read last (`seen`) is there.
fn latest_is_new(ring: &Ring, seen: u64) -> bool {
    let v = ring.latest_version();
    v.is_multiple_of(2) && v != seen && v != 0
}

/// Wakes whoever sleeps on either futex of `rings`: they must notice that we left.
pub(super) fn wake_all(rings: &[&Ring]) {
    for r in rings {
        for f in [&r.ctl().data.0, &r.ctl().space.0] {
            f.word.fetch_add(1, Ordering::SeqCst);
            ring::futex_wake(&f.word);
        }
    }
}

/// Who is on the other side of an endpoint: the `Header::state` bit it sets when it leaves,
/// and its process.
#[derive(Clone, Copy)]
pub(super) struct Peer {
    pub closed: u32,
    pub pid: u32,
}

impl Peer {
    pub fn gone(&self, map: &MmapRaw) -> bool {
        header(map).state.load(Ordering::Acquire) & self.closed != 0
            || (self.pid != 0 && !crate::sys::process_alive(self.pid))
    }
}

/// One side of a two-way channel: writes one ring, reads another. A pair's side 0 writes
/// ring 0 and reads ring 1, side 1 the other way round; a topic's reader `k` reads the shared
/// ring 0 as reader `k` and writes nothing.
pub(super) struct ShmEndpoint {
    /// Keeps the segment mapped while the rings point into it.
    pub map: MmapRaw,
    pub tx: Option<RingWriter>,
    pub rx: RingReader,
    pub cfg: Config,
    pub timeout: Duration,
    pub peer: Peer,
    /// The `Header::state` bit this side sets when it leaves.
    pub my_closed: u32,
}

impl ShmEndpoint {
    fn write(&mut self, len: usize, body: Body) -> Result<(), TransportError> {
        let (map, peer) = (&self.map, self.peer);
        let Some(tx) = self.tx.as_mut() else {
            return Err(TransportError::Unsupported(
                "a topic's reader only reads".into(),
            ));
        };
        tx.write(&self.cfg, self.timeout, len, None, body, &mut || {
            peer.gone(map)
        })
    }
}

impl Endpoint for ShmEndpoint {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        self.write(msg.len(), Body::Copy(msg))
    }

    fn send_with(
        &mut self,
        len: usize,
        build: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        self.write(len, Body::Build(build))
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        let (map, peer) = (&self.map, self.peer);
        self.rx
            .read_into(&self.cfg, self.timeout, buf, &mut || peer.gone(map))
    }

    fn recv_with(&mut self, read: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        if self.cfg.mode == MODE_LATEST {
            return Err(TransportError::Unsupported(
                "latest-value reads copy out under a seqlock; zero-copy needs --opt buffer=queue"
                    .into(),
            ));
        }
        let (map, peer) = (&self.map, self.peer);
        self.rx
            .read(&self.cfg, self.timeout, read, &mut || peer.gone(map))
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        if self.rx.ready(&self.cfg) {
            return self.recv(buf).map(Some);
        }
        // Only the flag here (polling loops call this millions of times); a peer that died
        // without setting it is noticed by the caller's timeout.
        if header(&self.map).state.load(Ordering::Acquire) & self.peer.closed != 0 {
            return Err(TransportError::PeerClosed);
        }
        Ok(None)
    }
}

impl Drop for ShmEndpoint {
    fn drop(&mut self) {
        self.rx.leave();
        header(&self.map)
            .state
            .fetch_or(self.my_closed, Ordering::SeqCst);
        let mut rings = vec![&self.rx.ring];
        rings.extend(self.tx.as_ref().map(|t| &t.ring));
        wake_all(&rings);
    }
}
