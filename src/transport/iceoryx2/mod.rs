//! `iceoryx2`: Eclipse iceoryx2's zero-copy publish/subscribe, the reference to beat for shm.
//! Two services per channel (listener-to-connector and back), each with one publisher and one
//! subscriber; `wait=block` adds an event service per direction so a reader sleeps until the
//! writer notifies it. Messages are written into loaned samples (zero-copy) and read in place.
//!
//! Fair comparison with `shm` (recorded in the results as the options of each case): both write
//! and read every payload byte, both use the same wait strategy and placement, both run as two
//! processes. iceoryx2's own benchmark touches no payload by default; msgperf's messages always do.
//! Cargo feature `iceoryx2`.

// One unsafe use: a loaned sample is handed to the message builder as `&mut [u8]` before it is
// initialized; every builder writes every byte before anything reads it.
#![allow(unsafe_code)]

use super::{
    channel_of, copy_out, dir_of, dir_setup, Capabilities, ChannelSpec, Deferred, Endpoint,
    Opening, OptionSpec, Options, Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::deadline::Deadline;
use crate::transport::{EndpointResult, OpenResult};
use ::iceoryx2::port::listener::Listener as EventListener;
use ::iceoryx2::port::notifier::Notifier;
use ::iceoryx2::port::publisher::Publisher;
use ::iceoryx2::port::subscriber::Subscriber;
use ::iceoryx2::port::{BackpressureAction, BackpressureInfo, SendError};
use ::iceoryx2::prelude::*;
use ::iceoryx2::service::port_factory::publish_subscribe::PortFactory as PubSubFactory;
use std::time::{Duration, Instant};

pub struct Iceoryx2;

type Svc = ipc_threadsafe::Service;

impl Transport for Iceoryx2 {
    fn name(&self) -> &'static str {
        "iceoryx2"
    }
    fn about(&self) -> &'static str {
        "Eclipse iceoryx2 zero-copy publish/subscribe (feature `iceoryx2`), the peer for shm"
    }
    fn note(&self) -> Option<&'static str> {
        Some("iceoryx2 vs shm: same workload, wait strategy, placement and processes; both build every message in place and check every payload byte (iceoryx2's own benchmark touches no payload).")
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec {
                key: "wait",
                default: "spin-yield",
                about:
                    "spin, spin-yield (spin 2 us, then yield) or block (sleep on an iceoryx2 event)",
                values: &["spin", "spin-yield", "block"],
                check: None,
            },
            OptionSpec {
                key: "buffer",
                default: "auto",
                about:
                    "subscriber queue depth in samples (auto: about 16 MiB of samples, 4 to 1024)",
                values: &[],
                check: Some(check_buffer),
            },
        ]
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: true,
            max_message_bytes: 8 << 20,
            cross_process: true,
            zero_copy: true,
            notices_closed_peer: true,
            ..Capabilities::default()
        }
    }

    fn setup(&self, _: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        // A private iceoryx2 domain per case (its own root directory and file prefix
        // `msgperf-PID-N-`): iceoryx2 keeps a domain's files after its last node, and a killed
        // role's until another node sweeps them; the case's end and msgperf's stale sweep
        // remove these, and nothing else of anyone's iceoryx2.
        let setup = dir_setup(self.name())?;
        let dir = dir_of(&setup.rendezvous)?;
        Ok(setup.with_guard(ShmFiles(format!("{}-", name_of(&dir)))))
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let (n, accept) = channel_of(self.name(), side)?;
        let config = domain(&dir_of(at)?)?;
        let prefix = format!("msgperf/{n}");
        if !accept {
            return Deferred::later(move |_: &Rendezvous, spec: &ChannelSpec| {
                let mut side = IoxSide::open(&config, &prefix, "c2l", "l2c", spec, false)?;
                // Hello: our process id; the accepting side answers with its own.
                side.send_raw(&std::process::id().to_le_bytes())?;
                side.peer_pid = side.recv_hello(spec.timeout)?;
                Ok(Box::new(side) as Box<dyn Endpoint>)
            });
        }
        // Made now, so that the connecting side finds the services when it finishes.
        let side = IoxSide::open(&config, &prefix, "l2c", "c2l", spec, true)?;
        Ok(Box::new(IoxAccept { side }))
    }
}

fn name_of(dir: &std::path::Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The case's iceoryx2 domain: files under its private directory and in /dev/shm named after it.
fn domain(dir: &std::path::Path) -> Result<Config, TransportError> {
    // Checked first: iceoryx2 makes a domain's files in /dev/shm before it finds its directory
    // missing.
    if !dir.is_dir() {
        return Err(TransportError::Unsupported(format!(
            "iceoryx2's domain {} is gone: its case has ended",
            dir.display()
        )));
    }
    let mut config = Config::default();
    config.global.prefix = FileName::new(format!("{}-", name_of(dir)).as_bytes())
        .map_err(|e| err("domain prefix", e))?;
    let root = Path::new(format!("{}/", dir.display()).as_bytes())
        .map_err(|e| err("domain directory (a shorter TMPDIR helps)", e))?;
    config.global.set_root_path(&root);
    Ok(config)
}

/// A publisher's backpressure handler: retry while the reader's queue is full, for `timeout`.
fn give_up_after(timeout: Duration) -> impl Fn(&BackpressureInfo) -> BackpressureAction + Send {
    move |info| {
        if info.elapsed_time < timeout {
            BackpressureAction::Retry
        } else {
            BackpressureAction::DiscardDataAndFail
        }
    }
}

/// Removes the case's iceoryx2 files in /dev/shm (those starting with this prefix) when dropped.
struct ShmFiles(String);

impl Drop for ShmFiles {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir("/dev/shm") else {
            return;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&self.0) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

fn err(what: &str, e: impl std::fmt::Debug) -> TransportError {
    TransportError::middleware("iceoryx2", what, format!("{e:?}"))
}

/// `--opt buffer`: `auto` or a number of samples.
fn check_buffer(v: &str) -> Result<(), String> {
    match v {
        "auto" => Ok(()),
        n => n
            .parse::<usize>()
            .ok()
            .filter(|&n| (1..=1 << 20).contains(&n))
            .map(|_| ())
            .ok_or_else(|| "give auto or a number of samples from 1 to 1048576, e.g. 256".into()),
    }
}

/// A channel's accepting side: its services made, waiting for the connecting side's hello.
struct IoxAccept {
    side: IoxSide,
}

impl Opening for IoxAccept {
    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let mut side = self.side;
        side.peer_pid = side.recv_hello(spec.timeout)?;
        side.send_raw(&std::process::id().to_le_bytes())?;
        Ok(Box::new(side))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Wait {
    Spin,
    SpinYield,
    Block,
}

/// One side: publishes on `tx`, subscribes to `rx`.
struct IoxSide {
    // Field order is drop order: ports before services before the node.
    publisher: Publisher<Svc, [u8], ()>,
    subscriber: Subscriber<Svc, [u8], ()>,
    notifier: Option<Notifier<Svc>>,
    listener: Option<EventListener<Svc>>,
    rx_service: PubSubFactory<Svc, [u8], ()>,
    _tx_service: PubSubFactory<Svc, [u8], ()>,
    _node: Node<Svc>,
    wait: Wait,
    timeout: Duration,
    /// Every peer is watched by msgperf (`ChannelSpec::watched`): a read waits until a message
    /// comes or the peer is gone, with no timer of its own to race the watchdog's.
    watched: bool,
    peer_pid: u32,
}

impl IoxSide {
    fn open(
        config: &Config,
        prefix: &str,
        tx: &str,
        rx: &str,
        spec: &ChannelSpec,
        create: bool,
    ) -> Result<Self, TransportError> {
        set_log_level(LogLevel::Error);
        let node = NodeBuilder::new()
            .config(config)
            .create::<Svc>()
            .map_err(|e| err("node", e))?;
        let max = spec.max_message;
        let depth = match spec.option("buffer") {
            None | Some("auto") => ((16usize << 20) / max.max(1)).clamp(4, 1024),
            Some(b) => b.parse().map_err(|_| {
                TransportError::Unsupported(format!(
                    "--opt buffer={b}: give a number of samples, e.g. 256"
                ))
            })?,
        };
        let service = |name: &str| -> Result<PubSubFactory<Svc, [u8], ()>, TransportError> {
            let n: ServiceName = format!("{prefix}/{name}")
                .as_str()
                .try_into()
                .map_err(|e| err("service name", e))?;
            let b = node.service_builder(&n).publish_subscribe::<[u8]>();
            if create {
                b.subscriber_max_buffer_size(depth)
                    .history_size(0)
                    .enable_safe_overflow(false)
                    .max_publishers(1)
                    .max_subscribers(1)
                    .create()
                    .map_err(|e| err("create service", e))
            } else {
                let deadline = Deadline::after(spec.timeout);
                loop {
                    match node.service_builder(&n).publish_subscribe::<[u8]>().open() {
                        Ok(s) => return Ok(s),
                        Err(_) if !deadline.expired() => {
                            std::thread::sleep(Duration::from_millis(2))
                        }
                        Err(e) => return Err(err("open service (is the listener there?)", e)),
                    }
                }
            }
        };
        let tx_service = service(tx)?;
        let rx_service = service(rx)?;
        let subscriber = rx_service
            .subscriber_builder()
            .buffer_size(depth)
            .create()
            .map_err(|e| err("subscriber", e))?;
        let publisher = tx_service
            .publisher_builder()
            .initial_max_slice_len(max.max(64))
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            // A reader that stops reading (stopped, hung) would hold the writer in send without
            // bound: it gives up after the case's timeout, keeping its counts.
            .set_backpressure_handler(give_up_after(spec.timeout))
            .create()
            .map_err(|e| err("publisher", e))?;
        let wait = match spec.option("wait") {
            Some("spin") => Wait::Spin,
            Some("block") => Wait::Block,
            _ => Wait::SpinYield,
        };
        let (notifier, listener) = if wait == Wait::Block {
            let ev = |name: &str| -> Result<_, TransportError> {
                let n: ServiceName = format!("{prefix}/{name}-event")
                    .as_str()
                    .try_into()
                    .map_err(|e| err("service name", e))?;
                node.service_builder(&n)
                    .event()
                    .open_or_create()
                    .map_err(|e| err("event service", e))
            };
            let (txe, rxe) = (ev(tx)?, ev(rx)?);
            (
                Some(
                    txe.notifier_builder()
                        .create()
                        .map_err(|e| err("notifier", e))?,
                ),
                Some(
                    rxe.listener_builder()
                        .create()
                        .map_err(|e| err("listener", e))?,
                ),
            )
        } else {
            (None, None)
        };
        Ok(IoxSide {
            publisher,
            subscriber,
            notifier,
            listener,
            rx_service,
            _tx_service: tx_service,
            _node: node,
            wait,
            timeout: spec.timeout,
            watched: spec.watched,
            peer_pid: 0,
        })
    }

    fn send_raw(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        self.send_with(msg.len(), &mut |b| b.copy_from_slice(msg))
    }

    fn recv_hello(&mut self, timeout: Duration) -> Result<u32, TransportError> {
        let deadline = Deadline::after(timeout);
        loop {
            if let Some(s) = self.subscriber.receive().map_err(|e| err("receive", e))? {
                let p = s.payload();
                if p.len() == 4 {
                    return Ok(u32::from_le_bytes([p[0], p[1], p[2], p[3]]));
                }
            }
            if deadline.expired() {
                return Err(TransportError::Timeout(timeout));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// A send's outcome: one the backpressure handler gave up on waited out the timeout.
    fn sent(&self, r: Result<usize, SendError>) -> Result<(), TransportError> {
        match r {
            Ok(_) => Ok(()),
            Err(SendError::UnableToDeliver) if self.peer_gone() => Err(TransportError::PeerClosed),
            Err(SendError::UnableToDeliver) => Err(TransportError::Timeout(self.timeout)),
            Err(e) => Err(err("send", e)),
        }
    }

    fn peer_gone(&self) -> bool {
        self.rx_service.dynamic_config().number_of_publishers() == 0
            || (self.peer_pid != 0 && !crate::sys::process_alive(self.peer_pid))
    }

    /// Waits for a sample with the configured strategy, within the timeout.
    fn next(&mut self) -> Result<::iceoryx2::sample::Sample<Svc, [u8], ()>, TransportError> {
        let start = Instant::now();
        let mut next_check = Duration::from_millis(5);
        let mut spins = 0u32;
        loop {
            if let Some(s) = self.subscriber.receive().map_err(|e| err("receive", e))? {
                return Ok(s);
            }
            spins = spins.wrapping_add(1);
            match self.wait {
                Wait::Spin => std::hint::spin_loop(),
                Wait::SpinYield if spins < 64 || start.elapsed() < Duration::from_micros(2) => {
                    std::hint::spin_loop()
                }
                Wait::SpinYield => std::thread::yield_now(),
                Wait::Block => {
                    if let Some(l) = &self.listener {
                        let _ = l.timed_wait(|_| {}, Duration::from_millis(5));
                    }
                }
            }
            if self.wait == Wait::Block || spins.is_multiple_of(1024) {
                let waited = start.elapsed();
                if waited >= next_check {
                    next_check = waited + Duration::from_millis(5);
                    if self.peer_gone() {
                        return Err(TransportError::PeerClosed);
                    }
                    // A subscriber whose publisher another, stopped subscriber holds back
                    // would otherwise time out as the watchdog ends that one.
                    if waited >= self.timeout && !self.watched {
                        return Err(TransportError::Timeout(self.timeout));
                    }
                }
            }
        }
    }
}

impl Endpoint for IoxSide {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let sample = self
            .publisher
            .loan_slice_uninit(msg.len())
            .map_err(|e| err("loan", e))?;
        let sent = sample.write_from_slice(msg).send();
        self.sent(sent)?;
        if let Some(n) = &self.notifier {
            n.notify().map_err(|e| err("notify", e))?;
        }
        Ok(())
    }

    fn send_with(
        &mut self,
        len: usize,
        build: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        let mut sample = self
            .publisher
            .loan_slice_uninit(len)
            .map_err(|e| err("loan", e))?;
        let payload = sample.payload_mut();
        // SAFETY: the loaned memory is `len` bytes the publisher owns until send; the builder
        // writes all of them before anything reads them (see the module comment).
        build(unsafe { std::slice::from_raw_parts_mut(payload.as_mut_ptr().cast::<u8>(), len) });
        let sample = unsafe { sample.assume_init() };
        self.sent(sample.send())?;
        if let Some(n) = &self.notifier {
            n.notify().map_err(|e| err("notify", e))?;
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        copy_out(self.next()?.payload(), buf)
    }

    fn recv_with(&mut self, read: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        let s = self.next()?;
        read(s.payload());
        Ok(s.payload().len())
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        match self.subscriber.receive().map_err(|e| err("receive", e))? {
            Some(s) => copy_out(s.payload(), buf).map(Some),
            // Only the cheap check here: polling loops call this millions of times.
            None if self.rx_service.dynamic_config().number_of_publishers() == 0 => {
                Err(TransportError::PeerClosed)
            }
            None => Ok(None),
        }
    }
}
