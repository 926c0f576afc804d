//! `uds-dgram`: unix-domain datagram sockets, a pair per channel at paths in the case's private
//! directory. Reliable on Linux (a full queue makes the writer wait), and message boundaries are
//! kept. The connecting end says hello until the accepting end answers, as for `udp`.

use super::bind_error;
use super::floor::{FdFloor, FdSide};
use super::framing::{hello_accept, hello_connect};
use super::{
    channel_of, dir_of, dir_setup, Capabilities, ChannelSpec, Deferred, Floor, Opening, Options,
    Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::transport::{EndpointResult, OpenResult};
use std::os::unix::net::UnixDatagram;
use std::path::Path;

pub struct UdsDgram;

impl Transport for UdsDgram {
    fn name(&self) -> &'static str {
        "uds-dgram"
    }
    fn about(&self) -> &'static str {
        "unix-domain datagram socket: message boundaries kept, writer waits when full"
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: true,
            // Bounded by net.core.wmem_default (212992 B here); 64 KiB fits everywhere.
            max_message_bytes: 65_536,
            cross_process: true,
            // A connected datagram socket learns that its peer closed only when it sends.
            notices_closed_peer: false,
            ..Capabilities::default()
        }
    }

    fn setup(&self, _: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        dir_setup(self.name())
    }

    fn open(&self, at: &Rendezvous, side: Side, _: &ChannelSpec) -> OpenResult {
        let (n, accept) = channel_of(self.name(), side)?;
        let dir = dir_of(at)?;
        let accepting = dir.join(format!("{n}.sock"));
        let connecting = dir.join(format!("{n}.peer.sock"));
        if accept {
            let socket = UnixDatagram::bind(&accepting).map_err(|e| bind_error(e, &accepting))?;
            return Ok(Box::new(DgramAccept { socket }));
        }
        Deferred::later(move |_: &Rendezvous, spec: &ChannelSpec| {
            connect(&connecting, &accepting, spec)
        })
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let (a, b) = UnixDatagram::pair()?;
                Ok(FdSide::sockets(a, b))
            },
            meet: None,
            datagram: true,
        };
        Some(&FLOOR)
    }
}

/// Binds `own` and says hello to the accepting end at `server` until it answers from there.
fn connect(own: &Path, server: &Path, spec: &ChannelSpec) -> EndpointResult {
    let s = UnixDatagram::bind(own).map_err(|e| bind_error(e, own))?;
    hello_connect(s, server.to_path_buf(), spec, |e| {
        Some(super::connect_error(e, server))
    })
}

/// A channel's accepting end: a socket at its path, which answers the first hello and from
/// then on talks only to whoever sent it.
struct DgramAccept {
    socket: UnixDatagram,
}

impl Opening for DgramAccept {
    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        hello_accept(self.socket, spec)
    }
}
