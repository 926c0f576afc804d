//! The shm floor: shm's own rings and wait strategy between the two sides, as the case's
//! endpoints use them (the same capacity, the same `--opt wait`), each message copied in and
//! out, with none of msgperf's work: no header, no timestamp, no check, no histogram, no
//! endpoint in between. `vs floor` is then what msgperf's measuring adds to shm, as it is for
//! every other transport; how far the ring itself is from the hardware, the cache-line
//! ping-pong of `msgperf floor` says (`bench/ratios.py` puts the three side by side).

use super::endpoint::{RingReader, RingWriter};
use super::ring::{self, segment_bytes, Body, Ring, SharedMem, MODE_QUEUE};
use super::Config;
use crate::transport::floor::{
    measure_round_trips, Floor, FloorEnds, FloorFigure, FloorLoop, FloorRoles, FloorRun, ReadWindow,
};
use crate::transport::{ChannelSpec, TransportError};
use std::sync::atomic::{AtomicU32, Ordering};

pub struct ShmFloor;

/// The rings a loop uses (ping-pong: one each way; stream: one), after which a line holds the
/// measuring side's `done`.
fn rings(l: FloorLoop) -> usize {
    match l {
        FloorLoop::PingPong => 2,
        FloorLoop::Stream => 1,
    }
}

/// The case's ring configuration for messages of `size` bytes.
fn config(size: usize, roles: &FloorRoles) -> std::io::Result<Config> {
    let spec = ChannelSpec {
        options: roles.options.clone(),
        timeout: roles.timeout,
        poll: false,
        max_message: size,
        watched: true,
        exchange: Default::default(),
    };
    let cfg = Config::from(&spec).map_err(|e| std::io::Error::other(e.to_string()))?;
    // A queue always: a latest-value case has no floor to compare with, and its floor is the
    // queue's, as a case that never overwrites would see.
    Ok(Config {
        mode: MODE_QUEUE,
        ..cfg
    })
}

/// Copies a message out of the ring as the endpoints do (every one is the floor's own,
/// `buf`'s length).
fn take(buf: &mut [u8], m: &[u8]) {
    let n = m.len().min(buf.len());
    ring::copy_out(buf, &m[..n]);
}

fn bytes(l: FloorLoop, cfg: &Config) -> usize {
    segment_bytes(cfg.ring_bytes, rings(l)) + 128
}

impl Floor for ShmFloor {
    fn make(
        &self,
        l: FloorLoop,
        size: usize,
        roles: &FloorRoles,
    ) -> std::io::Result<[FloorEnds; 2]> {
        // A ring message holds its own length in its first four bytes: at least 8 bytes.
        let cfg = config(size.max(8), roles)?;
        let (shared, fd) = SharedMem::create(bytes(l, &cfg))?;
        // Each ring's reader counts from the start: a writer that starts first waits for it
        // rather than lapping a ring nobody reads yet.
        for i in 0..rings(l) {
            // SAFETY: the mapping holds the rings and outlives this use.
            let ring = unsafe { Ring::new(shared.ptr, i, cfg.ring_bytes) };
            ring.ctl().readers[0].0.active.store(1, Ordering::SeqCst);
        }
        Ok([
            FloorEnds::Fds(vec![fd.try_clone()?]),
            FloorEnds::Fds(vec![fd]),
        ])
    }

    fn run(&self, run: FloorRun, ends: FloorEnds) -> std::io::Result<Option<FloorFigure>> {
        let FloorEnds::Fds(fds) = ends else {
            return Err(std::io::Error::other("the shm floor shares a memory file"));
        };
        let (l, side, roles, stop) = (run.kind, run.side, run.roles, run.stop);
        let size = run.size.max(8);
        let cfg = config(size, roles)?;
        let len = bytes(l, &cfg);
        let shared = SharedMem::map(&fds[0], len)?;
        let done: &AtomicU32 = shared.u32_at(len - 128);
        let base = shared.ptr;
        // SAFETY: the mapping holds `rings(l)` rings of `ring_bytes` and outlives them.
        let ring = |i: usize| unsafe { Ring::new(base, i, cfg.ring_bytes) };
        let mut buf = vec![7u8; size];
        buf[..4].copy_from_slice(&(size as u32).to_le_bytes());
        let timeout = roles.timeout;
        let peer_gone = || done.load(Ordering::Acquire) != 0;
        let over = |r: Result<usize, TransportError>| match r {
            Ok(_) => Ok(true),
            Err(TransportError::PeerClosed | TransportError::Timeout(_)) => Ok(false),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        };
        match (l, side) {
            // Ring 0 from side 0 to side 1, ring 1 back.
            (FloorLoop::PingPong, 0) => {
                let (mut tx, mut rx) = (RingWriter::new(ring(0)), RingReader::join(ring(1), 0));
                let never = &mut || false;
                let f = measure_round_trips(roles, stop, || {
                    let sent = tx.write(&cfg, timeout, size, None, Body::Copy(&buf), never);
                    if sent.is_err() {
                        return false;
                    }
                    rx.read(&cfg, timeout, &mut |m| take(&mut buf, m), never)
                        .is_ok()
                });
                done.store(1, Ordering::Release);
                rx.leave();
                f.map(Some)
            }
            (FloorLoop::PingPong, _) => {
                let (mut rx, mut tx) = (RingReader::join(ring(0), 0), RingWriter::new(ring(1)));
                let mut gone = peer_gone;
                while over(rx.read(&cfg, timeout, &mut |m| take(&mut buf, m), &mut gone))? {
                    let sent = tx.write(&cfg, timeout, size, None, Body::Copy(&buf), &mut gone);
                    if !over(sent.map(|()| size))? {
                        break;
                    }
                }
                rx.leave();
                Ok(None)
            }
            // Side 1 writes ring 0 as fast as side 0, which measures, reads it.
            (FloorLoop::Stream, 0) => {
                let mut rx = RingReader::join(ring(0), 0);
                // Opened and closed as every stream floor's reader's: on the clock read once
                // in 64 messages where they come fast.
                let mut window = ReadWindow::new(roles.warmup);
                let measured = loop {
                    let read = rx.read(
                        &cfg,
                        timeout,
                        &mut |m| {
                            take(&mut buf, m);
                            std::hint::black_box(&mut buf);
                        },
                        &mut || false,
                    );
                    if !over(read)? {
                        break false;
                    }
                    window.read();
                    if window.lasted(roles.duration)
                        || (stop.load(Ordering::Relaxed) && window.measured())
                    {
                        break true;
                    }
                };
                done.store(1, Ordering::Release);
                // The writer may wait for room: leaving frees it.
                rx.leave();
                if !measured {
                    return Err(std::io::Error::other("the shm floor's writer stopped"));
                }
                Ok(Some(window.figure(size)))
            }
            (FloorLoop::Stream, _) => {
                let mut tx = RingWriter::new(ring(0));
                let mut gone = peer_gone;
                while !peer_gone()
                    && over(
                        tx.write(&cfg, timeout, size, None, Body::Copy(&buf), &mut gone)
                            .map(|()| size),
                    )?
                {}
                Ok(None)
            }
        }
    }
}
