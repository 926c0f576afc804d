//! `uds-seqpacket`: a unix-domain sequenced-packet socket per channel (SOCK_SEQPACKET), at a
//! path in the case's private directory: connected like a stream socket (a peer that closes is
//! an end of file), with a datagram's message boundaries, so each read is one whole message and
//! nothing needs a length to split the stream.

use super::floor::{FdFloor, FdSide};
use super::framing::{set_waits, DatagramIo, Datagrams};
use super::{
    accept_ready, accept_within, bind_error, dir_setup, private_dir, socket_path, Capabilities,
    ChannelSpec, Deferred, DirGuard, Endpoint, Floor, Listener, Opening, Options, Rendezvous,
    Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::transport::{EndpointResult, OpenResult};
use socket2::{Domain, SockAddr, Socket, Type};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

pub struct UdsSeqpacket;

/// The largest message: a packet must fit the socket's send buffer (net.core.wmem_default,
/// 212992 B here); 64 KiB fits everywhere.
const MAX_MESSAGE: usize = 65_536;

impl Transport for UdsSeqpacket {
    fn name(&self) -> &'static str {
        "uds-seqpacket"
    }
    fn about(&self) -> &'static str {
        "unix-domain sequenced-packet socket: connected and reliable, message boundaries kept"
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: true,
            max_message_bytes: MAX_MESSAGE,
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
        let socket = Socket::new(Domain::UNIX, Type::SEQPACKET, None)?;
        let address = SockAddr::unix(&path)?;
        if !accept {
            return Deferred::later(move |_: &Rendezvous, spec: &ChannelSpec| {
                socket
                    .connect(&address)
                    .map_err(|e| super::connect_error(e, &path))?;
                endpoint(socket, spec, false)
            });
        }
        socket.bind(&address).map_err(|e| bind_error(e, &path))?;
        socket.listen(1)?;
        socket.set_nonblocking(true)?;
        Ok(Box::new(SeqpacketAccept { socket, path }))
    }

    fn listen(&self, backlog: u32, _: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        let dir = DirGuard(private_dir()?);
        let path = dir.0.join("s");
        let socket = Socket::new(Domain::UNIX, Type::SEQPACKET, None)?;
        socket
            .bind(&SockAddr::unix(&path)?)
            .map_err(|e| bind_error(e, &path))?;
        crate::sys::listen(socket.as_raw_fd(), backlog)?;
        Ok(Box::new(SeqpacketListen {
            socket,
            path,
            _dir: dir,
        }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let (a, b) = Socket::pair(Domain::UNIX, Type::SEQPACKET, None)?;
                Ok(FdSide::sockets(a, b))
            },
            meet: None,
            datagram: true,
        };
        Some(&FLOOR)
    }
}

/// A channel's accepting end: a listening socket at its path in the case's directory.
struct SeqpacketAccept {
    socket: Socket,
    path: PathBuf,
}

impl Opening for SeqpacketAccept {
    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let (s, _) = accept_within(&self.socket, spec, |l| l.accept())?;
        // The peer is in: the path is no longer needed.
        let _ = std::fs::remove_file(&self.path);
        s.set_nonblocking(false)?;
        endpoint(s, spec, true)
    }
}

/// A listener at a path in a directory of its own (removed with it).
struct SeqpacketListen {
    socket: Socket,
    path: PathBuf,
    _dir: DirGuard,
}

impl Listener for SeqpacketListen {
    fn accept(
        &self,
        wait: Duration,
        spec: &ChannelSpec,
    ) -> Result<Option<Box<dyn Endpoint>>, TransportError> {
        accept_ready(&self.socket, wait, |l| l.accept())?
            .map(|(s, _)| endpoint(s, spec, true))
            .transpose()
    }
    fn connect(&self, spec: &ChannelSpec) -> EndpointResult {
        let fd = crate::sys::unix_connect_timeout(&self.path, libc::SOCK_SEQPACKET, spec.timeout)
            .map_err(|e| TransportError::from_io(e, spec.timeout))?;
        endpoint(Socket::from(fd), spec, false)
    }
}

fn endpoint(s: Socket, spec: &ChannelSpec, accepted: bool) -> EndpointResult {
    // A peer that msgperf watches ends the case itself if it stops; a socket that is connected
    // sees one that closes or dies as an end of file, so its waits need no timer then.
    set_waits(&s, spec, !spec.watched)?;
    Ok(Box::new(Datagrams::new(
        Packets(s),
        spec.timeout,
        spec.poll,
        accepted,
    )))
}

/// A connected sequenced-packet socket: a read is one whole packet, and an empty read is the
/// peer's end of file (no packet of msgperf's is empty).
struct Packets(Socket);

impl DatagramIo for Packets {
    fn send(&self, b: &[u8]) -> std::io::Result<usize> {
        crate::sys::io_len(crate::sys::write(self.0.as_raw_fd(), b))
    }
    fn recv(&self, b: &mut [u8]) -> std::io::Result<usize> {
        match crate::sys::io_len(crate::sys::read(self.0.as_raw_fd(), b))? {
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => Ok(n),
        }
    }
}
