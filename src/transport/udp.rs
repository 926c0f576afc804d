//! `udp`: UDP datagrams over loopback. "Accept" works as TFTP does: the listener's socket only
//! takes hellos; each peer gets a fresh socket connected to it, so `msgperf serve` can take one
//! peer after another.

use super::floor::{FdFloor, FdSide};
use super::framing::{Datagrams, HELLO};
use super::{
    Capabilities, ChannelSpec, Endpoint, Floor, Listener, Rendezvous, Transport, TransportError,
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
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: false,
            ordered: false,
            max_message_bytes: MAX_DATAGRAM,
            cross_process: true,
            cross_host: true,
            latest_value: false,
            zero_copy: false,
            many_peers: true,
            native_fan_out: 0,
        }
    }

    fn listen(&self, spec: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        let at = spec.listen_at.as_deref().unwrap_or("127.0.0.1:0");
        let socket = UdpSocket::bind(at).map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => TransportError::AddressInUse(at.to_string()),
            _ => e.into(),
        })?;
        Ok(Box::new(UdpListener { socket }))
    }

    fn connect(
        &self,
        at: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let server = super::tcp::resolve(&at.address)?;
        let local = if server.is_ipv4() {
            "127.0.0.1:0"
        } else {
            "[::1]:0"
        };
        let s = UdpSocket::bind(local)?;
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
                Ok((n, from)) if buf[..n] == *HELLO => {
                    s.connect(from)?;
                    return endpoint(s, spec);
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

struct UdpListener {
    socket: UdpSocket,
}

impl Listener for UdpListener {
    fn rendezvous(&self) -> Rendezvous {
        let a = self
            .socket
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        Rendezvous {
            transport: "udp".into(),
            address: a,
        }
    }
    fn accept(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
        self.socket.set_read_timeout(Some(spec.timeout))?;
        let mut buf = [0u8; 16];
        loop {
            let (n, from) = self
                .socket
                .recv_from(&mut buf)
                .map_err(|e| TransportError::from_io(e, spec.timeout))?;
            if buf[..n] != *HELLO {
                continue;
            }
            let ip = self.socket.local_addr()?.ip();
            let s = UdpSocket::bind((ip, 0))?;
            s.connect(from)?;
            s.send(HELLO)?;
            return endpoint(s, spec);
        }
    }
}

fn endpoint(s: UdpSocket, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
    s.set_read_timeout(Some(spec.timeout))?;
    s.set_write_timeout(Some(spec.timeout))?;
    s.set_nonblocking(spec.poll)?;
    Ok(Box::new(Datagrams::new(s, spec.timeout, spec.poll)))
}
