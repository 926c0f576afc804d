//! One writer to many readers: a publisher's channels to its subscribers. A transport with
//! native fan-out (shm: one shared ring that every reader reads) makes a [`Multicast`] with
//! [`super::Transport::multicast`]; any other transport gets [`CopyFanOut`], which writes a
//! copy of each message to each reader's own channel. The session speaks to both alike.

use super::{ChannelSpec, Endpoint, Rendezvous, TransportError};
use std::time::Duration;

/// A native fan-out before its readers came: each reader joins with `connect`.
pub trait MulticastListener: Send {
    /// Where reader `reader` joins (each reader has its place, so that results per reader
    /// line up across writers).
    fn rendezvous_for(&self, reader: usize) -> Rendezvous;
    /// Waits, at most the spec's timeout, until every reader has joined.
    fn accept_all(&mut self, spec: &ChannelSpec) -> Result<Box<dyn Multicast>, TransportError>;
}

/// A writer's channels to `readers()` readers, each of which may answer.
pub trait Multicast: Send {
    fn readers(&self) -> usize;
    /// Whether one write reaches every reader (false: a copy per reader).
    fn native(&self) -> bool;
    /// The endpoint whose sends reach every reader (the workload's data).
    fn to_all(&mut self) -> &mut dyn Endpoint;
    /// Sends to one reader only, in order with what went to all (the session's messages).
    fn send_to(&mut self, reader: usize, msg: &[u8]) -> Result<(), TransportError>;
    /// Receives one reader's answer.
    fn recv_from(&mut self, reader: usize, buf: &mut [u8]) -> Result<usize, TransportError>;
    fn set_recv_timeout(&mut self, timeout: Duration) -> Result<(), TransportError>;
    /// The reader whose channel failed the last failed call, when it is known.
    fn failed_reader(&self) -> Option<usize>;
    /// Copies that a reader's full queue refused (best-effort): that reader lost them. A
    /// native fan-out reports a refusal from `to_all` as [`TransportError::Full`] instead.
    fn refused(&self) -> u64 {
        0
    }
}

/// One reader of a [`Multicast`], as an endpoint of its own.
pub struct OneReader<'a> {
    pub fan: &'a mut dyn Multicast,
    pub reader: usize,
}

impl Endpoint for OneReader<'_> {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        self.fan.send_to(self.reader, msg)
    }
    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        self.fan.recv_from(self.reader, buf)
    }
    fn try_recv(&mut self, _buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        Err(TransportError::Unsupported(
            "a reader's answers are only received blocking".into(),
        ))
    }
    fn set_recv_timeout(&mut self, timeout: Duration) -> Result<(), TransportError> {
        self.fan.set_recv_timeout(timeout)
    }
}

/// The fan-out of a transport without a native one: each message written to every reader's
/// channel in turn.
pub struct CopyFanOut<'a> {
    eps: Vec<&'a mut dyn Endpoint>,
    refused: u64,
    failed_at: Option<usize>,
}

impl<'a> CopyFanOut<'a> {
    pub fn new(eps: Vec<&'a mut dyn Endpoint>) -> Self {
        CopyFanOut {
            eps,
            refused: 0,
            failed_at: None,
        }
    }

    fn each(
        &mut self,
        mut send: impl FnMut(&mut dyn Endpoint) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        for (i, ep) in self.eps.iter_mut().enumerate() {
            match send(&mut **ep) {
                Ok(()) => {}
                Err(TransportError::Full) => self.refused += 1,
                Err(e) => {
                    self.failed_at = Some(i);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn one(&mut self, reader: usize) -> Result<&mut dyn Endpoint, TransportError> {
        match self.eps.get_mut(reader) {
            Some(ep) => Ok(&mut **ep),
            None => Err(TransportError::Unsupported(format!(
                "no reader {reader} in this fan-out"
            ))),
        }
    }
}

impl Multicast for CopyFanOut<'_> {
    fn readers(&self) -> usize {
        self.eps.len()
    }
    fn native(&self) -> bool {
        false
    }
    fn to_all(&mut self) -> &mut dyn Endpoint {
        // One reader needs no fan-out in its path (two-role cases measure the endpoint bare).
        if self.eps.len() == 1 {
            return &mut *self.eps[0];
        }
        self
    }
    fn send_to(&mut self, reader: usize, msg: &[u8]) -> Result<(), TransportError> {
        self.one(reader)?.send(msg)
    }
    fn recv_from(&mut self, reader: usize, buf: &mut [u8]) -> Result<usize, TransportError> {
        self.one(reader)?.recv(buf)
    }
    fn set_recv_timeout(&mut self, timeout: Duration) -> Result<(), TransportError> {
        self.each(|ep| ep.set_recv_timeout(timeout))
    }
    fn failed_reader(&self) -> Option<usize> {
        self.failed_at
    }
    fn refused(&self) -> u64 {
        self.refused
    }
}

impl Endpoint for CopyFanOut<'_> {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        self.each(|ep| ep.send(msg))
    }
    fn send_with(
        &mut self,
        len: usize,
        build: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        self.each(|ep| ep.send_with(len, build))
    }
    fn recv(&mut self, _buf: &mut [u8]) -> Result<usize, TransportError> {
        Err(TransportError::Unsupported(
            "a publisher's fan-out only writes".into(),
        ))
    }
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        self.recv(buf).map(Some)
    }
    fn set_recv_timeout(&mut self, timeout: Duration) -> Result<(), TransportError> {
        Multicast::set_recv_timeout(self, timeout)
    }
}
