//! `inproc`: a channel between two threads of one process (crossbeam), copying each message
//! into one of a fixed pool of buffers so that nothing is allocated per message.

use super::floor::{
    measure_round_trips, stream_figure, FloorEnds, FloorFigure, FloorLoop, FloorRoles,
};
use super::{
    channel_of, Capabilities, ChannelSpec, Deferred, Endpoint, Floor, Opening, Options, Place,
    Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::sys;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub struct Inproc;

/// Buffers in flight per direction: the channel's depth.
const POOL: usize = 8;

type Msg = (Box<[u8]>, usize);

/// Accepting ends by case key and channel: a connecting end makes a pair and hands one half to
/// its accepting end's inbox.
type Listening = Mutex<HashMap<(String, u32), Sender<InprocEndpoint>>>;

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
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: true,
            max_message_bytes: 64 << 20,
            notices_closed_peer: true,
            ..Capabilities::default()
        }
    }

    fn setup(&self, _: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        let key = super::fresh_name();
        Ok(Setup::new(
            Rendezvous::new(self.name(), Place::Key(key.clone())),
            Unregister(key),
        ))
    }

    fn open(
        &self,
        at: &Rendezvous,
        side: Side,
        _: &ChannelSpec,
    ) -> Result<Box<dyn Opening>, TransportError> {
        let (n, accept) = channel_of(self.name(), side)?;
        let Place::Key(key) = &at.place else {
            return Err(TransportError::Unsupported(
                "inproc meets by key in this process".into(),
            ));
        };
        let key = (key.clone(), n);
        if accept {
            let (tx, rx) = crossbeam_channel::bounded(1);
            listening().lock().unwrap().insert(key, tx);
            return Ok(Box::new(InprocAccept { inbox: rx }));
        }
        Ok(Box::new(Deferred(
            move |_: &Rendezvous, spec: &ChannelSpec| {
                let inbox = listening().lock().unwrap().get(&key).cloned().ok_or_else(|| {
                TransportError::Unsupported(format!(
                    "no inproc channel `{}#{}` in this process: inproc joins threads of one process, so run with --threads",
                    key.0, key.1
                ))
            })?;
                let (mine, theirs) = pair(spec);
                inbox
                    .send(theirs)
                    .map_err(|_| TransportError::Refused(format!("{}#{}", key.0, key.1)))?;
                Ok(Box::new(mine) as Box<dyn Endpoint>)
            },
        )))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&InprocFloor)
    }
}

/// Removes a case's channels from the registry.
struct Unregister(String);

impl Drop for Unregister {
    fn drop(&mut self) {
        listening().lock().unwrap().retain(|k, _| k.0 != self.0);
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

/// A channel's accepting end: waits for the connecting end's half.
struct InprocAccept {
    inbox: Receiver<InprocEndpoint>,
}

impl Opening for InprocAccept {
    fn finish(
        self: Box<Self>,
        _: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let ep = self
            .inbox
            .recv_timeout(spec.timeout)
            .map_err(|_| TransportError::Timeout(spec.timeout))?;
        Ok(Box::new(ep))
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

/// The plain loop between two threads: a bounded channel each way and a pool of buffers, a
/// copy into a buffer and out of it per message (the work the transport does), no framing.
struct InprocFloor;

/// One side's ends: what it sends on, where its free buffers come from, what it receives on,
/// where it returns what it received.
type FloorSide = (
    Sender<Box<[u8]>>,
    Receiver<Box<[u8]>>,
    Receiver<Box<[u8]>>,
    Sender<Box<[u8]>>,
);

impl Floor for InprocFloor {
    fn make(&self, _: FloorLoop, size: usize, _: &FloorRoles) -> std::io::Result<[FloorEnds; 2]> {
        let half = || {
            let (data_tx, data_rx) = bounded::<Box<[u8]>>(POOL);
            let (free_tx, free_rx) = bounded::<Box<[u8]>>(POOL);
            for _ in 0..POOL {
                let _ = free_tx.send(vec![7u8; size].into_boxed_slice());
            }
            (data_tx, data_rx, free_tx, free_rx)
        };
        let (ab, ab_rx, ab_free_tx, ab_free_rx) = half();
        let (ba, ba_rx, ba_free_tx, ba_free_rx) = half();
        let a: FloorSide = (ab, ab_free_rx, ba_rx, ba_free_tx);
        let b: FloorSide = (ba, ba_free_rx, ab_rx, ab_free_tx);
        Ok([FloorEnds::Local(Box::new(a)), FloorEnds::Local(Box::new(b))])
    }

    fn run(
        &self,
        l: FloorLoop,
        side: usize,
        ends: FloorEnds,
        size: usize,
        roles: &FloorRoles,
        stop: &AtomicBool,
    ) -> std::io::Result<Option<FloorFigure>> {
        let FloorEnds::Local(ends) = ends else {
            return Err(std::io::Error::other("the inproc floor runs in threads"));
        };
        let (tx, free, rx, give_back) = *ends
            .downcast::<FloorSide>()
            .map_err(|_| std::io::Error::other("not an inproc floor side"))?;
        let wait = Duration::from_secs(5);
        let mut own = vec![7u8; size];
        // One message out: a free buffer, a copy in, sent.
        let send = |own: &[u8]| -> bool {
            let Ok(mut b) = free.recv_timeout(wait) else {
                return false;
            };
            b.copy_from_slice(own);
            tx.send(b).is_ok()
        };
        // One message in: a copy out, the buffer returned.
        let receive = |own: &mut [u8]| -> bool {
            let Ok(b) = rx.recv_timeout(wait) else {
                return false;
            };
            own.copy_from_slice(&b);
            let _ = give_back.send(b);
            true
        };
        match (l, side) {
            (FloorLoop::PingPong, 0) => {
                measure_round_trips(roles, stop, || send(&own) && receive(&mut own)).map(Some)
            }
            (FloorLoop::PingPong, _) => {
                while receive(&mut own) && send(&own) {}
                Ok(None)
            }
            (FloorLoop::Stream, 0) => {
                let warm = roles.warmup.as_nanos() as u64;
                let (mut first, mut start, mut last, mut msgs) = (0u64, 0u64, 0u64, 0u64);
                while !stop.load(Ordering::Relaxed) && receive(&mut own) {
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
                }
                let msgs = msgs.saturating_sub(1);
                Ok(Some(stream_figure(
                    msgs,
                    msgs * size as u64,
                    last.saturating_sub(start),
                )))
            }
            (FloorLoop::Stream, _) => {
                let end = sys::monotonic_ns() + (roles.warmup + roles.duration).as_nanos() as u64;
                while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) && send(&own) {}
                Ok(None)
            }
        }
    }
}
