//! shm's native fan-out: a topic segment whose ring 0 every reader reads (each message is
//! written once, whatever the number of readers), with a ring per reader for its answers.
//! Readers join with the ordinary `connect`; the writer's session messages to one reader are
//! records that the other readers skip, in order with the data.

use super::endpoint::{wake_all, Peer, RingReader, RingWriter};
use super::ring::{self, Ring, CREATOR_CLOSED};
use super::{header, Config};
use crate::deadline::Deadline;
use crate::transport::{
    ChannelSpec, Endpoint, Multicast, MulticastListener, Rendezvous, TransportError,
};
use memmap2::MmapRaw;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A topic until all its readers joined.
pub(super) struct TopicListener {
    pub path: PathBuf,
    pub cfg: Config,
    pub readers: usize,
    pub map: Option<MmapRaw>,
}

impl MulticastListener for TopicListener {
    fn rendezvous_for(&self, reader: usize) -> Rendezvous {
        Rendezvous {
            transport: "shm".into(),
            address: format!("{}#{reader}", self.path.display()),
        }
    }

    fn accept_all(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Multicast>, TransportError> {
        let deadline = Deadline::after(spec.timeout);
        let map = self.map.as_ref().ok_or_else(|| {
            TransportError::Unsupported("this topic has already been taken".into())
        })?;
        let h = header(map);
        let mut pause = Duration::from_micros(100);
        while (h.joined.load(Ordering::Acquire) as usize) < self.readers {
            if deadline.expired() {
                return Err(TransportError::Timeout(spec.timeout));
            }
            std::thread::sleep(pause.min(deadline.remaining_nonzero()));
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        // Every reader has it mapped: the name is no longer needed.
        let _ = std::fs::remove_file(&self.path);
        let map = self.map.take().expect("checked above");
        let ring_bytes = header(&map).ring_bytes.load(Ordering::Acquire) as usize;
        // SAFETY: the segment was made with 1 + readers rings of `ring_bytes`, and `map`
        // outlives the rings (both live in the topic).
        let ring = |i| unsafe { Ring::new(map.as_mut_ptr(), i, ring_bytes) };
        let tx = RingWriter::new(ring(0));
        let answers = (0..self.readers)
            .map(|k| RingReader::join(ring(1 + k), 0))
            .collect();
        Ok(Box::new(Topic {
            shared: ring(0),
            map,
            tx,
            answers,
            cfg: self.cfg,
            timeout: spec.timeout,
            failed_at: None,
        }))
    }
}

impl Drop for TopicListener {
    fn drop(&mut self) {
        if self.map.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The writer of a topic: ring 0 to every reader, ring `1 + k` from reader `k`.
struct Topic {
    map: MmapRaw,
    tx: RingWriter,
    /// Ring 0 again, to see its readers' cursors while `tx` writes it.
    shared: Ring,
    answers: Vec<RingReader>,
    cfg: Config,
    timeout: Duration,
    failed_at: Option<usize>,
}

impl Topic {
    fn write(
        &mut self,
        len: usize,
        to: Option<usize>,
        build: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        let mut gone = None;
        let (map, shared, n) = (&self.map, &self.shared, self.answers.len());
        let r = self
            .tx
            .write(&self.cfg, self.timeout, len, to, build, &mut || {
                gone = gone_reader(map, shared, n);
                gone.is_some()
            });
        if r.is_err() {
            self.failed_at = gone.or(to);
        }
        r
    }
}

/// A reader of `shared` (ring 0) that still holds the writer back but left or died, if one did.
fn gone_reader(map: &MmapRaw, shared: &Ring, readers: usize) -> Option<usize> {
    (0..readers).find(|&k| {
        shared.ctl().readers[k].0.active.load(Ordering::Acquire) != 0
            && reader_peer(map, k).gone(map)
    })
}

/// Reader `k` as the writer's peer: its leave bit and its process.
fn reader_peer(map: &MmapRaw, k: usize) -> Peer {
    Peer {
        closed: ring::reader_closed(k),
        pid: header(map).reader_pids[k].load(Ordering::Acquire),
    }
}

impl Multicast for Topic {
    fn readers(&self) -> usize {
        self.answers.len()
    }
    fn native(&self) -> bool {
        true
    }
    fn to_all(&mut self) -> &mut dyn Endpoint {
        self
    }
    fn send_to(&mut self, reader: usize, msg: &[u8]) -> Result<(), TransportError> {
        self.write(msg.len(), Some(reader), &mut |slot| {
            slot.copy_from_slice(msg)
        })
    }
    fn recv_from(&mut self, reader: usize, buf: &mut [u8]) -> Result<usize, TransportError> {
        let peer = reader_peer(&self.map, reader);
        let map = &self.map;
        let Some(answers) = self.answers.get_mut(reader) else {
            return Err(TransportError::Unsupported(format!(
                "no reader {reader} in this topic"
            )));
        };
        answers.read_into(&self.cfg, self.timeout, buf, &mut || peer.gone(map))
    }
    fn set_recv_timeout(&mut self, timeout: Duration) -> Result<(), TransportError> {
        self.timeout = timeout;
        Ok(())
    }
    fn failed_reader(&self) -> Option<usize> {
        self.failed_at
    }
}

impl Endpoint for Topic {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        self.write(msg.len(), None, &mut |slot| slot.copy_from_slice(msg))
    }
    fn send_with(
        &mut self,
        len: usize,
        build: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        self.write(len, None, build)
    }
    fn recv(&mut self, _buf: &mut [u8]) -> Result<usize, TransportError> {
        Err(TransportError::Unsupported(
            "a topic's writer only writes to all; answers come per reader".into(),
        ))
    }
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        self.recv(buf).map(Some)
    }
    fn set_recv_timeout(&mut self, timeout: Duration) -> Result<(), TransportError> {
        Multicast::set_recv_timeout(self, timeout)
    }
}

impl Drop for Topic {
    fn drop(&mut self) {
        for a in &self.answers {
            a.leave();
        }
        header(&self.map)
            .state
            .fetch_or(CREATOR_CLOSED, Ordering::SeqCst);
        let mut rings = vec![&self.tx.ring];
        rings.extend(self.answers.iter().map(|a| &a.ring));
        wake_all(&rings);
    }
}
