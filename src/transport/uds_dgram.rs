//! `uds-dgram`: unix-domain datagram sockets. Reliable on Linux (a full queue makes the writer
//! wait), and message boundaries are kept. Accept works as for `udp`: a fresh socket per peer.

use super::floor::{FdFloor, FdSide};
use super::framing::{Datagrams, HELLO};
use super::uds::{bind_error, remove_path, socket_path};
use super::{
    Capabilities, ChannelSpec, Endpoint, Floor, Listener, Rendezvous, Transport, TransportError,
};
use crate::deadline::Deadline;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

pub struct UdsDgram;

impl Transport for UdsDgram {
    fn name(&self) -> &'static str {
        "uds-dgram"
    }
    fn about(&self) -> &'static str {
        "unix-domain datagram socket: message boundaries kept, writer waits when full"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            // Bounded by net.core.wmem_default (212992 B here); 64 KiB fits everywhere.
            max_message_bytes: 65_536,
            cross_process: true,
            cross_host: false,
            latest_value: false,
            zero_copy: false,
            many_peers: true,
            native_fan_out: 0,
        }
    }

    fn listen(&self, spec: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        let (path, dir) = socket_path(spec, "dgram.sock")?;
        let socket = UnixDatagram::bind(&path).map_err(|e| bind_error(e, &path))?;
        Ok(Box::new(DgramListener {
            socket,
            path,
            dir,
            accepted: 0,
        }))
    }

    fn connect(
        &self,
        at: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let dir = super::private_dir()?;
        let own = dir.join("client.sock");
        let result = (|| {
            let s = UnixDatagram::bind(&own)?;
            s.set_read_timeout(Some(Duration::from_millis(100)))?;
            let deadline = Deadline::after(spec.timeout);
            let mut buf = [0u8; 16];
            loop {
                match s.send_to(HELLO, &at.address) {
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                        ) =>
                    {
                        return Err(TransportError::Refused(at.address.clone()))
                    }
                    Err(e) => return Err(e.into()),
                }
                match s.recv_from(&mut buf) {
                    Ok((n, from)) if buf[..n] == *HELLO => {
                        let peer = from.as_pathname().map(PathBuf::from).ok_or_else(|| {
                            TransportError::Corrupt(
                                "the listener answered from an unnamed socket".into(),
                            )
                        })?;
                        s.connect(&peer)?;
                        // Tells the listener it may now remove the path we connected to.
                        s.send(HELLO)?;
                        return endpoint(s, spec);
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(e.into()),
                }
                if deadline.expired() {
                    return Err(TransportError::Timeout(spec.timeout));
                }
            }
        })();
        // A connected unix datagram socket keeps working once its path is gone.
        remove_path(&own, &Some(dir));
        result
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let (a, b) = UnixDatagram::pair()?;
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

struct DgramListener {
    socket: UnixDatagram,
    path: PathBuf,
    dir: Option<PathBuf>,
    accepted: u32,
}

impl Listener for DgramListener {
    fn rendezvous(&self) -> Rendezvous {
        Rendezvous {
            transport: "uds-dgram".into(),
            address: self.path.display().to_string(),
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
            let Some(peer) = from.as_pathname() else {
                continue;
            };
            if buf[..n] != *HELLO {
                continue;
            }
            self.accepted += 1;
            let own = self.path.with_extension(format!("{}.sock", self.accepted));
            let s = UnixDatagram::bind(&own)?;
            s.set_read_timeout(Some(spec.timeout))?;
            let r = s
                .connect(peer)
                .and_then(|_| s.send(HELLO))
                .and_then(|_| s.recv(&mut buf));
            let _ = std::fs::remove_file(&own);
            r.map_err(|e| TransportError::from_io(e, spec.timeout))?;
            return endpoint(s, spec);
        }
    }
}

impl Drop for DgramListener {
    fn drop(&mut self) {
        remove_path(&self.path, &self.dir);
    }
}

fn endpoint(s: UnixDatagram, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
    s.set_read_timeout(Some(spec.timeout))?;
    s.set_write_timeout(Some(spec.timeout))?;
    s.set_nonblocking(spec.poll)?;
    Ok(Box::new(Datagrams::new(s, spec.timeout, spec.poll)))
}
