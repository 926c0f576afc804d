//! Splits a byte stream (pipe, unix stream socket, TCP) into whole messages using the length in
//! each message's first four bytes. No length prefix is added, so the wire carries exactly the
//! message, as the floor loop's does. With `--opt framing=text`, each message travels as a line
//! of text instead ([`Lines`]).

use super::{declared_len, interrupted, ChannelSpec, Endpoint, TransportError};
use crate::deadline::Deadline;
use crate::sys;
use crate::transport::EndpointResult;
use base64::Engine;
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

/// How a framed stream's writer cuts messages into write calls (`--opt write-size`).
enum Writes {
    /// One write per message.
    Whole,
    /// Each message in writes of this many bytes.
    Split(usize),
    /// Messages gathered into a buffer of `cap` bytes (a buffered writer), written when the
    /// next would not fit and on [`Endpoint::flush`]; a message larger than the buffer is
    /// written as it comes, after what was gathered.
    Gather { cap: usize, buf: Vec<u8> },
}

/// A framed byte stream. Bytes read past the end of a message wait in `pending`.
pub struct Framed<S> {
    io: S,
    pending: Vec<u8>,
    start: usize,
    end: usize,
    timeout: Duration,
    nonblocking: bool,
    writes: Writes,
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
            writes: Writes::Whole,
        }
    }

    /// Writes as `--opt write-size` and `--opt buffer` say ([`super::writes_of`]).
    pub fn with_writes(mut self, (size, buffer): (Option<usize>, Option<usize>)) -> Self {
        self.writes = match (buffer, size) {
            (Some(cap), _) => Writes::Gather {
                cap,
                buf: Vec::with_capacity(cap),
            },
            (None, Some(n)) => Writes::Split(n.max(1)),
            (None, None) => Writes::Whole,
        };
        self
    }

    /// One whole buffer out, in as many write calls as it takes.
    #[inline(always)]
    fn write_all(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        match self.io.write(msg) {
            Ok(n) if n == msg.len() => Ok(()),
            first => self.send_rest(first, msg),
        }
    }

    /// A message cut or gathered as `--opt write-size` says.
    #[cold]
    #[inline(never)]
    fn send_cut(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        match &mut self.writes {
            Writes::Whole => self.write_all(msg),
            Writes::Split(n) => {
                let n = *n;
                msg.chunks(n).try_for_each(|c| self.write_all(c))
            }
            Writes::Gather { cap, buf } => {
                let (cap, fits) = (*cap, buf.len() + msg.len() <= *cap);
                if !fits {
                    self.flush_gathered()?;
                }
                if msg.len() > cap {
                    return self.write_all(msg);
                }
                if let Writes::Gather { buf, .. } = &mut self.writes {
                    buf.extend_from_slice(msg);
                }
                Ok(())
            }
        }
    }

    fn flush_gathered(&mut self) -> Result<(), TransportError> {
        let Writes::Gather { buf, .. } = &mut self.writes else {
            return Ok(());
        };
        let out = std::mem::take(buf);
        let r = if out.is_empty() {
            Ok(())
        } else {
            self.write_all(&out)
        };
        if let Writes::Gather { buf, .. } = &mut self.writes {
            *buf = out;
            buf.clear();
        }
        r
    }

    /// One read: `Some(n)` with n > 0, `None` if nothing is there and `wait` is false. The
    /// common case is inline; the rest waits in [`Self::read_again`].
    #[inline(always)]
    fn read_some(&mut self, buf: &mut [u8], wait: bool) -> Result<Option<usize>, TransportError> {
        match self.io.read(buf) {
            Ok(n) if n > 0 => Ok(Some(n)),
            first => self.read_again(first, buf, wait),
        }
    }

    /// What a read that brought no bytes means: the end, an error, or (interrupted, or nothing
    /// there yet when non-blocking) another try.
    #[cold]
    #[inline(never)]
    fn read_again(
        &mut self,
        mut got: std::io::Result<usize>,
        buf: &mut [u8],
        wait: bool,
    ) -> Result<Option<usize>, TransportError> {
        let mut deadline: Option<Deadline> = None;
        loop {
            match got {
                Ok(0) => return Err(TransportError::PeerClosed),
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::Interrupted => interrupted()?,
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
            got = self.io.read(buf);
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

    /// The next message. The common case, kept short since on one CPU every instruction of it
    /// lands on the round trip: nothing pending, and one read brings exactly one message.
    #[inline(always)]
    fn next(&mut self, buf: &mut [u8], wait: bool) -> Result<Option<usize>, TransportError> {
        if self.start != self.end {
            return self.take_pending(buf);
        }
        let Some(have) = self.read_some(buf, wait)? else {
            return Ok(None);
        };
        if have >= 4 && declared_len(buf) == have {
            return Ok(Some(have));
        }
        self.complete(buf, have).map(Some)
    }

    /// A message from the bytes a previous read brought past the end of its own.
    #[cold]
    #[inline(never)]
    fn take_pending(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
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
        buf[..avail].copy_from_slice(&self.pending[self.start..self.end]);
        self.start = 0;
        self.end = 0;
        self.complete(buf, avail).map(Some)
    }

    /// `have` bytes of a message are in `buf`: reads the rest (it is in flight, so this waits
    /// even when polling), keeping any bytes past its end for the next call.
    #[cold]
    #[inline(never)]
    fn complete(&mut self, buf: &mut [u8], mut have: usize) -> Result<usize, TransportError> {
        loop {
            if have >= 4 {
                let len = declared_len(buf);
                Self::check_len(len, buf.len())?;
                if have >= len {
                    let extra = have - len;
                    if self.pending.len() < extra {
                        self.pending.resize(buf.len(), 0);
                    }
                    self.pending[..extra].copy_from_slice(&buf[len..have]);
                    self.start = 0;
                    self.end = extra;
                    return Ok(len);
                }
            }
            let n = self.read_some(&mut buf[have..], true)?.unwrap_or(0);
            have += n;
        }
    }

    /// The rest of a send that one write did not finish.
    #[cold]
    #[inline(never)]
    fn send_rest(
        &mut self,
        mut got: std::io::Result<usize>,
        mut msg: &[u8],
    ) -> Result<(), TransportError> {
        let mut deadline: Option<Deadline> = None;
        let whole = msg.len();
        loop {
            match got {
                Ok(0) => return Err(TransportError::PeerClosed),
                Ok(n) => msg = &msg[n..],
                // Never left half written, even when stopping: the reader would lose its frame.
                // One not begun is given up when the runner says stop (a peer out of reach
                // would hold it for another whole timeout: the socket's restarts with the call).
                Err(e) if e.kind() == ErrorKind::Interrupted => {
                    if msg.len() == whole {
                        interrupted()?;
                    }
                }
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
            if msg.is_empty() {
                return Ok(());
            }
            got = self.io.write(msg);
        }
    }
}

impl<S: Read + Write + Send> Endpoint for Framed<S> {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        if !matches!(self.writes, Writes::Whole) {
            return self.send_cut(msg);
        }
        self.write_all(msg)
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        self.flush_gathered()
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        Ok(self.next(buf, true)?.unwrap_or(0))
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        self.next(buf, false)
    }
}

/// A stream socket's endpoint as the case's options say: writes cut or gathered (`write-size`,
/// `buffer`), messages delimited by their length or as lines of text (`framing`).
pub fn stream_endpoint<S: Read + Write + Send + 'static>(
    io: S,
    spec: &ChannelSpec,
) -> Box<dyn Endpoint> {
    let framed = Framed::new(io, spec.timeout, spec.poll, spec.max_message)
        .with_writes(super::writes_of(&spec.options));
    if super::text_framing(&spec.options) {
        Box::new(Lines::new(framed, spec.max_message))
    } else {
        Box::new(framed)
    }
}

/// The base64 text of a binary message: what a text protocol carries.
const TEXT: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Newline-delimited text over a byte stream (the Tcl report's `gets`/`puts`): each message is
/// written base64-encoded on a line of its own; the reader finds the newline, checks the line
/// is UTF-8, as a text protocol must, and decodes it. Writes go through [`Framed`], so
/// `write-size` and `buffer` cut and gather the lines.
pub struct Lines<S> {
    out: Framed<S>,
    /// The line being written.
    line: Vec<u8>,
    /// Bytes read and not yet taken: `inbox[start..end]`.
    inbox: Vec<u8>,
    start: usize,
    end: usize,
}

impl<S: Read + Write + Send> Lines<S> {
    pub fn new(out: Framed<S>, max_message: usize) -> Self {
        let max_line = base64::encoded_len(max_message, true).unwrap_or(usize::MAX / 4) + 1;
        Lines {
            out,
            line: Vec::with_capacity(max_line),
            inbox: vec![0; 2 * max_line],
            start: 0,
            end: 0,
        }
    }

    fn next(&mut self, buf: &mut [u8], wait: bool) -> Result<Option<usize>, TransportError> {
        loop {
            let have = &self.inbox[self.start..self.end];
            if let Some(i) = have.iter().position(|&b| b == b'\n') {
                let text = std::str::from_utf8(&have[..i]).map_err(|e| {
                    TransportError::Corrupt(format!("a line is not UTF-8 text: {e}"))
                })?;
                let n = TEXT.decode_slice(text, buf).map_err(|e| match e {
                    base64::DecodeSliceError::OutputSliceTooSmall => TransportError::TooLarge {
                        len: text.len() / 4 * 3,
                        max: buf.len(),
                    },
                    base64::DecodeSliceError::DecodeError(e) => {
                        TransportError::Corrupt(format!("a line is not a message's base64: {e}"))
                    }
                })?;
                self.start += i + 1;
                if self.start == self.end {
                    (self.start, self.end) = (0, 0);
                }
                return Ok(Some(n));
            }
            // Keep the partial line at the front, and read more after it.
            self.inbox.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
            if self.end == self.inbox.len() {
                return Err(TransportError::TooLarge {
                    len: self.end,
                    max: buf.len(),
                });
            }
            // A partial line is in flight: wait for its rest even when polling.
            let wait = wait || self.end > 0;
            match self.out.read_some(&mut self.inbox[self.end..], wait)? {
                Some(n) => self.end += n,
                None => return Ok(None),
            }
        }
    }
}

impl<S: Read + Write + Send> Endpoint for Lines<S> {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let encoded = base64::encoded_len(msg.len(), true).unwrap_or(0);
        line.resize(encoded, 0);
        let n = TEXT
            .encode_slice(msg, &mut line)
            .map_err(|e| TransportError::Corrupt(format!("encoding a line: {e}")))?;
        line.truncate(n);
        line.push(b'\n');
        let r = self.out.send(&line);
        self.line = line;
        r
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        self.out.flush()
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
}

impl DatagramIo for std::os::unix::net::UnixDatagram {
    fn send(&self, b: &[u8]) -> std::io::Result<usize> {
        sys::io_len(sys::write(self.as_raw_fd(), b))
    }
    fn recv(&self, b: &mut [u8]) -> std::io::Result<usize> {
        sys::io_len(sys::read(self.as_raw_fd(), b))
    }
}

/// A connected socket's waits as every socket end sets them: bounded by the timeout when
/// `timed` (nothing else watches the peer), non-blocking when the case polls.
pub(crate) fn set_waits(
    s: &impl std::os::fd::AsFd,
    spec: &ChannelSpec,
    timed: bool,
) -> std::io::Result<()> {
    let s = socket2::SockRef::from(s);
    if timed {
        s.set_read_timeout(Some(spec.timeout))?;
        s.set_write_timeout(Some(spec.timeout))?;
    }
    s.set_nonblocking(spec.poll)
}

/// A connected datagram socket's end (`accepted`: it answers a hello that comes again). Its
/// waits are always bounded: a datagram socket does not see its peer go.
pub(crate) fn datagram_endpoint<D: DatagramIo + std::os::fd::AsFd + 'static>(
    s: D,
    spec: &ChannelSpec,
    accepted: bool,
) -> EndpointResult {
    set_waits(&s, spec, true)?;
    Ok(Box::new(Datagrams::new(
        s,
        spec.timeout,
        spec.poll,
        accepted,
    )))
}

/// The datagrams both sides exchange while connecting; shorter than any message (under 4 B
/// could not be one), so a late duplicate is recognised and dropped.
pub const HELLO: &[u8] = b"hi";

/// A datagram socket that meets its peer by hello (udp, uds-dgram): the connecting end says
/// hello until the accepting end answers; the accepting end answers the first hello and from
/// then on talks only to whoever sent it.
pub(crate) trait Greeting: DatagramIo + std::os::fd::AsFd + Sized + 'static {
    /// A peer's address.
    type Peer: PartialEq;
    fn send_to(&self, b: &[u8], to: &Self::Peer) -> std::io::Result<usize>;
    /// A datagram and its sender, if the sender has an address one can answer.
    fn recv_from(&self, b: &mut [u8]) -> std::io::Result<(usize, Option<Self::Peer>)>;
    fn connect(&self, to: &Self::Peer) -> std::io::Result<()>;
}

impl Greeting for std::net::UdpSocket {
    type Peer = std::net::SocketAddr;
    fn send_to(&self, b: &[u8], to: &Self::Peer) -> std::io::Result<usize> {
        std::net::UdpSocket::send_to(self, b, to)
    }
    fn recv_from(&self, b: &mut [u8]) -> std::io::Result<(usize, Option<Self::Peer>)> {
        std::net::UdpSocket::recv_from(self, b).map(|(n, from)| (n, Some(from)))
    }
    fn connect(&self, to: &Self::Peer) -> std::io::Result<()> {
        std::net::UdpSocket::connect(self, to)
    }
}

impl Greeting for std::os::unix::net::UnixDatagram {
    type Peer = std::path::PathBuf;
    fn send_to(&self, b: &[u8], to: &Self::Peer) -> std::io::Result<usize> {
        std::os::unix::net::UnixDatagram::send_to(self, b, to)
    }
    fn recv_from(&self, b: &mut [u8]) -> std::io::Result<(usize, Option<Self::Peer>)> {
        std::os::unix::net::UnixDatagram::recv_from(self, b)
            .map(|(n, from)| (n, from.as_pathname().map(|p| p.to_path_buf())))
    }
    fn connect(&self, to: &Self::Peer) -> std::io::Result<()> {
        std::os::unix::net::UnixDatagram::connect(self, to)
    }
}

/// The connecting end: says hello to `server` until it answers from there (a hello may be
/// lost), within the timeout. `send_failed` says whether a failed hello ends the wait, and
/// with what error.
pub(crate) fn hello_connect<S: Greeting>(
    s: S,
    server: S::Peer,
    spec: &ChannelSpec,
    send_failed: impl Fn(std::io::Error) -> Option<TransportError>,
) -> EndpointResult {
    socket2::SockRef::from(&s).set_read_timeout(Some(Duration::from_millis(100)))?;
    let deadline = Deadline::after(spec.timeout);
    let mut buf = [0u8; 16];
    loop {
        if let Err(e) = s.send_to(HELLO, &server) {
            if let Some(e) = send_failed(e) {
                return Err(e);
            }
        }
        match s.recv_from(&mut buf) {
            Ok((n, from)) if buf[..n] == *HELLO && from.as_ref() == Some(&server) => {
                s.connect(&server)?;
                return datagram_endpoint(s, spec, false);
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => return Err(e.into()),
        }
        if deadline.expired() {
            return Err(TransportError::Timeout(spec.timeout));
        }
    }
}

/// The accepting end: answers the first hello, within the timeout, and talks only to its
/// sender from then on.
pub(crate) fn hello_accept<S: Greeting>(s: S, spec: &ChannelSpec) -> EndpointResult {
    socket2::SockRef::from(&s).set_read_timeout(Some(spec.timeout))?;
    let mut buf = [0u8; 16];
    loop {
        let (n, from) = s
            .recv_from(&mut buf)
            .map_err(|e| TransportError::from_io(e, spec.timeout))?;
        let Some(peer) = from.filter(|_| buf[..n] == *HELLO) else {
            continue;
        };
        s.connect(&peer)?;
        DatagramIo::send(&s, HELLO)?;
        return datagram_endpoint(s, spec, true);
    }
}

pub struct Datagrams<D> {
    io: D,
    timeout: Duration,
    nonblocking: bool,
    /// The accepting end answers a hello that comes again: its own answer was lost, and the
    /// connecting end waits for one.
    answer_hello: bool,
}

impl<D: DatagramIo> Datagrams<D> {
    pub fn new(io: D, timeout: Duration, nonblocking: bool, answer_hello: bool) -> Self {
        Datagrams {
            io,
            timeout,
            nonblocking,
            answer_hello,
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
                // Nothing of a datagram goes out when its send is interrupted: the runner's
                // stop (a send blocked behind a link that went down) ends it.
                Err(e) if e.kind() == ErrorKind::Interrupted => interrupted()?,
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

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        loop {
            match self.io.recv(buf) {
                Ok(n) if n < 4 && buf[..n] == *HELLO => {
                    if self.answer_hello {
                        let _ = self.io.send(HELLO);
                    }
                }
                Ok(n) if n >= 4 && declared_len(buf) > n && n == buf.len() => {
                    return Err(TransportError::TooLarge {
                        len: declared_len(buf),
                        max: buf.len(),
                    })
                }
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::Interrupted => interrupted()?,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(TransportError::from_io(e, self.timeout)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A byte stream whose reads return the scripted chunks (or errors), one per call; writes
    /// take at most `write_max` bytes a call, and the first `interrupted` are interrupted.
    struct Script {
        reads: VecDeque<std::io::Result<Vec<u8>>>,
        written: Vec<u8>,
        write_max: usize,
        interrupted: Vec<bool>,
    }

    impl Read for Script {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            match self.reads.pop_front() {
                None => Ok(0),
                Some(Err(e)) => Err(e),
                Some(Ok(chunk)) => {
                    assert!(chunk.len() <= b.len(), "script chunk larger than the read");
                    b[..chunk.len()].copy_from_slice(&chunk);
                    Ok(chunk.len())
                }
            }
        }
    }

    impl Write for Script {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if !self.interrupted.is_empty() && self.interrupted.remove(0) {
                return Err(ErrorKind::Interrupted.into());
            }
            let n = b.len().min(self.write_max);
            self.written.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn msg(len: usize, tag: u8) -> Vec<u8> {
        let mut m = vec![tag; len];
        m[..4].copy_from_slice(&(len as u32).to_le_bytes());
        m
    }

    fn framed(reads: Vec<std::io::Result<Vec<u8>>>, write_max: usize) -> Framed<Script> {
        let io = Script {
            reads: reads.into(),
            written: vec![],
            write_max,
            interrupted: vec![],
        };
        Framed::new(io, Duration::from_millis(100), false, 64)
    }

    #[test]
    fn splits_merged_and_joins_split_messages() {
        let (a, b, c) = (msg(10, 1), msg(20, 2), msg(30, 3));
        let merged = [&a[..], &b[..], &c[..6]].concat();
        let interrupted = std::io::Error::from(ErrorKind::Interrupted);
        let mut f = framed(
            vec![
                Ok(merged),
                Err(interrupted),
                Ok(c[6..7].to_vec()),
                Ok(c[7..].to_vec()),
                Ok(a[..3].to_vec()),
                Ok(a[3..].to_vec()),
            ],
            usize::MAX,
        );
        let mut buf = vec![0u8; 64];
        for want in [&a, &b, &c, &a] {
            let n = f.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &want[..]);
        }
        assert!(matches!(f.recv(&mut buf), Err(TransportError::PeerClosed)));

        // In a role process its runner told to stop, an interrupted read gives up at once
        // instead of waiting out its timeout again. (Here, not in a test of its own: the flag
        // is the process's, and the read above must be retried.)
        let told = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = crate::deadline::ROLE_STOP.get_or_init(|| told.clone());
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut f = framed(
            vec![
                Ok(a[..3].to_vec()),
                Err(std::io::Error::from(ErrorKind::Interrupted)),
                Ok(a[3..].to_vec()),
            ],
            usize::MAX,
        );
        let got = f.recv(&mut buf);
        // A write not begun is given up too; one begun is finished, never left half written.
        let mut w = framed(vec![], 8);
        w.io.interrupted = vec![true, false, true];
        let not_begun = w.send(&a);
        let begun = w.send(&a);
        flag.store(false, std::sync::atomic::Ordering::Relaxed);
        assert!(matches!(got, Err(TransportError::Stopped)), "{got:?}");
        assert!(
            matches!(not_begun, Err(TransportError::Stopped)),
            "{not_begun:?}"
        );
        assert!(begun.is_ok(), "{begun:?}");
        assert_eq!(
            w.io.written, a,
            "the begun message whole, nothing of the other"
        );
    }

    #[test]
    fn a_message_longer_than_the_buffer_is_refused() {
        let big = msg(40, 7);
        let mut f = framed(vec![Ok(big[..16].to_vec())], usize::MAX);
        let mut buf = vec![0u8; 16];
        assert!(matches!(
            f.recv(&mut buf),
            Err(TransportError::TooLarge { len: 40, max: 16 })
        ));
    }

    #[test]
    fn text_lines_carry_every_size_and_refuse_what_is_not_text() {
        // Messages of every length modulo 3 (base64 pads), sent into a stream that takes 5 B a
        // write, read back in chunks that cut lines anywhere.
        let msgs: Vec<Vec<u8>> = (32..44).map(|n| msg(n, n as u8)).collect();
        let mut w = Lines::new(framed(vec![], 5), 64);
        for m in &msgs {
            w.send(m).unwrap();
        }
        let wire = w.out.io.written.clone();
        assert_eq!(wire.iter().filter(|&&b| b == b'\n').count(), msgs.len());
        let reads = wire.chunks(7).map(|c| Ok(c.to_vec())).collect();
        let mut r = Lines::new(framed(reads, usize::MAX), 64);
        for m in &msgs {
            // A buffer of exactly the message's size is enough.
            let mut buf = vec![0u8; m.len()];
            let n = r.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &m[..]);
        }
        assert!(matches!(
            r.recv(&mut [0u8; 64]),
            Err(TransportError::PeerClosed)
        ));
        for bad in [&b"\xff\xfe\n"[..], b"not base64!\n"] {
            let mut r = Lines::new(framed(vec![Ok(bad.to_vec())], usize::MAX), 64);
            assert!(
                matches!(r.recv(&mut [0u8; 64]), Err(TransportError::Corrupt(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_short_write_is_finished() {
        let m = msg(50, 5);
        let mut f = framed(vec![], 7);
        f.send(&m).unwrap();
        assert_eq!(f.io.written, m);
    }
}
