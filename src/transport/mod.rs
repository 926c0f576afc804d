//! Room `transport`: how bytes get from one role to another. Imports nothing of `measure`,
//! `result`, `report` or `workload`; the measurement loop lives elsewhere and only speaks to
//! [`Endpoint`].
//!
//! # The contract every transport keeps (checked by `tests/conformance.rs`)
//! - Messages are self-delimiting: bytes 0..4 of every message hold its whole length as a
//!   little-endian `u32`. Byte-stream transports split the stream with it; datagram and channel
//!   transports deliver whole messages and ignore it.
//! - [`Transport::setup`] makes, once per case, what the case's channels meet on (a directory,
//!   segments, a key) and returns a [`Setup`]: a [`Rendezvous`] that is plain data (it travels
//!   to role processes and hosts) and a guard that removes everything made when dropped.
//! - Each role opens its ends by [`Side`] in two steps. [`Transport::open`] never waits for a
//!   peer: it binds what others meet on and may report an address the kernel chose (a TCP
//!   port), which the runner forwards to the other sides. [`Opening::finish`] then meets the
//!   peer within the spec's timeout. Roles finish their ends in increasing channel order, so
//!   two roles never wait on each other's later channel.
//! - [`Endpoint::recv`] returns one whole message or an error within the spec's timeout (or,
//!   when the spec is `watched`, when msgperf ends a peer that stopped); it never returns
//!   part of a message. A peer that closed or died is [`TransportError::PeerClosed`].
//! - [`Endpoint::try_recv`] never blocks for want of a message (in `--poll` mode endpoints are
//!   opened non-blocking).
//! - A message longer than the receiver's buffer is [`TransportError::TooLarge`], never a silent
//!   truncation.

#[cfg(feature = "_broker")]
mod broker;
mod fanout;
mod floor;
mod framing;
mod none;
#[cfg(feature = "_runtime")]
mod runtime;

pub use fanout::CopyFanOut;
pub use floor::{
    memcpy_bandwidth, spin_pingpong, Floor, FloorEnds, FloorFigure, FloorLoop, FloorRoles, FloorRun,
};

use crate::delivery::{Delivery, History, Reliability, Setting};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Declares the transports' modules and lists their transports in [`REGISTRY`] and
/// [`MODULES`].
macro_rules! registry {
    ($($(#[$cfg:meta])* $module:ident: $($transport:ident)+;)*) => {
        $($(#[$cfg])* mod $module;)*

        /// Every transport with the module that holds it (`src/transport/MODULE.rs` or
        /// `src/transport/MODULE/`), in the order help and tables list them.
        pub static MODULES: std::sync::LazyLock<Vec<(&'static str, &'static dyn Transport)>> =
            std::sync::LazyLock::new(|| {
                let mut all: Vec<(&'static str, &'static dyn Transport)> = Vec::new();
                $($(#[$cfg])* all.extend([$((stringify!($module), &$module::$transport as &'static dyn Transport)),+]);)*
                all
            });
    };
}

/// The transports msgperf knows, in the order help and tables list them.
pub static REGISTRY: std::sync::LazyLock<Vec<&'static dyn Transport>> =
    std::sync::LazyLock::new(|| MODULES.iter().map(|(_, t)| *t).collect());

// Adding a transport is its folder and one line here.
registry! {
    inproc: CROSSBEAM STD_MPSC FLUME TOKIO_MPSC;
    pipe: Pipe;
    uds: Uds;
    uds_dgram: UdsDgram;
    uds_seqpacket: UdsSeqpacket;
    tcp: Tcp;
    udp: Udp;
    shm: Shm;
    #[cfg(feature = "iceoryx2")] iceoryx2: Iceoryx2;
    #[cfg(feature = "zmq")] zmq: Zmq;
    #[cfg(feature = "dds")] dds: Dds;
    #[cfg(feature = "zenoh")] zenoh: Zenoh;
    #[cfg(feature = "aeron")] aeron: Aeron;
    #[cfg(feature = "quic")] quic: Quic;
    #[cfg(feature = "grpc")] grpc: Grpc;
    #[cfg(feature = "nats")] nats: Nats;
    #[cfg(feature = "redis")] redis: Redis;
    #[cfg(feature = "mqtt")] mqtt: Mqtt;
    #[cfg(feature = "amqp")] amqp: Amqp;
    #[cfg(feature = "kafka")] kafka: Kafka;
}

/// What a workload that moves no message runs over (`spawn`, `timers`); not a transport a
/// user picks, so not in the registry.
pub static NO_CHANNEL: &dyn Transport = &none::NoChannel;

/// Finds a transport by its CLI name.
pub fn find(name: &str) -> Result<&'static dyn Transport, UnknownName> {
    if name == NO_CHANNEL.name() {
        return Ok(NO_CHANNEL);
    }
    REGISTRY
        .iter()
        .copied()
        .find(|t| t.name() == name)
        .ok_or_else(|| UnknownName {
            kind: "transport",
            name: name.to_string(),
            known: REGISTRY.iter().map(|t| t.name()).collect(),
        })
}

/// A name msgperf does not know (a transport, a workload), with those it knows.
#[derive(Debug, thiserror::Error)]
#[error("unknown {kind} `{name}`: use one of {} (see `msgperf transports`)", .known.join(", "))]
pub struct UnknownName {
    pub kind: &'static str,
    pub name: String,
    pub known: Vec<&'static str>,
}

/// `--opt` values by key.
pub type Options = BTreeMap<String, String>;

/// What opening one end of a channel gives: an end still to finish.
pub type OpenResult = Result<Box<dyn Opening>, TransportError>;
/// What finishing, accepting or connecting an end gives.
pub type EndpointResult = Result<Box<dyn Endpoint>, TransportError>;

/// A transport: a unit struct listed in [`REGISTRY`].
pub trait Transport: Sync {
    /// The CLI name, e.g. `uds-dgram`.
    fn name(&self) -> &'static str;
    /// One line for help and `msgperf transports`.
    fn about(&self) -> &'static str;
    /// A sentence the table's notes print when a run has this transport (what to keep in mind
    /// when reading its rows).
    fn note(&self) -> Option<&'static str> {
        None
    }
    /// The `--opt key=value` keys this transport accepts.
    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }
    /// What it can do with these `--opt` values (some options change it).
    fn capabilities(&self, options: &Options) -> Capabilities;
    /// Maps msgperf's delivery vocabulary onto this transport's settings, or names what it
    /// lacks. By default a transport is taken as it is: it never drops on its own if it is
    /// reliable, keeps every message in order, and is volatile.
    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        as_it_is(self.name(), &self.capabilities(options), d)
    }
    /// Makes, once per case, what its channels and topics meet on.
    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError>;
    /// Starts opening one end: binds what peers meet on, never waits for one.
    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult;
    /// Listens on this machine for many connections, with `backlog` (the `connect` workload
    /// measures their set-up); only transports with [`Capabilities::connections`] can.
    fn listen(
        &self,
        _backlog: u32,
        _spec: &ChannelSpec,
    ) -> Result<Box<dyn Listener>, TransportError> {
        Err(TransportError::Unsupported(format!(
            "`{}` has no connections to set up",
            self.name()
        )))
    }
    /// The plainest loop of this transport, which every ratio divides by.
    fn floor(&self) -> Option<&'static dyn Floor> {
        None
    }
    /// What this machine must have besides msgperf to run it (a broker), each saying whether
    /// it is here and how to get it: `msgperf transports --needs` lists what is missing, and
    /// `.ci/run` installs that.
    fn needs(&self) -> Vec<Need> {
        Vec::new()
    }
    /// Runs a process of this transport's own in this process (a media driver that its
    /// set-up starts as `msgperf service NAME ARGS...`), until it is told to stop.
    fn service_main(&self, _args: &[String]) -> Result<(), TransportError> {
        Err(TransportError::Unsupported(format!(
            "transport `{}` runs no process of its own",
            self.name()
        )))
    }
    /// Removes `path`, a file named `msgperf-NAME` with no process id in its name, if this
    /// transport made it and its maker is gone (one killed hard cannot clean up); leaves
    /// anything else alone.
    fn remove_if_stale(&self, _path: &std::path::Path) {}
}

/// Something a transport needs on the machine (a broker's program, its files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// What it is: a program as msgperf looks for it, or files.
    pub what: String,
    /// Whether this machine has it now.
    pub present: bool,
    /// A run needs it (false: only getting something else does, as Maven fetches Kafka's
    /// jars): a run is refused without it.
    pub to_run: bool,
    pub get: Get,
}

/// How to get what a transport needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Get {
    /// A Debian package: `apt-get install NAME`.
    Debian(&'static str),
    /// A script in the transport's folder, run from the repository's top: it fetches what no
    /// package has (Kafka's jars from Maven Central), using what the packages brought.
    Script(&'static str),
}

impl Get {
    /// The command a user types.
    pub fn command(self) -> String {
        match self {
            Get::Debian(p) => format!("apt-get install {p}"),
            Get::Script(s) => s.to_string(),
        }
    }
}

/// Which end of which channel a role opens.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// The end of two-way channel `n` that waits for its peer.
    Accept(u32),
    /// The end of two-way channel `n` that reaches its peer.
    Connect(u32),
    /// The one writer of topic `topic`, which `readers` readers read (a native fan-out).
    Publish { topic: u32, readers: u32 },
    /// Reader `reader` of topic `topic`.
    Subscribe { topic: u32, reader: u32 },
}

impl Side {
    /// What both ends meet at: `channel N` or `topic N`, the key of an address its binding end
    /// reported.
    pub fn meeting(self) -> String {
        match self {
            Side::Accept(n) | Side::Connect(n) => format!("channel {n}"),
            Side::Publish { topic: n, .. } | Side::Subscribe { topic: n, .. } => {
                format!("topic {n}")
            }
        }
    }

    /// The order in which a role finishes its ends: channels, then topics, by number.
    pub fn order(self) -> (u32, u32) {
        match self {
            Side::Accept(n) | Side::Connect(n) => (0, n),
            Side::Publish { topic: n, .. } | Side::Subscribe { topic: n, .. } => (1, n),
        }
    }
}

/// What a case's set-up makes: `channels` two-way channels, and one topic per entry of
/// `topics` with that many readers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SetupPlan {
    pub channels: u32,
    pub topics: Vec<u32>,
    /// Network transports: the address the accepting ends bind (default 127.0.0.1).
    pub host: Option<String>,
    /// Where a process that set-up starts (a broker) runs: the non-driving roles' CPU.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// The host such a process runs on when not here on loopback (`--place broker=HOST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_at: Option<ServiceHost>,
}

/// Where a case's broker runs when not here on loopback: a command prefix that enters its
/// host (`ip netns exec NS`) and the address it listens on there.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServiceHost {
    pub prefix: Vec<String>,
    pub address: String,
}

/// Where a case's ends meet: plain data that travels to role processes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rendezvous {
    pub transport: String,
    pub place: Place,
    /// Addresses that binding ends (a channel's accepting end, a topic's writer) reported when
    /// they bound (a port the kernel chose), by meeting point ([`Side::meeting`]).
    pub bound: BTreeMap<String, String>,
    /// Across hosts, the addresses of this role's host and of every host of the case: what a
    /// transport that finds its peers itself (DDS's discovery) binds to and asks. None on one
    /// host.
    #[serde(default)]
    pub hosts: Option<HostAddresses>,
}

/// See [`Rendezvous::hosts`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostAddresses {
    /// This role's host's address.
    pub own: String,
    /// Every host's address in the case, this one's among them, each once.
    pub all: Vec<String>,
}

impl Rendezvous {
    pub fn new(transport: &str, place: Place) -> Self {
        Rendezvous {
            transport: transport.into(),
            place,
            bound: BTreeMap::new(),
            hosts: None,
        }
    }

    /// The address that the binding end of `side`'s channel or topic reported.
    pub fn bound_at(&self, side: Side) -> Result<&str, TransportError> {
        let at = side.meeting();
        self.bound.get(&at).map(String::as_str).ok_or_else(|| {
            TransportError::Refused(format!("{at}: its binding end reported no address"))
        })
    }
}

/// What a transport's set-up made, as the transport reads it back.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Place {
    /// An address to bind on (network transports).
    Host(String),
    /// A private directory for socket paths and FIFOs.
    Dir(String),
    /// A case's shared-memory segments, one a channel and one a topic: paths that open them
    /// (`/proc/PID/fd/N` of the process that made them, whose names are gone once made).
    Segments {
        channels: Vec<String>,
        topics: Vec<String>,
    },
    /// A name known to the transport's own registry (in-process channels, iceoryx2 services).
    Key(String),
    /// A broker's URL, and the case's own name there (the prefix of its subjects, keys,
    /// queues or topics).
    Broker { url: String, name: String },
}

/// A case's set-up: where its ends meet, what it started, and what to remove afterwards.
pub struct Setup {
    pub rendezvous: Rendezvous,
    /// Processes set-up started for the case (a broker): the runner watches them and measures
    /// their CPU like a role's.
    pub services: Vec<Service>,
    /// Removes what set-up made when dropped (files, segments, registrations, a broker).
    _guard: Box<dyn Send>,
}

impl Setup {
    pub fn new(rendezvous: Rendezvous, guard: impl Send + 'static) -> Self {
        Setup {
            rendezvous,
            services: Vec::new(),
            _guard: Box::new(guard),
        }
    }

    /// Adds `guard`, dropped before what the set-up held (a stream before its broker).
    pub fn with_guard(mut self, guard: impl Send + 'static) -> Self {
        let before = std::mem::replace(&mut self._guard, Box::new(()));
        self._guard = Box::new((guard, before));
        self
    }

    pub fn with_service(mut self, s: Service) -> Self {
        self.services.push(s);
        self
    }
}

/// A process a case's set-up started and stops: `broker`, `nats-server`, its pid.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Service {
    pub label: String,
    pub program: String,
    pub pid: u32,
    /// Where it writes what it says, on the host it runs on: read when it dies, for the cause.
    #[serde(default)]
    pub log: Option<std::path::PathBuf>,
}

impl Service {
    /// What its log says last (a Java exception and its cause, else the last line), if it
    /// has a log that says anything.
    pub fn last_words(&self) -> Option<String> {
        let log = std::fs::read_to_string(self.log.as_ref()?).ok()?;
        (!log.trim().is_empty()).then(|| said(&log))
    }
}

/// What a program said as it failed, from its log: for a Java stack trace, the exception and
/// its last cause (a trace ends in `... 18 more`, which says nothing); else its last line.
pub fn said(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let traced = lines.iter().any(|l| l.starts_with("at "));
    let thrown = lines
        .iter()
        .find(|l| !l.starts_with("at ") && (l.contains("Exception") || l.contains("Error")))
        .filter(|_| traced);
    let cause = lines.iter().rev().find(|l| l.starts_with("Caused by:"));
    match (thrown, cause) {
        (Some(t), Some(c)) => format!("{t} ({c})"),
        (Some(t), None) => t.to_string(),
        _ => lines.last().unwrap_or(&"it said nothing").to_string(),
    }
}

/// An end being opened: bound, not yet met.
pub trait Opening: Send {
    /// Where peers reach this end, when the kernel chose it: forwarded to the other sides.
    fn address(&self) -> Option<String> {
        None
    }
    /// Meets the peer (accepts, connects, waits for the readers to join) within the timeout.
    fn finish(self: Box<Self>, at: &Rendezvous, spec: &ChannelSpec) -> EndpointResult;
}

/// A listener that takes many connections ([`Transport::listen`]). A connection's ends are
/// [`Endpoint`]s, closed when dropped. Errors are mapped by [`TransportError::from_io`]: a
/// connect that waits out its bound is `Timeout`, and a limit met (descriptors, ports, memory)
/// keeps its OS error (`Io`), so a caller can tell them apart.
pub trait Listener: Send + Sync {
    /// Accepts one connection if one comes within `wait`.
    fn accept(
        &self,
        wait: Duration,
        spec: &ChannelSpec,
    ) -> Result<Option<Box<dyn Endpoint>>, TransportError>;
    /// Connects one more peer to this listener, within `spec.timeout`.
    fn connect(&self, spec: &ChannelSpec) -> EndpointResult;
}

/// Accepts on `listener` if a connection comes within `wait` (a blocking listener: accept is
/// called only once it is readable).
pub(crate) fn accept_ready<L: std::os::fd::AsRawFd, S>(
    listener: &L,
    wait: Duration,
    accept: impl Fn(&L) -> std::io::Result<S>,
) -> Result<Option<S>, TransportError> {
    if !crate::sys::wait_readable(
        listener.as_raw_fd(),
        wait.as_millis().min(i32::MAX as u128) as i32,
    )? {
        return Ok(None);
    }
    Ok(Some(accept(listener)?))
}

/// An end that does all its work when finished (a connecting end).
pub(crate) struct Deferred<F>(pub F);

impl<F> Deferred<F>
where
    F: FnOnce(&Rendezvous, &ChannelSpec) -> EndpointResult + Send + 'static,
{
    /// An end that connects once the rendezvous holds the accepting end's address.
    pub(crate) fn later(connect: F) -> OpenResult {
        Ok(Box::new(Deferred(connect)))
    }
}

impl<F> Opening for Deferred<F>
where
    F: FnOnce(&Rendezvous, &ChannelSpec) -> EndpointResult + Send,
{
    fn finish(self: Box<Self>, at: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        (self.0)(at, spec)
    }
}

/// One end of an open channel: all the measurement loop touches.
pub trait Endpoint: Send {
    /// Sends one whole message (blocks, within the timeout, while the transport is full).
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError>;
    /// Receives one whole message into `buf`, returning its length.
    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError>;
    /// Receives one message if one is there now.
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError>;
    /// Builds a message of `len` bytes in place, in the transport's own memory, and sends it.
    /// Only transports with [`Capabilities::zero_copy`] implement it.
    fn send_with(
        &mut self,
        _len: usize,
        _build: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        Err(TransportError::Unsupported(
            "this transport has no zero-copy send".into(),
        ))
    }
    /// Writes out what the end has gathered but not yet written (a buffered writer, `--opt
    /// write-size` above the message size); the runner calls it after END.
    fn flush(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
    /// Receives one message and hands it to `read` in place; returns its length. Only
    /// transports with [`Capabilities::reads_in_place`] implement it.
    fn recv_with(&mut self, _read: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        Err(TransportError::Unsupported(
            "this transport hands a reader no buffer of its own to read in place".into(),
        ))
    }
    /// Receives the messages there now, at least one (waiting within the timeout for it),
    /// handing each to `read` in place until `read` returns false; returns how many it handed.
    /// A reader doing all its work inside `read` then pays no call a message (Aeron's poll,
    /// say). By default one message, through [`Endpoint::recv_with`].
    fn recv_each(&mut self, read: &mut dyn FnMut(&[u8]) -> bool) -> Result<usize, TransportError> {
        self.recv_with(&mut |m| {
            read(m);
        })
        .map(|_| 1)
    }
}

/// How a channel is opened: the same on every side.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChannelSpec {
    /// Every option of the transport, defaults included (see [`effective_options`]).
    pub options: Options,
    /// Bound on every blocking call: connect, accept, send and receive.
    pub timeout: Duration,
    /// Open non-blocking for `--poll` (reads spin on `try_recv`).
    pub poll: bool,
    /// The largest message either side will send or receive.
    pub max_message: usize,
    /// msgperf ends the case itself if a peer stops: every peer is a thread of this process
    /// (its end closes when it returns) or a process that msgperf started and kills if it
    /// does not run for `timeout`. A blocking wait then needs no timer of its own: pipes block
    /// plainly (else they wait in poll(2)), and stream sockets skip SO_RCVTIMEO and SO_SNDTIMEO,
    /// whose kernel timer on every wait costs about 5% of a same-CPU unix-socket round trip.
    /// Datagram sockets keep theirs: it is how a lost datagram is noticed, and a peer that dies
    /// leaves a datagram reader no end of file.
    pub watched: bool,
    /// What the workload moves on each channel: a transport whose calls differ by direction
    /// (gRPC) picks the call that fits.
    #[serde(default)]
    pub exchange: Exchange,
}

impl ChannelSpec {
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    /// A boolean `--opt`, `true`/`false`/`1`/`0`/`on`/`off`.
    pub fn flag(&self, key: &str, default: bool) -> bool {
        match self.option(key) {
            Some(v) => parse_flag(v).unwrap_or(default),
            None => default,
        }
    }
}

fn parse_flag(v: &str) -> Option<bool> {
    match v {
        "true" | "1" | "on" | "yes" => Some(true),
        "false" | "0" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// One `--opt` key a transport accepts.
pub struct OptionSpec {
    pub key: &'static str,
    pub default: &'static str,
    pub about: &'static str,
    /// The values accepted; empty means any that `check` accepts.
    pub values: &'static [&'static str],
    /// Checks a free-form value (a size, a count), naming the rule.
    pub check: Option<OptionCheck>,
}

/// Says what is wrong with an option's value, if anything.
pub type OptionCheck = fn(&str) -> Result<(), String>;

/// Checks `--opt` pairs against a transport's [`OptionSpec`]s: unknown keys and bad values are
/// refused before anything starts.
pub fn validate_options(t: &dyn Transport, opts: &Options) -> Result<(), String> {
    for (k, v) in opts {
        let Some(spec) = t.options().iter().find(|o| o.key == k) else {
            return Err(unknown_option(t, k));
        };
        if !spec.values.is_empty() && !spec.values.contains(&v.as_str()) {
            return Err(format!(
                "--opt {k}={v}: `{v}` is not accepted; use one of {}",
                spec.values.join(", ")
            ));
        }
        if let Some(check) = spec.check {
            check(v).map_err(|why| format!("--opt {k}={v}: {why}"))?;
        }
    }
    Ok(())
}

/// The `--opt` values given to a run of several transports, sorted out for each of `run`: a key
/// qualified by a transport's name (`shm.wait=block`) is that transport's alone and wins over
/// the same key unqualified; an unqualified key goes to every transport of the run that has
/// it. A key that no transport of the run takes is refused, naming the ones that take keys.
pub fn options_for_each(
    run: &[&'static dyn Transport],
    given: &Options,
) -> Result<Vec<Options>, String> {
    let mut each: Vec<Options> = vec![Options::new(); run.len()];
    let has = |t: &dyn Transport, k: &str| t.options().iter().any(|o| o.key == k);
    // Unqualified keys first, so that qualified ones override them.
    let (qualified, plain): (Vec<_>, Vec<_>) = given
        .iter()
        .partition(|(k, _)| k.split_once('.').is_some_and(|(t, _)| find(t).is_ok()));
    for (k, v) in plain {
        let mut taken = false;
        for (t, opts) in run.iter().zip(&mut each) {
            if has(*t, k) {
                opts.insert(k.clone(), v.clone());
                taken = true;
            }
        }
        if !taken {
            let named: Vec<&str> = run.iter().map(|t| t.name()).collect();
            return Err(match run {
                [t] => unknown_option(*t, k),
                _ => format!(
                    "no transport of this run ({}) has an option `{k}`: see `msgperf transports NAME` for each one's options",
                    named.join(", ")
                ),
            });
        }
    }
    for (k, v) in qualified {
        let (name, key) = k.split_once('.').expect("partitioned by its dot");
        let Some(i) = run.iter().position(|t| t.name() == name) else {
            let named: Vec<&str> = run.iter().map(|t| t.name()).collect();
            return Err(format!(
                "--opt {k}: transport `{name}` is not in this run ({}): add it with -t, or drop the option",
                named.join(", ")
            ));
        };
        if !has(run[i], key) {
            return Err(unknown_option(run[i], key));
        }
        each[i].insert(key.to_string(), v.clone());
    }
    Ok(each)
}

/// A key that transport `t` has no option for, naming those it has.
fn unknown_option(t: &dyn Transport, k: &str) -> String {
    let keys: Vec<_> = t.options().iter().map(|o| o.key).collect();
    if keys.is_empty() {
        format!("transport `{}` takes no --opt, but got `{k}`", t.name())
    } else {
        format!(
            "transport `{}` has no option `{k}`: its options are {}",
            t.name(),
            keys.join(", ")
        )
    }
}

/// Every option of `t` as a case runs it: the given values over the defaults.
pub fn effective_options(t: &dyn Transport, given: &Options) -> Options {
    let mut out: Options = t
        .options()
        .iter()
        .map(|o| (o.key.to_string(), o.default.to_string()))
        .collect();
    out.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// What a transport can do; workloads check their needs against it before anything starts.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Capabilities {
    /// Nothing is lost, duplicated or reordered while both peers live.
    pub reliable: bool,
    /// Largest message it carries.
    pub max_message_bytes: usize,
    /// Peers may be separate processes (false: threads of one process only).
    pub cross_process: bool,
    /// Peers may be on separate hosts.
    pub cross_host: bool,
    /// A reader gets the newest message; older unread ones are overwritten (counted, not lost).
    pub latest_value: bool,
    /// Messages are built and read in the transport's own memory ([`Endpoint::send_with`]).
    pub zero_copy: bool,
    /// A reader is handed each message where the client library keeps it
    /// ([`Endpoint::recv_with`]) and checks it there, as a program using the library reads
    /// it, instead of copying it into msgperf's buffer first (a copy the library never asked
    /// for). Blocking reads only: a polling reader copies (`try_recv`).
    #[serde(default)]
    pub reads_in_place: bool,
    /// Readers one write can reach ([`Side::Publish`]); 0: none, a copy per reader.
    pub native_fan_out: usize,
    /// A server process (a broker) must run for its ends to meet.
    pub needs_server: bool,
    /// Its set-up holds a descriptor in the runner for each channel and topic (shm's
    /// segments), which the runner's descriptor limit must allow for.
    pub set_up_holds_descriptors: bool,
    /// Its ends meet by connecting to a listener that takes many ([`Transport::listen`]).
    #[serde(default)]
    pub connections: bool,
    /// A reader learns that its peer closed or died ([`TransportError::PeerClosed`]) instead of
    /// waiting out its timeout.
    pub notices_closed_peer: bool,
    /// The transport allocates memory for every message (a copy the measurement pays for).
    pub allocates_per_message: bool,
    /// Which way messages may go on a two-way channel.
    pub exchange: Exchange,
    /// The warm-up a case (and its floor) gets when `--warmup` is not given, where msgperf's
    /// 200 ms is too short for the figures to settle: a JVM broker compiles its hot paths as it
    /// runs.
    #[serde(rename = "warmup_ns", with = "crate::units::nanos")]
    pub warmup: Duration,
    /// How long its set-up may take beyond `--timeout` (a broker that boots in seconds): the
    /// bounds on a case and its floor allow for it.
    #[serde(rename = "startup_ns", default, with = "crate::units::nanos")]
    pub startup: Duration,
}

/// Which way messages may go on a two-way channel: workloads refuse what they cannot run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exchange {
    /// Either end sends whenever it likes.
    #[default]
    Both,
    /// Only the connecting end sends (ZeroMQ's PUSH to PULL).
    OneWay,
    /// A request, then its reply, strictly in turn (ZeroMQ's REQ and REP).
    Alternate,
}

impl Exchange {
    pub fn label(self) -> &'static str {
        match self {
            Exchange::Both => "either way at any time",
            Exchange::OneWay => "one way only, from the connecting end",
            Exchange::Alternate => "a request and its reply, strictly in turn",
        }
    }
}

/// How a transport carries out a case's [`Delivery`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryMap {
    /// `--opt` values the delivery sets (a conflicting given value is refused by the plan).
    pub options: Options,
    /// What each setting is and why, recorded in the result.
    pub settings: Vec<Setting>,
    /// A loss, duplicate or reordering fails the case.
    pub strict: bool,
    /// Readers get only the newest message; gaps are overwrites.
    pub latest: bool,
}

/// The mapping of a transport that has no delivery settings: it is what it is.
pub fn as_it_is(name: &str, caps: &Capabilities, d: &Delivery) -> Result<DeliveryMap, String> {
    if let History::KeepLast(n) = d.history {
        return Err(format!(
            "transport `{name}` keeps every message in order (fifo only), not the last {n}: use --history fifo, or a transport with a latest-value buffer (shm)"
        ));
    }
    let mut settings = Vec::new();
    let strict = match d.reliability {
        None if caps.reliable => {
            settings.push(Setting::new("reliability", "reliable", "as the transport is: nothing is lost while both peers live (a full buffer makes the writer wait); a loss fails the case"));
            true
        }
        None => {
            settings.push(Setting::new(
                "reliability",
                "best-effort",
                "as the transport is: it may drop (a full socket buffer); losses are counted",
            ));
            false
        }
        Some(Reliability::Reliable) if caps.reliable => {
            settings.push(Setting::new(
                "reliability",
                "reliable",
                "--delivery reliable: nothing is lost while both peers live; a loss fails the case",
            ));
            true
        }
        Some(Reliability::Reliable) => {
            settings.push(Setting::new("reliability", "checked", &format!("--delivery reliable: `{name}` has no retransmission, so a loss is not prevented but fails the case")));
            true
        }
        Some(Reliability::BestEffort) if caps.reliable => {
            settings.push(Setting::new("reliability", "never drops", &format!("--delivery best-effort: `{name}` never drops, so a slow reader still pushes back; a loss is only no longer an error")));
            false
        }
        Some(Reliability::BestEffort) => {
            settings.push(Setting::new(
                "reliability",
                "best-effort",
                "--delivery best-effort: a full buffer drops; losses are counted",
            ));
            false
        }
    };
    settings.push(Setting::new(
        "history",
        "keep-all",
        "every message in order",
    ));
    settings.push(Setting::new(
        "durability",
        "volatile",
        "a reader gets what is sent after it joined",
    ));
    Ok(DeliveryMap {
        options: Options::new(),
        settings,
        strict,
        latest: false,
    })
}

/// Errors a transport reports, each one the caller can act on.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the peer closed the channel or died")]
    PeerClosed,
    #[error("message of {len} B is larger than the {max} B this transport or buffer takes")]
    TooLarge { len: usize, max: usize },
    #[error("address {0} is in use: pick another, or stop what holds it")]
    AddressInUse(String),
    #[error("connection refused at {0}: is the peer running there?")]
    Refused(String),
    /// A broker that does not answer at its URL: the whole sentence, naming it.
    #[error("{0}")]
    NoBroker(String),
    #[error("corrupt stream: {0}")]
    Corrupt(String),
    /// An option value the transport cannot use (normally refused by the plan first).
    #[error("--opt {key}={value}: {why}")]
    BadOption {
        key: String,
        value: String,
        why: String,
    },
    /// A file or segment that msgperf did not make, or made by an incompatible version.
    #[error("{0}")]
    Foreign(String),
    /// The transport cannot do what was asked.
    #[error("{0}")]
    Unsupported(String),
    /// A middleware's client library failed at `what`: its own error kept as the cause, so the
    /// line a user reads names it.
    #[error("{client}: {what}: {cause}")]
    Middleware {
        client: &'static str,
        what: String,
        #[source]
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A broker msgperf starts that is missing, would not start or exited at start: the
    /// sentence names the program and the fix.
    #[error("{what}")]
    Broker { program: &'static str, what: String },
    /// A blocking call interrupted by the runner's stop (a role process's SIGUSR1): the case
    /// is ending, so the wait for the peer ends too.
    #[error("stopped while waiting for the peer: the case was ending")]
    Stopped,
    /// The queue is full and the transport was told not to wait (`--opt full=fail`).
    #[error("the queue is full")]
    Full,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl TransportError {
    /// Maps an I/O error from a data call, given the timeout in force.
    pub fn from_io(e: std::io::Error, timeout: Duration) -> Self {
        use std::io::ErrorKind::*;
        match e.kind() {
            WouldBlock | TimedOut => TransportError::Timeout(timeout),
            BrokenPipe | ConnectionReset | ConnectionAborted | UnexpectedEof | NotConnected
            | ConnectionRefused => TransportError::PeerClosed,
            _ => TransportError::Io(e),
        }
    }
}

impl TransportError {
    pub fn broker(program: &'static str, what: impl Into<String>) -> Self {
        TransportError::Broker {
            program,
            what: what.into(),
        }
    }

    /// What `client` (a middleware's library) said when `what` failed.
    pub fn middleware(
        client: &'static str,
        what: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        TransportError::Middleware {
            client,
            what: what.into(),
            cause: cause.into(),
        }
    }
}

/// The length a message declares in its first four bytes.
#[inline(always)]
pub fn declared_len(msg: &[u8]) -> usize {
    u32::from_le_bytes([msg[0], msg[1], msg[2], msg[3]]) as usize
}

/// Removes what msgperf processes that no longer exist left behind (one killed hard cannot
/// clean up after itself): private directories in the temp dir and shm segments, both named
/// `msgperf-PID-...`, and named servers' control sockets whose server is gone.
pub fn remove_stale_dirs() {
    for dir in [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(rest) = name.strip_prefix("msgperf-") else {
                continue;
            };
            let pid = rest
                .split_once('-')
                .and_then(|(p, _)| p.parse::<u32>().ok());
            let p = e.path();
            match pid {
                Some(pid) if !std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                    let _ = if p.is_dir() {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                }
                Some(_) => {}
                // A name: a named server's control socket, or an old named segment.
                None => remove_if_dead_socket(&p),
            }
        }
    }
}

/// Removes a unix socket file that nothing listens on any more.
fn remove_if_dead_socket(p: &std::path::Path) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return;
    };
    if meta.file_type().is_socket() {
        if let Err(e) = std::os::unix::net::UnixStream::connect(p) {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                let _ = std::fs::remove_file(p);
            }
        }
    } else if meta.file_type().is_file() {
        for t in REGISTRY.iter() {
            t.remove_if_stale(p);
        }
    }
}

/// What a transport that reads in place does with a message in its library's buffer: copies
/// it into msgperf's buffer (`recv`, [`into_buffer`]) or hands it over where it lies
/// (`recv_with`, [`in_place`]); returns its length.
#[allow(dead_code)] // Only the middleware adapters use it.
pub(crate) type Take<'a> = dyn FnMut(&[u8]) -> Result<usize, TransportError> + 'a;

/// `recv`'s [`Take`]: the message copied into `buf` ([`copy_out`]).
#[allow(dead_code)]
pub(crate) fn into_buffer(
    buf: &mut [u8],
) -> impl FnMut(&[u8]) -> Result<usize, TransportError> + '_ {
    move |m| copy_out(m, buf)
}

/// `recv_with`'s [`Take`]: the message handed to `read` where it lies.
#[allow(dead_code)]
pub(crate) fn in_place<'a>(
    read: &'a mut dyn FnMut(&[u8]),
) -> impl FnMut(&[u8]) -> Result<usize, TransportError> + 'a {
    move |m| {
        read(m);
        Ok(m.len())
    }
}

/// Waits at most `timeout` for what `next` gives (it waits at most the slice it is handed), in
/// slices of 100 ms: a role its runner told to stop gives up at once (`Stopped`) instead of
/// waiting out its timeout, however long its library would block. The deadline starts once a
/// slice passed empty, so a message that is there already (a stream's reader nearly always
/// finds one) costs no clock read; a wait may so run one slice past `timeout`.
#[allow(dead_code)]
#[inline(always)]
pub(crate) fn next_within<T>(
    timeout: Duration,
    mut next: impl FnMut(Duration) -> Result<Option<T>, TransportError>,
) -> Result<T, TransportError> {
    let slice = Duration::from_millis(100);
    let mut deadline: Option<crate::deadline::Deadline> = None;
    loop {
        let left = deadline.map_or(timeout, |d| d.remaining());
        // A slice that passes empty is no timeout of the read's, however `next` says it.
        match next(left.min(slice)) {
            Ok(Some(got)) => return Ok(got),
            Ok(None) | Err(TransportError::Timeout(_)) => {}
            Err(e) => return Err(e),
        }
        if deadline
            .get_or_insert_with(|| crate::deadline::Deadline::after(timeout))
            .expired()
        {
            return Err(TransportError::Timeout(timeout));
        }
        if crate::deadline::role_told_to_stop() {
            return Err(TransportError::Stopped);
        }
    }
}

/// As [`next_within`], handing `next` the whole timeout at once.
#[allow(dead_code)]
pub(crate) fn next_whole<T>(
    timeout: Duration,
    mut next: impl FnMut(Duration) -> Result<Option<T>, TransportError>,
) -> Result<T, TransportError> {
    next(timeout)?.ok_or(TransportError::Timeout(timeout))
}

/// `recv`, `try_recv` and `recv_with` of an end that reads in place
/// ([`Capabilities::reads_in_place`]), written once: its own
/// `next(&mut self, take: &mut Take, timeout: Duration) -> Result<Option<usize>, TransportError>`
/// hands the next message to `take` where its library keeps it, waiting at most `timeout` (zero:
/// only what is there now), and its field `timeout` bounds a blocking read.
#[allow(unused_macros)]
macro_rules! reads_in_place {
    () => {
        $crate::transport::reads_in_place!(@waiting $crate::transport::next_within);
    };
    // A `next` that watches the role's stop flag itself, and tells a wait it gave up on from
    // one it finished: handed the whole timeout.
    (unsliced) => {
        $crate::transport::reads_in_place!(@waiting $crate::transport::next_whole);
    };
    (@waiting $wait:path) => {
        fn recv(&mut self, buf: &mut [u8]) -> Result<usize, $crate::transport::TransportError> {
            $wait(self.timeout, |t| {
                self.next(&mut $crate::transport::into_buffer(&mut *buf), t)
            })
        }

        fn try_recv(
            &mut self,
            buf: &mut [u8],
        ) -> Result<Option<usize>, $crate::transport::TransportError> {
            self.next(
                &mut $crate::transport::into_buffer(buf),
                std::time::Duration::ZERO,
            )
        }

        fn recv_with(
            &mut self,
            read: &mut dyn FnMut(&[u8]),
        ) -> Result<usize, $crate::transport::TransportError> {
            $wait(self.timeout, |t| {
                self.next(&mut $crate::transport::in_place(&mut *read), t)
            })
        }
    };
}
#[allow(unused_imports)]
pub(crate) use reads_in_place;

/// Checks that the temp dir (TMPDIR, else /tmp), where ends meet and brokers keep their files,
/// takes a directory of msgperf's: the error names it and the fix.
pub fn check_temp_dir() -> Result<(), String> {
    let dir = std::env::temp_dir();
    let why = match std::fs::metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such directory".to_string(),
        Err(e) => e.to_string(),
        Ok(m) if !m.is_dir() => "not a directory".into(),
        Ok(_) => match private_dir() {
            Ok(made) => return std::fs::remove_dir(made).or(Ok(())),
            Err(e) => format!("cannot make a directory in it ({e})"),
        },
    };
    let named = if std::env::var_os("TMPDIR").is_some() {
        "TMPDIR="
    } else {
        "the temp dir "
    };
    Err(format!(
        "{named}{}: {why}: msgperf makes its sockets and brokers' files there; set TMPDIR to a writable directory",
        dir.display()
    ))
}

/// A fresh private directory for socket paths and FIFOs, `msgperf-PID-N` in the temp dir.
pub(crate) fn private_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(fresh_name());
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// Copies a received message into the caller's buffer, refusing one that does not fit (never
/// a silent truncation): for transports whose library hands over its own buffer.
#[allow(dead_code)] // Only the middleware adapters call it.
pub(crate) fn copy_out(data: &[u8], buf: &mut [u8]) -> Result<usize, TransportError> {
    if data.len() > buf.len() {
        return Err(TransportError::TooLarge {
            len: data.len(),
            max: buf.len(),
        });
    }
    buf[..data.len()].copy_from_slice(data);
    Ok(data.len())
}

/// A name no other object of this process has: `msgperf-PID-N`.
pub(crate) fn fresh_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "msgperf-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes a directory and what is in it when dropped.
pub(crate) struct DirGuard(pub std::path::PathBuf);

impl Drop for DirGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The directory a path transport's set-up made.
pub(crate) fn dir_of(at: &Rendezvous) -> Result<std::path::PathBuf, TransportError> {
    match &at.place {
        Place::Dir(d) => Ok(std::path::PathBuf::from(d)),
        other => Err(TransportError::Unsupported(format!(
            "transport `{}` meets in a directory, not {other:?}",
            at.transport
        ))),
    }
}

/// A channel's socket in the set-up's directory, and whether this side accepts on it.
pub(crate) fn socket_path(
    name: &str,
    at: &Rendezvous,
    side: Side,
) -> Result<(std::path::PathBuf, bool), TransportError> {
    let (n, accept) = channel_of(name, side)?;
    Ok((dir_of(at)?.join(format!("{n}.sock")), accept))
}

/// Set-up of a transport whose ends meet at paths in one private directory.
pub(crate) fn dir_setup(name: &str) -> Result<Setup, TransportError> {
    let dir = private_dir()?;
    Ok(Setup::new(
        Rendezvous::new(name, Place::Dir(dir.display().to_string())),
        DirGuard(dir),
    ))
}

/// Set-up of a network transport: its accepting ends bind on `plan.host`.
pub(crate) fn host_setup(name: &str, plan: &SetupPlan) -> Setup {
    let host = plan.host.clone().unwrap_or_else(|| "127.0.0.1".into());
    Setup::new(Rendezvous::new(name, Place::Host(host)), ())
}

/// The host a network transport's set-up named.
pub(crate) fn host_of(at: &Rendezvous) -> Result<&str, TransportError> {
    match &at.place {
        Place::Host(h) => Ok(h),
        other => Err(TransportError::Unsupported(format!(
            "transport `{}` meets at a host address, not {other:?}",
            at.transport
        ))),
    }
}

/// A connect to a unix socket's path that nothing listens on (no file, or no listener) as
/// the refusal it is, naming the path.
pub(crate) fn connect_error(e: std::io::Error, path: &std::path::Path) -> TransportError {
    match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            TransportError::Refused(path.display().to_string())
        }
        _ => e.into(),
    }
}

/// Binds a socket on a port the kernel picks at `host` (the runner tells the connecting side).
pub(crate) fn bind_on_host<'a, S>(
    host: &'a str,
    bind: impl FnOnce((&'a str, u16)) -> std::io::Result<S>,
) -> Result<S, TransportError> {
    bind((host, 0)).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => TransportError::AddressInUse(format!("{host}:0")),
        _ => e.into(),
    })
}

pub(crate) fn bind_error(e: std::io::Error, path: &std::path::Path) -> TransportError {
    if e.kind() == std::io::ErrorKind::AddrInUse {
        TransportError::AddressInUse(path.display().to_string())
    } else {
        e.into()
    }
}

pub(crate) fn resolve(address: &str) -> Result<std::net::SocketAddr, TransportError> {
    std::net::ToSocketAddrs::to_socket_addrs(address)
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            TransportError::Unsupported(format!(
                "`{address}` is not a socket address: write e.g. 127.0.0.1:7000"
            ))
        })
}

/// Where a connecting datagram end binds to reach `server`: this role's host address `host`
/// (a port the kernel picks), else loopback of the server's family.
pub(crate) fn local_towards(host: &str, server: std::net::SocketAddr) -> std::net::SocketAddr {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_ipv4() == server.is_ipv4() => std::net::SocketAddr::new(ip, 0),
        _ if server.is_ipv4() => "127.0.0.1:0".parse().expect("an address"),
        _ => "[::1]:0".parse().expect("an address"),
    }
}

/// Refuses sides a transport without topics cannot open.
pub(crate) fn channel_of(name: &str, side: Side) -> Result<(u32, bool), TransportError> {
    match side {
        Side::Accept(n) => Ok((n, true)),
        Side::Connect(n) => Ok((n, false)),
        _ => Err(TransportError::Unsupported(format!(
            "transport `{name}` has no native fan-out: a publisher writes a copy to each subscriber's channel"
        ))),
    }
}

/// Accepts on a non-blocking listener, waiting at most the spec's timeout.
pub(crate) fn accept_within<L: std::os::fd::AsRawFd, S>(
    listener: &L,
    spec: &ChannelSpec,
    accept: impl Fn(&L) -> std::io::Result<S>,
) -> Result<S, TransportError> {
    let deadline = crate::deadline::Deadline::after(spec.timeout);
    loop {
        match accept(listener) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if deadline.expired() {
                    return Err(TransportError::Timeout(spec.timeout));
                }
                crate::sys::wait_readable(
                    listener.as_raw_fd(),
                    deadline.remaining_nonzero().as_millis() as i32,
                )?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => interrupted()?,
            Err(e) => return Err(e.into()),
        }
    }
}

/// A call that the kernel interrupted (a read, an accept, a write not begun): tried again,
/// unless the runner told this role to stop (a write begun is always finished, within its
/// timeout).
#[cold]
pub(crate) fn interrupted() -> Result<(), TransportError> {
    if crate::deadline::role_told_to_stop() {
        Err(TransportError::Stopped)
    } else {
        Ok(())
    }
}

/// `--opt write-size` of the byte-stream transports: each message in write calls of at most
/// this many bytes.
pub(crate) const WRITE_SIZE: OptionSpec = OptionSpec {
    key: "write-size",
    default: "message",
    about: "bytes per write call: `message` writes each message whole; fewer bytes split each message into several writes",
    values: &[],
    check: Some(|v| {
        if v == "message" {
            Ok(())
        } else {
            check_size(v, 1, 64 << 20)
        }
    }),
};

/// `--opt buffer` of the byte-stream transports: a buffered writer.
pub(crate) const BUFFER: OptionSpec = OptionSpec {
    key: "buffer",
    default: "none",
    about: "a buffered writer of this many bytes: messages gathered and written when the next would not fit and when the writer is done (so one-way only: a reply would wait behind data still in the buffer); `none` writes each message at once",
    values: &[],
    check: Some(|v| {
        if v == "none" {
            Ok(())
        } else {
            check_size(v, 1, 64 << 20)
        }
    }),
};

/// `--opt framing` of the byte-stream transports: binary or text lines.
pub(crate) const FRAMING: OptionSpec = OptionSpec {
    key: "framing",
    default: "length",
    about: "`length`: each message's own length field delimits it (binary); `text`: each message base64-encoded on a line of its own, the reader checking each line is UTF-8 before decoding it",
    values: &["length", "text"],
    check: None,
};

/// Whether a byte stream carries its messages as lines of text.
pub(crate) fn text_framing(options: &Options) -> bool {
    options.get(FRAMING.key).map(String::as_str) == Some("text")
}

/// A size option's value, None where it says `message` or `none`.
fn size_option(options: &Options, key: &str) -> Option<usize> {
    options
        .get(key)
        .and_then(|v| crate::units::parse_size(v).ok())
}

/// How a byte stream's writer cuts messages into writes: a write size, a buffer.
pub(crate) fn writes_of(options: &Options) -> (Option<usize>, Option<usize>) {
    (
        size_option(options, WRITE_SIZE.key),
        size_option(options, BUFFER.key),
    )
}

/// Which way a byte stream carries messages: a buffered writer holds messages back until its
/// buffer fills, so nothing may wait for an answer.
pub(crate) fn stream_exchange(options: &Options) -> Exchange {
    if writes_of(options).1.is_some() {
        Exchange::OneWay
    } else {
        Exchange::Both
    }
}

/// Checks a size option (`capacity=1M`) against bounds, naming them.
pub(crate) fn check_size(v: &str, min: usize, max: usize) -> Result<(), String> {
    match crate::units::parse_size(v) {
        Ok(n) if (min..=max).contains(&n) => Ok(()),
        _ => Err(format!(
            "give a size from {} to {}, e.g. 1M",
            crate::units::format_size(min),
            crate::units::format_size(max)
        )),
    }
}

/// Checks a boolean option value.
pub(crate) fn check_flag(v: &str) -> Result<(), String> {
    parse_flag(v)
        .map(|_| ())
        .ok_or_else(|| "give true or false".into())
}

#[cfg(test)]
mod sliced_waits {
    use super::*;

    #[test]
    fn a_sliced_wait_takes_what_is_there_and_gives_up_only_past_its_timeout() {
        assert!(matches!(
            next_within(Duration::from_secs(5), |_| Ok(Some(7))),
            Ok(7)
        ));
        // A library's own timeout is a slice that passed empty, not the read's.
        let mut first = true;
        let got = next_within(Duration::from_secs(5), |t| {
            if std::mem::take(&mut first) {
                return Err(TransportError::Timeout(t));
            }
            Ok(Some(8))
        });
        assert!(matches!(got, Ok(8)), "{got:?}");
        // Nothing comes: slices of at most 100 ms, and never given up before the timeout.
        let (start, mut slices) = (std::time::Instant::now(), Vec::new());
        let got: Result<(), _> = next_within(Duration::from_millis(250), |t| {
            slices.push(t);
            std::thread::sleep(t);
            Ok(None)
        });
        assert!(matches!(got, Err(TransportError::Timeout(_))), "{got:?}");
        assert!(start.elapsed() >= Duration::from_millis(250));
        assert!(slices.len() >= 3, "{slices:?}");
        assert!(slices.iter().all(|s| *s <= Duration::from_millis(100)));
    }
}
