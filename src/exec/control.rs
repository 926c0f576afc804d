//! The control protocol between msgperf's runner and its roles. It travels out of band: a role
//! process's inherited socket (fd 3), a role thread's socket pair, or a `msgperf serve`'s
//! connection; never the channel being measured, so a best-effort transport cannot lose it and
//! a result of any size fits.
//!
//! ```text
//! runner                                    role
//!   Hello {the whole case, the role's part} ──►
//!                                           ◄── Bound {addresses its accepting ends got}
//!   Open {where every accepting end is}     ──►
//!                                           ◄── Ready (opened, pinned, allocated)
//!   Go (every role is ready: the start)     ──►
//!   Stop (end early; also raised out of     ──►     ...the workload's messages and END...
//!         band: a signal or a flag)
//!                                           ◄── Result {what it measured} (or Error)
//!   Finish (every result is in)             ──►
//!                                           ◄── Heartbeat, any time (a role the runner
//!                                               cannot watch: one at a `msgperf serve`)
//! ```
//! A role on another host (`msgperf role --stdio` through a launcher) first says who it is
//! ([`FromRole::Hello`]: version, build, addresses, environment), answers clock probes at any
//! time ([`ToRole::Probe`] → [`FromRole::Probe`], four timestamps), and after Finish ends with
//! [`FromRole::Done`], a digest of the result it sent: a launcher's exit status alone is never
//! trusted. A broker placed on such a host is set up there ([`Order::Service`]): the far side
//! answers [`FromRole::SetUp`] with where the case meets, measures the broker from Go to Stop,
//! and reports it as its Result.
//! A frame is `MPC` + a version byte + a u32 LE length + a JSON body of that length, at most
//! [`MAX_FRAME`] bytes. Anything else is refused with [`ControlError`], never a panic.

use super::ExecError;
use crate::measure::clock::SharedTsc;
use crate::result::{CaseConfig, RoleResult};
use crate::transport::{
    ChannelSpec, FloorFigure, FloorLoop, FloorRoles, Rendezvous, Service, SetupPlan,
};
use crate::workload::RoleSpec;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// Bumped when a message changes: a role of another version is refused by name.
pub const VERSION: u8 = 2;
const MAGIC: &[u8; 3] = b"MPC";
const HEAD: usize = 8;
/// The largest frame: a role result with many interval means and histograms is a few MB.
pub const MAX_FRAME: usize = 256 << 20;

/// From the runner to a role.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ToRole {
    Hello(Box<Order>),
    /// Where every accepting end is: finish opening.
    Open(Rendezvous),
    /// Every role is ready: start.
    Go,
    /// End the case early: a driving role stops sending.
    Stop,
    /// Every result is in: close the ends and exit.
    Finish,
    /// A clock probe: the runner's time when it sent this (its CLOCK_MONOTONIC, ns).
    Probe(u64),
}

/// What a role is to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
// Sent once per role, boxed in its message: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Order {
    /// One role of a case.
    Case {
        case: CaseConfig,
        role: RoleSpec,
        rendezvous: Rendezvous,
        /// Every peer of this role is watched by a runner (see `ChannelSpec::watched`).
        watched: bool,
        /// Per end of the role: added to a received message's send time to put it on this
        /// role's clock (its sender's clock offset from this role's, measured by the runner;
        /// empty on one host).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        clock_shifts_ns: Vec<i64>,
        /// The TSC mapping every role of the case stamps with, all of them on this host
        /// (`measure::clock`); none: CLOCK_MONOTONIC.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stamps: Option<SharedTsc>,
    },
    /// One side of a transport's plain loop; a process side finds its descriptors at fds 4..
    Floor {
        transport: String,
        kind: FloorLoop,
        side: usize,
        size: usize,
        roles: FloorRoles,
        cpu: Option<usize>,
    },
    /// A case's set-up on the far side's host: the broker placed there, started, watched and
    /// measured there (its CPU can only be read on its own host).
    Service {
        transport: String,
        plan: SetupPlan,
        spec: ChannelSpec,
    },
}

/// From a role to the runner.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum FromRole {
    /// Its binding ends are bound: the addresses the kernel chose, by meeting point.
    Bound(BTreeMap<String, String>),
    Ready,
    Result(Box<Report>),
    /// It could not take part: why (one line).
    Error(String),
    Heartbeat,
    /// A role on another host, first: who it is.
    Hello(Box<FarHello>),
    /// The answer to a probe: the runner's send time, this side's receive and send times.
    Probe {
        t1: u64,
        t2: u64,
        t3: u64,
    },
    /// The last frame of a role on another host: the CRC32 of its result frame's body.
    Done {
        digest: u32,
    },
    /// A far set-up ([`Order::Service`]) is done: where the case meets, and what it started
    /// (pids on that host).
    SetUp {
        rendezvous: Rendezvous,
        services: Vec<Service>,
    },
}

/// What a role on another host says of itself before anything else.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FarHello {
    pub msgperf_version: String,
    /// Which binary (see [`build_id`]): the same msgperf on every side.
    pub build: String,
    /// Its IPv4 addresses other than loopback, the one a launcher came in on (ssh) first.
    pub addresses: Vec<String>,
    pub environment: crate::result::Environment,
}

/// This binary's identity: the CRC32 of the executable's bytes, so that two builds of one
/// version are told apart (cached: read once).
pub fn build_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::env::current_exe().and_then(std::fs::read).map_or_else(
            |_| "unknown".into(),
            |b| format!("{:08x}", crc32fast::hash(&b)),
        )
    })
    .clone()
}

/// What a role measured.
// Always boxed where it travels (`FromRole::Result`).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Report {
    Case(RoleResult),
    Floor(Option<FloorFigure>),
    /// A far set-up's processes, each measured as a role from Go to Stop.
    Services(Vec<RoleResult>),
}

/// What is wrong with a control stream.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("the other side closed the control channel")]
    Closed,
    #[error("no control message within {0:?}")]
    Timeout(Duration),
    #[error("a control frame was cut short ({got} of {want} B)")]
    Truncated { got: usize, want: usize },
    #[error("not a msgperf control frame (it starts with {0:02x?}): is the other side msgperf?")]
    BadMagic([u8; 3]),
    #[error("the other side speaks control version {0}, this msgperf {VERSION}: run the same msgperf on every side")]
    WrongVersion(u8),
    #[error("a control frame of {0} B is over the {MAX_FRAME} B bound")]
    TooLarge(usize),
    #[error("a control message does not parse ({0}): is the other side the same msgperf version?")]
    Malformed(String),
    #[error("control channel: {0}")]
    Io(std::io::Error),
}

/// Writes one frame.
pub fn write_frame(w: &mut impl Write, msg: &impl Serialize) -> Result<(), ControlError> {
    let body = serde_json::to_vec(msg).map_err(|e| ControlError::Malformed(e.to_string()))?;
    if body.len() > MAX_FRAME {
        return Err(ControlError::TooLarge(body.len()));
    }
    let mut frame = Vec::with_capacity(HEAD + body.len());
    frame.extend_from_slice(MAGIC);
    frame.push(VERSION);
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame).map_err(io_error)?;
    w.flush().map_err(io_error)
}

/// Reads one frame; a clean end of stream between frames is [`ControlError::Closed`].
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> Result<T, ControlError> {
    let mut head = [0u8; HEAD];
    let got = read_full(r, &mut head)?;
    if got == 0 {
        return Err(ControlError::Closed);
    }
    if head[..3] != MAGIC[..] {
        return Err(ControlError::BadMagic([head[0], head[1], head[2]]));
    }
    if got < HEAD {
        return Err(ControlError::Truncated { got, want: HEAD });
    }
    if head[3] != VERSION {
        return Err(ControlError::WrongVersion(head[3]));
    }
    let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if len > MAX_FRAME {
        return Err(ControlError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    let got = read_full(r, &mut body)?;
    if got < len {
        return Err(ControlError::Truncated { got, want: len });
    }
    serde_json::from_slice(&body).map_err(|e| ControlError::Malformed(e.to_string()))
}

/// Reads until `buf` is full or the stream ends; returns how much came.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, ControlError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e)),
        }
    }
    Ok(got)
}

fn io_error(e: std::io::Error) -> ControlError {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => ControlError::Timeout(Duration::ZERO),
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof => {
            ControlError::Closed
        }
        _ => ControlError::Io(e),
    }
}

/// A control connection: a unix socket (a role process's fd 3, a thread's pair, a named
/// `msgperf serve`) or TCP (a `msgperf serve` at host:port).
pub enum Conn {
    Unix(UnixStream),
    Tcp(std::net::TcpStream),
}

impl Conn {
    pub fn try_clone(&self) -> std::io::Result<Conn> {
        Ok(match self {
            Conn::Unix(s) => Conn::Unix(s.try_clone()?),
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
        })
    }

    /// Bounds the next reads (None: wait for ever, which only the runner's reader threads do:
    /// they end when the role's side closes).
    pub fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()> {
        let d = d.map(|d| d.max(Duration::from_millis(1)));
        match self {
            Conn::Unix(s) => s.set_read_timeout(d),
            Conn::Tcp(s) => s.set_read_timeout(d),
        }
    }

    pub fn shutdown(&self) {
        let _ = match self {
            Conn::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Conn::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &impl Serialize) -> Result<(), ControlError> {
        write_frame(self, msg)
    }

    /// Receives one message within `within` (None: no bound).
    pub fn recv<T: DeserializeOwned>(
        &mut self,
        within: Option<Duration>,
    ) -> Result<T, ControlError> {
        self.set_read_timeout(within).map_err(ControlError::Io)?;
        read_frame(self).map_err(|e| match (e, within) {
            (ControlError::Timeout(_), Some(d)) => ControlError::Timeout(d),
            (e, _) => e,
        })
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(b),
            Conn::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where a `msgperf serve` takes control connections: `host:port` (TCP), or a path (a unix
/// socket; a named server's is `/dev/shm/msgperf-NAME`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlAddr {
    Tcp(String),
    Unix(PathBuf),
}

impl ControlAddr {
    /// `host:port` that resolves, or a path with a `/`; anything else is refused, never taken
    /// for a file name in the current directory.
    pub fn parse(s: &str, option: &str) -> Result<ControlAddr, ExecError> {
        use std::net::ToSocketAddrs;
        if s.contains('/') {
            return Ok(ControlAddr::Unix(PathBuf::from(s)));
        }
        match s.to_socket_addrs().map(|mut a| a.next()) {
            Ok(Some(_)) => Ok(ControlAddr::Tcp(s.to_string())),
            Ok(None) => Err(ExecError::Address(format!(
                "{option} {s}: resolves to no address: write host:port (e.g. 127.0.0.1:7000) or a socket path with a `/` (e.g. ./demo.sock)"
            ))),
            Err(e) => Err(ExecError::Address(format!(
                "{option} {s}: not host:port ({e}): write host:port with a port up to 65535 (e.g. 127.0.0.1:7000) or a socket path with a `/` (e.g. ./demo.sock)"
            ))),
        }
    }

    /// Reachable from this host only: a unix socket, or TCP on a loopback address.
    pub fn is_private(&self) -> bool {
        use std::net::ToSocketAddrs;
        match self {
            ControlAddr::Unix(_) => true,
            ControlAddr::Tcp(a) => a
                .to_socket_addrs()
                .is_ok_and(|mut all| all.all(|a| a.ip().is_loopback())),
        }
    }

    /// A server found by name.
    pub fn named(name: &str) -> ControlAddr {
        ControlAddr::Unix(PathBuf::from(format!("/dev/shm/msgperf-{name}")))
    }

    /// The host that data channels to this server reach (network transports).
    pub fn host(&self) -> String {
        match self {
            ControlAddr::Tcp(a) => {
                use std::net::ToSocketAddrs;
                a.to_socket_addrs()
                    .ok()
                    .and_then(|mut a| a.next())
                    .map_or_else(|| "127.0.0.1".to_string(), |a| a.ip().to_string())
            }
            ControlAddr::Unix(_) => "127.0.0.1".into(),
        }
    }

    /// Connects within `timeout`.
    pub fn connect(&self, timeout: Duration) -> Result<Conn, ExecError> {
        match self {
            ControlAddr::Tcp(a) => {
                use std::net::ToSocketAddrs;
                let addr = a
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut x| x.next())
                    .ok_or_else(|| {
                        ExecError::Address(format!(
                            "`{a}` is not a socket address: write e.g. 127.0.0.1:7000"
                        ))
                    })?;
                std::net::TcpStream::connect_timeout(&addr, timeout)
                    .map(Conn::Tcp)
                    .map_err(|e| match e.kind() {
                        ErrorKind::ConnectionRefused => ExecError::Address(format!(
                            "connection refused at {a}: is `msgperf serve` running there?"
                        )),
                        _ => ExecError::os(format!("could not reach `msgperf serve` at {a}"), e),
                    })
            }
            ControlAddr::Unix(p) => {
                use std::os::unix::fs::FileTypeExt;
                match std::fs::symlink_metadata(p) {
                    Err(_) => return Err(ExecError::Address(format!("connection refused at {}: no `msgperf serve` there (nothing at that path)", p.display()))),
                    Ok(m) if !m.file_type().is_socket() => return Err(ExecError::Address(format!("{} is not a msgperf server (a foreign file, not its socket): pick another --name or --connect, or remove it", p.display()))),
                    Ok(_) => {}
                }
                UnixStream::connect(p)
                    .map(Conn::Unix)
                    .map_err(|e| match e.kind() {
                        ErrorKind::ConnectionRefused => ExecError::Address(format!(
                            "connection refused at {}: is `msgperf serve` running there?",
                            p.display()
                        )),
                        _ => ExecError::os(
                            format!("could not reach `msgperf serve` at {}", p.display()),
                            e,
                        ),
                    })
            }
        }
    }
}

impl std::fmt::Display for ControlAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlAddr::Tcp(a) => f.write_str(a),
            ControlAddr::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{RoleId, RoleKind};

    fn frame(msg: &impl Serialize) -> Vec<u8> {
        let mut v = Vec::new();
        write_frame(&mut v, msg).unwrap();
        v
    }

    #[test]
    fn messages_round_trip_one_after_another() {
        let mut bytes = frame(&FromRole::Ready);
        bytes.extend(frame(&FromRole::Error("no".into())));
        let mut r = bytes.as_slice();
        assert!(matches!(
            read_frame::<FromRole>(&mut r),
            Ok(FromRole::Ready)
        ));
        assert!(matches!(read_frame::<FromRole>(&mut r), Ok(FromRole::Error(e)) if e == "no"));
        assert!(matches!(
            read_frame::<FromRole>(&mut r),
            Err(ControlError::Closed)
        ));
    }

    #[test]
    fn a_result_of_ten_megabytes_passes() {
        let mut r = RoleResult::missing(RoleId::one(RoleKind::new("reader")), 1, String::new());
        r.interval_means_ns = (0..1_500_000u64).map(|i| i * 7_919).collect();
        let bytes = frame(&FromRole::Result(Box::new(Report::Case(r.clone()))));
        assert!(bytes.len() > 10 << 20, "{} B", bytes.len());
        match read_frame::<FromRole>(&mut bytes.as_slice()).unwrap() {
            FromRole::Result(b) => match *b {
                Report::Case(back) => assert_eq!(back.interval_means_ns, r.interval_means_ns),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_frames_are_named_never_a_panic() {
        let good = frame(&FromRole::Ready);
        // Truncated: in the head, and in the body.
        for cut in [5, good.len() - 1] {
            let e = read_frame::<FromRole>(&mut &good[..cut]).unwrap_err();
            assert!(matches!(e, ControlError::Truncated { .. }), "{cut}: {e}");
        }
        // Oversized: a length over the bound is refused before anything is allocated.
        let mut big = good.clone();
        big[4..8].copy_from_slice(&(MAX_FRAME as u32 + 1).to_le_bytes());
        assert!(matches!(
            read_frame::<FromRole>(&mut big.as_slice()),
            Err(ControlError::TooLarge(_))
        ));
        // Another version.
        let mut other = good.clone();
        other[3] = VERSION + 1;
        let e = read_frame::<FromRole>(&mut other.as_slice()).unwrap_err();
        assert!(e.to_string().contains("same msgperf"), "{e}");
        // A body that is not a message.
        let mut junk = good[..HEAD].to_vec();
        junk[4..8].copy_from_slice(&5u32.to_le_bytes());
        junk.extend_from_slice(b"{{{{{");
        assert!(matches!(
            read_frame::<FromRole>(&mut junk.as_slice()),
            Err(ControlError::Malformed(_))
        ));
        // Random bytes: refused by their first three, whatever they are.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2_000 {
            let n = (seed % 64) as usize;
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let r = read_frame::<ToRole>(&mut bytes.as_slice());
            assert!(r.is_err() || bytes.starts_with(MAGIC), "{bytes:?}");
        }
    }

    #[test]
    fn addresses_are_told_apart() {
        assert_eq!(
            ControlAddr::parse("127.0.0.1:7000", "--listen").unwrap(),
            ControlAddr::Tcp("127.0.0.1:7000".into())
        );
        assert_eq!(
            ControlAddr::parse("/tmp/x.sock", "--listen").unwrap(),
            ControlAddr::Unix("/tmp/x.sock".into())
        );
        // Neither: refused, not taken for a file in the current directory.
        for bad in ["127.0.0.1:99999", "demo", "127.0.0.1", "localhost:port"] {
            let e = ControlAddr::parse(bad, "--listen").unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--listen {bad}: ")) && e.contains("e.g. 127.0.0.1:7000"),
                "{e}"
            );
        }
        assert_eq!(
            ControlAddr::named("demo"),
            ControlAddr::Unix("/dev/shm/msgperf-demo".into())
        );
        // Where `msgperf serve` may listen: only what this host alone reaches.
        for (at, private) in [
            ("127.0.0.1:7000", true),
            ("[::1]:7000", true),
            ("0.0.0.0:7000", false),
            ("10.1.2.3:7000", false),
            ("/tmp/x.sock", true),
        ] {
            assert_eq!(
                ControlAddr::parse(at, "--listen").unwrap().is_private(),
                private,
                "{at}"
            );
        }
    }
}
