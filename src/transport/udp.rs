//! `udp`: UDP datagrams over loopback, a socket pair per channel. The connecting end says hello
//! to the accepting end's port until it answers (a hello may be lost like any datagram); both
//! then connect their sockets to each other.

use super::floor::{io, FdFloor, FdSide, Meet};
use super::framing::{hello_accept, hello_connect};
use super::{
    bind_on_host, channel_of, host_of, host_setup, Capabilities, ChannelSpec, Deferred, Floor,
    Opening, Options, Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::transport::{EndpointResult, OpenResult};
use std::net::UdpSocket;

pub struct Udp;

/// The largest UDP payload over IPv4.
const MAX_DATAGRAM: usize = 65_507;

impl Transport for Udp {
    fn name(&self) -> &'static str {
        "udp"
    }
    fn about(&self) -> &'static str {
        "UDP datagrams over loopback: unreliable, losses counted"
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: false,
            max_message_bytes: MAX_DATAGRAM,
            cross_process: true,
            cross_host: true,
            ..Capabilities::default()
        }
    }

    fn setup(&self, plan: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        Ok(host_setup(self.name(), plan))
    }

    fn open(&self, at: &Rendezvous, side: Side, _: &ChannelSpec) -> OpenResult {
        let (_, accept) = channel_of(self.name(), side)?;
        if !accept {
            return Deferred::later(move |at: &Rendezvous, spec: &ChannelSpec| {
                connect(at.bound_at(side)?, host_of(at)?, spec)
            });
        }
        let socket = bind_on_host(host_of(at)?, UdpSocket::bind)?;
        Ok(Box::new(UdpAccept { socket }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let a = UdpSocket::bind("127.0.0.1:0")?;
                let b = UdpSocket::bind("127.0.0.1:0")?;
                a.connect(b.local_addr()?)?;
                b.connect(a.local_addr()?)?;
                Ok(FdSide::sockets(a, b))
            },
            // Each side binds at its host and sends only to the other's socket.
            meet: Some(Meet {
                bind: |_, address| {
                    let s = UdpSocket::bind((address, 0))?;
                    let at = s.local_addr()?;
                    Ok(Some((s.into(), at)))
                },
                open: |_, bound, peer, _| {
                    let (Some(s), Some(peer)) = (bound, peer) else {
                        return Err(io("both sides of a udp loop bind a socket"));
                    };
                    let s = UdpSocket::from(s);
                    s.connect(peer)?;
                    Ok(s.into())
                },
            }),
            datagram: true,
        };
        Some(&FLOOR)
    }
}

/// Says hello to the accepting end at `address` until it answers, then talks only to it; its
/// own end binds on `host` (this role's host address).
fn connect(address: &str, host: &str, spec: &ChannelSpec) -> EndpointResult {
    let server = super::resolve(address)?;
    let s = UdpSocket::bind(super::local_towards(host, server))?;
    // Nobody listens there yet: say hello again.
    hello_connect(s, server, spec, |e| {
        (e.kind() != std::io::ErrorKind::ConnectionRefused).then(|| e.into())
    })
}

/// A channel's accepting end: a socket on a port the kernel chose, which answers the first
/// hello and from then on talks only to whoever sent it.
struct UdpAccept {
    socket: UdpSocket,
}

impl Opening for UdpAccept {
    fn address(&self) -> Option<String> {
        self.socket.local_addr().ok().map(|a| a.to_string())
    }
    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        hello_accept(self.socket, spec)
    }
}
