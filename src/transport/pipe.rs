//! `pipe`: two named pipes (FIFOs) per channel, one per direction, in the case's private
//! directory. Named rather than anonymous so that a role in any process (or a `msgperf serve`
//! started by hand) can open them.

use super::floor::{FdFloor, FdSide};
use super::framing::Framed;
use super::{
    channel_of, dir_of, dir_setup, Capabilities, ChannelSpec, Deferred, Floor, Options, Rendezvous,
    Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::deadline::Deadline;
use crate::sys;
use crate::transport::{EndpointResult, OpenResult};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Pipe;

/// The FIFOs of channel `n`: the one its accepting end reads, and the one it writes.
fn fifos(dir: &Path, n: u32) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{n}.to-accepting")),
        dir.join(format!("{n}.to-connecting")),
    )
}

impl Transport for Pipe {
    fn name(&self) -> &'static str {
        "pipe"
    }
    fn about(&self) -> &'static str {
        "two named pipes (FIFOs), one per direction"
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: true,
            max_message_bytes: 64 << 20,
            cross_process: true,
            notices_closed_peer: true,
            ..Capabilities::default()
        }
    }

    fn setup(&self, _: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        dir_setup(self.name())
    }

    fn open(&self, at: &Rendezvous, side: Side, _: &ChannelSpec) -> OpenResult {
        let (n, accept) = channel_of(self.name(), side)?;
        let (to_accepting, to_connecting) = fifos(&dir_of(at)?, n);
        if accept {
            for p in [&to_accepting, &to_connecting] {
                match sys::mkfifo(p) {
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Err(TransportError::AddressInUse(p.display().to_string()))
                    }
                    r => r?,
                }
            }
        }
        Deferred::later(move |_: &Rendezvous, spec: &ChannelSpec| {
            let (read, write) = if accept {
                (&to_accepting, &to_connecting)
            } else {
                (&to_connecting, &to_accepting)
            };
            if !read.exists() {
                return Err(TransportError::Refused(read.display().to_string()));
            }
            let deadline = Deadline::after(spec.timeout);
            let mut r = open_read(read)?;
            let mut w = open_write(write, deadline, spec)?;
            greet(&mut r, &mut w, deadline, spec)?;
            endpoint(r, w, spec)
        })
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                // FIFOs like the transport's own (a FIFO's inode costs a little more than an
                // anonymous pipe's), opened and unlinked here, then plain descriptors.
                let dir = super::private_dir()?;
                let fifo = |name: &str| -> std::io::Result<(OwnedFd, OwnedFd)> {
                    let p = dir.join(name);
                    sys::mkfifo(&p)?;
                    let r = open_read(&p).map_err(std::io::Error::other)?;
                    let w = OpenOptions::new().write(true).open(&p)?;
                    sys::set_nonblocking(r.as_raw_fd(), false)?;
                    Ok((r.into(), w.into()))
                };
                let made = fifo("a").and_then(|a| Ok((a, fifo("b")?)));
                let _ = std::fs::remove_dir_all(&dir);
                let ((r1, w1), (r2, w2)) = made?;
                Ok((
                    FdSide {
                        read: r1,
                        write: Some(w2),
                    },
                    FdSide {
                        read: r2,
                        write: Some(w1),
                    },
                ))
            },
            meet: None,
            datagram: false,
        };
        Some(&FLOOR)
    }
}

/// Each side writes one byte once it holds its write end, and waits for the other's: a FIFO
/// read before its writer has opened it returns end-of-file, and the FIFOs may be removed only
/// once both sides hold both ends.
fn greet(
    r: &mut File,
    w: &mut File,
    deadline: Deadline,
    spec: &ChannelSpec,
) -> Result<(), TransportError> {
    w.write_all(b"h")?;
    let mut hello = [0u8; 1];
    loop {
        if sys::wait_readable(
            r.as_raw_fd(),
            deadline.remaining_nonzero().as_millis() as i32,
        )? {
            match r.read(&mut hello) {
                Ok(1) => return Ok(()),
                // No writer yet: poll reports a FIFO without writers as readable.
                Ok(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
        if deadline.expired() {
            return Err(TransportError::Timeout(spec.timeout));
        }
    }
}

/// Opening a FIFO's read end without O_NONBLOCK would wait for a writer with no bound.
fn open_read(p: &Path) -> Result<File, TransportError> {
    Ok(OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p)?)
}

/// A FIFO's write end opens only once a reader holds it (ENXIO before): retry to the deadline.
fn open_write(p: &Path, deadline: Deadline, spec: &ChannelSpec) -> Result<File, TransportError> {
    loop {
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(p)
        {
            Ok(f) => return Ok(f),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if deadline.expired() {
                    return Err(TransportError::Timeout(spec.timeout));
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// A pipe has no receive timeout. A dead peer shows as end of file; a watched one that hangs
/// is ended by msgperf (see `ChannelSpec::watched`), so its calls simply block. Any other peer
/// (one started by hand) might hang forever: then the descriptors are non-blocking and a call
/// that would block waits in poll(2), within the timeout.
fn endpoint(r: File, w: File, spec: &ChannelSpec) -> EndpointResult {
    let bound = (!spec.poll && !spec.watched).then_some(spec.timeout);
    let nonblocking = spec.poll || bound.is_some();
    sys::set_nonblocking(r.as_raw_fd(), nonblocking)?;
    sys::set_nonblocking(w.as_raw_fd(), nonblocking)?;
    Ok(Box::new(Framed::new(
        PipePair { r, w, bound },
        spec.timeout,
        spec.poll,
        spec.max_message,
    )))
}

struct PipePair {
    r: File,
    w: File,
    /// The longest a call may wait for its descriptor, if the descriptors are non-blocking for
    /// a peer that msgperf does not watch (not in `--poll` mode, where the caller spins).
    bound: Option<Duration>,
}

impl PipePair {
    /// Runs `call` on `fd`, waiting in poll(2) for `events` while it would block, within
    /// `bound`; past it, TimedOut.
    fn bounded(
        bound: Option<Duration>,
        fd: RawFd,
        events: libc::c_short,
        mut call: impl FnMut() -> isize,
    ) -> std::io::Result<usize> {
        let mut deadline: Option<Deadline> = None;
        loop {
            let got = sys::io_len(call());
            let Some(bound) = bound else { return got };
            match got {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let d = deadline.get_or_insert_with(|| Deadline::after(bound));
                    if d.expired() {
                        return Err(ErrorKind::TimedOut.into());
                    }
                    sys::wait_ready(fd, events, d.remaining_nonzero().as_millis() as i32)?;
                }
                got => return got,
            }
        }
    }
}

impl Read for PipePair {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let fd = self.r.as_raw_fd();
        Self::bounded(self.bound, fd, libc::POLLIN, || sys::read(fd, b))
    }
}

impl Write for PipePair {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let fd = self.w.as_raw_fd();
        Self::bounded(self.bound, fd, libc::POLLOUT, || sys::write(fd, b))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
