//! shm's native fan-out: a topic segment whose one ring every reader reads, each with its own
//! cursor, so each message is written once whatever the number of readers. Readers join with
//! [`crate::transport::Side::Subscribe`] (see `mod.rs`); this is the writer.

use super::endpoint::{wake_all, Peer, RingWriter};
use super::ring::{self, Body, Ring};
use super::{header, Config};
use crate::transport::{Endpoint, TransportError};
use memmap2::MmapRaw;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The writer of a topic: ring 0, read by every reader.
pub(super) struct Topic {
    map: MmapRaw,
    tx: RingWriter,
    /// Ring 0 again, to see its readers' cursors while `tx` writes it.
    shared: Ring,
    readers: usize,
    cfg: Config,
    timeout: Duration,
}

impl Topic {
    pub fn new(
        map: MmapRaw,
        ring_bytes: usize,
        readers: usize,
        cfg: Config,
        timeout: Duration,
    ) -> Self {
        // SAFETY: the segment was made with one ring of `ring_bytes`, and `map` outlives the
        // rings (both live in the topic).
        let ring = || unsafe { Ring::new(map.as_mut_ptr(), 0, ring_bytes) };
        let (tx, shared) = (RingWriter::new(ring()), ring());
        Topic {
            map,
            tx,
            shared,
            readers,
            cfg,
            timeout,
        }
    }

    fn write(&mut self, len: usize, body: Body) -> Result<(), TransportError> {
        let (map, shared, n) = (&self.map, &self.shared, self.readers);
        self.tx
            .write(&self.cfg, self.timeout, len, None, body, &mut || {
                drop_gone_readers(map, shared, n)
            })
    }
}

/// Stops waiting for readers that left or died while they held the writer back, so the others
/// go on getting every message; true once no reader is left.
fn drop_gone_readers(map: &MmapRaw, shared: &Ring, readers: usize) -> bool {
    let mut left = 0;
    for k in 0..readers {
        let cursor = &shared.ctl().readers[k].0.active;
        if cursor.load(Ordering::Acquire) == 0 {
            continue;
        }
        if reader_peer(map, k).gone(map) {
            cursor.store(0, Ordering::SeqCst);
        } else {
            left += 1;
        }
    }
    left == 0
}

/// Reader `k` as the writer's peer: its leave bit and its process.
fn reader_peer(map: &MmapRaw, k: usize) -> Peer {
    Peer {
        closed: ring::reader_closed(k),
        pid: header(map).reader_pids[k].load(Ordering::Acquire),
    }
}

impl Endpoint for Topic {
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
    fn recv(&mut self, _buf: &mut [u8]) -> Result<usize, TransportError> {
        Err(TransportError::Unsupported(
            "a topic's writer only writes".into(),
        ))
    }
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        self.recv(buf).map(Some)
    }
}

impl Drop for Topic {
    fn drop(&mut self) {
        header(&self.map)
            .state
            .fetch_or(ring::side_closed(0), Ordering::SeqCst);
        wake_all(&[&self.tx.ring]);
    }
}
