//! The message every workload sends: a 32-byte header, then payload written by the sender and
//! checked by the receiver.
//!
//! ```text
//! 0..4   length of the whole message (u32 LE; the transport contract's delimiter)
//! 4..8   flags (MEASURED, END, UNSTAMPED, ACK)
//! 8..16  sequence number
//! 16..24 send time, CLOCK_MONOTONIC ns (0 where UNSTAMPED)
//! 24..28 CRC32 of seq and payload (with --checksum), else 0
//! 28..32 paced sends: how late the sender was behind its schedule, ns (u32, saturating)
//! len-8..len  the sequence number again (messages of 40 B and more): a cheap check that the
//!             whole message arrived and belongs together
//! ```
//!
//! A typed message (`--payload TYPE:FORMAT`) puts its encoded body between header and tail:
//!
//! ```text
//! 32..36  the body's length (u32 LE)
//! 36..40  0
//! 40..    the body, in room for the largest value of its rotation (8-aligned, as zero-copy
//!         formats want it)
//! ```

pub const HEADER: usize = 32;
/// The smallest message: the header.
pub const MIN_SIZE: usize = HEADER;

/// Where a typed message's body starts.
pub const BODY: usize = HEADER + 8;

/// The size of a typed message whose bodies take up to `room` bytes.
pub fn typed_size(room: usize) -> usize {
    BODY + room + 8
}

/// The room for a typed message's body.
#[inline(always)]
pub fn body_room(b: &mut [u8]) -> &mut [u8] {
    let n = b.len();
    &mut b[BODY..n - 8]
}

/// Records the length of the body just written.
#[inline(always)]
pub fn set_body_len(b: &mut [u8], len: usize) {
    b[HEADER..HEADER + 4].copy_from_slice(&(len as u32).to_le_bytes());
}

/// A typed message's body, as its length says.
#[inline(always)]
pub fn body(b: &[u8]) -> Result<&[u8], String> {
    let len = u32_at(b, HEADER) as usize;
    b.get(BODY..BODY + len)
        .filter(|_| BODY + len + 8 <= b.len())
        .ok_or_else(|| {
            format!(
                "message {} declares a {len} B body that its {} B do not hold",
                seq(b),
                b.len()
            )
        })
}

/// Part of the measured window (not warm-up).
pub const MEASURED: u32 = 1;
/// The sender is done; `seq` holds the number of messages it sent.
pub const END: u32 = 2;
/// Carries no send time: a stream's writer stamps only every Nth message (`--stamp-every`).
pub const UNSTAMPED: u32 = 4;
/// Acknowledges message `seq` (`--confirm`).
pub const ACK: u32 = 8;

#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

#[inline(always)]
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[inline(always)]
pub fn flags(b: &[u8]) -> u32 {
    u32_at(b, 4)
}

#[inline(always)]
pub fn seq(b: &[u8]) -> u64 {
    u64_at(b, 8)
}

#[inline(always)]
pub fn send_ns(b: &[u8]) -> u64 {
    u64_at(b, 16)
}

/// How late a paced sender was behind its schedule for this message.
#[inline(always)]
pub fn lag_ns(b: &[u8]) -> u64 {
    u32_at(b, 28) as u64
}

/// A message buffer owned by a sender: the payload pattern is written once, the header and
/// tail for every message.
pub struct Outgoing {
    buf: Vec<u8>,
    checksum: bool,
}

impl Outgoing {
    /// The whole message, for a typed body to be written into before [`Outgoing::stamp`].
    pub fn buf_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    pub fn new(size: usize, checksum: bool) -> Self {
        assert!(size >= MIN_SIZE);
        let mut buf: Vec<u8> = (0..size)
            .map(|i| (i.wrapping_mul(131).wrapping_add(7)) as u8)
            .collect();
        buf[0..4].copy_from_slice(&(size as u32).to_le_bytes());
        buf[4..32].fill(0);
        Outgoing { buf, checksum }
    }

    /// Writes the header (and tail and checksum) for message `seq`.
    #[inline(always)]
    pub fn stamp(&mut self, seq: u64, send_ns: u64, flags: u32, lag_ns: u64) -> &[u8] {
        let b = &mut self.buf;
        b[28..32].copy_from_slice(&(lag_ns.min(u32::MAX as u64) as u32).to_le_bytes());
        b[4..8].copy_from_slice(&flags.to_le_bytes());
        b[8..16].copy_from_slice(&seq.to_le_bytes());
        b[16..24].copy_from_slice(&send_ns.to_le_bytes());
        let n = b.len();
        if n >= HEADER + 8 {
            b[n - 8..].copy_from_slice(&seq.to_le_bytes());
        }
        if self.checksum {
            let c = crc(b);
            b[24..28].copy_from_slice(&c.to_le_bytes());
        }
        &self.buf
    }
}

fn crc(b: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&b[8..16]);
    h.update(&b[HEADER..]);
    h.finalize()
}

/// What is wrong with a received message, told apart without building words: a reader's
/// path per message carries this, and [`Fault::describe`] writes the words for the rare one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Not the length that was sent.
    Length,
    /// Not the length its header declares.
    Declared,
    /// Its tail is another message's.
    Tail,
    /// Its CRC32 fails.
    Checksum,
    /// A payload byte was not written for it (a message built in place).
    Payload,
}

impl Fault {
    /// What is wrong with message `b`, which has this fault, in words.
    #[cold]
    #[inline(never)]
    pub fn describe(self, b: &[u8], expected_len: usize) -> String {
        let n = b.len();
        match self {
            Fault::Length => format!("received {n} B where {expected_len} B were sent: the transport truncated or merged messages"),
            Fault::Declared => format!("a message declares {} B but {n} B arrived", u32_at(b, 0)),
            Fault::Tail => format!(
                "message {} ends with the tail of message {}: its bytes were mixed",
                seq(b),
                u64_at(b, n - 8)
            ),
            Fault::Checksum => format!("message {} fails its CRC32: the payload was corrupted", seq(b)),
            Fault::Payload => format!(
                "message {} has payload bytes that were not written for it",
                seq(b)
            ),
        }
    }
}

/// The first fault of a received message: its length, its declared length, its tail and (if
/// asked) its checksum.
#[inline(always)]
pub fn fault(b: &[u8], expected_len: usize, checksum: bool) -> Option<Fault> {
    let n = b.len();
    // The common message in one test (its length as sent and as declared, its tail), so a
    // 64 B message that lasts 30 ns pays one branch; which fault it is, is found apart.
    if n >= HEADER + 8 && !checksum {
        let differs = (n ^ expected_len) as u64
            | (u32_at(b, 0) as u64 ^ n as u64)
            | (u64_at(b, n - 8) ^ seq(b));
        if differs == 0 {
            return None;
        }
    }
    which_fault(b, expected_len, checksum)
}

#[cold]
#[inline(never)]
fn which_fault(b: &[u8], expected_len: usize, checksum: bool) -> Option<Fault> {
    let n = b.len();
    if n != expected_len {
        return Some(Fault::Length);
    }
    if u32_at(b, 0) as usize != n {
        return Some(Fault::Declared);
    }
    if n >= HEADER + 8 && u64_at(b, n - 8) != seq(b) {
        return Some(Fault::Tail);
    }
    if checksum && crc(b) != u32_at(b, 24) {
        return Some(Fault::Checksum);
    }
    None
}

/// Checks a received message ([`fault`]); what is wrong, in words.
#[inline(always)]
pub fn verify(b: &[u8], expected_len: usize, checksum: bool) -> Result<(), String> {
    in_words(fault(b, expected_len, checksum), b, expected_len)
}

/// A fault `found` in message `b`, as the words of [`Fault::describe`].
#[inline(always)]
fn in_words(found: Option<Fault>, b: &[u8], expected_len: usize) -> Result<(), String> {
    found.map_or(Ok(()), |f| Err(f.describe(b, expected_len)))
}

/// Writes the header of message `seq` in place and its tail (a typed body goes between).
#[inline(always)]
pub fn build_header(b: &mut [u8], seq: u64, send_ns: u64, flags: u32, lag_ns: u64) {
    let n = b.len();
    b[0..4].copy_from_slice(&(n as u32).to_le_bytes());
    b[4..8].copy_from_slice(&flags.to_le_bytes());
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..24].copy_from_slice(&send_ns.to_le_bytes());
    b[24..28].fill(0);
    b[28..32].copy_from_slice(&(lag_ns.min(u32::MAX as u64) as u32).to_le_bytes());
    if n >= HEADER + 8 {
        b[n - 8..].copy_from_slice(&seq.to_le_bytes());
    }
}

/// Writes the checksum of a message whose body changed after it was stamped.
#[inline(always)]
pub fn reseal(b: &mut [u8]) {
    let c = crc(b);
    b[24..28].copy_from_slice(&c.to_le_bytes());
}

/// Builds message `seq` in place (zero-copy): header, every payload byte, tail, checksum. The
/// payload byte is derived from `seq`, so the reader can check every byte it reads.
#[inline(always)]
pub fn build_in_place(
    b: &mut [u8],
    seq: u64,
    send_ns: u64,
    flags: u32,
    lag_ns: u64,
    checksum: bool,
) {
    build_header(b, seq, send_ns, flags, lag_ns);
    let n = b.len();
    if n >= HEADER + 8 {
        b[HEADER..n - 8].fill(in_place_byte(seq));
    }
    if checksum {
        reseal(b);
    }
}

#[inline(always)]
fn in_place_byte(seq: u64) -> u8 {
    (seq as u8) ^ 0x5a
}

/// The first fault of a message built in place, reading every payload byte (as a consumer
/// would).
#[inline(always)]
pub fn fault_in_place(b: &[u8], expected_len: usize, checksum: bool) -> Option<Fault> {
    if let Some(f) = fault(b, expected_len, checksum) {
        return Some(f);
    }
    let n = b.len();
    if n >= HEADER + 8 {
        let want = in_place_byte(seq(b));
        let word = u64::from_ne_bytes([want; 8]);
        let mut words = b[HEADER..n - 8].chunks_exact(8);
        // Word by word, with no early exit, so the compiler vectorizes it like a memcpy.
        let diff = (&mut words).fold(0u64, |acc, w| {
            acc | (u64::from_ne_bytes(w.try_into().unwrap()) ^ word)
        });
        if diff != 0 || !words.remainder().iter().all(|&x| x == want) {
            return Some(Fault::Payload);
        }
    }
    None
}

/// Checks a message built in place ([`fault_in_place`]); what is wrong, in words.
#[inline(always)]
pub fn verify_in_place(b: &[u8], expected_len: usize, checksum: bool) -> Result<(), String> {
    in_words(fault_in_place(b, expected_len, checksum), b, expected_len)
}

/// A header-only message (END, ACK) into `out`.
pub fn signal(out: &mut [u8; HEADER], flags: u32, seq: u64) -> &[u8] {
    out.fill(0);
    out[0..4].copy_from_slice(&(HEADER as u32).to_le_bytes());
    out[4..8].copy_from_slice(&flags.to_le_bytes());
    out[8..16].copy_from_slice(&seq.to_le_bytes());
    out
}

/// END: `next` in the sequence field, the first measured sequence number in the send-time
/// field, so the reader can count what it never saw at either end.
pub fn end(out: &mut [u8; HEADER], next: u64, first_measured: u64) -> &[u8] {
    signal(out, END, next);
    out[16..24].copy_from_slice(&first_measured.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_built_in_place_are_checked_byte_by_byte() {
        let mut b = vec![0u8; 200];
        build_in_place(&mut b, 9, 1, MEASURED, 0, false);
        verify_in_place(&b, 200, false).unwrap();
        b[100] ^= 1;
        assert!(verify_in_place(&b, 200, false)
            .unwrap_err()
            .contains("not written"));
    }

    #[test]
    fn stamped_messages_verify_and_damage_is_named() {
        for checksum in [false, true] {
            let mut m = Outgoing::new(100, checksum);
            let b = m.stamp(42, 7, MEASURED, 0).to_vec();
            assert_eq!((seq(&b), send_ns(&b), flags(&b)), (42, 7, MEASURED));
            verify(&b, 100, checksum).unwrap();
            assert!(verify(&b[..99], 100, checksum)
                .unwrap_err()
                .contains("truncated"));
            let mut torn = b.clone();
            torn[92] ^= 1;
            assert!(verify(&torn, 100, checksum).unwrap_err().contains("tail"));
            if checksum {
                let mut bad = b.clone();
                bad[50] ^= 1;
                assert!(verify(&bad, 100, true).unwrap_err().contains("CRC32"));
            }
        }
    }
}
