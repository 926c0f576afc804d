//! `uds`: a unix-domain stream socket at a path in a private directory.

use super::floor::{FdFloor, FdSide};
use super::framing::{Bare, Framed};
use super::{
    accept_within, Capabilities, ChannelSpec, Endpoint, Floor, Listener, Rendezvous, Transport,
    TransportError,
};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;

pub struct Uds;

impl Transport for Uds {
    fn name(&self) -> &'static str {
        "uds"
    }
    fn about(&self) -> &'static str {
        "unix-domain stream socket"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            max_message_bytes: 64 << 20,
            cross_process: true,
            cross_host: false,
            latest_value: false,
            zero_copy: false,
            many_peers: true,
            native_fan_out: 0,
        }
    }

    fn listen(&self, spec: &ChannelSpec) -> Result<Box<dyn Listener>, TransportError> {
        let (path, dir) = socket_path(spec, "uds.sock")?;
        let listener = UnixListener::bind(&path).map_err(|e| bind_error(e, &path))?;
        listener.set_nonblocking(true)?;
        Ok(Box::new(UdsListener {
            listener,
            path,
            dir,
        }))
    }

    fn connect(
        &self,
        at: &Rendezvous,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Endpoint>, TransportError> {
        let s = UnixStream::connect(&at.address).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                TransportError::Refused(at.address.clone())
            }
            _ => e.into(),
        })?;
        endpoint(s, spec)
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        static FLOOR: FdFloor = FdFloor {
            make_pair: || {
                let (a, b) = UnixStream::pair()?;
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

/// The socket path: `--listen PATH` if given, else a fresh private directory (returned so that
/// the listener removes it).
pub(super) fn socket_path(
    spec: &ChannelSpec,
    name: &str,
) -> Result<(PathBuf, Option<PathBuf>), TransportError> {
    match &spec.listen_at {
        Some(p) => Ok((PathBuf::from(p), None)),
        None => {
            let dir = super::private_dir()?;
            Ok((dir.join(name), Some(dir)))
        }
    }
}

pub(super) fn bind_error(e: std::io::Error, path: &std::path::Path) -> TransportError {
    if e.kind() == std::io::ErrorKind::AddrInUse {
        TransportError::AddressInUse(path.display().to_string())
    } else {
        e.into()
    }
}

pub(super) fn remove_path(path: &std::path::Path, dir: &Option<PathBuf>) {
    let _ = std::fs::remove_file(path);
    if let Some(d) = dir {
        let _ = std::fs::remove_dir(d);
    }
}

struct UdsListener {
    listener: UnixListener,
    path: PathBuf,
    dir: Option<PathBuf>,
}

impl Listener for UdsListener {
    fn rendezvous(&self) -> Rendezvous {
        Rendezvous {
            transport: "uds".into(),
            address: self.path.display().to_string(),
        }
    }
    fn accept(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
        let (s, _) = accept_within(&self.listener, spec, |l| l.accept())?;
        s.set_nonblocking(false)?;
        endpoint(s, spec)
    }
}

impl Drop for UdsListener {
    fn drop(&mut self) {
        remove_path(&self.path, &self.dir);
    }
}

fn endpoint(s: UnixStream, spec: &ChannelSpec) -> Result<Box<dyn Endpoint>, TransportError> {
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
