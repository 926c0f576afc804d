//! `udp`: UDP datagrams over loopback, a socket pair per channel. The connecting end says hello
//! to the accepting end's port until it answers (a hello may be lost like any datagram); both
//! then connect their sockets to each other.

use super::floor::{FdFloor, FdSide};
use super::framing::{datagram_endpoint, HELLO};
use super::{
    channel_of, host_of, host_setup, Capabilities, ChannelSpec, Deferred, Endpoint, Floor, Opening,
    Options, Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::deadline::Deadline;
use std::net::UdpSocket;
use std::time::Duration;

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

    fn open(
        &self,
        at: &Rendezvous,
        side: Side,
        _: &ChannelSpec,
    ) -> Result<Box<dyn Opening>, TransportError> {
        let (_, accept) = channel_of(self.name(), side)?;
        if !accept {
            return Ok(Box::new(Deferred(
                move |at: &Rendezvous, spec: &ChannelSpec| {
                    connect(at.bound_at(side)?, host_of(at)?, spec)
                },
            )));
        }
        let at = format!("{}:0", host_of(at)?);
        let socket = UdpSocket::bind(&at).map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => TransportError::AddressInUse(at.clone()),
            _ => e.into(),
        })?;
        Ok(Box::new(UdpAccept { socket }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let a = UdpSocket::bind("127.0.0.1:0")?;
                let b = UdpSocket::bind("127.0.0.1:0")?;
                a.connect(b.local_addr()?)?;
                b.connect(a.local_addr()?)?;
                Ok((
                    FdSide {
                        read: a.into(),
                        write: None,
                    },
                    FdSide {
                        read: b.into(),
                        write: None,
                    },
                ))
            },
            datagram: true,
        };
        Some(&FLOOR)
    }
}

/// Says hello to the accepting end at `address` until it answers, then talks only to it; its
/// own end binds on `host` (this role's host address).
fn connect(
    address: &str,
    host: &str,
    spec: &ChannelSpec,
) -> Result<Box<dyn Endpoint>, TransportError> {
    let server = super::resolve(address)?;
    let s = UdpSocket::bind(super::local_towards(host, server))?;
    let deadline = Deadline::after(spec.timeout);
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut buf = [0u8; 16];
    loop {
        match s.send_to(HELLO, server) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e.into()),
        }
        match s.recv_from(&mut buf) {
            Ok((n, from)) if buf[..n] == *HELLO && from == server => {
                s.connect(from)?;
                return datagram_endpoint(s, spec, false);
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => return Err(e.into()),
        }
        if deadline.expired() {
            return Err(TransportError::Timeout(spec.timeout));
        }
    }
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
    fn finish(
        self: Box<Self>,
        _: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let s = self.socket;
        s.set_read_timeout(Some(spec.timeout))?;
        let mut buf = [0u8; 16];
        loop {
            let (n, from) = s
                .recv_from(&mut buf)
                .map_err(|e| TransportError::from_io(e, spec.timeout))?;
            if buf[..n] != *HELLO {
                continue;
            }
            s.connect(from)?;
            s.send(HELLO)?;
            return datagram_endpoint(s, spec, true);
        }
    }
}

