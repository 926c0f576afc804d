//! In-process channels between two threads of one process, one transport per channel crate:
//! `inproc` (crossbeam), `mpsc` (std's `sync_channel`), `flume` and `tokio-mpsc` (tokio's
//! bounded mpsc, awaited on a current-thread runtime of each end's own). Each copies a message
//! into one of a fixed pool of buffers, so nothing is allocated per message; only the crate
//! differs. Tokio's channel between tasks of one runtime is `pairs --runtime tokio`.

use super::floor::{measure_round_trips, FloorEnds, FloorFigure, FloorLoop, FloorRoles, FloorRun};
use super::{
    channel_of, Capabilities, ChannelSpec, Deferred, Endpoint, Floor, Opening, Options, Place,
    Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::transport::{EndpointResult, OpenResult};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Why a receive gave nothing.
pub enum Gone {
    Timeout,
    Closed,
}

/// A channel crate: a bounded channel, a blocking send, and its ways to receive.
pub trait Channels: Send + Sync + 'static {
    const NAME: &'static str;
    const ABOUT: &'static str;
    type Tx<T: Send + 'static>: Send + 'static;
    type Rx<T: Send + 'static>: Send + 'static;
    fn bounded<T: Send + 'static>(depth: usize) -> (Self::Tx<T>, Self::Rx<T>);
    /// Blocks while the channel is full; Err when the receiver is gone.
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> Result<(), ()>;
    fn recv_timeout<T: Send + 'static>(rx: &Self::Rx<T>, wait: Duration) -> Result<T, Gone>;
    /// Ok(None) when empty.
    fn try_recv<T: Send + 'static>(rx: &Self::Rx<T>) -> Result<Option<T>, ()>;
}

pub struct Crossbeam;
pub struct StdMpsc;
pub struct Flume;
pub struct TokioMpsc;

impl Channels for Crossbeam {
    const NAME: &'static str = "inproc";
    const ABOUT: &'static str =
        "channel between two threads of one process (crossbeam), roles always threads";
    type Tx<T: Send + 'static> = crossbeam_channel::Sender<T>;
    type Rx<T: Send + 'static> = crossbeam_channel::Receiver<T>;
    fn bounded<T: Send + 'static>(depth: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        crossbeam_channel::bounded(depth)
    }
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> Result<(), ()> {
        tx.send(v).map_err(|_| ())
    }
    fn recv_timeout<T: Send + 'static>(rx: &Self::Rx<T>, wait: Duration) -> Result<T, Gone> {
        rx.recv_timeout(wait).map_err(|e| match e {
            crossbeam_channel::RecvTimeoutError::Timeout => Gone::Timeout,
            crossbeam_channel::RecvTimeoutError::Disconnected => Gone::Closed,
        })
    }
    fn try_recv<T: Send + 'static>(rx: &Self::Rx<T>) -> Result<Option<T>, ()> {
        match rx.try_recv() {
            Ok(v) => Ok(Some(v)),
            Err(crossbeam_channel::TryRecvError::Empty) => Ok(None),
            Err(crossbeam_channel::TryRecvError::Disconnected) => Err(()),
        }
    }
}

impl Channels for StdMpsc {
    const NAME: &'static str = "mpsc";
    const ABOUT: &'static str =
        "channel between two threads of one process (std::sync::mpsc::sync_channel), roles always threads";
    type Tx<T: Send + 'static> = std::sync::mpsc::SyncSender<T>;
    type Rx<T: Send + 'static> = std::sync::mpsc::Receiver<T>;
    fn bounded<T: Send + 'static>(depth: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        std::sync::mpsc::sync_channel(depth)
    }
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> Result<(), ()> {
        tx.send(v).map_err(|_| ())
    }
    fn recv_timeout<T: Send + 'static>(rx: &Self::Rx<T>, wait: Duration) -> Result<T, Gone> {
        rx.recv_timeout(wait).map_err(|e| match e {
            std::sync::mpsc::RecvTimeoutError::Timeout => Gone::Timeout,
            std::sync::mpsc::RecvTimeoutError::Disconnected => Gone::Closed,
        })
    }
    fn try_recv<T: Send + 'static>(rx: &Self::Rx<T>) -> Result<Option<T>, ()> {
        match rx.try_recv() {
            Ok(v) => Ok(Some(v)),
            Err(std::sync::mpsc::TryRecvError::Empty) => Ok(None),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(()),
        }
    }
}

impl Channels for Flume {
    const NAME: &'static str = "flume";
    const ABOUT: &'static str =
        "channel between two threads of one process (flume), roles always threads";
    type Tx<T: Send + 'static> = flume::Sender<T>;
    type Rx<T: Send + 'static> = flume::Receiver<T>;
    fn bounded<T: Send + 'static>(depth: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        flume::bounded(depth)
    }
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> Result<(), ()> {
        tx.send(v).map_err(|_| ())
    }
    fn recv_timeout<T: Send + 'static>(rx: &Self::Rx<T>, wait: Duration) -> Result<T, Gone> {
        rx.recv_timeout(wait).map_err(|e| match e {
            flume::RecvTimeoutError::Timeout => Gone::Timeout,
            flume::RecvTimeoutError::Disconnected => Gone::Closed,
        })
    }
    fn try_recv<T: Send + 'static>(rx: &Self::Rx<T>) -> Result<Option<T>, ()> {
        match rx.try_recv() {
            Ok(v) => Ok(Some(v)),
            Err(flume::TryRecvError::Empty) => Ok(None),
            Err(flume::TryRecvError::Disconnected) => Err(()),
        }
    }
}

/// A tokio receiver with the current-thread runtime that awaits it: a role's thread runs its
/// receive as a future, as a task of a runtime of its own would.
pub struct TokioRx<T> {
    rx: Mutex<tokio::sync::mpsc::Receiver<T>>,
    runtime: tokio::runtime::Runtime,
}

impl Channels for TokioMpsc {
    const NAME: &'static str = "tokio-mpsc";
    const ABOUT: &'static str =
        "tokio::sync::mpsc between two threads of one process, each awaiting on a current-thread runtime of its own";
    type Tx<T: Send + 'static> = tokio::sync::mpsc::Sender<T>;
    type Rx<T: Send + 'static> = TokioRx<T>;
    fn bounded<T: Send + 'static>(depth: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        let (tx, rx) = tokio::sync::mpsc::channel(depth);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread tokio runtime");
        let rx = Mutex::new(rx);
        (tx, TokioRx { rx, runtime })
    }
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> Result<(), ()> {
        // A role's thread is outside any runtime, where tokio lets a send block.
        tx.blocking_send(v).map_err(|_| ())
    }
    fn recv_timeout<T: Send + 'static>(rx: &Self::Rx<T>, wait: Duration) -> Result<T, Gone> {
        let mut r = rx.rx.lock().unwrap_or_else(|e| e.into_inner());
        match rx
            .runtime
            .block_on(async { tokio::time::timeout(wait, r.recv()).await })
        {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(Gone::Closed),
            Err(_) => Err(Gone::Timeout),
        }
    }
    fn try_recv<T: Send + 'static>(rx: &Self::Rx<T>) -> Result<Option<T>, ()> {
        let mut r = rx.rx.lock().unwrap_or_else(|e| e.into_inner());
        match r.try_recv() {
            Ok(v) => Ok(Some(v)),
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => Ok(None),
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => Err(()),
        }
    }
}

/// The transport over channel crate `C`.
pub struct Inproc<C>(PhantomData<fn() -> C>);

pub const CROSSBEAM: Inproc<Crossbeam> = Inproc(PhantomData);
pub const STD_MPSC: Inproc<StdMpsc> = Inproc(PhantomData);
pub const FLUME: Inproc<Flume> = Inproc(PhantomData);
pub const TOKIO_MPSC: Inproc<TokioMpsc> = Inproc(PhantomData);

/// Buffers in flight per direction: the channel's depth.
const POOL: usize = 8;

type Msg = (Box<[u8]>, usize);

/// Accepting ends by case key and channel: a connecting end makes a pair and hands one half to
/// its accepting end's inbox. Case keys are unique across crates.
type Listening = Mutex<HashMap<(String, u32), crossbeam_channel::Sender<Box<dyn Endpoint>>>>;

fn listening() -> &'static Listening {
    static W: OnceLock<Listening> = OnceLock::new();
    W.get_or_init(Default::default)
}

impl<C: Channels> Transport for Inproc<C> {
    fn name(&self) -> &'static str {
        C::NAME
    }
    fn about(&self) -> &'static str {
        C::ABOUT
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

    fn open(&self, at: &Rendezvous, side: Side, _: &ChannelSpec) -> OpenResult {
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
        Deferred::later(move |_: &Rendezvous, spec: &ChannelSpec| {
            let inbox = listening().lock().unwrap().get(&key).cloned().ok_or_else(|| {
                TransportError::Unsupported(format!(
                    "no inproc channel `{}#{}` in this process: inproc joins threads of one process, so run with --threads",
                    key.0, key.1
                ))
            })?;
            let (mine, theirs) = pair::<C>(spec);
            inbox
                .send(Box::new(theirs))
                .map_err(|_| TransportError::Refused(format!("{}#{}", key.0, key.1)))?;
            Ok(Box::new(mine) as Box<dyn Endpoint>)
        })
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&InprocFloor::<C>(PhantomData))
    }
}

/// Removes a case's channels from the registry.
struct Unregister(String);

impl Drop for Unregister {
    fn drop(&mut self) {
        listening().lock().unwrap().retain(|k, _| k.0 != self.0);
    }
}

fn pair<C: Channels>(spec: &ChannelSpec) -> (InprocEndpoint<C>, InprocEndpoint<C>) {
    let half = || {
        let (data_tx, data_rx) = C::bounded::<Msg>(POOL);
        let (free_tx, free_rx) = C::bounded::<Box<[u8]>>(POOL);
        for _ in 0..POOL {
            let _ = C::send(&free_tx, vec![0u8; spec.max_message].into_boxed_slice());
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
    inbox: crossbeam_channel::Receiver<Box<dyn Endpoint>>,
}

impl Opening for InprocAccept {
    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        self.inbox
            .recv_timeout(spec.timeout)
            .map_err(|_| TransportError::Timeout(spec.timeout))
    }
}

struct InprocEndpoint<C: Channels> {
    tx: C::Tx<Msg>,
    free: C::Rx<Box<[u8]>>,
    rx: C::Rx<Msg>,
    give_back: C::Tx<Box<[u8]>>,
    timeout: Duration,
}

fn gone(e: Gone, timeout: Duration) -> TransportError {
    match e {
        Gone::Timeout => TransportError::Timeout(timeout),
        Gone::Closed => TransportError::PeerClosed,
    }
}

impl<C: Channels> InprocEndpoint<C> {
    fn take(&mut self, (b, len): Msg, buf: &mut [u8]) -> Result<usize, TransportError> {
        if len > buf.len() {
            return Err(TransportError::TooLarge {
                len,
                max: buf.len(),
            });
        }
        buf[..len].copy_from_slice(&b[..len]);
        let _ = C::send(&self.give_back, b);
        Ok(len)
    }
}

impl<C: Channels> Endpoint for InprocEndpoint<C> {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let mut b = C::recv_timeout(&self.free, self.timeout).map_err(|e| gone(e, self.timeout))?;
        if msg.len() > b.len() {
            return Err(TransportError::TooLarge {
                len: msg.len(),
                max: b.len(),
            });
        }
        b[..msg.len()].copy_from_slice(msg);
        C::send(&self.tx, (b, msg.len())).map_err(|_| TransportError::PeerClosed)
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        let m = C::recv_timeout(&self.rx, self.timeout).map_err(|e| gone(e, self.timeout))?;
        self.take(m, buf)
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        match C::try_recv(&self.rx) {
            Ok(Some(m)) => self.take(m, buf).map(Some),
            Ok(None) => Ok(None),
            Err(()) => Err(TransportError::PeerClosed),
        }
    }
}

/// The plain loop between two threads: a bounded channel each way and a pool of buffers, a
/// copy into a buffer and out of it per message (the work the transport does), no framing.
struct InprocFloor<C>(PhantomData<fn() -> C>);

/// One side's ends: what it sends on, where its free buffers come from, what it receives on,
/// where it returns what it received.
type FloorSide<C> = (
    <C as Channels>::Tx<Box<[u8]>>,
    <C as Channels>::Rx<Box<[u8]>>,
    <C as Channels>::Rx<Box<[u8]>>,
    <C as Channels>::Tx<Box<[u8]>>,
);

impl<C: Channels> Floor for InprocFloor<C> {
    fn make(&self, _: FloorLoop, size: usize, _: &FloorRoles) -> std::io::Result<[FloorEnds; 2]> {
        let half = || {
            let (data_tx, data_rx) = C::bounded::<Box<[u8]>>(POOL);
            let (free_tx, free_rx) = C::bounded::<Box<[u8]>>(POOL);
            for _ in 0..POOL {
                let _ = C::send(&free_tx, vec![7u8; size].into_boxed_slice());
            }
            (data_tx, data_rx, free_tx, free_rx)
        };
        let (ab, ab_rx, ab_free_tx, ab_free_rx) = half();
        let (ba, ba_rx, ba_free_tx, ba_free_rx) = half();
        let a: FloorSide<C> = (ab, ab_free_rx, ba_rx, ba_free_tx);
        let b: FloorSide<C> = (ba, ba_free_rx, ab_rx, ab_free_tx);
        Ok([FloorEnds::Local(Box::new(a)), FloorEnds::Local(Box::new(b))])
    }

    fn run(&self, run: FloorRun, ends: FloorEnds) -> std::io::Result<Option<FloorFigure>> {
        let FloorRun {
            kind: l,
            side,
            size,
            roles,
            stop,
        } = run;
        let FloorEnds::Local(ends) = ends else {
            return Err(std::io::Error::other("the inproc floor runs in threads"));
        };
        let (tx, free, rx, give_back) = *ends
            .downcast::<FloorSide<C>>()
            .map_err(|_| std::io::Error::other("not an inproc floor side"))?;
        let wait = Duration::from_secs(5);
        let mut own = vec![7u8; size];
        // One message out: a free buffer, a copy in, sent.
        let send = |own: &[u8]| -> bool {
            let Ok(mut b) = C::recv_timeout(&free, wait) else {
                return false;
            };
            b.copy_from_slice(own);
            C::send(&tx, b).is_ok()
        };
        // One message in: a copy out, the buffer returned.
        let receive = |own: &mut [u8]| -> bool {
            let Ok(b) = C::recv_timeout(&rx, wait) else {
                return false;
            };
            own.copy_from_slice(&b);
            let _ = C::send(&give_back, b);
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
            (FloorLoop::Stream, 0) => Ok(Some(run.read_stream(|| receive(&mut own)))),
            (FloorLoop::Stream, _) => {
                run.write_stream(|| send(&own));
                Ok(None)
            }
        }
    }
}
