//! `grpc`: gRPC through `tonic` and `prost` (service in `msgperf.proto`, compiled at build time
//! by protox: no system `protoc`). The accepting end of a channel, and a topic's writer, serve
//! on a free loopback port; the other end is a client. The call follows what the workload moves
//! on the channel ([`ChannelSpec::exchange`]): a unary call per round trip (pingpong), a client
//! stream (a stream), a bidirectional stream (both ways at once, `--confirm`), and a server
//! stream per subscriber (pubsub: the publisher's one write reaches every subscriber's stream).
//!
//! tonic is asynchronous: it runs on the process's runtime (`transport/runtime.rs`), but for a
//! stream's reader and a ping-pong's responder, whose server runs on a runtime of its own that
//! the role's thread runs while it waits for a message: a message then reaches the role with no
//! hand-off between threads (wake-ups, and on one CPU context switches). The responder's answer
//! goes out as it waits for the next request, which it does at once. Other ends, which write
//! and may then not read, cannot: what they write would wait for their next call. Cargo feature
//! `grpc`.

mod floor;

pub(super) mod proto {
    tonic::include_proto!("msgperf");
}

use super::{
    as_it_is, host_of, host_setup, reads_in_place, Capabilities, ChannelSpec, DeliveryMap,
    Endpoint, Exchange, Floor, Opening, Options, Rendezvous, Setup, SetupPlan, Side, Take,
    Transport, TransportError,
};
use crate::deadline::Deadline;
use crate::delivery::Delivery;
use crate::transport::{EndpointResult, OpenResult};
use bytes::Bytes;
use proto::bench_client::BenchClient;
use proto::bench_server::{Bench, BenchServer};
use proto::{Done, Frame, Hello};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

pub struct Grpc;

/// Messages a stream's queue holds between a role and tonic, each way.
const QUEUE: usize = 64;

pub(super) use super::runtime::{runtime, wait, Local};

impl Transport for Grpc {
    fn name(&self) -> &'static str {
        "grpc"
    }
    fn about(&self) -> &'static str {
        "gRPC (tonic, HTTP/2 over loopback TCP): unary calls, client, bidirectional and server streams (feature `grpc`)"
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: true,
            max_message_bytes: 64 << 20,
            cross_process: true,
            cross_host: true,
            // The publisher's one write goes to each subscriber's server stream.
            native_fan_out: 1024,
            allocates_per_message: true,
            reads_in_place: true,
            exchange: Exchange::Both,
            ..Capabilities::default()
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let mut m = as_it_is(self.name(), &self.capabilities(options), d)?;
        m.settings.insert(
            0,
            crate::delivery::Setting::new(
                "flow control",
                "HTTP/2",
                "a full stream window or queue makes the writer wait: nothing is dropped",
            ),
        );
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        Ok(host_setup(self.name(), plan))
    }

    fn open(&self, at: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        match side {
            Side::Accept(_) | Side::Publish { .. } => {
                // A stream's reader only reads, and a responder reads as soon as it has
                // answered: their roles' threads can run their connections.
                let own = matches!(side, Side::Accept(_)) && spec.exchange != Exchange::Both;
                let server = Server::start(host_of(at)?, spec, own)?;
                Ok(Box::new(GrpcOpening {
                    side,
                    server: Some(server),
                }))
            }
            Side::Connect(_) | Side::Subscribe { .. } => {
                Ok(Box::new(GrpcOpening { side, server: None }))
            }
        }
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::GrpcFloor)
    }
}

/// What a client sent to the server's end.
enum Incoming {
    /// A unary call's request, and where its reply goes.
    Request(Bytes, oneshot::Sender<Bytes>),
    Message(Bytes),
    /// A client stream, read by the end's role where tonic decodes it (no queue between them);
    /// the call returns when the sender is dropped.
    Stream(Streaming<Frame>, oneshot::Sender<()>),
}

type Outgoing = mpsc::Sender<Result<Frame, Status>>;
type OutgoingQueue = mpsc::Receiver<Result<Frame, Status>>;

/// The service a serving end runs: it hands what clients send to the end's role, and streams
/// what the role writes.
#[derive(Clone)]
struct Service {
    inbound: mpsc::Sender<Incoming>,
    /// A bidirectional stream's way back (taken by the one client of a channel).
    outbound: Arc<Mutex<Option<OutgoingQueue>>>,
    /// Each subscriber's server stream (a topic's writer).
    subscribers: Arc<Mutex<Vec<Outgoing>>>,
}

fn gone() -> Status {
    Status::unavailable("msgperf's role at this end is gone")
}

#[tonic::async_trait]
impl Bench for Service {
    async fn call(&self, req: Request<Frame>) -> Result<Response<Frame>, Status> {
        let (tx, rx) = oneshot::channel();
        self.inbound
            .send(Incoming::Request(req.into_inner().data, tx))
            .await
            .map_err(|_| gone())?;
        let data = rx.await.map_err(|_| Status::cancelled("no reply"))?;
        Ok(Response::new(Frame { data }))
    }

    async fn push(&self, req: Request<Streaming<Frame>>) -> Result<Response<Done>, Status> {
        let (done, ended) = oneshot::channel();
        self.inbound
            .send(Incoming::Stream(req.into_inner(), done))
            .await
            .map_err(|_| gone())?;
        let _ = ended.await;
        Ok(Response::new(Done {}))
    }

    type ExchangeStream = ReceiverStream<Result<Frame, Status>>;

    async fn exchange(
        &self,
        req: Request<Streaming<Frame>>,
    ) -> Result<Response<Self::ExchangeStream>, Status> {
        let back = self
            .outbound
            .lock()
            .unwrap()
            .take()
            .ok_or_else(|| Status::already_exists("this channel has its stream already"))?;
        let inbound = self.inbound.clone();
        let mut s = req.into_inner();
        tokio::spawn(async move {
            while let Ok(Some(f)) = s.message().await {
                if inbound.send(Incoming::Message(f.data)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(back)))
    }

    type SubscribeStream = ReceiverStream<Result<Frame, Status>>;

    async fn subscribe(
        &self,
        _: Request<Hello>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let (tx, rx) = mpsc::channel(QUEUE);
        self.subscribers.lock().unwrap().push(tx);
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// A serving end: tonic's server on a port of its own, and the role's side of the service.
struct Server {
    address: String,
    inbound: mpsc::Receiver<Incoming>,
    /// The client stream this end reads, once its call came (see [`Incoming::Stream`]).
    stream: Option<(Streaming<Frame>, oneshot::Sender<()>)>,
    outbound: Outgoing,
    subscribers: Arc<Mutex<Vec<Outgoing>>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The runtime of this end's own that its connections run on, driven by the role's thread
    /// while it waits for a message; else they run on the process's shared runtime.
    own: Option<Local>,
}

/// `f`'s output, waited for at most `timeout` on the runtime that an end's connections run on:
/// its own, which this thread then runs, or the shared one.
pub(super) fn wait_on<T>(
    own: Option<&Local>,
    timeout: Duration,
    f: impl std::future::Future<Output = T>,
) -> Result<T, TransportError> {
    match own {
        Some(own) => own.wait(timeout, f),
        None => wait(timeout, f),
    }
}

impl Server {
    fn start(host: &str, spec: &ChannelSpec, own: bool) -> Result<Server, TransportError> {
        let listener = super::bind_on_host(host, std::net::TcpListener::bind)?;
        let address = listener.local_addr()?.to_string();
        let (in_tx, inbound) = mpsc::channel(QUEUE);
        let (outbound, out_rx) = mpsc::channel(QUEUE);
        let subscribers = Arc::new(Mutex::new(Vec::new()));
        let service = Service {
            inbound: in_tx,
            outbound: Arc::new(Mutex::new(Some(out_rx))),
            subscribers: subscribers.clone(),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let own = if own { Some(Local::new()?) } else { None };
        let task = serve(own.as_ref(), listener, service, spec.max_message, stopped)?;
        Ok(Server {
            address,
            inbound,
            stream: None,
            outbound,
            subscribers,
            stop: Some(stop),
            task: Some(task),
            own,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A client stream's call returns, and calls still waiting on this end (an END's unary
        // call) end with an error now.
        self.stream.take();
        self.inbound.close();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = wait_on(self.own.as_ref(), Duration::from_secs(1), task);
        }
    }
}

/// Serves `service` on `listener` until `stopped`, on an end's own runtime or the shared one,
/// for messages up to `max_message` bytes.
pub(super) fn serve<S: Bench>(
    own: Option<&Local>,
    listener: std::net::TcpListener,
    service: S,
    max_message: usize,
    stopped: oneshot::Receiver<()>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let rt = own.map_or_else(|| runtime().handle(), Local::handle);
    listener.set_nonblocking(true)?;
    let listener = {
        let _in_runtime = rt.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    let max = max_message + 1024;
    let serve = async move {
        let _ = tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .add_service(
                BenchServer::new(service)
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .serve_with_incoming_shutdown(incoming(listener), async {
                let _ = stopped.await;
            })
            .await;
    };
    Ok(rt.spawn(serve))
}

/// Accepted connections, with TCP_NODELAY (the server builder sets it only on connections it
/// accepts itself): without it a 4 KiB reply waits out a delayed acknowledgement (40 ms).
fn incoming(
    listener: tokio::net::TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    TcpListenerStream::new(listener).map(|s| {
        let s = s?;
        s.set_nodelay(true)?;
        Ok(s)
    })
}

struct GrpcOpening {
    side: Side,
    server: Option<Server>,
}

impl Opening for GrpcOpening {
    fn address(&self) -> Option<String> {
        self.server.as_ref().map(|s| s.address.clone())
    }

    fn finish(self: Box<Self>, at: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let GrpcOpening { side, server } = *self;
        let timeout = spec.timeout;
        if let Some(server) = server {
            if let Side::Publish { readers, .. } = side {
                // Every subscriber's stream is open before anything is written.
                let deadline = Deadline::after(timeout);
                while (server.subscribers.lock().unwrap().len() as u32) < readers {
                    if deadline.expired() {
                        return Err(TransportError::Timeout(timeout));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            return Ok(Box::new(GrpcEndpoint {
                timeout,
                watched: spec.watched,
                server: Some(server),
                reply: None,
                client: None,
            }));
        }
        let to = at.bound_at(side)?.to_string();
        let client = connect(&to, spec)?;
        let client = match side {
            Side::Subscribe { reader, .. } => {
                let mut c = client;
                let r = wait(timeout, c.subscribe(Hello { reader }))?.map_err(status)?;
                ClientEnd::Streams {
                    out: None,
                    inbound: r.into_inner(),
                }
            }
            _ => match spec.exchange {
                Exchange::Alternate => ClientEnd::Unary {
                    client,
                    pending: None,
                },
                Exchange::OneWay => {
                    let (tx, rx) = mpsc::channel(QUEUE);
                    let mut c = client;
                    let call =
                        runtime().spawn(async move { c.push(ReceiverStream::new(rx)).await });
                    ClientEnd::Push { out: tx, call }
                }
                Exchange::Both => {
                    let (tx, rx) = mpsc::channel(QUEUE);
                    let mut c = client;
                    let r = wait(timeout, c.exchange(ReceiverStream::new(rx)))?.map_err(status)?;
                    ClientEnd::Streams {
                        out: Some(tx),
                        inbound: r.into_inner(),
                    }
                }
            },
        };
        Ok(Box::new(GrpcEndpoint {
            timeout,
            watched: spec.watched,
            server: None,
            reply: None,
            client: Some(client),
        }))
    }
}

/// A client of the service at `address`, connected.
pub(super) fn connect(
    address: &str,
    spec: &ChannelSpec,
) -> Result<BenchClient<Channel>, TransportError> {
    let url = format!("http://{address}");
    let endpoint = tonic::transport::Endpoint::from_shared(url.clone())
        .map_err(|e| TransportError::middleware("tonic", format!("connecting to {url}"), e))?
        .tcp_nodelay(true)
        .connect_timeout(spec.timeout);
    let channel = wait(spec.timeout, endpoint.connect())?
        .map_err(|e| TransportError::Refused(format!("{url} ({e})")))?;
    let max = spec.max_message + 1024;
    Ok(BenchClient::new(channel)
        .max_decoding_message_size(max)
        .max_encoding_message_size(max))
}

fn status(s: Status) -> TransportError {
    match s.code() {
        tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Aborted => {
            TransportError::PeerClosed
        }
        tonic::Code::DeadlineExceeded => TransportError::Timeout(Duration::ZERO),
        _ => TransportError::middleware("tonic", "a call", s),
    }
}

enum ClientEnd {
    /// One unary call per message; its reply is the next message received.
    Unary {
        client: BenchClient<Channel>,
        pending: Option<tokio::task::JoinHandle<Result<Response<Frame>, Status>>>,
    },
    /// A client stream: messages go one way.
    Push {
        out: mpsc::Sender<Frame>,
        call: tokio::task::JoinHandle<Result<Response<Done>, Status>>,
    },
    /// A stream the server writes (a subscriber), with one the client writes (bidirectional).
    Streams {
        out: Option<mpsc::Sender<Frame>>,
        inbound: Streaming<Frame>,
    },
}

struct GrpcEndpoint {
    timeout: Duration,
    /// Every peer is watched by msgperf (`ChannelSpec::watched`): a writer waiting for room
    /// needs no timer of its own.
    watched: bool,
    server: Option<Server>,
    /// A unary call's reply, owed by the serving end.
    reply: Option<oneshot::Sender<Bytes>>,
    client: Option<ClientEnd>,
}

impl Drop for GrpcEndpoint {
    fn drop(&mut self) {
        self.reply.take();
        match self.client.take() {
            Some(ClientEnd::Unary {
                pending: Some(call),
                ..
            }) => call.abort(),
            Some(ClientEnd::Push { out, call }) => {
                // The stream ends, and its last messages are delivered before the call returns.
                drop(out);
                let _ = wait(Duration::from_secs(1), call);
            }
            _ => {}
        }
    }
}

impl GrpcEndpoint {
    /// The next message, handed to `take` where tonic delivered it, waiting at most `timeout`
    /// (zero: only what is there now).
    fn next(
        &mut self,
        take: &mut Take,
        timeout: Duration,
    ) -> Result<Option<usize>, TransportError> {
        let Some(server) = &mut self.server else {
            return self.next_reply(take, timeout);
        };
        let mut left = timeout;
        if server.stream.is_none() {
            match sent_by_client(server, timeout)? {
                Some(Incoming::Stream(stream, done)) => server.stream = Some((stream, done)),
                Some(Incoming::Request(data, reply)) => {
                    self.reply = Some(reply);
                    return take(&data).map(Some);
                }
                Some(Incoming::Message(data)) => return take(&data).map(Some),
                None => return Ok(None),
            }
            // The wait went to the stream's call: its first message is read if it is there,
            // else on the next slice of the wait (`next_within`).
            left = Duration::ZERO;
        }
        let (stream, _) = server.stream.as_mut().expect("a client stream");
        let got = from_stream(stream, server.own.as_ref(), take, left);
        if matches!(got, Err(TransportError::PeerClosed)) {
            // The client ended its stream: its call returns.
            server.stream = None;
        }
        got
    }

    /// The next message a client end gets from the server it calls (a reply, a stream's).
    fn next_reply(
        &mut self,
        take: &mut Take,
        timeout: Duration,
    ) -> Result<Option<usize>, TransportError> {
        let limit = self.timeout;
        match self.client.as_mut() {
            Some(ClientEnd::Unary { pending, .. }) => {
                let Some(call) = pending else {
                    return Err(TransportError::Unsupported(
                        "grpc: a reply was read before its request was sent".into(),
                    ));
                };
                if timeout.is_zero() && !call.is_finished() {
                    return Ok(None);
                }
                let call = pending.take().expect("a pending call");
                let r = wait(timeout.max(limit), call)?
                    .map_err(|e| TransportError::middleware("tonic", "a call", e))?
                    .map_err(status)?;
                take(&r.into_inner().data).map(Some)
            }
            Some(ClientEnd::Streams { inbound, .. }) => match wait(timeout, inbound.message()) {
                Err(TransportError::Timeout(_)) if timeout.is_zero() => Ok(None),
                Err(e) => Err(e),
                Ok(Ok(Some(f))) => take(&f.data).map(Some),
                Ok(Ok(None)) => Err(TransportError::PeerClosed),
                Ok(Err(s)) => Err(status(s)),
            },
            Some(ClientEnd::Push { .. }) | None => Err(TransportError::Unsupported(
                "grpc: this end only writes (a client stream)".into(),
            )),
        }
    }
}

/// What a client sent to a serving end, waiting at most `timeout`; None if `timeout` is zero
/// and nothing is there now.
fn sent_by_client(
    server: &mut Server,
    timeout: Duration,
) -> Result<Option<Incoming>, TransportError> {
    // What is queued is taken without a timed wait (which costs a timer).
    let got = match server.inbound.try_recv() {
        Ok(m) => Some(m),
        Err(mpsc::error::TryRecvError::Disconnected) => None,
        // On an end's own runtime its connections run only now: they take what their sockets
        // hold.
        Err(mpsc::error::TryRecvError::Empty) if timeout.is_zero() => {
            match server
                .own
                .as_ref()
                .and_then(|own| own.now(server.inbound.recv()))
            {
                Some(m) => m,
                None => return Ok(None),
            }
        }
        Err(mpsc::error::TryRecvError::Empty) => {
            wait_on(server.own.as_ref(), timeout, server.inbound.recv())?
        }
    };
    got.map(Some).ok_or(TransportError::PeerClosed)
}

/// The next message of a client stream, handed to `take` where tonic decoded it, waiting at
/// most `timeout` (zero: only what is there now).
fn from_stream(
    stream: &mut Streaming<Frame>,
    own: Option<&Local>,
    take: &mut Take,
    timeout: Duration,
) -> Result<Option<usize>, TransportError> {
    use std::task::{Context, Poll, Waker};
    use tokio_stream::Stream;
    // What tonic has decoded already is taken with no turn of the runtime (which costs more
    // than the message).
    let polled =
        std::pin::Pin::new(&mut *stream).poll_next(&mut Context::from_waker(Waker::noop()));
    let ready = match polled {
        Poll::Ready(got) => Some(got.transpose()),
        Poll::Pending if timeout.is_zero() => match own.and_then(|own| own.now(stream.message())) {
            Some(got) => Some(got),
            None => return Ok(None),
        },
        Poll::Pending => None,
    };
    let got = match ready {
        Some(got) => got,
        None => wait_on(own, timeout, stream.message())?,
    };
    match got {
        Ok(Some(f)) => take(&f.data).map(Some),
        Ok(None) => Err(TransportError::PeerClosed),
        Err(s) => Err(status(s)),
    }
}

impl Endpoint for GrpcEndpoint {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let (timeout, watched) = (self.timeout, self.watched);
        let data = Bytes::copy_from_slice(msg);
        if let Some(reply) = self.reply.take() {
            return reply.send(data).map_err(|_| TransportError::PeerClosed);
        }
        if let Some(server) = &self.server {
            let subscribers: Vec<Outgoing> = server.subscribers.lock().unwrap().clone();
            if subscribers.is_empty() {
                // A channel's way back: the client's bidirectional stream.
                return match wait(timeout, server.outbound.send(Ok(Frame { data })))? {
                    Ok(()) => Ok(()),
                    Err(_) => Err(TransportError::PeerClosed),
                };
            }
            // A topic: the same bytes into every subscriber's stream. One whose stream closed
            // (its subscriber died) is left out from then on, as a copied fan-out does: the
            // others keep getting every message, and the END (the runner reports the death).
            let mut delivered = 0;
            let mut gone = Vec::new();
            for s in &subscribers {
                match wait(timeout, s.send(Ok(Frame { data: data.clone() })))? {
                    Ok(()) => delivered += 1,
                    Err(_) => gone.push(s.clone()),
                }
            }
            if !gone.is_empty() {
                server
                    .subscribers
                    .lock()
                    .unwrap()
                    .retain(|s| !gone.iter().any(|g| g.same_channel(s)));
            }
            return match delivered {
                0 => Err(TransportError::PeerClosed),
                _ => Ok(()),
            };
        }
        match self.client.as_mut() {
            Some(ClientEnd::Unary { client, pending }) => {
                if let Some(call) = pending.take() {
                    call.abort();
                }
                let mut c = client.clone();
                *pending = Some(runtime().spawn(async move { c.call(Frame { data }).await }));
                Ok(())
            }
            Some(ClientEnd::Push { out, .. }) | Some(ClientEnd::Streams { out: Some(out), .. }) => {
                // Into the queue at once if it has room: a timed wait costs a timer.
                match out.try_send(Frame { data }) {
                    Ok(()) => Ok(()),
                    // A watched end waits for room with no timer: msgperf ends it if its
                    // reader stops.
                    Err(mpsc::error::TrySendError::Full(frame)) if watched => out
                        .blocking_send(frame)
                        .map_err(|_| TransportError::PeerClosed),
                    Err(mpsc::error::TrySendError::Full(frame)) => {
                        match wait(timeout, out.send(frame))? {
                            Ok(()) => Ok(()),
                            Err(_) => Err(TransportError::PeerClosed),
                        }
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => Err(TransportError::PeerClosed),
                }
            }
            Some(ClientEnd::Streams { out: None, .. }) | None => Err(TransportError::Unsupported(
                "grpc: a subscriber only reads".into(),
            )),
        }
    }

    reads_in_place!();
}
