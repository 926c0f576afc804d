//! `quic`: QUIC through quinn (TLS 1.3 by rustls with ring), over loopback or a host's
//! address: one connection per channel. The accepting end serves with a self-signed
//! certificate it makes as it opens, and reports its address with the certificate's SHA-256
//! fingerprint (`FINGERPRINT@ADDRESS`), which the connecting end pins: no authority, but the whole TLS 1.3 handshake.
//! Messages go on one bidirectional stream (reliable and in order, split by the length in
//! their first bytes as on TCP), or with `--opt datagrams=true` (what `--delivery best-effort`
//! picks) each in an unreliable QUIC datagram (RFC 9221), which fits one packet.
//!
//! quinn is asynchronous. A channel's accepting end that reads after each write or only reads
//! (a ping-pong's responder, a stream's reader, a subscriber) runs its connection on a runtime
//! of its own, which the role's thread runs while it waits in a call; the other ends (the
//! connecting end, which must send while it waits for the run to start; an end that may write
//! and then not read for a while) run on the process's shared runtime, whose worker sends what
//! they wrote (`transport/runtime.rs`). Cargo feature `quic`.

mod floor;

use super::runtime::Driver;
use super::{
    as_it_is, channel_of, copy_out, declared_len, host_of, host_setup, Capabilities, ChannelSpec,
    Deferred, DeliveryMap, Endpoint, Exchange, Floor, Listener, Opening, OptionSpec, Options,
    Rendezvous, Setup, SetupPlan, Side, Transport, TransportError,
};
use crate::delivery::{Delivery, Reliability, Setting};
use crate::transport::{EndpointResult, OpenResult};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

pub struct Quic;

/// The packet size a connection starts with (quinn's MTU discovery stops there too): it fits
/// a 1500-byte Ethernet MTU under IPv4 and IPv6, and loopback's.
const MTU: u16 = 1452;

/// The largest message one datagram carries at [`MTU`]: the packet less QUIC's short header
/// (flags, quinn's 8-byte connection id, a packet number of up to 4), the AEAD tag and the
/// DATAGRAM frame's bound (type and length, 9), as quinn counts them.
const DATAGRAM_MAX: usize = MTU as usize - 1 - 8 - 4 - 16 - 9;

/// Bytes of datagrams a connection queues to send, and to hand its reader (quinn's defaults).
const DATAGRAM_BUFFER: usize = 1 << 20;

/// The name the certificate carries and the client asks for; only its fingerprint is checked.
const SERVER_NAME: &str = "msgperf";

impl Transport for Quic {
    fn name(&self) -> &'static str {
        "quic"
    }
    fn about(&self) -> &'static str {
        "QUIC (quinn, TLS 1.3) over loopback UDP: a stream per channel, or unreliable datagrams (feature `quic`)"
    }
    fn note(&self) -> Option<&'static str> {
        Some("quic: a connection per channel (a copy per subscriber), TLS 1.3 with a certificate made per accepting end; its ends run on tokio")
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec {
                key: "datagrams",
                default: "false",
                about: "carry each message in an unreliable QUIC datagram (one packet, best-effort) instead of the channel's stream",
                values: &["true", "false"],
                check: None,
            },
            OptionSpec {
                key: "cc",
                default: "cubic",
                about: "the congestion controller",
                values: &["cubic", "newreno", "bbr"],
                check: None,
            },
        ]
    }
    fn capabilities(&self, options: &Options) -> Capabilities {
        let datagrams = datagrams(options);
        Capabilities {
            reliable: !datagrams,
            max_message_bytes: if datagrams { DATAGRAM_MAX } else { 64 << 20 },
            cross_process: true,
            cross_host: true,
            notices_closed_peer: true,
            connections: true,
            // quinn keeps each received stream chunk and datagram in a buffer of its own.
            allocates_per_message: true,
            exchange: Exchange::Both,
            ..Capabilities::default()
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let given = options.get("datagrams").map(String::as_str);
        let on = match (d.reliability, given) {
            (Some(Reliability::Reliable), Some("true")) => return Err("--delivery reliable needs quic's stream, but --opt datagrams=true was given: drop one of them".into()),
            (Some(Reliability::BestEffort), Some("false")) => return Err("--delivery best-effort is quic's datagrams, but --opt datagrams=false was given: drop one of them".into()),
            (Some(Reliability::BestEffort), _) => true,
            (_, g) => g == Some("true"),
        };
        let mut with = options.clone();
        with.insert("datagrams".into(), on.to_string());
        let mut m = as_it_is(self.name(), &self.capabilities(&with), d)?;
        m.settings.insert(
            0,
            if on {
                Setting::new("carried in", "datagrams", "an unreliable QUIC datagram per message (RFC 9221): a full receive buffer or a lost packet drops it, counted")
            } else {
                Setting::new("carried in", "a stream", "one bidirectional stream per channel: retransmitted, in order; flow control makes the writer wait")
            },
        );
        if on && given.is_none() {
            m.options.insert("datagrams".into(), "true".into());
        }
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        Ok(host_setup(self.name(), plan))
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        let (_, accept) = channel_of(self.name(), side)?;
        // An accepting end that reads before it writes, and reads after it writes, runs its
        // connection itself. A connecting end cannot: what it writes last in its finish (the
        // handshake's end, the stream's first byte) must go out while it waits for the run to
        // start, which the shared runtime's worker sends.
        let driver = Driver::new(accept && spec.exchange != Exchange::Both)?;
        if !accept {
            return Deferred::later(move |at: &Rendezvous, spec: &ChannelSpec| {
                connect(driver, at.bound_at(side)?, host_of(at)?, spec)
            });
        }
        let host = host_of(at)?;
        let socket = super::bind_on_host(host, std::net::UdpSocket::bind)?;
        let address = socket.local_addr()?;
        let (config, fingerprint) = server_config(spec)?;
        let endpoint = endpoint(&driver, Some(config), socket)?;
        Ok(Box::new(QuicAccept {
            driver,
            endpoint,
            address: format!("{fingerprint}@{address}"),
        }))
    }

    fn listen(
        &self,
        backlog: u32,
        spec: &ChannelSpec,
    ) -> Result<Box<dyn Listener>, TransportError> {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let address = socket.local_addr()?;
        let (mut config, fingerprint) = server_config(spec)?;
        // No kernel backlog: quinn holds this many connection attempts not yet accepted.
        config.max_incoming(backlog.max(1) as usize);
        Ok(Box::new(QuicListen {
            endpoint: endpoint(&Driver::Shared, Some(config), socket)?,
            bound: format!("{fingerprint}@{address}"),
        }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::QuicFloor)
    }
}

/// Whether these options carry messages in datagrams.
fn datagrams(options: &Options) -> bool {
    options.get("datagrams").is_some_and(|v| v == "true")
}

/// A quinn endpoint on `socket`, its I/O on `driver`'s runtime; a server if `server` is given.
fn endpoint(
    driver: &Driver,
    server: Option<quinn::ServerConfig>,
    socket: std::net::UdpSocket,
) -> Result<quinn::Endpoint, TransportError> {
    let _in_runtime = driver.handle().enter();
    Ok(quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        server,
        socket,
        Arc::new(quinn::TokioRuntime),
    )?)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls(what: &str, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> TransportError {
    TransportError::middleware("rustls", what, e)
}

/// A server's configuration with a fresh self-signed certificate, and that certificate's
/// SHA-256 fingerprint in hex (what a client pins).
fn server_config(spec: &ChannelSpec) -> Result<(quinn::ServerConfig, String), TransportError> {
    let made = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
        .map_err(|e| TransportError::middleware("rcgen", "making a certificate", e))?;
    let cert = made.cert.der().clone();
    let fingerprint = hex(&sha256(&cert));
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls("configuring a server", e))?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key.into())
        .map_err(|e| tls("configuring a server", e))?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(config)
        .map_err(|e| tls("configuring a server", e))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(transport_config(spec)?);
    Ok((server, fingerprint))
}

/// A client's configuration that trusts the one certificate with `fingerprint`.
fn client_config(
    fingerprint: &str,
    spec: &ChannelSpec,
) -> Result<quinn::ClientConfig, TransportError> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls("configuring a client", e))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            fingerprint: fingerprint.to_string(),
            provider: provider(),
        }))
        .with_no_client_auth();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(config)
        .map_err(|e| tls("configuring a client", e))?;
    let mut client = quinn::ClientConfig::new(Arc::new(crypto));
    client.transport_config(transport_config(spec)?);
    Ok(client)
}

/// What both sides of a connection set: a peer that dies is noticed within the timeout, one
/// that lives keeps the connection open while idle.
fn transport_config(spec: &ChannelSpec) -> Result<Arc<quinn::TransportConfig>, TransportError> {
    let mut t = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(spec.timeout).map_err(|e| {
        TransportError::middleware("quinn", format!("an idle timeout of {:?}", spec.timeout), e)
    })?;
    t.max_idle_timeout(Some(idle))
        .keep_alive_interval(Some(spec.timeout / 3))
        .initial_mtu(MTU)
        .datagram_receive_buffer_size(Some(DATAGRAM_BUFFER))
        .datagram_send_buffer_size(DATAGRAM_BUFFER);
    match spec.option("cc") {
        Some("newreno") => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()))
        }
        Some("bbr") => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()))
        }
        _ => t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default())),
    };
    Ok(Arc::new(t))
}

fn sha256(data: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Trusts the one certificate whose SHA-256 fingerprint it holds (a self-signed one, made by
/// the accepting end for this run); the handshake's signatures are still checked with it.
#[derive(Debug)]
struct Pinned {
    fingerprint: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if hex(&sha256(end_entity)) == self.fingerprint {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The address and fingerprint an accepting end reported (`FINGERPRINT@ADDRESS`), split.
fn parse_bound(bound: &str) -> Result<(std::net::SocketAddr, &str), TransportError> {
    let (fingerprint, address) = bound.split_once('@').ok_or_else(|| {
        TransportError::Unsupported(format!(
            "quic: `{bound}` is not a certificate fingerprint and an address (FINGERPRINT@ADDRESS)"
        ))
    })?;
    Ok((super::resolve(address)?, fingerprint))
}

/// What a connection's failure means to the role: its peer went away, or it waited too long.
fn lost(e: quinn::ConnectionError, timeout: Duration) -> TransportError {
    use quinn::ConnectionError as C;
    match e {
        C::TimedOut => TransportError::Timeout(timeout),
        C::ApplicationClosed(_) | C::ConnectionClosed(_) | C::Reset | C::LocallyClosed => {
            TransportError::PeerClosed
        }
        other => TransportError::middleware("quinn", "the connection", other),
    }
}

fn read_error(e: quinn::ReadError, timeout: Duration) -> TransportError {
    match e {
        quinn::ReadError::ConnectionLost(c) => lost(c, timeout),
        quinn::ReadError::Reset(_) | quinn::ReadError::ClosedStream => TransportError::PeerClosed,
        other => TransportError::middleware("quinn", "a read", other),
    }
}

fn read_exact_error(e: quinn::ReadExactError, timeout: Duration) -> TransportError {
    match e {
        quinn::ReadExactError::FinishedEarly(_) => TransportError::PeerClosed,
        quinn::ReadExactError::ReadError(e) => read_error(e, timeout),
    }
}

fn write_error(e: quinn::WriteError, timeout: Duration) -> TransportError {
    match e {
        quinn::WriteError::ConnectionLost(c) => lost(c, timeout),
        quinn::WriteError::Stopped(_) | quinn::WriteError::ClosedStream => {
            TransportError::PeerClosed
        }
        other => TransportError::middleware("quinn", "a write", other),
    }
}

/// Connects to the accepting end that reported `bound`, from `host` (this role's address).
fn connect(driver: Driver, bound: &str, host: &str, spec: &ChannelSpec) -> EndpointResult {
    let (server, fingerprint) = parse_bound(bound)?;
    let socket = std::net::UdpSocket::bind(super::local_towards(host, server))?;
    let endpoint = endpoint(&driver, None, socket)?;
    let (conn, stream) = handshake_out(&driver, &endpoint, server, fingerprint, spec)?;
    QuicEnd::boxed(driver, endpoint, conn, stream, spec)
}

/// A connection and, unless messages go in datagrams, its stream.
type Joined = (
    quinn::Connection,
    Option<(quinn::SendStream, quinn::RecvStream)>,
);

/// The connecting side of a channel (the adapter's and the floor's): the handshake with the
/// server at `server` whose certificate has `fingerprint`, then the stream, opened with a
/// hello (the accepting end sees a stream once something arrives on it); within the timeout.
fn handshake_out(
    driver: &Driver,
    endpoint: &quinn::Endpoint,
    server: std::net::SocketAddr,
    fingerprint: &str,
    spec: &ChannelSpec,
) -> Result<Joined, TransportError> {
    let connecting = {
        let _in_runtime = driver.handle().enter();
        endpoint.connect_with(client_config(fingerprint, spec)?, server, SERVER_NAME)
    }
    .map_err(|e| TransportError::middleware("quinn", format!("connecting to {server}"), e))?;
    let timeout = spec.timeout;
    let on_stream = !datagrams(&spec.options);
    driver.run(Some(timeout), async {
        let conn = connecting.await.map_err(|e| lost(e, timeout))?;
        let stream = if on_stream {
            let (mut send, recv) = conn.open_bi().await.map_err(|e| lost(e, timeout))?;
            send.write_all(&[HELLO])
                .await
                .map_err(|e| write_error(e, timeout))?;
            Some((send, recv))
        } else {
            None
        };
        Ok((conn, stream))
    })?
}

/// The accepting side of the connection `incoming` starts (the adapter's and the floor's):
/// its handshake, then the connecting end's stream and its hello (datagrams: the handshake
/// alone); within the timeout.
fn handshake_in(
    driver: &Driver,
    incoming: quinn::Incoming,
    spec: &ChannelSpec,
) -> Result<Joined, TransportError> {
    let timeout = spec.timeout;
    let on_stream = !datagrams(&spec.options);
    driver.run(Some(timeout), async {
        let conn = incoming.await.map_err(|e| lost(e, timeout))?;
        let stream = if on_stream {
            let (send, mut recv) = conn.accept_bi().await.map_err(|e| lost(e, timeout))?;
            let mut hello = [0u8; 1];
            recv.read_exact(&mut hello)
                .await
                .map_err(|e| read_exact_error(e, timeout))?;
            if hello[0] != HELLO {
                return Err(TransportError::Corrupt(format!(
                    "quic: the connecting end began with byte {:#x}, not its hello",
                    hello[0]
                )));
            }
            Some((send, recv))
        } else {
            None
        };
        Ok((conn, stream))
    })?
}

/// The byte a connecting end writes first on its stream, read by the accepting end's finish.
const HELLO: u8 = 0x51;

/// A channel's accepting end: a quinn server on a port the kernel chose.
struct QuicAccept {
    driver: Driver,
    endpoint: quinn::Endpoint,
    address: String,
}

impl Opening for QuicAccept {
    fn address(&self) -> Option<String> {
        Some(self.address.clone())
    }

    fn finish(self: Box<Self>, _: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let QuicAccept {
            driver, endpoint, ..
        } = *self;
        let timeout = spec.timeout;
        let incoming = driver
            .run(Some(timeout), endpoint.accept())?
            .ok_or(TransportError::PeerClosed)?;
        // The channel has its one connection: nobody else is let in.
        endpoint.set_server_config(None);
        accepted(driver, endpoint, incoming, spec)
    }
}

/// The end that `incoming` becomes once it has joined.
fn accepted(
    driver: Driver,
    endpoint: quinn::Endpoint,
    incoming: quinn::Incoming,
    spec: &ChannelSpec,
) -> EndpointResult {
    let (conn, stream) = handshake_in(&driver, incoming, spec)?;
    QuicEnd::boxed(driver, endpoint, conn, stream, spec)
}

/// Many connections to one server endpoint on loopback (the `connect` workload): each
/// accepted connection and each client is an end on the shared runtime, a client with a UDP
/// socket of its own.
struct QuicListen {
    endpoint: quinn::Endpoint,
    /// Where clients connect: `FINGERPRINT@ADDRESS`.
    bound: String,
}

impl Listener for QuicListen {
    fn accept(
        &self,
        wait: Duration,
        spec: &ChannelSpec,
    ) -> Result<Option<Box<dyn Endpoint>>, TransportError> {
        let incoming = match Driver::Shared.run(Some(wait), self.endpoint.accept()) {
            Err(TransportError::Timeout(_)) => return Ok(None),
            r => r?.ok_or(TransportError::PeerClosed)?,
        };
        accepted(Driver::Shared, self.endpoint.clone(), incoming, spec).map(Some)
    }

    fn connect(&self, spec: &ChannelSpec) -> EndpointResult {
        connect(Driver::Shared, &self.bound, "127.0.0.1", spec)
    }
}

/// One end of a channel: a connection and its stream, or its datagrams.
struct QuicEnd {
    driver: Driver,
    /// Bound on a call: none for an end msgperf watches (it ends a peer that stops), as
    /// stream sockets skip their timers.
    bound: Option<Duration>,
    timeout: Duration,
    conn: quinn::Connection,
    /// The channel's stream; None: messages go in datagrams.
    stream: Option<(quinn::SendStream, quinn::RecvStream)>,
    /// What the datagram send queue's free space reads when nothing is queued: quinn counts
    /// its own bookkeeping in it, so an empty queue is not `DATAGRAM_BUFFER`.
    datagrams_idle: usize,
    /// Bytes a non-blocking read took past the messages it returned, from `start`.
    pending: Vec<u8>,
    start: usize,
    /// Held so that its socket and I/O outlive the connection.
    _endpoint: quinn::Endpoint,
}

impl QuicEnd {
    fn boxed(
        driver: Driver,
        endpoint: quinn::Endpoint,
        conn: quinn::Connection,
        stream: Option<(quinn::SendStream, quinn::RecvStream)>,
        spec: &ChannelSpec,
    ) -> EndpointResult {
        Ok(Box::new(QuicEnd {
            driver,
            bound: (!spec.watched).then_some(spec.timeout),
            timeout: spec.timeout,
            // Just joined: no datagram is queued yet.
            datagrams_idle: conn.datagram_send_buffer_space(),
            conn,
            stream,
            pending: Vec::new(),
            start: 0,
            _endpoint: endpoint,
        }))
    }

    /// A whole message out of `pending`, if it holds one.
    fn take_pending(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let held = &self.pending[self.start..];
        if held.len() < 4 {
            return Ok(None);
        }
        let len = declared_len(held);
        if len < 4 {
            return Err(TransportError::Corrupt(format!(
                "a message declares {len} B, less than its length field"
            )));
        }
        if held.len() < len {
            return Ok(None);
        }
        let n = copy_out(&held[..len], buf)?;
        self.start += len;
        if self.start == self.pending.len() {
            self.pending.clear();
            self.start = 0;
        }
        Ok(Some(n))
    }

    /// Adds what the stream holds to `pending`: waits for it (`now` false) or takes only what
    /// is there; false if nothing was.
    fn fill(&mut self, now: bool) -> Result<bool, TransportError> {
        let Some((_, recv)) = self.stream.as_mut() else {
            return Ok(false);
        };
        let read = recv.read_chunk(usize::MAX, true);
        let got = if now {
            match self.driver.now(read) {
                Some(r) => r,
                None => return Ok(false),
            }
        } else {
            self.driver.run(self.bound, read)?
        };
        match got.map_err(|e| read_error(e, self.timeout))? {
            Some(chunk) => {
                self.pending.extend_from_slice(&chunk.bytes);
                Ok(true)
            }
            None => Err(TransportError::PeerClosed),
        }
    }

    /// Waits until the datagrams queued to send have gone out, at most `bound`.
    fn drain_datagrams(&self, bound: Duration) -> Result<(), TransportError> {
        let conn = &self.conn;
        let queued = || conn.datagram_send_buffer_space() < self.datagrams_idle;
        self.driver.run(Some(bound), async {
            while queued() && conn.close_reason().is_none() {
                tokio::time::sleep(Duration::from_micros(100)).await;
            }
        })
    }
}

/// Reads one message from `recv` into `buf`: its length field, then the rest.
async fn read_message(
    recv: &mut quinn::RecvStream,
    buf: &mut [u8],
    timeout: Duration,
) -> Result<usize, TransportError> {
    let max = buf.len();
    let Some(head) = buf.get_mut(..4) else {
        return Err(TransportError::TooLarge { len: 4, max });
    };
    recv.read_exact(head)
        .await
        .map_err(|e| read_exact_error(e, timeout))?;
    let len = declared_len(buf);
    if len < 4 {
        return Err(TransportError::Corrupt(format!(
            "a message declares {len} B, less than its length field"
        )));
    }
    if len > max {
        return Err(TransportError::TooLarge { len, max });
    }
    recv.read_exact(&mut buf[4..len])
        .await
        .map_err(|e| read_exact_error(e, timeout))?;
    Ok(len)
}

impl Endpoint for QuicEnd {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let timeout = self.timeout;
        match self.stream.as_mut() {
            Some((send, _)) => self
                .driver
                .run(self.bound, send.write_all(msg))?
                .map_err(|e| write_error(e, timeout)),
            None => {
                let max = self.conn.max_datagram_size().unwrap_or(0);
                if msg.len() > max {
                    return Err(TransportError::TooLarge {
                        len: msg.len(),
                        max,
                    });
                }
                // A full send queue makes the writer wait, as a full UDP socket buffer does.
                let data = Bytes::copy_from_slice(msg);
                match self
                    .driver
                    .run(self.bound, self.conn.send_datagram_wait(data))?
                {
                    Ok(()) => Ok(()),
                    Err(quinn::SendDatagramError::ConnectionLost(c)) => Err(lost(c, timeout)),
                    Err(e) => Err(TransportError::middleware("quinn", "sending a datagram", e)),
                }
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        let timeout = self.timeout;
        match self.stream.as_mut() {
            Some((_, recv)) if self.pending.is_empty() => self
                .driver
                .run(self.bound, read_message(recv, buf, timeout))?,
            Some(_) => loop {
                if let Some(n) = self.take_pending(buf)? {
                    return Ok(n);
                }
                self.fill(false)?;
            },
            None => {
                let d = self
                    .driver
                    .run(self.bound, self.conn.read_datagram())?
                    .map_err(|e| lost(e, timeout))?;
                copy_out(&d, buf)
            }
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        if self.stream.is_none() {
            return match self.driver.now(self.conn.read_datagram()) {
                None => Ok(None),
                Some(d) => copy_out(&d.map_err(|e| lost(e, self.timeout))?, buf).map(Some),
            };
        }
        loop {
            if let Some(n) = self.take_pending(buf)? {
                return Ok(Some(n));
            }
            if !self.fill(true)? {
                return Ok(None);
            }
        }
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        if self.stream.is_none() {
            self.drain_datagrams(self.timeout)?;
        }
        Ok(())
    }
}

impl Drop for QuicEnd {
    fn drop(&mut self) {
        // What was written reaches the peer before the connection closes: the stream ends and
        // its data is acknowledged (received; a closed connection's peer still reads what it
        // holds), or the queued datagrams leave. A dead peer is waited for at most a second.
        let grace = self.timeout.min(Duration::from_secs(1));
        match self.stream.as_mut() {
            Some((send, _)) => {
                if send.finish().is_ok() {
                    let _ = self.driver.run(Some(grace), send.stopped());
                }
            }
            None => {
                let _ = self.drain_datagrams(grace);
            }
        }
        self.conn.close(0u32.into(), b"done");
        // On the end's own runtime the close goes out only while the runtime runs.
        let _ = self.driver.now(std::future::pending::<()>());
    }
}

#[cfg(test)]
mod pinning {
    use super::*;

    /// A channel's spec: messages on its stream, or in datagrams.
    fn spec(in_datagrams: bool) -> ChannelSpec {
        let mut given = Options::new();
        given.insert("datagrams".into(), in_datagrams.to_string());
        ChannelSpec {
            options: super::super::effective_options(&Quic, &given),
            timeout: Duration::from_secs(10),
            poll: false,
            max_message: 1024,
            watched: false,
            exchange: Exchange::Alternate,
        }
    }

    /// A channel whose connecting end is told `fingerprint` (None: the one its accepting end
    /// reported): both ends' outcomes.
    type Opened = EndpointResult;

    fn channel(fingerprint: Option<&str>, spec: ChannelSpec) -> (Opened, Opened) {
        let setup = Quic.setup(&SetupPlan::default(), &spec).unwrap();
        let mut at = setup.rendezvous.clone();
        let accepting = Quic.open(&at, Side::Accept(0), &spec).unwrap();
        let bound = accepting.address().unwrap();
        let (reported, address) = bound.split_once('@').unwrap();
        at.bound.insert(
            Side::Connect(0).meeting(),
            format!("{}@{address}", fingerprint.unwrap_or(reported)),
        );
        let (server_at, server_spec) = (at.clone(), spec.clone());
        let server = std::thread::spawn(move || accepting.finish(&server_at, &server_spec));
        let client = Quic
            .open(&at, Side::Connect(0), &spec)
            .unwrap()
            .finish(&at, &spec);
        // A refused client leaves its server waiting: closing the client ends it.
        (client, server.join().unwrap())
    }

    #[test]
    fn a_client_trusts_only_the_certificate_its_server_reported() {
        let wrong = "00".repeat(32);
        let (client, _) = channel(Some(&wrong), spec(false));
        let err = client
            .err()
            .expect("a wrong fingerprint is refused")
            .to_string();
        assert!(err.contains("certificate"), "{err}");

        let (client, server) = channel(None, spec(false));
        let (mut client, mut server) = (client.unwrap(), server.unwrap());
        // The accepting end echoes; its answer goes out as it waits for the next message.
        let echo = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1024];
            let n = server.recv(&mut buf)?;
            server.send(&buf[..n])?;
            server.recv(&mut buf)
        });
        let mut msg = vec![9u8; 100];
        msg[..4].copy_from_slice(&100u32.to_le_bytes());
        client.send(&msg).unwrap();
        let mut buf = vec![0u8; 1024];
        assert_eq!(client.recv(&mut buf).unwrap(), 100);
        assert_eq!(buf[..100], msg[..]);
        drop(client);
        assert!(matches!(
            echo.join().unwrap(),
            Err(TransportError::PeerClosed)
        ));
    }

    #[test]
    fn a_datagram_end_flushes_once_what_it_queued_has_left() {
        let (client, server) = channel(None, spec(true));
        let (mut client, mut server) = (client.unwrap(), server.unwrap());
        // The reader runs its connection (and acknowledges) while it waits in a read.
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1024];
            let mut got = 0;
            while server.recv(&mut buf)? == 1000 {
                got += 1;
                if buf[999] == 1 {
                    break;
                }
            }
            // Its end stays open (returned) until the writer's flush has been judged.
            Ok::<_, TransportError>((got, server))
        });
        let mut msg = vec![7u8; 1000];
        msg[..4].copy_from_slice(&1000u32.to_le_bytes());
        for last in (0..100).map(|i| i == 99) {
            msg[999] = last as u8;
            client.send(&msg).unwrap();
        }
        // An empty queue's free space is not the whole buffer (quinn counts its bookkeeping
        // in it): a flush that waited for the whole buffer timed out here, 10 s later.
        client.flush().unwrap();
        let (got, _server) = reader.join().unwrap().expect("the last message arrives");
        assert!((1..=100).contains(&got), "{got}");
    }
}
