//! `inproc`: a channel between two threads of one process (crossbeam), copying each message
//! into one of a fixed pool of buffers so that nothing is allocated per message.

use super::floor::{pinned, rtt_figure, FloorFigure, FloorRoles, MAX_SAMPLES};
use super::{
    Capabilities, ChannelSpec, Endpoint, Floor, Listener, Rendezvous, Transport, TransportError,
};
use crate::sys;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub struct Inproc;

/// Buffers in flight per direction: the channel's depth.
const POOL: usize = 8;

type Msg = (Box<[u8]>, usize);

/// Open listeners by rendezvous key: a connector makes a pair and hands one half to the
/// listener's inbox, so one listener serves any number of peers.
type Listening = Mutex<HashMap<String, Sender<InprocEndpoint>>>;

fn listening() -> &'static Listening {
    static W: OnceLock<Listening> = OnceLock::new();
    W.get_or_init(Default::default)
}

impl Transport for Inproc {
    fn name(&self) -> &'static str {
        "inproc"
    }
    fn about(&self) -> &'static str {
        "channel between two threads of one process (crossbeam), roles always threads"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            max_message_bytes: 64 << 20,
            cross_process: false,
            cross_host: false,
            latest_value: false,
            zero_copy: false,
            many_peers: true,
            native_fan_out: 0,
        }
    }

    fn listen(&self, spec: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let key = format!(
            "inproc-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let _ = spec;
        let (tx, rx) = crossbeam_channel::unbounded();
        listening().lock().unwrap().insert(key.clone(), tx);
        Ok(Box::new(InprocListener { key, inbox: rx }))
    }

    fn connect(
        &self,
        at: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let inbox = listening()
            .lock()
            .unwrap()
            .get(&at.address)
            .cloned()
            .ok_or_else(|| {
                TransportError::Unsupported(format!(
                "no inproc listener `{}` in this process: inproc joins threads of one process, so run with --threads",
                at.address
            ))
            })?;
        let (mine, theirs) = pair(spec);
        inbox
            .send(theirs)
            .map_err(|_| TransportError::Refused(at.address.clone()))?;
        Ok(Box::new(mine))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&InprocFloor)
    }
}

fn pair(spec: &ChannelSpec) -> (InprocEndpoint, InprocEndpoint) {
    let half = || {
        let (data_tx, data_rx) = bounded::<Msg>(POOL);
        let (free_tx, free_rx) = bounded::<Box<[u8]>>(POOL);
        for _ in 0..POOL {
            free_tx
                .send(vec![0u8; spec.max_message].into_boxed_slice())
                .unwrap();
        }
        (data_tx, data_rx, free_tx, free_rx)
    };
    let (ab_tx, ab_rx, ab_free_tx, ab_free_rx) = half();
    let (ba_tx, ba_rx, ba_free_tx, ba_free_rx) = half();
    (
        InprocEndpoint {
            tx: ab_tx,
            free: ab_free_rx,
            rx: ba_rx,
            give_back: ba_free_tx,
            timeout: spec.timeout,
        },
        InprocEndpoint {
            tx: ba_tx,
            free: ba_free_rx,
            rx: ab_rx,
            give_back: ab_free_tx,
            timeout: spec.timeout,
        },
    )
}

struct InprocListener {
    key: String,
    inbox: Receiver<InprocEndpoint>,
}

impl Listener for InprocListener {
    fn rendezvous(&self) -> Rendezvous {
        Rendezvous {
            transport: "inproc".into(),
            address: self.key.clone(),
        }
    }
    fn accept(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
        let ep = self
            .inbox
            .recv_timeout(spec.timeout)
            .map_err(|_| TransportError::Timeout(spec.timeout))?;
        Ok(Box::new(ep))
    }
}

impl Drop for InprocListener {
    fn drop(&mut self) {
        listening().lock().unwrap().remove(&self.key);
    }
}

struct InprocEndpoint {
    tx: Sender<Msg>,
    free: Receiver<Box<[u8]>>,
    rx: Receiver<Msg>,
    give_back: Sender<Box<[u8]>>,
    timeout: Duration,
}

impl InprocEndpoint {
    fn take(&mut self, (b, len): Msg, buf: &mut [u8]) -> Result<usize, TransportError> {
        if len > buf.len() {
            return Err(TransportError::TooLarge {
                len,
                max: buf.len(),
            });
        }
        buf[..len].copy_from_slice(&b[..len]);
        let _ = self.give_back.send(b);
        Ok(len)
    }
}

impl Endpoint for InprocEndpoint {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let mut b = self.free.recv_timeout(self.timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => TransportError::Timeout(self.timeout),
            RecvTimeoutError::Disconnected => TransportError::PeerClosed,
        })?;
        if msg.len() > b.len() {
            return Err(TransportError::TooLarge {
                len: msg.len(),
                max: b.len(),
            });
        }
        b[..msg.len()].copy_from_slice(msg);
        self.tx
            .send((b, msg.len()))
            .map_err(|_| TransportError::PeerClosed)
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        let m = self.rx.recv_timeout(self.timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => TransportError::Timeout(self.timeout),
            RecvTimeoutError::Disconnected => TransportError::PeerClosed,
        })?;
        self.take(m, buf)
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        match self.rx.try_recv() {
            Ok(m) => self.take(m, buf).map(Some),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(TransportError::PeerClosed),
        }
    }
}

/// Two threads handing one buffer back and forth: no copy, no pool.
struct InprocFloor;

impl Floor for InprocFloor {
    fn pingpong(&self, size: usize, roles: &FloorRoles) -> std::io::Result<FloorFigure> {
        let (ab_tx, ab_rx) = bounded::<Box<[u8]>>(1);
        let (ba_tx, ba_rx) = bounded::<Box<[u8]>>(1);
        let cpu = roles.cpus.1;
        let peer = std::thread::spawn(move || {
            if let Some(c) = cpu {
                let _ = sys::pin_current_thread(c);
            }
            while let Ok(mut b) = ab_rx.recv() {
                b[0] = b[0].wrapping_add(1);
                if ba_tx.send(b).is_err() {
                    break;
                }
            }
        });
        let mut samples: Vec<u32> = Vec::with_capacity(MAX_SAMPLES);
        pinned(roles, || {
            let mut b = vec![0u8; size].into_boxed_slice();
            let warm_end = sys::monotonic_ns() + roles.warmup.as_nanos() as u64;
            let end = warm_end + roles.duration.as_nanos() as u64;
            loop {
                let t0 = sys::monotonic_ns();
                if ab_tx.send(b).is_err() {
                    break;
                }
                b = match ba_rx.recv_timeout(Duration::from_secs(5)) {
                    Ok(b) => b,
                    Err(_) => break,
                };
                let t1 = sys::monotonic_ns();
                if t0 >= warm_end {
                    samples.push((t1 - t0).min(u32::MAX as u64) as u32);
                }
                if t1 >= end || samples.len() == MAX_SAMPLES {
                    break;
                }
            }
        });
        drop(ab_tx);
        let _ = peer.join();
        Ok(rtt_figure(&mut samples))
    }

    fn stream(&self, size: usize, roles: &FloorRoles) -> std::io::Result<FloorFigure> {
        let (tx, rx) = bounded::<Box<[u8]>>(POOL);
        let (free_tx, free_rx) = bounded::<Box<[u8]>>(POOL);
        for _ in 0..POOL {
            free_tx.send(vec![7u8; size].into_boxed_slice()).unwrap();
        }
        let cpu = roles.cpus.1;
        let total = (roles.warmup + roles.duration).as_nanos() as u64;
        let writer = std::thread::spawn(move || {
            if let Some(c) = cpu {
                let _ = sys::pin_current_thread(c);
            }
            let end = sys::monotonic_ns() + total;
            while sys::monotonic_ns() < end {
                let Ok(b) = free_rx.recv_timeout(Duration::from_secs(5)) else {
                    break;
                };
                if tx.send(b).is_err() {
                    break;
                }
            }
        });
        let (msgs, ns) = pinned(roles, || {
            let warm = roles.warmup.as_nanos() as u64;
            let (mut first, mut start, mut last, mut msgs) = (0u64, 0u64, 0u64, 0u64);
            while let Ok(b) = rx.recv_timeout(Duration::from_secs(5)) {
                let now = sys::monotonic_ns();
                if first == 0 {
                    first = now;
                }
                if now >= first + warm {
                    if msgs == 0 {
                        start = now;
                    }
                    last = now;
                    msgs += 1;
                }
                let _ = free_tx.send(b);
            }
            (msgs.saturating_sub(1), last.saturating_sub(start))
        });
        let _ = writer.join();
        let secs = ns.max(1) as f64 / 1e9;
        Ok(FloorFigure {
            samples: msgs,
            msgs_per_s: msgs as f64 / secs,
            bytes_per_s: msgs as f64 * size as f64 / secs,
            ..Default::default()
        })
    }
}
