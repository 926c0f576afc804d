//! `uds`: a unix-domain stream socket per channel, at a path in the case's private directory.

use super::floor::{FdFloor, FdSide};
use super::framing::{set_waits, stream_endpoint, Bare};
use super::{
    accept_ready, accept_within, dir_setup, private_dir, socket_path, Capabilities, ChannelSpec,
    Deferred, DirGuard, Endpoint, Floor, Listener, Opening, OptionSpec, Options, Rendezvous, Setup,
    SetupPlan, Side, Transport, TransportError,
};
use crate::transport::{EndpointResult, OpenResult};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

pub struct Uds;

impl Transport for Uds {
    fn name(&self) -> &'static str {
        "uds"
    }
    fn about(&self) -> &'static str {
        "unix-domain stream socket"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[super::WRITE_SIZE, super::BUFFER, super::FRAMING]
    }
    fn capabilities(&self, options: &Options) -> Capabilities {
        Capabilities {
            exchange: super::stream_exchange(options),
            reliable: true,
            max_message_bytes: 64 << 20,
            cross_process: true,
            notices_closed_peer: true,
            connections: true,
            ..Capabilities::default()
        }
    }

    fn setup(&self, _: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        dir_setup(self.name())
    }

    fn open(&self, at: &Rendezvous, side: Side, _: &ChannelSpec) -> OpenResult {
        let (path, accept) = socket_path(self.name(), at, side)?;
        if !accept {
            return Deferred::later(move |_: &Rendezvous, spec: &ChannelSpec| {
                let s = UnixStream::connect(&path).map_err(|e| super::connect_error(e, &path))?;
                endpoint(s, spec)
            });
        }
        let listener = UnixListener::bind(&path).map_err(|e| super::bind_error(e, &path))?;
        listener.set_nonblocking(true)?;
        Ok(Box::new(UdsAccept { listener, path }))
    }

    fn listen(&self, backlog: u32, _: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        let dir = DirGuard(private_dir()?);
        let path = dir.0.join("s");
        let l = UnixListener::bind(&path).map_err(|e| super::bind_error(e, &path))?;
        crate::sys::listen(l.as_raw_fd(), backlog)?;
        Ok(Box::new(UdsListen {
            socket: l,
            path,
            _dir: dir,
        }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let (a, b) = UnixStream::pair()?;
                Ok(FdSide::sockets(a, b))
            },
            meet: None,
            datagram: false,
        };
        Some(&FLOOR)
    }
}
/// A channel's accepting end: a listening socket at its path in the case's directory.
struct UdsAccept {
    listener: UnixListener,
    path: PathBuf,
}

impl Opening for UdsAccept {
    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let (s, _) = accept_within(&self.listener, spec, |l| l.accept())?;
        // The peer is in: the path is no longer needed.
        let _ = std::fs::remove_file(&self.path);
        s.set_nonblocking(false)?;
        endpoint(s, spec)
    }
}

/// A listener at a path in a directory of its own (removed with it).
struct UdsListen {
    socket: UnixListener,
    path: PathBuf,
    _dir: DirGuard,
}

impl Listener for UdsListen {
    fn accept(
        &self,
        wait: Duration,
        spec: &ChannelSpec,
    ) -> Result<Option<Box<dyn Endpoint>>, TransportError> {
        accept_ready(&self.socket, wait, |l| l.accept())?
            .map(|(s, _)| endpoint(s, spec))
            .transpose()
    }
    fn connect(&self, spec: &ChannelSpec) -> EndpointResult {
        let fd = crate::sys::unix_connect_timeout(&self.path, libc::SOCK_STREAM, spec.timeout)
            .map_err(|e| TransportError::from_io(e, spec.timeout))?;
        endpoint(UnixStream::from(fd), spec)
    }
}

fn endpoint(s: UnixStream, spec: &ChannelSpec) -> EndpointResult {
    set_waits(&s, spec, !spec.watched)?;
    Ok(stream_endpoint(Bare(s), spec))
}
