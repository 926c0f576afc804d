//! The shared-memory layout and the lock-free operations on it. One of the crate's `unsafe`
//! rooms: it reads and writes memory that another process maps too.
//!
//! ```text
//! pair:     Header (one page) | Ring 0 (side 0 -> side 1) | Ring 1 (side 1 -> side 0)
//! topic:    Header | Ring 0 (the writer -> every reader)
//! ring:     reader cursors x MAX_READERS | data futex | space futex | seqlock | cells
//! record:   the message itself (its first 4 bytes are its length, as the transport contract
//!           says), in 64-byte cells; a padding record to the ring's end starts with u32::MAX;
//!           a record for one reader only starts with a cell [u32::MAX - 1, reader, length]
//!           and holds the message in the cells after it (the other readers skip it); a
//!           message its sender built in place starts with a cell [u32::MAX - 2, 0, length].
//!           A record's first word (its head) is written last: readers wait on it (see `put`)
//! ```
//! Every counter sits on its own 128-byte line so that the writer and the readers do not
//! false-share. Queue mode: positions count 64-byte cells; a message takes the cells it needs,
//! consecutive ones, so small messages pack densely and large ones fit without a per-slot
//! maximum. The writer publishes a record by storing its head last, and waits while the slowest
//! active reader is a whole ring behind. Latest mode: one record under a seqlock; the writer never
//! waits, a reader copies and retries if the writer overwrote it meanwhile.

#![allow(unsafe_code)]

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

pub const MAGIC: u64 = u64::from_le_bytes(*b"MSGPERF1");
/// Bumped whenever the layout changes: an older or newer msgperf refuses the segment.
pub const VERSION: u32 = 4;
pub const MAX_READERS: usize = 8;
pub const HEADER_BYTES: usize = 4096;
const LINE: usize = 128;
/// The unit of ring positions.
pub const CELL: usize = 64;
/// Marks a record that pads to the end of the ring (no message is 4 GiB long).
const PAD: u32 = u32::MAX;
/// Marks a record for one reader of a topic.
const TO_ONE: u32 = u32::MAX - 1;
/// Marks a record whose message the sender built in place.
const BUILT: u32 = u32::MAX - 2;

/// What a record's message is made from.
pub enum Body<'a> {
    /// A copy of these bytes (whose first four are the length).
    Copy(&'a [u8]),
    /// Built in place by the sender.
    Build(&'a mut dyn FnMut(&mut [u8])),
}

pub const MODE_QUEUE: u32 = 0;
pub const MODE_LATEST: u32 = 1;

/// The `Header::state` bit that side `s` of a pair (or a topic's writer, side 0) sets when it
/// leaves.
pub fn side_closed(s: usize) -> u32 {
    2 << s
}

/// The `Header::state` bit that topic reader `k` sets when it leaves.
pub fn reader_closed(k: usize) -> u32 {
    1 << (8 + k)
}

#[repr(C)]
pub struct Header {
    /// Written last by the creator: a side that sees it sees the rest.
    pub magic: AtomicU64,
    pub version: AtomicU32,
    pub mode: AtomicU32,
    /// Bytes of cells in each ring.
    pub ring_bytes: AtomicU64,
    /// Who made the segment (msgperf's controller): the stale sweep removes the segments of one
    /// that died.
    pub creator_pid: AtomicU32,
    /// Each side's process (a pair's two sides; a topic's writer is side 0), claimed by the
    /// side as it opens.
    pub side_pids: [AtomicU32; 2],
    pub state: AtomicU32,
    /// A topic's readers (one writer to many); 0 for a two-way pair.
    pub readers: AtomicU32,
    /// Readers that have joined the topic so far.
    pub joined: AtomicU32,
    /// Each topic reader's process, claimed by the reader as it joins.
    pub reader_pids: [AtomicU32; MAX_READERS],
}

#[repr(C, align(128))]
pub struct Line<T>(pub T);

#[repr(C)]
pub struct Cursor {
    pub seq: AtomicU64,
    pub active: AtomicU32,
}

/// An event count on a futex word: waiters announce themselves, so a writer only pays for a
/// wake-up system call when someone sleeps.
#[repr(C)]
pub struct Futex {
    pub word: AtomicU32,
    pub waiters: AtomicU32,
}

#[repr(C)]
pub struct RingCtl {
    pub readers: [Line<Cursor>; MAX_READERS],
    pub data: Line<Futex>,
    pub space: Line<Futex>,
    pub seqlock: Line<AtomicU64>,
}

/// Messages up to this long are copied in and out of a ring in 8-byte words (see
/// [`copy_out`]); longer ones by `memcpy`, whose stores and loads a longer copy amortises.
const ALL_WORDS: usize = 64;

/// Copies a message out of a ring (`m`, in place) into `buf`, as long, in the pieces that
/// [`copy_in`] loads. A message copied out is often copied into a ring again at once (an
/// echo), and its writer's header fields are stores just made too: a load that takes one
/// store whole is forwarded from the store buffer, one that spans two or takes part of one
/// waits for them to reach the cache. `memcpy` of bytes 4.. after one of bytes 0.. cost
/// 13.5 ns a hop where these words cost 4.5 ns (64 B, an AMD EPYC).
#[inline(always)]
pub fn copy_out(buf: &mut [u8], m: &[u8]) {
    let len = m.len();
    let buf = &mut buf[..len];
    if len > ALL_WORDS {
        buf.copy_from_slice(m);
        return;
    }
    // SAFETY: both hold `len` bytes.
    unsafe {
        if len == CELL {
            // The commonest record, one whole cell: a copy of known length, unrolled.
            copy_words(m.as_ptr(), buf.as_mut_ptr(), 0, CELL);
        } else {
            copy_words(m.as_ptr(), buf.as_mut_ptr(), 0, len);
        }
    }
}

/// Copies bytes 4.. of message `m` into the record at `dst` (its head, bytes 0..4, is
/// published after), in the pieces that [`copy_out`] stores and a message's header is
/// written in: bytes 4..8 are taken from the first 8-byte word, as that was stored.
///
/// # Safety
/// `dst` holds `m.len()` bytes that no reader reads before the head is published.
#[inline(always)]
unsafe fn copy_in(dst: *mut u8, m: &[u8]) {
    let (len, src) = (m.len(), m.as_ptr());
    if !(8..=ALL_WORDS).contains(&len) {
        std::ptr::copy_nonoverlapping(src.add(4), dst.add(4), len - 4);
        return;
    }
    // The whole word (see `copy_words`), not bytes 4..8 alone, which no store wrote alone.
    let first = if (src as usize).is_multiple_of(8) {
        (src as *const u64).read_volatile()
    } else {
        (src as *const u64).read_unaligned()
    };
    (dst.add(4) as *mut [u8; 4]).write_unaligned(first.to_ne_bytes()[4..].try_into().unwrap());
    if len == CELL {
        copy_words(src, dst, 8, CELL);
    } else {
        copy_words(src, dst, 8, len);
    }
}

/// Copies bytes `from..to` in 8-byte words, the last few bytes one by one.
///
/// # Safety
/// Both hold `to` bytes.
#[inline(always)]
unsafe fn copy_words(src: *const u8, dst: *mut u8, from: usize, to: usize) {
    let mut i = from;
    if (src as usize | dst as usize | from).is_multiple_of(8) {
        // Volatile where aligned (as the allocator's buffers and the cells are): one load and
        // one store a word, which a compiler would otherwise merge into 16-byte moves that
        // straddle the words their source was written in.
        while i + 8 <= to {
            (dst.add(i) as *mut u64).write_volatile((src.add(i) as *const u64).read_volatile());
            i += 8;
        }
    }
    while i + 8 <= to {
        (dst.add(i) as *mut u64).write_unaligned((src.add(i) as *const u64).read_unaligned());
        i += 8;
    }
    while i < to {
        dst.add(i).write(src.add(i).read());
        i += 1;
    }
}

/// Cells a message of `len` bytes takes.
pub fn cells(len: usize) -> u64 {
    len.max(8).div_ceil(CELL) as u64
}

fn ctl_bytes() -> usize {
    std::mem::size_of::<RingCtl>().div_ceil(LINE) * LINE
}

/// A segment of `rings` rings that hold `ring_bytes` of cells each (a multiple of CELL).
pub fn segment_bytes(ring_bytes: usize, rings: usize) -> usize {
    HEADER_BYTES + rings * (ctl_bytes() + ring_bytes)
}

/// The largest message a ring of `cap` cells holds (see `Ring::max_message`).
fn max_message(cap: u64, latest: bool) -> usize {
    let cells = if latest { cap } else { cap / 2 };
    (cells as usize * CELL - 8).min(u32::MAX as usize - 1)
}

/// What a reader finds at its position.
pub enum Record<'a> {
    /// A message for it, in place, and the position after it.
    Mine(&'a [u8], u64),
    /// A message for another reader, to skip: the position after it.
    Other(u64),
}

/// Cells cleared ahead of the writer, a writer's state: the head of the cell after a record
/// must be 0 before the record is published (readers wait there next), and a cell's old head
/// is a stale record from the ring's last lap. Clearing that one cell as each record is
/// written puts a second cache line on the message's path (under x86's store order the
/// record's head becomes visible only after it, and that line is the reader's from the last
/// lap); so the writer clears after a publish, while the reader is busy with the message, the
/// cells that the next record of the same length needs, and no more: lines cleared further
/// ahead sit in the writer's cache where the reader's prefetches reach them, which cost a
/// round trip a third more than the cache line's on an AMD EPYC host (`bench/ring_model.py`,
/// `ringbatch`), where clearing only the next record's cells cost nothing.
pub struct Clearance {
    /// Every cell from the write position up to this one has a head of 0.
    cleared: u64,
}

impl Clearance {
    /// A fresh ring is all zeros, but a reused one is not: nothing is taken as cleared.
    pub fn new(w: u64) -> Self {
        Clearance { cleared: w }
    }

    /// Queue mode: publishes a record as `Ring::put` does, first clearing the cell after it if
    /// no batch did; then clears the next batch if the cleared cells run low. `min_reader` is
    /// a position every active reader has passed (the cells up to a ring beyond it are free).
    pub fn publish(
        &mut self,
        ring: &Ring,
        (w, start, end): (u64, u64, u64),
        len: usize,
        to: Option<usize>,
        body: Body,
        min_reader: u64,
    ) {
        if !self.covers(end) {
            ring.clear_heads(end, end + 1);
            self.cleared = end + 1;
        }
        ring.put(w, start, len, to, body);
        self.ahead(ring, w, end, min_reader);
    }

    /// Whether the head of the cell at `end` (after a record) is cleared already.
    #[inline(always)]
    pub fn covers(&self, end: u64) -> bool {
        self.cleared > end
    }

    /// After a record from `w` to `end`: clears the cells up to the end of the next record of
    /// the same length (the head after it included), if they are not yet.
    #[inline(always)]
    pub fn ahead(&mut self, ring: &Ring, w: u64, end: u64, min_reader: u64) {
        let next_end = end + (end - w);
        if self.cleared > next_end {
            return;
        }
        let to = (next_end + 1).min(min_reader + ring.cap);
        // Records of one cell (a small message) clear one head each: inline, as a stream of
        // them pays a call a message otherwise.
        if to == self.cleared + 1 {
            ring.head(self.cleared).store(0, Ordering::Relaxed);
            self.cleared = to;
        } else {
            self.clear_to(ring, to);
        }
    }

    #[inline(never)]
    fn clear_to(&mut self, ring: &Ring, to: u64) {
        if to > self.cleared {
            ring.clear_heads(self.cleared, to);
            self.cleared = to;
        }
    }
}

/// A view of one ring in a mapped segment. The mapping outlives it (the endpoint owns both).
pub struct Ring {
    ctl: *const RingCtl,
    cells: *mut u8,
    /// Capacity in cells.
    cap: u64,
    /// `cap - 1` when `cap` is a power of two (the default capacities): positions then wrap
    /// with a mask, not a 64-bit division, which costs tens of cycles on the message's path.
    mask: Option<u64>,
    /// `max_message(false)`, read on every record.
    max_queued: usize,
}

// SAFETY: the ring only holds pointers into a shared mapping whose lifetime the endpoint
// guarantees; all shared state is accessed atomically or under the protocol above.
unsafe impl Send for Ring {}

impl Ring {
    /// # Safety
    /// `base` must point at a mapped segment of `segment_bytes(ring_bytes, n)` bytes, n > index, that stays
    /// mapped while the ring is used.
    pub unsafe fn new(base: *mut u8, index: usize, ring_bytes: usize) -> Ring {
        let start = base.add(HEADER_BYTES + index * (ctl_bytes() + ring_bytes));
        let cap = (ring_bytes / CELL) as u64;
        Ring {
            ctl: start as *const RingCtl,
            cells: start.add(ctl_bytes()),
            cap,
            mask: cap.is_power_of_two().then_some(cap - 1),
            max_queued: max_message(cap, false),
        }
    }

    pub fn ctl(&self) -> &RingCtl {
        // SAFETY: see `new`.
        unsafe { &*self.ctl }
    }

    /// The largest message: half the ring in queue mode (so that padding can always fit), the
    /// whole record in latest mode.
    pub fn max_message(&self, latest: bool) -> usize {
        if latest {
            max_message(self.cap, true)
        } else {
            self.max_queued
        }
    }

    fn cell(&self, pos: u64) -> *mut u8 {
        // SAFETY: the index is reduced modulo the capacity.
        unsafe { self.cells.add(self.index(pos) as usize * CELL) }
    }

    /// Where position `pos` falls in the ring, in cells.
    #[inline(always)]
    fn index(&self, pos: u64) -> u64 {
        match self.mask {
            Some(m) => pos & m,
            None => pos % self.cap,
        }
    }

    /// Queue mode: the lowest position any active reader still needs (`w`, the writer's, if
    /// none is behind it).
    pub fn min_reader(&self, w: u64) -> u64 {
        let mut min = w;
        for r in &self.ctl().readers {
            if r.0.active.load(Ordering::Acquire) != 0 {
                min = min.min(r.0.seq.load(Ordering::Acquire));
            }
        }
        min
    }

    /// Queue mode: where a message of `len` bytes written at `w` starts (after padding to the
    /// ring's end if it would wrap) and where it ends; `to` one reader only, or every reader;
    /// `built` in place by the sender rather than copied.
    pub fn place(&self, w: u64, len: usize, to: Option<usize>, built: bool) -> (u64, u64) {
        let need = cells(len) + u64::from(to.is_some() || built);
        let room = self.cap - self.index(w);
        let start = if need > room { w + room } else { w };
        (start, start + need)
    }

    /// Whether a record ending at `end` fits: its cells, and the head of the cell after it,
    /// which the writer clears before publishing (see `put`).
    pub fn has_space(&self, end: u64, min_reader: u64) -> bool {
        end + 1 - min_reader <= self.cap
    }

    /// The head of the record at `pos`: the word a reader waits on there.
    fn head(&self, pos: u64) -> &AtomicU32 {
        // SAFETY: every cell is mapped and 64-byte aligned.
        unsafe { &*(self.cell(pos) as *const AtomicU32) }
    }

    /// Queue mode: writes a record placed by `place` at `start` (after `w`) and publishes it.
    /// The caller has space for it and the cell after it, whose head is 0 (see `Clearance`).
    ///
    /// A reader waits on the head (first word) of the cell at its position, which is 0 until
    /// the record there is whole: the writer writes everything else first and stores the head
    /// last with release order; the cell after the record (where readers go next) was cleared
    /// before. So a reader learns of a message from the message's own cache line, not from a
    /// position on another line: one line crosses between the CPUs, not two. The head is the
    /// message's own length (its first four bytes), or PAD (the rest of the ring is skipped),
    /// or a prefix cell's TO_ONE (for one reader) or BUILT (a message built in place, whose
    /// builder writes its first bytes in an order the ring does not control).
    pub fn put(&self, w: u64, start: u64, len: usize, to: Option<usize>, body: Body) {
        let prefix = to.is_some() || matches!(body, Body::Build(_));
        let at = start + u64::from(prefix);
        // SAFETY: every active reader released these cells (the caller checked the space),
        // and none reads them before their head is published below.
        unsafe {
            let msg = std::slice::from_raw_parts_mut(self.cell(at), len);
            match body {
                Body::Copy(m) => copy_in(msg.as_mut_ptr(), &m[..len]),
                Body::Build(build) => build(msg),
            }
            let own = if prefix {
                // The message's length, whatever a builder wrote there.
                (msg.as_mut_ptr() as *mut u32).write(len as u32);
                let c = self.cell(start) as *mut u32;
                c.add(1).write(to.unwrap_or(0) as u32);
                c.add(2).write(len as u32);
                if to.is_some() {
                    TO_ONE
                } else {
                    BUILT
                }
            } else {
                len as u32
            };
            if start > w {
                // The record first (its head too), then the padding that leads readers to it.
                self.head(start).store(own, Ordering::Relaxed);
                (self.cell(w) as *mut u32).add(1).write((start - w) as u32);
                self.head(w).store(PAD, Ordering::Release);
            } else {
                self.head(start).store(own, Ordering::Release);
            }
        }
    }

    /// Queue mode, the common record (see `put`): a copy of `m` for every reader, in the
    /// cells from `w` on, which the caller checked are free, end before the ring's, and are
    /// followed by a cleared head.
    #[inline(always)]
    pub fn put_copy(&self, w: u64, m: &[u8]) {
        // SAFETY: as in `put`; `m` holds its length in its first four bytes.
        unsafe { copy_in(self.cell(w), m) };
        self.head(w).store(m.len() as u32, Ordering::Release);
    }

    /// Queue mode: whether a record from `w` to `end` fits before the ring's end and in the
    /// room that readers at `min_reader` or later leave (the cell after it included).
    #[inline(always)]
    pub fn fits_unwrapped(&self, w: u64, end: u64, min_reader: u64) -> bool {
        self.index(w) + (end - w) <= self.cap && self.has_space(end, min_reader)
    }

    /// Queue mode, the common record as a reader finds it: a message for every reader at `r`,
    /// in place (None for anything else: nothing yet, padding, or a prefixed record).
    #[inline(always)]
    pub fn plain_record(&self, r: u64) -> Option<&[u8]> {
        let head = self.head(r).load(Ordering::Acquire);
        if head == 0 || head >= BUILT {
            return None;
        }
        let len = (head as usize).min(self.max_queued);
        // SAFETY: as in `record_for_read`.
        Some(unsafe { std::slice::from_raw_parts(self.cell(r), len) })
    }

    /// Queue mode: zeroes the heads of the cells from `from` to `to`, which every reader has
    /// released.
    pub fn clear_heads(&self, from: u64, to: u64) {
        for p in from..to {
            self.head(p).store(0, Ordering::Relaxed);
        }
    }

    /// Queue mode, after `put` where readers may sleep (wait=block): wakes those that do.
    pub fn wake_readers(&self) {
        // A full fence after the head's store and before the check for sleepers in `wake`,
        // which a reader that announced itself and then checked the head pairs with.
        fence(Ordering::SeqCst);
        wake(&self.ctl().data.0);
    }

    /// Queue mode: the record at `r` (skipping padding) as reader `me` finds it, or None if
    /// none is there yet; a message is in place, valid until the reader releases its position.
    pub fn record_for_read(&self, mut r: u64, me: usize) -> Option<Record<'_>> {
        let max = self.max_message(false);
        let mut head = self.head(r).load(Ordering::Acquire);
        // SAFETY: a published record is not rewritten until every active reader released it.
        unsafe {
            if head == PAD {
                r += (self.cell(r) as *const u32).add(1).read() as u64;
                head = self.head(r).load(Ordering::Acquire);
            }
            match head {
                0 => None,
                TO_ONE | BUILT => {
                    let c = self.cell(r) as *const u32;
                    let reader = c.add(1).read() as usize;
                    let len = (c.add(2).read() as usize).min(max);
                    let next = r + 1 + cells(len);
                    if head == TO_ONE && reader != me {
                        return Some(Record::Other(next));
                    }
                    Some(Record::Mine(
                        std::slice::from_raw_parts(self.cell(r + 1), len),
                        next,
                    ))
                }
                len => {
                    let len = (len as usize).min(max);
                    Some(Record::Mine(
                        std::slice::from_raw_parts(self.cell(r), len),
                        r + cells(len),
                    ))
                }
            }
        }
    }

    /// Queue mode: whether a record (for any reader) is published at `r`.
    pub fn published(&self, r: u64) -> bool {
        self.head(r).load(Ordering::Acquire) != 0
    }

    /// Queue mode: reader `i` is done with everything before `next`.
    #[inline]
    pub fn release(&self, i: usize, next: u64, blocking_writer: bool) {
        let seq = &self.ctl().readers[i].0.seq;
        if !blocking_writer {
            seq.store(next, Ordering::Release);
            return;
        }
        let old = seq.swap(next, Ordering::SeqCst);
        // Only the slowest reader makes room: the others would wake a waiting writer for
        // nothing. Of readers that move together, the last to move sees the minimum pass.
        if self.ctl().space.0.waiters.load(Ordering::SeqCst) > 0 && self.min_reader(u64::MAX) > old
        {
            wake(&self.ctl().space.0);
        }
    }

    /// Latest mode: overwrites the one record with a message of `len` bytes built by `build`.
    pub fn write_latest(
        &self,
        build: &mut dyn FnMut(&mut [u8]),
        len: usize,
        blocking_readers: bool,
    ) {
        let lock = &self.ctl().seqlock.0;
        let s = lock.load(Ordering::Relaxed);
        lock.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        // SAFETY: the record at cell 0 is always mapped; readers detect the overwrite.
        unsafe {
            let c = self.cell(0);
            (c as *mut u64).write(len as u64);
            build(std::slice::from_raw_parts_mut(c.add(8), len));
        }
        lock.store(s + 2, Ordering::SeqCst);
        if blocking_readers {
            wake(&self.ctl().data.0);
        }
    }

    /// Latest mode: the seqlock's value (even and changed since `seen` means a new message).
    pub fn latest_version(&self) -> u64 {
        self.ctl().seqlock.0.load(Ordering::SeqCst)
    }

    /// Latest mode: copies the newest message into `buf` unless the writer was overwriting it;
    /// returns (length, version), None to retry, or the length that did not fit.
    pub fn read_latest(&self, buf: &mut [u8]) -> Result<Option<(usize, u64)>, usize> {
        let lock = &self.ctl().seqlock.0;
        let v1 = lock.load(Ordering::Acquire);
        if v1 % 2 == 1 {
            return Ok(None);
        }
        let c = self.cell(0);
        // SAFETY: the record is always mapped; a concurrent overwrite is detected below and
        // the copy discarded (the seqlock protocol), so a torn copy is never returned.
        let len =
            (unsafe { (c as *const u64).read_volatile() } as usize).min(self.max_message(true));
        if len > buf.len() {
            return Err(len);
        }
        unsafe { std::ptr::copy_nonoverlapping(c.add(8), buf.as_mut_ptr(), len) };
        fence(Ordering::Acquire);
        if lock.load(Ordering::Relaxed) != v1 {
            return Ok(None);
        }
        Ok(Some((len, v1)))
    }
}

/// Wakes every sleeper on `f` if any announced itself.
pub fn wake(f: &Futex) {
    if f.waiters.load(Ordering::SeqCst) > 0 {
        f.word.fetch_add(1, Ordering::SeqCst);
        futex_wake(&f.word);
    }
}

/// Sleeps on `f` until woken or `timeout`, unless `ready()` turns true after announcing.
pub fn sleep_until(f: &Futex, timeout: Duration, ready: &mut dyn FnMut() -> bool) {
    f.waiters.fetch_add(1, Ordering::SeqCst);
    let epoch = f.word.load(Ordering::SeqCst);
    if !ready() {
        futex_wait(&f.word, epoch, timeout);
    }
    f.waiters.fetch_sub(1, Ordering::SeqCst);
}

pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a shared (not private) futex on a word of the mapping; the kernel only reads it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            0usize,
            0u32,
        );
    }
}

pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: as above.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0usize,
            0usize,
            0u32,
        );
    }
}

/// A shared mapping of a memory file: two processes that map the same file (one received its
/// descriptor at its start) share it, and so do threads. Used by the floor's loops and tests.
pub struct SharedMem {
    pub ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, accessed through atomics or the floor's protocol.
unsafe impl Send for SharedMem {}
unsafe impl Sync for SharedMem {}

impl SharedMem {
    /// A fresh memory file of `len` bytes and its mapping.
    pub fn create(len: usize) -> std::io::Result<(Self, std::os::fd::OwnedFd)> {
        use std::os::fd::FromRawFd;
        // SAFETY: a valid NUL-terminated name; the returned descriptor is owned here.
        let fd = unsafe { libc::memfd_create(c"msgperf-floor".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let file = std::fs::File::from(fd.try_clone()?);
        file.set_len(len as u64)?;
        Ok((Self::map(&fd, len)?, fd))
    }

    /// Maps `len` bytes of the memory file `fd`.
    pub fn map(fd: &impl std::os::fd::AsRawFd, len: usize) -> std::io::Result<Self> {
        // SAFETY: a fresh shared mapping of a file the caller holds; checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(SharedMem {
            ptr: p as *mut u8,
            len,
        })
    }

    /// The atomic at byte `offset` (4-byte aligned).
    pub fn u32_at(&self, offset: usize) -> &AtomicU32 {
        assert!(offset + 4 <= self.len && offset.is_multiple_of(4));
        // SAFETY: inside the mapping, aligned.
        unsafe { &*(self.ptr.add(offset) as *const AtomicU32) }
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment in a memory file, for tests between threads.
    fn segment(ring_bytes: usize) -> SharedMem {
        SharedMem::create(segment_bytes(ring_bytes, 2)).unwrap().0
    }

    /// Bytes 0..4 are the length (the ring's), 8..16 the sequence, then a pattern.
    fn pattern(seq: u64, b: &mut [u8]) {
        let n = b.len() as u32;
        b[..4].copy_from_slice(&n.to_le_bytes());
        b[8..16].copy_from_slice(&seq.to_le_bytes());
        for (i, x) in b[16..].iter_mut().enumerate() {
            *x = (seq as u8).wrapping_add(i as u8);
        }
    }

    fn check(b: &[u8]) -> u64 {
        let seq = u64::from_le_bytes(b[8..16].try_into().unwrap());
        for (i, x) in b[16..].iter().enumerate() {
            assert_eq!(*x, (seq as u8).wrapping_add(i as u8), "torn message {seq}");
        }
        seq
    }

    /// One writer, three readers, a small ring and messages of varied sizes (so records wrap
    /// with padding), every fifth one for one reader only, some copied and some built in
    /// place: every reader sees every message for all and each one for it, once, in order,
    /// whole (a reader that saw a record's head before its bytes would find it torn), and none
    /// for another reader.
    #[test]
    fn queue_delivers_everything_to_every_reader_under_stress() {
        // Four threads on a 2-CPU machine: waits yield, or the spinners starve each other.
        const N: u64 = 50_000;
        const RING: usize = 4096;
        let m = segment(RING);
        let base = m.ptr as usize;
        let size = |seq: u64| 16 + (seq * 37 % 700) as usize;
        let to = |seq: u64| seq.is_multiple_of(5).then_some((seq / 5 % 3) as usize);
        for i in 0..3 {
            unsafe { Ring::new(base as *mut u8, 0, RING) }.ctl().readers[i]
                .0
                .active
                .store(1, Ordering::SeqCst);
        }
        let readers: Vec<_> = (0..3)
            .map(|i| {
                std::thread::spawn(move || {
                    let r = unsafe { Ring::new(base as *mut u8, 0, RING) };
                    let mut pos = 0;
                    let mine = (0..N).filter(|&s| to(s).is_none_or(|k| k == i));
                    let (mut got, mut skipped) = (0u64, 0u64);
                    for expect in mine {
                        let (msg, next) = loop {
                            match r.record_for_read(pos, i) {
                                None => std::thread::yield_now(),
                                Some(Record::Mine(msg, next)) => break (msg, next),
                                Some(Record::Other(next)) => {
                                    skipped += 1;
                                    r.release(i, next, false);
                                    pos = next;
                                }
                            }
                        };
                        assert_eq!(msg.len(), size(expect));
                        assert_eq!(check(msg), expect, "reader {i}");
                        r.release(i, next, false);
                        pos = next;
                        got += 1;
                    }
                    (got, skipped)
                })
            })
            .collect();
        let w = unsafe { Ring::new(base as *mut u8, 0, RING) };
        let mut pos = 0;
        let mut clearance = Clearance::new(pos);
        for seq in 0..N {
            // Copied, or built in place (every third one).
            let built = seq % 3 == 1;
            let (start, end) = w.place(pos, size(seq), to(seq), built);
            let min_reader = loop {
                let m = w.min_reader(pos);
                if w.has_space(end, m) {
                    break m;
                }
                std::thread::yield_now();
            };
            let mut msg = vec![0u8; size(seq)];
            pattern(seq, &mut msg);
            let body = if built {
                Body::Build(&mut |b: &mut [u8]| pattern(seq, b))
            } else {
                Body::Copy(&msg)
            };
            clearance.publish(&w, (pos, start, end), size(seq), to(seq), body, min_reader);
            pos = end;
        }
        let addressed = N / 5;
        for r in readers {
            let (got, skipped) = r.join().unwrap();
            // Each reader got the messages for all and a third of the addressed ones, and
            // skipped most of the other two thirds (the last ones may come after its end).
            assert!(got >= N - addressed + addressed / 3, "{got}");
            assert!(skipped >= addressed * 2 / 3 - 2, "{skipped}");
        }
    }

    /// Every length, from aligned and unaligned buffers: a copy out is the message, a copy in
    /// is bytes 4.. of it and leaves the head (bytes 0..4) as it was, unpublished.
    #[test]
    fn copies_in_and_out_are_exact_and_leave_the_head_alone() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 1) as u8).collect();
        for offset in [0, 1, 4, 8] {
            for len in 4..=200 {
                let m = &src[offset..offset + len];
                let mut out = vec![0u8; len + offset];
                copy_out(&mut out[offset..], m);
                assert_eq!(&out[offset..], m, "out: len {len}, offset {offset}");
                let mut cell = vec![0xAAu8; len + 8];
                // SAFETY: `cell` holds `len` bytes past `offset`.
                unsafe { copy_in(cell.as_mut_ptr().add(offset), m) };
                assert_eq!(&cell[offset..offset + 4], &[0xAA; 4], "head: len {len}");
                assert_eq!(&cell[offset + 4..offset + len], &m[4..], "in: len {len}");
                assert!(
                    cell[offset + len..].iter().all(|&b| b == 0xAA),
                    "past: len {len}"
                );
            }
        }
    }

    /// The writer overwrites as fast as it can; the reader never gets a torn message, and the
    /// sequence numbers it sees only grow.
    #[test]
    fn latest_never_returns_a_torn_message() {
        let m = segment(8192);
        let base = m.ptr as usize;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let writer = std::thread::spawn(move || {
            let w = unsafe { Ring::new(base as *mut u8, 0, 8192) };
            let mut seq = 1;
            while !s2.load(Ordering::Relaxed) {
                w.write_latest(&mut |b| pattern(seq, b), 4000, false);
                seq += 1;
            }
            seq
        });
        let r = unsafe { Ring::new(base as *mut u8, 0, 8192) };
        let mut buf = vec![0u8; 4096];
        let (mut last, mut got, mut retries) = (0, 0, 0u64);
        while got < 20_000 {
            match r.read_latest(&mut buf).unwrap() {
                Some((n, _)) if n == 4000 => {
                    let seq = check(&buf[..n]);
                    assert!(seq >= last, "went back from {last} to {seq}");
                    last = seq;
                    got += 1;
                }
                Some(_) => {}
                None => retries += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
        let written = writer.join().unwrap();
        assert!(written > last);
        eprintln!("latest: {got} whole reads, {retries} retried torn reads, {written} writes");
    }
}
