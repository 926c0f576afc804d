//! `msgperf serve`: a server started by hand (NML's perfsvr) that plays the roles of a case that
//! do not drive, for a `msgperf run ... --connect` elsewhere. It takes control connections at
//! its address and serves each one through the same protocol as any role; every setting comes
//! from the case, so what is recorded is what ran. While it serves, it sends heartbeats: the
//! runner cannot watch its process.

use super::control::{
    read_frame, write_frame, Conn, ControlAddr, ControlError, FromRole, Order, ToRole,
};
use super::role::{self, Link, RoleEnv};
use super::runner::HEARTBEAT;
use super::ExecError;
use crate::measure::clock;
use crate::result::{CaseConfig, RoleResult};
use crate::transport::{self, Options};
use crossbeam_channel::{bounded, Receiver};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct ServeOptions {
    pub transport: String,
    /// Where control connections come: host:port, or a unix socket's path.
    pub at: ControlAddr,
    /// The option that named `at` (`--name` or `--listen`), for errors to point at.
    pub option: &'static str,
    /// The CPU to serve on.
    pub pin: Option<usize>,
    /// Serve one case, then exit.
    pub once: bool,
    /// `--opt` values this server insists on: a case with others is refused, naming them.
    pub options: Options,
}

/// A control listener.
enum Listener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener, std::path::PathBuf),
}

impl Listener {
    fn bind(at: &ControlAddr, option: &str) -> Result<Self, ExecError> {
        match at {
            ControlAddr::Tcp(a) => std::net::TcpListener::bind(a)
                .map(Listener::Tcp)
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::AddrInUse => ExecError::Address(format!(
                        "address {a} is in use: pick another with {option}, or stop what holds it"
                    )),
                    _ => ExecError::os(format!("cannot listen at {a}"), e),
                }),
            ControlAddr::Unix(p) => {
                use std::os::unix::fs::FileTypeExt;
                if let Ok(m) = std::fs::symlink_metadata(p) {
                    if !m.file_type().is_socket() {
                        return Err(ExecError::Address(format!(
                            "{} exists and is not a socket: pick another {option}, or remove it",
                            p.display()
                        )));
                    }
                    if std::os::unix::net::UnixStream::connect(p).is_ok() {
                        return Err(ExecError::Address(format!(
                            "address {} is in use: another `msgperf serve` listens there; pick another {option}",
                            p.display()
                        )));
                    }
                    // Left by a server that died.
                    let _ = std::fs::remove_file(p);
                }
                if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    let _ = std::fs::create_dir_all(dir);
                }
                std::os::unix::net::UnixListener::bind(p)
                    .map(|l| Listener::Unix(l, p.clone()))
                    .map_err(|e| ExecError::os(format!("cannot listen at {}", p.display()), e))
            }
        }
    }

    fn address(&self) -> String {
        match self {
            Listener::Tcp(l) => l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Listener::Unix(_, p) => p.display().to_string(),
        }
    }

    /// The next control connection, or None after `slice` (so that Ctrl-C is noticed).
    fn accept(&self, slice: Duration) -> Result<Option<Conn>, ExecError> {
        use std::os::fd::AsRawFd;
        let fd = match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l, _) => l.as_raw_fd(),
        };
        if !crate::sys::wait_readable(fd, slice.as_millis() as i32)
            .map_err(|e| ExecError::os("could not wait for a connection", e))?
        {
            return Ok(None);
        }
        match self {
            Listener::Tcp(l) => l.accept().map(|(s, _)| Some(Conn::Tcp(s))),
            Listener::Unix(l, _) => l.accept().map(|(s, _)| Some(Conn::Unix(s))),
        }
        .map_err(|e| ExecError::os("could not accept a connection", e))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Serves cases until Ctrl-C (or one, with `once`); `report` hears of each.
pub fn serve(
    o: &ServeOptions,
    mut report: impl FnMut(Result<&(CaseConfig, RoleResult), &ExecError>),
) -> Result<(), ExecError> {
    let t = transport::find(&o.transport).map_err(|e| ExecError::Refused(e.to_string()))?;
    if !t.capabilities(&o.options).cross_process {
        return Err(ExecError::Refused(format!(
            "transport `{}` joins threads of one process: it cannot be served to another",
            t.name()
        )));
    }
    let listener = Listener::bind(&o.at, o.option)?;
    super::say(&format!(
        "msgperf serve: {} listening at {} (Ctrl-C to stop)\n",
        o.transport,
        listener.address()
    ));
    loop {
        if super::stop_requested() {
            return Ok(());
        }
        let Some(conn) = listener.accept(Duration::from_millis(250))? else {
            continue;
        };
        let r = match serve_one(conn, o) {
            Ok(None) => continue, // the runner called it off before the start
            Ok(Some(served)) => Ok(served),
            Err(e) => Err(e),
        };
        report(r.as_ref());
        if o.once {
            return r.map(|_| ());
        }
    }
}

/// A control stream served by threads: a reader (which raises the role's stop flag when Stop
/// comes, and answers clock probes at once) and a heartbeat; the role writes through the
/// same lock. A `msgperf serve` connection, or a far role's stdin and stdout.
pub(super) struct StreamLink {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    frames: Receiver<Result<ToRole, ControlError>>,
    pub stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    /// The CRC32 of the last result frame's body sent (`FromRole::Done`).
    digest: Option<u32>,
    /// Says when the reader ended (the other side closed).
    pub reader_ended: Receiver<()>,
    /// When the other side last sent a frame (`clock::now()`).
    pub heard: Arc<AtomicU64>,
}

impl StreamLink {
    pub fn start(
        mut reader: Box<dyn Read + Send>,
        writer: Box<dyn Write + Send>,
    ) -> Result<StreamLink, ExecError> {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let writer = Arc::new(Mutex::new(writer));
        let (tx, frames) = bounded(16);
        let (ended_tx, reader_ended) = bounded(1);
        let heard = Arc::new(AtomicU64::new(clock::now()));
        {
            let (stop, writer, heard) = (stop.clone(), writer.clone(), heard.clone());
            std::thread::Builder::new()
                .name("msgperf control".into())
                .spawn(move || {
                    loop {
                        let r = read_frame::<ToRole>(&mut reader);
                        let t2 = clock::now();
                        heard.store(t2, Ordering::SeqCst);
                        match r {
                            Ok(ToRole::Stop) => stop.store(true, Ordering::SeqCst),
                            Ok(ToRole::Probe(t1)) => {
                                let Ok(mut w) = writer.lock() else { break };
                                let t3 = clock::now();
                                if write_frame(&mut *w, &FromRole::Probe { t1, t2, t3 }).is_err() {
                                    break;
                                }
                                continue;
                            }
                            _ => {}
                        }
                        let end = r.is_err();
                        // A role that has ended no longer reads: probes are still answered.
                        let _ = tx.try_send(r);
                        if end {
                            break;
                        }
                    }
                    let _ = ended_tx.send(());
                })
                .map_err(|e| ExecError::start("could not start a control thread", e))?;
        }
        {
            let (writer, done) = (writer.clone(), done.clone());
            std::thread::Builder::new()
                .name("msgperf heartbeat".into())
                .spawn(move || {
                    while !done.load(Ordering::SeqCst) {
                        std::thread::sleep(HEARTBEAT);
                        let Ok(mut w) = writer.lock() else { return };
                        if done.load(Ordering::SeqCst)
                            || write_frame(&mut *w, &FromRole::Heartbeat).is_err()
                        {
                            return;
                        }
                    }
                })
                .map_err(|e| ExecError::start("could not start a heartbeat thread", e))?;
        }
        Ok(StreamLink {
            writer,
            frames,
            stop,
            done,
            digest: None,
            reader_ended,
            heard,
        })
    }

    /// The role is done: heartbeats stop.
    pub fn quiet(&self) {
        self.done.store(true, Ordering::SeqCst);
    }

    /// The last frame of a far role: the digest of the result it sent.
    pub fn send_done(&mut self) -> Result<(), ControlError> {
        let digest = self.digest.unwrap_or(0);
        Link::send(self, &FromRole::Done { digest })
    }
}

impl Link for StreamLink {
    fn send(&mut self, msg: &FromRole) -> Result<(), ControlError> {
        if let FromRole::Result(_) = msg {
            self.digest = Some(result_digest(msg));
        }
        let mut w = self.writer.lock().map_err(|_| ControlError::Closed)?;
        write_frame(&mut *w, msg)
    }
    fn recv(&mut self, within: Duration) -> Result<ToRole, ControlError> {
        match self.frames.recv_timeout(within) {
            Ok(r) => r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(ControlError::Timeout(within)),
            Err(_) => Err(ControlError::Closed),
        }
    }
}

/// The digest a far role's Done carries: the CRC32 of its result frame's body.
pub fn result_digest(msg: &FromRole) -> u32 {
    serde_json::to_vec(msg).map_or(0, |b| crc32fast::hash(&b))
}

fn serve_one(conn: Conn, o: &ServeOptions) -> Result<Option<(CaseConfig, RoleResult)>, ExecError> {
    let reader = conn
        .try_clone()
        .map_err(|e| ExecError::os("could not share the control connection", e))?;
    let mut link = StreamLink::start(Box::new(reader), Box::new(conn))?;
    let admit = |order: &Order| admit(o, order);
    let stop = link.stop.clone();
    let r = role::serve(
        &mut link,
        RoleEnv {
            stop: &stop,
            floor_ends: None,
            pin: o.pin,
            admit: Some(&admit),
        },
    );
    link.quiet();
    r
}

/// Refuses an order this server was not started for, naming why.
fn admit(o: &ServeOptions, order: &Order) -> Result<(), ExecError> {
    let Order::Case { case, .. } = order else {
        return Err(ExecError::Refused(
            "msgperf serve plays a case's roles, not floors or set-ups".into(),
        ));
    };
    if case.transport != o.transport {
        return Err(ExecError::Refused(format!(
            "this server serves `{}`, the case is on `{}`: start `msgperf serve -t {}`",
            o.transport, case.transport, case.transport
        )));
    }
    for (k, v) in &o.options {
        let theirs = case.effective_options.get(k);
        if theirs != Some(v) {
            return Err(ExecError::Refused(format!(
                "this server was started with --opt {k}={v}, the case runs {k}={}: run the case with --opt {k}={v}, or restart the server without it",
                theirs.map_or("(unset)", String::as_str)
            )));
        }
    }
    Ok(())
}
