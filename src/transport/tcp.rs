//! `tcp`: a TCP connection per channel, over loopback (or the address of a `msgperf serve`
//! host), TCP_NODELAY on unless `--opt nodelay=false`.

use super::floor::{io, FdFloor, FdSide, Meet};
use super::framing::{set_waits, stream_endpoint, Bare};
use super::{
    accept_ready, accept_within, bind_on_host, channel_of, host_of, host_setup, Capabilities,
    ChannelSpec, Deferred, Endpoint, Floor, Listener, Opening, OptionSpec, Options, Rendezvous,
    Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::transport::{EndpointResult, OpenResult};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

pub struct Tcp;

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }
    fn about(&self) -> &'static str {
        "TCP over loopback, TCP_NODELAY on by default"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec {
                key: "nodelay",
                default: "true",
                about: "TCP_NODELAY: send small writes at once instead of batching them (Nagle)",
                values: &["true", "false"],
                check: None,
            },
            super::WRITE_SIZE,
            super::BUFFER,
            super::FRAMING,
        ]
    }
    fn capabilities(&self, options: &Options) -> Capabilities {
        Capabilities {
            exchange: super::stream_exchange(options),
            reliable: true,
            max_message_bytes: 64 << 20,
            cross_process: true,
            cross_host: true,
            notices_closed_peer: true,
            connections: true,
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
                connect(at.bound_at(side)?, spec)
            });
        }
        let listener = bind_on_host(host_of(at)?, TcpListener::bind)?;
        listener.set_nonblocking(true)?;
        Ok(Box::new(TcpAccept { listener }))
    }

    fn listen(&self, backlog: u32, _: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        crate::sys::listen(l.as_raw_fd(), backlog)?;
        Ok(Box::new(TcpListen(l)))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let l = TcpListener::bind("127.0.0.1:0")?;
                let a = TcpStream::connect(l.local_addr()?)?;
                let (b, _) = l.accept()?;
                a.set_nodelay(true)?;
                b.set_nodelay(true)?;
                Ok(FdSide::sockets(a, b))
            },
            // Side 0 accepts at its host, side 1 connects from its own.
            meet: Some(Meet {
                bind: |side, address| {
                    if side != 0 {
                        return Ok(None);
                    }
                    let l = TcpListener::bind((address, 0))?;
                    let at = l.local_addr()?;
                    Ok(Some((l.into(), at)))
                },
                open: |_, bound, peer, timeout| {
                    let s = match (bound, peer) {
                        (Some(l), _) => {
                            accept_ready(&TcpListener::from(l), timeout, |l| l.accept())
                                .map_err(io)?
                                .ok_or_else(|| {
                                    io(format!("the other side did not connect within {timeout:?}"))
                                })?
                                .0
                        }
                        (None, Some(to)) => TcpStream::connect_timeout(&to, timeout)?,
                        (None, None) => return Err(io("the other side bound no listener")),
                    };
                    s.set_nodelay(true)?;
                    Ok(s.into())
                },
            }),
            datagram: false,
        };
        Some(&FLOOR)
    }
}

/// Connects to the accepting end at `address` within the spec's timeout.
fn connect(address: &str, spec: &ChannelSpec) -> EndpointResult {
    let addr = super::resolve(address)?;
    let s = TcpStream::connect_timeout(&addr, spec.timeout).map_err(|e| match e.kind() {
        std::io::ErrorKind::ConnectionRefused => TransportError::Refused(address.to_string()),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            TransportError::Timeout(spec.timeout)
        }
        _ => e.into(),
    })?;
    endpoint(s, spec)
}

/// A channel's accepting end: a listening socket on a port the kernel chose.
struct TcpAccept {
    listener: TcpListener,
}

impl Opening for TcpAccept {
    fn address(&self) -> Option<String> {
        self.listener.local_addr().ok().map(|a| a.to_string())
    }
    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let (s, _) = accept_within(&self.listener, spec, |l| l.accept())?;
        s.set_nonblocking(false)?;
        endpoint(s, spec)
    }
}

/// A listener on a port of loopback the kernel chose.
struct TcpListen(TcpListener);

impl Listener for TcpListen {
    fn accept(
        &self,
        wait: Duration,
        spec: &ChannelSpec,
    ) -> Result<Option<Box<dyn Endpoint>>, TransportError> {
        accept_ready(&self.0, wait, |l| l.accept())?
            .map(|(s, _)| endpoint(s, spec))
            .transpose()
    }
    fn connect(&self, spec: &ChannelSpec) -> EndpointResult {
        let s = TcpStream::connect_timeout(&self.0.local_addr()?, spec.timeout)
            .map_err(|e| TransportError::from_io(e, spec.timeout))?;
        endpoint(s, spec)
    }
}

fn endpoint(s: TcpStream, spec: &ChannelSpec) -> EndpointResult {
    s.set_nodelay(spec.flag("nodelay", true))?;
    set_waits(&s, spec, !spec.watched)?;
    Ok(stream_endpoint(Bare(s), spec))
}
