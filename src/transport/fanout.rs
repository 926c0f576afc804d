//! One writer to several readers without a native fan-out: a copy of each message written to
//! each reader's own channel in turn. A reader's channel that fails (the reader died) is left
//! out from then on, so the other readers keep getting every message; the runner reports the
//! death. A transport with a native fan-out writes once instead ([`super::Side::Publish`]).

use super::{Endpoint, TransportError};

pub struct CopyFanOut<'a> {
    eps: &'a mut [Box<dyn Endpoint>],
    /// Why each channel failed, if it did.
    failed: Vec<Option<TransportError>>,
    refused: u64,
}

impl<'a> CopyFanOut<'a> {
    pub fn new(eps: &'a mut [Box<dyn Endpoint>]) -> Self {
        let failed = eps.iter().map(|_| None).collect();
        CopyFanOut {
            eps,
            failed,
            refused: 0,
        }
    }

    /// Copies that a reader's full queue refused (best-effort): that reader lost them.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The channels that failed, and why.
    pub fn failed(&self) -> impl Iterator<Item = (usize, &TransportError)> {
        self.failed
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
    }

    fn each(
        &mut self,
        mut send: impl FnMut(&mut dyn Endpoint) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        let mut alive = 0;
        for (ep, failed) in self.eps.iter_mut().zip(self.failed.iter_mut()) {
            if failed.is_some() {
                continue;
            }
            match send(&mut **ep) {
                Ok(()) => alive += 1,
                Err(TransportError::Full) => {
                    self.refused += 1;
                    alive += 1;
                }
                Err(e) => *failed = Some(e),
            }
        }
        if alive == 0 {
            return Err(TransportError::PeerClosed);
        }
        Ok(())
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
}
