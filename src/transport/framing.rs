//! Splits a byte stream (pipe, unix stream socket, TCP) into whole messages using the length in
//! each message's first four bytes. No length prefix is added, so the wire carries exactly the
//! message, as the floor loop's does.

use super::{declared_len, Endpoint, TransportError};
use crate::deadline::Deadline;
use crate::sys;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// A stream socket read and written with bare system calls, which skip glibc's
/// cancellation-point wrapper (see `sys::read`).
pub struct Bare<S>(pub S);

impl<S: AsRawFd> Read for Bare<S> {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        sys::io_len(sys::read(self.0.as_raw_fd(), b))
    }
}

impl<S: AsRawFd> Write for Bare<S> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        sys::io_len(sys::write(self.0.as_raw_fd(), b))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A framed byte stream. Bytes read past the end of a message wait in `pending`.
pub struct Framed<S> {
    io: S,
    pending: Vec<u8>,
    start: usize,
    end: usize,
    timeout: Duration,
    nonblocking: bool,
}

impl<S: Read + Write + Send> Framed<S> {
    /// `nonblocking` must match how `io` was opened (`--poll` opens it non-blocking).
    pub fn new(io: S, timeout: Duration, nonblocking: bool, max_message: usize) -> Self {
        Framed {
            io,
            pending: vec![0; max_message],
            start: 0,
            end: 0,
            timeout,
            nonblocking,
        }
    }

    /// One read: `Some(n)` with n > 0, `None` if nothing is there and `wait` is false.
    fn read_some(&mut self, buf: &mut [u8], wait: bool) -> Result<Option<usize>, TransportError> {
        let mut deadline: Option<Deadline> = None;
        loop {
            match self.io.read(buf) {
                Ok(0) => return Err(TransportError::PeerClosed),
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock && self.nonblocking => {
                    if !wait {
                        return Ok(None);
                    }
                    if deadline
                        .get_or_insert_with(|| Deadline::after(self.timeout))
                        .expired()
                    {
                        return Err(TransportError::Timeout(self.timeout));
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return Err(TransportError::from_io(e, self.timeout)),
            }
        }
    }

    fn check_len(len: usize, cap: usize) -> Result<(), TransportError> {
        if len < 4 {
            return Err(TransportError::Corrupt(format!(
                "a message declares a length of {len} B, below the 4 B of its length field"
            )));
        }
        if len > cap {
            return Err(TransportError::TooLarge { len, max: cap });
        }
        Ok(())
    }

    fn next(&mut self, buf: &mut [u8], wait: bool) -> Result<Option<usize>, TransportError> {
        if self.pending.len() < buf.len() {
            self.pending.resize(buf.len(), 0);
        }
        let avail = self.end - self.start;
        if avail >= 4 {
            let len = declared_len(&self.pending[self.start..]);
            Self::check_len(len, buf.len())?;
            if avail >= len {
                buf[..len].copy_from_slice(&self.pending[self.start..self.start + len]);
                self.start += len;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                return Ok(Some(len));
            }
        }
        let mut have = avail;
        if avail > 0 {
            buf[..avail].copy_from_slice(&self.pending[self.start..self.end]);
            self.start = 0;
            self.end = 0;
        } else {
            match self.read_some(buf, wait)? {
                None => return Ok(None),
                Some(n) => have = n,
            }
        }
        // Part of a message is here; the rest is in flight, so wait for it even when polling.
        loop {
            if have >= 4 {
                let len = declared_len(buf);
                Self::check_len(len, buf.len())?;
                if have >= len {
                    let extra = have - len;
                    self.pending[..extra].copy_from_slice(&buf[len..have]);
                    self.start = 0;
                    self.end = extra;
                    return Ok(Some(len));
                }
            }
            let n = self.read_some(&mut buf[have..], true)?.unwrap_or(0);
            have += n;
        }
    }
}

impl<S: Read + Write + Send> Endpoint for Framed<S> {
    fn send(&mut self, mut msg: &[u8]) -> Result<(), TransportError> {
        let mut deadline: Option<Deadline> = None;
        while !msg.is_empty() {
            match self.io.write(msg) {
                Ok(0) => return Err(TransportError::PeerClosed),
                Ok(n) => msg = &msg[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock && self.nonblocking => {
                    if deadline
                        .get_or_insert_with(|| Deadline::after(self.timeout))
                        .expired()
                    {
                        return Err(TransportError::Timeout(self.timeout));
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return Err(TransportError::from_io(e, self.timeout)),
            }
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        Ok(self.next(buf, true)?.unwrap_or(0))
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        self.next(buf, false)
    }
}

/// A datagram socket (UDP or unix datagram) as an endpoint: one message per datagram.
pub trait DatagramIo: Send {
    fn send(&self, b: &[u8]) -> std::io::Result<usize>;
    fn recv(&self, b: &mut [u8]) -> std::io::Result<usize>;
    fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()>;
}

// Connected sockets: read and write are recv and send, and as bare system calls they skip
// glibc's cancellation-point wrapper (see `sys::read`).
impl DatagramIo for std::net::UdpSocket {
    fn send(&self, b: &[u8]) -> std::io::Result<usize> {
        sys::io_len(sys::write(self.as_raw_fd(), b))
    }
    fn recv(&self, b: &mut [u8]) -> std::io::Result<usize> {
        sys::io_len(sys::read(self.as_raw_fd(), b))
    }
    fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()> {
        std::net::UdpSocket::set_read_timeout(self, d)
    }
}

impl DatagramIo for std::os::unix::net::UnixDatagram {
    fn send(&self, b: &[u8]) -> std::io::Result<usize> {
        sys::io_len(sys::write(self.as_raw_fd(), b))
    }
    fn recv(&self, b: &mut [u8]) -> std::io::Result<usize> {
        sys::io_len(sys::read(self.as_raw_fd(), b))
    }
    fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()> {
        std::os::unix::net::UnixDatagram::set_read_timeout(self, d)
    }
}

/// The datagrams both sides exchange while connecting; shorter than any message (under 4 B
/// could not be one), so a late duplicate is recognised and dropped.
pub const HELLO: &[u8] = b"hi";

pub struct Datagrams<D> {
    io: D,
    timeout: Duration,
    nonblocking: bool,
}

impl<D: DatagramIo> Datagrams<D> {
    pub fn new(io: D, timeout: Duration, nonblocking: bool) -> Self {
        Datagrams {
            io,
            timeout,
            nonblocking,
        }
    }
}

impl<D: DatagramIo> Endpoint for Datagrams<D> {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let mut deadline: Option<Deadline> = None;
        loop {
            match self.io.send(msg) {
                Ok(n) if n == msg.len() => return Ok(()),
                Ok(n) => {
                    return Err(TransportError::Corrupt(format!(
                        "sent {n} B of a {} B datagram",
                        msg.len()
                    )))
                }
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    return Err(TransportError::TooLarge {
                        len: msg.len(),
                        max: 0,
                    })
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A full unix datagram queue or socket buffer: wait, within the timeout.
                Err(e) if e.kind() == ErrorKind::WouldBlock && self.nonblocking => {
                    if deadline
                        .get_or_insert_with(|| Deadline::after(self.timeout))
                        .expired()
                    {
                        return Err(TransportError::Timeout(self.timeout));
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return Err(TransportError::from_io(e, self.timeout)),
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        let mut deadline: Option<Deadline> = None;
        loop {
            match self.try_recv(buf)? {
                Some(n) => return Ok(n),
                None if !self.nonblocking => return Err(TransportError::Timeout(self.timeout)),
                None => {
                    if deadline
                        .get_or_insert_with(|| Deadline::after(self.timeout))
                        .expired()
                    {
                        return Err(TransportError::Timeout(self.timeout));
                    }
                    std::hint::spin_loop();
                }
            }
        }
    }

    fn set_recv_timeout(&mut self, timeout: Duration) -> Result<(), TransportError> {
        self.timeout = timeout;
        self.io.set_read_timeout(Some(timeout))?;
        Ok(())
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        loop {
            match self.io.recv(buf) {
                Ok(n) if n < 4 && buf[..n] == *HELLO => continue,
                Ok(n) if n >= 4 && declared_len(buf) > n && n == buf.len() => {
                    return Err(TransportError::TooLarge {
                        len: declared_len(buf),
                        max: buf.len(),
                    })
                }
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(TransportError::from_io(e, self.timeout)),
            }
        }
    }
}
