//! `tcp`: a TCP connection over loopback (or any address given with `--listen`/`--connect`),
//! TCP_NODELAY on unless `--opt nodelay=false`.

use super::floor::{FdFloor, FdSide};
use super::framing::{Bare, Framed};
use super::{
    accept_within, Capabilities, ChannelSpec, Endpoint, Floor, Listener, OptionSpec, Rendezvous,
    Transport, TransportError,
};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};

pub struct Tcp;

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }
    fn about(&self) -> &'static str {
        "TCP over loopback, TCP_NODELAY on by default"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[OptionSpec {
            key: "nodelay",
            default: "true",
            about: "TCP_NODELAY: send small writes at once instead of batching them (Nagle)",
            values: &["true", "false"],
        }]
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            max_message_bytes: 64 << 20,
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
        let listener = TcpListener::bind(at).map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => TransportError::AddressInUse(at.to_string()),
            _ => e.into(),
        })?;
        listener.set_nonblocking(true)?;
        Ok(Box::new(TcpListen { listener }))
    }

    fn connect(
        &self,
        at: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let addr = resolve(&at.address)?;
        let s = TcpStream::connect_timeout(&addr, spec.timeout).map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => TransportError::Refused(at.address.clone()),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                TransportError::Timeout(spec.timeout)
            }
            _ => e.into(),
        })?;
        endpoint(s, spec)
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let l = TcpListener::bind("127.0.0.1:0")?;
                let a = TcpStream::connect(l.local_addr()?)?;
                let (b, _) = l.accept()?;
                a.set_nodelay(true)?;
                b.set_nodelay(true)?;
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
            datagram: false,
        };
        Some(&FLOOR)
    }
}

pub(super) fn resolve(address: &str) -> Result<SocketAddr, TransportError> {
    address
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            TransportError::Unsupported(format!(
                "`{address}` is not a socket address: write e.g. 127.0.0.1:7000"
            ))
        })
}

struct TcpListen {
    listener: TcpListener,
}

impl Listener for TcpListen {
    fn rendezvous(&self) -> Rendezvous {
        let a = self
            .listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        Rendezvous {
            transport: "tcp".into(),
            address: a,
        }
    }
    fn accept(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
        let (s, _) = accept_within(&self.listener, spec, |l| l.accept())?;
        s.set_nonblocking(false)?;
        endpoint(s, spec)
    }
}

fn endpoint(s: TcpStream, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
    s.set_nodelay(spec.flag("nodelay", true))?;
    if !spec.watched {
        s.set_read_timeout(Some(spec.timeout))?;
        s.set_write_timeout(Some(spec.timeout))?;
    }
    s.set_nonblocking(spec.poll)?;
    Ok(Box::new(Framed::new(
        Bare(s),
        spec.timeout,
        spec.poll,
        spec.max_message,
    )))
}
