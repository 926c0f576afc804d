//! gRPC's floor: the plainest tonic loops over the same service, runtime and settings, and
//! nothing of msgperf: unary calls that a server answers with the request itself (ping-pong),
//! and a client stream that the server counts as it arrives (a stream). The serving side writes
//! its address into a small memory file that both sides share; the client reads it.

use super::proto::bench_server::Bench;
use super::proto::{Done, Frame, Hello};
use super::{connect, runtime, serve, Local};
use crate::sys;
use crate::transport::floor::{
    measure_round_trips, FloorFigure, FloorLoop, FloorRun, Notes, NotesFloor, ReadWindow,
};
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

pub struct GrpcFloor;

/// Lines of the shared notes: the server's address, the client's end.
const ADDRESS: u64 = 0;
const DONE: u64 = 1;

/// How often a ping-pong's server looks at the notes for the client's end.
const LOOK: Duration = Duration::from_millis(20);

/// The floor's server: echoes calls, counts a client stream.
struct Plain {
    warmup: Duration,
    figure: Arc<Mutex<Option<oneshot::Sender<FloorFigure>>>>,
    size: usize,
}

#[tonic::async_trait]
impl Bench for Plain {
    async fn call(&self, req: Request<Frame>) -> Result<Response<Frame>, Status> {
        Ok(Response::new(req.into_inner()))
    }

    async fn push(&self, req: Request<Streaming<Frame>>) -> Result<Response<Done>, Status> {
        let mut s = req.into_inner();
        let mut window = ReadWindow::new(self.warmup);
        while let Ok(Some(f)) = s.message().await {
            if f.data.len() <= 1 {
                break;
            }
            window.read();
        }
        let figure = window.figure(self.size);
        if let Some(tx) = self.figure.lock().unwrap().take() {
            let _ = tx.send(figure);
        }
        Ok(Response::new(Done {}))
    }

    type ExchangeStream = ReceiverStream<Result<Frame, Status>>;

    async fn exchange(
        &self,
        _: Request<Streaming<Frame>>,
    ) -> Result<Response<Self::ExchangeStream>, Status> {
        Err(Status::unimplemented("not in the floor"))
    }

    type SubscribeStream = ReceiverStream<Result<Frame, Status>>;

    async fn subscribe(
        &self,
        _: Request<Hello>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        Err(Status::unimplemented("not in the floor"))
    }
}

impl NotesFloor for GrpcFloor {
    fn run_with(&self, run: FloorRun, notes: Notes) -> std::io::Result<Option<FloorFigure>> {
        let (l, side, size, roles, stop) = (run.kind, run.side, run.size, run.roles, run.stop);
        let spec = roles.spec(size, Notes::WAIT);
        let io = |e: crate::transport::TransportError| std::io::Error::other(e.to_string());
        // Ping-pong: side 0 calls, side 1 serves. A stream: side 1 writes, side 0 serves and
        // measures.
        let serves = (l == FloorLoop::PingPong) == (side == 1);
        if serves {
            let (tx, figure) = oneshot::channel();
            let plain = Plain {
                warmup: roles.warmup,
                figure: Arc::new(Mutex::new(Some(tx))),
                size,
            };
            let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
            notes.put(ADDRESS, &listener.local_addr()?.to_string())?;
            // The server runs its connections on this thread, as msgperf's stream reader and
            // responder do.
            let own = Local::new()?;
            let (stop_tx, stopped) = oneshot::channel::<()>();
            let mut server = serve(Some(&own), listener, plain, size, stopped)?;
            let bound = roles.warmup + roles.duration + Notes::WAIT;
            let got = if l == FloorLoop::Stream {
                own.wait(bound, figure).ok().and_then(Result::ok)
            } else {
                // Serve until the client's end (a one-byte call) or the loop's time is up,
                // looking at the notes between turns of the runtime.
                let end = sys::monotonic_ns() + bound.as_nanos() as u64;
                while sys::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                    if own.wait(LOOK, &mut server).is_ok() || notes.get(DONE)?.is_some() {
                        break;
                    }
                }
                None
            };
            let _ = stop_tx.send(());
            if !server.is_finished() {
                let _ = own.wait(Duration::from_secs(1), server);
            }
            return match (l, got) {
                (FloorLoop::Stream, None) => {
                    Err(std::io::Error::other("the grpc floor's stream never ended"))
                }
                (_, got) => Ok(got),
            };
        }
        let at = notes.wait(ADDRESS, Notes::WAIT)?;
        let mut client = connect(&at, &spec).map_err(io)?;
        let data = Bytes::from(vec![7u8; size]);
        match l {
            FloorLoop::PingPong => {
                let f = measure_round_trips(roles, stop, || {
                    runtime()
                        .block_on(client.call(Frame {
                            data: Bytes::copy_from_slice(&data),
                        }))
                        .is_ok_and(|r| r.into_inner().data.len() == size)
                });
                // Tell the server's side it may stop.
                notes.put(DONE, "yes")?;
                f.map(Some)
            }
            FloorLoop::Stream => {
                let (tx, rx) = mpsc::channel(super::QUEUE);
                let call =
                    runtime().spawn(async move { client.push(ReceiverStream::new(rx)).await });
                run.write_stream(|| {
                    let data = Bytes::copy_from_slice(&data);
                    tx.blocking_send(Frame { data }).is_ok()
                });
                let _ = tx.blocking_send(Frame {
                    data: Bytes::from_static(&[0]),
                });
                drop(tx);
                let _ = super::wait(Notes::WAIT, call);
                Ok(None)
            }
        }
    }
}
